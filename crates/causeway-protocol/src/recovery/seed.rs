//! Re-seeding: a replica whose disk is gone gets its partition's state back
//! from the replicas that still hold it, instead of coming back empty.
//!
//! What it lost is, under full replication, held elsewhere — all but what
//! it held alone (its own DC's commits that no peer had received yet):
//!
//! * every other DC's transactions of the partition: that DC's replica
//!   (its peer) holds them, up to the newest position of its stream;
//! * its own DC's transactions: each peer holds them up to where it has
//!   received its stream; the peer that has received the most is asked
//!   for them, and what it holds beyond the others is kept to be resent
//!   to them, as the lost replica would have;
//! * how far its clock and its transaction ids had gone: no replica knows
//!   exactly, but every timestamp and id that reached another replica is
//!   below what the peers and the replicas of its own DC (its siblings)
//!   have seen — their clocks, and the ids of the transactions they hold
//!   prepared for it. A timestamp or id that reached no one is harmless to
//!   hand out again.
//!
//! The replica asks each of them ([`SeedMsg::Ask`]); a peer answers with
//! the groups it holds of the two DCs, in several messages, then the
//! [`SeedFacts`]; a sibling with the facts alone. Each answer leaves once
//! what it says is durable where it was taken (a crash there must not take
//! it back). An answerer that goes silent before it is done (it crashed) is
//! asked again, and its partial answer dropped. When every one of them has
//! answered, the protocol turns the answers into records
//! ([`Seed::own_dc_source`] says where its own DC's transactions come
//! from), makes them durable and rebuilds itself from them, as a recovery
//! does; then its streams resume as after any restart.
//!
//! This module is the asking and the collecting, the same for every
//! protocol; what a group holds and how answers become records is the
//! protocol's.

use crate::contract::Effects;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most key and value bytes one [`SeedMsg::Groups`] carries (one group
/// may exceed it: a group is never split). Well under the transport's
/// frame size.
pub const SEED_BATCH_BYTES: usize = 1 << 20;

/// How long an answerer may say nothing before it is asked again (it may
/// have crashed): longer than a round trip between DCs and a sync.
pub const SEED_PATIENCE_US: u64 = 2_000_000;

/// The messages of a re-seed, carried in a variant of a protocol's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeedMsg<K, W> {
    /// From a replica that lost its state: "tell me what you hold of mine".
    /// `attempt` names the question; the answer repeats it.
    Ask { attempt: u32 },
    /// Part of a peer's answer: groups of transactions it holds.
    Groups { attempt: u32, groups: Vec<SeedGroup<K, W>> },
    /// The end of an answer.
    Done { attempt: u32, facts: SeedFacts<K> },
}

/// Transactions of DC `source` at position `at` of its replica's stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedGroup<K, W> {
    pub source: DcId,
    pub at: K,
    pub txs: Vec<W>,
}

/// What an answerer knows besides its groups.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedFacts<K> {
    /// A peer: the newest position of its own stream that it has sent; its
    /// groups hold its DC's transactions up to it, and the rest follows in
    /// its stream. A sibling: the default.
    pub newest: K,
    /// A peer: how far it has received the asker's stream. A sibling: the
    /// default.
    pub received: K,
    /// The answerer's clock: every timestamp of the asker's it has seen is
    /// at or below it.
    pub clock: Timestamp,
    /// Every transaction id of the asker's that the answerer holds has a
    /// counter below this.
    pub txids_below: u64,
    /// A peer: every version it has collected is superseded by one whose
    /// timestamps are at or below this. A read at a snapshot below it may
    /// need what it collected; the asker does not serve such reads.
    pub collected_upto: Timestamp,
    /// A sibling: transactions the asker coordinated that committed here
    /// and that another partition may still hold prepared, with their
    /// commit times — the decisions the lost replica would have told a
    /// cohort that asks.
    pub decided: Vec<(TxId, Timestamp)>,
}

/// One answer, as it arrives.
#[derive(Debug)]
struct Answer<K, W> {
    attempt: u32,
    groups: Vec<SeedGroup<K, W>>,
    facts: Option<SeedFacts<K>>,
    /// When it was last asked, or something of its answer last arrived.
    heard_at: PhysicalMicros,
}

/// A replica collecting its seed: whom it asked and what they answered.
#[derive(Debug)]
pub struct Seeding<K, W> {
    me: ReplicaId,
    answers: BTreeMap<Addr, Answer<K, W>>,
}

/// Every answer, once each has come.
#[derive(Debug)]
pub struct Seed<K, W> {
    me: ReplicaId,
    /// Per answerer, its groups and facts.
    pub answers: BTreeMap<Addr, Answered<K, W>>,
}

/// One answer, complete: the groups, then the facts.
pub type Answered<K, W> = (Vec<SeedGroup<K, W>>, SeedFacts<K>);

impl<K: Copy + Ord + Default, W> Seeding<K, W> {
    /// A replica that will ask its peers (in the other DCs) and siblings
    /// (the other partitions of its DC).
    pub fn new(me: ReplicaId, topology: &Topology) -> Self {
        let mut answers = BTreeMap::new();
        let siblings = topology.partitions().map(|p| ReplicaId::at(me.dc, p)).filter(|&r| r != me);
        for r in topology.peers_of(me).into_iter().chain(siblings) {
            answers.insert(Addr::Replica(r), Answer { attempt: 0, groups: Vec::new(), facts: None, heard_at: 0 });
        }
        Seeding { me, answers }
    }

    /// Asks every one not done yet that has said nothing for
    /// [`SEED_PATIENCE_US`] (at the start: all of them) — anew, dropping
    /// what a silent one sent before. Called at the start and now and then
    /// after.
    pub fn retry<M: From<SeedMsg<K, W>>, T, R>(&mut self, now: PhysicalMicros, out: &mut Effects<M, T, R>) {
        for (&to, answer) in &mut self.answers {
            if answer.facts.is_some() {
                continue;
            }
            if answer.attempt == 0 || now.saturating_sub(answer.heard_at) >= SEED_PATIENCE_US {
                // The first question of an incarnation is numbered from its
                // clock, so that an answer meant for an earlier one (which
                // also started from 1) is not taken for this one's.
                answer.attempt = match answer.attempt {
                    0 => (now / 1_000) as u32 | 1,
                    n => n.wrapping_add(1),
                };
                answer.groups.clear();
                answer.heard_at = now;
                out.send(to, SeedMsg::Ask { attempt: answer.attempt }.into());
            }
        }
    }

    /// A message of an answer. False if `from` was not asked, or sent
    /// groups though it is not a peer, or groups of a DC it may not speak
    /// for: no honest replica does. Answers to an older question are
    /// dropped.
    pub fn on_answer(&mut self, now: PhysicalMicros, from: Addr, msg: SeedMsg<K, W>) -> bool {
        let me = self.me;
        let Some(answer) = self.answers.get_mut(&from) else { return false };
        let Addr::Replica(answerer) = from else { return false };
        match msg {
            SeedMsg::Ask { .. } => return false,
            SeedMsg::Groups { attempt, groups } => {
                let allowed =
                    |g: &SeedGroup<K, W>| answerer.dc != me.dc && (g.source == answerer.dc || g.source == me.dc);
                if !groups.iter().all(allowed) {
                    return false;
                }
                if attempt == answer.attempt && answer.facts.is_none() {
                    answer.groups.extend(groups);
                    answer.heard_at = now;
                }
            }
            SeedMsg::Done { attempt, facts } => {
                if attempt == answer.attempt && answer.facts.is_none() {
                    answer.facts = Some(facts);
                    answer.heard_at = now;
                }
            }
        }
        true
    }

    /// Whether every one asked has answered.
    pub fn is_complete(&self) -> bool {
        self.answers.values().all(|a| a.facts.is_some())
    }

    /// Those still to answer.
    pub fn waiting_for(&self) -> Vec<Addr> {
        self.answers.iter().filter(|(_, a)| a.facts.is_none()).map(|(&to, _)| to).collect()
    }

    /// The answers, once [complete](Self::is_complete).
    pub fn finish(self) -> Option<Seed<K, W>> {
        let mut answers = BTreeMap::new();
        for (from, a) in self.answers {
            answers.insert(from, (a.groups, a.facts?));
        }
        Some(Seed { me: self.me, answers })
    }
}

impl<K: Copy + Ord + Default, W> Seed<K, W> {
    /// The replica that asked.
    pub fn me(&self) -> ReplicaId {
        self.me
    }

    fn peers(&self) -> impl Iterator<Item = (DcId, &Vec<SeedGroup<K, W>>, &SeedFacts<K>)> {
        self.answers.iter().filter_map(move |(from, (groups, facts))| match from {
            Addr::Replica(r) if r.dc != self.me.dc => Some((r.dc, groups, facts)),
            _ => None,
        })
    }

    /// The peer whose groups of the asker's own DC are taken — the one
    /// that has received the most of its stream — and the least any peer
    /// has received: the groups above it are kept to be resent.
    pub fn own_dc_source(&self) -> Option<(DcId, K)> {
        let best = self.peers().max_by_key(|(dc, _, f)| (f.received, std::cmp::Reverse(*dc)))?.0;
        let least = self.peers().map(|(_, _, f)| f.received).min()?;
        Some((best, least))
    }

    /// Each peer's groups of its own DC, with where its stream resumes.
    pub fn peer_groups(&self) -> impl Iterator<Item = (DcId, K, impl Iterator<Item = &SeedGroup<K, W>>)> {
        self.peers().map(|(dc, groups, facts)| (dc, facts.newest, groups.iter().filter(move |g| g.source == dc)))
    }

    /// The groups of the asker's own DC from the peer in `dc`.
    pub fn own_groups_from(&self, dc: DcId) -> impl Iterator<Item = &SeedGroup<K, W>> {
        let me = self.me.dc;
        self.peers()
            .filter(move |(d, _, _)| *d == dc)
            .flat_map(move |(_, g, _)| g.iter().filter(move |g| g.source == me))
    }

    /// Where the clock and the transaction ids resume: above every
    /// timestamp and id of the lost replica's that anyone has seen.
    pub fn resume_points(&self, position: impl Fn(K) -> Timestamp) -> (Timestamp, u64) {
        let facts = self.answers.values().map(|(_, f)| f);
        let clock = facts.clone().map(|f| f.clock.max(position(f.received)).max(position(f.newest))).max();
        let txids = facts.map(|f| f.txids_below).max();
        (clock.unwrap_or(Timestamp::ZERO), txids.unwrap_or(0))
    }

    /// Below what snapshot the asker may lack versions: the highest bound
    /// of what the peers have collected.
    pub fn horizon(&self) -> Timestamp {
        self.answers.values().map(|(_, f)| f.collected_upto).max().unwrap_or(Timestamp::ZERO)
    }

    /// The decisions the siblings hold of the asker's transactions.
    pub fn decided(&self) -> impl Iterator<Item = (TxId, Timestamp)> + '_ {
        self.answers.values().flat_map(|(_, f)| f.decided.iter().copied())
    }
}

/// Splits `groups` into [`SeedMsg::Groups`] of about [`SEED_BATCH_BYTES`]
/// each (`bytes` sizes one), sent to `to` once what they say is durable.
pub fn answer<K, W, M: From<SeedMsg<K, W>>, T, R>(
    to: Addr,
    attempt: u32,
    groups: impl IntoIterator<Item = (SeedGroup<K, W>, usize)>,
    facts: SeedFacts<K>,
    out: &mut Effects<M, T, R>,
) {
    let (mut batch, mut bytes) = (Vec::new(), 0);
    for (group, size) in groups {
        if !batch.is_empty() && bytes + size > SEED_BATCH_BYTES {
            out.send_after_durable(to, SeedMsg::Groups { attempt, groups: std::mem::take(&mut batch) }.into());
            bytes = 0;
        }
        bytes += size;
        batch.push(group);
    }
    if !batch.is_empty() {
        out.send_after_durable(to, SeedMsg::Groups { attempt, groups: batch }.into());
    }
    out.send_after_durable(to, SeedMsg::Done { attempt, facts }.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    type Msg = SeedMsg<u64, &'static str>;
    type Out = Effects<Msg, (), ()>;

    fn at(dc: u16, p: u32) -> Addr {
        Addr::Replica(ReplicaId::new(dc, p))
    }

    fn group(source: u16, at: u64, tx: &'static str) -> SeedGroup<u64, &'static str> {
        SeedGroup { source: DcId(source), at, txs: vec![tx] }
    }

    fn facts(newest: u64, received: u64, clock: u64, txids_below: u64) -> SeedFacts<u64> {
        SeedFacts { newest, received, clock: Timestamp(clock), txids_below, ..SeedFacts::default() }
    }

    #[test]
    fn every_peer_and_sibling_is_asked_and_a_silent_one_is_asked_anew() {
        let topology = Topology::full(3, 2).unwrap();
        let mut s: Seeding<u64, &str> = Seeding::new(ReplicaId::new(0, 0), &topology);
        let mut out = Out::default();
        s.retry(0, &mut out);
        let asked: Vec<_> = out.messages.iter().map(|(to, _)| *to).collect();
        assert_eq!(asked, vec![at(0, 1), at(1, 0), at(2, 0)], "the sibling and both peers");
        let later = SEED_PATIENCE_US / 2;
        assert!(s.on_answer(later, at(1, 0), SeedMsg::Groups { attempt: 1, groups: vec![group(1, 5, "a")] }));
        assert!(s.on_answer(later, at(0, 1), SeedMsg::Done { attempt: 1, facts: facts(0, 0, 9, 3) }));
        let mut out = Out::default();
        s.retry(SEED_PATIENCE_US - 1, &mut out);
        assert!(out.messages.is_empty(), "patience: a round trip may take a while");
        s.retry(SEED_PATIENCE_US, &mut out);
        let asked: Vec<_> = out.messages.drain(..).collect();
        assert_eq!(asked, vec![(at(2, 0), Msg::Ask { attempt: 2 })], "only the silent one");
        s.retry(later + SEED_PATIENCE_US, &mut out);
        let asked: Vec<_> = out.messages.drain(..).collect();
        assert_eq!(asked, vec![(at(1, 0), Msg::Ask { attempt: 2 })], "silent since its first groups");
        let now = later + SEED_PATIENCE_US + 1;
        assert!(s.on_answer(now, at(1, 0), SeedMsg::Done { attempt: 1, facts: facts(5, 0, 9, 0) }));
        assert!(!s.is_complete(), "an answer to the old question is dropped");
        assert_eq!(s.waiting_for(), vec![at(1, 0), at(2, 0)]);
        assert!(s.on_answer(now, at(1, 0), SeedMsg::Done { attempt: 2, facts: facts(5, 0, 9, 0) }));
        assert!(s.on_answer(now, at(2, 0), SeedMsg::Done { attempt: 2, facts: facts(4, 0, 9, 0) }));
        assert!(s.is_complete());
        let seed = s.finish().unwrap();
        assert!(seed.answers[&at(1, 0)].0.is_empty(), "the groups of the dropped attempt are gone");
    }

    #[test]
    fn groups_a_replica_may_not_send_are_refused() {
        let topology = Topology::full(3, 2).unwrap();
        let mut s: Seeding<u64, &str> = Seeding::new(ReplicaId::new(0, 0), &topology);
        s.retry(0, &mut Out::default());
        assert!(!s.on_answer(0, at(1, 0), SeedMsg::Groups { attempt: 1, groups: vec![group(2, 5, "dc2's")] }));
        assert!(!s.on_answer(0, at(0, 1), SeedMsg::Groups { attempt: 1, groups: vec![group(0, 5, "a sibling's")] }));
        assert!(!s.on_answer(0, at(1, 1), SeedMsg::Done { attempt: 1, facts: facts(0, 0, 0, 0) }), "not asked");
        assert!(s.on_answer(
            0,
            at(1, 0),
            SeedMsg::Groups { attempt: 1, groups: vec![group(0, 5, "ours"), group(1, 6, "its")] }
        ));
    }

    #[test]
    fn the_own_dc_comes_from_the_peer_that_received_most_and_the_clock_resumes_above_all() {
        let topology = Topology::full(3, 1).unwrap();
        let mut s: Seeding<u64, &str> = Seeding::new(ReplicaId::new(0, 0), &topology);
        s.retry(0, &mut Out::default());
        let from1 = vec![group(0, 3, "ours at 3"), group(1, 4, "dc1's")];
        let from2 = vec![group(0, 3, "ours at 3"), group(0, 7, "ours at 7"), group(2, 2, "dc2's")];
        assert!(s.on_answer(0, at(1, 0), SeedMsg::Groups { attempt: 1, groups: from1 }));
        assert!(s.on_answer(0, at(2, 0), SeedMsg::Groups { attempt: 1, groups: from2 }));
        assert!(s.on_answer(0, at(1, 0), SeedMsg::Done { attempt: 1, facts: facts(4, 3, 100, 0) }));
        assert!(s.on_answer(0, at(2, 0), SeedMsg::Done { attempt: 1, facts: facts(2, 7, 90, 12) }));
        let seed = s.finish().unwrap();
        assert_eq!(seed.own_dc_source(), Some((DcId(2), 3)), "dc2 received up to 7, dc1 only 3");
        let own: Vec<_> = seed.own_groups_from(DcId(2)).map(|g| g.txs[0]).collect();
        assert_eq!(own, vec!["ours at 3", "ours at 7"]);
        let theirs: Vec<_> = seed.peer_groups().map(|(dc, newest, g)| (dc, newest, g.count())).collect();
        assert_eq!(theirs, vec![(DcId(1), 4, 1), (DcId(2), 2, 1)], "each peer's own groups, not ours twice");
        assert_eq!(seed.resume_points(Timestamp), (Timestamp(100), 12));
    }

    #[test]
    fn an_answer_is_split_into_batches_and_ends_with_the_facts() {
        let mut out = Out::default();
        let big = SEED_BATCH_BYTES / 2 + 1;
        let groups = [(group(1, 1, "a"), big), (group(1, 2, "b"), big), (group(1, 3, "c"), 10)];
        answer(at(0, 0), 4, groups, facts(3, 0, 5, 0), &mut out);
        let sizes: Vec<_> = out
            .after_durable
            .iter()
            .map(|(_, m)| match m {
                SeedMsg::Groups { attempt: 4, groups } => groups.len(),
                SeedMsg::Done { attempt: 4, .. } => 0,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sizes, vec![1, 2, 0], "a batch closes before it would pass the size; the facts come last");
        assert!(out.messages.is_empty(), "an answer leaves only once what it says is durable");
    }
}
