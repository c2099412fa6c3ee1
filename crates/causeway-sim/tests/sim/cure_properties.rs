//! Cure and H-Cure under many seeds: random topologies, clock skew and
//! drift, DC cuts, latency spikes (the same random configurations as Wren's
//! property test). Every history goes through the checker.
//!
//! `CAUSEWAY_SEEDS=5000 cargo test --release -p causeway-sim --test sim cure_properties::`
//! runs a longer soak.

use crate::common;

use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::{Protocol, Tuning};
use common::{par_seeds, problems, random_config, run, seeds};

/// What one protocol did over `n` seeds: the failures, and the reads that
/// waited out of all reads.
fn sweep<P: Protocol>(n: u64) -> (Vec<String>, u64, u64) {
    let config = P::configure(&Tuning::default());
    let outcomes = par_seeds(n, |seed| {
        let sim = random_config(seed, 1_500);
        let shape = format!(
            "{} seed {seed}: {} DCs x {} partitions, skew {} us, drift {} ppm, cuts {:?}, spikes {:?}",
            P::NAME,
            sim.dcs,
            sim.partitions,
            sim.max_skew_us,
            sim.max_drift_ppm,
            sim.cuts,
            sim.spikes
        );
        let (report, verdict) = run::<P>(sim, &config);
        let problems = problems::<P>(&report, &verdict);
        let failure = (!problems.is_empty()).then(|| format!("{shape}\n{}", problems.join("\n")));
        (failure, report.reads_waited, report.reads)
    });
    let failures = outcomes.iter().filter_map(|o| o.0.clone()).collect();
    (failures, outcomes.iter().map(|o| o.1).sum(), outcomes.iter().map(|o| o.2).sum())
}

#[test]
fn cure_is_tcc_over_many_seeds() {
    let n = seeds(500);
    let (failures, waited, reads) = sweep::<Cure>(n);
    assert!(failures.is_empty(), "{} of {n} seeds failed:\n{}", failures.len(), failures.join("\n\n"));
    // Skewed clocks and pending commits make Cure's reads wait: the runs
    // exercise the parking and waking of reads, not only the fast path.
    assert!(waited * 20 > reads, "only {waited} of {reads} reads waited");
}

#[test]
fn h_cure_is_tcc_over_many_seeds() {
    let n = seeds(500);
    let (failures, waited, reads) = sweep::<HCure>(n);
    assert!(failures.is_empty(), "{} of {n} seeds failed:\n{}", failures.len(), failures.join("\n\n"));
    assert!(waited > 0, "no read waited for a pending commit in {reads} reads");
}
