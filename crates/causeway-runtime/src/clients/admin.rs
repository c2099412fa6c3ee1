//! The operator and benchmark hooks of the client wire: `Dump` (the newest
//! value of every key this node's replicas of the DC hold),
//! `DropPeerConnections`, and `Stats` (counters and stable times).

use super::host::ClientHost;
use crate::router::ReplicaInput;
use bytes::Bytes;
use causeway_protocol::{DcId, Key, Protocol};
use causeway_wire::{Dump, Response};
use tokio::sync::{mpsc, oneshot};

/// What the replicas of a dump answered, merged and sorted.
pub type DumpParts = Vec<(Key, Bytes)>;

/// Asks every replica of `dc` on this node for its newest values; the
/// merged answer arrives on `reply`.
pub fn start_dump<P: Protocol>(host: &ClientHost<P>, dc: DcId, reply: mpsc::UnboundedSender<DumpParts>) {
    let mut waits = Vec::new();
    for r in host.router.local_replicas().filter(|r| r.dc == dc) {
        let (tx, rx) = oneshot::channel();
        if let Some(inbox) = host.router.replica_inbox(r) {
            let _ = inbox.send(ReplicaInput::Dump(tx));
            waits.push(rx);
        }
    }
    tokio::spawn(async move {
        let mut entries = Vec::new();
        for w in waits {
            entries.extend(w.await.unwrap_or_default());
        }
        entries.sort();
        let _ = reply.send(entries);
    });
}

/// The answer to `Dump`: the entries, and which of the DC's partitions they cover.
pub fn dump_response<P: Protocol>(host: &ClientHost<P>, dc: DcId, entries: DumpParts) -> Response {
    let topology = &host.topology;
    let mut partitions: Vec<u32> = host.router.local_replicas().filter(|r| r.dc == dc).map(|r| r.partition.0).collect();
    partitions.sort_unstable();
    let partition_count = topology.partitions().filter(|&p| topology.holds(dc, p)).count() as u32;
    Response::Dump(Dump { dc: dc.0, partitions, partition_count, entries })
}

/// The answer to `Stats`.
pub fn stats<P: Protocol>(host: &ClientHost<P>, waited_txns: bool) -> Response {
    Response::Stats(crate::stats::node_stats(&host.node_name, &host.metrics, &host.replicas, waited_txns))
}

/// `DropPeerConnections`: break every link to other nodes (they reconnect).
pub fn drop_peer_connections<P: Protocol>(host: &ClientHost<P>) -> Response {
    host.router.drop_peer_connections();
    Response::Done
}
