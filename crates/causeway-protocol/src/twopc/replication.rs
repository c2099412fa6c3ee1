//! Replication of a partition's commits to its replicas in the other DCs
//! (the papers' Alg. 4): every Δ_R, the commits no future commit here can
//! precede go out in commit order, those of one commit time together in one
//! `Replicate`; when none goes out, a heartbeat says how far this replica
//! has got. Links are FIFO, so what a replica receives from a peer in DC `i`
//! is a promise: nothing older from `i` is still coming.

use super::messages::TxnMsg;
use crate::contract::Effects;
use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use std::collections::BTreeMap;

/// The replicas of a partition in the other DCs: the commits waiting to go
/// to them, those sent and not yet acknowledged by all (resent to a peer
/// that restarts), and how far each peer's stream has come.
#[derive(Debug)]
pub struct Replicator<W> {
    peers: Vec<Addr>,
    /// Committed transactions not replicated yet, in commit order.
    committed: BTreeMap<(Timestamp, TxId), W>,
    /// Groups sent, by commit time, until every peer acknowledges them.
    sent: BTreeMap<Timestamp, Vec<W>>,
    /// Per DC: how far that DC's replica has acknowledged our groups.
    acked: Vec<Timestamp>,
    /// Per DC: the newest group or heartbeat received from its replica.
    received: Vec<Timestamp>,
    /// What we last acknowledged to each DC's replica.
    ack_sent: Vec<Timestamp>,
    /// Per DC: after a (re)start, that replica's stream is ignored until it
    /// says where it resumes.
    awaiting: Vec<bool>,
}

/// What to do with a group or heartbeat from a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// New: take it (from this DC).
    Take(DcId),
    /// Already held, or the peer's stream is being resumed: drop it.
    Drop,
    /// Not a peer's: refuse it.
    Refuse,
}

impl<W> Replicator<W> {
    pub fn new(me: ReplicaId, topology: &Topology) -> Self {
        let dcs = usize::from(topology.dc_count());
        Replicator {
            peers: topology.peers_of(me).into_iter().map(Addr::Replica).collect(),
            committed: BTreeMap::new(),
            sent: BTreeMap::new(),
            acked: vec![Timestamp::ZERO; dcs],
            received: vec![Timestamp::ZERO; dcs],
            ack_sent: vec![Timestamp::ZERO; dcs],
            awaiting: vec![false; dcs],
        }
    }

    /// `tx` committed here at `ct`.
    pub fn queue(&mut self, ct: Timestamp, tx: TxId, writes: W) {
        self.committed.insert((ct, tx), writes);
    }

    /// Nothing committed waits to go out.
    pub fn is_idle(&self) -> bool {
        self.committed.is_empty()
    }

    /// Groups sent and not yet acknowledged by every peer.
    pub fn unacknowledged(&self) -> usize {
        self.sent.len()
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
        TxnMsg<S, Q, W, G>: Clone,
    {
        let mut replicated = false;
        while let Some((ct, group)) = self.take_group(ub) {
            apply(ct, &group);
            if self.peers.is_empty() {
                continue;
            }
            replicated = true;
            for &peer in &self.peers {
                out.send_after_durable(peer, TxnMsg::Replicate { ct, txs: group.clone() });
            }
            self.sent.insert(ct, group);
        }
        // A heartbeat after the groups says nothing new, but is legal: the
        // caller's own heartbeat then follows it.
        if replicated && out.buggify("twopc.replicate.heartbeat_too") {
            return false;
        }
        replicated
    }

    /// Tells the peers that nothing up to `t` is still coming from here.
    pub fn heartbeat<S, Q, G, T, R>(&self, t: Timestamp, out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>)
    where
        TxnMsg<S, Q, W, G>: Clone,
    {
        for &peer in &self.peers {
            out.send_after_durable(peer, TxnMsg::Heartbeat { t });
        }
    }

    /// The DC of `from` if it is a replica of this partition in another DC;
    /// anything else has no business replicating to us.
    pub fn source_of(&self, from: Addr) -> Option<DcId> {
        match from {
            Addr::Replica(r) if self.peers.contains(&from) => Some(r.dc),
            _ => None,
        }
    }

    /// A group committed at `ct` (or, with `group` false, a heartbeat up to
    /// `ct`) from `from`: taken if new. A peer's stream is FIFO, so a group
    /// at or below what was received from it is one resent after a
    /// restart, and held already.
    pub fn incoming(&mut self, from: Addr, ct: Timestamp, group: bool) -> Incoming {
        let Some(dc) = self.source_of(from) else { return Incoming::Refuse };
        let i = usize::from(dc.0);
        if self.awaiting[i] || (group && ct <= self.received[i]) {
            return Incoming::Drop;
        }
        self.received[i] = self.received[i].max(ct);
        Incoming::Take(dc)
    }

    /// A group from DC `dc`, taken again from its record after a crash.
    pub fn restore_received(&mut self, dc: DcId, ct: Timestamp) {
        let i = usize::from(dc.0);
        self.received[i] = self.received[i].max(ct);
    }

    /// At every start, a restart after a crash included: ask each peer for
    /// its stream from what is held here, and ignore it until it answers.
    pub fn start<S, Q, G, T, R>(&mut self, out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>) {
        for &peer in &self.peers {
            let Addr::Replica(r) = peer else { continue };
            self.awaiting[usize::from(r.dc.0)] = true;
            out.send(peer, TxnMsg::Resume { have: self.received[usize::from(r.dc.0)], restarted: true });
        }
    }

    /// A peer asks for our stream from `have` on: the marker, then every
    /// group above it still kept, in commit order (later groups follow as
    /// they are released). If it restarted, what it had sent us may have
    /// been lost on the link too: ask it the same.
    pub fn on_resume<S, Q, G, T, R>(
        &mut self,
        from: Addr,
        have: Timestamp,
        restarted: bool,
        out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>,
    ) -> bool
    where
        W: Clone,
    {
        let Some(dc) = self.source_of(from) else { return false };
        let i = usize::from(dc.0);
        if restarted {
            self.awaiting[i] = true;
            out.send(from, TxnMsg::Resume { have: self.received[i], restarted: false });
        }
        self.acked[i] = self.acked[i].max(have);
        out.send_after_durable(from, TxnMsg::ResumeFrom { from: have });
        for (&ct, group) in self.sent.range(have.next()..) {
            out.send_after_durable(from, TxnMsg::Replicate { ct, txs: group.clone() });
        }
        self.forget_acknowledged();
        true
    }

    /// A peer's stream resumes here.
    pub fn on_resume_from(&mut self, from: Addr) -> bool {
        let Some(dc) = self.source_of(from) else { return false };
        self.awaiting[usize::from(dc.0)] = false;
        true
    }

    /// A peer durably holds our groups up to `upto`.
    pub fn on_ack(&mut self, from: Addr, upto: Timestamp) -> bool {
        let Some(dc) = self.source_of(from) else { return false };
        let i = usize::from(dc.0);
        self.acked[i] = self.acked[i].max(upto);
        self.forget_acknowledged();
        true
    }

    fn forget_acknowledged(&mut self) {
        let all = self.peers.iter().filter_map(|p| self.source_of(*p)).map(|dc| self.acked[usize::from(dc.0)]).min();
        if let Some(all) = all {
            self.sent = self.sent.split_off(&all.next());
        }
    }

    /// Now and then: acknowledge what arrived since the last time (once it
    /// is durable), and ask again for the streams still awaited (the
    /// question or its answer may have died with a peer).
    pub fn refresh<S, Q, G, T, R>(&mut self, out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>) {
        for &peer in &self.peers {
            let Addr::Replica(r) = peer else { continue };
            let i = usize::from(r.dc.0);
            if self.awaiting[i] {
                out.send(peer, TxnMsg::Resume { have: self.received[i], restarted: false });
            } else if self.received[i] > self.ack_sent[i] {
                self.ack_sent[i] = self.received[i];
                out.send_after_durable(peer, TxnMsg::Ack { upto: self.received[i] });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Out = Effects<TxnMsg<(), (), &'static str, ()>, (), ()>;

    #[test]
    fn groups_go_out_in_commit_order_and_only_below_the_bound() {
        let topology = Topology::full(2, 1).unwrap();
        let mut r = Replicator::new(ReplicaId::new(0, 0), &topology);
        for (ct, tx, name) in [(5, 2, "b"), (5, 1, "a"), (3, 9, "first"), (8, 1, "late")] {
            r.queue(Timestamp(ct), TxId(tx), name);
        }
        let (mut out, mut applied) = (Out::default(), Vec::new());
        assert!(r.release(Timestamp(7), |ct, g| applied.push((ct, g.to_vec())), &mut out));
        assert_eq!(applied, vec![(Timestamp(3), vec!["first"]), (Timestamp(5), vec!["a", "b"])]);
        assert_eq!(out.after_durable.len(), 2, "one Replicate per group, to the one peer, once durable");
        assert!(!r.is_idle(), "8 is above the bound");
        assert_eq!(r.source_of(Addr::Replica(ReplicaId::new(1, 0))), Some(DcId(1)));
        assert_eq!(r.source_of(Addr::Replica(ReplicaId::new(0, 0))), None);
    }
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    type Out = Effects<TxnMsg<(), (), &'static str, ()>, (), ()>;

    fn peer() -> Addr {
        Addr::Replica(ReplicaId::new(1, 0))
    }

    #[test]
    fn a_restarted_peer_gets_every_group_it_lacks_and_acknowledged_ones_are_forgotten() {
        let topology = Topology::full(2, 1).unwrap();
        let mut r = Replicator::new(ReplicaId::new(0, 0), &topology);
        for (ct, tx, name) in [(3, 1, "a"), (5, 2, "b"), (8, 3, "c")] {
            r.queue(Timestamp(ct), TxId(tx), name);
        }
        let mut out = Out::default();
        r.release(Timestamp(9), |_, _| {}, &mut out);
        assert_eq!(r.unacknowledged(), 3);
        assert!(r.on_ack(peer(), Timestamp(3)));
        assert_eq!(r.unacknowledged(), 2, "the group at 3 is held there");
        let mut out = Out::default();
        assert!(r.on_resume(peer(), Timestamp(3), true, &mut out));
        assert!(matches!(out.messages[..], [(_, TxnMsg::Resume { restarted: false, .. })]), "asked in return");
        let resent: Vec<_> = out.after_durable.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(
            resent,
            vec![
                TxnMsg::ResumeFrom { from: Timestamp(3) },
                TxnMsg::Replicate { ct: Timestamp(5), txs: vec!["b"] },
                TxnMsg::Replicate { ct: Timestamp(8), txs: vec!["c"] },
            ]
        );
    }

    #[test]
    fn a_stream_is_ignored_until_it_resumes_and_old_groups_are_dropped() {
        let topology = Topology::full(2, 1).unwrap();
        let mut r: Replicator<&str> = Replicator::new(ReplicaId::new(0, 0), &topology);
        let mut out = Out::default();
        r.start(&mut out);
        assert_eq!(r.incoming(peer(), Timestamp(5), true), Incoming::Drop, "before the peer resumes");
        assert!(r.on_resume_from(peer()));
        assert_eq!(r.incoming(peer(), Timestamp(5), true), Incoming::Take(DcId(1)));
        assert_eq!(r.incoming(peer(), Timestamp(5), true), Incoming::Drop, "held already");
        assert_eq!(r.incoming(peer(), Timestamp(4), false), Incoming::Take(DcId(1)), "a heartbeat is harmless");
        assert_eq!(r.incoming(Addr::Replica(ReplicaId::new(0, 0)), Timestamp(9), true), Incoming::Refuse);
    }
}
