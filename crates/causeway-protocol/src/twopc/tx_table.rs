//! The coordinator's transaction table (the papers' `TX[id]`), whatever the
//! protocol's snapshot: who the client is, the snapshot it reads, and the
//! operation in flight — read slices being gathered, or prepare proposals
//! being maxed into a commit time.

use crate::contract::{Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, PartitionId, TxId};
use rustc_hash::FxHashMap;

/// What a read returns: each key with its value, if it has one.
pub type Values = Vec<(Key, Option<Value>)>;

/// What the table keeps of one transaction.
#[derive(Clone, Debug)]
pub struct TxEntry<S> {
    pub client: Addr,
    pub snapshot: S,
    /// Local clock reading of the client's last request.
    last_active: PhysicalMicros,
    /// Read rounds started so far.
    rounds: u32,
    in_flight: InFlight,
}

/// The operation of a transaction that waits for cohorts.
#[derive(Clone, Debug)]
enum InFlight {
    Idle,
    /// Waiting for read slices of `round` from this many partitions.
    Read {
        round: u32,
        waiting: usize,
        values: Vec<(Key, Option<Value>)>,
    },
    /// Waiting for prepare replies since `since`; `ct` is the maximum
    /// proposal so far.
    Commit {
        waiting: usize,
        ct: Timestamp,
        cohorts: Vec<PartitionId>,
        since: PhysicalMicros,
    },
}

impl<S> TxEntry<S> {
    /// The read round being sent now waits for `slices` answers; returns
    /// its number.
    pub fn await_slices(&mut self, slices: usize) -> u32 {
        let round = self.rounds;
        self.rounds += 1;
        self.in_flight = InFlight::Read { round, waiting: slices, values: Vec::new() };
        round
    }

    /// The commit being sent now waits for a proposal from each cohort.
    pub fn await_proposals(&mut self, now: PhysicalMicros, cohorts: Vec<PartitionId>) {
        self.in_flight = InFlight::Commit { waiting: cohorts.len(), ct: Timestamp::ZERO, cohorts, since: now };
    }
}

/// A commit decided: every cohort proposed, the commit time is the largest.
pub struct Decided {
    pub client: Addr,
    pub ct: Timestamp,
    pub cohorts: Vec<PartitionId>,
}

/// The transactions a coordinator runs.
#[derive(Debug)]
pub struct TxTable<S> {
    map: FxHashMap<TxId, TxEntry<S>>,
}

impl<S> Default for TxTable<S> {
    fn default() -> Self {
        TxTable { map: FxHashMap::default() }
    }
}

impl<S> TxTable<S> {
    pub fn open(&mut self, now: PhysicalMicros, tx: TxId, client: Addr, snapshot: S) {
        self.map.insert(tx, TxEntry { client, snapshot, last_active: now, rounds: 0, in_flight: InFlight::Idle });
    }

    /// The context of `tx` for a new operation from `client`, or why there
    /// is none: unknown (or expired, or another client's), or busy.
    pub fn for_operation(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
    ) -> Result<&mut TxEntry<S>, SessionError> {
        match self.map.get_mut(&tx) {
            Some(ctx) if ctx.client == client => {
                if !matches!(ctx.in_flight, InFlight::Idle) {
                    return Err(SessionError::OperationInProgress);
                }
                ctx.last_active = now;
                Ok(ctx)
            }
            _ => Err(SessionError::UnknownTransaction),
        }
    }

    /// A read slice of `round` came back; with the last one, the client and
    /// all values. A slice of another round is stale, and ignored.
    pub fn slice_arrived(&mut self, tx: TxId, round: u32, slice: Values) -> Option<(Addr, Values)> {
        let ctx = self.map.get_mut(&tx)?;
        let InFlight::Read { round: current, waiting, values } = &mut ctx.in_flight else { return None };
        if *current != round {
            return None;
        }
        values.extend(slice);
        *waiting -= 1;
        if *waiting > 0 {
            return None;
        }
        let values = std::mem::take(values);
        ctx.in_flight = InFlight::Idle;
        Some((ctx.client, values))
    }

    /// A cohort proposed `pt`; with the last proposal the transaction is
    /// decided and its context forgotten.
    pub fn proposal_arrived(&mut self, tx: TxId, pt: Timestamp) -> Option<Decided> {
        let ctx = self.map.get_mut(&tx)?;
        let InFlight::Commit { waiting, ct, .. } = &mut ctx.in_flight else { return None };
        *ct = (*ct).max(pt);
        *waiting -= 1;
        if *waiting > 0 {
            return None;
        }
        let ctx = self.map.remove(&tx)?;
        let InFlight::Commit { ct, cohorts, .. } = ctx.in_flight else { return None };
        Some(Decided { client: ctx.client, ct, cohorts })
    }

    /// Cohort `partition` refused the prepare of `tx`: a commit waiting for
    /// its proposal is over — its client and cohorts returned. `None` if
    /// `tx` waits for no proposal from `partition`.
    pub fn refused(&mut self, tx: TxId, partition: PartitionId) -> Option<(Addr, Vec<PartitionId>)> {
        let ctx = self.map.get(&tx)?;
        let InFlight::Commit { cohorts, .. } = &ctx.in_flight else { return None };
        if !cohorts.contains(&partition) {
            return None;
        }
        let ctx = self.map.remove(&tx)?;
        let InFlight::Commit { cohorts, .. } = ctx.in_flight else { return None };
        Some((ctx.client, cohorts))
    }

    /// A read-only or aborted transaction is over (ignored while an
    /// operation of it is in flight).
    pub fn end(&mut self, tx: TxId) {
        if matches!(self.map.get(&tx), Some(ctx) if matches!(ctx.in_flight, InFlight::Idle)) {
            self.map.remove(&tx);
        }
    }

    /// Forgets transactions whose client has been silent for `timeout_us`
    /// — idle, or waiting for a read slice that a crash lost — but not one
    /// that is committing (see [`TxTable::overdue_commits`]); returns how
    /// many.
    pub fn expire(&mut self, now: PhysicalMicros, timeout_us: u64) -> u64 {
        let before = self.map.len();
        self.map.retain(|_, ctx| {
            matches!(ctx.in_flight, InFlight::Commit { .. }) || now.saturating_sub(ctx.last_active) < timeout_us
        });
        (before - self.map.len()) as u64
    }

    /// Takes the commits that have waited for a proposal longer than
    /// `after_us` (a cohort crashed with the prepare): each with its client
    /// and cohorts.
    pub fn overdue_commits(&mut self, now: PhysicalMicros, after_us: u64) -> Vec<(TxId, Addr, Vec<PartitionId>)> {
        self.take_commits(|since, _| now.saturating_sub(since) >= after_us)
    }

    /// Takes the commits still waiting for proposals that have `cohort`
    /// among their cohorts (its prepare or its answer may be lost), as
    /// [`TxTable::overdue_commits`] does.
    pub fn commits_with(&mut self, cohort: PartitionId) -> Vec<(TxId, Addr, Vec<PartitionId>)> {
        self.take_commits(|_, cohorts| cohorts.contains(&cohort))
    }

    fn take_commits(
        &mut self,
        pick: impl Fn(PhysicalMicros, &[PartitionId]) -> bool,
    ) -> Vec<(TxId, Addr, Vec<PartitionId>)> {
        let mut picked: Vec<TxId> = self
            .map
            .iter()
            .filter(
                |(_, ctx)| matches!(&ctx.in_flight, InFlight::Commit { since, cohorts, .. } if pick(*since, cohorts)),
            )
            .map(|(&tx, _)| tx)
            .collect();
        picked.sort_unstable();
        picked
            .into_iter()
            .filter_map(|tx| {
                let ctx = self.map.remove(&tx)?;
                let InFlight::Commit { cohorts, .. } = ctx.in_flight else { return None };
                Some((tx, ctx.client, cohorts))
            })
            .collect()
    }

    /// Whether `tx` is running here.
    pub fn contains(&self, tx: TxId) -> bool {
        self.map.contains_key(&tx)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The snapshots of the running transactions (for the GC bound).
    pub fn snapshots(&self) -> impl Iterator<Item = &S> {
        self.map.values().map(|ctx| &ctx.snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClientId, DcId};

    fn client(i: u32) -> Addr {
        Addr::Client(ClientId { dc: DcId(0), index: i })
    }

    #[test]
    fn an_operation_needs_the_clients_own_idle_context() {
        let mut c: TxTable<u8> = TxTable::default();
        let tx = TxId(1);
        c.open(0, tx, client(1), 7);
        assert_eq!(c.for_operation(1, client(2), tx).err(), Some(SessionError::UnknownTransaction));
        assert_eq!(c.for_operation(1, client(1), TxId(9)).err(), Some(SessionError::UnknownTransaction));
        assert_eq!(c.for_operation(1, client(1), tx).unwrap().await_slices(2), 0);
        assert_eq!(c.for_operation(2, client(1), tx).err(), Some(SessionError::OperationInProgress));
        assert!(c.slice_arrived(tx, 0, vec![]).is_none());
        let (to, _) = c.slice_arrived(tx, 0, vec![]).expect("the last slice completes the read");
        assert_eq!(to, client(1));
        assert!(c.slice_arrived(tx, 0, vec![]).is_none(), "a stray slice is ignored");
        assert_eq!(c.for_operation(3, client(1), tx).unwrap().await_slices(1), 1, "the second round");
        assert!(c.slice_arrived(tx, 0, vec![]).is_none(), "a slice of the first round is stale");
        assert!(c.slice_arrived(tx, 1, vec![]).is_some());
    }

    #[test]
    fn the_commit_time_is_the_largest_proposal_and_decides_once() {
        let mut c: TxTable<u8> = TxTable::default();
        let tx = TxId(1);
        c.open(0, tx, client(1), 0);
        c.for_operation(0, client(1), tx).unwrap().await_proposals(0, vec![PartitionId(0), PartitionId(1)]);
        assert!(c.proposal_arrived(tx, Timestamp(9)).is_none());
        let d = c.proposal_arrived(tx, Timestamp(5)).expect("decided");
        assert_eq!((d.ct, d.cohorts.len()), (Timestamp(9), 2));
        assert!(c.is_empty());
        assert!(c.proposal_arrived(tx, Timestamp(99)).is_none());
    }

    #[test]
    fn silent_contexts_expire_but_not_while_committing() {
        let mut c: TxTable<u8> = TxTable::default();
        c.open(0, TxId(1), client(1), 0);
        c.open(0, TxId(2), client(2), 0);
        let _ = c.for_operation(0, client(2), TxId(2)).unwrap().await_slices(1);
        c.open(0, TxId(4), client(4), 0);
        c.for_operation(0, client(4), TxId(4)).unwrap().await_proposals(0, vec![PartitionId(0)]);
        c.open(50, TxId(3), client(3), 0);
        assert_eq!(c.expire(100, 60), 2, "the idle one and the one whose slice never came");
        assert_eq!(c.len(), 2);
        c.end(TxId(3));
        assert_eq!(c.len(), 1);
        assert!(c.overdue_commits(50, 60).is_empty());
        let late = c.overdue_commits(60, 60);
        assert_eq!(late, vec![(TxId(4), client(4), vec![PartitionId(0)])]);
        assert!(c.is_empty());
    }
}
