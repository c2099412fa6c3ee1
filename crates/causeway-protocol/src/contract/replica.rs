//! A partition replica: one member of the group that holds a partition.

use super::data::{Key, Value};
use super::effects::Effects;
use super::message::Message;
use super::spill::Done;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// Counters every replica keeps, whatever its protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaCounters {
    /// Versions currently stored, over all keys.
    pub versions: u64,
    /// Versions removed by garbage collection so far.
    pub versions_collected: u64,
    /// Coordinator contexts dropped because their client went silent.
    pub contexts_expired: u64,
    /// Transactions this replica has applied (local and replicated).
    pub transactions_applied: u64,
    /// Messages refused as impossible from an honest peer: replication from
    /// a replica that is not a peer, a commit time below the proposal, a
    /// snapshot of another cluster's shape, a reply meant for a client.
    /// Zero in every honest run.
    pub inputs_refused: u64,
}

impl std::ops::Add for ReplicaCounters {
    type Output = ReplicaCounters;

    /// The sum of two replicas' counters.
    fn add(self, other: ReplicaCounters) -> ReplicaCounters {
        ReplicaCounters {
            versions: self.versions + other.versions,
            versions_collected: self.versions_collected + other.versions_collected,
            contexts_expired: self.contexts_expired + other.contexts_expired,
            transactions_applied: self.transactions_applied + other.transactions_applied,
            inputs_refused: self.inputs_refused + other.inputs_refused,
        }
    }
}

/// The effects of one replica step.
pub type ReplicaEffects<R> = Effects<<R as Replica>::Message, <R as Replica>::Timer, <R as Replica>::Record>;

pub trait Replica {
    type Message: Message;
    type Timer: Copy + Debug + Eq + Send;
    /// What this replica makes durable ([`Effects::persist`]), and is
    /// rebuilt from after a crash.
    type Record: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static;

    fn id(&self) -> ReplicaId;

    /// Called once before any other input (and once after a recovery);
    /// arms the periodic timers.
    fn start(&mut self, now: PhysicalMicros, out: &mut ReplicaEffects<Self>);

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: Self::Message, out: &mut ReplicaEffects<Self>);

    fn on_timer(&mut self, now: PhysicalMicros, timer: Self::Timer, out: &mut ReplicaEffects<Self>);

    /// Messages between this replica and `from` may have been lost, in
    /// either direction: a driver's link dropped what it could not deliver
    /// (the runtime's bound on what waits for an unreachable node), while
    /// both lived on. The receiving side is told before any message `from`
    /// sent afterwards, which arrive as ever: the link is FIFO again from
    /// here; the sending side as it drops them. The protocol asks again for
    /// what it cannot do without — a replication stream resumes from what
    /// this replica holds, a decision is asked for — and gives up at once
    /// what waits on `from` (a commit whose cohort it is), rather than at
    /// the timeouts that cover a crashed peer, during which stable time
    /// would stand still.
    fn on_peer_lost(&mut self, now: PhysicalMicros, from: Addr, out: &mut ReplicaEffects<Self>);

    /// The driver has the batch of this replica's `Spill::Put` whose last
    /// key is `upto` on disk ([`super::spill`]). A replica that never
    /// spills ignores it.
    fn on_spilled(&mut self, now: PhysicalMicros, upto: u64, out: &mut ReplicaEffects<Self>) {
        let _ = (now, upto, out);
    }

    /// The driver's answer to this replica's `Spill::Get { after }`: the
    /// entries of one spilled batch above `after`, in order, or none when
    /// nothing spilled lies above it ([`super::spill`]). A replica that
    /// never spills ignores it.
    fn on_unspilled(
        &mut self,
        now: PhysicalMicros,
        after: u64,
        entries: Vec<(u64, Self::Record)>,
        out: &mut ReplicaEffects<Self>,
    ) {
        let _ = (now, after, entries, out);
    }

    /// A checkpoint: records whose replay by [`Protocol::recover`] rebuilds
    /// what replaying every record this replica persisted so far would —
    /// less what is no longer needed (versions the collector dropped,
    /// groups every peer acknowledged) — and nothing those records did not
    /// make durable. A driver takes it between steps, once every record of
    /// the steps before is appended, and replaces its log up to there with
    /// it (which makes those records durable); a recovery then replays the
    /// checkpoint and the records after it, so restart time follows the
    /// state held, not the history. A replica that persists nothing returns
    /// nothing.
    ///
    /// A checkpoint is records rather than a snapshot type of its own so
    /// that `recover` stays the one way back, every protocol (future ones
    /// too) checkpoints with the record type it already has — adding, at
    /// most, variants for state no ordinary record says — and the log on
    /// disk holds one format.
    ///
    /// [`Protocol::recover`]: super::protocol::Protocol::recover
    fn checkpoint(&self) -> Vec<Self::Record>;

    /// True when no transaction is between prepare and apply here.
    fn is_quiescent(&self) -> bool;

    /// True while the replica, having lost its durable state, collects it
    /// from the others ([`crate::recovery::seed`]) and serves nothing that
    /// needs it. Drivers report when it is done.
    fn is_reseeding(&self) -> bool {
        false
    }

    /// The newest applied value of every key this replica stores, by
    /// last-writer-wins; what the history's `final` lines list.
    fn latest_values(&self) -> Vec<(Key, Value)>;

    fn counters(&self) -> ReplicaCounters;

    /// The timestamp up to which writes that originate in DC `origin` are
    /// visible to transactions starting here now (Wren: LST for the local DC,
    /// RST for the others; Cure: the entry of the stable vector; EC: the last
    /// write applied from that DC). Drivers sample it to measure how long an
    /// update takes to become visible, locally and remotely.
    fn visible_upto(&self, origin: DcId) -> Timestamp;

    /// Whether this replica leads its group's ordered log now (protocols of
    /// replica groups; no other replica leads anything). The simulator
    /// crashes leaders with it.
    fn leads(&self) -> bool {
        false
    }

    /// The positions of the entries this replica's ordered log delivered
    /// since the last call, each with a digest of the entry (protocols of
    /// replica groups; others deliver no log). The simulator checks, at
    /// every step, that no two members of a group deliver different
    /// entries at one position.
    fn take_deliveries(&mut self, out: &mut Vec<(u64, u64)>) {
        let _ = out;
    }

    /// Bytes of protocol metadata every version carries besides its key,
    /// value and last-writer-wins tie-breakers: the timestamps that decide
    /// its visibility (Wren: `ut` and `rdt`, 16; Cure: one per DC, 8·M; EC:
    /// its commit time, 8). Drivers report it next to the message bytes.
    fn version_metadata_bytes(&self) -> u64;
}

impl<R> Done<R> {
    /// Tells `replica` what came of its spill operation
    /// ([`Replica::on_spilled`], [`Replica::on_unspilled`]).
    pub fn tell<P: Replica<Record = R>>(self, replica: &mut P, now: PhysicalMicros, out: &mut ReplicaEffects<P>) {
        match self {
            Done::Spilled(upto) => replica.on_spilled(now, upto, out),
            Done::Unspilled(after, entries) => replica.on_unspilled(now, after, entries, out),
        }
    }
}
