//! Wren under many seeds: random topologies, clock skew and drift, DC cuts.
//! Every history goes through the checker; every read is watched for waits.
//!
//! `CAUSEWAY_SEEDS=5000 cargo test --release -p causeway-sim --test wren_properties`
//! runs a longer soak. A failing seed replays with
//! `causeway sim` flags printed in the failure message.

mod common;

use causeway_protocol::wren::WrenConfig;
use common::{par_seeds, random_config, run_wren, seeds};

#[test]
fn wren_is_tcc_and_never_waits_over_many_seeds() {
    let n = seeds(500);
    let failures: Vec<String> = par_seeds(n, |seed| {
        let config = random_config(seed, 300);
        let shape = format!(
            "seed {seed}: {} DCs x {} partitions, skew {} us, cuts {:?}",
            config.dcs, config.partitions, config.max_skew_us, config.cuts
        );
        let (report, verdict) = run_wren(config, &WrenConfig::default());
        let mut problems = Vec::new();
        if !verdict.is_tcc() {
            problems.push(format!("checker:\n{verdict}"));
        }
        if report.reads_waited > 0 {
            problems.push(format!("{} reads waited", report.reads_waited));
        }
        if !report.settled() {
            problems.push("did not settle".into());
        }
        if report.committed < 100 {
            problems.push(format!("only {} transactions committed", report.committed));
        }
        if problems.is_empty() {
            None
        } else {
            Some(format!("{shape}\n{}", problems.join("\n")))
        }
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "{} of {n} seeds failed:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn the_same_seed_gives_the_same_history_byte_for_byte() {
    let a = run_wren(random_config(42, 400), &WrenConfig::default()).0.history.to_jsonl_string();
    let b = run_wren(random_config(42, 400), &WrenConfig::default()).0.history.to_jsonl_string();
    let c = run_wren(random_config(43, 400), &WrenConfig::default()).0.history.to_jsonl_string();
    assert_eq!(a, b);
    assert_ne!(a, c);
}
