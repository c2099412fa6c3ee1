//! The atomicity invariant (a FoundationDB-style invariant workload): every
//! update transaction overwrites a whole group of keys — one key in each
//! partition — with one fresh value. Under TCC no snapshot may ever see a
//! group holding values of different transactions, and concurrent writers
//! must win in the same order on every key of a group, in every DC.

use crate::common;

use causeway_history::{OpKind, Status};
use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::paris::{Bpr, Paris};
use causeway_protocol::wren::Wren;
use causeway_protocol::{DcId, Protocol};
use causeway_sim::{Cut, SimConfig};
use causeway_workload::WorkloadKind;
use common::{par_seeds, run, seeds};
use std::collections::BTreeSet;

/// The transaction that wrote `value` (`txid:key`).
fn writer(value: &str) -> &str {
    value.split(':').next().unwrap()
}

#[test]
fn no_wren_snapshot_ever_sees_a_group_half_written() {
    groups_stay_whole::<Wren>(40, None);
}

#[test]
fn no_cure_snapshot_ever_sees_a_group_half_written() {
    groups_stay_whole::<Cure>(20, None);
}

#[test]
fn no_h_cure_snapshot_ever_sees_a_group_half_written() {
    groups_stay_whole::<HCure>(20, None);
}

/// Each partition in two of the three DCs: a group's keys live in
/// different DCs, and most reads of a group cross the WAN.
#[test]
fn no_paris_snapshot_ever_sees_a_group_half_written_under_partial_replication() {
    groups_stay_whole::<Paris>(20, Some(2));
}

#[test]
fn no_bpr_snapshot_ever_sees_a_group_half_written_under_partial_replication() {
    groups_stay_whole::<Bpr>(20, Some(2));
}

fn groups_stay_whole<P: Protocol>(default_seeds: u64, replication: Option<u16>) {
    let n = seeds(default_seeds);
    let outcomes = par_seeds(n, |seed| {
        let config = SimConfig {
            seed,
            dcs: 3,
            // Under partial replication, at least two partitions: a DC
            // then misses some.
            partitions: 1 + (seed % 6) as u32 + u32::from(replication.is_some()),
            replication,
            clients_per_partition: 2,
            txns: None,
            // Long enough for remote versions to arrive and be read; under
            // partial replication most transactions cross the WAN.
            duration_us: Some(if replication.is_some() { 4_000_000 } else { 800_000 }),
            // Remote groups are read only when they win last-writer-wins
            // against the local writers, whose versions are fresher by the
            // replication delay: clocks far apart (offsets of up to ±75 ms)
            // make remote DCs' writes the newest ones often enough.
            max_skew_us: 150_000,
            cuts: if seed % 2 == 0 {
                vec![Cut { dc: (seed % 3) as u16, start_us: 50_000, end_us: 300_000 }]
            } else {
                vec![]
            },
            workload: WorkloadKind::Groups { groups: 4, read_only_fraction: 0.8 },
            ..SimConfig::default()
        };
        let topology = config.topology().expect("a valid placement");
        let (report, verdict) = run::<P>(config, &P::Config::default());
        assert!(verdict.is_tcc(), "{} seed {seed}: {verdict}", P::NAME);
        let mut group_reads = 0;
        let mut remote_group_reads = 0;
        for t in report.history.txns.iter().filter(|t| t.status == Status::Committed) {
            let reads: Vec<_> = t.ops.iter().filter(|o| o.op == OpKind::Read).collect();
            if reads.is_empty() {
                continue;
            }
            group_reads += 1;
            let writers: Vec<Option<&str>> = reads.iter().map(|o| o.value.as_deref().map(writer)).collect();
            let local = format!("dc{}-", t.dc);
            if writers.iter().flatten().any(|w| !w.starts_with(&local)) {
                remote_group_reads += 1;
            }
            assert!(
                writers.windows(2).all(|w| w[0] == w[1]),
                "{} seed {seed}: {} saw a mixed group: {writers:?}",
                P::NAME,
                t.txid
            );
        }
        // Every DC ends with each group written by a single transaction,
        // as far as it holds the group's keys.
        let groups: BTreeSet<Vec<&str>> = report
            .history
            .txns
            .iter()
            .map(|t| {
                let mut keys: Vec<&str> =
                    t.ops.iter().filter(|o| o.op == OpKind::Write).map(|o| o.key.as_str()).collect();
                keys.sort();
                keys
            })
            .filter(|keys| !keys.is_empty())
            .collect();
        for f in &report.history.finals {
            for group in &groups {
                let held = group.iter().filter(|k| topology.holds(DcId(f.dc), topology.partition_of(k.as_bytes())));
                let writers: Vec<Option<&str>> = held.map(|k| f.state.get(*k).map(|v| writer(v))).collect();
                assert!(
                    writers.windows(2).all(|w| w[0] == w[1]),
                    "{} seed {seed}: dc{} ends mixed: {writers:?}",
                    P::NAME,
                    f.dc
                );
            }
        }
        (group_reads, remote_group_reads)
    });
    let reads: usize = outcomes.iter().map(|o| o.0).sum();
    let remote: usize = outcomes.iter().map(|o| o.1).sum();
    assert!(reads > 100 * n as usize, "{}: too few group reads to mean anything: {reads}", P::NAME);
    assert!(remote > 10 * n as usize, "{}: too few groups read from other DCs to mean anything: {remote}", P::NAME);
}
