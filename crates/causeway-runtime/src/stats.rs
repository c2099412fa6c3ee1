//! A node's measurements as benchmarks read them ([`NodeStats`]): the
//! counters of [`Metrics`] and each replica's published stable times, taken
//! without stopping anything.

use crate::metrics::Metrics;
use crate::replica_task::ReplicaGauges;
use causeway_protocol::ReplicaId;
use causeway_wire::{LinkCounts, NodeStats, ReplicaReading};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub fn node_stats(
    node: &str,
    metrics: &Metrics,
    mut links: LinkCounts,
    replicas: &[(ReplicaId, Arc<ReplicaGauges>)],
    waited_txns: bool,
) -> NodeStats {
    let replicas = replicas
        .iter()
        .map(|(id, g)| {
            let (visible_upto, changes) = g.visible_changes();
            ReplicaReading {
                dc: id.dc.0,
                partition: id.partition.0,
                visible_upto,
                versions: g.versions.load(Ordering::Relaxed),
                metadata_bytes_per_version: g.metadata_per_version.load(Ordering::Relaxed),
                changes,
            }
        })
        .collect();
    let waited_txns = if waited_txns {
        let drained = std::mem::take(&mut *metrics.waited_txns.lock().unwrap_or_else(|e| e.into_inner()));
        drained.into_iter().collect()
    } else {
        Vec::new()
    };
    links.client_frames_received = metrics.client_frames_received.get();
    links.client_frames_sent = metrics.client_frames_sent.get();
    links.client_writes = metrics.client_writes.get();
    NodeStats {
        links,
        node: node.to_string(),
        replicas,
        sent: metrics.sent_by_class(),
        read_slices: metrics.read_slices.get(),
        read_slices_waited: metrics.reads_waited.get(),
        read_wait_us: metrics.read_wait_us.get(),
        waited_txns,
        read_only_rounds: metrics.read_only_rounds(),
    }
}
