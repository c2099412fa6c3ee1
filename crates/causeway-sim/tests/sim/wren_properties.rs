//! Wren under many seeds: random topologies, clock skew and drift, DC cuts.
//! Every history goes through the checker; every read is watched for waits.
//!
//! `CAUSEWAY_SEEDS=5000 cargo test --release -p causeway-sim --test sim wren_properties::`
//! runs a longer soak. A failing seed replays with
//! `causeway sim` flags printed in the failure message.

use crate::common;

use causeway_protocol::wren::{Wren, WrenConfig};
use common::{par_seeds, problems, random_config, run_wren, seeds};

#[test]
fn wren_is_tcc_and_never_waits_over_many_seeds() {
    let n = seeds(1000);
    let failures: Vec<String> = par_seeds(n, |seed| {
        let config = random_config(seed, 1_500);
        let shape = format!(
            "seed {seed}: {} DCs x {} partitions, skew {} us, cuts {:?}",
            config.dcs, config.partitions, config.max_skew_us, config.cuts
        );
        let (report, verdict) = run_wren(config, &WrenConfig::default());
        let problems = problems::<Wren>(&report, &verdict);
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
    let a = run_wren(random_config(42, 1_500), &WrenConfig::default()).0.history.to_jsonl_string();
    let b = run_wren(random_config(42, 1_500), &WrenConfig::default()).0.history.to_jsonl_string();
    let c = run_wren(random_config(43, 1_500), &WrenConfig::default()).0.history.to_jsonl_string();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// A DC cut off for the whole workload keeps committing on its own, sees
/// nothing from the others and shows them nothing — and after the heal
/// every DC ends in the same state.
#[test]
fn a_dc_cut_off_for_the_whole_run_is_isolated_then_converges() {
    use causeway_history::{OpKind, Status};
    use causeway_sim::{Cut, SimConfig};
    let config = SimConfig {
        seed: 9,
        dcs: 3,
        partitions: 3,
        txns: Some(3_000),
        cuts: vec![Cut { dc: 2, start_us: 0, end_us: 60_000_000 }],
        ..SimConfig::default()
    };
    let (report, verdict) = run_wren(config, &WrenConfig::default());
    assert!(verdict.is_tcc(), "{verdict}");
    assert!(report.settled());
    let origin = |value: &str| -> u16 { value[2..value.find('-').unwrap()].parse().unwrap() };
    let mut isolated_commits = 0;
    for t in &report.history.txns {
        if t.dc == 2 && t.status == Status::Committed && t.commit_ts.is_some() {
            isolated_commits += 1;
        }
        for op in t.ops.iter().filter(|o| o.op == OpKind::Read) {
            if let Some(v) = &op.value {
                assert_eq!(origin(v) == 2, t.dc == 2, "{} read {v} across the cut", t.txid);
            }
        }
    }
    assert!(isolated_commits > 100, "the cut-off DC kept committing: {isolated_commits}");
    let finals = &report.history.finals;
    assert!(finals.windows(2).all(|w| w[0].state == w[1].state), "DCs converge after the heal");
    assert!(finals[0].state.values().any(|v| origin(v) == 2), "DC 2's writes reached the others");
}
