//! The load driver through the death of its server: a mock server that
//! sometimes dies mid-commit, and is killed and restarted mid-run. The
//! clients keep going, reconnect, and the history is written with the
//! commits whose outcome they could not know marked `unknown`.

use causeway_client::testing::{Behavior, MockConfig, MockServer};
use causeway_history::Status;
use causeway_load::LoadConfig;
use causeway_protocol::{DcId, Topology};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_and_restarted_mid_run_leaves_the_driver_running_and_the_history_whole() {
    // Every 7th commit is applied, then its connection dies unanswered.
    let config = MockConfig { behavior: Behavior::CommitThenClose { every: 7 }, ..MockConfig::default() };
    let mut server = MockServer::start_with(config).await.unwrap();
    let addr = server.addr();
    let load = LoadConfig {
        endpoints: vec![(DcId(0), addr)],
        clients_per_dc: 3,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(2500),
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 2,
            writes_per_txn: 2,
            partitions_per_txn: 1,
            keys_per_partition: 20,
            ..WorkloadConfig::default()
        }),
        seed: 5,
        run_id: String::new(),
        key_prefix: String::new(),
        record: true,
        value_size: None,
        phases: None,
        connect: Default::default(),
    };
    let topology = Arc::new(Topology::full(1, 1).unwrap());
    let run = tokio::spawn(causeway_load::run(load, topology, None, |_| {}));
    // Mid-run the server dies, and comes back half a second later.
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.kill();
    let (killed_us, down_us) = (800_000, 500_000);
    tokio::time::sleep(Duration::from_micros(down_us)).await;
    server.restart().await.unwrap();
    let report = run.await.unwrap().expect("the load runs through the outage");

    assert!(report.errors.is_empty(), "outages are not errors: {:?}", report.errors);
    assert!(report.reconnects >= 3, "every client reconnected: {}", report.reconnects);
    let unknown = report.records.iter().filter(|t| t.status == Status::Unknown).count() as u64;
    assert!(unknown > 0, "commits cut off by the server were recorded unknown");
    assert_eq!(unknown, report.unknown);
    assert!(report.records.iter().filter(|t| t.status == Status::Unknown).all(|t| t.commit_ts.is_none()));
    // The server was down (every client loses its connection now and then
    // anyway, so reconnects alone do not show it): nothing committed while
    // it was. Times are from the driver's start, a little after the
    // test's, so the window keeps a margin on both sides.
    let committed = |t: &&causeway_history::TxnRecord| t.status == Status::Committed;
    let during = killed_us + 100_000..killed_us + down_us - 50_000;
    assert!(report.records.iter().filter(committed).any(|t| t.end_us < killed_us), "nothing committed before the kill");
    let while_down = report.records.iter().filter(committed).filter(|t| during.contains(&t.end_us)).count();
    assert_eq!(while_down, 0, "transactions committed while the server was down");
    // The clients went on committing after the restart, as new sessions.
    let after: Vec<_> =
        report.records.iter().filter(|t| t.status == Status::Committed && t.start_us > killed_us + down_us).collect();
    assert!(!after.is_empty(), "nothing committed after the restart");
    assert!(after.iter().all(|t| t.session.contains("/r")), "a reconnected client is a new session");
    // The history is well formed: ids and (session, seq) unique.
    let ids: HashSet<_> = report.records.iter().map(|t| t.txid.as_str()).collect();
    assert_eq!(ids.len(), report.records.len());
    let seqs: HashSet<_> = report.records.iter().map(|t| (t.session.as_str(), t.seq)).collect();
    assert_eq!(seqs.len(), report.records.len());
}
