//! A replica's replication streams to its replicas in the other DCs (its
//! peers), as they survive crashes. Each replica sends its peers groups of
//! transactions at increasing positions in its stream (the family: commit
//! times; EC: a sequence number); links are FIFO, so what a replica holds
//! of a peer's stream is everything up to the newest position it received.
//!
//! * A group leaves once the records before it are durable, and is kept
//!   until every peer acknowledges it: a peer that crashes before its copy
//!   is durable gets it again.
//! * A peer acknowledges (`Ack`) now and then what it durably holds.
//! * A (re)started replica asks each peer for its stream from what it holds
//!   (`Resume`), and ignores the stream until the answer (`ResumeFrom`, then
//!   every kept group above, in order). A replica that restarted lost what
//!   was on its links too, so the peer asks it the same in return.
//! * What a `Resume` says it holds counts as an acknowledgement (the peer
//!   forgets what is below it), so it leaves only once durable, as `Ack`
//!   does: a crash must not take back what it said.
//!
//! * Kept groups are bounded in memory: past `max_kept_bytes` the oldest
//!   are spilled to the driver's disk ([`crate::contract::spill`]). They
//!   leave memory, with a record saying how far, only once the driver says
//!   the batch is on disk — which it writes only after the groups' own
//!   records are durable, so neither a batch nor its record can outlive
//!   what it holds. A peer that resumes below what memory holds — one cut
//!   off for long — is sent those groups as they are read back, a batch at
//!   a time, the next one asked for only once the peer has acknowledged
//!   all but the last (so a catch-up holds about two batches, however
//!   long the spill), and nothing of the live stream (no group, no
//!   heartbeat) until it has them all: its link stays FIFO in position
//!   order. Spilled groups every peer acknowledged are forgotten.
//!
//! A protocol brings its messages ([`StreamMsg`]) and records
//! ([`StreamRecord`]) and makes the groups it takes durable; positions it
//! received are restored from its records.

pub use crate::contract::spill::DEFAULT_MAX_KEPT_BYTES;
use crate::contract::{Effects, Spill};
use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId, ReplicaId};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::Bound;

/// The messages that keep a stream going through crashes, the same for
/// every protocol (each carries them in a variant of its own messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control<K> {
    /// "I hold your stream up to `have`: send me what follows" — sent by a
    /// replica that (re)started, which ignores the peer's stream until the
    /// answer's `ResumeFrom`. `restarted`: what was on the links between
    /// the two may be lost — the sender restarted, or the peer's link to it
    /// shed its backlog — so the peer asks it the same in return.
    Resume { have: K, restarted: bool },
    /// The stream starts again: the groups above `from` follow, in order,
    /// then the live stream.
    ResumeFrom { from: K },
    /// "I durably hold your stream up to `upto`": the sender may forget it.
    Ack { upto: K },
}

/// The messages of a stream at positions `K` carrying transactions `W`, as
/// a protocol spells them.
pub trait StreamMsg<K, W> {
    /// A group of transactions at position `at` of the sender's stream.
    fn group(at: K, txs: Vec<W>) -> Self;
    /// A message of the stream's [`Control`].
    fn control(c: Control<K>) -> Self;
}

/// A position of a stream, and the key it is spilled under: keys order as
/// positions do.
pub trait Position: Copy + Ord + Default + Debug {
    fn key(self) -> u64;
}

impl Position for u64 {
    fn key(self) -> u64 {
        self
    }
}

impl Position for Timestamp {
    fn key(self) -> u64 {
        self.0
    }
}

/// The records of a stream, as a protocol spells them.
pub trait StreamRecord<K, W>: Sized {
    /// A kept group, as it is spilled.
    fn kept(at: K, txs: Vec<W>) -> Self;
    /// A spilled group read back; `None` for any other record.
    fn into_kept(self) -> Option<(K, Vec<W>)>;
    /// "The groups up to `upto` are spilled": persisted once the driver
    /// has a batch on disk, and kept in checkpoints, so that a restart
    /// knows what lies there.
    fn spilled(upto: K) -> Self;
}

/// A peer being sent spilled groups as they are read back.
#[derive(Clone, Copy, Debug)]
struct CatchUp<K> {
    /// The newest position sent to it.
    cursor: K,
    /// A batch above `cursor` is asked for.
    asked: bool,
    /// The next is asked for once the peer acknowledges this far (where
    /// the last batch began).
    gate: K,
}

/// What to do with a group (or, for the family, a heartbeat) from a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// New: take it (from this DC).
    Take(DcId),
    /// Already held, or the peer's stream is being resumed: drop it.
    Drop,
    /// Not a peer's: refuse it.
    Refuse,
}

/// The streams between a replica and its peers: the groups sent and not
/// yet acknowledged by all, and how far each peer's stream has come.
#[derive(Debug)]
pub struct PeerStreams<K, W> {
    peers: Vec<Addr>,
    /// Groups sent, by position, with their encoded size, until every peer
    /// acknowledges them or they are spilled.
    kept: BTreeMap<K, (Vec<W>, u64)>,
    /// The size of `kept`, and its bound.
    kept_bytes: u64,
    max_kept_bytes: u64,
    /// The newest position spilled: groups at or below it that a peer may
    /// lack are on the driver's disk, not in `kept`.
    spilled: K,
    /// Spilled positions at or below this are forgotten.
    spill_forgotten: K,
    /// A batch handed to the driver and not yet confirmed on disk: its
    /// groups stay in memory until it is.
    putting: Option<K>,
    /// Per DC: while its replica is sent spilled groups as they are read
    /// back, how far.
    catching_up: Vec<Option<CatchUp<K>>>,
    /// The newest position sent: positions only increase.
    newest: K,
    /// Per DC: how far that DC's replica has acknowledged our groups.
    acked: Vec<K>,
    /// Per DC: the newest position received from its replica (a group's,
    /// or one it says it has passed).
    received: Vec<K>,
    /// Per DC: the newest position the records say is held — a group's,
    /// or one the peer said it passed, once recorded
    /// ([`unrecorded_positions`](Self::unrecorded_positions));
    /// [`received`](Self::received) may be ahead by a position no record
    /// keeps yet.
    taken: Vec<K>,
    /// What we last acknowledged to each DC's replica.
    ack_sent: Vec<K>,
    /// Per DC: after a (re)start, that replica's stream is ignored until it
    /// says where it resumes.
    awaiting: Vec<bool>,
}

impl<K: Position, W: Serialize> PeerStreams<K, W> {
    /// The streams of replica `me`, keeping at most `max_kept_bytes` of
    /// groups in memory (encoded size) before spilling the oldest.
    pub fn new(me: ReplicaId, topology: &Topology, max_kept_bytes: u64) -> Self {
        let dcs = usize::from(topology.dc_count());
        PeerStreams {
            peers: topology.peers_of(me).into_iter().map(Addr::Replica).collect(),
            kept: BTreeMap::new(),
            kept_bytes: 0,
            max_kept_bytes,
            spilled: K::default(),
            spill_forgotten: K::default(),
            putting: None,
            catching_up: vec![None; dcs],
            newest: K::default(),
            acked: vec![K::default(); dcs],
            received: vec![K::default(); dcs],
            taken: vec![K::default(); dcs],
            ack_sent: vec![K::default(); dcs],
            awaiting: vec![false; dcs],
        }
    }

    /// The newest position sent (or kept to be sent).
    pub fn newest(&self) -> K {
        self.newest
    }

    /// The newest position received from DC `dc`'s replica.
    pub fn received_from(&self, dc: DcId) -> K {
        self.received.get(usize::from(dc.0)).copied().unwrap_or_default()
    }

    /// The replicas of this partition in the other DCs.
    pub fn peers(&self) -> &[Addr] {
        &self.peers
    }

    /// Groups sent and not yet acknowledged by every peer.
    pub fn unacknowledged(&self) -> usize {
        self.kept.len()
    }

    /// Bytes of groups kept in memory.
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes
    }

    /// Every group sent is acknowledged by every peer, and no peer's
    /// stream is awaited or being caught up.
    pub fn settled(&self) -> bool {
        self.kept.is_empty()
            && self.spilled <= self.spill_forgotten
            && !self.awaiting.iter().any(|&a| a)
            && self.catching_up.iter().all(Option::is_none)
    }

    /// The peers the live stream goes to: all but those being sent spilled
    /// groups, which get the live ones once they have those.
    pub fn live_peers(&self) -> impl Iterator<Item = Addr> + '_ {
        self.peers
            .iter()
            .copied()
            .filter(|p| !matches!(p, Addr::Replica(r) if self.catching_up[usize::from(r.dc.0)].is_some()))
    }

    /// Sends `txs` at position `at` to every live peer once the records
    /// before it are durable, and keeps it until every peer acknowledges it.
    pub fn send<M: StreamMsg<K, W>, T, R>(&mut self, at: K, txs: Vec<W>, out: &mut Effects<M, T, R>)
    where
        W: Clone,
    {
        if self.peers.is_empty() {
            return;
        }
        for peer in self.live_peers() {
            out.send_after_durable(peer, M::group(at, txs.clone()));
        }
        self.keep(at, txs);
    }

    /// Keeps `txs` at position `at` without sending it now: after a crash,
    /// a group taken again from its record goes to the peers that say they
    /// lack it. One spilled already is on disk, and stays there.
    pub fn keep(&mut self, at: K, txs: Vec<W>) {
        if self.peers.is_empty() || at <= self.spilled {
            return;
        }
        debug_assert!(at > self.newest, "positions start above the default and increase");
        self.newest = self.newest.max(at);
        let size = postcard::experimental::serialized_size(&txs).map_or(0, |n| n as u64);
        self.kept_bytes += size;
        if let Some((_, old)) = self.kept.insert(at, (txs, size)) {
            self.kept_bytes -= old;
        }
    }

    /// After a step (never while recovering): past the bound, the oldest
    /// kept groups, down to half of it, are handed to the driver to write
    /// to disk (one batch at a time; they stay in memory until it says
    /// they are there, [`PeerStreams::on_spilled`]); spilled groups every
    /// peer acknowledged are forgotten.
    pub fn spill_over<M, T, R: StreamRecord<K, W>>(&mut self, out: &mut Effects<M, T, R>)
    where
        W: Clone,
    {
        if self.kept_bytes > self.max_kept_bytes && self.putting.is_none() {
            let (mut batch, mut left) = (Vec::new(), self.kept_bytes);
            for (&at, (txs, size)) in &self.kept {
                if left <= self.max_kept_bytes / 2 {
                    break;
                }
                left -= size;
                batch.push((at.key(), R::kept(at, txs.clone())));
                self.putting = Some(at);
            }
            out.spill.push(Spill::Put(batch));
        }
        // After every step: only while something spilled may be needed.
        if self.spilled > self.spill_forgotten {
            let all = self.acknowledged_by_all().unwrap_or_default().min(self.spilled);
            if all > self.spill_forgotten {
                self.spill_forgotten = all;
                out.spill.push(Spill::Forget { upto: all.key() });
            }
        }
    }

    /// The driver has the batch up to `upto` on disk: its groups leave
    /// memory, and a record says how far they went.
    pub fn on_spilled<M, T, R: StreamRecord<K, W>>(&mut self, upto: u64, out: &mut Effects<M, T, R>) {
        let Some(at) = self.putting.filter(|p| p.key() == upto) else { return };
        self.putting = None;
        self.restore_spilled(at);
        out.persist(R::spilled(at));
    }

    /// A record says the groups up to `upto` were spilled: those kept in
    /// memory are dropped (the disk has them).
    pub fn restore_spilled(&mut self, upto: K) {
        self.spilled = self.spilled.max(upto);
        self.newest = self.newest.max(upto);
        while let Some(entry) = self.kept.first_entry() {
            if *entry.key() > upto {
                break;
            }
            self.kept_bytes -= entry.remove().1;
        }
    }

    /// For a checkpoint: how far groups were spilled, if any may still be
    /// needed.
    pub fn spilled_upto(&self) -> Option<K> {
        (self.spilled > self.spill_forgotten).then_some(self.spilled)
    }

    /// The DC of `from` if it is a replica of this partition in another DC;
    /// anything else has no business replicating to us.
    pub fn source_of(&self, from: Addr) -> Option<DcId> {
        match from {
            Addr::Replica(r) if self.peers.contains(&from) => Some(r.dc),
            _ => None,
        }
    }

    /// A group at position `at` (or, with `group` false, a position the
    /// peer says it has passed) from `from`: taken if new. A peer's stream
    /// is FIFO, so a group at or below what was received from it is one
    /// resent after a restart, and held already.
    pub fn incoming(&mut self, from: Addr, at: K, group: bool) -> Incoming {
        let Some(dc) = self.source_of(from) else { return Incoming::Refuse };
        let i = usize::from(dc.0);
        if self.awaiting[i] || (group && at <= self.received[i]) {
            return Incoming::Drop;
        }
        self.received[i] = self.received[i].max(at);
        if group {
            self.taken[i] = self.taken[i].max(at);
        }
        Incoming::Take(dc)
    }

    /// A group from DC `dc`, taken again from its record after a crash.
    pub fn restore_received(&mut self, dc: DcId, at: K) {
        let i = usize::from(dc.0);
        self.received[i] = self.received[i].max(at);
        self.taken[i] = self.taken[i].max(at);
    }

    /// Positions peers said they passed that no record keeps yet, each
    /// returned once and counted as recorded from then on. A protocol
    /// records them before it tells its DC how far it has received (its
    /// stabilization reports): a restart must not take back what a report
    /// said, or the DC's stable time could go back below a snapshot that
    /// versions were already collected for.
    pub fn unrecorded_positions(&mut self) -> Vec<(DcId, K)> {
        let mut out = Vec::new();
        for peer in &self.peers {
            let Some(dc) = self.source_of(*peer) else { continue };
            let i = usize::from(dc.0);
            if self.received[i] > self.taken[i] {
                self.taken[i] = self.received[i];
                out.push((dc, self.received[i]));
            }
        }
        out
    }

    /// For a checkpoint: per peer's DC, the newest position of a group
    /// taken from it (where its records put the stream), if any.
    pub fn taken(&self) -> Vec<(DcId, K)> {
        self.peers
            .iter()
            .filter_map(|&p| self.source_of(p))
            .map(|dc| (dc, self.taken[usize::from(dc.0)]))
            .filter(|&(_, at)| at > K::default())
            .collect()
    }

    /// For a checkpoint: the groups kept for the peers, oldest first. A
    /// group every peer acknowledged is durable at every peer, so none
    /// needs it again.
    pub fn kept(&self) -> impl Iterator<Item = (&K, &Vec<W>)> {
        self.kept.iter().map(|(at, (txs, _))| (at, txs))
    }

    /// At every start, a restart after a crash included: ask each peer for
    /// its stream from what is held here, and ignore it until it answers.
    pub fn start<M: StreamMsg<K, W>, T, R>(&mut self, out: &mut Effects<M, T, R>) {
        for &peer in &self.peers {
            let Addr::Replica(r) = peer else { continue };
            let i = usize::from(r.dc.0);
            self.awaiting[i] = true;
            out.send_after_durable(peer, M::control(Control::Resume { have: self.received[i], restarted: true }));
        }
    }

    /// A control message from `from`; false if `from` is not a peer.
    pub fn on_control<M: StreamMsg<K, W>, T, R>(
        &mut self,
        from: Addr,
        c: Control<K>,
        out: &mut Effects<M, T, R>,
    ) -> bool
    where
        W: Clone,
    {
        match c {
            Control::Resume { have, restarted } => self.on_resume(from, have, restarted, out),
            Control::ResumeFrom { .. } => self.on_resume_from(from),
            Control::Ack { upto } => {
                let known = self.on_ack(from, upto);
                self.pace(out);
                known
            }
        }
    }

    /// A peer asks for our stream from `have` on: the marker, then every
    /// group above it still kept, in order (later groups follow as they are
    /// sent). If it restarted, what it had sent us may have been lost on
    /// the link too: ask it the same. False if `from` is not a peer.
    pub fn on_resume<M: StreamMsg<K, W>, T, R>(
        &mut self,
        from: Addr,
        have: K,
        restarted: bool,
        out: &mut Effects<M, T, R>,
    ) -> bool
    where
        W: Clone,
    {
        let Some(dc) = self.source_of(from) else { return false };
        let i = usize::from(dc.0);
        if restarted {
            self.awaiting[i] = true;
            out.send_after_durable(from, M::control(Control::Resume { have: self.received[i], restarted: false }));
        }
        self.acked[i] = self.acked[i].max(have);
        out.send_after_durable(from, M::control(Control::ResumeFrom { from: have }));
        if self.spilled > have {
            // Some of what it lacks is on disk: read back first, in order.
            self.catching_up[i] = Some(CatchUp { cursor: have, asked: true, gate: have });
            out.spill.push(Spill::Get { after: have.key() });
        } else {
            self.catching_up[i] = None;
            self.send_kept(from, have, out);
        }
        self.forget_acknowledged();
        true
    }

    fn send_kept<M: StreamMsg<K, W>, T, R>(&self, to: Addr, above: K, out: &mut Effects<M, T, R>)
    where
        W: Clone,
    {
        for (&at, (txs, _)) in self.kept.range((Bound::Excluded(above), Bound::Unbounded)) {
            out.send_after_durable(to, M::group(at, txs.clone()));
        }
    }

    /// The driver read back spilled groups above `after`: they go to the
    /// peers being caught up from there, and the next batch is asked for —
    /// or, with none left, the groups in memory follow and those peers are
    /// live again.
    pub fn on_unspilled<M: StreamMsg<K, W>, T, R: StreamRecord<K, W>>(
        &mut self,
        after: u64,
        entries: Vec<(u64, R)>,
        out: &mut Effects<M, T, R>,
    ) where
        W: Clone,
    {
        let groups: Vec<(K, Vec<W>)> = entries.into_iter().filter_map(|(_, r)| r.into_kept()).collect();
        for i in 0..self.peers.len() {
            let peer = self.peers[i];
            let Addr::Replica(r) = peer else { continue };
            let d = usize::from(r.dc.0);
            let Some(mut c) = self.catching_up[d].filter(|c| c.asked && c.cursor.key() == after) else { continue };
            let start = c.cursor;
            for (at, txs) in &groups {
                if *at > c.cursor {
                    out.send_after_durable(peer, M::group(*at, txs.clone()));
                    c.cursor = *at;
                }
            }
            if c.cursor > start {
                // The next batch once the peer holds all before this one.
                self.catching_up[d] = Some(CatchUp { asked: false, gate: start, ..c });
            } else {
                // Nothing more on disk above it: memory holds the rest.
                self.send_kept(peer, c.cursor, out);
                self.catching_up[d] = None;
            }
        }
        self.pace(out);
    }

    /// Asks for the next batch for each peer being caught up that has
    /// acknowledged all it was sent before the last batch.
    fn pace<M, T, R>(&mut self, out: &mut Effects<M, T, R>) {
        let mut asks = Vec::new();
        for (d, c) in self.catching_up.iter_mut().enumerate() {
            if let Some(c) = c.as_mut().filter(|c| !c.asked && self.acked[d] >= c.gate) {
                c.asked = true;
                asks.push(c.cursor.key());
            }
        }
        asks.sort_unstable();
        asks.dedup();
        out.spill.extend(asks.into_iter().map(|after| Spill::Get { after }));
    }

    /// What `from` sent may have been lost on the way (its link dropped a
    /// backlog, and both sides live on): its groups, and its
    /// acknowledgements of ours. Its stream is ignored until it resumes it
    /// from what is held here, as after a restart, and it is asked to
    /// resume ours in return — its answer says how far it holds ours, the
    /// acknowledgement that was lost (sent once, an `Ack` is not sent
    /// again for the same position). False if `from` is not a peer.
    pub fn on_peer_lost<M: StreamMsg<K, W>, T, R>(&mut self, from: Addr, out: &mut Effects<M, T, R>) -> bool {
        let Some(dc) = self.source_of(from) else { return false };
        let i = usize::from(dc.0);
        self.awaiting[i] = true;
        out.send_after_durable(from, M::control(Control::Resume { have: self.received[i], restarted: true }));
        true
    }

    /// A peer's stream resumes here. False if `from` is not a peer.
    pub fn on_resume_from(&mut self, from: Addr) -> bool {
        let Some(dc) = self.source_of(from) else { return false };
        self.awaiting[usize::from(dc.0)] = false;
        true
    }

    /// A peer durably holds our groups up to `upto`. False if `from` is not
    /// a peer.
    pub fn on_ack(&mut self, from: Addr, upto: K) -> bool {
        let Some(dc) = self.source_of(from) else { return false };
        let i = usize::from(dc.0);
        self.acked[i] = self.acked[i].max(upto);
        self.forget_acknowledged();
        true
    }

    /// How far every peer acknowledged our groups (`None` without peers).
    fn acknowledged_by_all(&self) -> Option<K> {
        self.peers.iter().filter_map(|p| self.source_of(*p)).map(|dc| self.acked[usize::from(dc.0)]).min()
    }

    fn forget_acknowledged(&mut self) {
        let Some(all) = self.acknowledged_by_all() else { return };
        while let Some(entry) = self.kept.first_entry() {
            if *entry.key() > all {
                break;
            }
            self.kept_bytes -= entry.remove().1;
        }
    }

    /// Now and then: acknowledge what arrived since the last time (once it
    /// is durable), and ask again for the streams still awaited (the
    /// question or its answer may have died with a peer).
    pub fn refresh<M: StreamMsg<K, W>, T, R>(&mut self, out: &mut Effects<M, T, R>) {
        for &peer in &self.peers {
            let Addr::Replica(r) = peer else { continue };
            let i = usize::from(r.dc.0);
            if self.awaiting[i] {
                out.send_after_durable(peer, M::control(Control::Resume { have: self.received[i], restarted: false }));
            } else if self.received[i] > self.ack_sent[i] {
                self.ack_sent[i] = self.received[i];
                out.send_after_durable(peer, M::control(Control::Ack { upto: self.received[i] }));
            }
        }
        // The Ack that opens a catch-up's next batch may have been lost.
        self.pace(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Msg {
        Group(u64, Vec<&'static str>),
        Control(Control<u64>),
    }

    impl StreamMsg<u64, &'static str> for Msg {
        fn group(at: u64, txs: Vec<&'static str>) -> Self {
            Msg::Group(at, txs)
        }
        fn control(c: Control<u64>) -> Self {
            Msg::Control(c)
        }
    }

    fn resume(have: u64, restarted: bool) -> Msg {
        Msg::Control(Control::Resume { have, restarted })
    }
    fn resume_from(from: u64) -> Msg {
        Msg::Control(Control::ResumeFrom { from })
    }
    fn ack(upto: u64) -> Msg {
        Msg::Control(Control::Ack { upto })
    }

    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Rec {
        Kept(u64, Vec<&'static str>),
        Spilled(u64),
    }

    impl StreamRecord<u64, &'static str> for Rec {
        fn kept(at: u64, txs: Vec<&'static str>) -> Self {
            Rec::Kept(at, txs)
        }
        fn into_kept(self) -> Option<(u64, Vec<&'static str>)> {
            match self {
                Rec::Kept(at, txs) => Some((at, txs)),
                Rec::Spilled(_) => None,
            }
        }
        fn spilled(upto: u64) -> Self {
            Rec::Spilled(upto)
        }
    }

    type Out = Effects<Msg, (), Rec>;

    fn peer() -> Addr {
        Addr::Replica(ReplicaId::new(1, 0))
    }

    #[test]
    fn a_restarted_peer_gets_every_group_it_lacks_and_acknowledged_ones_are_forgotten() {
        let topology = Topology::full(2, 1).unwrap();
        let mut s = PeerStreams::new(ReplicaId::new(0, 0), &topology, DEFAULT_MAX_KEPT_BYTES);
        let mut out = Out::default();
        for (at, name) in [(3, "a"), (5, "b"), (8, "c")] {
            s.send(at, vec![name], &mut out);
        }
        assert_eq!(out.after_durable.len(), 3, "each group to the one peer, once durable");
        assert_eq!(s.unacknowledged(), 3);
        assert!(s.on_ack(peer(), 3));
        assert_eq!(s.unacknowledged(), 2, "the group at 3 is held there");
        let mut out = Out::default();
        assert!(s.on_resume(peer(), 3, true, &mut out));
        assert!(out.messages.is_empty(), "nothing leaves before what it says is durable");
        let resent: Vec<_> = out.after_durable.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(
            resent,
            vec![resume(0, false), resume_from(3), Msg::Group(5, vec!["b"]), Msg::Group(8, vec!["c"])],
            "asked in return — `have` is an acknowledgement, so only once durable — then the stream resent"
        );
        assert!(!s.settled());
        assert!(s.on_ack(peer(), 8) && s.on_resume_from(peer()));
        assert!(s.settled(), "everything acknowledged, nothing awaited");
    }

    #[test]
    fn a_stream_is_ignored_until_it_resumes_and_old_groups_are_dropped() {
        let topology = Topology::full(2, 1).unwrap();
        let mut s: PeerStreams<u64, &str> = PeerStreams::new(ReplicaId::new(0, 0), &topology, DEFAULT_MAX_KEPT_BYTES);
        let mut out = Out::default();
        s.start(&mut out);
        assert_eq!(s.incoming(peer(), 5, true), Incoming::Drop, "before the peer resumes");
        assert!(s.on_resume_from(peer()));
        assert_eq!(s.incoming(peer(), 5, true), Incoming::Take(DcId(1)));
        assert_eq!(s.incoming(peer(), 5, true), Incoming::Drop, "held already");
        assert_eq!(s.incoming(peer(), 4, false), Incoming::Take(DcId(1)), "a position passed is harmless");
        assert_eq!(s.incoming(Addr::Replica(ReplicaId::new(0, 0)), 9, true), Incoming::Refuse);
        let mut out = Out::default();
        s.refresh(&mut out);
        assert_eq!(out.after_durable, vec![(peer(), ack(5))], "acknowledged once durable");
        s.refresh(&mut out);
        assert_eq!(out.after_durable.len(), 1, "and only once");
    }

    #[test]
    fn without_peers_nothing_is_kept() {
        let topology = Topology::full(1, 1).unwrap();
        let mut s = PeerStreams::new(ReplicaId::new(0, 0), &topology, DEFAULT_MAX_KEPT_BYTES);
        let mut out = Out::default();
        s.send(1, vec!["a"], &mut out);
        s.keep(2, vec!["b"]);
        assert!(out.is_empty() && s.settled());
    }

    fn group(at: u64, name: &'static str) -> Msg {
        Msg::Group(at, vec![name])
    }

    /// Sends one group per position, each 3 bytes encoded, with a bound of
    /// 7 bytes: the third goes over it. The driver has the batch on disk.
    fn spilling_streams() -> (PeerStreams<u64, &'static str>, Out) {
        let topology = Topology::full(2, 1).unwrap();
        let mut s = PeerStreams::new(ReplicaId::new(0, 0), &topology, 7);
        let mut out = Out::default();
        for (at, name) in [(1, "a"), (2, "b"), (3, "c")] {
            s.send(at, vec![name], &mut out);
            s.spill_over(&mut out);
        }
        assert_eq!(s.kept().count(), 3, "nothing leaves memory before the disk has it");
        assert_eq!(s.kept_bytes(), 9);
        assert!(out.records.is_empty(), "nor is a record of it made");
        s.spill_over(&mut out);
        assert_eq!(out.spill.len(), 1, "one batch at a time");
        s.on_spilled(1, &mut out);
        assert_eq!(s.kept().count(), 3, "a batch not asked for changes nothing");
        s.on_spilled(2, &mut out);
        (s, out)
    }

    #[test]
    fn past_the_bound_the_oldest_groups_are_spilled_with_a_record_of_how_far() {
        let (s, out) = spilling_streams();
        assert_eq!(
            out.spill,
            vec![Spill::Put(vec![(1, Rec::Kept(1, vec!["a"])), (2, Rec::Kept(2, vec!["b"]))])],
            "down to half the bound, oldest first"
        );
        assert_eq!(out.records, vec![Rec::Spilled(2)], "recorded once on disk");
        assert_eq!(s.kept().map(|(at, _)| *at).collect::<Vec<_>>(), vec![3]);
        assert_eq!(s.kept_bytes(), 3, "6 of the 9 bytes left memory");
        assert_eq!(s.spilled_upto(), Some(2));
        assert_eq!(out.after_durable.len(), 3, "every group went out live first");
    }

    #[test]
    fn a_peer_behind_the_spill_gets_it_read_back_in_order_before_any_live_group() {
        let (mut s, _) = spilling_streams();
        let mut out = Out::default();
        assert!(s.on_resume(peer(), 0, false, &mut out));
        assert_eq!(out.after_durable, vec![(peer(), resume_from(0))], "nothing from memory yet");
        assert_eq!(out.spill, vec![Spill::Get { after: 0 }]);
        assert_eq!(s.live_peers().count(), 0, "no heartbeat may pass the groups on disk");

        // A live group meanwhile is kept for it, not sent.
        let mut out = Out::default();
        s.send(4, vec!["d"], &mut out);
        assert!(out.after_durable.is_empty());

        // The first batch read back, and the next asked for.
        let mut out = Out::default();
        s.on_unspilled(0, vec![(1, Rec::Kept(1, vec!["a"])), (2, Rec::Kept(2, vec!["b"]))], &mut out);
        assert_eq!(out.after_durable, vec![(peer(), group(1, "a")), (peer(), group(2, "b"))]);
        assert_eq!(out.spill, vec![Spill::Get { after: 2 }]);

        // An answer to a question nobody asks any more changes nothing.
        let mut stale = Out::default();
        s.on_unspilled(0, vec![(1, Rec::Kept(1, vec!["a"]))], &mut stale);
        assert!(stale.is_empty());

        // Nothing more on disk: memory follows, and the peer is live again.
        let mut out = Out::default();
        s.on_unspilled(2, vec![], &mut out);
        assert_eq!(out.after_durable, vec![(peer(), group(3, "c")), (peer(), group(4, "d"))]);
        assert!(out.spill.is_empty());
        assert_eq!(s.live_peers().collect::<Vec<_>>(), vec![peer()]);
    }

    #[test]
    fn a_catch_up_asks_for_the_next_batch_only_once_the_peer_holds_all_but_the_last() {
        let (mut s, _) = spilling_streams();
        let mut out = Out::default();
        assert!(s.on_resume(peer(), 0, false, &mut out));
        let mut out = Out::default();
        s.on_unspilled(0, vec![(1, Rec::Kept(1, vec!["a"]))], &mut out);
        assert_eq!(out.spill, vec![Spill::Get { after: 1 }], "the second at once: the first began where it stood");
        let mut out = Out::default();
        s.on_unspilled(1, vec![(2, Rec::Kept(2, vec!["b"]))], &mut out);
        assert_eq!(out.after_durable, vec![(peer(), group(2, "b"))]);
        assert!(out.spill.is_empty(), "the third waits until the peer holds the first");
        let mut out = Out::default();
        s.refresh(&mut out);
        assert!(out.spill.is_empty());
        assert!(s.on_control(peer(), Control::Ack { upto: 1 }, &mut out));
        assert_eq!(out.spill, vec![Spill::Get { after: 2 }]);
    }

    #[test]
    fn a_peer_above_the_spill_is_served_from_memory_and_acknowledged_spills_are_forgotten() {
        let (mut s, _) = spilling_streams();
        let mut out = Out::default();
        assert!(s.on_resume(peer(), 2, false, &mut out));
        assert_eq!(out.after_durable, vec![(peer(), resume_from(2)), (peer(), group(3, "c"))]);
        assert!(out.spill.is_empty(), "nothing to read back");
        let mut out = Out::default();
        s.spill_over(&mut out);
        assert_eq!(out.spill, vec![Spill::Forget { upto: 2 }], "its `have` acknowledged the spilled groups");
        assert_eq!(s.spilled_upto(), None);
        let mut again = Out::default();
        s.spill_over(&mut again);
        assert!(again.spill.is_empty(), "forgotten once");
        assert!(s.on_ack(peer(), 3));
        assert!(s.settled());
    }

    #[test]
    fn a_restart_drops_from_memory_what_its_records_say_is_spilled() {
        let topology = Topology::full(2, 1).unwrap();
        let mut s: PeerStreams<u64, &str> = PeerStreams::new(ReplicaId::new(0, 0), &topology, 7);
        // Replayed: groups rebuilt from records, then the record of a spill.
        s.keep(1, vec!["a"]);
        s.keep(2, vec!["b"]);
        s.restore_spilled(2);
        s.keep(2, vec!["b"]);
        s.keep(3, vec!["c"]);
        assert_eq!(s.kept().map(|(at, _)| *at).collect::<Vec<_>>(), vec![3], "what is on disk stays there");
        let mut out = Out::default();
        assert!(s.on_resume(peer(), 1, false, &mut out));
        assert_eq!(out.spill, vec![Spill::Get { after: 1 }]);
    }
}
