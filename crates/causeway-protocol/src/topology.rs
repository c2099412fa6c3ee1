//! The shape of a cluster: M data centers, N partitions, and the placement
//! map that says which DCs hold a replica of each partition — and, for a
//! partition replicated by a consensus group (Geo-SDUR), its members, of
//! which one DC may hold several ([`Topology::with_groups`]).
//!
//! Keys go to partitions by a stable hash: 64-bit FNV-1a of the key's bytes,
//! modulo N. It is part of the on-disk and on-wire contract — changing it
//! moves every key — so it is spelled out here and pinned by a test.

use crate::ids::{DcId, PartitionId, ReplicaId};
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    dcs: u16,
    partitions: u32,
    /// For each partition, the DCs holding a replica, sorted.
    placement: Vec<Vec<DcId>>,
    /// For each partition, its replicas, sorted: one per DC of its
    /// placement (member 0), or a group's members, numbered within each DC.
    members: Vec<Vec<ReplicaId>>,
    /// Every DC holds every partition: asked on every transaction start
    /// (transaction ids), so kept rather than counted again.
    full: bool,
    /// `(from, partition) → dc`: where a DC that does not hold a partition
    /// reads and prepares it, when not the round-robin choice
    /// ([`Topology::prefer`]).
    preferred: BTreeMap<(DcId, PartitionId), DcId>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("a cluster needs at least one data center")]
    NoDcs,
    #[error("a cluster needs at least one partition")]
    NoPartitions,
    #[error("placement lists {found} partitions, the topology has {expected}")]
    PlacementLength { expected: u32, found: usize },
    #[error("partition {0} has no replica")]
    NoReplica(PartitionId),
    #[error("partition {partition} is placed in {dc}, which does not exist")]
    UnknownDc { partition: PartitionId, dc: DcId },
    #[error("partition {partition} is placed twice in {dc}")]
    DuplicateReplica { partition: PartitionId, dc: DcId },
    #[error("partition {partition} has {members} members in {dc}; at most {max} fit one DC")]
    TooManyMembers { partition: PartitionId, dc: DcId, members: usize, max: usize },
    #[error("a replication factor of {replication} needs at least {replication} data centers; the cluster has {dcs}")]
    ReplicationAboveDcs { replication: u16, dcs: u16 },
    #[error("the replication factor must be at least 1")]
    NoReplication,
    #[error("{dc} does not exist")]
    NoSuchDc { dc: DcId },
    #[error("{partition} does not exist")]
    NoSuchPartition { partition: PartitionId },
    #[error("{from} holds {partition} itself: it reads its own replica, not another DC's")]
    PreferredButHeld { from: DcId, partition: PartitionId },
    #[error("{partition} has no replica in {dc} to prefer (it lives in {held})")]
    PreferredNotAReplica { partition: PartitionId, dc: DcId, held: String },
}

impl Topology {
    /// Full replication: every DC holds every partition (R = M).
    pub fn full(dcs: u16, partitions: u32) -> Result<Self, TopologyError> {
        let all: Vec<DcId> = (0..dcs).map(DcId).collect();
        Self::with_placement(dcs, partitions, vec![all; partitions as usize])
    }

    /// Every DC holds every partition (`replication: None`), or each
    /// partition is in R of them, dealt round-robin
    /// ([`Topology::round_robin`]): the shapes `--replication` gives.
    pub fn placed(dcs: u16, partitions: u32, replication: Option<u16>) -> Result<Self, TopologyError> {
        match replication {
            None => Self::full(dcs, partitions),
            Some(r) => Self::round_robin(dcs, partitions, r),
        }
    }

    /// Partial replication with `replication` (R) replicas of each
    /// partition, dealt round-robin: the N·R replicas go to DCs 0, 1, …,
    /// M−1, 0, … in partition order, so partition `n` lives in DCs
    /// `n·R mod M` to `n·R + R − 1 mod M` and every DC holds ⌊N·R/M⌋ or
    /// ⌈N·R/M⌉ partitions (none if N·R < M). R = M is full replication.
    pub fn round_robin(dcs: u16, partitions: u32, replication: u16) -> Result<Self, TopologyError> {
        if replication == 0 {
            return Err(TopologyError::NoReplication);
        }
        if replication > dcs {
            return Err(TopologyError::ReplicationAboveDcs { replication, dcs });
        }
        let placement = (0..partitions)
            .map(|n| {
                let first = u64::from(n) * u64::from(replication);
                (0..replication).map(|i| DcId(((first + u64::from(i)) % u64::from(dcs)) as u16)).collect()
            })
            .collect();
        Self::with_placement(dcs, partitions, placement)
    }

    /// Any placement, as long as every partition has at least one replica in
    /// DCs that exist. Partial replication (R < M) is for protocols that
    /// support it (PaRiS); Wren requires full replication.
    pub fn with_placement(dcs: u16, partitions: u32, mut placement: Vec<Vec<DcId>>) -> Result<Self, TopologyError> {
        if dcs == 0 {
            return Err(TopologyError::NoDcs);
        }
        if partitions == 0 {
            return Err(TopologyError::NoPartitions);
        }
        if placement.len() != partitions as usize {
            return Err(TopologyError::PlacementLength { expected: partitions, found: placement.len() });
        }
        for (n, replicas) in placement.iter_mut().enumerate() {
            let partition = PartitionId(n as u32);
            if replicas.is_empty() {
                return Err(TopologyError::NoReplica(partition));
            }
            replicas.sort();
            for pair in replicas.windows(2) {
                if pair[0] == pair[1] {
                    return Err(TopologyError::DuplicateReplica { partition, dc: pair[0] });
                }
            }
            if let Some(&dc) = replicas.iter().find(|dc| dc.0 >= dcs) {
                return Err(TopologyError::UnknownDc { partition, dc });
            }
        }
        let full = placement.iter().all(|r| r.len() == usize::from(dcs));
        let members = placement
            .iter()
            .enumerate()
            .map(|(n, dcs)| dcs.iter().map(|&dc| ReplicaId::at(dc, PartitionId(n as u32))).collect())
            .collect();
        Ok(Topology { dcs, partitions, placement, members, full, preferred: BTreeMap::new() })
    }

    /// Partitions replicated by groups: `groups[n]` lists the DC of each
    /// member of partition `n`, and a DC may appear more than once (two
    /// members in one region, as Geo-SDUR's "WAN 1" places a partition's
    /// majority). Members are numbered within their DC in the order listed.
    pub fn with_groups(dcs: u16, partitions: u32, groups: Vec<Vec<DcId>>) -> Result<Self, TopologyError> {
        if groups.len() != partitions as usize {
            return Err(TopologyError::PlacementLength { expected: partitions, found: groups.len() });
        }
        let mut placement = Vec::with_capacity(groups.len());
        let mut members = Vec::with_capacity(groups.len());
        for (n, group) in groups.iter().enumerate() {
            let partition = PartitionId(n as u32);
            let mut in_dc: BTreeMap<DcId, usize> = BTreeMap::new();
            let mut ids = Vec::with_capacity(group.len());
            for &dc in group {
                let count = in_dc.entry(dc).or_default();
                if *count > usize::from(u8::MAX) {
                    let max = usize::from(u8::MAX) + 1;
                    return Err(TopologyError::TooManyMembers { partition, dc, members: *count + 1, max });
                }
                ids.push(ReplicaId { dc, partition, member: *count as u8 });
                *count += 1;
            }
            ids.sort();
            members.push(ids);
            placement.push(in_dc.into_keys().collect::<Vec<_>>());
        }
        let mut topology = Self::with_placement(dcs, partitions, placement)?;
        topology.members = members;
        Ok(topology)
    }

    /// `from`, which does not hold `partition`, reads and prepares it at
    /// its replica in `dc` rather than at the round-robin choice of
    /// [`Topology::serving_dc`] (the PaRiS paper's preferred replica, set
    /// by hand: the nearest one, say).
    pub fn prefer(mut self, from: DcId, partition: PartitionId, dc: DcId) -> Result<Self, TopologyError> {
        if let Some(&dc) = [from, dc].iter().find(|d| d.0 >= self.dcs) {
            return Err(TopologyError::NoSuchDc { dc });
        }
        if partition.0 >= self.partitions {
            return Err(TopologyError::NoSuchPartition { partition });
        }
        if self.holds(from, partition) {
            return Err(TopologyError::PreferredButHeld { from, partition });
        }
        if !self.holds(dc, partition) {
            let held = self.replicas_of(partition).iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            return Err(TopologyError::PreferredNotAReplica { partition, dc, held });
        }
        self.preferred.insert((from, partition), dc);
        Ok(self)
    }

    pub fn dc_count(&self) -> u16 {
        self.dcs
    }

    pub fn partition_count(&self) -> u32 {
        self.partitions
    }

    pub fn dcs(&self) -> impl Iterator<Item = DcId> + Clone {
        (0..self.dcs).map(DcId)
    }

    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> + Clone {
        (0..self.partitions).map(PartitionId)
    }

    /// The DCs holding a replica of `partition`, sorted.
    pub fn replicas_of(&self, partition: PartitionId) -> &[DcId] {
        &self.placement[partition.0 as usize]
    }

    pub fn holds(&self, dc: DcId, partition: PartitionId) -> bool {
        self.replicas_of(partition).binary_search(&dc).is_ok()
    }

    /// Every replica of `partition`, sorted: the members of its group.
    pub fn members_of(&self, partition: PartitionId) -> &[ReplicaId] {
        &self.members[partition.0 as usize]
    }

    /// The members of `partition` in `dc`.
    pub fn members_in(&self, dc: DcId, partition: PartitionId) -> impl Iterator<Item = ReplicaId> + '_ {
        self.members_of(partition).iter().copied().filter(move |m| m.dc == dc)
    }

    /// Whether some DC holds more than one member of a partition: a shape
    /// only the protocols of replica groups run on.
    pub fn has_groups(&self) -> bool {
        self.members.iter().any(|m| m.iter().any(|r| r.member > 0))
    }

    /// The refusal of a protocol that runs one replica per partition and DC.
    pub fn one_replica_per_dc(&self) -> Result<(), String> {
        match self.members.iter().flatten().find(|r| r.member > 0) {
            Some(r) => Err(format!(
                "{} holds more than one replica of {}: only a protocol of replica groups (sdur) runs on such a placement",
                r.dc, r.partition
            )),
            None => Ok(()),
        }
    }

    /// The DC whose replica of `partition` serves requests from `from`:
    /// `from` itself if it holds one; otherwise the DC's preferred remote
    /// replica — as [`Topology::prefer`] set it, or else spread
    /// round-robin over the DCs that hold the partition (the PaRiS paper's
    /// §V-A: every client of a DC uses the same one, and different DCs use
    /// different ones).
    pub fn serving_dc(&self, from: DcId, partition: PartitionId) -> DcId {
        let replicas = self.replicas_of(partition);
        if replicas.binary_search(&from).is_ok() {
            return from;
        }
        match self.preferred.get(&(from, partition)) {
            Some(&dc) => dc,
            None => replicas[usize::from(from.0) % replicas.len()],
        }
    }

    /// The largest number of replicas any partition has (R).
    pub fn replication(&self) -> u16 {
        self.placement.iter().map(|r| r.len() as u16).max().unwrap_or(0)
    }

    /// The DCs that hold no partition at all.
    pub fn empty_dcs(&self) -> Vec<DcId> {
        self.dcs().filter(|&dc| self.partitions().all(|p| !self.holds(dc, p))).collect()
    }

    pub fn is_fully_replicated(&self) -> bool {
        self.full
    }

    /// Every replica in the cluster, DC by DC.
    pub fn all_replicas(&self) -> Vec<ReplicaId> {
        self.dcs().flat_map(|dc| self.replicas_in(dc)).collect()
    }

    /// The replicas a DC holds (every member of a group it holds).
    pub fn replicas_in(&self, dc: DcId) -> Vec<ReplicaId> {
        self.partitions().flat_map(|p| self.members_in(dc, p)).collect()
    }

    /// The replicas of `me`'s partition in the other DCs, where its writes
    /// replicate to and remote writes come from.
    pub fn peers_of(&self, me: ReplicaId) -> Vec<ReplicaId> {
        self.replicas_of(me.partition)
            .iter()
            .filter(|&&dc| dc != me.dc)
            .map(|&dc| ReplicaId { dc, partition: me.partition, member: me.member })
            .collect()
    }

    /// Splits items by the partition of their key, in partition order: how
    /// a coordinator fans reads and writes out to cohorts.
    pub fn group_by_partition<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        key: impl Fn(&T) -> &[u8],
    ) -> BTreeMap<PartitionId, Vec<T>> {
        let mut groups: BTreeMap<PartitionId, Vec<T>> = BTreeMap::new();
        for item in items {
            groups.entry(self.partition_of(key(&item))).or_default().push(item);
        }
        groups
    }

    /// The partition that stores `key`.
    pub fn partition_of(&self, key: &[u8]) -> PartitionId {
        PartitionId((fnv1a64(key) % u64::from(self.partitions)) as u32)
    }
}

/// 64-bit FNV-1a.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_the_documented_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        let t = Topology::full(1, 8).unwrap();
        assert_eq!(t.partition_of(b"foobar"), PartitionId((0x85944171f73967e8u64 % 8) as u32));
    }

    #[test]
    fn keys_spread_over_partitions() {
        let t = Topology::full(1, 8).unwrap();
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            counts[t.partition_of(format!("k{i}").as_bytes()).0 as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }

    #[test]
    fn grouping_by_partition_keeps_item_order_within_a_partition() {
        let t = Topology::full(1, 4).unwrap();
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let groups = t.group_by_partition(keys.iter(), |k| k.as_bytes());
        assert_eq!(groups.values().map(Vec::len).sum::<usize>(), 40);
        for (p, members) in &groups {
            assert!(members.iter().all(|k| t.partition_of(k.as_bytes()) == *p));
            let positions: Vec<usize> = members.iter().map(|k| keys.iter().position(|x| x == *k).unwrap()).collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn full_replication_places_every_partition_everywhere() {
        let t = Topology::full(3, 4).unwrap();
        assert!(t.is_fully_replicated());
        assert_eq!(t.all_replicas().len(), 12);
        assert_eq!(t.replicas_of(PartitionId(2)), &[DcId(0), DcId(1), DcId(2)]);
    }

    #[test]
    fn round_robin_spreads_replicas_evenly_and_serves_from_a_preferred_replica() {
        let t = Topology::round_robin(3, 6, 2).unwrap();
        assert_eq!(t.replicas_of(PartitionId(0)), &[DcId(0), DcId(1)]);
        assert_eq!(t.replicas_of(PartitionId(1)), &[DcId(0), DcId(2)]);
        assert_eq!(t.replicas_of(PartitionId(2)), &[DcId(1), DcId(2)]);
        for dc in t.dcs() {
            assert_eq!(t.replicas_in(dc).len(), 4, "{dc}");
        }
        assert_eq!(t.replication(), 2);
        assert!(t.empty_dcs().is_empty());
        // DC 2 holds partition 1 but not 0 (DCs 0, 1): DC 2 mod 2 = 0.
        assert_eq!(t.serving_dc(DcId(2), PartitionId(1)), DcId(2));
        assert_eq!(t.serving_dc(DcId(2), PartitionId(0)), DcId(0));
        // DC 0 does not hold partition 2 (DCs 1, 2).
        assert_eq!(t.serving_dc(DcId(0), PartitionId(2)), DcId(1));
        // 5 DCs, 2 partitions, R = 3: six replicas, one DC holds two.
        let t = Topology::round_robin(5, 2, 3).unwrap();
        let held: Vec<usize> = t.dcs().map(|dc| t.replicas_in(dc).len()).collect();
        assert_eq!(held, vec![2, 1, 1, 1, 1]);
        assert!(Topology::round_robin(3, 4, 3).unwrap().is_fully_replicated());
        assert_eq!(Topology::round_robin(2, 4, 3), Err(TopologyError::ReplicationAboveDcs { replication: 3, dcs: 2 }));
        assert_eq!(Topology::round_robin(2, 4, 0), Err(TopologyError::NoReplication));
        assert_eq!(Topology::round_robin(3, 1, 2).unwrap().empty_dcs(), vec![DcId(2)]);
    }

    #[test]
    fn a_preferred_replica_replaces_the_round_robin_choice_and_is_checked() {
        let t = Topology::round_robin(3, 6, 2).unwrap();
        // DC 2 does not hold partition 0 (DCs 0, 1): round-robin gives DC 0.
        let t = t.prefer(DcId(2), PartitionId(0), DcId(1)).unwrap();
        assert_eq!(t.serving_dc(DcId(2), PartitionId(0)), DcId(1));
        assert_eq!(t.serving_dc(DcId(0), PartitionId(2)), DcId(1), "other choices keep round-robin");
        let err = |r: Result<Topology, TopologyError>| r.unwrap_err().to_string();
        assert_eq!(
            err(t.clone().prefer(DcId(0), PartitionId(0), DcId(1))),
            "dc0 holds p0 itself: it reads its own replica, not another DC's"
        );
        assert_eq!(
            err(t.clone().prefer(DcId(2), PartitionId(0), DcId(2))),
            "p0 has no replica in dc2 to prefer (it lives in dc0, dc1)"
        );
        assert_eq!(err(t.clone().prefer(DcId(3), PartitionId(0), DcId(1))), "dc3 does not exist");
        assert_eq!(err(t.prefer(DcId(2), PartitionId(6), DcId(1))), "p6 does not exist");
    }

    #[test]
    fn groups_may_place_several_members_in_one_dc() {
        let t = Topology::with_groups(3, 2, vec![vec![DcId(2), DcId(2), DcId(0)], vec![DcId(0), DcId(1), DcId(2)]])
            .unwrap();
        assert!(t.has_groups());
        let p0 = PartitionId(0);
        assert_eq!(
            t.members_of(p0),
            &[
                ReplicaId::at(DcId(0), p0),
                ReplicaId::at(DcId(2), p0),
                ReplicaId { dc: DcId(2), partition: p0, member: 1 }
            ]
        );
        assert_eq!(t.replicas_of(p0), &[DcId(0), DcId(2)]);
        assert_eq!(t.members_in(DcId(2), p0).count(), 2);
        assert_eq!(t.replicas_in(DcId(2)).len(), 3, "two of p0 and one of p1");
        assert_eq!(t.all_replicas().len(), 6);
        assert!(t.one_replica_per_dc().unwrap_err().contains("dc2 holds more than one replica of p0"));
        let wan2 = Topology::with_groups(3, 1, vec![vec![DcId(0), DcId(1), DcId(2)]]).unwrap();
        assert!(!wan2.has_groups() && wan2.is_fully_replicated(), "one member per DC is an ordinary placement");
        assert_eq!(wan2, Topology::full(3, 1).unwrap());
    }

    #[test]
    fn partial_placement_is_admitted_and_validated() {
        let t = Topology::with_placement(3, 2, vec![vec![DcId(1), DcId(0)], vec![DcId(2)]]).unwrap();
        assert!(!t.is_fully_replicated());
        assert!(t.holds(DcId(0), PartitionId(0)) && !t.holds(DcId(0), PartitionId(1)));
        assert_eq!(t.replicas_in(DcId(2)), vec![ReplicaId::new(2, 1)]);
        assert_eq!(Topology::with_placement(3, 1, vec![vec![]]), Err(TopologyError::NoReplica(PartitionId(0))));
        assert_eq!(
            Topology::with_placement(2, 1, vec![vec![DcId(5)]]),
            Err(TopologyError::UnknownDc { partition: PartitionId(0), dc: DcId(5) })
        );
        assert_eq!(
            Topology::with_placement(2, 1, vec![vec![DcId(1), DcId(1)]]),
            Err(TopologyError::DuplicateReplica { partition: PartitionId(0), dc: DcId(1) })
        );
        assert_eq!(Topology::full(0, 1), Err(TopologyError::NoDcs));
        assert_eq!(Topology::full(1, 0), Err(TopologyError::NoPartitions));
    }
}
