//! A closed-loop workload client: drives one protocol session through the
//! transactions the generator plans, and records what it saw.

use causeway_history::{CommitTs, Op, StampElem, Status, TxnRecord};
use causeway_protocol::engine::SessionOut;
use causeway_protocol::{CommitStamp, Key, Session, SessionEvent, Value};
use causeway_workload::{Generator, TxnPlan};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Idle,
    Beginning,
    Reading(usize),
    Committing,
}

pub struct WorkloadClient<S> {
    pub session: S,
    pub name: String,
    pub dc: u16,
    pub rng: ChaCha8Rng,
    seq: u64,
    step: Step,
    plan: Option<TxnPlan>,
    txid: String,
    ops: Vec<Op>,
    start_us: u64,
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
            name,
            dc,
            rng,
            seq: 0,
            step: Step::Idle,
            plan: None,
            txid: String::new(),
            ops: Vec::new(),
            start_us: 0,
        }
    }

    pub fn is_idle(&self) -> bool {
        self.step == Step::Idle
    }

    /// Starts the next transaction. Returns a finished record if the whole
    /// transaction completed without waiting for the network.
    pub fn start(&mut self, now: u64, gen: &Generator, out: &mut SessionOut<S::Message>) -> Option<TxnRecord> {
        debug_assert!(self.is_idle());
        self.plan = Some(gen.next(&mut self.rng));
        self.seq += 1;
        self.txid = format!("{}-{}", self.name, self.seq);
        self.ops.clear();
        self.start_us = now;
        self.step = Step::Beginning;
        let first = self.session.begin(out);
        self.drive(now, first, out)
    }

    /// Feeds a session completion; returns the record if the transaction is over.
    pub fn on_event(&mut self, now: u64, event: SessionEvent, out: &mut SessionOut<S::Message>) -> Option<TxnRecord> {
        self.drive(now, Ok(Some(event)), out)
    }

    fn drive(
        &mut self,
        now: u64,
        mut next: Result<Option<SessionEvent>, causeway_protocol::SessionError>,
        out: &mut SessionOut<S::Message>,
    ) -> Option<TxnRecord> {
        loop {
            let event = match next {
                Ok(None) => return None, // waiting for the cluster
                Ok(Some(e)) => e,
                Err(e) => SessionEvent::Failed(e),
            };
            next = match (self.step, event) {
                (Step::Beginning, SessionEvent::Started) => self.read_round(0, out),
                (Step::Reading(round), SessionEvent::Read(values)) => {
                    for (k, v) in values {
                        self.ops.push(Op::read(text(&k), v.map(|v| text(&v))));
                    }
                    self.read_round(round + 1, out)
                }
                (Step::Committing, SessionEvent::Committed(stamp)) => {
                    return Some(self.finish(now, Status::Committed, stamp));
                }
                (_, SessionEvent::Failed(_)) => return Some(self.finish(now, Status::Aborted, None)),
                (step, event) => panic!("{}: unexpected {event:?} in step {step:?}", self.txid),
            };
        }
    }

    /// Issues READ call `round`, or, past the last one, the writes and the
    /// commit (or abort).
    fn read_round(
        &mut self,
        round: usize,
        out: &mut SessionOut<S::Message>,
    ) -> Result<Option<SessionEvent>, causeway_protocol::SessionError> {
        let plan = self.plan.as_ref().expect("a running transaction has a plan");
        if let Some(keys) = plan.read_rounds.get(round) {
            self.step = Step::Reading(round);
            let keys = keys.clone();
            return self.session.read(&keys, out);
        }
        let writes = plan.writes.clone();
        let abort = plan.abort;
        for (i, key) in writes.iter().enumerate() {
            // Values are unique: `txid:key`, with a suffix on a write that
            // the same transaction overwrites later (an intermediate write).
            let overwritten = writes[i + 1..].contains(key);
            let value = if overwritten {
                format!("{}:{}:{i}", self.txid, text(key))
            } else {
                format!("{}:{}", self.txid, text(key))
            };
            self.session.write(Key::clone(key), Value::from(value.clone()))?;
            self.ops.push(Op::write(text(key), value));
        }
        if abort {
            self.session.abort(out)?;
            let why = causeway_protocol::SessionError::InvalidArgument("aborted by the workload".into());
            return Ok(Some(SessionEvent::Failed(why)));
        }
        self.step = Step::Committing;
        self.session.commit(out)
    }

    fn finish(&mut self, now: u64, status: Status, stamp: Option<CommitStamp>) -> TxnRecord {
        self.step = Step::Idle;
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
