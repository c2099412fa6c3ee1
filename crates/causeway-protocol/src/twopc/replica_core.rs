//! What every replica of the family has, whatever its protocol: its place in
//! the cluster and its rhythm, its hybrid clock and multi-version store, and
//! its three shared roles — the coordinator, the cohort's prepared
//! transactions, and replication to the other DCs.

use super::coordinator::Coordinator;
use super::prepared::PreparedSet;
use super::rejoin::StartGate;
use super::replication::Replicator;
use super::rhythm::Rhythm;
use super::Family;
use crate::contract::ReplicaCounters;
use crate::hlc::{Hlc, Timestamp};
use crate::ids::{DcId, ReplicaId};
use crate::mvstore::MvStore;
use crate::recovery::{Reservations, Seeding};
use crate::topology::Topology;
use std::sync::Arc;

/// The shared part of a replica of family `F`, whose versions carry `M` and
/// whose cohort keeps `P` of a prepared transaction.
pub struct FamilyCore<F: Family, M, P> {
    pub id: ReplicaId,
    pub topology: Arc<Topology>,
    pub rhythm: Rhythm,
    /// Proposals (and, for some protocols, snapshots) come from this clock;
    /// it never runs behind the physical clock.
    pub hlc: Hlc,
    pub store: MvStore<M>,
    pub coordinator: Coordinator<F::Snapshot>,
    pub prepared: PreparedSet<P>,
    pub replication: Replicator<F::Writes>,
    /// How far the clock and the transaction ids are reserved on disk.
    pub reserved: Reservations,
    /// Closed after a restart until the DC's stable times are known again.
    pub starts: StartGate<F::Start>,
    /// `Some` while the replica, having lost its state, collects it from
    /// the others ([`crate::recovery::seed`]): it serves nothing meanwhile.
    pub seeding: Option<Seeding<Timestamp, F::Writes>>,
    /// After a re-seed: reads at snapshots below this are not served (see
    /// [`super::durable::FamilyRecord::Reseeded`]).
    pub horizon: Timestamp,
    /// After a re-seed: DCs whose versions this replica lacks until their
    /// streams reach the position beside them; no read is served until then.
    pub holes: Vec<(DcId, Timestamp)>,
    /// Transactions applied, inputs refused (the store and the coordinator
    /// count the rest).
    pub counters: ReplicaCounters,
}

impl<F: Family, M, P> FamilyCore<F, M, P> {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, rhythm: Rhythm) -> Self {
        FamilyCore {
            id,
            hlc: Hlc::new(),
            store: MvStore::default(),
            coordinator: Coordinator::new(id, topology.clone(), rhythm.tx_context_timeout_us),
            prepared: PreparedSet::default(),
            replication: Replicator::new(id, &topology, rhythm.max_kept_bytes),
            reserved: Reservations::default(),
            starts: StartGate::default(),
            seeding: None,
            horizon: Timestamp::ZERO,
            holes: Vec::new(),
            counters: ReplicaCounters::default(),
            topology,
            rhythm,
        }
    }

    /// Every counter of the replica.
    pub fn counters(&self) -> ReplicaCounters {
        ReplicaCounters {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            contexts_expired: self.coordinator.expired(),
            ..self.counters
        }
    }

    /// A message no honest peer sends.
    pub fn refuse(&mut self) {
        self.counters.inputs_refused += 1;
    }

    /// The hybrid clock's last value.
    pub fn clock(&self) -> Timestamp {
        self.hlc.current()
    }

    /// Number of versions of `key` stored here.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }
}
