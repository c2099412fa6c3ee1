//! The `causeway` command as a user meets it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway")).args(args).output().expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn sim_runs_checks_and_writes_a_history_that_check_accepts() {
    let path = scratch("sim.jsonl");
    let out =
        causeway(&["sim", "--txns", "600", "--seed", "7", "--cut", "2:100-300", "--history", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("reads waited   0 of"), "{text}");
    assert!(text.contains("TCC: no violations"), "{text}");
    let check = causeway(&["check", path.to_str().unwrap()]);
    assert!(check.status.success(), "{}", stdout(&check));
    assert_eq!(check.status.code(), Some(0));
}

#[test]
fn sim_runs_every_protocol_and_reports_waits_and_bytes() {
    for protocol in ["wren", "cure", "h-cure", "ec", "paris", "bpr"] {
        let out = causeway(&["sim", "--protocol", protocol, "--txns", "400", "--seed", "3"]);
        let text = stdout(&out);
        assert!(out.status.success(), "{protocol}:\n{text}\n{}", stderr(&out));
        assert!(text.starts_with(&format!("{protocol} on 3 DCs")), "{text}");
        assert!(text.contains("bytes sent     client"), "{text}");
        assert!(text.contains("bytes of metadata each"), "{text}");
        match protocol {
            "ec" => assert!(text.contains("as expected: this protocol does not promise TCC"), "{text}"),
            _ => assert!(text.contains("TCC: no violations"), "{text}"),
        }
    }
    let out = causeway(&["sim", "--protocol", "paxos", "--txns", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("h-cure"), "{}", stderr(&out));
}

/// PaRiS on partial replication: the history's final lines say each DC
/// holds only some partitions, and `check` judges it as such.
#[test]
fn sim_runs_paris_on_partial_replication_and_check_accepts_its_history() {
    let path = scratch("paris.jsonl");
    let args = ["sim", "--protocol", "paris", "--replication", "2", "--partitions", "6", "--txns", "500"];
    let out = causeway(&[&args[..], &["--history", path.to_str().unwrap()]].concat());
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.starts_with("paris on 3 DCs x 6 partitions, R = 2"), "{text}");
    assert!(text.contains("reads waited   0 of"), "{text}");
    assert!(text.contains("TCC: no violations"), "{text}");
    let history = std::fs::read_to_string(&path).unwrap();
    let finals: Vec<&str> = history.lines().filter(|l| l.contains(r#""type":"final""#)).collect();
    assert_eq!(finals.len(), 3, "{history}");
    assert!(finals.iter().all(|l| l.contains(r#""partial":true"#)), "{finals:?}");
    let check = causeway(&["check", path.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
}

#[test]
fn sim_with_the_same_seed_writes_the_same_history() {
    let (a, b) = (scratch("a.jsonl"), scratch("b.jsonl"));
    for p in [&a, &b] {
        let out =
            causeway(&["sim", "--txns", "300", "--seed", "11", "--skew-ms", "30", "--history", p.to_str().unwrap()]);
        assert!(out.status.success());
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn check_rejects_a_fractured_read_with_exit_status_1() {
    let path = scratch("fractured.jsonl");
    let lines = [
        r#"{"txid":"w","session":"s1","seq":1,"dc":0,"status":"committed","ops":[{"op":"w","key":"x","value":"w:x"},{"op":"w","key":"y","value":"w:y"}],"commit_ts":[10,0,1],"start_us":0,"end_us":1}"#,
        r#"{"txid":"r","session":"s2","seq":1,"dc":0,"status":"committed","ops":[{"op":"r","key":"x","value":"w:x"},{"op":"r","key":"y","value":null}],"start_us":2,"end_us":3}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = causeway(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("fractured"), "{}", stdout(&out));
}

/// Write skew: a and b each read x and y (nothing there yet) and each wrote
/// the key the other read. TCC allows it; no serial order explains it.
const WRITE_SKEW: [&str; 2] = [
    r#"{"txid":"a","session":"s1","seq":1,"status":"committed","ops":[{"op":"r","key":"x","value":null},{"op":"r","key":"y","value":null},{"op":"w","key":"x","value":"a:x"}],"commit_ts":[10,0,1]}"#,
    r#"{"txid":"b","session":"s2","seq":1,"status":"committed","ops":[{"op":"r","key":"x","value":null},{"op":"r","key":"y","value":null},{"op":"w","key":"y","value":"b:y"}],"commit_ts":[11,1,2]}"#,
];

#[test]
fn check_judges_the_model_asked_for() {
    let path = scratch("write-skew.jsonl");
    std::fs::write(&path, WRITE_SKEW.join("\n") + "\n").unwrap();
    let file = path.to_str().unwrap();

    let out = causeway(&["check", "--model", "serializable", file]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("model: serializable (--model)\nNOT SERIALIZABLE: 1 violation in 2 transactions"),
        "{text}"
    );
    assert!(text.contains("g2-anti-dependency-cycle   1"), "{text}");
    assert!(text.contains("txn a: a -rw(y)-> b -rw(x)-> a: "), "{text}");

    let out = causeway(&["check", "--model", "tcc", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("model: tcc (--model)\nTCC: no violations in 2 transactions"), "{}", stdout(&out));

    // Without --model and without a meta line: TCC, as before.
    let out = causeway(&["check", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("model: tcc (the default: no --model"), "{}", stdout(&out));

    // Eventual consistency allows what TCC forbids here, and says so.
    let fractured = scratch("fractured-eventual.jsonl");
    let lines = [
        r#"{"txid":"w","session":"s1","seq":1,"status":"committed","ops":[{"op":"w","key":"x","value":"w:x"},{"op":"w","key":"y","value":"w:y"}],"commit_ts":[10,0,1]}"#,
        r#"{"txid":"r","session":"s2","seq":1,"status":"committed","ops":[{"op":"r","key":"x","value":"w:x"},{"op":"r","key":"y","value":null}]}"#,
    ];
    std::fs::write(&fractured, lines.join("\n") + "\n").unwrap();
    let out = causeway(&["check", "--model", "eventual", fractured.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("eventually consistent, NOT TCC: 1 violation"), "{}", stdout(&out));
    assert_eq!(causeway(&["check", fractured.to_str().unwrap()]).status.code(), Some(1));

    let out = causeway(&["check", "--model", "snapshot", file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("tcc, serializable, eventual"), "{}", stderr(&out));
    let help = stdout(&causeway(&["check", "--help"]));
    assert!(help.contains("--model") && help.contains("no cycle in the direct serialization graph"), "{help}");
}

#[test]
fn check_judges_the_model_a_history_names_unless_told_otherwise() {
    let path = scratch("write-skew-sdur.jsonl");
    let meta = r#"{"type": "meta", "protocol": "sdur", "guarantee": "serializable"}"#;
    std::fs::write(&path, format!("{meta}\n{}\n", WRITE_SKEW.join("\n"))).unwrap();
    let file = path.to_str().unwrap();
    let out = causeway(&["check", file]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("model: serializable (the guarantee the history's meta line of protocol sdur names)\n"),
        "{text}"
    );
    assert!(text.contains("NOT SERIALIZABLE"), "{text}");
    let out = causeway(&["check", "--model", "tcc", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("model: tcc (--model)\n"), "{}", stdout(&out));

    // A meta line after a transaction is an error that names its line.
    std::fs::write(&path, format!("{}\n{meta}\n", WRITE_SKEW[0])).unwrap();
    let out = causeway(&["check", file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2: a meta line after the first transaction"), "{}", stderr(&out));
}

#[test]
fn bad_input_gets_a_clear_error_not_a_panic() {
    let missing = causeway(&["check", "/nonexistent/history.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot open"), "{}", stderr(&missing));

    let garbage = scratch("garbage.jsonl");
    std::fs::write(&garbage, "{\"txid\": 1}\n").unwrap();
    let out = causeway(&["check", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));

    let too_many = causeway(&["sim", "--dcs", "9", "--txns", "10"]);
    assert_eq!(too_many.status.code(), Some(2));
    assert!(stderr(&too_many).contains("regions"), "{}", stderr(&too_many));

    let bad_cut = causeway(&["sim", "--cut", "1:300"]);
    assert_eq!(bad_cut.status.code(), Some(2));
    assert!(stderr(&bad_cut).contains("DC:START_MS-END_MS"), "{}", stderr(&bad_cut));

    let skewed = causeway(&["sim", "--skew-ms", "600", "--txns", "10"]);
    assert_eq!(skewed.status.code(), Some(2));
    assert!(stderr(&skewed).contains("within 500 ms"), "{}", stderr(&skewed));

    // Partial replication: only PaRiS runs on it, and R ≤ M.
    let wren_partial = causeway(&["sim", "--replication", "2", "--txns", "10"]);
    assert_eq!(wren_partial.status.code(), Some(2));
    assert!(stderr(&wren_partial).contains("Wren needs full replication"), "{}", stderr(&wren_partial));
    let too_few_dcs = causeway(&["sim", "--protocol", "paris", "--replication", "4", "--txns", "10"]);
    assert_eq!(too_few_dcs.status.code(), Some(2));
    assert!(stderr(&too_few_dcs).contains("at least 4 data centers"), "{}", stderr(&too_few_dcs));
    let empty_dc = causeway(&["sim", "--protocol", "paris", "--replication", "1", "--partitions", "2", "--txns", "10"]);
    assert_eq!(empty_dc.status.code(), Some(2));
    assert!(stderr(&empty_dc).contains("dc2 holds no partition"), "{}", stderr(&empty_dc));

    let sweep_wren = causeway(&["sweep", "--protocols", "paris,wren", "--replication", "2", "--out", "/nonexistent/x"]);
    assert_eq!(sweep_wren.status.code(), Some(2));
    assert!(stderr(&sweep_wren).contains("Wren needs full replication"), "{}", stderr(&sweep_wren));

    let panicked = [&missing, &out, &too_many, &bad_cut, &skewed, &wren_partial, &too_few_dcs, &empty_dc, &sweep_wren]
        .iter()
        .any(|o| stderr(o).contains("panicked"));
    assert!(!panicked);
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["sim", "--help"],
        vec!["check", "--help"],
        vec!["bench", "--help"],
        vec!["sweep", "--help"],
        vec!["plot", "--help"],
    ] {
        let out = causeway(&args);
        assert!(out.status.success());
        assert!(stdout(&out).contains("Usage"), "{args:?}");
    }
}

#[test]
fn demo_runs_a_checked_workload_on_an_embedded_cluster() {
    for protocol in ["wren", "cure", "h-cure", "ec"] {
        let out = causeway(&[
            "demo",
            "--protocol",
            protocol,
            "--duration",
            "1",
            "--dcs",
            "2",
            "--partitions",
            "2",
            "--clients",
            "2",
        ]);
        let text = stdout(&out);
        assert!(out.status.success(), "{protocol}: {text}\n{}", stderr(&out));
        assert!(text.contains(" txn/s ("), "{text}");
        assert!(text.contains("visible remote mean"), "{protocol}: {text}");
        if protocol == "ec" {
            assert!(text.contains("as expected"), "{text}");
        } else {
            assert!(text.contains("TCC: no violations"), "{protocol}: {text}");
        }
        if protocol == "wren" {
            assert!(text.contains("reads waited   0 of "), "{text}");
        }
    }
}

#[test]
fn server_reports_config_mistakes_and_unknown_nodes() {
    let dir = scratch("bad-config");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "partitions = 2\n[[dc]]\nname = \"a\"\n[[node]]\nname = \"n\"\ndc = \"b\"\npartitions = [0, 1]\npeer = \"127.0.0.1:1\"\nclient = \"127.0.0.1:2\"\n").unwrap();
    let out = causeway(&["server", "--config", bad.to_str().unwrap(), "--node", "n"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown DC \"b\""), "{}", stderr(&out));
    // The examples, copied so their certificates go to the scratch directory.
    let example = |name: &str| {
        let copy = dir.join(name);
        let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(name);
        std::fs::copy(from, &copy).unwrap();
        copy
    };
    let good = example("cluster-local.toml");
    let good = good.to_str().unwrap();
    let out = causeway(&["server", "--config", good, "--node", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no node named \"nowhere\""), "{}", stderr(&out));
    // Under TLS a node without its certificate does not pass the check...
    let out = causeway(&["server", "--config", good, "--node", "oregon-1", "--check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("causeway certs --config"), "{}", stderr(&out));
    // ...and does once `causeway certs` has made them, as the example's header says.
    let out = causeway(&["certs", "--config", good]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("6 node certificate(s) written"), "{}", stdout(&out));
    let out = causeway(&["server", "--config", good, "--node", "oregon-1", "--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("3 DCs × 2 partitions, 6 nodes"), "{}", stdout(&out));
    assert!(stdout(&out).contains("TLS with oregon-1's certificate"), "{}", stdout(&out));
    // Again: the CA and the certificates are kept; --renew issues new ones from the same CA.
    let ca = std::fs::read(dir.join("certs/local/ca.pem")).unwrap();
    let out = causeway(&["certs", "--config", good, "--renew", "--node", "oregon-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("reusing") && stdout(&out).contains("1 node certificate(s) written"),
        "{}",
        stdout(&out)
    );
    assert_eq!(std::fs::read(dir.join("certs/local/ca.pem")).unwrap(), ca);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for key in ["ca.key", "oregon-1.key", "virginia-0.key"] {
            let mode = std::fs::metadata(dir.join("certs/local").join(key)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{key} is readable by others: {mode:o}");
        }
    }
    let out = causeway(&["server", "--config", good, "--node", "oregon-1", "--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let paris = example("cluster-paris.toml");
    let paris = paris.to_str().unwrap();
    assert!(causeway(&["certs", "--config", paris]).status.success());
    let out = causeway(&["server", "--config", paris, "--node", "ireland-p2", "--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("protocol paris, 3 DCs × 4 partitions, each in 2 DCs, 8 nodes"), "{}", stdout(&out));
    // A config without a tls setting is refused, and says what to write.
    let text = std::fs::read_to_string(good).unwrap().replace("[tls]\ndir = \"certs/local\"\n", "");
    let bare = dir.join("no-tls.toml");
    std::fs::write(&bare, text).unwrap();
    let out = causeway(&["server", "--config", bare.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no tls setting") && stderr(&out).contains("tls = \"off\""), "{}", stderr(&out));
}

#[test]
fn sim_injects_crashes_transport_faults_and_fault_points_from_flags() {
    let out = causeway(&[
        "sim",
        "--duration-ms",
        "400",
        "--crash",
        "1:*:100-150",
        "--crash",
        "0:2:50-60",
        "--duplicate-prob",
        "0.05",
        "--reorder-prob",
        "0.05",
        "--loss-prob",
        "0.01",
        "--buggify",
        "--seed",
        "1",
    ]);
    let text = stdout(&out);
    assert_ne!(out.status.code(), Some(2), "{text}\n{}", stderr(&out));
    assert!(text.contains("crashes        5 crashes, 5 restarts"), "{text}");
    assert!(text.contains("duplicates dropped"), "{text}");
    let bad = causeway(&["sim", "--crash", "1:x:100-50"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("DC:PARTITION:START_MS-END_MS"), "{}", stderr(&bad));
    let late = causeway(&["sim", "--crash", "1:0:100-50"]);
    assert!(stderr(&late).contains("must restart after it crashes"), "{}", stderr(&late));
}

#[test]
fn sim_deletes_when_asked_and_check_judges_the_deletes() {
    let path = scratch("deletes.jsonl");
    let out = causeway(&["sim", "--txns", "1500", "--deletes", "0.3", "--history", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let history = std::fs::read_to_string(&path).unwrap();
    assert!(history.matches(r#""op":"d""#).count() > 100, "deletes in the history");
    let check = causeway(&["check", path.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
    assert!(stdout(&check).contains(" deletes, "), "{}", stdout(&check));
    assert!(stdout(&causeway(&["sim", "--help"])).contains("--deletes"));
}
