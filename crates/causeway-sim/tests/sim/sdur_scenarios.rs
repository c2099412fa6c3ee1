//! Geo-SDUR when a region is cut off, in the "WAN 1" placement: partition
//! 0's group has two members in Ireland (DC 2) and one in Oregon (DC 1),
//! partition 1's two in Virginia (DC 0) and one in Oregon. A group commits
//! only where it has a majority:
//!
//! * Oregon cut off (a minority of both groups): both partitions go on
//!   committing for the clients of the other regions; Oregon's own clients
//!   commit nothing until the cut heals.
//! * Ireland cut off (partition 0's majority): Ireland's clients go on
//!   committing on partition 0 — a majority is with them; outside Ireland
//!   nothing that touches partition 0 commits while the cut lasts, while
//!   partition 1 goes on committing; once it heals, partition 0 commits
//!   everywhere again.
//!
//! Every history is serializable and the cluster settles.

use crate::common;

use crate::sdur_properties::sim_sdur;
use causeway_history::{Status, TxnRecord};
use causeway_protocol::sdur::Sdur;
use causeway_protocol::{PartitionId, Topology};
use causeway_sim::{Cut, SimConfig, SimReport};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use common::{problems, run};

const CUT_FROM_US: u64 = 1_500_000;
const CUT_UNTIL_US: u64 = 7_000_000;
/// After the cut begins, time for a group whose leader was cut off to
/// elect another (an election timeout and a round trip or two).
const ELECTED_US: u64 = 1_000_000;

fn wan1_with_cut(seed: u64, dc: u16) -> SimConfig {
    SimConfig {
        seed,
        dcs: 3,
        partitions: 2,
        groups: Some(vec![vec![2, 2, 1], vec![0, 0, 1]]),
        clients_per_partition: 3,
        txns: None,
        duration_us: Some(9_000_000),
        max_skew_us: 10_000,
        cuts: vec![Cut { dc, start_us: CUT_FROM_US, end_us: CUT_UNTIL_US }],
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 2,
            writes_per_txn: 2,
            partitions_per_txn: 1,
            keys_per_partition: 500,
            zipf: 0.0,
            read_only_fraction: 0.2,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            delete_fraction: 0.0,
            max_read_rounds: 1,
            think_time_us: 5_000,
            multi_dc_fraction: 0.0,
            shape: causeway_workload::TxnShape::ReadThenWrite,
        }),
        settle_limit_us: 30_000_000,
        ..SimConfig::default()
    }
}

/// A clean run of `config`: serializable, settled.
fn clean_run(config: SimConfig) -> SimReport {
    let seed = config.seed;
    let (report, verdict) = run::<Sdur>(config, &sim_sdur());
    let problems = problems::<Sdur>(&report, &verdict);
    assert!(problems.is_empty(), "seed {seed}: {}", problems.join("\n"));
    report
}

/// The partitions a transaction touched.
fn partitions(t: &TxnRecord) -> Vec<PartitionId> {
    let topology = Topology::full(3, 2).unwrap();
    let mut ps: Vec<PartitionId> = t.ops.iter().map(|o| topology.partition_of(o.key.as_bytes())).collect();
    ps.sort();
    ps.dedup();
    ps
}

/// Transactions of clients in `dc` touching partition `p` that began and
/// ended within `[from, until)` of simulated time: (committed, all).
fn within(report: &SimReport, dc: u16, p: u32, from: u64, until: u64) -> (usize, usize) {
    let them: Vec<&TxnRecord> = report
        .history
        .txns
        .iter()
        .filter(|t| t.dc == dc && t.start_us >= from && t.end_us < until)
        .filter(|t| partitions(t).contains(&PartitionId(p)))
        .collect();
    (them.iter().filter(|t| t.status == Status::Committed).count(), them.len())
}

#[test]
fn a_region_with_a_minority_of_each_group_cut_off_leaves_the_majorities_serving() {
    for seed in 0..3 {
        let report = clean_run(wan1_with_cut(seed, 1));
        let during = (CUT_FROM_US + ELECTED_US, CUT_UNTIL_US);
        // Ireland on partition 0, Virginia on partition 1: both go on.
        let (ireland, _) = within(&report, 2, 0, during.0, during.1);
        let (virginia, _) = within(&report, 0, 1, during.0, during.1);
        assert!(ireland > 20 && virginia > 20, "seed {seed}: {ireland} and {virginia} committed during the cut");
        // Oregon, cut off, commits nothing that began after the cut did;
        // once its members have had no leader for an election timeout,
        // its transactions end at once, refused (the cut has not healed).
        for p in 0..2 {
            let (committed, _) = within(&report, 1, p, CUT_FROM_US, CUT_UNTIL_US);
            assert_eq!(committed, 0, "seed {seed}: Oregon committed on partition {p} while cut off");
            let (_, refused) = within(&report, 1, p, during.0, during.1);
            assert!(refused > 20, "seed {seed}: only {refused} of Oregon's transactions on {p} refused while cut off");
        }
        let (after, _) = within(&report, 1, 0, CUT_UNTIL_US + ELECTED_US, u64::MAX);
        assert!(after > 0, "seed {seed}: Oregon committed nothing on partition 0 after the cut healed");
    }
}

#[test]
fn a_region_with_a_groups_majority_cut_off_keeps_it_and_the_rest_stop_committing_there() {
    for seed in 0..3 {
        let report = clean_run(wan1_with_cut(seed, 2));
        let during = (CUT_FROM_US + ELECTED_US, CUT_UNTIL_US);
        // Ireland, cut off with partition 0's majority, goes on there.
        let (ireland, _) = within(&report, 2, 0, during.0, during.1);
        assert!(ireland > 20, "seed {seed}: Ireland committed {ireland} on partition 0 while cut off");
        // Oregon commits nothing on partition 0 while Ireland is away, and
        // goes on on partition 1 (its majority is in Virginia).
        let (oregon, _) = within(&report, 1, 0, CUT_FROM_US, CUT_UNTIL_US);
        assert_eq!(oregon, 0, "seed {seed}: Oregon committed on partition 0 without its majority");
        let (_, refused) = within(&report, 1, 0, during.0, during.1);
        assert!(refused > 20, "seed {seed}: only {refused} of Oregon's transactions on 0 refused during the cut");
        let (p1, _) = within(&report, 1, 1, during.0, during.1);
        assert!(p1 > 20, "seed {seed}: Oregon committed {p1} on partition 1 during the cut");
        // Once the cut heals, partition 0 commits for Oregon again.
        let (after, _) = within(&report, 1, 0, CUT_UNTIL_US + ELECTED_US, u64::MAX);
        assert!(after > 0, "seed {seed}: Oregon committed nothing on partition 0 after the cut healed");
    }
}
