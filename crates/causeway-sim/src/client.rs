//! A closed-loop workload client: drives one protocol session through the
//! transactions the generator plans, and records what it saw.

use causeway_history::{CommitTs, Op, StampElem, Status, TxnRecord};
use causeway_protocol::contract::session::{CallResult, SessionEffects};
use causeway_protocol::{CommitStamp, Key, PartitionId, PhysicalMicros, Session, SessionError, SessionEvent, Value};
use causeway_workload::{Generator, TxnPlan};
use rand_chacha::ChaCha8Rng;

/// Where a client is in its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Beginning,
    Reading(usize),
    /// A read-only transaction of one read round, as one call.
    ReadingOnly,
    Committing,
}

pub struct WorkloadClient<S> {
    pub session: S,
    /// The session's name in the history: the client's, with the number of
    /// sessions it gave up (`dc0-c5.1`) once it has given one up.
    pub name: String,
    base: String,
    sessions_given_up: u32,
    pub dc: u16,
    /// From this time of the run (µs since its start) on, the client only
    /// reads ([`crate::config::Readers`]).
    pub reads_only_from: Option<u64>,
    /// The partition of the replica the client's session is attached to:
    /// its home, for the workloads that plan around one (the Geo-SDUR
    /// paper's). `None`: its DC's first replica's.
    pub home: Option<PartitionId>,
    pub rng: ChaCha8Rng,
    seq: u64,
    phase: Phase,
    plan: Option<TxnPlan>,
    txid: String,
    ops: Vec<Op>,
    start_us: u64,
    /// Steps of the running transaction in which the session sent
    /// requests: its round trips, counted from outside the protocol (the
    /// simulation counts them as it sends).
    pub round_trips: u32,
    read_only_call: bool,
    /// What the running transaction read last, for a transfer's writes.
    read: Vec<(Key, Option<Value>)>,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `commit_ts` as the history writes it: `[timestamp, dc, txid]`.
pub fn history_stamp(stamp: &CommitStamp) -> CommitTs {
    CommitTs(vec![StampElem::Int(stamp.ts.0), StampElem::Int(stamp.dc.0 as u64), StampElem::Int(stamp.txid.0)])
}

impl<S: Session> WorkloadClient<S> {
    pub fn new(session: S, name: String, dc: u16, rng: ChaCha8Rng) -> Self {
        WorkloadClient {
            session,
            base: name.clone(),
            name,
            sessions_given_up: 0,
            dc,
            reads_only_from: None,
            home: None,
            rng,
            seq: 0,
            phase: Phase::Idle,
            plan: None,
            txid: String::new(),
            ops: Vec::new(),
            start_us: 0,
            round_trips: 0,
            read_only_call: false,
            read: Vec::new(),
        }
    }

    /// Whether the running (or last) transaction was a read-only
    /// transaction of one call.
    pub fn is_read_only_call(&self) -> bool {
        self.read_only_call
    }

    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// The number of the client's current (or last) transaction.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Gives up the running transaction at `now` and goes on with
    /// `session`. Its record: `unknown` if it had asked to commit (the
    /// commit may have happened), `aborted` otherwise (nothing commits
    /// without the request).
    ///
    /// The new session knows nothing of the old one's causal past (a client
    /// whose connection died and that kept no session token), so the
    /// history names it as another session: session order holds within a
    /// session, not across the two.
    pub fn abandon(&mut self, session: S, now: u64) -> TxnRecord {
        self.session = session;
        let status = if self.phase == Phase::Committing { Status::Unknown } else { Status::Aborted };
        let record = self.finish(now, status, None);
        self.sessions_given_up += 1;
        self.name = format!("{}.{}", self.base, self.sessions_given_up);
        record
    }

    /// Starts the next transaction at `elapsed` microseconds of the run
    /// (`now` is the client's clock). Returns a finished record if the whole
    /// transaction completed without waiting for the network.
    pub fn start(
        &mut self,
        now: PhysicalMicros,
        elapsed: u64,
        gen: &Generator,
        out: &mut SessionEffects<S>,
    ) -> Option<TxnRecord> {
        debug_assert!(self.is_idle());
        let dc = causeway_protocol::DcId(self.dc);
        let mut plan = match self.home {
            Some(home) => gen.next_at(&mut self.rng, dc, home),
            None => gen.next(&mut self.rng, dc),
        };
        if self.reads_only_from.is_some_and(|from| elapsed >= from) {
            plan.writes.clear();
            plan.abort = false;
        }
        self.seq += 1;
        self.txid = format!("{}-{}", self.name, self.seq);
        self.ops.clear();
        self.start_us = elapsed;
        self.round_trips = 0;
        // A read-only transaction of one round is one call.
        let first = match plan.read_rounds.as_slice() {
            [keys] if plan.is_one_read_only_call() => {
                self.phase = Phase::ReadingOnly;
                self.read_only_call = true;
                self.session.read_only(now, keys, out)
            }
            _ => {
                self.phase = Phase::Beginning;
                self.read_only_call = false;
                self.session.begin(now, out)
            }
        };
        self.plan = Some(plan);
        self.drive(now, elapsed, first, out)
    }

    /// Feeds a session completion; returns the record if the transaction is over.
    pub fn on_event(
        &mut self,
        now: PhysicalMicros,
        elapsed: u64,
        event: SessionEvent,
        out: &mut SessionEffects<S>,
    ) -> Option<TxnRecord> {
        self.drive(now, elapsed, Ok(Some(event)), out)
    }

    fn drive(
        &mut self,
        now: PhysicalMicros,
        elapsed: u64,
        mut next: CallResult,
        out: &mut SessionEffects<S>,
    ) -> Option<TxnRecord> {
        loop {
            let event = match next {
                Ok(None) => return None, // waiting for the cluster
                Ok(Some(e)) => e,
                Err(e) => SessionEvent::Failed(e),
            };
            next = match (self.phase, event) {
                (Phase::Beginning, SessionEvent::Started) => self.read_round(now, 0, out),
                (Phase::Reading(round), SessionEvent::Read(values)) => {
                    self.read.clone_from(&values);
                    self.record_reads(values);
                    self.read_round(now, round + 1, out)
                }
                (Phase::ReadingOnly, SessionEvent::Read(values)) => {
                    self.record_reads(values);
                    return Some(self.finish(elapsed, Status::Committed, None));
                }
                (Phase::Committing, SessionEvent::Committed(stamp)) => {
                    return Some(self.finish(elapsed, Status::Committed, stamp));
                }
                // The commit may have taken effect: the history says so.
                (Phase::Committing, SessionEvent::Failed(SessionError::OutcomeUnknown)) => {
                    return Some(self.finish(elapsed, Status::Unknown, None));
                }
                (_, SessionEvent::Failed(_) | SessionEvent::Aborted(_)) => {
                    return Some(self.finish(elapsed, Status::Aborted, None))
                }
                (phase, event) => panic!("{}: unexpected {event:?} in phase {phase:?}", self.txid),
            };
        }
    }

    fn record_reads(&mut self, values: Vec<(Key, Option<Value>)>) {
        for (k, v) in values {
            self.ops.push(Op::read(text(&k), v.map(|v| text(&v))));
        }
    }

    /// Issues READ call `round`, or, past the last one, the writes and the
    /// commit (or abort).
    fn read_round(&mut self, now: PhysicalMicros, round: usize, out: &mut SessionEffects<S>) -> CallResult {
        let plan = self.plan.as_mut().expect("a running transaction has a plan");
        // A timeline's second round: the posts of whom its first round
        // says it follows.
        if let (1, Some((step, social))) = (round, &plan.social) {
            if plan.read_rounds.len() == 1 {
                let keys = social.second_round(step, &self.read);
                if !keys.is_empty() {
                    plan.read_rounds.push(keys);
                }
            }
        }
        if let Some(keys) = plan.read_rounds.get(round) {
            self.phase = Phase::Reading(round);
            let keys = keys.clone();
            return self.session.read(now, &keys, out);
        }
        let writes = plan.writes.clone();
        let abort = plan.abort;
        if let Some(transfer) = plan.transfer.clone() {
            // The writes follow from what was read: both balances, or none.
            let find = |key: &Key| self.read.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.clone());
            let (from, to) = (find(&transfer.from), find(&transfer.to));
            if let Some(moved) = transfer.writes(from.as_deref(), to.as_deref()) {
                for (key, balance) in moved {
                    let value = causeway_workload::Transfer::value(balance, &format!("{}:{}", self.txid, text(&key)));
                    self.session.write(key.clone(), Some(Value::from(value.clone())))?;
                    self.ops.push(Op::write(text(&key), value));
                }
            }
            self.phase = Phase::Committing;
            return self.session.commit(now, out);
        }
        if let Some((step, social)) = plan.social.clone() {
            // A post's and a follow's lists, from what the first round read
            // (the new post is named by the transaction).
            for (key, value) in social.writes(&step, &self.read, &self.txid, &self.txid) {
                self.session.write(key.clone(), Some(Value::from(value.clone())))?;
                self.ops.push(Op::write(text(&key), value));
            }
            self.phase = Phase::Committing;
            return self.session.commit(now, out);
        }
        for (i, write) in writes.iter().enumerate() {
            let key = &write.key;
            if write.delete {
                self.session.write(Key::clone(key), None)?;
                self.ops.push(Op::delete(text(key)));
                continue;
            }
            // Values are unique: `txid:key`, with a suffix on a write that
            // the same transaction overwrites later (an intermediate write).
            let overwritten = writes[i + 1..].iter().any(|w| w.key == *key);
            let value = if overwritten {
                format!("{}:{}:{i}", self.txid, text(key))
            } else {
                format!("{}:{}", self.txid, text(key))
            };
            self.session.write(Key::clone(key), Some(Value::from(value.clone())))?;
            self.ops.push(Op::write(text(key), value));
        }
        if abort {
            self.session.abort(now, out)?;
            let why = SessionError::InvalidArgument("aborted by the workload".into());
            return Ok(Some(SessionEvent::Failed(why)));
        }
        self.phase = Phase::Committing;
        self.session.commit(now, out)
    }

    fn finish(&mut self, now: u64, status: Status, stamp: Option<CommitStamp>) -> TxnRecord {
        self.phase = Phase::Idle;
        self.plan = None;
        TxnRecord {
            txid: self.txid.clone(),
            session: self.name.clone(),
            seq: self.seq,
            dc: self.dc,
            status,
            ops: std::mem::take(&mut self.ops),
            commit_ts: stamp.as_ref().map(history_stamp),
            start_us: self.start_us,
            end_us: now,
        }
    }
}
