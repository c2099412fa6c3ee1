//! The Geo-SDUR paper's two workloads in the simulator, under Geo-SDUR in
//! its "WAN 1" placement (each partition's majority in one region): the
//! microbenchmark's clients keep their locals in their home partition, the
//! social network's lists stay in their users' partitions and grow by what
//! the committed posts and follows wrote — and both histories are
//! serializable.

use crate::common;

use crate::sdur_properties::sim_sdur;
use causeway_history::{OpKind, Status};
use causeway_protocol::sdur::Sdur;
use causeway_protocol::{PartitionId, Topology};
use causeway_sim::SimConfig;
use causeway_workload::{SocialKeys, SocialMix, WorkloadConfig, WorkloadKind};
use common::{problems, run};

fn wan1(workload: WorkloadConfig) -> SimConfig {
    SimConfig {
        seed: 3,
        dcs: 3,
        partitions: 2,
        // The paper's WAN 1: partition 0's majority in EU, partition 1's
        // in US-EAST, each third member in US-WEST.
        groups: Some(vec![vec![2, 2, 1], vec![0, 0, 1]]),
        clients_per_partition: 2,
        txns: None,
        duration_us: Some(3_000_000),
        max_skew_us: 2_000,
        workload: WorkloadKind::Random(workload),
        ..SimConfig::default()
    }
}

#[test]
fn the_microbenchmark_keeps_locals_at_home_and_is_serializable() {
    let workload = WorkloadConfig { keys_per_partition: 500, ..WorkloadConfig::sdur_micro(0.2) };
    let config = wan1(workload);
    let topology = config.topology().unwrap();
    let (report, verdict) = run::<Sdur>(config, &sim_sdur());
    let trouble = problems::<Sdur>(&report, &verdict);
    assert!(trouble.is_empty(), "{trouble:?}");
    let (mut local, mut global) = (0, 0);
    for t in report.history.txns.iter().filter(|t| t.status == Status::Committed) {
        let keys: Vec<&str> = t.ops.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys.len(), 4, "two reads then the same two writes: {t:?}");
        assert_eq!(keys[..2], keys[2..]);
        let parts: Vec<PartitionId> = keys[..2].iter().map(|k| topology.partition_of(k.as_bytes())).collect();
        // A DC's clients are homed at the partitions it holds.
        let holds = |p: PartitionId| topology.holds(causeway_protocol::DcId(t.dc), p);
        assert!(holds(parts[0]), "the first key is at the client's home: {t:?}");
        if parts[0] == parts[1] {
            local += 1;
        } else {
            global += 1;
        }
    }
    assert!(local > 50 && global > 5, "{local} local, {global} global committed");
}

#[test]
fn the_social_network_keeps_its_lists_and_is_serializable() {
    // Few users, so that posts and follows meet on the same lists.
    let workload = WorkloadConfig::social(40, SocialMix::default());
    let config = wan1(workload);
    let topology = config.topology().unwrap();
    let (report, verdict) = run::<Sdur>(config, &sim_sdur());
    let trouble = problems::<Sdur>(&report, &verdict);
    assert!(trouble.is_empty(), "{trouble:?}");
    let (mut timelines_across, mut writers) = (0, 0);
    for t in report.history.txns.iter().filter(|t| t.status == Status::Committed) {
        let reads: Vec<&str> = t.ops.iter().filter(|o| o.op == OpKind::Read).map(|o| o.key.as_str()).collect();
        let writes: Vec<_> = t.ops.iter().filter(|o| o.op == OpKind::Write).collect();
        if writes.is_empty() {
            // A timeline: the producers list, then posts — some elsewhere.
            let parts: std::collections::BTreeSet<u32> =
                reads.iter().map(|k| topology.partition_of(k.as_bytes()).0).collect();
            timelines_across += usize::from(parts.len() > 1);
            continue;
        }
        writers += 1;
        for w in &writes {
            // A list written is the list read with one id appended.
            let read = t.ops.iter().find(|o| o.op == OpKind::Read && o.key == w.key).expect("read before written");
            let new = SocialKeys::parse(w.value.as_ref().map(|v| v.as_bytes()), Vec::new);
            let old = SocialKeys::parse(read.value.as_ref().map(|v| v.as_bytes()), Vec::new);
            assert!(!new.is_empty() && new.len() <= 8, "{w:?}");
            if read.value.is_some() && old.len() < 8 {
                assert!(new.len() >= old.len(), "{read:?} then {w:?}");
            }
        }
    }
    assert!(timelines_across > 50, "{timelines_across} timelines read two partitions");
    assert!(writers > 10, "{writers} posts and follows committed");
    // Every list key lives in its user's partition: `u{P}.…`.
    let finals = &report.history.finals[0];
    assert!(!finals.state.is_empty());
    for key in finals.state.keys() {
        let p: u32 = key.strip_prefix('u').and_then(|k| k.split('.').next()).and_then(|p| p.parse().ok()).unwrap();
        assert_eq!(Topology::partition_of(&topology, key.as_bytes()).0, p, "{key}");
    }
}
