//! The client's side of one write-only transaction: its parts by
//! partition, the coordinator it picks, and the participants' answers
//! gathered — the client waits for every participant's commit, not only the
//! coordinator's, so that its next read finds its write wherever it reads:
//! each participant's answer, or, where the coordinator gathers them
//! ([`Rules::gathered`](super::Rules::gathered)), the coordinator's once
//! every participant has told it.

use super::{Decided, Refused, WtxId};
use crate::contract::{AbortReason, Key, SessionError, Value};
use crate::ids::{ClientId, PartitionId};
use crate::session_core::{Awaiting, Reply};
use crate::topology::Topology;
use std::collections::BTreeMap;

/// One commit under way, with what the client depended on when it sent it
/// (if the protocol keeps that with it: PrompTCC's `D_c` stands still
/// while it commits, and the decision raises it).
#[derive(Debug)]
pub struct Commit<D> {
    pub tx: WtxId,
    pub deps: D,
    participants: Vec<PartitionId>,
    /// The participants yet to answer (a handful: a list).
    waiting: Vec<PartitionId>,
    decided: Option<Decided>,
}

/// The part of a transaction one partition gets.
pub struct Part {
    pub partition: PartitionId,
    pub writes: Vec<(Key, Option<Value>)>,
    pub participants: Vec<PartitionId>,
    pub coordinator: PartitionId,
}

impl<D> Commit<D> {
    /// Splits `writes` by partition and picks a coordinator among them,
    /// spread by client and transaction. `gathered`: the coordinator
    /// answers for every participant once all have committed
    /// ([`Rules::gathered`](super::Rules::gathered)); else each answers.
    pub fn start(
        topology: &Topology,
        client: ClientId,
        tx: WtxId,
        writes: &[(Key, Option<Value>)],
        deps: D,
        gathered: bool,
    ) -> (Self, Vec<Part>) {
        let by_partition: BTreeMap<PartitionId, Vec<(Key, Option<Value>)>> =
            topology.group_by_partition(writes.to_vec(), |(k, _)| k);
        let participants: Vec<PartitionId> = by_partition.keys().copied().collect();
        let coordinator = participants[((client.index as u64 + tx.n) % participants.len() as u64) as usize];
        let parts = by_partition
            .into_iter()
            .map(|(partition, writes)| Part { partition, writes, participants: participants.clone(), coordinator })
            .collect();
        let waiting = if gathered { vec![coordinator] } else { participants.clone() };
        (Commit { tx, deps, participants, waiting, decided: None }, parts)
    }

    /// A participant says `tx` committed there — or, where the coordinator
    /// gathers the commits, the coordinator says every participant did:
    /// `Err` if the answer is not one this commit can get (another
    /// transaction, a decision that does not name every partition written
    /// in order, one it does not wait for, or twice), `Ok(None)` while
    /// others are still to answer, and the decision once every one has.
    pub fn on_committed(&mut self, from: PartitionId, tx: WtxId, decided: Decided) -> Result<Option<Decided>, Refused> {
        let fits = tx == self.tx
            && decided.len() == self.participants.len()
            && decided.iter().zip(&self.participants).all(|((p, _), q)| p == q);
        let Some(at) = self.waiting.iter().position(|&p| p == from).filter(|_| fits) else {
            return Err(Refused);
        };
        self.waiting.swap_remove(at);
        self.decided.get_or_insert(decided);
        if !self.waiting.is_empty() {
            return Ok(None);
        }
        Ok(self.decided.take())
    }
}

/// A participant says `tx` was given up: the session's answer, if it is the
/// commit under way (which ends).
pub fn on_aborted<D>(committing: &mut Option<Commit<D>>, tx: WtxId) -> Option<Reply> {
    committing.as_ref().filter(|c| c.tx == tx)?;
    *committing = None;
    Some(Reply::Aborted(AbortReason::Unavailable("a partition the transaction wrote did not answer in time".into())))
}

/// The commit timer of transaction `n` fired: if the session still waits
/// for that commit, its outcome is unknown (part of it may commit yet).
pub fn on_commit_timeout<D>(committing: &mut Option<Commit<D>>, n: u64, awaiting: Option<Awaiting>) -> Option<Reply> {
    if awaiting != Some(Awaiting::Commit) || committing.as_ref().is_none_or(|c| c.tx.n != n) {
        return None;
    }
    *committing = None;
    Some(Reply::Failed(SessionError::OutcomeUnknown))
}
