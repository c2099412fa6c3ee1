//! What a new user hits in the first hour (issue 16): ports that do not
//! fit, output paths checked before the work, errors that name their cause
//! once, `sim` flags that make no sense, one set of cluster flags, headers
//! that read as sentences, a benchmark that keeps to keys of its own, and
//! figures named as the docs name them.

use crate::common;

use common::{cluster_config, free_ports, running_cluster};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway")).args(args).stdin(Stdio::null()).output().expect("the binary runs")
}

/// Runs the command, killing it after `limit` (a command that should have
/// refused its flags may instead serve forever); returns its output and
/// whether it had to be killed.
fn causeway_within(args: &[&str], limit: Duration) -> (Output, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = Instant::now() + limit;
    let mut killed = false;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), killed)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn text(o: &Output) -> String {
    format!("{}\n{}", stdout(o), stderr(o))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-first-hour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn no_panic(o: &Output) {
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
}

// Item 4.

#[test]
fn dev_refuses_client_ports_past_65535_and_names_the_range_it_needs() {
    let (out, killed) = causeway_within(&["dev", "--port", "65534"], Duration::from_secs(20));
    assert!(!killed, "dev started serving: {}", text(&out));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = stderr(&out);
    assert!(e.contains("65534–65536"), "the ports 3 DCs need: {e}");
    assert!(e.contains("65533"), "the highest first port that fits: {e}");
    assert!(!e.contains("in use"), "{e}");

    let (out, killed) = causeway_within(&["dev", "--dcs", "2", "--port", "65535"], Duration::from_secs(20));
    assert!(!killed && out.status.code() == Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("65535–65536"), "{}", stderr(&out));

    // The metrics endpoint may not take a DC's client port.
    let (out, killed) =
        causeway_within(&["dev", "--port", "7300", "--metrics", "127.0.0.1:7301"], Duration::from_secs(20));
    assert!(!killed && out.status.code() == Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("7300–7302"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--metrics"), "{}", stderr(&out));
    no_panic(&out);
}

// Item 6.

/// A path whose directory cannot be created: it lies under a file.
fn unwritable(name: &str) -> String {
    let file = scratch("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    file.join(name).to_str().unwrap().to_string()
}

#[test]
fn output_paths_are_checked_before_the_work_starts() {
    let bad = unwritable("out.json");
    let long = ["--duration", "60", "--warmup", "0", "--dcs", "1", "--partitions", "1", "--wan", "off"];
    let runs: Vec<Vec<&str>> = vec![
        vec!["sim", "--txns", "20000", "--history", &bad],
        [&["bench", "--json", &bad][..], &long].concat(),
        [&["bench", "--history", &bad][..], &long].concat(),
        vec!["demo", "--duration", "60", "--dcs", "1", "--partitions", "1", "--wan", "off", "--history", &bad],
        [
            &["sweep", "--protocols", "wren", "--clients", "1", "--dcs", "1", "--partitions", "1", "--out", &bad][..],
            &long[..4],
        ]
        .concat(),
    ];
    for args in runs {
        let started = Instant::now();
        let (out, killed) = causeway_within(&args, Duration::from_secs(45));
        assert!(!killed, "{args:?} ran its workload first: {}", text(&out));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(stderr(&out).contains(&bad), "{args:?} should name the path: {}", stderr(&out));
        assert!(stderr(&out).contains("Not a directory"), "{args:?} should say why: {}", stderr(&out));
        for work in ["transactions", "throughput", "committed"] {
            assert!(!stdout(&out).contains(work), "{args:?} did work first: {}", stdout(&out));
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{args:?} took {:?}", started.elapsed());
        no_panic(&out);
    }

    // `plot` checks where it draws before it draws.
    let sweep = repo().join("docs/figures/data/default");
    let out = causeway(&["plot", sweep.to_str().unwrap(), "--out", &bad]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains(&bad), "{}", stderr(&out));
}

#[test]
fn an_output_file_is_not_left_behind_when_the_run_fails() {
    // The report is created before the run (to check the path), and removed
    // again when the run fails before writing it: here, no server runs.
    let ports = free_ports(4);
    let config = scratch("nobody.toml");
    std::fs::write(&config, cluster_config(&ports)).unwrap();
    let path = scratch("never.json");
    let out = causeway(&["bench", "--config", config.to_str().unwrap(), "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!path.exists(), "an empty report was left behind");
}

// Item 7.

fn times(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn errors_name_their_cause_once() {
    let dir = scratch("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let out = causeway(&["check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(times(&stderr(&out), "Is a directory"), 1, "{}", stderr(&out));

    // A cluster whose servers are not running: every port is closed.
    let ports = free_ports(4);
    let config = scratch("closed.toml");
    std::fs::write(&config, cluster_config(&ports)).unwrap();
    let out = causeway(&["bench", "--config", config.to_str().unwrap(), "--duration", "1", "--warmup", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(times(&stderr(&out), "refused"), 1, "{}", stderr(&out));

    let addr = format!("127.0.0.1:{}", ports[1]);
    let out = causeway(&["shell", "--connect", &addr]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(times(&stderr(&out), "refused"), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains(&addr), "{}", stderr(&out));
}

// Item 9.

#[test]
fn sim_refuses_flags_that_make_no_sense_and_says_what_it_does() {
    for (args, says) in [
        (vec!["sim", "--txns", "0"], "--txns must be at least 1"),
        (vec!["sim", "--duration-ms", "0"], "--duration-ms must be at least 1"),
        (vec!["sim", "--partitions", "8", "--partitions-per-txn", "9", "--txns", "10"], "--partitions-per-txn 9"),
        (vec!["sim", "--partitions-per-txn", "0", "--txns", "10"], "--partitions-per-txn"),
    ] {
        let out = causeway(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(stderr(&out).contains(says), "{args:?} should say {says:?}: {}", stderr(&out));
        assert!(stdout(&out).trim().is_empty(), "{args:?} printed {:?}", stdout(&out));
    }
    let out = causeway(&["sim", "--partitions", "8", "--partitions-per-txn", "9", "--txns", "10"]);
    assert!(stderr(&out).contains("8 partitions"), "{}", stderr(&out));

    // Without --txns or --duration-ms it runs 10,000 transactions: --help says so.
    let help = stdout(&causeway(&["sim", "--help"]));
    assert!(help.contains("10000 transactions"), "{help}");

    // The summary says what was cut off, and when.
    let out = causeway(&["sim", "--txns", "300", "--cut", "2:100-300", "--cut", "dc0:50-60"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("DC 2 cut off from 100 to 300 ms"), "{}", stdout(&out));
    assert!(stdout(&out).contains("DC 0 cut off from 50 to 60 ms"), "{}", stdout(&out));

    // Fewer partitions than the default 4 per transaction is not an error.
    let out = causeway(&["sim", "--partitions", "2", "--txns", "100"]);
    assert!(out.status.success(), "{}", text(&out));
}

// Item 10.

#[test]
fn every_command_that_builds_a_cluster_takes_the_same_cluster_flags() {
    for command in ["sim", "dev", "demo", "bench", "sweep"] {
        let help = stdout(&causeway(&[command, "--help"]));
        for flag in ["--wan <on|off>", "--wan-file <FILE>", "--delta-r-ms <", "--delta-g-ms <"] {
            assert!(help.contains(flag), "{command} --help lacks {flag}: {help}");
        }
        if command != "sweep" {
            for flag in ["--protocol <", "--dcs <", "--partitions <"] {
                assert!(help.contains(flag), "{command} --help lacks {flag}: {help}");
            }
        }
        if command != "dev" {
            let clients = help.split("--clients <").nth(1).unwrap_or_else(|| panic!("{command}: no --clients"));
            let next_flag = clients.lines().skip(1).position(|l| l.trim_start().starts_with('-')).unwrap();
            let text = clients.lines().take(next_flag + 1).collect::<Vec<_>>().join(" ");
            assert!(text.contains("per partition"), "{command} --clients: {text}");
        }
    }
    // sim reads --wan as the others do.
    let wan_file = repo().join("config/wan.toml");
    for args in [
        vec!["sim", "--wan", "on", "--txns", "200"],
        vec!["sim", "--wan", "off", "--dcs", "7", "--txns", "200"],
        vec!["sim", "--wan-file", wan_file.to_str().unwrap(), "--txns", "200"],
    ] {
        let out = causeway(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
    }
    let out = causeway(&["sim", "--wan", wan_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("[possible values: on, off]"), "{}", stderr(&out));
    let out = causeway(&["sim", "--wan", "off", "--wan-file", wan_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--wan-file needs --wan on"), "{}", stderr(&out));
    // Without WAN latency, DCs are near each other: the last writes reach
    // every DC sooner once the workload ends.
    let near = causeway(&["sim", "--wan", "off", "--txns", "500"]);
    let far = causeway(&["sim", "--wan", "on", "--txns", "500"]);
    let settled = |o: &Output| -> f64 {
        let s = stdout(o);
        let after = s.split("settled ").nth(1).unwrap_or_else(|| panic!("no settle time: {s}"));
        after.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(settled(&near) * 5.0 < settled(&far), "{}\n{}", stdout(&near), stdout(&far));
}

/// Every `causeway COMMAND --flag` the README and docs show is a flag that
/// command takes.
#[test]
fn the_docs_name_only_flags_the_commands_take() {
    let commands = ["sim", "check", "demo", "bench", "sweep", "plot", "server", "dev", "shell"];
    let mut help = std::collections::BTreeMap::new();
    for c in commands {
        help.insert(c, stdout(&causeway(&[c, "--help"])));
    }
    let mut docs: Vec<PathBuf> = vec![repo().join("README.md"), repo().join("config/wan.toml")];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let mut wrong = Vec::new();
    let mut seen = 0;
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in text.lines() {
            for (at, _) in line.match_indices("causeway ").chain(line.match_indices("-- ")) {
                let rest = &line[at..];
                let mut words = rest.split_whitespace().skip(1);
                let Some(command) = words.next().filter(|w| commands.contains(w)) else { continue };
                for word in words {
                    if word.starts_with('#') || word == "|" || word == "&&" {
                        break;
                    }
                    let flag = word.split('=').next().unwrap().trim_matches(['`', '[', ']', ',', ')', '(', ';', '.']);
                    if flag.starts_with("--") && flag.len() > 2 {
                        seen += 1;
                        if !help[command].contains(&format!("{flag} ")) && !help[command].contains(&format!("{flag}\n"))
                        {
                            wrong.push(format!("{}: `causeway {command} {flag}`", doc.display()));
                        }
                    }
                    if word.contains('`') {
                        break;
                    }
                }
            }
        }
    }
    assert!(seen > 50, "the docs show only {seen} flags: is the scan broken?");
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "flags the commands do not take:\n{}", wrong.join("\n"));
}

// Items 5 and 11: a running cluster of two nodes, one DC.

/// The keys and transaction ids of a history file.
fn keys_and_txids(path: &Path) -> (Vec<String>, Vec<String>) {
    let (mut keys, mut txids) = (Vec::new(), Vec::new());
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(t) = v["txid"].as_str() {
            txids.push(t.to_string());
            for op in v["ops"].as_array().unwrap() {
                keys.push(op["key"].as_str().unwrap().to_string());
            }
        } else if let Some(state) = v["state"].as_object() {
            keys.extend(state.keys().cloned());
        }
    }
    (keys, txids)
}

/// The prefix a bench run says it writes under.
fn prefix_said(out: &Output) -> String {
    let s = stdout(out);
    let line = s.lines().find(|l| l.contains("writes keys under")).unwrap_or_else(|| panic!("no prefix line: {s}"));
    line.split('"').nth(1).expect("the prefix in quotes").to_string()
}

#[test]
fn bench_against_a_running_cluster_keeps_to_keys_and_ids_of_its_own_run() {
    let ports = free_ports(4);
    let config = scratch("running.toml");
    std::fs::write(&config, cluster_config(&ports)).unwrap();
    let _servers = running_cluster(&config, &ports);
    // User data the benchmark must not touch.
    let mut shell = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["shell", "--connect", &format!("127.0.0.1:{}", ports[1])])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    shell.stdin.take().unwrap().write_all(b"begin\nwrite k0 mine\nwrite k1 mine\ncommit\n").unwrap();
    assert!(shell.wait().unwrap().success());

    let run = |history: &Path, extra: &[&str]| {
        let mut args =
            vec!["bench", "--config", config.to_str().unwrap(), "--duration", "1", "--warmup", "0", "--keys", "50"];
        args.extend_from_slice(&["--history", history.to_str().unwrap()]);
        args.extend_from_slice(extra);
        causeway(&args)
    };
    let (h1, h2, h3) = (scratch("run1.jsonl"), scratch("run2.jsonl"), scratch("run3.jsonl"));
    let first = run(&h1, &[]);
    assert!(first.status.success(), "{}", text(&first));
    // The second run's history is judged alone: the first run's writes are
    // in the cluster, but not under its keys.
    let second = run(&h2, &[]);
    assert!(second.status.success(), "a second run against the same cluster: {}", text(&second));
    assert!(stdout(&second).contains("TCC: no violations"), "{}", stdout(&second));
    let (p1, p2) = (prefix_said(&first), prefix_said(&second));
    assert!(!p1.is_empty() && p1 != p2, "{p1:?} and {p2:?}");
    let (k1, t1) = keys_and_txids(&h1);
    let (k2, t2) = keys_and_txids(&h2);
    assert!(!k1.is_empty() && k1.iter().all(|k| k.starts_with(&p1)), "{p1}: {k1:?}");
    assert!(!k2.is_empty() && k2.iter().all(|k| k.starts_with(&p2)), "{p2}: {k2:?}");
    assert!(t1.iter().all(|t| !t2.contains(t)), "transaction ids repeat across runs");

    // The prefix is the user's to choose.
    let third = run(&h3, &["--key-prefix", "mine/"]);
    assert!(third.status.success(), "{}", text(&third));
    assert_eq!(prefix_said(&third), "mine/");
    let (k3, _) = keys_and_txids(&h3);
    assert!(!k3.is_empty() && k3.iter().all(|k| k.starts_with("mine/")), "{k3:?}");

    // The user's keys are as they were.
    let dump = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["shell", "--connect", &format!("127.0.0.1:{}", ports[1])])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut dump = dump;
    dump.stdin.take().unwrap().write_all(b"ro k0 k1\n").unwrap();
    let out = dump.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("mine").count(), 2, "{}", text(&out));

    // The header says where the run goes, as a sentence.
    let header = stdout(&first).lines().next().unwrap_or_default().to_string();
    let expected = format!("causeway bench: cure on the running cluster of {} (1 DC × 2 partitions)", config.display());
    assert!(header.starts_with(&expected), "{header}");
}

#[test]
fn summary_headers_read_as_sentences() {
    let short = ["--duration", "0.3", "--warmup", "0", "--wan", "off", "--clients", "1"];
    let embedded = causeway(&[&["bench", "--dcs", "2", "--partitions", "1"][..], &short].concat());
    assert!(embedded.status.success(), "{}", text(&embedded));
    let first = stdout(&embedded).lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with(
            "causeway bench: wren on 2 DCs × 1 partition in this process, WAN emulation off, 1 client per DC,"
        ),
        "{first}"
    );
    let processes = causeway(&[&["bench", "--processes", "--dcs", "1", "--partitions", "2"][..], &short].concat());
    assert!(processes.status.success(), "{}", text(&processes));
    let first = stdout(&processes).lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with(
            "causeway bench: wren on 1 DC × 2 partitions, one server process per replica, WAN emulation off, 2 clients per DC,"
        ),
        "{first}"
    );
    let demo = causeway(&["demo", "--duration", "0.3", "--dcs", "1", "--partitions", "1", "--wan", "off"]);
    assert!(demo.status.success(), "{}", text(&demo));
    let first = stdout(&demo).lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with(
            "causeway demo: wren on 1 DC × 1 partition in this process, WAN emulation off, 2 clients per DC"
        ),
        "{first}"
    );
}

// Item 16.

/// Every figure docs/BENCHMARKS.md shows, `causeway plot` draws under that
/// name from the sweep data beside it.
#[test]
fn plot_draws_the_figures_under_the_names_the_docs_use() {
    let doc = std::fs::read_to_string(repo().join("docs/BENCHMARKS.md")).unwrap();
    let shown: std::collections::BTreeSet<String> =
        doc.split("](figures/").skip(1).map(|rest| rest[..rest.find(')').unwrap()].to_string()).collect();
    assert!(shown.len() >= 10, "{shown:?}");
    let out_root = scratch("figures");
    let mut drawn = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(repo().join("docs/figures/data")).unwrap() {
        let data = entry.unwrap().path();
        let out_dir = out_root.join(data.file_name().unwrap());
        let out = causeway(&["plot", data.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        for f in std::fs::read_dir(&out_dir).unwrap() {
            drawn.insert(f.unwrap().file_name().to_string_lossy().into_owned());
        }
    }
    let missing: Vec<_> = shown.iter().filter(|f| !drawn.contains(*f)).collect();
    assert!(missing.is_empty(), "the docs show figures plot does not draw: {missing:?}\ndrawn: {drawn:?}");
    // And the committed figures are those files.
    for f in &shown {
        assert!(repo().join("docs/figures").join(f).exists(), "docs/figures/{f} is not committed");
    }
}

/// `bench --data-dir` keeps the started cluster's logs there, with the
/// fsync mode asked for, and says so; it measures a fresh store only, and
/// `--fsync` alone (nothing on disk to sync) is refused.
#[test]
fn bench_keeps_its_logs_where_asked_and_only_in_an_empty_directory() {
    let dir = std::env::temp_dir().join(format!("causeway-bench-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let short =
        ["--duration", "0.3", "--warmup", "0", "--wan", "off", "--clients", "1", "--dcs", "1", "--partitions", "2"];
    let run = causeway(&[&["bench", "--data-dir", d, "--fsync", "batch"][..], &short].concat());
    assert!(run.status.success(), "{}", text(&run));
    let header = stdout(&run).lines().next().unwrap_or_default().to_string();
    assert!(header.ends_with(&format!("logs in {d} (fsync = batch)")), "{header}");
    assert!(std::fs::read_dir(&dir).unwrap().count() >= 2, "a log directory per replica");

    let again = causeway(&[&["bench", "--data-dir", d][..], &short].concat());
    assert!(!again.status.success());
    assert!(text(&again).contains("is not empty"), "{}", text(&again));
    let alone = causeway(&[&["bench", "--fsync", "never"][..], &short].concat());
    assert!(!alone.status.success());
    assert!(text(&alone).contains("--data-dir"), "{}", text(&alone));
    let _ = std::fs::remove_dir_all(&dir);
}
