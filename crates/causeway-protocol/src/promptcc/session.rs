//! The PrompTCC client library (Alg. 1), where sessions run: it reads from
//! every partition directly — one round, and a second only at the
//! partitions whose snapshot vector does not cover what the first returned
//! — and writes a write-only transaction to every partition it writes, with
//! a coordinator it picks among them.
//!
//! A transaction of the shared session is a read-only transaction followed
//! by a write-only one (§IV-G): its first read call fixes its snapshot (the
//! largest commit timestamp read, with the client's dependencies), its
//! later read calls read at that snapshot in one round, and its commit
//! sends the writes with the dependencies.

use super::messages::{Cover, PtccMsg, ReadTs};
use super::vclock::{Sparse, VClock, Wire};
use super::{PtccConfig, PtccFault};
use crate::contract::{AbortReason, CommitStamp, Effects, Key, ReadTag, SessionError, Value};
use crate::hlc::PhysicalMicros;
use crate::ids::{Addr, ClientId, PartitionId, ReplicaId};
use crate::session_core::{Awaiting, ClientRole, ReadDeadline, Reply, SessionCore};
use crate::topology::Topology;
use crate::write_only::{self, stamp_of, Commit, CommitTimer, WtxId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A PrompTCC session.
pub type PtccSession = SessionCore<PtccClient>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtccClientTimer {
    /// The commit under way may have run out of time ([`CommitTimer`]):
    /// the deadline, on the session's clock, the timer was armed for.
    CommitTimeout(PhysicalMicros),
    /// Transaction `n` read past the transaction timeout: it is aborted.
    Expired(u64),
}

/// A read round being gathered. Hot path: an answer's values go straight
/// into the round's list and its timestamps into the snapshot being built
/// — `D_c` itself, which the snapshot becomes — so that nothing of an
/// answer is kept but what it says of its `S_i`.
#[derive(Debug)]
struct Gather {
    round: u32,
    /// One per partition asked, in the order asked.
    slots: Vec<Slot>,
    /// The values answered, in the order the answers came.
    values: Vec<(Key, Option<Value>)>,
    kind: RoundKind,
}

impl Gather {
    /// The slot of partition `p`, if it has yet to answer.
    fn awaiting(&self, p: PartitionId) -> Option<usize> {
        self.slots.iter().position(|s| s.partition == p && s.answer.is_none())
    }
}

/// What a round's answers are taken into.
#[derive(Debug)]
enum RoundKind {
    /// A first round: every commit timestamp answered is joined into `D_c`
    /// (Alg. 1 lines 23–31, as a join). Each is the timestamp of a version
    /// visible where it was read, whose every entry a partition may adopt:
    /// a round given up half-way leaves `D_c` fresher, never wrong.
    First,
    /// A round at the transaction's snapshot — `D_c`, which stands still
    /// until the commit once the first read call has fixed it: whether
    /// every timestamp answered is within it.
    AtSnapshot { within: bool },
}

/// A partition asked in a read round.
#[derive(Debug)]
struct Slot {
    partition: PartitionId,
    /// How many keys it was asked: its answer has a value for each, in the
    /// order asked (what a second round asks it again).
    asked: usize,
    /// Its answer: what it says of its `S_i`, and where its values start in
    /// [`Gather::values`].
    answer: Option<(Covers, usize)>,
}

/// What the answer says of the partition's `S_i` ([`Cover`], decoded).
#[derive(Debug)]
enum Covers {
    Vector(VClock),
    Floor { own: crate::hlc::Timestamp, floor: crate::hlc::Timestamp, pending: Vec<Sparse> },
}

impl Covers {
    /// Whether partition `p`'s first-round values are those of
    /// `snapshot`: its `S_i` covers it (the paper's test), or (§V's) no
    /// transaction still open at `p` when it answered can be in it — its
    /// entry is at or below `S_p[p]` — and none of the versions `p` could
    /// not show yet is. The second part alone would miss a transaction
    /// that ends at `p` just after `p` answers, and that another partition
    /// answering later shows.
    fn covers(&self, p: PartitionId, snapshot: &VClock) -> bool {
        match self {
            Covers::Vector(s) => s.dominates(snapshot),
            Covers::Floor { own, pending, .. } => {
                snapshot.get(p) <= *own && pending.iter().all(|ts| !ts.is_below(snapshot))
            }
        }
    }
}

/// PrompTCC's side of a session.
#[derive(Debug)]
pub struct PtccClient {
    id: ClientId,
    topology: Arc<Topology>,
    commit_timeout_us: u64,
    txn_timeout_us: u64,
    naive: bool,
    fault: PtccFault,
    /// The running transaction's first read, for the transaction timeout.
    deadline: ReadDeadline,
    /// `D_c`: the largest commit timestamp this client has seen.
    deps: VClock,
    epoch: u64,
    /// Transactions begun; names reads and writes.
    n: u64,
    /// Read rounds the running transaction has sent. Once it has sent one,
    /// its first read call is done (a read call waits for its rounds): its
    /// snapshot is then `D_c`, which changes again only at its commit, and
    /// every later round reads at it.
    next_round: u32,
    reading: Option<Gather>,
    /// The commit under way. `D_c` stands still while it runs (the session
    /// does nothing else), so it is not kept with it: the decision joins it.
    committing: Option<Commit>,
    /// The commit timeouts, on one timer.
    commit_timer: CommitTimer,
}

/// What a PrompTCC session token carries: `D_c`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtccSessionState {
    pub deps: VClock,
}

type Out = Effects<PtccMsg, PtccClientTimer>;

impl PtccClient {
    pub fn new(id: ClientId, topology: Arc<Topology>, config: &PtccConfig) -> Self {
        PtccClient {
            id,
            deps: VClock::zeros(topology.partition_count()),
            topology,
            commit_timeout_us: config.commit_timeout_us,
            txn_timeout_us: config.txn_timeout_us,
            naive: config.naive,
            fault: config.fault,
            deadline: ReadDeadline::default(),
            epoch: 0,
            n: 0,
            next_round: 0,
            reading: None,
            committing: None,
            commit_timer: CommitTimer::default(),
        }
    }

    fn partition(&self, p: PartitionId) -> Addr {
        Addr::Replica(ReplicaId::at(self.id.dc, p))
    }

    /// Sends one read round to the partitions of `keys`: a first round
    /// with `D_c`, or one at the transaction's snapshot, which is `D_c`.
    fn send_round(&mut self, keys: BTreeMap<PartitionId, Vec<Key>>, at_snapshot: bool, out: &mut Out) {
        let round = self.next_round;
        self.next_round += 1;
        let tag = ReadTag { tx: self.n, round };
        let mut slots = Vec::with_capacity(keys.len());
        let mut total = 0;
        // Encoded once: a copy for each partition but the last, which takes it.
        let deps = std::iter::repeat_n(self.deps.to_wire(self.naive), keys.len());
        for ((p, keys_of_p), deps) in keys.into_iter().zip(deps) {
            total += keys_of_p.len();
            slots.push(Slot { partition: p, asked: keys_of_p.len(), answer: None });
            out.send(self.partition(p), PtccMsg::Read { tag, keys: keys_of_p, deps, at_snapshot });
        }
        let kind = if at_snapshot { RoundKind::AtSnapshot { within: true } } else { RoundKind::First };
        self.reading = Some(Gather { round, slots, values: Vec::with_capacity(total), kind });
    }

    /// Takes the answer of the partition of `slot` into the round; `None`
    /// if it is malformed (a vector, or not a value for each key asked).
    fn take_answer(
        gather: &mut Gather,
        deps: &mut VClock,
        slot: usize,
        cover: Cover,
        values: Vec<(Key, Option<Value>)>,
        read_ts: ReadTs,
        partitions: u32,
    ) -> Option<()> {
        if values.len() != gather.slots[slot].asked {
            return None;
        }
        let cover = decode_cover(cover, partitions)?;
        // Every timestamp decoded before any is joined into `D_c`: a
        // malformed answer leaves it as it was. Hot path: PrompTCC's one
        // is decoded where it lies, naive's many listed.
        let decode = |w: Wire| w.decode_sparse(partitions);
        let mut take = |ts: &Sparse| match &mut gather.kind {
            RoundKind::First => ts.join_into(deps),
            RoundKind::AtSnapshot { within } => *within &= ts.is_below(deps),
        };
        match read_ts {
            ReadTs::AtFloor => {}
            ReadTs::Joined(w) => take(&decode(w)?),
            ReadTs::Each(ws) => ws.into_iter().map(decode).collect::<Option<Vec<Sparse>>>()?.iter().for_each(take),
        }
        let start = gather.values.len();
        gather.values.extend(values);
        gather.slots[slot].answer = Some((cover, start));
        Some(())
    }

    /// Every partition of a round has answered.
    fn round_done(&mut self, gather: Gather, out: &mut Out) -> Option<Reply> {
        let Gather { slots, values, kind, .. } = gather;
        match kind {
            // Alg. 1 lines 23–31: the snapshot is what the client had seen
            // and everything the first round returned; a partition whose
            // vector does not cover it may have missed a version in it.
            RoundKind::First => {
                let snapshot = &mut self.deps;
                // And the smallest vector the partitions answered with (or,
                // under §V, the smallest of their smallest entries): each of
                // them covers it already, so it asks no second round, and
                // later reads of other partitions are fresher.
                let mut smallest: Option<VClock> = None;
                let mut lowest_floor = None;
                for (cover, _) in slots.iter().filter_map(|s| s.answer.as_ref()) {
                    match cover {
                        Covers::Vector(s) => match &mut smallest {
                            None => smallest = Some(s.clone()),
                            Some(m) => m.meet(s),
                        },
                        Covers::Floor { floor, .. } => {
                            lowest_floor = Some(lowest_floor.map_or(*floor, |l: crate::hlc::Timestamp| l.min(*floor)))
                        }
                    }
                }
                if let Some(m) = smallest {
                    snapshot.join(&m);
                }
                if let Some(floor) = lowest_floor {
                    snapshot.raise_all(floor);
                }
                // A partition whose answer does not cover the snapshot may
                // have missed a version in it: asked again, at the snapshot.
                let behind: Vec<(PartitionId, std::ops::Range<usize>)> = slots
                    .iter()
                    .filter_map(|s| match &s.answer {
                        Some((cover, start)) if !cover.covers(s.partition, snapshot) => {
                            Some((s.partition, *start..*start + s.asked))
                        }
                        _ => None,
                    })
                    .collect();
                if behind.is_empty() || self.fault == PtccFault::OneRound {
                    return Some(Reply::Values(values));
                }
                // Their values are asked again; the others' are kept, and
                // the second round's answers follow them.
                let mut keep = vec![true; values.len()];
                let mut again: BTreeMap<PartitionId, Vec<Key>> = BTreeMap::new();
                for (p, range) in behind {
                    again.insert(p, values[range.clone()].iter().map(|(k, _)| k.clone()).collect());
                    keep[range].fill(false);
                }
                let kept = values.into_iter().zip(keep).filter_map(|(v, keep)| keep.then_some(v)).collect();
                self.send_round(again, true, out);
                self.reading.as_mut().expect("just sent").values = kept;
                None
            }
            RoundKind::AtSnapshot { within } => {
                // A round at the snapshot: every partition has adopted it,
                // so every version in it is visible there (no third round).
                let consistent = within
                    && slots.iter().all(|s| match &s.answer {
                        Some((Covers::Vector(s), _)) => s.dominates(&self.deps),
                        Some((Covers::Floor { .. }, _)) => true,
                        None => false,
                    });
                if !consistent {
                    // Never, by the protocol: fail loudly rather than
                    // return values that may not be one snapshot.
                    debug_assert!(self.fault != PtccFault::None, "a read at the snapshot was not consistent");
                    return Some(Reply::Failed(SessionError::InvalidArgument(
                        "a read at the transaction's snapshot came back inconsistent (a protocol bug)".into(),
                    )));
                }
                Some(Reply::Values(values))
            }
        }
    }
}

/// What a read reply says of its partition's `S_i`, decoded (`None` if a
/// vector in it is malformed).
fn decode_cover(cover: Cover, partitions: u32) -> Option<Covers> {
    Some(match cover {
        Cover::Vector(s) => Covers::Vector(s.decode(partitions)?),
        Cover::Floor { own, floor, pending } => Covers::Floor {
            own,
            floor,
            pending: pending.into_iter().map(|w| w.decode_sparse(partitions)).collect::<Option<_>>()?,
        },
    })
}

impl ClientRole for PtccClient {
    type Message = PtccMsg;
    type Timer = PtccClientTimer;
    type State = PtccSessionState;

    /// Nothing to fetch: the first read fixes the snapshot.
    fn start(&mut self, now: PhysicalMicros, _out: &mut Out) -> bool {
        if self.epoch == 0 {
            self.epoch = now.max(1);
        }
        self.n += 1;
        self.deadline.reset();
        self.next_round = 0;
        true
    }

    fn request_read(&mut self, now: PhysicalMicros, _round: u32, keys: Vec<Key>, out: &mut Out) {
        // §VII: a transaction older than the timeout is aborted; the
        // partitions may have collected what its snapshot needs.
        if self.deadline.passed(now, self.txn_timeout_us) {
            out.set_timer(PtccClientTimer::Expired(self.n), 1);
            return;
        }
        let by_partition = self.topology.group_by_partition(keys, |k| k);
        let at_snapshot = self.next_round > 0;
        self.send_round(by_partition, at_snapshot, out);
    }

    fn request_commit(&mut self, now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut Out) {
        let tx = WtxId { client: self.id, epoch: self.epoch, n: self.n };
        let due = now.saturating_add(self.commit_timeout_us);
        let (commit, parts) = Commit::start(&self.topology, self.id, tx, writes, due, true);
        // Encoded once: a copy for each part but the last, which takes it.
        let deps = std::iter::repeat_n(self.deps.to_wire(self.naive), parts.len());
        for (part, deps) in parts.into_iter().zip(deps) {
            let msg = PtccMsg::Write {
                tx,
                writes: part.writes,
                participants: part.participants,
                coordinator: part.coordinator,
                deps,
            };
            out.send(self.partition(part.partition), msg);
        }
        if let Some((after, at)) = self.commit_timer.start(now, &commit) {
            out.set_timer(PtccClientTimer::CommitTimeout(at), after);
        }
        self.committing = Some(commit);
    }

    fn release(&mut self, _now: PhysicalMicros, _out: &mut Out) {}

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        from: Addr,
        msg: PtccMsg,
        awaiting: Awaiting,
        out: &mut Out,
    ) -> Option<Reply> {
        let Addr::Replica(r) = from else { return None };
        if r.dc != self.id.dc {
            return None;
        }
        match (msg, awaiting) {
            (PtccMsg::ReadResp { tag, cover, values, read_ts }, Awaiting::Read) => {
                let partitions = self.topology.partition_count();
                let gather = self.reading.as_mut()?;
                if tag != (ReadTag { tx: self.n, round: gather.round }) {
                    return None;
                }
                let slot = gather.awaiting(r.partition)?;
                if Self::take_answer(gather, &mut self.deps, slot, cover, values, read_ts, partitions).is_none() {
                    return Some(Reply::Failed(SessionError::InvalidArgument("a malformed read reply".into())));
                }
                if gather.slots.iter().any(|s| s.answer.is_none()) {
                    return None;
                }
                let gather = self.reading.take().expect("gathering");
                self.round_done(gather, out)
            }
            (PtccMsg::TooOld { tag }, Awaiting::Read) => {
                let gather = self.reading.as_ref()?;
                if tag != (ReadTag { tx: self.n, round: gather.round }) || gather.awaiting(r.partition).is_none() {
                    return None;
                }
                self.reading = None;
                Some(Reply::Aborted(AbortReason::Expired("a version of its snapshot was collected".into())))
            }
            (PtccMsg::Committed { tx, decided }, Awaiting::Commit) => {
                let decided = self.committing.as_mut()?.on_committed(r.partition, tx, decided).ok()??;
                self.committing = None;
                // Alg. 1 line 10, as a join: what was read before stays seen.
                // The commit timestamp is `D_c` raised to the decided
                // numbers, so raising `D_c` is the join.
                self.deps.raise_entries(&decided);
                Some(Reply::Committed(stamp_of(self.id.dc, &decided)))
            }
            (PtccMsg::Aborted { tx }, Awaiting::Commit) => write_only::client::on_aborted(&mut self.committing, tx),
            _ => None,
        }
    }

    fn on_timer(
        &mut self,
        _now: PhysicalMicros,
        timer: PtccClientTimer,
        awaiting: Option<Awaiting>,
        out: &mut Out,
    ) -> Option<Reply> {
        match timer {
            PtccClientTimer::CommitTimeout(at) => {
                self.commit_timer.fired(at, &mut self.committing, awaiting, |after, at| {
                    out.set_timer(PtccClientTimer::CommitTimeout(at), after)
                })
            }
            PtccClientTimer::Expired(n) => ReadDeadline::expired(awaiting, n == self.n, self.reading.is_some()),
        }
    }

    fn committed(&mut self, _stamp: &CommitStamp, _writes: Vec<(Key, Option<Value>)>) {}

    fn finished(&mut self) {
        self.reading = None;
        self.committing = None;
    }

    fn export_state(&self) -> PtccSessionState {
        PtccSessionState { deps: self.deps.clone() }
    }

    fn import_state(&mut self, state: PtccSessionState) -> Result<(), SessionError> {
        if state.deps.len() != self.deps.len() {
            return Err(SessionError::InvalidArgument(
                "the session state is of a cluster with another partition count".into(),
            ));
        }
        self.deps.join(&state.deps);
        Ok(())
    }
}
