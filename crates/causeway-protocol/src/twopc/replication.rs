//! Replication of a partition's commits to its replicas in the other DCs
//! (the papers' Alg. 4): every Δ_R, the commits no future commit here can
//! precede go out in commit order, those of one commit time together in one
//! `Replicate`; when none goes out, a heartbeat says how far this replica
//! has got. Links are FIFO, so what a replica receives from a peer in DC `i`
//! is a promise: nothing older from `i` is still coming.

use super::messages::TxnMsg;
use crate::contract::Effects;
use crate::hlc::Timestamp;
use crate::ids::{ReplicaId, TxId};
use crate::recovery::PeerStreams;
use crate::topology::Topology;
use std::collections::BTreeMap;

/// The replicas of a partition in the other DCs: the commits waiting to go
/// to them, and the streams that carry them (positions are commit times;
/// groups are kept until every peer acknowledges them, and resent to a peer
/// that restarts: [`crate::recovery::stream`]).
#[derive(Debug)]
pub struct Replicator<W> {
    /// Committed transactions not replicated yet, in commit order.
    committed: BTreeMap<(Timestamp, TxId), W>,
    pub streams: PeerStreams<Timestamp, W>,
}

impl<W: serde::Serialize> Replicator<W> {
    /// `max_kept_bytes`: of groups kept for the peers in memory, before
    /// the oldest are spilled.
    pub fn new(me: ReplicaId, topology: &Topology, max_kept_bytes: u64) -> Self {
        Replicator { committed: BTreeMap::new(), streams: PeerStreams::new(me, topology, max_kept_bytes) }
    }

    /// `tx` committed here at `ct`.
    pub fn queue(&mut self, ct: Timestamp, tx: TxId, writes: W) {
        self.committed.insert((ct, tx), writes);
    }

    /// For a checkpoint: the commits waiting to go out, in commit order.
    pub fn queued(&self) -> impl Iterator<Item = (Timestamp, TxId, &W)> {
        self.committed.iter().map(|(&(ct, tx), w)| (ct, tx, w))
    }

    /// Nothing committed waits to go out.
    pub fn is_idle(&self) -> bool {
        self.committed.is_empty()
    }

    /// Takes the oldest group of commits with one commit time, if it is at
    /// or below `ub`.
    fn take_group(&mut self, ub: Timestamp) -> Option<(Timestamp, Vec<W>)> {
        let ct = self.committed.first_key_value()?.0 .0;
        if ct > ub {
            return None;
        }
        let mut group = Vec::new();
        while let Some(entry) = self.committed.first_entry() {
            if entry.key().0 != ct {
                break;
            }
            group.push(entry.remove());
        }
        Some((ct, group))
    }

    /// Sends every group of commits at or below `ub`, in commit order,
    /// after handing each to `apply` (the protocols that install at apply
    /// time do it there), and keeps it until every peer acknowledges it.
    /// Returns whether a group went to the peers, which makes a heartbeat
    /// unnecessary.
    pub fn release<S, Q, G, T, R>(
        &mut self,
        ub: Timestamp,
        mut apply: impl FnMut(Timestamp, &[W]),
        out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>,
    ) -> bool
    where
        W: Clone,
    {
        let mut replicated = false;
        while let Some((ct, group)) = self.take_group(ub) {
            apply(ct, &group);
            replicated |= !self.streams.peers().is_empty();
            self.streams.send(ct, group, out);
        }
        // A heartbeat after the groups says nothing new, but is legal: the
        // caller's own heartbeat then follows it.
        if replicated && out.buggify("twopc.replicate.heartbeat_too") {
            return false;
        }
        replicated
    }

    /// Tells the peers that nothing up to `t` is still coming from here —
    /// the live ones: a peer being sent spilled groups has not got them.
    pub fn heartbeat<S, Q, G, T, R>(&self, t: Timestamp, out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>) {
        for peer in self.streams.live_peers() {
            out.send_after_durable(peer, TxnMsg::Heartbeat { t });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Addr, DcId};

    type Out = Effects<TxnMsg<(), (), &'static str, ()>, (), ()>;

    #[test]
    fn groups_go_out_in_commit_order_and_only_below_the_bound() {
        let topology = Topology::full(2, 1).unwrap();
        let mut r = Replicator::new(ReplicaId::new(0, 0), &topology, crate::recovery::stream::DEFAULT_MAX_KEPT_BYTES);
        for (ct, tx, name) in [(5, 2, "b"), (5, 1, "a"), (3, 9, "first"), (8, 1, "late")] {
            r.queue(Timestamp(ct), TxId(tx), name);
        }
        let (mut out, mut applied) = (Out::default(), Vec::new());
        assert!(r.release(Timestamp(7), |ct, g| applied.push((ct, g.to_vec())), &mut out));
        assert_eq!(applied, vec![(Timestamp(3), vec!["first"]), (Timestamp(5), vec!["a", "b"])]);
        assert_eq!(out.after_durable.len(), 2, "one Replicate per group, to the one peer, once durable");
        assert!(!r.is_idle(), "8 is above the bound");
        assert_eq!(r.streams.source_of(Addr::Replica(ReplicaId::new(1, 0))), Some(DcId(1)));
        assert_eq!(r.streams.source_of(Addr::Replica(ReplicaId::new(0, 0))), None);
    }
}
