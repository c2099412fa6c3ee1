//! A partition's side of write-only transactions: prepare, the votes a
//! coordinator gathers, outcomes recorded and taking effect once durable,
//! and the termination of transactions whose coordinator fell silent.

use super::{horizon, own_number, Decided, Deps, PreparedTx, TxnMessages, TxnRecords, WtxId};
use crate::contract::{Effects, Key, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, PartitionId, ReplicaId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

/// An input that no honest client or partition sends: the caller counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

/// How a prepared transaction ends here.
#[derive(Clone, Debug)]
enum Outcome {
    Commit(Decided),
    Abort,
}

/// A prepared transaction and what the partition knows of it.
#[derive(Debug)]
struct Pending<D> {
    prepared: PreparedTx<D>,
    /// When it was prepared, by this partition's clock.
    since: PhysicalMicros,
    outcome: Option<Outcome>,
    /// The outcome's record was appended as the `n`-th; it takes effect
    /// when `logged(n)` comes back (once it is durable).
    logged: Option<u64>,
}

/// A transaction committed here lately: a late `Query` must still hear its
/// number (this partition's entry of `decided`), and a participant still
/// holding it prepared the decision.
#[derive(Clone, Debug)]
struct Recent {
    at: PhysicalMicros,
    decided: Decided,
    coordinator: PartitionId,
    /// At its coordinator, when commits are acknowledged: the participants
    /// that have not said they committed it.
    unacked: Vec<PartitionId>,
}

/// How a protocol runs its write-only transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Outcomes take effect in the order of the numbers (PrompTCC: its own
    /// entry of `S_i` passes only ended transactions), or each once durable.
    pub in_order: bool,
    /// Participants acknowledge every commit to its coordinator (`done`),
    /// which forgets it once all have and tells them to (`forget`); else a
    /// commit is forgotten once the protocol says every participant has
    /// ended it (PrompTCC's `S_i`). A protocol without a stable time needs
    /// the first (Eiger): a commit forgotten while a participant still
    /// holds it prepared would be aborted by a termination.
    pub acknowledged: bool,
    /// The coordinator answers the client once every participant has told
    /// it that it committed (`committed_here`), rather than every
    /// participant answering the client itself (PrompTCC): one answer to
    /// the client's session instead of one per participant, for a message
    /// from each participant to the coordinator — which a partition takes
    /// in with the others it has queued, where a session wakes for each.
    pub gathered: bool,
    /// The coordinator lists its decisions for the protocol
    /// ([`WriteOnly::take_decisions`]): Eiger answers with them the readers
    /// that asked for a pending write's status. Else none is listed (a
    /// copy of every commit's numbers, for nothing).
    pub decisions: bool,
}

/// A commit whose coordinator gathers the participants' commits before it
/// answers the client ([`Rules::gathered`]).
#[derive(Debug)]
struct Gathering {
    client: ClientId,
    decided: Decided,
    /// The participants that have yet to say they committed.
    waiting: Vec<PartitionId>,
    began: PhysicalMicros,
}

/// Votes a coordinator gathers: in the commit (`Some` only) or in a
/// termination (`None`: that participant fenced the id).
#[derive(Debug)]
struct Ballot {
    participants: Vec<PartitionId>,
    client: ClientId,
    votes: BTreeMap<PartitionId, Option<Timestamp>>,
    began: PhysicalMicros,
}

/// What a partition knows of a transaction's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Decided to commit with these numbers (every vote is in: no other
    /// outcome is possible, even if this partition crashes now).
    Committed(Decided),
    Aborted,
    /// Not decided, as far as this partition knows.
    Open,
}

/// A partition's write-only transactions, as participant and coordinator.
#[derive(Debug)]
pub struct WriteOnly<D> {
    id: ReplicaId,
    partitions: u32,
    resolve_after_us: u64,
    rules: Rules,
    /// Prepared transactions not yet ended here, by number, and by id.
    pending: BTreeMap<Timestamp, Pending<D>>,
    by_tx: FxHashMap<WtxId, Timestamp>,
    /// Commits this partition coordinates, gathering the votes.
    coordinating: FxHashMap<WtxId, Ballot>,
    /// Terminations this partition runs for silent commits.
    terminating: FxHashMap<WtxId, Ballot>,
    /// Ids given up here: a `Write` of them is refused. Kept for good
    /// (only failures abort, so they are few): a `Write` may arrive
    /// arbitrarily late.
    fenced: FxHashSet<WtxId>,
    recent: FxHashMap<WtxId, Recent>,
    /// Commits this partition decided as coordinator whose participants
    /// have not all committed yet ([`Rules::gathered`]).
    gathering: FxHashMap<WtxId, Gathering>,
    /// Outcome records appended so far.
    logged: u64,
    /// Decisions this partition made as coordinator since the caller last
    /// took them.
    decisions: Vec<(WtxId, Status)>,
}

type Out<M, T, R> = Effects<M, T, R>;

/// The partitions, sorted, each once: the participants a transaction whose
/// parts disagree on them is aborted at.
fn union<'a>(partitions: impl IntoIterator<Item = &'a PartitionId>) -> Vec<PartitionId> {
    let mut all: Vec<PartitionId> = partitions.into_iter().copied().collect();
    all.sort();
    all.dedup();
    all
}

/// The most transactions one `done` or `forget` names.
pub const MAX_LISTED: usize = 4096;

impl<D: Deps> WriteOnly<D> {
    pub fn new(id: ReplicaId, partitions: u32, resolve_after_us: u64, rules: Rules) -> Self {
        WriteOnly {
            id,
            partitions,
            resolve_after_us,
            rules,
            pending: BTreeMap::new(),
            by_tx: FxHashMap::default(),
            coordinating: FxHashMap::default(),
            terminating: FxHashMap::default(),
            fenced: FxHashSet::default(),
            recent: FxHashMap::default(),
            gathering: FxHashMap::default(),
            logged: 0,
            decisions: Vec::new(),
        }
    }

    fn me(&self) -> PartitionId {
        self.id.partition
    }

    fn partition(&self, p: PartitionId) -> Addr {
        Addr::Replica(ReplicaId { partition: p, ..self.id })
    }

    /// The number of the oldest transaction not yet ended here.
    pub fn oldest_open(&self) -> Option<Timestamp> {
        self.pending.keys().next().copied()
    }

    /// Every transaction not yet ended here, oldest first, with its
    /// decision if it has one.
    pub fn open(&self) -> impl Iterator<Item = (&PreparedTx<D>, Option<&Decided>)> {
        self.pending.values().map(|p| {
            let decided = match &p.outcome {
                Some(Outcome::Commit(d)) => Some(d),
                _ => None,
            };
            (&p.prepared, decided)
        })
    }

    pub fn is_quiescent(&self) -> bool {
        self.pending.is_empty()
    }

    /// A list of partitions of this DC, sorted, each once, with this one.
    pub fn participants_ok(&self, participants: &[PartitionId]) -> bool {
        participants.windows(2).all(|w| w[0] < w[1])
            && participants.iter().all(|p| p.0 < self.partitions)
            && participants.contains(&self.me())
    }

    /// What this partition knows of the outcome of `tx`.
    pub fn status(&self, tx: WtxId) -> Status {
        if let Some(r) = self.recent.get(&tx) {
            return Status::Committed(r.decided.clone());
        }
        if self.fenced.contains(&tx) {
            return Status::Aborted;
        }
        match self.by_tx.get(&tx).and_then(|seq| self.pending[seq].outcome.as_ref()) {
            Some(Outcome::Commit(d)) => Status::Committed(d.clone()),
            Some(Outcome::Abort) => Status::Aborted,
            None => Status::Open,
        }
    }

    /// The decisions this partition made as coordinator since last asked
    /// (none unless [`Rules::decisions`]).
    pub fn take_decisions(&mut self) -> Vec<(WtxId, Status)> {
        std::mem::take(&mut self.decisions)
    }

    /// Lists a decision this partition made as coordinator, if the protocol
    /// reads them ([`Rules::decisions`]; one that does not never takes them,
    /// so they are not kept).
    fn note_decision(&mut self, tx: WtxId, status: impl FnOnce() -> Status) {
        if self.rules.decisions {
            self.decisions.push((tx, status()));
        }
    }

    /// A client's part of `tx` (PrompTCC Alg. 2 lines 3–8): numbered above
    /// `deps`, prepared durably, and voted. The caller has checked that
    /// the keys are this partition's and the dependencies well formed.
    #[allow(clippy::too_many_arguments)]
    pub fn on_write<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        hlc: &mut Hlc,
        client: ClientId,
        tx: WtxId,
        writes: Vec<(Key, Option<Value>)>,
        participants: Vec<PartitionId>,
        coordinator: PartitionId,
        deps: D,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        let me = self.me();
        if tx.client != client
            || !self.participants_ok(&participants)
            || !participants.contains(&coordinator)
            || writes.is_empty()
        {
            return Err(Refused);
        }
        if self.fenced.contains(&tx) {
            out.send(Addr::Client(client), M::aborted(tx));
            return Ok(());
        }
        if self.by_tx.contains_key(&tx) || self.recent.contains_key(&tx) {
            return Ok(()); // delivered twice
        }
        // A number above everything the writer has seen, so that what it
        // writes orders after what it read.
        let seq = hlc.tick(now, deps.ceiling());
        if self.pending.contains_key(&seq) {
            // The clock never hands a number out twice (replay observes
            // every number on disk); guard the index all the same.
            return Err(Refused);
        }
        let prepared = PreparedTx { tx, seq, coordinator, participants: participants.clone(), deps, writes };
        out.persist(R::prepared(prepared.clone()));
        self.by_tx.insert(tx, seq);
        self.pending.insert(seq, Pending { prepared, since: now, outcome: None, logged: None });
        if participants.len() == 1 {
            // One partition: nothing to agree on (one round).
            self.decide_here(tx, vec![(me, seq)], Timestamp::MAX)?;
            self.note_decision(tx, || Status::Committed(vec![(me, seq)]));
        } else if coordinator == me {
            self.vote(now, tx, me, Some(seq), &participants, client, false, out);
        } else {
            out.send_after_durable(self.partition(coordinator), M::prepared(tx, seq, participants, client));
        }
        Ok(())
    }

    /// A participant's vote reaches the coordinator.
    #[allow(clippy::too_many_arguments)]
    pub fn on_prepared<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        from: PartitionId,
        tx: WtxId,
        seq: Timestamp,
        participants: Vec<PartitionId>,
        client: ClientId,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        if tx.client != client || !self.participants_ok(&participants) || seq > horizon(now) {
            return Err(Refused);
        }
        self.vote(now, tx, from, Some(seq), &participants, client, false, out);
        Ok(())
    }

    /// A vote reaches the coordinator: in the commit itself, or in a
    /// termination (`terminating`).
    #[allow(clippy::too_many_arguments)]
    fn vote<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        tx: WtxId,
        from: PartitionId,
        seq: Option<Timestamp>,
        participants: &[PartitionId],
        client: ClientId,
        terminating: bool,
        out: &mut Out<M, T, R>,
    ) {
        // Decided already: a late or repeated vote. (A fence this partition
        // has just made is its own vote in a termination under way.)
        let under_way = if terminating { &self.terminating } else { &self.coordinating }.contains_key(&tx);
        match self.status(tx) {
            Status::Committed(_) => return,
            Status::Aborted if !under_way => return,
            _ => {}
        }
        // Every participant, and this coordinator, must have been given the
        // same participants: a transaction whose parts disagree (a client's
        // bug or malice) is aborted everywhere before anything commits.
        let own = self.by_tx.get(&tx).map(|seq| &self.pending[seq].prepared.participants);
        let ballots = if terminating { &self.terminating } else { &self.coordinating };
        let ballot_list = ballots.get(&tx).map(|b| &b.participants);
        if own.is_some_and(|o| o != participants) || ballot_list.is_some_and(|b| b != participants) {
            let all =
                union(participants.iter().chain(own.into_iter().flatten()).chain(ballot_list.into_iter().flatten()));
            return self.abort_everywhere(tx, &all, client, out);
        }
        let ballots = if terminating { &mut self.terminating } else { &mut self.coordinating };
        let ballot = ballots.entry(tx).or_insert_with(|| Ballot {
            participants: participants.to_vec(),
            client,
            votes: BTreeMap::new(),
            began: now,
        });
        if !ballot.participants.contains(&from) {
            return;
        }
        ballot.votes.insert(from, seq);
        if ballot.votes.len() < ballot.participants.len() {
            return;
        }
        let ballot = ballots.remove(&tx).expect("just found");
        // Decided: neither the commit nor a termination of it waits longer.
        self.coordinating.remove(&tx);
        self.terminating.remove(&tx);
        let decided: Option<Decided> = ballot.votes.iter().map(|(&p, &s)| s.map(|s| (p, s))).collect();
        match decided {
            // PrompTCC Alg. 2 lines 13–17.
            Some(decided) => {
                if self.gathers(&ballot.participants) {
                    let waiting = ballot.participants.clone();
                    let g = Gathering { client: ballot.client, decided: decided.clone(), waiting, began: now };
                    self.gathering.insert(tx, g);
                }
                for &p in &ballot.participants {
                    if p == self.me() {
                        // Its own number is in the ballot: it fits.
                        let _ = self.decide_here(tx, decided.clone(), Timestamp::MAX);
                    } else {
                        // After this partition's own prepare is durable.
                        out.send_after_durable(self.partition(p), M::commit(tx, decided.clone()));
                    }
                }
                self.note_decision(tx, || Status::Committed(decided));
            }
            None => self.abort_everywhere(tx, &ballot.participants, ballot.client, out),
        }
    }

    /// The coordinator gives `tx` up at every one of `participants`.
    fn abort_everywhere<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        tx: WtxId,
        participants: &[PartitionId],
        client: ClientId,
        out: &mut Out<M, T, R>,
    ) {
        self.coordinating.remove(&tx);
        self.terminating.remove(&tx);
        for &p in participants {
            if p == self.me() {
                let _ = self.on_abort(tx, out);
            } else {
                out.send_after_durable(self.partition(p), M::abort(tx));
            }
        }
        if !participants.contains(&self.me()) {
            let _ = self.on_abort(tx, out);
        }
        out.send_after_durable(Addr::Client(client), M::aborted(tx));
        self.note_decision(tx, || Status::Aborted);
    }

    /// The coordinator's decision reaches a participant (line 20). A
    /// decision must name exactly the participants, with this partition's
    /// number, none beyond the horizon.
    pub fn on_commit<M: TxnMessages, T, R>(
        &mut self,
        now: PhysicalMicros,
        from: PartitionId,
        tx: WtxId,
        decided: Decided,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        // Committed here already: a coordinator that decides it again
        // restarted and ended it by a termination, and gathers the commits
        // anew ([`Rules::gathered`]); this one is said again, or the client
        // would never be answered.
        if self.rules.gathered && !self.by_tx.contains_key(&tx) {
            if let (Some(r), Some(m)) = (self.recent.get(&tx), M::committed_here(tx)) {
                if r.coordinator == from {
                    out.send(self.partition(from), m);
                }
                return Ok(());
            }
        }
        self.decide_here(tx, decided, horizon(now))
    }

    fn decide_here(&mut self, tx: WtxId, decided: Decided, horizon: Timestamp) -> Result<(), Refused> {
        let Some(seq) = self.by_tx.get(&tx).copied() else { return Ok(()) };
        let me = self.me();
        let pending = self.pending.get_mut(&seq).expect("indexed");
        let same_parts = decided.len() == pending.prepared.participants.len()
            && decided.iter().zip(&pending.prepared.participants).all(|(d, p)| d.0 == *p);
        let fits = same_parts && decided.iter().all(|d| d.1 <= horizon) && own_number(&decided, me) == Some(seq);
        if !fits {
            // A decision for other participants than this part was given
            // (a client that told its partitions different things): this
            // part is never committed — not held prepared for ever either.
            if !same_parts && pending.outcome.is_none() {
                pending.outcome = Some(Outcome::Abort);
            }
            return Err(Refused);
        }
        match &pending.outcome {
            None => pending.outcome = Some(Outcome::Commit(decided)),
            Some(Outcome::Commit(_)) => {} // told twice
            Some(Outcome::Abort) => return Err(Refused),
        }
        Ok(())
    }

    /// Records the outcomes that are known and not yet recorded — after
    /// every step, whatever decided them; in order, only the oldest ones
    /// (PrompTCC Alg. 2 lines 23–30). Each takes effect only once its
    /// record is durable (`logged`, a message to itself that waits for it),
    /// so that nothing a crash could take back is shown.
    pub fn record_outcomes<M: TxnMessages, T, R: TxnRecords<D>>(&mut self, out: &mut Out<M, T, R>) {
        let mut upto = None;
        for pending in self.pending.values_mut() {
            let Some(outcome) = &pending.outcome else {
                if self.rules.in_order {
                    break;
                }
                continue;
            };
            if pending.logged.is_some() {
                continue;
            }
            let tx = pending.prepared.tx;
            out.persist(match outcome {
                Outcome::Commit(decided) => R::committed(tx, decided.clone()),
                Outcome::Abort => R::aborted(tx),
            });
            self.logged += 1;
            pending.logged = Some(self.logged);
            upto = Some(self.logged);
        }
        if let Some(upto) = upto {
            out.send_after_durable(Addr::Replica(self.id), M::logged(upto));
        }
    }

    /// The outcomes recorded up to the `upto`-th are durable: they take
    /// effect. Returns the commits, oldest first, for the protocol to
    /// install; each client is told (where the coordinator gathers the
    /// commits, the coordinator is, and it tells the client).
    pub fn on_logged<M: TxnMessages, T, R>(
        &mut self,
        now: PhysicalMicros,
        upto: u64,
        out: &mut Out<M, T, R>,
    ) -> Vec<(PreparedTx<D>, Decided)> {
        let logged = |p: &Pending<D>| p.logged.is_some_and(|n| n <= upto);
        // In order, outcomes are recorded oldest first: those logged are the
        // oldest pending, and the scan stops at the first that is not.
        let done: Vec<Timestamp> = if self.rules.in_order {
            self.pending.iter().take_while(|(_, p)| logged(p)).map(|(&s, _)| s).collect()
        } else {
            self.pending.iter().filter(|(_, p)| logged(p)).map(|(&s, _)| s).collect()
        };
        debug_assert!(
            !self.rules.in_order || self.pending.iter().skip(done.len()).all(|(_, p)| !logged(p)),
            "logged out of order"
        );
        let mut committed = Vec::new();
        for seq in done {
            let Pending { prepared, outcome, .. } = self.pending.remove(&seq).expect("listed");
            self.by_tx.remove(&prepared.tx);
            match outcome.expect("logged") {
                Outcome::Commit(decided) => {
                    let recent = self.recent_of(now, prepared.coordinator, decided.clone());
                    self.recent.insert(prepared.tx, recent);
                    let tx = prepared.tx;
                    match (self.gathers(&prepared.participants), M::committed_here(tx)) {
                        (true, _) if prepared.coordinator == self.me() => self.committed_at(self.me(), tx, out),
                        (true, Some(m)) => out.send(self.partition(prepared.coordinator), m),
                        _ => out.send(Addr::Client(tx.client), M::committed(tx, decided.clone())),
                    }
                    committed.push((prepared, decided));
                }
                Outcome::Abort => {
                    self.fenced.insert(prepared.tx);
                }
            }
        }
        committed
    }

    /// What this partition keeps of a commit it made: at the coordinator,
    /// when commits are acknowledged, who has yet to.
    fn recent_of(&self, at: PhysicalMicros, coordinator: PartitionId, decided: Decided) -> Recent {
        let me = self.me();
        let unacked = match self.rules.acknowledged && coordinator == me {
            true => decided.iter().map(|&(p, _)| p).filter(|&p| p != me).collect(),
            false => Vec::new(),
        };
        Recent { at, decided, coordinator, unacked }
    }

    /// Whether the coordinator of a commit to `participants` answers its
    /// client for all of them ([`Rules::gathered`]); a lone participant
    /// answers the client itself.
    fn gathers(&self, participants: &[PartitionId]) -> bool {
        self.rules.gathered && participants.len() > 1
    }

    /// A participant says it committed `tx`, which this partition
    /// coordinates ([`Rules::gathered`]); the client is answered once
    /// every participant has. One about a commit not gathered here (this
    /// partition restarted since it decided it, or gave up waiting) is
    /// dropped: the client's commit times out, its outcome unknown to it.
    pub fn on_committed_here<M: TxnMessages, T, R>(
        &mut self,
        from: PartitionId,
        tx: WtxId,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        if !self.rules.gathered {
            return Err(Refused);
        }
        self.committed_at(from, tx, out);
        Ok(())
    }

    fn committed_at<M: TxnMessages, T, R>(&mut self, from: PartitionId, tx: WtxId, out: &mut Out<M, T, R>) {
        let Some(g) = self.gathering.get_mut(&tx) else { return };
        let Some(at) = g.waiting.iter().position(|&p| p == from) else { return };
        g.waiting.swap_remove(at);
        if g.waiting.is_empty() {
            let g = self.gathering.remove(&tx).expect("just found");
            out.send(Addr::Client(g.client), M::committed(tx, g.decided));
        }
    }

    /// Gives a transaction up here: a prepared one ends aborted (in its
    /// turn, once recorded), and the id is fenced.
    pub fn on_abort<M, T, R: TxnRecords<D>>(&mut self, tx: WtxId, out: &mut Out<M, T, R>) -> Result<(), Refused> {
        if let Some(seq) = self.by_tx.get(&tx).copied() {
            let pending = self.pending.get_mut(&seq).expect("indexed");
            match pending.outcome {
                None => pending.outcome = Some(Outcome::Abort),
                Some(Outcome::Abort) => {}
                // Decided to commit: an abort contradicts it.
                Some(Outcome::Commit(_)) => return Err(Refused),
            }
            return Ok(());
        }
        if self.recent.contains_key(&tx) {
            return Err(Refused);
        }
        if self.fenced.insert(tx) {
            out.persist(R::aborted(tx));
        }
        Ok(())
    }

    /// This partition's vote in a termination of `tx`: the number it gave
    /// it, or none — and then it fences the id, durably, so that it never
    /// prepares it (the vote leaves only after the fence is durable).
    fn my_vote<M, T, R: TxnRecords<D>>(&mut self, tx: WtxId, out: &mut Out<M, T, R>) -> Option<Timestamp> {
        if let Some(&seq) = self.by_tx.get(&tx) {
            return Some(seq);
        }
        if let Some(recent) = self.recent.get(&tx) {
            return own_number(&recent.decided, self.me());
        }
        if self.fenced.insert(tx) {
            out.persist(R::aborted(tx));
        }
        None
    }

    /// A termination asks this participant for its vote.
    pub fn on_query<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        from: PartitionId,
        tx: WtxId,
        out: &mut Out<M, T, R>,
    ) {
        let seq = self.my_vote(tx, out);
        out.send_after_durable(self.partition(from), M::vote(tx, seq));
    }

    /// A participant's vote in a termination this partition runs.
    pub fn on_vote<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        from: PartitionId,
        tx: WtxId,
        seq: Option<Timestamp>,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        if seq.is_some_and(|s| s > horizon(now)) {
            return Err(Refused);
        }
        let Some(b) = self.terminating.get(&tx) else { return Ok(()) };
        let (parts, client) = (b.participants.clone(), b.client);
        self.vote(now, tx, from, seq, &parts, client, true, out);
        Ok(())
    }

    /// Participant `from` asks this coordinator to end `tx`: a decision
    /// made is sent again (a commit only to a partition it names); else a
    /// termination asks every participant.
    #[allow(clippy::too_many_arguments)]
    pub fn on_resolve<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        from: PartitionId,
        tx: WtxId,
        participants: Vec<PartitionId>,
        client: ClientId,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        if tx.client != client || !self.participants_ok(&participants) || !participants.contains(&from) {
            return Err(Refused);
        }
        match self.status(tx) {
            Status::Committed(decided) if decided.iter().any(|&(p, _)| p == from) => {
                out.send_after_durable(self.partition(from), M::commit(tx, decided));
            }
            Status::Committed(_) | Status::Aborted => out.send_after_durable(self.partition(from), M::abort(tx)),
            Status::Open => self.terminate(now, tx, participants, client, out),
        }
        Ok(())
    }

    /// Starts (or restarts) the termination of `tx` as its coordinator.
    fn terminate<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        tx: WtxId,
        participants: Vec<PartitionId>,
        client: ClientId,
        out: &mut Out<M, T, R>,
    ) {
        if let Some(b) = self.terminating.get(&tx) {
            if now < b.began + self.resolve_after_us && b.participants == participants {
                return;
            }
        }
        if let Some(own) = self.by_tx.get(&tx).map(|seq| self.pending[seq].prepared.participants.clone()) {
            if own != participants {
                let all = union(own.iter().chain(&participants));
                return self.abort_everywhere(tx, &all, client, out);
            }
        }
        self.terminating
            .insert(tx, Ballot { participants: participants.clone(), client, votes: BTreeMap::new(), began: now });
        let me = self.me();
        for &p in &participants {
            if p == me {
                let seq = self.my_vote(tx, out);
                self.vote(now, tx, me, seq, &participants, client, true, out);
            } else {
                out.send(self.partition(p), M::query(tx));
            }
        }
    }

    /// Every resolve interval: asks the coordinators of transactions
    /// prepared too long ago, and forgets what is no longer needed — a
    /// commit once `settled` says every participant has ended it (nobody
    /// still holds it prepared) and a late query would have come.
    pub fn on_resolve_timer<M: TxnMessages, T, R: TxnRecords<D>>(
        &mut self,
        now: PhysicalMicros,
        settled: impl Fn(&Decided) -> bool,
        out: &mut Out<M, T, R>,
    ) {
        // Fault point: resolve at once, racing the commit under way.
        let early = out.buggify("write-only: resolve before the delay");
        let stale: Vec<(WtxId, PartitionId, Vec<PartitionId>)> = self
            .pending
            .values()
            .filter(|p| p.outcome.is_none() && (early || now >= p.since + self.resolve_after_us))
            .map(|p| (p.prepared.tx, p.prepared.coordinator, p.prepared.participants.clone()))
            .collect();
        for (tx, coordinator, participants) in stale {
            if coordinator == self.me() {
                self.terminate(now, tx, participants, tx.client, out);
            } else {
                out.send(self.partition(coordinator), M::resolve(tx, participants, tx.client));
            }
        }
        let keep = self.resolve_after_us * 20;
        if self.rules.acknowledged {
            self.acknowledge(out);
            // A coordinator forgets a commit once every participant said it
            // committed it (`on_done`), or a lone one after a while.
            let me = self.me();
            self.recent.retain(|_, r| r.coordinator != me || !r.unacked.is_empty() || now < r.at + keep);
        } else {
            self.recent.retain(|_, r| now < r.at + keep || !settled(&r.decided));
        }
        self.coordinating.retain(|_, b| now < b.began + keep);
        self.gathering.retain(|_, g| now < g.began + keep);
        self.terminating.retain(|_, b| now < b.began + keep);
    }

    /// Tells each coordinator the commits of its this partition has made
    /// and not yet been told to forget (again every interval, until told).
    fn acknowledge<M: TxnMessages, T, R>(&self, out: &mut Out<M, T, R>) {
        let me = self.me();
        let mut by_coordinator: BTreeMap<PartitionId, Vec<WtxId>> = BTreeMap::new();
        for (&tx, r) in &self.recent {
            if r.coordinator != me {
                by_coordinator.entry(r.coordinator).or_default().push(tx);
            }
        }
        for (c, mut txs) in by_coordinator {
            txs.sort();
            for chunk in txs.chunks(MAX_LISTED) {
                if let Some(m) = M::done(chunk.to_vec()) {
                    out.send(self.partition(c), m);
                }
            }
        }
    }

    /// Participant `from` committed `txs`, which this partition coordinates:
    /// once every participant of one has, it is forgotten here and there.
    pub fn on_done<M: TxnMessages, T, R>(
        &mut self,
        from: PartitionId,
        txs: Vec<WtxId>,
        out: &mut Out<M, T, R>,
    ) -> Result<(), Refused> {
        if txs.len() > MAX_LISTED || !self.rules.acknowledged {
            return Err(Refused);
        }
        let me = self.me();
        let mut forget: BTreeMap<PartitionId, Vec<WtxId>> = BTreeMap::new();
        for tx in txs {
            match self.recent.get_mut(&tx) {
                Some(r) if r.coordinator == me => {
                    r.unacked.retain(|&p| p != from);
                    if r.unacked.is_empty() {
                        let r = self.recent.remove(&tx).expect("found");
                        for (p, _) in r.decided.into_iter().filter(|&(p, _)| p != me) {
                            forget.entry(p).or_default().push(tx);
                        }
                    }
                }
                // Forgotten already (or never coordinated here): the
                // participant may forget it too.
                Some(_) => {}
                None => forget.entry(from).or_default().push(tx),
            }
        }
        for (p, txs) in forget {
            if let Some(m) = M::forget(txs) {
                out.send(self.partition(p), m);
            }
        }
        Ok(())
    }

    /// Coordinator `from` has forgotten `txs`: so may this participant.
    pub fn on_forget(&mut self, from: PartitionId, txs: Vec<WtxId>) -> Result<(), Refused> {
        if txs.len() > MAX_LISTED {
            return Err(Refused);
        }
        for tx in txs {
            if self.recent.get(&tx).is_some_and(|r| r.coordinator == from && from != self.me()) {
                self.recent.remove(&tx);
            }
        }
        Ok(())
    }

    /// After a restart: prepared transactions found on disk wait a full
    /// interval again, and recent commits are kept as long again.
    pub fn restart(&mut self, now: PhysicalMicros) {
        for p in self.pending.values_mut() {
            p.since = now;
        }
        for r in self.recent.values_mut() {
            r.at = now;
        }
    }

    /// Replay: a prepare on disk. The clock resumes above its number, even
    /// one a crash kept without the reservation after it.
    pub fn replay_prepared(&mut self, hlc: &mut Hlc, prepared: PreparedTx<D>) {
        hlc.observe(0, prepared.seq);
        self.by_tx.insert(prepared.tx, prepared.seq);
        let seq = prepared.seq;
        self.pending.insert(seq, Pending { prepared, since: 0, outcome: None, logged: None });
    }

    /// Replay: a commit on disk; the prepare it ends, for the protocol to
    /// install.
    pub fn replay_committed(&mut self, tx: WtxId, decided: Decided) -> Option<PreparedTx<D>> {
        let seq = self.by_tx.remove(&tx)?;
        let pending = self.pending.remove(&seq).expect("indexed");
        let recent = self.recent_of(0, pending.prepared.coordinator, decided);
        self.recent.insert(tx, recent);
        Some(pending.prepared)
    }

    /// Replay: an abort or a fence on disk.
    pub fn replay_aborted(&mut self, tx: WtxId) {
        if let Some(seq) = self.by_tx.remove(&tx) {
            self.pending.remove(&seq);
        }
        self.fenced.insert(tx);
    }

    /// Replay: a recent commit from a checkpoint (its coordinator, where
    /// commits are acknowledged; a coordinator hears from every participant
    /// again). The clock resumes above the number it gave it.
    pub fn replay_recent(&mut self, hlc: &mut Hlc, tx: WtxId, decided: Decided, coordinator: Option<PartitionId>) {
        if let Some(seq) = own_number(&decided, self.me()) {
            hlc.observe(0, seq);
        }
        let recent = self.recent_of(0, coordinator.unwrap_or(self.me()), decided);
        self.recent.insert(tx, recent);
    }

    /// What a checkpoint keeps of the write-only transactions: the prepared
    /// ones (with an outcome recorded but not yet in effect: the checkpoint
    /// replaces its record), the fences and the recent commits.
    pub fn checkpoint<R: TxnRecords<D>>(&self, records: &mut Vec<R>) {
        for p in self.pending.values() {
            records.push(R::prepared(p.prepared.clone()));
            match (&p.outcome, p.logged) {
                (Some(Outcome::Commit(decided)), Some(_)) => records.push(R::committed(p.prepared.tx, decided.clone())),
                (Some(Outcome::Abort), Some(_)) => records.push(R::aborted(p.prepared.tx)),
                _ => {}
            }
        }
        let mut fenced: Vec<WtxId> = self.fenced.iter().copied().collect();
        fenced.sort();
        records.extend(fenced.into_iter().map(R::aborted));
        let mut recent: Vec<(WtxId, &Recent)> = self.recent.iter().map(|(&tx, r)| (tx, r)).collect();
        recent.sort_by_key(|(tx, _)| *tx);
        records.extend(recent.into_iter().map(|(tx, r)| R::recent(tx, r.decided.clone(), r.coordinator)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::DcId;

    /// What the partition sends and records, as far as these tests look:
    /// nothing of it (a protocol's own types would tie this module to it).
    #[derive(Debug)]
    struct Said;

    impl TxnMessages for Said {
        fn committed(_: WtxId, _: Decided) -> Self {
            Said
        }
        fn aborted(_: WtxId) -> Self {
            Said
        }
        fn prepared(_: WtxId, _: Timestamp, _: Vec<PartitionId>, _: ClientId) -> Self {
            Said
        }
        fn commit(_: WtxId, _: Decided) -> Self {
            Said
        }
        fn resolve(_: WtxId, _: Vec<PartitionId>, _: ClientId) -> Self {
            Said
        }
        fn query(_: WtxId) -> Self {
            Said
        }
        fn vote(_: WtxId, _: Option<Timestamp>) -> Self {
            Said
        }
        fn abort(_: WtxId) -> Self {
            Said
        }
        fn logged(_: u64) -> Self {
            Said
        }
    }

    impl TxnRecords<Timestamp> for Said {
        fn prepared(_: PreparedTx<Timestamp>) -> Self {
            Said
        }
        fn committed(_: WtxId, _: Decided) -> Self {
            Said
        }
        fn aborted(_: WtxId) -> Self {
            Said
        }
        fn recent(_: WtxId, _: Decided, _: PartitionId) -> Self {
            Said
        }
    }

    type TestOut = Out<Said, (), Said>;

    /// A coordinator lists its decisions — a lone participant's, and one
    /// gathered from the votes — only where the protocol reads them: one
    /// that never takes them (PrompTCC) must not keep them.
    #[test]
    fn decisions_are_listed_only_for_a_protocol_that_reads_them() {
        for listed in [false, true] {
            let rules = Rules { in_order: true, acknowledged: false, gathered: true, decisions: listed };
            let me = ReplicaId::new(0, 0);
            let mut txns: WriteOnly<Timestamp> = WriteOnly::new(me, 2, 500_000, rules);
            let (mut hlc, mut out) = (Hlc::new(), TestOut::default());
            let client = ClientId { dc: DcId(0), index: 7 };
            let write = |n: u64| (WtxId { client, epoch: 1, n }, vec![(Key::from("k"), None)]);
            let (alone, writes) = write(1);
            let only_me = vec![PartitionId(0)];
            let (c, deps) = (PartitionId(0), Timestamp::ZERO);
            txns.on_write(1_000, &mut hlc, client, alone, writes, only_me, c, deps, &mut out).unwrap();
            let (both, writes) = write(2);
            let all = vec![PartitionId(0), PartitionId(1)];
            txns.on_write(1_001, &mut hlc, client, both, writes, all.clone(), c, deps, &mut out).unwrap();
            txns.on_prepared(1_002, PartitionId(1), both, Timestamp(1_002), all, client, &mut out).unwrap();
            let decided: Vec<WtxId> = txns.take_decisions().into_iter().map(|(tx, _)| tx).collect();
            assert_eq!(decided, if listed { vec![alone, both] } else { Vec::new() }, "listed: {listed}");
        }
    }
}
