//! The commits an EC coordinator waits on: each until every other partition
//! it wrote says it holds the writes durably. A partition that does not
//! answer is sent the writes again now and then (it may have crashed with
//! them; applying twice is harmless); one that has not answered for too
//! long leaves the commit's outcome unknown.

use super::messages::EcWrites;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, PartitionId, TxId};
use std::collections::BTreeMap;

/// Commits waiting for the partitions they wrote.
#[derive(Debug, Default)]
pub struct Commits {
    waiting: BTreeMap<TxId, Waiting>,
}

#[derive(Debug)]
struct Waiting {
    client: Addr,
    ct: Timestamp,
    since: PhysicalMicros,
    /// The partitions that have not answered, with the writes they got.
    partitions: BTreeMap<PartitionId, EcWrites>,
}

/// A commit that is over: its client, transaction and commit time.
pub type Done = (Addr, TxId, Timestamp);

impl Commits {
    /// `tx` of `client`, at `ct`, waits for `partitions`.
    pub fn wait(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        ct: Timestamp,
        partitions: BTreeMap<PartitionId, EcWrites>,
    ) {
        debug_assert!(!partitions.is_empty(), "a commit with nothing to wait for is answered at once");
        self.waiting.insert(tx, Waiting { client, ct, since: now, partitions });
    }

    /// `partition` holds the writes of `tx` durably: the commit, if that
    /// was the last one it waited for (nothing for one this coordinator
    /// does not wait on: a second answer, or an answer to a coordinator
    /// that restarted since).
    pub fn applied(&mut self, tx: TxId, partition: PartitionId) -> Option<Done> {
        let waiting = self.waiting.get_mut(&tx)?;
        waiting.partitions.remove(&partition);
        if !waiting.partitions.is_empty() {
            return None;
        }
        let done = self.waiting.remove(&tx)?;
        Some((done.client, tx, done.ct))
    }

    /// The writes to send again: those of the commits waited on for at
    /// least `after_us`, to the partitions that have not answered.
    pub fn unanswered(&self, now: PhysicalMicros, after_us: u64) -> impl Iterator<Item = (PartitionId, &EcWrites)> {
        self.waiting
            .values()
            .filter(move |w| now.saturating_sub(w.since) >= after_us)
            .flat_map(|w| w.partitions.iter().map(|(&p, writes)| (p, writes)))
    }

    /// Gives up the commits waited on for longer than `after_us`: their
    /// outcome is unknown.
    pub fn overdue(&mut self, now: PhysicalMicros, after_us: u64) -> Vec<Done> {
        let mut late = Vec::new();
        self.waiting.retain(|&tx, w| {
            let waiting = now.saturating_sub(w.since) < after_us;
            if !waiting {
                late.push((w.client, tx, w.ct));
            }
            waiting
        });
        late
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClientId, DcId};

    fn writes(tx: u64) -> EcWrites {
        EcWrites { txid: TxId(tx), ct: Timestamp(7), writes: Vec::new() }
    }

    #[test]
    fn a_commit_is_done_when_every_partition_answered_and_unknown_when_one_is_late() {
        let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
        let mut c = Commits::default();
        let parts = |ps: &[u32]| ps.iter().map(|&p| (PartitionId(p), writes(1))).collect();
        c.wait(100, client, TxId(1), Timestamp(7), parts(&[1, 2]));
        assert_eq!(c.applied(TxId(1), PartitionId(1)), None);
        assert_eq!(c.unanswered(150, 100).count(), 0, "not yet");
        assert_eq!(c.unanswered(200, 100).map(|(p, _)| p).collect::<Vec<_>>(), vec![PartitionId(2)]);
        assert_eq!(c.applied(TxId(1), PartitionId(2)), Some((client, TxId(1), Timestamp(7))));
        assert!(c.is_empty());
        assert_eq!(c.applied(TxId(1), PartitionId(2)), None, "a second answer is nothing");

        c.wait(100, client, TxId(2), Timestamp(9), parts(&[3]));
        assert!(c.overdue(500, 1_000).is_empty());
        assert_eq!(c.overdue(1_100, 1_000), vec![(client, TxId(2), Timestamp(9))]);
        assert!(c.is_empty());
    }
}
