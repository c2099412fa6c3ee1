//! A node with a data directory keeps what it acknowledged across a
//! restart, every protocol (Wren, Cure, H-Cure, EC); a data
//! directory of another cluster or node is refused.

use bytes::Bytes;
use causeway_client::Client;
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::disk::Fsync;
use causeway_runtime::{start, start_with, ClusterPlan, NodeHandle, StartError, StartOptions};
use std::sync::Arc;
use std::time::Duration;

fn plan(kind: ProtocolKind, dir: &std::path::Path) -> ClusterPlan {
    let mut plan = ClusterPlan::embedded(kind, 2, 2, None, None, 0).unwrap();
    plan.nodes[0].data_dir = Some(dir.to_path_buf());
    plan
}

/// Reads `keys` in DC `dc` until they hold `want` (stable times catch up
/// after a restart), for at most 10 s.
async fn read_until(client: &mut Client, keys: &[String], want: &[Option<Bytes>]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = client.read_only(keys).await.unwrap();
        if got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "after the restart: {got:?}, acknowledged: {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_restart_of_the_node() {
    // `always` syncs on a disk thread; `batch` and `never` are written by
    // the replica task itself.
    let runs = [ProtocolKind::Wren, ProtocolKind::Cure, ProtocolKind::HCure, ProtocolKind::Ec]
        .into_iter()
        .map(|kind| (kind, Fsync::Always))
        .chain([(ProtocolKind::Wren, Fsync::Batch), (ProtocolKind::Ec, Fsync::Never)]);
    for (kind, fsync) in runs {
        let dir = tempfile::tempdir().unwrap();
        let plan = |kind, dir: &std::path::Path| ClusterPlan { fsync, ..plan(kind, dir) };
        let keys: Vec<String> = (0..8).map(|i| format!("key{i}")).collect();
        let want: Vec<Option<Bytes>> = keys.iter().map(|k| Some(Bytes::from(format!("{k}=2")))).collect();
        {
            let node = start(Arc::new(plan(kind, dir.path())), "embedded").await.unwrap();
            let mut client = Client::connect(node.client_addr(DcId(0)).unwrap()).await.unwrap();
            for round in 0..3 {
                client.begin().await.unwrap();
                for k in &keys {
                    client.write(k.clone(), format!("{k}={round}")).await.unwrap();
                }
                client.commit().await.unwrap();
            }
            // The node stops with its tasks; only the disk keeps anything.
            node.stop().await;
        }
        let node = start(Arc::new(plan(kind, dir.path())), "embedded").await.unwrap();
        for dc in [DcId(0), DcId(1)] {
            let mut client = Client::connect(node.client_addr(dc).unwrap()).await.unwrap();
            read_until(&mut client, &keys, &want).await;
        }
        // And it goes on committing above what it committed before.
        let mut client = Client::connect(node.client_addr(DcId(0)).unwrap()).await.unwrap();
        client.begin().await.unwrap();
        client.write("key0", "after").await.unwrap();
        client.commit().await.unwrap();
        assert_eq!(client.read_only(&["key0"]).await.unwrap(), vec![Some(Bytes::from("after"))], "{kind} {fsync:?}");
        node.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_another_cluster_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(start(Arc::new(plan(ProtocolKind::Wren, dir.path())), "embedded").await.unwrap());
    let mut other = plan(ProtocolKind::Wren, dir.path());
    other.name = "another".into();
    match start(Arc::new(other), "embedded").await {
        Err(StartError::Storage(why)) => assert!(why.contains("another") && why.contains("embedded"), "{why}"),
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a data directory of another cluster was accepted"),
    }
}

/// `--reseed` is for a node whose disk is gone: refused where a replica's
/// log is (its data, or a re-seed that an ordinary start carries on), for a
/// protocol that cannot re-seed, and for a node with no data directory —
/// each saying why. On a new directory it starts, and leaves the mark that
/// makes the next ordinary start carry the re-seed on, or recover its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_seed_starts_only_on_a_new_data_directory_of_a_protocol_that_can() {
    let reseed = StartOptions { reseed: true };
    let refused = |result: Result<NodeHandle, StartError>| match result {
        Err(StartError::Invalid(why)) => why,
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a re-seed was accepted"),
    };
    let used = tempfile::tempdir().unwrap();
    start(Arc::new(plan(ProtocolKind::Wren, used.path())), "embedded").await.unwrap().stop().await;
    let why = refused(start_with(Arc::new(plan(ProtocolKind::Wren, used.path())), "embedded", reseed).await);
    assert!(why.contains("is there already") && why.contains("without --reseed"), "{why}");

    let fresh = tempfile::tempdir().unwrap();
    let why = refused(start_with(Arc::new(plan(ProtocolKind::Ec, fresh.path())), "embedded", reseed).await);
    assert!(why.contains("ec cannot re-seed"), "{why}");
    let mut nowhere = plan(ProtocolKind::Wren, fresh.path());
    nowhere.nodes[0].data_dir = None;
    let why = refused(start_with(Arc::new(nowhere), "embedded", reseed).await);
    assert!(why.contains("no data directory"), "{why}");

    // Every replica of this one-node cluster re-seeds: each answers the
    // others that it holds nothing, so they come back empty — nobody had
    // anything to give — and serve. A second `--reseed` is refused; an
    // ordinary start recovers what the re-seed left.
    start_with(Arc::new(plan(ProtocolKind::Wren, fresh.path())), "embedded", reseed).await.unwrap().stop().await;
    let why = refused(start_with(Arc::new(plan(ProtocolKind::Wren, fresh.path())), "embedded", reseed).await);
    assert!(why.contains("re-seed that began before"), "{why}");
    let node = start(Arc::new(plan(ProtocolKind::Wren, fresh.path())), "embedded").await.unwrap();
    let mut client = Client::connect(node.client_addr(DcId(0)).unwrap()).await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(10), client.read_only(&["k".to_string()])).await;
    assert_eq!(read.expect("served within 10 s").unwrap(), vec![None], "nothing came back: nobody held anything");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_that_does_not_exist_yet_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("data").join("node-0");
    drop(start(Arc::new(plan(ProtocolKind::Wren, &nested)), "embedded").await.unwrap());
    assert!(nested.join("dc0-p0").is_dir(), "the replica's directory under the new data directory");
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() { bytes_under(&entry.path()) } else { meta.len() };
    }
    total
}

/// Commits `rounds` transactions that overwrite `keys` with `key=round`.
async fn overwrite(client: &mut Client, keys: &[String], rounds: std::ops::Range<u32>) {
    for round in rounds {
        client.begin().await.unwrap();
        for k in keys {
            client.write(k.clone(), format!("{k}={round}")).await.unwrap();
        }
        client.commit().await.unwrap();
    }
}

/// With checkpoints every few KiB, a node's logs stay small however long
/// it runs (the state is a few keys, the history is not), and a node that
/// checkpointed restarts from its checkpoints and the records after them
/// with every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_checkpointed_restarts_with_what_it_acknowledged_and_its_logs_stay_small() {
    // Enough rounds that the history (~450 bytes a round) outweighs by far
    // what a loaded machine holds in checkpoints and the log past them:
    // versions garbage collection has not reached yet, what EC holds
    // unacknowledged for its peers (up to a heal round of commits).
    const ROUNDS: u32 = 3000;
    // Checkpoints are written by a thread of their own while the
    // replicas write on, synced as they go (`always`) or not (`batch`).
    let runs = [ProtocolKind::Wren, ProtocolKind::Cure, ProtocolKind::HCure, ProtocolKind::Ec]
        .into_iter()
        .map(|kind| (kind, Fsync::Always))
        .chain([(ProtocolKind::Wren, Fsync::Batch), (ProtocolKind::Ec, Fsync::Batch)]);
    for (kind, fsync) in runs {
        let keys: Vec<String> = (0..8).map(|i| format!("key{i}")).collect();
        let want: Vec<Option<Bytes>> = keys.iter().map(|k| Some(Bytes::from(format!("{k}={}", ROUNDS - 1)))).collect();
        let mut sizes = Vec::new();
        for checkpoint_min_bytes in [u64::MAX, 4 << 10] {
            let dir = tempfile::tempdir().unwrap();
            let mut plan = plan(kind, dir.path());
            plan.checkpoint_min_bytes = checkpoint_min_bytes;
            plan.fsync = fsync;
            let plan = Arc::new(plan);
            {
                let node = start(plan.clone(), "embedded").await.unwrap();
                let mut client = Client::connect(node.client_addr(DcId(0)).unwrap()).await.unwrap();
                overwrite(&mut client, &keys, 0..ROUNDS).await;
                node.stop().await;
            }
            sizes.push(bytes_under(dir.path()));
            if checkpoint_min_bytes == u64::MAX {
                continue;
            }
            // Every replica has a checkpoint.
            for replica in std::fs::read_dir(dir.path()).unwrap() {
                let path = replica.unwrap().path();
                if !path.is_dir() || path.ends_with("wal") || path.ends_with("spill") {
                    continue;
                }
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let identity = causeway_storage::Identity::new(&plan.name, format!("{}/{name}", plan.nodes[0].name));
                let (_, recovered) = causeway_storage::Log::open(&path, &identity).unwrap();
                assert!(recovered.checkpoint.is_some(), "{kind} {fsync:?}: {} has no checkpoint", path.display());
            }
            let node = start(plan, "embedded").await.unwrap();
            for dc in [DcId(0), DcId(1)] {
                let mut client = Client::connect(node.client_addr(dc).unwrap()).await.unwrap();
                read_until(&mut client, &keys, &want).await;
            }
            let mut client = Client::connect(node.client_addr(DcId(0)).unwrap()).await.unwrap();
            overwrite(&mut client, &keys, ROUNDS..ROUNDS + 1).await;
            let after: Vec<Option<Bytes>> = keys.iter().map(|k| Some(Bytes::from(format!("{k}={ROUNDS}")))).collect();
            read_until(&mut client, &keys, &after).await;
            // Before its directory goes: a checkpoint may be under way.
            node.stop().await;
        }
        let (without, with) = (sizes[0], sizes[1]);
        // The replicas' last checkpoints, and the node's log past them:
        // within twice each replica's share of it (the exact bound is
        // `disk::node_log`'s test; here the shares follow the checkpoints'
        // sizes, which follow how far garbage collection lags on a loaded
        // machine — up to ~20 KiB a replica seen).
        assert!(with * 4 < without, "{kind}: {with} bytes of logs with checkpoints, {without} without");
    }
}
