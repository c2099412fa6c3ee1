//! What a protocol of the family brings ([`FamilyReplica`]): its types,
//! its core, and what it does with what is not the coordinator's — the
//! rest of a replica is shared ([`super::replica`]).

use super::durable::FamilyRecord;
use super::messages::FamilyMsg;
use super::replica_core::FamilyCore;
use super::rhythm::FamilyTimer;
use super::{Family, Payload};
use crate::contract::{Effects, Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, TxId};
use std::fmt::Debug;

type Snap<F> = <F as Family>::Snapshot;

/// What replica `R` makes durable.
pub type RecordOf<R> = FamilyRecord<<R as FamilyReplica>::Prepared, <<R as FamilyReplica>::Family as Family>::Writes>;

/// The effects of a step of replica `R`.
pub type FamilyEffects<R> =
    Effects<FamilyMsg<<R as FamilyReplica>::Family>, FamilyTimer<<R as FamilyReplica>::OwnTimer>, RecordOf<R>>;

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
    /// What a version carries besides its value and stamp.
    type Meta;
    /// What the cohort keeps of a prepared transaction (and makes durable).
    type Prepared: Payload;

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
    fn replicated(
        &mut self,
        from: Addr,
        ct: Timestamp,
        txs: &[<Self::Family as Family>::Writes],
        out: &mut FamilyEffects<Self>,
    );

    /// The writes of `txid` whose versions carry `meta` and are stamped
    /// with DC `source`, as the family replicates them: how a checkpoint
    /// says what the store holds.
    fn stored_writes(
        source: DcId,
        txid: TxId,
        meta: &Self::Meta,
        writes: Vec<(Key, Option<Value>)>,
    ) -> <Self::Family as Family>::Writes;

    /// Versions from a checkpoint, of `txs` committed at `ct` in DC
    /// `source`, installed again: the store alone changes (the checkpoint's
    /// other records restore the rest).
    fn reinstall(&mut self, source: DcId, ct: Timestamp, txs: &[<Self::Family as Family>::Writes]);

    /// Whether `txs`, said to be committed at `ct` in DC `source`, could
    /// come from an honest replica of this cluster (their metadata fits
    /// the commit): what a peer sends is checked before it is installed.
    fn well_formed(&self, source: DcId, ct: Timestamp, txs: &[<Self::Family as Family>::Writes]) -> bool {
        let _ = (source, ct, txs);
        true
    }

    /// A peer in another DC has nothing older than `t` still coming.
    fn heartbeat(&mut self, from: Addr, t: Timestamp, out: &mut FamilyEffects<Self>);

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
    /// ([`Replica::is_quiescent`](crate::contract::Replica::is_quiescent)).
    fn quiescent(&self) -> bool;

    /// Up to where writes from `origin` are visible
    /// ([`Replica::visible_upto`](crate::contract::Replica::visible_upto)).
    fn visible_from(&self, origin: DcId) -> Timestamp;

    /// The DC's stabilization has given this replica stable times since it
    /// (re)started: what it learned from clients alone does not count
    /// ([`super::rejoin`]).
    fn stable_times_known(&self) -> bool;

    /// The smallest timestamp of the DC's stable snapshot as this replica
    /// knows it: a snapshot handed out here now holds at least it.
    fn stable_floor(&self) -> Timestamp;

    /// Every version this replica has collected is superseded by one whose
    /// timestamps are at or below this: a snapshot whose floor reaches it
    /// reads nothing collected here.
    fn collection_bound(&self) -> Timestamp;

    /// The DC's local stable time as this replica knows it: every partition
    /// of the DC has durably resolved every transaction up to it (Wren's
    /// LST, Cure's local entry of the GSV).
    fn dc_stable(&self) -> Timestamp;

    /// A planted fault, for the checker's tests: what a peer lost on the way
    /// is not asked for again ([`Replica::on_peer_lost`] does nothing).
    ///
    /// [`Replica::on_peer_lost`]: crate::contract::Replica::on_peer_lost
    fn deaf_to_lost_messages(&self) -> bool {
        false
    }

    /// A stable snapshot from a [`FamilyRecord::Stable`] record, taken again
    /// after a crash.
    fn restore_stable(&mut self, at: Timestamp) {
        let _ = at;
    }

    /// What a checkpoint keeps as [`FamilyRecord::Stable`], if anything.
    fn stable_to_keep(&self) -> Option<Timestamp> {
        None
    }

    /// Bytes of visibility metadata per version
    /// ([`Replica::version_metadata_bytes`](crate::contract::Replica::version_metadata_bytes)).
    fn metadata_bytes(&self) -> u64;
}
