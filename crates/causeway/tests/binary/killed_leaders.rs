//! Geo-SDUR's replica groups under `kill -9`: six servers (3 regions × 2
//! partitions, WAN emulated, a data directory each), each partition a
//! group of three with one member per region ("WAN 2"). Under load, the
//! leader of one group, then of the other, is killed with SIGKILL: the
//! group elects another within seconds and commits go on; the dead leader,
//! restarted with its command, catches up from its log and the others.
//! Then two members of one group are down at once: the member left has no
//! majority, and a transaction writing there is refused with an error that
//! says so, while the other partition goes on committing. Afterwards every
//! region holds the same data and the history, `unknown` outcomes
//! included, is serializable.

use crate::common;

use causeway_client::{Client, Error};
use causeway_history::Guarantee;
use causeway_protocol::{PartitionId, Topology};
use causeway_workload::WorkloadConfig;
use common::cluster::{Cluster, ONE_CLUSTER_AT_A_TIME};
use common::six;
use std::time::{Duration, Instant};

/// The groups' rhythm: heartbeats well under the emulated WAN's round
/// trips, elections after 600 ms of silence.
const ORDERED: &str = "[ordered]\nheartbeat_ms = 50\nelection_ms = 600\n";

/// Time for a group to elect a leader after its last one died: an
/// election timeout, a pre-vote and a vote across the WAN, with room.
const ELECTED_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdur_leaders_killed_under_load_are_replaced_and_the_history_is_serializable() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::configured("killed-sdur", "sdur", ORDERED, |_, _| true);
    cluster.start_all().await;
    for p in 0..2 {
        cluster.wait_leader(p, ELECTED_WITHIN).await;
    }
    let started = Instant::now();
    // Keys drawn uniformly: under the other tests' zipf 0.99 over 200 keys,
    // certification aborted four transactions in five, and how many
    // committed in the run was a matter of which keys the head collided on.
    let transactions = WorkloadConfig { zipf: 0.0, ..six::workload(3) };
    let run = six::start_load_of(&cluster.nodes, Duration::from_secs(35), transactions, 0x5d0e, "", None);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Each group's leader in turn, twice.
    let mut elections = Vec::new();
    for p in [0, 1, 0, 1] {
        let (leader, _) = cluster.wait_leader(p, ELECTED_WITHIN).await;
        let name = cluster.nodes[leader].name.clone();
        cluster.kill(leader);
        eprintln!("killed leaders: {name}, leader of partition {p}, killed {:.1?} into the run", started.elapsed());
        let (next, took) = cluster.wait_leader(p, ELECTED_WITHIN).await;
        assert_ne!(next, leader);
        elections.push(took);
        // Commits go on under the new leader (counted at the nodes that
        // stay up meanwhile).
        let before = cluster.committed().await;
        let since = Instant::now();
        while cluster.committed().await <= before {
            assert!(since.elapsed() < Duration::from_secs(10), "nothing committed after {name}'s group elected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("killed leaders: {} leads partition {p} {took:.1?} after; commits go on", cluster.nodes[next].name);
        cluster.start(leader);
        cluster.wait_serving(leader).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    // A majority of partition 0's group down: the member left refuses, and
    // says why; partition 1 still commits.
    let members: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| cluster.nodes[i].name.ends_with("-0")).collect();
    let (left, down) = (members[2], [members[0], members[1]]);
    for i in down {
        cluster.kill(i);
    }
    eprintln!("killed leaders: two of partition 0's three members down {:.1?} into the run", started.elapsed());
    let topology = Topology::full(3, 2).unwrap();
    let key_of = |p: u32| {
        (0..).map(|n| format!("probe-{n}")).find(|k| topology.partition_of(k.as_bytes()) == PartitionId(p)).unwrap()
    };
    let (k0, k1) = (key_of(0), key_of(1));
    let since = Instant::now();
    let refused = loop {
        match write_one(&cluster.nodes[left], &k0).await {
            Err(e @ Error::Aborted(_)) if e.to_string().contains("no leader") => break e,
            other => {
                assert!(
                    since.elapsed() < Duration::from_secs(15),
                    "a write to partition 0 without its majority was not refused for it: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    eprintln!("killed leaders: {} says: {refused}", cluster.nodes[left].name);
    let other = (0..cluster.nodes.len()).find(|&i| cluster.nodes[i].name.ends_with("-1")).unwrap();
    write_one(&cluster.nodes[other], &k1).await.expect("partition 1 still commits");
    for i in down {
        cluster.start(i);
    }
    for i in down {
        cluster.wait_serving(i).await;
    }
    cluster.wait_leader(0, ELECTED_WITHIN).await;
    assert!(started.elapsed() < Duration::from_secs(34), "the kills outlasted the load: {:?}", started.elapsed());

    let report = run.await.unwrap().expect("the load runs through the kills");
    cluster.converged_and_checked(report.records, Guarantee::Serializable).await;
    assert!(report.committed > 200, "only {} transactions committed", report.committed);
    elections.sort();
    eprintln!(
        "killed leaders: 4 leaders killed, then a majority; {} committed, {} aborted, {} unknown, {} unavailable; \
         a new leader in {:.1?}..{:.1?}; verdict: serializable",
        report.committed,
        report.aborted,
        report.unknown,
        report.unavailable,
        elections[0],
        elections[elections.len() - 1],
    );
}

/// One transaction at `node` writing `key`.
async fn write_one(node: &six::Node, key: &str) -> Result<(), Error> {
    let mut client = Client::connect(node.client).await?;
    client.begin().await?;
    client.write(key.to_string(), "x").await?;
    client.commit().await.map(|_| ())
}
