//! The operator and benchmark hooks of the client wire: `Dump` (the newest
//! value of every key this node's replicas of the DC hold, a page at a time),
//! `DropPeerConnections`, and `Stats` (counters and stable times).

use super::host::ClientHost;
use crate::router::ReplicaInput;
use bytes::Bytes;
use causeway_protocol::{DcId, Key, Protocol};
use causeway_wire::{Dump, Response, DUMP_PAGE_BYTES};
use tokio::sync::{mpsc, oneshot};

/// One page of a dump, merged from the node's replicas of the DC and sorted:
/// its entries, and the key to continue after (`None`: the last page).
pub type DumpParts = (Vec<(Key, Bytes)>, Option<Key>);

/// Asks every replica of `dc` on this node for a page of its newest values
/// after `after`; the merged page arrives on `reply`.
pub fn start_dump<P: Protocol>(
    host: &ClientHost<P>,
    dc: DcId,
    after: Option<Key>,
    reply: mpsc::UnboundedSender<DumpParts>,
) {
    let mut waits = Vec::new();
    for r in host.router.local_replicas().filter(|r| r.dc == dc) {
        let (tx, rx) = oneshot::channel();
        if let Some(inbox) = host.router.replica_inbox(r) {
            let _ = inbox.send(ReplicaInput::Dump { after: after.clone(), max_bytes: DUMP_PAGE_BYTES, reply: tx });
            waits.push(rx);
        }
    }
    tokio::spawn(async move {
        let mut entries = Vec::new();
        // Past the last key a replica left out, that replica may hold keys
        // this page has not seen: the page ends there.
        let mut end: Option<Key> = None;
        for w in waits {
            let (part, more) = w.await.unwrap_or_default();
            if more {
                let last = part.last().map(|(k, _)| k.clone());
                end = match (end, last) {
                    (Some(e), Some(l)) => Some(e.min(l)),
                    (e, l) => e.or(l),
                };
            }
            entries.extend(part);
        }
        entries.sort();
        if let Some(end) = &end {
            entries.retain(|(k, _)| k <= end);
        }
        let (entries, more) = crate::dump::page(entries, None, DUMP_PAGE_BYTES);
        let next = if more || end.is_some() { entries.last().map(|(k, _)| k.clone()) } else { None };
        let _ = reply.send((entries, next));
    });
}

/// The answer to `Dump`: a page of entries, and which of the DC's
/// partitions they cover.
pub fn dump_response<P: Protocol>(host: &ClientHost<P>, dc: DcId, (entries, next): DumpParts) -> Response {
    let topology = &host.topology;
    let mut partitions: Vec<u32> = host.router.local_replicas().filter(|r| r.dc == dc).map(|r| r.partition.0).collect();
    partitions.sort_unstable();
    let partition_count = topology.partitions().filter(|&p| topology.holds(dc, p)).count() as u32;
    let cluster_partitions = topology.partition_count();
    Response::Dump(Dump { dc: dc.0, partitions, partition_count, cluster_partitions, entries, next })
}

/// The answer to `Stats`.
pub fn stats<P: Protocol>(host: &ClientHost<P>, waited_txns: bool) -> Response {
    Response::Stats(crate::stats::node_stats(
        &host.node_name,
        &host.metrics,
        host.router.link_counts(),
        &host.replicas,
        waited_txns,
    ))
}

/// `DropPeerConnections`: break every link to other nodes (they reconnect).
pub fn drop_peer_connections<P: Protocol>(host: &ClientHost<P>) -> Response {
    host.router.drop_peer_connections();
    Response::Done
}
