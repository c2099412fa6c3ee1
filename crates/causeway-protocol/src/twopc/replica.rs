//! A replica of the family: the [`Replica`] every protocol of it gets from
//! what it brings ([`FamilyReplica`]) — which role takes which message,
//! starting, recovering, and what is common to report.

use super::durable::FamilyRecord;
use super::family_replica::{FamilyEffects, FamilyReplica, RecordOf, SliceRequest};
use super::messages::{FamilyMsg, TxnMsg};
use super::rejoin::{self, Admit};
use super::reseed;
use super::rhythm::FamilyTimer;
use super::{Family, Snapshot as _};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, Replica, ReplicaCounters, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId};
use crate::recovery::{Incoming, SeedMsg, Seeding};
use std::collections::BTreeMap;

/// Hands `msg` from `from` to the role that takes it, making durable what
/// must survive a crash (see [`super::durable`]).
fn dispatch<R: FamilyReplica>(
    r: &mut R,
    now: PhysicalMicros,
    from: Addr,
    msg: FamilyMsg<R::Family>,
    out: &mut FamilyEffects<R>,
) {
    use TxnMsg::*;
    let own_dc = matches!(from, Addr::Replica(p) if p.dc == r.core().id.dc);
    if r.core().seeding.is_some() && waits_for_seed::<R::Family>(&msg) {
        if let PrepareReq { tx, .. } = msg {
            out.send(from, PrepareRefused { tx });
        }
        return;
    }
    if !r.core().holes.is_empty() && matches!(msg, SliceReq { .. } | Stabilization(_)) {
        // Re-seeded, and not caught up yet (see `catching_up`).
        return;
    }
    match msg {
        StartTxReq(seen) => match r.core_mut().starts.admit(from, seen) {
            Admit::Now(seen) => r.start_transaction(now, from, seen, out),
            Admit::Held => {}
            Admit::Full => {
                let error = SessionError::TooLarge {
                    what: "transactions waiting for a restarted replica to rejoin its DC".into(),
                    size: rejoin::MAX_WAITING_STARTS as u64 + 1,
                    limit: rejoin::MAX_WAITING_STARTS as u64,
                };
                out.send(from, TxnMsg::TxError { tx: None, error });
            }
        },
        TxReadReq { tx, keys } => {
            let core = r.core_mut();
            core.coordinator.on_read(now, from, tx, keys, out);
        }
        CommitReq { tx, hwt, writes } => {
            let core = r.core_mut();
            let timeout = core.rhythm.commit_timeout_us;
            core.coordinator.on_commit_request(now, from, tx, hwt, writes, timeout, out);
        }
        EndTx { tx } => r.core_mut().coordinator.end(tx),
        // After a re-seed, a read below the horizon may need versions the
        // replicas it took its state from had collected: it is not served
        // (its coordinator's client gives up on it) rather than answered
        // wrong. Only transactions that started before the DC's stable
        // snapshot passed the horizon read there.
        SliceReq { snapshot, .. } if r.core().horizon > Timestamp::ZERO && snapshot.floor() < r.core().horizon => {}
        SliceReq { tx, round, keys, snapshot } => {
            r.serve_slice(now, SliceRequest { from, tx, round, keys, snapshot }, out)
        }
        SliceResp { tx, round, values } => r.core_mut().coordinator.on_slice(tx, round, values, out),
        // Too late to commit by itself: its coordinator may have given up.
        PrepareReq { tx, alone: Some(deadline), .. } if now > deadline => out.send(from, PrepareRefused { tx }),
        PrepareReq { tx, snapshot, ht, writes, alone } => {
            r.prepare(now, from, tx, snapshot, ht, writes, out);
            // The only cohort: its proposal is the commit time. It commits
            // once the prepare is durable — not before, or a read could see
            // what a crash then erases — by telling itself, as a
            // coordinator would; the answer waits for both records. (A
            // prepare delivered again is marked already: nothing more.)
            if alone.is_some() {
                if let Some(pt) = r.core_mut().prepared.mark_alone(tx) {
                    out.persist(FamilyRecord::Alone { tx });
                    out.send_after_durable(Addr::Replica(r.core().id), Commit { tx, ct: pt });
                }
            }
        }
        PrepareResp { tx, pt } => r.core_mut().coordinator.on_proposal(tx, pt, out),
        PrepareRefused { tx } => {
            if !r.core_mut().coordinator.on_refused(from, tx, out) {
                r.core_mut().refuse();
            }
        }
        Commit { tx, ct } => {
            if r.core().prepared.contains(tx) {
                out.persist(FamilyRecord::Committed { tx, ct });
            }
            r.commit(now, tx, ct, out);
        }
        // Under partial replication cohorts live in other DCs too.
        Resolve { tx } if own_dc || !r.core().topology.is_fully_replicated() => {
            r.core_mut().coordinator.on_resolve(from, tx, out)
        }
        Abort { tx } => {
            let core = r.core_mut();
            // One that commits alone is not its coordinator's to abort.
            if core.prepared.coordinator_of(tx) == Some(from) && !core.prepared.is_alone(tx) {
                core.prepared.abort(tx);
                out.persist(FamilyRecord::Aborted { tx });
            }
        }
        Replicate { ct, txs } => match r.core_mut().replication.streams.incoming(from, ct, true) {
            Incoming::Take(source) => {
                r.replicated(from, ct, &txs, out);
                out.persist(FamilyRecord::Applied { source, ct, txs });
            }
            Incoming::Drop => {}
            Incoming::Refuse => r.core_mut().refuse(),
        },
        Heartbeat { t } => match r.core_mut().replication.streams.incoming(from, t, false) {
            Incoming::Take(_) => r.heartbeat(from, t, out),
            Incoming::Drop => {}
            Incoming::Refuse => r.core_mut().refuse(),
        },
        Stream(c) => {
            if !r.core_mut().replication.streams.on_control(from, c, out) {
                r.core_mut().refuse();
            }
        }
        Stabilization(msg) => stabilization_step(r, now, out, |r, out| r.stabilization(now, from, msg, out)),
        Seed(SeedMsg::Ask { attempt }) => {
            if !reseed::answer(r, from, attempt, out) {
                r.core_mut().refuse();
            }
        }
        Seed(answer) => seed_answer(r, now, from, answer, out),
        // Replies meant for clients, or a question from outside the DC: a
        // peer speaking out of turn.
        StartTxResp { .. }
        | TxReadResp { .. }
        | CommitResp { .. }
        | TxError { .. }
        | CommitAborted { .. }
        | Resolve { .. } => r.core_mut().refuse(),
    }
}

/// What a replica that is re-seeding drops: what needs the state it has
/// not got yet. Its stream and its DC's stabilization resume once it has
/// it; a coordinator waiting for a slice or a proposal from it gives up in
/// time. Clients' starts wait at the gate, closed until it has rejoined
/// its DC. A question about a transaction it coordinated before it lost
/// its state waits (the cohort asks again) until the siblings have told it
/// the decisions they hold.
fn waits_for_seed<F: Family>(msg: &FamilyMsg<F>) -> bool {
    use TxnMsg::*;
    matches!(
        msg,
        SliceReq { .. }
            | PrepareReq { .. }
            | Commit { .. }
            | Abort { .. }
            | Replicate { .. }
            | Heartbeat { .. }
            | Stream(_)
            | Stabilization(_)
            | Resolve { .. }
    )
}

/// Part of an answer to this replica's seed question. Once every one has
/// answered, the answers become records: made durable, and taken as a
/// recovery takes its records; then the clock and ids resume above what
/// the lost replica may have handed out, and the streams resume.
fn seed_answer<R: FamilyReplica>(
    r: &mut R,
    now: PhysicalMicros,
    from: Addr,
    msg: SeedMsg<Timestamp, <R::Family as Family>::Writes>,
    out: &mut FamilyEffects<R>,
) {
    if let SeedMsg::Groups { groups, .. } = &msg {
        if !groups.iter().all(|g| r.well_formed(g.source, g.at, &g.txs)) {
            return r.core_mut().refuse();
        }
    }
    let core = r.core_mut();
    // A late answer, to a question already answered by everyone.
    let Some(seeding) = core.seeding.as_mut() else { return };
    if !seeding.on_answer(now, from, msg) {
        return core.refuse();
    }
    if !seeding.is_complete() {
        return;
    }
    let seed = core.seeding.take().and_then(Seeding::finish).expect("every answer is in");
    let first = out.records.len();
    out.records.extend(reseed::records::<R>(&seed));
    replay(r, &out.records[first..]);
    catch_up(r);
    resume(r, now, out);
}

/// Starts a re-seed: the replica asks for its state at its start and
/// serves nothing that needs it until it has it.
fn start_seeding<R: FamilyReplica>(r: &mut R) {
    let core = r.core_mut();
    core.seeding = Some(Seeding::new(core.id, &core.topology));
    core.starts.close();
}

/// A replica of the family that lost its durable state, and the records
/// to make durable before it starts — the mark that it is re-seeding, so
/// that a restart before it is done asks again ([`crate::recovery::seed`]).
/// `None` in a cluster of one DC: no other replica holds a copy.
pub fn reseeding<R: FamilyReplica>(mut replica: R) -> Option<(R, Vec<RecordOf<R>>)> {
    if replica.core().topology.dc_count() < 2 {
        return None;
    }
    start_seeding(&mut replica);
    Some((replica, vec![FamilyRecord::Reseeding]))
}

/// Messages from `from` were lost (its link to us shed a backlog): the
/// replication stream resumes from what it kept, a decision it may have
/// sent about a transaction prepared here is asked for now, and the commits
/// coordinated here that wait on it as a cohort are given up now — each
/// instead of at its timeout, during which stable time would stand still.
fn peer_lost<R: FamilyReplica>(r: &mut R, now: PhysicalMicros, from: Addr, out: &mut FamilyEffects<R>) {
    let core = r.core_mut();
    core.replication.streams.on_peer_lost(from, out);
    for tx in core.prepared.coordinated_by(now, from) {
        out.send(from, TxnMsg::Resolve { tx });
    }
    core.coordinator.abort_waiting_on(from, out);
}

/// The heal round: give up commits a cohort never answered, ask about
/// transactions prepared long ago, acknowledge and resume replication.
fn heal<R: FamilyReplica>(r: &mut R, now: PhysicalMicros, out: &mut FamilyEffects<R>) {
    let core = r.core_mut();
    let (commit_timeout, resolve_after) = (core.rhythm.commit_timeout_us, core.rhythm.resolve_after_us);
    core.coordinator.abort_overdue(now, commit_timeout, out);
    for (tx, coordinator) in core.prepared.overdue(now, resolve_after) {
        out.send(coordinator, TxnMsg::Resolve { tx });
    }
    core.replication.streams.refresh(out);
}

/// A step of stabilization (a round starting, or a message of one), with
/// what the family does around it. Before: make durable how far the peers
/// said they have passed, which the reports about to leave build on
/// ([`crate::recovery::stream::PeerStreams::unrecorded_positions`]).
/// After: once a restarted replica knows its DC's stable times, the
/// transactions held back start ([`super::rejoin`]).
fn stabilization_step<R: FamilyReplica>(
    r: &mut R,
    now: PhysicalMicros,
    out: &mut FamilyEffects<R>,
    step: impl FnOnce(&mut R, &mut FamilyEffects<R>),
) {
    for (source, ct) in r.core_mut().replication.streams.unrecorded_positions() {
        out.persist(FamilyRecord::Applied { source, ct, txs: Vec::new() });
    }
    step(r, out);
    if r.core().starts.is_open() || !r.stable_times_known() || r.stable_floor() < r.core().horizon {
        return;
    }
    for (client, seen) in r.core_mut().starts.open() {
        r.start_transaction(now, client, seen, out);
    }
}

/// Whether a re-seeded replica is still catching up: for some DC, it has
/// not received that DC's stream up to where the clocks of the replicas
/// that answered its seed were. Until then what it reports of how far it
/// has received could be below what the lost replica had reported — and
/// the DC's stable times, and what was collected below them, built on that
/// — so it takes no part in its DC's stabilization and serves no read
/// (its transactions' starts wait at the gate): the DC's stable time waits
/// for it, as it did while it re-seeded. Its streams, prepares and commits
/// go on.
fn catching_up<R: FamilyReplica>(r: &mut R, out: &mut FamilyEffects<R>) -> bool {
    let core = r.core_mut();
    if core.holes.is_empty() {
        return false;
    }
    let streams = &core.replication.streams;
    let open = core.holes.len();
    core.holes.retain(|&(dc, upto)| streams.received_from(dc) < upto);
    if core.holes.len() < open {
        // A hole a heartbeat closed: a checkpoint drops it, so the
        // position that closed it must be in the records too.
        for (source, ct) in core.replication.streams.unrecorded_positions() {
            out.persist(FamilyRecord::Applied { source, ct, txs: Vec::new() });
        }
    }
    !core.holes.is_empty()
}

/// After every step: keep the reservations ahead of what was handed out,
/// and the groups kept for the peers within their bound in memory.
fn reserve<R: FamilyReplica>(r: &mut R, out: &mut FamilyEffects<R>) {
    let core = r.core_mut();
    let next_tx = core.coordinator.next_tx();
    core.reserved.after_step(&core.hlc, next_tx, out);
    core.replication.streams.spill_over(out);
}

/// A replica rebuilt from the records it made durable, taken again in
/// order: what they say is restored, and the rest comes back when it starts
/// (the clock and ids resume above the reservations, the peers resend their
/// streams) and when the apply loop and stabilization run.
pub fn recover<R: FamilyReplica>(mut replica: R, mut records: Vec<RecordOf<R>>) -> R {
    let reserved = |r: &RecordOf<R>| matches!(r, FamilyRecord::Reserved(_));
    if let Some(at) = records.iter().rposition(|r| matches!(r, FamilyRecord::Reseeding)) {
        // Every attempt at a re-seed starts with the mark: of what came
        // before the last one (attempts a crash cut short), only the
        // reservations count.
        let mut tail = records.split_off(at);
        records.retain(reserved);
        if !tail.iter().any(|r| matches!(r, FamilyRecord::Reseeded { .. })) {
            // The last attempt was cut short too: it starts again.
            records.extend(tail.into_iter().filter(reserved));
            replay(&mut replica, &records);
            start_seeding(&mut replica);
            return replica;
        }
        records.append(&mut tail);
    }
    replay(&mut replica, &records);
    catch_up(&mut replica);
    replica.core_mut().starts.close();
    replica
}

/// Takes `records` again, in order: what they say is restored.
/// Borrowed, so that a re-seed installs the versions it also makes durable
/// without a copy of them; the few records whose contents stay are cloned.
fn replay<R: FamilyReplica>(replica: &mut R, records: &[RecordOf<R>]) {
    let me = replica.core().id;
    let peer_in = |dc: DcId| Addr::Replica(ReplicaId { dc, ..me });
    for record in records {
        let mut scratch = FamilyEffects::<R>::default();
        let core = replica.core_mut();
        core.reserved.restore(record);
        match record {
            FamilyRecord::Reserved(_) => {}
            FamilyRecord::Prepared { tx, pt, coordinator, prepared } => {
                core.prepared.restore(&mut core.hlc, *tx, *pt, *coordinator, prepared.clone())
            }
            FamilyRecord::Committed { tx, ct } => replica.commit(0, *tx, *ct, &mut scratch),
            FamilyRecord::Aborted { tx } => {
                core.prepared.abort(*tx);
            }
            FamilyRecord::Decided { tx, ct } => core.coordinator.keep_decision(*tx, *ct),
            FamilyRecord::Applied { source, ct, txs } => {
                core.replication.streams.restore_received(*source, *ct);
                replica.replicated(peer_in(*source), *ct, txs, &mut scratch);
            }
            FamilyRecord::Installed { source, ct, txs } => replica.reinstall(*source, *ct, txs),
            FamilyRecord::Queued { tx, ct, writes } => core.replication.queue(*ct, *tx, writes.clone()),
            FamilyRecord::Kept { ct, txs } => core.replication.streams.keep(*ct, txs.clone()),
            FamilyRecord::Spilled { upto } => core.replication.streams.restore_spilled(*upto),
            FamilyRecord::Alone { tx } => {
                core.prepared.mark_alone(*tx);
            }
            FamilyRecord::Reseeding => {}
            FamilyRecord::Stable { at } => replica.restore_stable(*at),
            FamilyRecord::Reseeded { horizon, holes } => {
                core.horizon = core.horizon.max(*horizon);
                core.holes = holes.clone();
            }
        }
        // Taking a record again makes none: what recovery does is durable
        // already, or would be lost with the scratch effects.
        debug_assert!(scratch.records.is_empty(), "replaying a record persisted {:?}", scratch.records.len());
    }
}

/// After a replay: install now what was installed before the crash —
/// every commit below the smallest restored proposal — so that no read is
/// served from less than the DC was told this replica holds. What this
/// round replicates is kept for the peers' resume questions.
fn catch_up<R: FamilyReplica>(replica: &mut R) {
    let core = replica.core_mut();
    let (clock, _) = core.reserved.resume_points();
    core.hlc.observe(0, clock);
    let mut scratch = FamilyEffects::<R>::default();
    replica.apply(0, &mut scratch);
    debug_assert!(scratch.records.is_empty(), "the recovery's apply round persisted {}", scratch.records.len());
}

/// The clock and the transaction ids resume above what was reserved, and
/// the peers are asked for their streams: at every start, and when a
/// re-seed is complete.
fn resume<R: FamilyReplica>(r: &mut R, now: PhysicalMicros, out: &mut FamilyEffects<R>) {
    let core = r.core_mut();
    let (clock, next_tx) = core.reserved.resume_points();
    core.hlc.observe(now, clock);
    core.coordinator.resume_ids_at(next_tx);
    core.replication.streams.start(out);
}

/// A checkpoint of `r`: records whose replay rebuilds what replaying every
/// record it persisted so far would (see [`Replica::checkpoint`]). Taken
/// from the replica's state, which holds nothing a record did not make
/// durable, except where said: the stream positions are those the records
/// hold (groups taken, and heartbeat positions once recorded — not one
/// heard since), and what the records
/// would rebuild but is no longer needed is left out — versions the
/// collector dropped, decisions every cohort holds, groups every peer
/// acknowledged.
pub fn checkpoint<R: FamilyReplica>(r: &R) -> Vec<RecordOf<R>> {
    let core = r.core();
    let mut records: Vec<RecordOf<R>> = core.reserved.records().into();
    if core.seeding.is_some() {
        records.push(FamilyRecord::Reseeding);
        return records;
    }
    if core.horizon > Timestamp::ZERO || !core.holes.is_empty() {
        records.push(FamilyRecord::Reseeded { horizon: core.horizon, holes: core.holes.clone() });
    }
    // The versions, by the group (DC and commit time) that installed them.
    let mut groups: BTreeMap<(DcId, Timestamp), Vec<_>> = BTreeMap::new();
    for ((source, ct, txid), (meta, writes)) in core.store.by_transaction() {
        groups.entry((source, ct)).or_default().push(R::stored_writes(source, txid, meta, writes));
    }
    records.extend(groups.into_iter().map(|((source, ct), txs)| FamilyRecord::Installed { source, ct, txs }));
    let streams = &core.replication.streams;
    records.extend(streams.taken().into_iter().map(|(source, ct)| FamilyRecord::Applied {
        source,
        ct,
        txs: Vec::new(),
    }));
    records.extend(streams.spilled_upto().map(|upto| FamilyRecord::Spilled { upto }));
    records.extend(streams.kept().map(|(&ct, txs)| FamilyRecord::Kept { ct, txs: txs.clone() }));
    records.extend(core.replication.queued().map(|(ct, tx, w)| FamilyRecord::Queued { tx, ct, writes: w.clone() }));
    for (tx, pt, coordinator, prepared) in core.prepared.entries() {
        records.push(FamilyRecord::Prepared { tx, pt, coordinator, prepared: prepared.clone() });
        if core.prepared.is_alone(tx) {
            records.push(FamilyRecord::Alone { tx });
        }
    }
    records.extend(core.coordinator.decisions().map(|(tx, ct)| FamilyRecord::Decided { tx, ct }));
    records.extend(r.stable_to_keep().map(|at| FamilyRecord::Stable { at }));
    records
}

impl<R: FamilyReplica> Replica for R {
    type Message = FamilyMsg<R::Family>;
    type Timer = FamilyTimer<R::OwnTimer>;
    type Record = RecordOf<R>;

    fn id(&self) -> ReplicaId {
        self.core().id
    }

    /// At the first start and after every recovery: the timers are armed,
    /// and the clock, the ids and the streams resume — or, while
    /// re-seeding, the question for the replica's state goes out.
    fn start(&mut self, now: PhysicalMicros, out: &mut ReplicaEffects<Self>) {
        self.core().rhythm.start(out);
        match &mut self.core_mut().seeding {
            Some(seeding) => {
                // An attempt (again, after a crash cut one short) begins:
                // a recovery keeps only what follows its mark.
                out.persist(FamilyRecord::Reseeding);
                seeding.retry(now, out)
            }
            None => {
                resume(self, now, out);
                // Prepared alone before the crash, durably — the answer may
                // have gone out — and not committed yet: committed now.
                // Its coordinator hears it again, in case it still waits.
                for (tx, pt, coordinator) in self.core().prepared.alone() {
                    out.persist(FamilyRecord::Committed { tx, ct: pt });
                    self.commit(now, tx, pt, out);
                    out.send(coordinator, TxnMsg::PrepareResp { tx, pt });
                }
            }
        }
        reserve(self, out);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: Self::Message, out: &mut ReplicaEffects<Self>) {
        dispatch(self, now, from, msg, out);
        reserve(self, out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: Self::Timer, out: &mut ReplicaEffects<Self>) {
        if let Some(seeding) = &mut self.core_mut().seeding {
            // Nothing to apply, stabilize or heal without a state: ask
            // again whoever went silent.
            if timer == FamilyTimer::Heal {
                seeding.retry(now, out);
            }
            self.core().rhythm.rearm(timer, out);
            return reserve(self, out);
        }
        match timer {
            FamilyTimer::Apply => {
                self.apply(now, out);
                let stable = self.dc_stable();
                self.core_mut().coordinator.forget_decided(stable);
            }
            FamilyTimer::Stabilize if catching_up(self, out) => {}
            FamilyTimer::Stabilize => stabilization_step(self, now, out, |r, out| r.stabilize(now, out)),
            FamilyTimer::ExpireContexts => self.core_mut().coordinator.expire(now),
            FamilyTimer::Heal => heal(self, now, out),
            FamilyTimer::Own(timer) => self.on_own_timer(now, timer, out),
        }
        self.core().rhythm.rearm(timer, out);
        reserve(self, out);
    }

    /// A peer in another DC resumes its stream from what is held here;
    /// what else was lost (a prepare, a decision, a stabilization report)
    /// times out or comes again as after a crash. A replica still
    /// re-seeding asks again by its own timer.
    fn on_peer_lost(&mut self, now: PhysicalMicros, from: Addr, out: &mut ReplicaEffects<Self>) {
        if self.core().seeding.is_none() && !self.deaf_to_lost_messages() {
            peer_lost(self, now, from, out);
        }
        reserve(self, out);
    }

    /// A batch of the stream's groups is on disk.
    fn on_spilled(&mut self, _now: PhysicalMicros, upto: u64, out: &mut ReplicaEffects<Self>) {
        self.core_mut().replication.streams.on_spilled(upto, out);
        reserve(self, out);
    }

    /// Spilled groups of the stream, read back for a peer that is behind.
    fn on_unspilled(
        &mut self,
        _now: PhysicalMicros,
        after: u64,
        entries: Vec<(u64, Self::Record)>,
        out: &mut ReplicaEffects<Self>,
    ) {
        self.core_mut().replication.streams.on_unspilled(after, entries, out);
        reserve(self, out);
    }

    fn checkpoint(&self) -> Vec<Self::Record> {
        checkpoint(self)
    }

    fn is_quiescent(&self) -> bool {
        self.quiescent()
    }

    fn is_reseeding(&self) -> bool {
        self.core().seeding.is_some()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.core().store.latest()
    }

    fn counters(&self) -> ReplicaCounters {
        self.core().counters()
    }

    fn visible_upto(&self, origin: DcId) -> Timestamp {
        self.visible_from(origin)
    }

    fn version_metadata_bytes(&self) -> u64 {
        self.metadata_bytes()
    }
}
