//! Identifiers of the things in a cluster: data centers, partitions, replicas,
//! clients and transactions.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A data center (a replication site), `0..M`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DcId(pub u16);

/// A partition (shard) of the key space, `0..N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

/// One replica of one partition: `p_n^m` in the papers (partition `n` in DC
/// `m`), and which member it is of the partition's replica group there. The
/// protocols of the Wren and PaRiS papers run one replica per partition and
/// DC (member 0); a partition replicated by a consensus group (Geo-SDUR, Raft
/// inside a DC) has several members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReplicaId {
    pub dc: DcId,
    pub partition: PartitionId,
    pub member: u8,
}

impl ReplicaId {
    pub fn new(dc: u16, partition: u32) -> Self {
        ReplicaId::at(DcId(dc), PartitionId(partition))
    }

    /// The (first) replica of `partition` in `dc`.
    pub const fn at(dc: DcId, partition: PartitionId) -> Self {
        ReplicaId { dc, partition, member: 0 }
    }
}

/// A client session, unique in the cluster. Sessions are numbered per DC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId {
    pub dc: DcId,
    pub index: u32,
}

/// Where a message goes: a partition replica or a client session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Addr {
    Replica(ReplicaId),
    Client(ClientId),
}

/// A transaction, named by the replica that coordinates it: the coordinating
/// partition in the high 24 bits, a per-coordinator counter in the low 40.
/// Unique within a DC; with the DC id it is unique in the cluster, and it is
/// the last tie-breaker of last-writer-wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxId(pub u64);

impl TxId {
    const COUNTER_BITS: u32 = 40;

    pub fn new(coordinator: PartitionId, counter: u64) -> Self {
        assert!(counter < 1 << Self::COUNTER_BITS, "transaction counter overflow");
        assert!(coordinator.0 < 1 << 24, "partition id does not fit a TxId");
        TxId((u64::from(coordinator.0) << Self::COUNTER_BITS) | counter)
    }

    /// The coordinating partition.
    pub fn coordinator(self) -> PartitionId {
        PartitionId((self.0 >> Self::COUNTER_BITS) as u32)
    }

    /// The coordinator's counter.
    pub fn counter(self) -> u64 {
        self.0 & ((1 << Self::COUNTER_BITS) - 1)
    }
}

impl fmt::Display for DcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dc{}", self.0)
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.member {
            0 => write!(f, "{}@{}", self.partition, self.dc),
            m => write!(f, "{}.{m}@{}", self.partition, self.dc),
        }
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-c{}", self.dc, self.index)
    }
}
