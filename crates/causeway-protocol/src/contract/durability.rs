//! The durability effect as drivers carry it out: an in-memory log of a
//! replica's records (the store the next step puts a disk under), and the
//! gate that holds a replica's messages until the records they wait for are
//! durable — keeping every link FIFO, because a message sent after a held one
//! waits behind it.

use super::effects::Effects;
use crate::ids::Addr;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Where a driver appends a replica's records: it tells how many are
/// durable, and the gate releases the messages that waited for them.
pub trait RecordLog<R> {
    /// Appends `records` (draining them; not durable yet); returns the
    /// log's new length.
    fn append_all(&mut self, records: &mut Vec<R>) -> usize;

    /// How many records are durable.
    fn durable(&self) -> usize;

    /// A message waits for the first `upto` records to be durable. A log
    /// that syncs only when something waits (the runtime's, under
    /// `fsync = "always"`) starts now; records no message waits for ride
    /// along with the next sync.
    fn need_durable(&mut self, _upto: usize) {}
}

impl<R: Clone> RecordLog<R> for MemoryLog<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        self.append(records.drain(..))
    }

    fn durable(&self) -> usize {
        self.synced
    }
}

/// A replica's records, in the order it persisted them: those up to
/// [`MemoryLog::synced`] are durable, the rest would be lost by a crash. A
/// checkpoint replaces every record appended before it (and makes them
/// durable), as the runtime's disk log does; positions count from the
/// log's beginning across checkpoints, so the send gate's waits stay valid.
#[derive(Debug)]
pub struct MemoryLog<R> {
    /// The last checkpoint: records that rebuild positions `..base`.
    checkpoint: Vec<R>,
    base: usize,
    /// The records after the checkpoint, at positions `base..`.
    records: Vec<R>,
    synced: usize,
    checkpoints: u64,
}

impl<R> Default for MemoryLog<R> {
    fn default() -> Self {
        MemoryLog { checkpoint: Vec::new(), base: 0, records: Vec::new(), synced: 0, checkpoints: 0 }
    }
}

impl<R: Clone> MemoryLog<R> {
    /// Appends records (not durable yet); returns the log's new length.
    pub fn append(&mut self, records: impl IntoIterator<Item = R>) -> usize {
        self.records.extend(records);
        self.len()
    }

    /// Everything before position `upto` is durable now.
    pub fn sync_to(&mut self, upto: usize) {
        self.synced = self.synced.max(upto.min(self.len()));
    }

    /// Everything appended so far is durable now.
    pub fn sync_all(&mut self) {
        self.synced = self.len();
    }

    /// Replaces everything appended so far with `state` (the replica's
    /// [`checkpoint`](super::Replica::checkpoint), taken after its last
    /// append), at once and durably: the records it covers count as synced.
    pub fn checkpoint(&mut self, state: Vec<R>) {
        self.base = self.len();
        self.checkpoint = state;
        self.records.clear();
        self.synced = self.base;
        self.checkpoints += 1;
    }

    /// How many records were appended since the last checkpoint.
    pub fn since_checkpoint(&self) -> usize {
        self.records.len()
    }

    /// How many checkpoints were taken.
    pub fn checkpoints(&self) -> u64 {
        self.checkpoints
    }

    /// How many records are durable.
    pub fn synced(&self) -> usize {
        self.synced
    }

    /// How many records were appended, checkpointed ones included.
    pub fn len(&self) -> usize {
        self.base + self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A crash: what was not synced is gone.
    pub fn crash(&mut self) {
        self.records.truncate(self.synced - self.base);
    }

    /// What a recovery replays: the checkpoint, then the durable records
    /// after it.
    pub fn durable(&self) -> Vec<R> {
        let mut out = self.checkpoint.clone();
        out.extend_from_slice(&self.records[..self.synced - self.base]);
        out
    }
}

/// A replica's outgoing messages that wait for durability, per destination,
/// with the log length each waits for. Links are FIFO per destination, so a
/// message waits behind the held ones to its own destination only: a read
/// answer to a client does not wait for a sync a peer's message needs.
#[derive(Debug)]
pub struct SendGate<M> {
    held: FxHashMap<Addr, VecDeque<(usize, M)>>,
    count: usize,
}

impl<M> Default for SendGate<M> {
    fn default() -> Self {
        SendGate { held: FxHashMap::default(), count: 0 }
    }
}

impl<M> SendGate<M> {
    /// Takes a step's records into `log` and its messages into the gate,
    /// and hands `send`, in order, the messages that may leave now. A step's
    /// `messages` leave at once unless earlier ones to the same destination
    /// are held (they queue behind them); its `after_durable` ones wait
    /// until the log is synced up to its length after this step. Hot path:
    /// nothing is allocated when nothing waits.
    pub fn take<T, R>(
        &mut self,
        out: &mut Effects<M, T, R>,
        log: &mut impl RecordLog<R>,
        mut send: impl FnMut(Addr, M),
    ) {
        for (to, msg) in out.messages.drain(..) {
            match self.held.get_mut(&to) {
                Some(queue) => {
                    queue.push_back((0, msg));
                    self.count += 1;
                }
                None => send(to, msg),
            }
        }
        if out.records.is_empty() && out.after_durable.is_empty() {
            return;
        }
        let needs = log.append_all(&mut out.records);
        let synced = log.durable();
        if needs > synced && !out.after_durable.is_empty() {
            log.need_durable(needs);
        }
        for (to, msg) in out.after_durable.drain(..) {
            if needs <= synced && !self.held.contains_key(&to) {
                send(to, msg);
                continue;
            }
            self.held.entry(to).or_default().push_back((needs, msg));
            self.count += 1;
        }
    }

    /// Hands `send`, in order per destination, the held messages that may
    /// leave once `synced` records are durable.
    pub fn release(&mut self, synced: usize, mut send: impl FnMut(Addr, M)) {
        if self.count == 0 {
            return;
        }
        let count = &mut self.count;
        self.held.retain(|&to, queue| {
            while let Some(&(needs, _)) = queue.front() {
                if needs > synced {
                    break;
                }
                let (_, msg) = queue.pop_front().expect("a front");
                *count -= 1;
                send(to, msg);
            }
            !queue.is_empty()
        });
    }

    /// Messages held now.
    pub fn held(&self) -> usize {
        self.count
    }

    /// A crash: what was held never leaves.
    pub fn crash(&mut self) {
        self.held.clear();
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ReplicaId;

    #[test]
    fn a_message_waits_for_its_records_and_later_ones_wait_behind_it() {
        let to = Addr::Replica(ReplicaId::new(0, 1));
        let (mut log, mut gate) = (MemoryLog::<u32>::default(), SendGate::<&str>::default());
        let mut out = Effects::<&str, (), u32>::default();
        out.send(to, "first");
        out.persist(7);
        out.send_after_durable(to, "after 7");
        let mut sent = Vec::new();
        gate.take(&mut out, &mut log, |to, m| sent.push((to, m)));
        assert_eq!(sent, vec![(to, "first")]);
        out.send(to, "later");
        gate.take(&mut out, &mut log, |to, m| sent.push((to, m)));
        assert_eq!(sent.len(), 1, "FIFO: behind the held one");
        assert_eq!(gate.held(), 2);
        let elsewhere = Addr::Replica(ReplicaId::new(0, 2));
        out.send(elsewhere, "to another");
        gate.take(&mut out, &mut log, |to, m| sent.push((to, m)));
        assert_eq!(sent.len(), 2, "another destination does not wait");
        log.sync_all();
        gate.release(log.synced(), |to, m| sent.push((to, m)));
        assert_eq!(sent, vec![(to, "first"), (elsewhere, "to another"), (to, "after 7"), (to, "later")]);
    }

    #[test]
    fn a_crash_loses_what_was_not_synced_and_what_waited_for_it() {
        let to = Addr::Replica(ReplicaId::new(0, 1));
        let (mut log, mut gate) = (MemoryLog::<u32>::default(), SendGate::<&str>::default());
        let mut out = Effects::<&str, (), u32>::default();
        out.persist(1);
        gate.take(&mut out, &mut log, |_, _| {});
        log.sync_all();
        out.persist(2);
        out.send_after_durable(to, "after 2");
        gate.take(&mut out, &mut log, |_, _| panic!("nothing leaves before its records are durable"));
        log.crash();
        gate.crash();
        assert_eq!(log.durable(), vec![1]);
        gate.release(usize::MAX, |_, _| panic!("what waited for lost records never leaves"));
    }

    #[test]
    fn a_checkpoint_replaces_what_came_before_and_makes_it_durable() {
        let to = Addr::Replica(ReplicaId::new(0, 1));
        let (mut log, mut gate) = (MemoryLog::<u32>::default(), SendGate::<&str>::default());
        let mut out = Effects::<&str, (), u32>::default();
        out.persist(1);
        out.persist(2);
        out.send_after_durable(to, "after 2");
        gate.take(&mut out, &mut log, |_, _| panic!("not durable yet"));
        log.checkpoint(vec![3]);
        assert_eq!((log.len(), log.synced(), log.since_checkpoint()), (2, 2, 0));
        let mut sent = Vec::new();
        gate.release(log.synced(), |_, m| sent.push(m));
        assert_eq!(sent, vec!["after 2"], "the checkpoint made the records durable");
        out.persist(4);
        out.persist(5);
        gate.take(&mut out, &mut log, |_, _| {});
        log.sync_to(3);
        log.crash();
        assert_eq!(log.durable(), vec![3, 4], "the checkpoint, then the synced records after it");
        assert_eq!(log.len(), 3, "positions count from the log's beginning");
    }
}
