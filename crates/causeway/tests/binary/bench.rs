//! `causeway bench`, `sweep` and `plot` as a user runs them: the JSON they
//! promise, server processes, a running cluster from a config file, read
//! waits that only a clock-waiting protocol shows, and the figures.

use crate::common;

use common::{cluster_config, free_ports, running_cluster};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway")).args(args).output().expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the report was written")).expect("the report is JSON")
}

fn f(v: &Value, path: &str) -> f64 {
    path.split('.').fold(v, |v, k| &v[k]).as_f64().unwrap_or_else(|| panic!("{path} is not a number in {v}"))
}

/// A short run of `protocol` on 2 DCs × 2 partitions; returns the report.
fn bench(protocol: &str, extra: &[&str]) -> Value {
    let name = format!("{protocol}-{}", extra.join("_").replace(['-', '/'], ""));
    bench_on(&name, protocol, "2", extra)
}

/// A short run of `protocol` on `dcs` DCs × 2 partitions, its report in
/// `{name}.json`; returns the report.
fn bench_on(name: &str, protocol: &str, dcs: &str, extra: &[&str]) -> Value {
    let path = scratch(&format!("{name}.json"));
    let mut args = vec![
        "bench",
        "--protocol",
        protocol,
        "--dcs",
        dcs,
        "--partitions",
        "2",
        "--clients",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--json",
        path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = causeway(&args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("throughput"), "{}", text(&out));
    json(&path)
}

#[test]
fn bench_reports_every_measurement_in_its_json() {
    let r = bench("wren", &["--wan", "off"]);
    assert_eq!(r["protocol"], "wren");
    assert_eq!(r["deployment"], "embedded");
    assert!(f(&r, "throughput_tps") > 0.0 && f(&r, "committed") > 0.0, "{r}");
    assert!(f(&r, "latency_mean_ms") > 0.0);
    assert!(f(&r, "latency_p50_ms") <= f(&r, "latency_p99_ms"));
    assert!(f(&r, "latency_p99_ms") <= f(&r, "latency_max_ms"));
    assert!(f(&r, "reads.slices") > 0.0);
    assert_eq!(f(&r, "reads.slices_waited"), 0.0, "Wren never waits");
    for class in ["client", "transaction", "replication", "stabilization"] {
        assert!(f(&r, &format!("traffic.bytes.{class}")) > 0.0, "{class}: {r}");
    }
    assert!(f(&r, "visibility.local.count") > 0.0 && f(&r, "visibility.remote.count") > 0.0);
    assert!(f(&r, "visibility.local.mean_ms") > 0.0);
    assert_eq!(r["visibility"]["remote"]["cdf"].as_array().map(Vec::len), Some(100));
    assert_eq!(f(&r, "metadata_bytes_per_version"), 16.0, "Wren: two timestamps");
    assert!(f(&r, "cpu.servers.user_s") > 0.0, "{r}");
    assert_eq!(f(&r, "workload.reads_per_txn"), 19.0);
}

#[test]
fn preload_makes_reads_find_values() {
    // Uniform over 20,000 keys per partition: without a preload almost
    // every read finds no version; with it, every read returns a value.
    let flags = ["--wan", "off", "--zipf", "0", "--keys", "20000", "--value-size", "32"];
    let cold = bench("wren", &flags);
    let warm = bench("wren", &[&flags[..], &["--preload"]].concat());
    let (cold_b, warm_b) = (f(&cold, "traffic.bytes_per_txn.client"), f(&warm, "traffic.bytes_per_txn.client"));
    // 19 reads, each answered with a 32-byte value instead of nothing —
    // for most of them: the cold run's own writes fill some keys too.
    assert!(warm_b > cold_b + 19.0 * 32.0 * 0.5, "client bytes per transaction: {cold_b} cold, {warm_b} preloaded");
}

#[test]
fn clock_skew_makes_cure_wait_and_not_wren() {
    let cure = bench("cure", &["--wan", "off", "--skew-ms", "20"]);
    assert!(f(&cure, "reads.slices_waited") > 0.0, "{cure}");
    assert!(f(&cure, "reads.wait_mean_ms") > 0.0);
    assert!(f(&cure, "reads.txns_waited_share") > 0.0 && f(&cure, "reads.txns_waited_share") <= 1.0);
    let wren = bench("wren", &["--wan", "off", "--skew-ms", "20"]);
    assert_eq!(f(&wren, "reads.slices_waited"), 0.0, "{wren}");
    assert_eq!(f(&wren, "reads.txns_waited_share"), 0.0);
}

#[test]
fn bench_runs_each_replica_as_a_server_process_and_checks_its_history() {
    let history = scratch("processes.jsonl");
    let r = bench("wren", &["--processes", "--history", history.to_str().unwrap()]);
    assert_eq!(r["deployment"], "processes");
    assert_eq!(r["tls"], false, "plain TCP unless --tls: {r}");
    assert!(f(&r, "committed") > 0.0);
    assert!(f(&r, "cpu.servers.user_s") > 0.0 && f(&r, "cpu.clients.user_s") > 0.0, "{r}");
    assert!(f(&r, "visibility.remote.mean_ms") > 30.0, "WAN emulation is on: {r}");
    let check = causeway(&["check", history.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check));
}

/// Over TLS (links and clients): the run, the final dumps and the history's
/// check all go through it.
#[test]
fn bench_runs_server_processes_over_tls_and_checks_its_history() {
    let history = scratch("processes-tls.jsonl");
    let r = bench("wren", &["--processes", "--tls", "--wan", "off", "--history", history.to_str().unwrap()]);
    assert_eq!(r["deployment"], "processes");
    assert_eq!(r["tls"], true, "the cluster started serves its clients over TLS: {r}");
    assert!(f(&r, "committed") > 0.0);
    assert!(f(&r, "traffic.messages.replication") > 0.0, "the DCs replicated to each other over TLS: {r}");
    let check = causeway(&["check", history.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check));
}

/// More clients than a node takes by default ([connections] max_clients =
/// 1024): the harness raises the bound for the clusters it starts.
#[test]
fn bench_runs_more_clients_than_the_default_connection_bound() {
    let out = causeway(&[
        "bench",
        "--dcs",
        "1",
        "--partitions",
        "2",
        "--clients-per-dc",
        "1100",
        "--wan",
        "off",
        "--duration",
        "0.5",
        "--warmup",
        "0.2",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("0 errors"), "{}", text(&out));
}

#[test]
fn bench_measures_a_running_cluster_from_its_config_file() {
    let ports = free_ports(4);
    let config = scratch("running.toml");
    std::fs::write(&config, cluster_config(&ports)).unwrap();
    let _servers = running_cluster(&config, &ports);
    let path = scratch("running.json");
    let out = causeway(&[
        "bench",
        "--config",
        config.to_str().unwrap(),
        "--duration",
        "1",
        "--warmup",
        "0",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = json(&path);
    assert_eq!(r["deployment"], "config");
    assert_eq!(r["protocol"], "cure", "the cluster's protocol, not the default");
    assert_eq!((f(&r, "dcs"), f(&r, "partitions")), (1.0, 2.0));
    assert!(f(&r, "committed") > 0.0);
    assert_eq!(f(&r, "metadata_bytes_per_version"), 8.0, "Cure: one timestamp per DC");
}

fn png(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x89PNG\r\n\x1a\n") && b.len() > 5_000)
}

fn svg(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains("<svg") && s.contains("wren"))
}

/// A sweep of half-second runs with `args` into `dir`; its reports.
fn short_sweep(dir: &Path, args: &[&str]) -> Value {
    let out_dir = dir.to_str().unwrap();
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--duration", "0.5", "--warmup", "0.2", "--out", out_dir]);
    let out = causeway(&all);
    assert!(out.status.success(), "{}", text(&out));
    json(&dir.join("sweep.json"))
}

#[test]
fn sweep_runs_a_series_and_draws_the_papers_figures() {
    let dir = scratch("sweep");
    let reports =
        short_sweep(&dir, &["--protocols", "wren,ec", "--clients", "1,2", "--dcs", "2", "--partitions", "1,2"]);
    assert_eq!(reports.as_array().map(Vec::len), Some(8), "2 protocols × 2 loads × 2 sizes");
    assert!(dir.join("runs/wren-2dc-2p-19r1w-4cpd.json").exists(), "2 clients per partition × 2 partitions");
    for stem in [
        "fig3a-throughput-latency-1p",
        "fig3a-throughput-latency-2p",
        "fig3b-read-wait-2p",
        "fig6-scaling",
        "fig7a-bytes",
        "fig7b-visibility",
    ] {
        assert!(png(&dir.join(format!("{stem}.png"))), "{stem}.png");
        assert!(svg(&dir.join(format!("{stem}.svg"))), "{stem}.svg");
    }
    std::fs::remove_file(dir.join("fig6-scaling.png")).unwrap();
    let again = causeway(&["plot", dir.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(png(&dir.join("fig6-scaling.png")), "plot draws the figures again");
}

#[test]
fn a_partial_replication_sweep_draws_the_paris_papers_figures() {
    let dir = scratch("sweep-paris");
    let reports = short_sweep(
        &dir,
        &[
            "--protocols",
            "paris,bpr",
            "--replication",
            "2",
            "--dcs",
            "3",
            "--partitions",
            "3",
            "--clients",
            "1",
            "--locality",
            "100:0,95:5,50:50",
            "--wan",
            "off",
        ],
    );
    let reports = reports.as_array().expect("an array");
    assert_eq!(reports.len(), 6, "2 protocols × 3 localities");
    let shares: Vec<f64> = reports.iter().map(|r| f(&r["workload"], "multi_dc_fraction")).collect();
    assert_eq!(shares, [0.0, 0.0, 0.05, 0.05, 0.5, 0.5], "each run at its own locality, in order");
    assert!(dir.join("runs/bpr-3dc-3p-r2-local50-19r1w-3cpd.json").exists(), "runs named by R and locality");
    let drawn = |stem: &str| {
        png(&dir.join(format!("{stem}.png")))
            && std::fs::read_to_string(dir.join(format!("{stem}.svg"))).is_ok_and(|s| s.contains("bpr"))
    };
    for stem in [
        "paris-fig1-throughput-latency-local100",
        "paris-fig1-throughput-latency-local95",
        "paris-fig1-throughput-latency-local50",
        "paris-blocking-local50",
        "paris-fig3a-locality-throughput",
        "paris-fig3b-locality-latency",
        "paris-fig4-visibility-local95",
    ] {
        assert!(drawn(stem), "{stem}.png and .svg, with both protocols");
    }
    assert!(!dir.join("fig3a-throughput-latency.png").exists(), "no Wren-paper names for partial replication");
}

/// The PrompTCC paper's figures: a sweep over zipf exponents of its
/// transactions, EC beside each protocol (the figures divide by EC's).
#[test]
fn a_promptcc_workload_sweep_draws_its_papers_figures_normalized_to_ec() {
    let dir = scratch("sweep-promptcc");
    let reports = short_sweep(
        &dir,
        &[
            "--protocols",
            "ec,promptcc,eiger",
            "--workload",
            "promptcc",
            "--dcs",
            "1",
            "--partitions",
            "2",
            "--clients",
            "2",
            "--keys",
            "1000",
            "--zipf",
            "0.5,0.99",
        ],
    );
    let reports = reports.as_array().expect("an array");
    assert_eq!(reports.len(), 6, "2 exponents × 3 protocols");
    let zipfs: Vec<f64> = reports.iter().map(|r| f(&r["workload"], "zipf")).collect();
    assert_eq!(zipfs, [0.5, 0.5, 0.5, 0.99, 0.99, 0.99], "EC beside each protocol at each exponent");
    assert!(dir.join("runs/eiger-1dc-2p-5k-w10-z99-v128-4cpd.json").exists(), "runs named by what they vary");
    for stem in ["promptcc-fig3-zipf", "promptcc-fig4-zipf-latency", "promptcc-fig3-zipf-rounds"] {
        let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap_or_default();
        assert!(png(&dir.join(format!("{stem}.png"))) && svg.contains("eiger"), "{stem}.png and .svg, with eiger");
    }
    assert!(!dir.join("fig3a-throughput-latency.png").exists(), "no Wren-paper figures for these runs");
}

/// A short Geo-SDUR run in the paper's WAN 1 placement (WAN emulation off,
/// so that a second holds many transactions); returns the report.
fn sdur_bench(name: &str, extra: &[&str]) -> Value {
    bench_on(name, "sdur", "3", &[&["--members", "2,2,1/0,0,1", "--wan", "off"][..], extra].concat())
}

/// The classes of a class-minded workload: each with its throughput and
/// latency distribution in the JSON, the summary printing a line each.
fn assert_classes(r: &Value, classes: &[&str]) {
    let mut committed = 0.0;
    for class in classes {
        let c = &r["txn_classes"][class];
        assert!(f(c, "throughput_tps") > 0.0 && f(c, "committed") > 0.0, "{class}: {r}");
        assert!(f(c, "latency.mean_ms") > 0.0, "{class}");
        assert!(f(c, "latency.p50_ms") <= f(c, "latency.p99_ms"), "{class}");
        assert!(f(c, "latency.p99_ms") <= f(c, "latency.max_ms"), "{class}");
        assert_eq!(c["latency"]["cdf"].as_array().map(Vec::len), Some(100), "{class}");
        assert!(!c["by_dc"].as_array().expect("by DC").is_empty(), "{class}");
        committed += f(c, "committed");
    }
    assert_eq!(committed, f(r, "committed"), "every committed transaction in one class: {r}");
    assert_eq!(r["txn_classes"].as_object().map(|o| o.len()), Some(classes.len()), "{r}");
}

#[test]
fn bench_reports_the_geo_sdur_microbenchmarks_local_and_global_transactions() {
    let history = scratch("sdur-micro.jsonl");
    let r = sdur_bench(
        "sdur-micro",
        &[
            "--workload",
            "sdur-micro",
            "--global-fraction",
            "0.5",
            "--keys",
            "5000",
            "--reorder",
            "80",
            "--history",
            history.to_str().unwrap(),
        ],
    );
    assert_eq!(r["workload"]["kind"], "sdur-micro");
    assert_eq!(f(&r["workload"], "global_fraction"), 0.5);
    assert_eq!((f(&r["workload"], "reads_per_txn"), f(&r["workload"], "value_size")), (2.0, 4.0));
    assert_eq!(r["ordered"]["members"], "2,2,1/0,0,1", "{r}");
    assert_eq!(f(&r["ordered"], "reorder_threshold"), 80.0);
    assert_classes(&r, &["local", "global"]);
    // About half global, by count of commits.
    let (l, g) = (f(&r, "txn_classes.local.committed"), f(&r, "txn_classes.global.committed"));
    assert!(g > 0.25 * (l + g) && g < 0.75 * (l + g), "{l} local, {g} global");
    let check = causeway(&["check", history.to_str().unwrap()]);
    assert!(check.status.success(), "serializable: {}", text(&check));
    assert!(text(&check).contains("model: serializable"), "judged by its meta line: {}", text(&check));
}

/// The social network through the client library: a timeline's second read
/// and a post's or a follow's writes follow from what it read, and the
/// history of it all is serializable.
#[test]
fn bench_runs_the_geo_sdur_social_network_and_checks_its_history() {
    let history = scratch("social.jsonl");
    let r = sdur_bench("social", &["--workload", "social", "--users", "200", "--history", history.to_str().unwrap()]);
    assert_eq!(r["workload"]["kind"], "social");
    assert_classes(&r, &["timeline", "post", "follow-local", "follow-global"]);
    let timelines = f(&r, "txn_classes.timeline.committed");
    assert!(timelines > 5.0 * f(&r, "txn_classes.post.committed"), "85 % timelines: {r}");
    let check = causeway(&["check", history.to_str().unwrap()]);
    assert!(check.status.success(), "serializable: {}", text(&check));
    assert!(text(&check).contains("model: serializable"), "judged by its meta line: {}", text(&check));
    let lines = std::fs::read_to_string(&history).unwrap();
    assert!(lines.contains("u0.") && lines.contains("u1."), "both partitions' list keys in the history");
}

/// The Geo-SDUR paper's figures from a sweep of tiny runs: its placements,
/// global fractions, delays and two rounds; the social network's with and
/// without reordering drawn together by `plot`.
#[test]
fn a_geo_sdur_sweep_draws_the_papers_figures() {
    let micro = scratch("sweep-sdur");
    let common = ["--protocols", "sdur", "--dcs", "3", "--partitions", "2", "--clients", "1", "--wan", "off"];
    let reports = short_sweep(
        &micro,
        &[
            &common[..],
            &["--members", "2,2,1/0,0,1", "--workload", "sdur-micro", "--keys", "1000"],
            &["--global-fraction", "0,0.5", "--delay-ms", "0,20", "--rounds", "2"],
        ]
        .concat(),
    );
    let reports = reports.as_array().expect("an array");
    assert_eq!(reports.len(), 2 * 2 * 2, "2 delays × 2 fractions × 2 rounds");
    let rounds: Vec<f64> = reports.iter().map(|r| f(r, "round")).collect();
    assert_eq!(rounds, [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0], "round after round");
    assert!(micro.join("runs/sdur-3dc-2p-wan1-micro-g50-r0-d20-2cpd-round2.json").exists(), "runs named by setting");
    let social = scratch("sweep-social");
    let reports = short_sweep(
        &social,
        &[&common[..], &["--members", "0,1,2/0,1,2", "--workload", "social", "--users", "100", "--reorder", "0,80"]]
            .concat(),
    );
    assert_eq!(reports.as_array().map(Vec::len), Some(2));
    let both = scratch("sweep-sdur-plot");
    let plot = causeway(&["plot", micro.to_str().unwrap(), social.to_str().unwrap(), "--out", both.to_str().unwrap()]);
    assert!(plot.status.success(), "{}", text(&plot));
    for (stem, says) in
        [("sdur-fig2-wan1", "locals"), ("sdur-fig3-delay-wan1", "D = 20 ms"), ("sdur-fig6-social-wan2", "R = 80")]
    {
        let svg = std::fs::read_to_string(both.join(format!("{stem}.svg"))).unwrap_or_default();
        assert!(png(&both.join(format!("{stem}.png"))) && svg.contains(says), "{stem}.png and .svg, with {says:?}");
    }
    assert!(!both.join("fig3a-throughput-latency.png").exists(), "no Wren-paper figures for these runs");
}

#[test]
fn bench_and_sweep_refuse_bad_flags_with_a_message() {
    for (args, says) in [
        (vec!["bench", "--clients", "0"], "--clients"),
        (vec!["bench", "--duration", "0"], "--duration"),
        (vec!["bench", "--zipf=-1"], "--zipf"),
        (vec!["bench", "--wan", "off", "--wan-file", "x.toml"], "--wan-file needs --wan on"),
        (vec!["bench", "--config", "/nonexistent/cluster.toml"], "cannot read"),
        (vec!["bench", "--processes", "--config", "x.toml"], "cannot be used with"),
        (vec!["bench", "--tls"], "--processes"),
        (vec!["sweep", "--mix", "19"], "READS:WRITES"),
        (vec!["sweep", "--protocols", "paxos"], "paxos"),
        (vec!["sweep", "--locality", "100:0,50:50"], "give --replication R below every --dcs"),
        (
            vec!["sweep", "--locality", "100:0,50:50", "--replication", "2", "--dcs", "2,3", "--protocols", "paris"],
            "at 2 DCs every DC would hold every partition",
        ),
        (vec!["bench", "--locality", "100:0,50:50"], "a list is for `causeway sweep`"),
        (vec!["bench", "--zipf", "0.5,0.99"], "--zipf: a run has one"),
        (vec!["sweep", "--keys-per-txn", "2,8"], "give --workload promptcc"),
        (vec!["plot", "/nonexistent"], "cannot read"),
        (vec!["bench", "--preload", "--history", "h.jsonl"], "--preload cannot go with --history"),
        (vec!["bench", "--reads", "129"], "--reads must be at most 128"),
        (vec!["bench", "--workload", "sdur-micro", "--partitions", "1"], "needs two partitions"),
        (
            vec!["bench", "--workload", "sdur-micro", "--global-fraction", "1.5"],
            "--global-fraction must be between 0 and 1",
        ),
        (vec!["bench", "--workload", "social", "--preload"], "--preload does not apply"),
        (vec!["sweep", "--global-fraction", "0,0.1"], "give --workload sdur-micro"),
        (vec!["sweep", "--reorder", "0,80"], "give --protocols sdur"),
    ] {
        let out = causeway(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?} should say {says:?}: {}", text(&out));
    }
}
