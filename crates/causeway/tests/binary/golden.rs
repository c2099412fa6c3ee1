//! Behaviour pinned by digests: the history of every protocol on 20 fixed
//! `causeway sim` configurations (`golden/sim-configs.txt`) must hash to the
//! sha256 recorded in `golden/sim-histories.txt`.
//!
//! A refactor must leave every digest as it is. A deliberate change of
//! behaviour re-records them with `CAUSEWAY_BLESS=1 cargo test -p causeway
//! --test binary golden::`, and its commit says why the histories changed.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The protocols whose histories are pinned; a new protocol adds its name
/// here and blesses its digests.
const PROTOCOLS: [&str; 5] = ["wren", "cure", "h-cure", "ec", "sdur"];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn configs() -> Vec<String> {
    let text = std::fs::read_to_string(golden_dir().join("sim-configs.txt")).expect("sim-configs.txt");
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

/// `protocol<TAB>config` → digest, from the recorded file.
fn recorded() -> BTreeMap<(String, String), String> {
    let path = golden_dir().join("sim-histories.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 3, "{}:{}: expected protocol, config and digest", path.display(), n + 1);
        out.insert((fields[0].to_string(), fields[1].to_string()), fields[2].to_string());
    }
    out
}

/// Runs one configuration and returns the sha256 of the history it wrote.
fn digest(protocol: &str, config: &str, scratch: &Path) -> String {
    let history = scratch.join(format!("{protocol}-{}.jsonl", config.replace([' ', ':', '/'], "_")));
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["sim", "--protocol", protocol])
        .args(config.split_whitespace())
        .arg("--history")
        .arg(&history)
        .output()
        .expect("the binary runs");
    // Exit 1 is a verdict (EC is not TCC), 2 an error: the run must not fail.
    assert_ne!(out.status.code(), Some(2), "{protocol} {config}: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&history).unwrap_or_else(|e| panic!("{protocol} {config}: no history: {e}"));
    let _ = std::fs::remove_file(&history);
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn sim_histories_match_their_recorded_digests() {
    let configs = configs();
    assert_eq!(configs.len(), 20, "the golden set is 20 configurations");
    let scratch = std::env::temp_dir().join(format!("causeway-golden-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();

    let jobs: Vec<(String, String)> =
        PROTOCOLS.iter().flat_map(|p| configs.iter().map(move |c| (p.to_string(), c.clone()))).collect();
    let next = Mutex::new(jobs.into_iter());
    let seen = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some((p, c)) = next.lock().unwrap().next() else { break };
                let d = digest(&p, &c, &scratch);
                seen.lock().unwrap().insert((p, c), d);
            });
        }
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let seen = seen.into_inner().unwrap();

    if std::env::var_os("CAUSEWAY_BLESS").is_some() {
        let mut text = String::from("# protocol\tconfiguration\tsha256 of the history; written by CAUSEWAY_BLESS=1\n");
        for ((p, c), d) in &seen {
            text.push_str(&format!("{p}\t{c}\t{d}\n"));
        }
        std::fs::write(golden_dir().join("sim-histories.txt"), text).unwrap();
        return;
    }

    let recorded = recorded();
    let mut wrong = Vec::new();
    for (key, digest) in &seen {
        match recorded.get(key) {
            Some(r) if r == digest => {}
            Some(r) => wrong.push(format!("{} {}: recorded {r}, now {digest}", key.0, key.1)),
            None => wrong.push(format!("{} {}: no recorded digest", key.0, key.1)),
        }
    }
    for key in recorded.keys().filter(|k| !seen.contains_key(*k)) {
        wrong.push(format!("{} {}: recorded but no longer run", key.0, key.1));
    }
    assert!(wrong.is_empty(), "{} of {} histories changed:\n{}", wrong.len(), seen.len(), wrong.join("\n"));
}
