//! Writing every key of the workload's key space once before a benchmark,
//! so reads find a version to return (as the paper's stores were loaded)
//! instead of answering "no such key" from an empty chain.

use bytes::Bytes;
use causeway_client::{Client, ClientOptions, Error};
use causeway_protocol::Topology;
use causeway_workload::KeySpace;
use std::net::SocketAddr;

/// Writes `value_size`-byte values under every key of `keys_per_partition`
/// keys (named after `prefix`) in each partition, through `clients`
/// connections to `endpoint`
/// (one DC; replication carries them to the others). Returns how many keys
/// were written.
pub async fn preload(
    endpoint: SocketAddr,
    topology: &Topology,
    prefix: &str,
    keys_per_partition: u32,
    value_size: usize,
    clients: usize,
    connect: &ClientOptions,
) -> Result<u64, Error> {
    let options = ClientOptions { name: "preload".into(), ..connect.clone() };
    let space = KeySpace::with_prefix(topology, keys_per_partition, prefix);
    let all: Vec<Bytes> = (0..space.partitions()).flat_map(|p| space.partition(p).iter().cloned()).collect();
    let value = Bytes::from(vec![b'v'; value_size]);
    let clients = clients.max(1);
    let chunk = all.len().div_ceil(clients).max(1);
    let mut tasks = Vec::new();
    for part in all.chunks(chunk).map(<[Bytes]>::to_vec) {
        let value = value.clone();
        let options = options.clone();
        tasks.push(tokio::spawn(async move {
            let mut client = Client::connect_with(endpoint, options).await?;
            // As many keys per transaction as the server takes.
            let batch = client.server().limits.max_writes_per_txn.max(1) as usize;
            for batch in part.chunks(batch) {
                client.begin().await?;
                client.commit_writes(batch.iter().map(|k| (k.clone(), Some(value.clone()))).collect()).await?;
            }
            Ok::<u64, Error>(part.len() as u64)
        }));
    }
    let mut written = 0;
    for t in tasks {
        written += t.await.map_err(|e| Error::Protocol(format!("a preload task failed: {e}")))??;
    }
    Ok(written)
}
