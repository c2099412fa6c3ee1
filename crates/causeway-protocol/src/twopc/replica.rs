//! A replica of the family: what its protocol brings ([`FamilyReplica`]),
//! and the [`Replica`] every such protocol gets — which role takes which
//! message, starting, and what is common to report.

use super::messages::{FamilyMsg, TxnMsg};
use super::replica_core::FamilyCore;
use super::rhythm::FamilyTimer;
use super::Family;
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Effects, Key, Replica, ReplicaCounters, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

type Snap<F> = <F as Family>::Snapshot;

/// The effects of a step of replica `R`.
pub type FamilyEffects<R> = Effects<
    FamilyMsg<<R as FamilyReplica>::Family>,
    FamilyTimer<<R as FamilyReplica>::OwnTimer>,
    <R as FamilyReplica>::Record,
>;

/// The shared core of replica `R`.
pub type CoreOf<R> =
    FamilyCore<<R as FamilyReplica>::Family, <R as FamilyReplica>::Meta, <R as FamilyReplica>::Prepared>;

/// A read slice a cohort is asked for: by whom, for which transaction and
/// round, the keys, and the snapshot to read them in.
#[derive(Clone, Debug)]
pub struct SliceRequest<S> {
    pub from: Addr,
    pub tx: TxId,
    pub round: u32,
    pub keys: Vec<Key>,
    pub snapshot: S,
}

/// What a protocol of the family brings: its types, its core, and what it
/// does with what is not the coordinator's.
pub trait FamilyReplica: Send + 'static {
    type Family: Family;
    /// Timers of the protocol's own, beside the family's.
    type OwnTimer: Copy + Debug + Eq + Send;
    type Record: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// What a version carries besides its value and stamp.
    type Meta;
    /// What the cohort keeps of a prepared transaction.
    type Prepared;

    fn core(&self) -> &CoreOf<Self>;

    fn core_mut(&mut self) -> &mut CoreOf<Self>;

    /// A client starts a transaction, having seen `seen`.
    fn start_transaction(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        seen: <Self::Family as Family>::Start,
        out: &mut FamilyEffects<Self>,
    );

    /// The cohort serves a read slice.
    fn serve_slice(
        &mut self,
        now: PhysicalMicros,
        read: SliceRequest<Snap<Self::Family>>,
        out: &mut FamilyEffects<Self>,
    );

    /// The cohort prepares a transaction.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: Snap<Self::Family>,
        ht: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        out: &mut FamilyEffects<Self>,
    );

    /// The cohort learns a transaction's commit time.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, out: &mut FamilyEffects<Self>);

    /// A peer in another DC replicates transactions committed at `ct`.
    fn replicated(&mut self, from: Addr, ct: Timestamp, txs: Vec<<Self::Family as Family>::Writes>);

    /// A peer in another DC has nothing older than `t` still coming.
    fn heartbeat(&mut self, from: Addr, t: Timestamp);

    /// A stabilization message from a partition of this DC.
    fn stabilization(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        msg: <Self::Family as Family>::Gossip,
        out: &mut FamilyEffects<Self>,
    );

    /// Every Δ_R: apply, replicate, heartbeat.
    fn apply(&mut self, now: PhysicalMicros, out: &mut FamilyEffects<Self>);

    /// Every Δ_G: a round of stabilization.
    fn stabilize(&mut self, now: PhysicalMicros, out: &mut FamilyEffects<Self>);

    /// A timer of the protocol's own is due.
    fn on_own_timer(&mut self, now: PhysicalMicros, timer: Self::OwnTimer, out: &mut FamilyEffects<Self>);

    /// No transaction is between prepare and apply here
    /// ([`Replica::is_quiescent`]).
    fn quiescent(&self) -> bool;

    /// Up to where writes from `origin` are visible
    /// ([`Replica::visible_upto`]).
    fn visible_from(&self, origin: DcId) -> Timestamp;

    /// Bytes of visibility metadata per version
    /// ([`Replica::version_metadata_bytes`]).
    fn metadata_bytes(&self) -> u64;
}

/// Hands `msg` from `from` to the role that takes it.
fn dispatch<R: FamilyReplica>(
    r: &mut R,
    now: PhysicalMicros,
    from: Addr,
    msg: FamilyMsg<R::Family>,
    out: &mut FamilyEffects<R>,
) {
    use TxnMsg::*;
    match msg {
        StartTxReq(seen) => r.start_transaction(now, from, seen, out),
        TxReadReq { tx, keys } => {
            let core = r.core_mut();
            core.coordinator.on_read(now, from, tx, keys, &core.topology, out);
        }
        CommitReq { tx, hwt, writes } => {
            let core = r.core_mut();
            core.coordinator.on_commit_request(now, from, tx, hwt, writes, &core.topology, out);
        }
        EndTx { tx } => r.core_mut().coordinator.end(tx),
        SliceReq { tx, round, keys, snapshot } => {
            r.serve_slice(now, SliceRequest { from, tx, round, keys, snapshot }, out)
        }
        SliceResp { tx, round, values } => r.core_mut().coordinator.on_slice(tx, round, values, out),
        PrepareReq { tx, snapshot, ht, writes } => r.prepare(now, from, tx, snapshot, ht, writes, out),
        PrepareResp { tx, pt } => r.core_mut().coordinator.on_proposal(tx, pt, out),
        Commit { tx, ct } => r.commit(now, tx, ct, out),
        Replicate { ct, txs } => r.replicated(from, ct, txs),
        Heartbeat { t } => r.heartbeat(from, t),
        Stabilization(msg) => r.stabilization(now, from, msg, out),
        // Replies meant for clients: a peer speaking out of turn.
        StartTxResp { .. } | TxReadResp { .. } | CommitResp { .. } | TxError { .. } => r.core_mut().refuse(),
    }
}

impl<R: FamilyReplica> Replica for R {
    type Message = FamilyMsg<R::Family>;
    type Timer = FamilyTimer<R::OwnTimer>;
    type Record = R::Record;

    fn id(&self) -> ReplicaId {
        self.core().id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut ReplicaEffects<Self>) {
        let core = self.core_mut();
        core.hlc.observe(now, Timestamp::ZERO);
        core.rhythm.start(out);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: Self::Message, out: &mut ReplicaEffects<Self>) {
        dispatch(self, now, from, msg, out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: Self::Timer, out: &mut ReplicaEffects<Self>) {
        match timer {
            FamilyTimer::Apply => self.apply(now, out),
            FamilyTimer::Stabilize => self.stabilize(now, out),
            FamilyTimer::ExpireContexts => self.core_mut().coordinator.expire(now),
            FamilyTimer::Own(timer) => self.on_own_timer(now, timer, out),
        }
        self.core().rhythm.rearm(timer, out);
    }

    fn is_quiescent(&self) -> bool {
        self.quiescent()
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
