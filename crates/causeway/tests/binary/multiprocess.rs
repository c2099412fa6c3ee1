//! A real cluster: 3 DCs × 2 partitions as six `causeway server` processes on
//! 127.0.0.1 with WAN emulation, concurrent clients through the client
//! library, the history checked — and, mid-run, one server's peer
//! connections broken: the links reconnect and nothing is lost or applied
//! twice (the checker's final-state check would see either).

use crate::common;

use causeway_client::Client;
use causeway_history::check;
use causeway_load::LoadConfig;
use causeway_protocol::{DcId, Topology};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use common::{free_ports, six, Servers};
use common::{metric, metrics_text};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_server_processes_serve_a_checked_history_through_broken_links() {
    // Six servers: not beside another test's six (see ONE_CLUSTER_AT_A_TIME).
    let _alone = common::cluster::ONE_CLUSTER_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (config, nodes) = six::write_config(dir.path(), "mp", "wren", "", six::loopback(), false);
    let mut servers = Servers(Vec::new());
    for n in &nodes {
        let child = Command::new(env!("CARGO_BIN_EXE_causeway"))
            .args(["server", "--config", config.to_str().unwrap(), "--node", &n.name])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a server starts");
        servers.0.push(child);
    }
    // Wait until every node accepts clients.
    for n in &nodes {
        six::wait_serving(n, Duration::from_secs(20), || {
            for c in &mut servers.0 {
                assert!(c.try_wait().unwrap().is_none(), "a server exited early (see its stderr)");
            }
        })
        .await;
    }

    let endpoints: Vec<_> = nodes.iter().map(|n| (DcId(n.dc as u16), n.client)).collect();
    let config = LoadConfig {
        endpoints,
        clients_per_dc: 4,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(4),
        // Few keys, several writes: contention, and many partitions per transaction.
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 6,
            writes_per_txn: 3,
            partitions_per_txn: 2,
            keys_per_partition: 50,
            ..WorkloadConfig::default()
        }),
        seed: 11,
        run_id: String::new(),
        key_prefix: String::new(),
        record: true,
        value_size: None,
        phases: None,
        connect: Default::default(),
    };
    // Mid-run, break every peer connection of one server, twice.
    let victim = nodes[2].client;
    let chaos = tokio::spawn(async move {
        let mut admin = Client::connect(victim).await.expect("admin connection");
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(1200)).await;
            admin.drop_peer_connections().await.expect("drop peer connections");
        }
    });
    let topology = Arc::new(Topology::full(3, 2).unwrap());
    let report = causeway_load::run(config, topology, None, |_| {}).await.expect("the load runs");
    chaos.await.unwrap();
    assert!(report.errors.is_empty(), "client errors: {:?}", report.errors);
    // No client lost its server: outages are no longer errors, so say so.
    let outages = (report.unknown, report.unavailable, report.reconnects);
    assert_eq!(outages, (0, 0, 0), "(unknown outcomes, unavailable, reconnects)");
    assert!(report.committed > 500, "only {} transactions committed", report.committed);

    let history = six::history(report.records, &nodes, "", Duration::from_secs(20)).await;
    let verdict = check(&history);
    assert!(verdict.is_tcc(), "{verdict}");
    assert_eq!(verdict.stats.txns, history.txns.len());
    // Writes crossed DCs: clients read values written in other DCs (values
    // are `dcD-cI-SEQ:key`, named after the writer's session).
    let remote_reads = history
        .txns
        .iter()
        .flat_map(|t| t.ops.iter().map(move |o| (t.dc, o)))
        .filter(|(dc, o)| o.value.as_deref().is_some_and(|v| !v.starts_with(&format!("dc{dc}-"))))
        .count();
    assert!(remote_reads > 100, "only {remote_reads} reads saw another DC's writes");

    // A session token from one node of a DC resumes on the other (they share
    // the token key), and the new connection reads the session's own write.
    let (a, b) = (nodes[0].client, nodes[1].client);
    let mut first = Client::connect(a).await.unwrap();
    first.begin().await.unwrap();
    first.write("handoff", "mine").await.unwrap();
    first.commit().await.unwrap();
    let token = first.export_session().await.unwrap();
    let mut second = Client::connect(b).await.unwrap();
    second.resume_session(&token).await.unwrap();
    assert_eq!(second.read_only(&["handoff"]).await.unwrap()[0].as_deref(), Some(&b"mine"[..]));

    // The links really broke and came back.
    let text = metrics_text(nodes[2].metrics).await;
    assert!(metric(&text, "causeway_peer_reconnects_total") >= 5.0, "{text}");
    assert!(metric(&text, "causeway_transactions_committed_total") > 0.0);
    assert!(metric(&text, "causeway_sent_bytes_total{class=\"replication\"}") > 0.0);
}

/// A key that lives in `partition` of a 2-partition cluster.
fn key_in(topology: &Topology, partition: u32, tag: &str) -> String {
    (0..)
        .map(|i| format!("{tag}{i}"))
        .find(|k| topology.partition_of(k.as_bytes()).0 == partition)
        .expect("some key lands in every partition")
}

/// One DC, two partitions on two `causeway server` processes; one is
/// killed. Requests that need its partition fail fast with an error that
/// names it — one already in flight when the node died as well as later
/// ones — while requests of the live partition keep being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_partition_fails_fast_with_a_typed_error_and_the_rest_keeps_serving() {
    // Six servers: not beside another test's six (see ONE_CLUSTER_AT_A_TIME).
    let _alone = common::cluster::ONE_CLUSTER_AT_A_TIME.lock().await;
    use causeway_client::Error;
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(4);
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, common::cluster_config(&ports)).unwrap();
    let mut servers = common::running_cluster(&config, &ports);
    let (live, dead) = (SocketAddr::from(([127, 0, 0, 1], ports[1])), 1u32);
    let topology = Topology::full(1, 2).unwrap();
    let (k0, k1) = (key_in(&topology, 0, "live"), key_in(&topology, dead, "dead"));

    // Both partitions serve (the link between the nodes may take a moment).
    let mut client = Client::connect(live).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let wrote = async {
            client.begin().await?;
            client.write(k0.clone(), "0").await?;
            client.write(k1.clone(), "1").await?;
            client.commit().await
        };
        match wrote.await {
            Ok(_) => break,
            Err(e) if !e.is_fatal() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = client.abort().await;
            }
            Err(e) => panic!("the cluster does not serve: {e}"),
        }
    }

    // The node of partition 1 dies; a read of both partitions is on its way.
    let mut reader = Client::connect(live).await.unwrap();
    reader.begin().await.unwrap();
    servers.0[1].kill().unwrap();
    servers.0[1].wait().unwrap();
    let started = Instant::now();
    let e = reader.read(&[k0.as_str(), k1.as_str()]).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert!(matches!(e, Error::PartitionUnavailable { dc: 0, partition: 1, ref node } if node == "a1"), "{e:?}");
    // The transaction is over, not committed; the connection lives on.
    assert!(matches!(reader.commit().await, Err(Error::RefusedEarlier { .. })));

    // Later requests are refused at once, by name, and the live partition serves.
    for _ in 0..3 {
        let started = Instant::now();
        let e = client.read_only(&[k1.as_str()]).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        assert!(matches!(e, Error::PartitionUnavailable { partition: 1, .. }), "{e:?}");
        assert_eq!(client.read_only(&[k0.as_str()]).await.unwrap()[0].as_deref(), Some(&b"0"[..]));
    }
    // A transaction that writes the dead partition aborts at once; one that
    // does not commits.
    client.begin().await.unwrap();
    client.write(k1.clone(), "lost").await.unwrap();
    let started = Instant::now();
    let e = client.commit().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert!(matches!(e, Error::PartitionUnavailable { partition: 1, .. }), "{e:?}");
    client.begin().await.unwrap();
    assert_eq!(client.read(&[k0.as_str()]).await.unwrap()[0].as_deref(), Some(&b"0"[..]));
    client.write(k0.clone(), "again").await.unwrap();
    client.commit().await.unwrap();
    // A read refused inside a transaction leaves it unable to commit.
    client.begin().await.unwrap();
    client.write(k0.clone(), "never").await.unwrap();
    assert!(matches!(client.read(&[k1.as_str()]).await, Err(Error::PartitionUnavailable { .. })));
    assert!(matches!(client.commit().await, Err(Error::RefusedEarlier { .. })));
    assert_eq!(client.read_only(&[k0.as_str()]).await.unwrap()[0].as_deref(), Some(&b"again"[..]));
}

/// One DC, two partitions on two processes with data directories. Both die;
/// the coordinator's node comes back while the other is still down. A
/// restarted coordinator starts no transaction before its DC has agreed on
/// stable times with it, which needs the other node: a `begin` is answered
/// with that node's name rather than left to hang. Once the other node is
/// back, the cluster serves again with what it had acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_names_the_node_its_dc_waits_for() {
    // Six servers: not beside another test's six (see ONE_CLUSTER_AT_A_TIME).
    let _alone = common::cluster::ONE_CLUSTER_AT_A_TIME.lock().await;
    use causeway_client::Error;
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(4);
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, common::cluster_config_keeping(&ports, Some(dir.path()))).unwrap();
    let start = |node: &str| common::server(&config, node);
    let mut servers = Servers(vec![start("a0"), start("a1")]);
    let a0 = SocketAddr::from(([127, 0, 0, 1], ports[1]));
    let topology = Topology::full(1, 2).unwrap();
    let (k0, k1) = (key_in(&topology, 0, "kept"), key_in(&topology, 1, "kept"));
    let commit_both = |value: &'static str| {
        let (k0, k1) = (k0.clone(), k1.clone());
        async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let wrote = async {
                    let mut client = Client::connect(a0).await?;
                    client.begin().await?;
                    client.write(k0.clone(), value).await?;
                    client.write(k1.clone(), value).await?;
                    client.commit().await
                };
                match wrote.await {
                    Ok(_) => return,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("not yet: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("the cluster does not serve: {e}"),
                }
            }
        }
    };
    commit_both("before").await;

    for server in &mut servers.0 {
        server.kill().unwrap();
        server.wait().unwrap();
    }
    servers.0[0] = start("a0");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut client = loop {
        match Client::connect(a0).await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("a0 did not come back: {e}"),
        }
    };
    let started = Instant::now();
    let e = client.begin().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    assert!(matches!(e, Error::PartitionUnavailable { dc: 0, partition: 1, ref node } if node == "a1"), "{e:?}");

    servers.0[1] = start("a1");
    let deadline = Instant::now() + Duration::from_secs(20);
    let kept = loop {
        let read = async { Client::connect(a0).await?.read_only(&[k0.as_str(), k1.as_str()]).await };
        match read.await {
            Ok(values) => break values,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(e) => panic!("the cluster does not serve again: {e}"),
        }
    };
    assert_eq!(kept, vec![Some(b"before"[..].into()), Some(b"before"[..].into())], "what both held survived");
    commit_both("after").await;
    let mut client = Client::connect(a0).await.unwrap();
    let read = client.read_only(&[k0.as_str(), k1.as_str()]).await.unwrap();
    assert_eq!(read, vec![Some(b"after"[..].into()), Some(b"after"[..].into())]);
}
