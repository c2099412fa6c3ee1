//! What the closed-loop clients do: the shape of the workload and the
//! transaction plans drawn from it.

use crate::keys::KeySpace;
use crate::zipf::ZipfTable;
use causeway_protocol::{DcId, Key, Topology};
use rand::seq::index::sample;
use rand::Rng;

/// The workload of the closed-loop clients.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConfig {
    /// Reads per update transaction (and per read-only transaction).
    pub reads_per_txn: u32,
    /// Writes per update transaction.
    pub writes_per_txn: u32,
    /// Partitions one transaction touches (capped at the partition count).
    pub partitions_per_txn: u32,
    /// Keys in each partition.
    pub keys_per_partition: u32,
    /// Zipf exponent of key popularity inside a partition (0 = uniform).
    pub zipf: f64,
    /// Share of transactions that only read.
    pub read_only_fraction: f64,
    /// Share of update transactions the client aborts instead of committing.
    pub abort_fraction: f64,
    /// Share of update transactions that write one key twice (the first
    /// value is an intermediate write nobody may read).
    pub rewrite_fraction: f64,
    /// Share of writes that delete their key instead of writing a value.
    pub delete_fraction: f64,
    /// Reads are issued in this many READ calls at most (split at random).
    pub max_read_rounds: u32,
    /// Think time between a client's transactions, in microseconds.
    pub think_time_us: u64,
    /// Under partial replication, the share of "multi-DC" transactions,
    /// which touch random partitions anywhere; the others are "local-DC":
    /// they touch only partitions the client's DC holds (the PaRiS paper's
    /// locality, 95:5 by default). Without partial replication every
    /// transaction is both.
    pub multi_dc_fraction: f64,
    /// What a transaction is: reads then writes over chosen partitions
    /// (the Wren paper's), or either reads or writes of keys drawn from the
    /// whole key space (the PrompTCC paper's).
    pub shape: TxnShape,
}

/// The shape of a transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxnShape {
    /// `reads_per_txn` reads then `writes_per_txn` writes, over
    /// `partitions_per_txn` partitions (zipf inside each); a share of them
    /// read-only.
    #[default]
    ReadThenWrite,
    /// The PrompTCC paper's (after TAO): a transaction only reads
    /// (`reads_per_txn` keys, one call: a read-only transaction) or, a
    /// share `1 - read_only_fraction` of them (the write fraction), only
    /// writes (`writes_per_txn` keys); the keys distinct, drawn by one zipf
    /// over every key of every partition, the hottest spread over the
    /// partitions. `partitions_per_txn`, aborts, rewrites and read rounds
    /// do not apply.
    ReadOrWrite,
}

impl Default for WorkloadConfig {
    /// The Wren paper's default transaction (19 reads + 1 write over 4
    /// partitions, zipf 0.99), with a few read-only and aborted ones mixed in
    /// so their paths are exercised too.
    fn default() -> Self {
        WorkloadConfig {
            reads_per_txn: 19,
            writes_per_txn: 1,
            partitions_per_txn: 4,
            keys_per_partition: 1000,
            zipf: 0.99,
            read_only_fraction: 0.1,
            abort_fraction: 0.02,
            rewrite_fraction: 0.02,
            delete_fraction: 0.0,
            max_read_rounds: 2,
            think_time_us: 0,
            multi_dc_fraction: 0.05,
            shape: TxnShape::ReadThenWrite,
        }
    }
}

impl WorkloadConfig {
    /// The PrompTCC paper's transactions ([`TxnShape::ReadOrWrite`]): each
    /// reads `keys` keys, or — a share `write_fraction` of them — writes
    /// `keys` keys; none aborted or written twice.
    pub fn read_or_write(keys: u32, write_fraction: f64) -> Self {
        WorkloadConfig {
            reads_per_txn: keys,
            writes_per_txn: keys,
            read_only_fraction: 1.0 - write_fraction,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            max_read_rounds: 1,
            shape: TxnShape::ReadOrWrite,
            ..WorkloadConfig::default()
        }
    }

    /// The share of transactions that write (`1 - read_only_fraction`).
    pub fn write_fraction(&self) -> f64 {
        1.0 - self.read_only_fraction
    }
}

/// How clients choose keys.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadKind {
    /// Random keys per [`WorkloadConfig`].
    Random(WorkloadConfig),
    /// The atomicity invariant workload: `groups` groups of keys, each group
    /// one key per partition; update transactions overwrite a whole group with
    /// one fresh value, read-only ones read a whole group.
    Groups { groups: u32, read_only_fraction: f64 },
    /// The bank invariant: `accounts` accounts (spread over the partitions),
    /// each opening with `initial`; a transaction reads two accounts and
    /// moves up to `max_amount` from one to the other if it holds that much
    /// ([`Transfer`]); a share `audit_fraction` reads every account instead.
    /// Money is conserved and no balance goes below zero — unless the store
    /// lets two transfers that read the same balance both commit (a lost
    /// update: TCC allows it, serializability does not).
    Bank { accounts: u32, initial: u64, max_amount: u64, audit_fraction: f64 },
}

impl WorkloadKind {
    /// Says what is wrong with the workload, if anything.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            WorkloadKind::Random(w) => {
                if w.keys_per_partition == 0 {
                    return Err("keys per partition must be at least 1".into());
                }
                if w.reads_per_txn == 0 && w.writes_per_txn == 0 {
                    return Err(match w.shape {
                        TxnShape::ReadThenWrite => "a transaction needs at least one read or write".into(),
                        TxnShape::ReadOrWrite => "a transaction reads or writes at least one key".into(),
                    });
                }
                if w.shape == TxnShape::ReadOrWrite && !(0.0..=1.0).contains(&w.write_fraction()) {
                    return Err("the write fraction must be between 0 and 1".into());
                }
                if w.partitions_per_txn == 0 {
                    return Err("a transaction touches at least one partition".into());
                }
                if !(w.zipf >= 0.0 && w.zipf.is_finite()) {
                    return Err("the zipf constant must be a finite number >= 0".into());
                }
                for (name, f) in [
                    ("read-only fraction", w.read_only_fraction),
                    ("abort fraction", w.abort_fraction),
                    ("rewrite fraction", w.rewrite_fraction),
                    ("delete fraction", w.delete_fraction),
                    ("multi-DC fraction", w.multi_dc_fraction),
                ] {
                    if !(0.0..=1.0).contains(&f) {
                        return Err(format!("the {name} must be between 0 and 1"));
                    }
                }
                if w.max_read_rounds == 0 {
                    return Err("at least one read round".into());
                }
            }
            WorkloadKind::Groups { groups, read_only_fraction } => {
                if *groups == 0 || !(0.0..=1.0).contains(read_only_fraction) {
                    return Err("the groups workload needs at least one group and a fraction in [0, 1]".into());
                }
            }
            WorkloadKind::Bank { accounts, max_amount, audit_fraction, .. } => {
                if *accounts < 2 || *max_amount == 0 || !(0.0..=1.0).contains(audit_fraction) {
                    return Err("the bank needs two accounts, a positive amount and an audit fraction in [0, 1]".into());
                }
            }
        }
        Ok(())
    }
}

/// A bank transfer ([`WorkloadKind::Bank`]): once `from` and `to` are read,
/// `amount` moves from one to the other if `from` holds it (nothing is
/// written otherwise). Balances are written as `b=BALANCE;UNIQUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub from: Key,
    pub to: Key,
    pub amount: u64,
    /// What an account holds before anything is written to it.
    pub initial: u64,
}

impl Transfer {
    /// The balance a value of an account says (`None`: never written, so
    /// `initial`); `None` for a value that is no balance.
    pub fn balance(value: Option<&[u8]>, initial: u64) -> Option<u64> {
        let Some(v) = value else { return Some(initial) };
        let text = std::str::from_utf8(v).ok()?;
        text.strip_prefix("b=")?.split(';').next()?.parse().ok()
    }

    /// The value that writes `balance`, unique by `tag`.
    pub fn value(balance: u64, tag: &str) -> String {
        format!("b={balance};{tag}")
    }

    /// The writes of the transfer, given what `from` and `to` read:
    /// `None` when `from` holds less than the amount (or a value is no
    /// balance).
    pub fn writes(&self, from: Option<&[u8]>, to: Option<&[u8]>) -> Option<[(Key, u64); 2]> {
        let (f, t) = (Transfer::balance(from, self.initial)?, Transfer::balance(to, self.initial)?);
        (f >= self.amount).then(|| [(self.from.clone(), f - self.amount), (self.to.clone(), t + self.amount)])
    }
}

/// One transaction a client will run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnPlan {
    /// Keys to read, one inner vector per READ call.
    pub read_rounds: Vec<Vec<Key>>,
    /// Writes in order; a key may repeat (its first write is then an
    /// intermediate one).
    pub writes: Vec<PlannedWrite>,
    /// Abort instead of committing.
    pub abort: bool,
    /// A bank transfer: its writes follow from its reads.
    pub transfer: Option<Transfer>,
}

/// One write of a plan: a fresh value under `key`, or its delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedWrite {
    pub key: Key,
    pub delete: bool,
}

impl PlannedWrite {
    pub fn value(key: Key) -> Self {
        PlannedWrite { key, delete: false }
    }
}

/// Draws transaction plans.
pub struct Generator {
    kind: WorkloadKind,
    keys: KeySpace,
    /// Popularity inside a partition ([`TxnShape::ReadThenWrite`]) or over
    /// every key ([`TxnShape::ReadOrWrite`]).
    zipf: Option<ZipfTable>,
    /// Under partial replication, the partitions each DC holds (a local-DC
    /// transaction's choice); empty under full replication.
    held: Vec<Vec<usize>>,
}

impl Generator {
    pub fn new(kind: WorkloadKind, topology: &Topology) -> Self {
        Generator::with_key_prefix(kind, topology, "")
    }

    /// Plans over keys named `{prefix}k0, {prefix}k1, …`.
    pub fn with_key_prefix(kind: WorkloadKind, topology: &Topology, prefix: &str) -> Self {
        let keys_per_partition = match &kind {
            WorkloadKind::Random(w) => w.keys_per_partition,
            WorkloadKind::Groups { groups, .. } => *groups,
            WorkloadKind::Bank { accounts, .. } => accounts.div_ceil(topology.partition_count()),
        };
        let keys = KeySpace::with_prefix(topology, keys_per_partition, prefix);
        let zipf = match &kind {
            WorkloadKind::Random(w) if w.zipf > 0.0 => {
                let n = match w.shape {
                    TxnShape::ReadThenWrite => w.keys_per_partition as usize,
                    TxnShape::ReadOrWrite => w.keys_per_partition as usize * keys.partitions(),
                };
                Some(ZipfTable::new(n, w.zipf))
            }
            _ => None,
        };
        let held = if topology.is_fully_replicated() {
            Vec::new()
        } else {
            topology.dcs().map(|dc| topology.replicas_in(dc).iter().map(|r| r.partition.0 as usize).collect()).collect()
        };
        Generator { kind, keys, zipf, held }
    }

    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    fn pick_in(&self, rng: &mut impl Rng, partition: usize) -> Key {
        let keys = self.keys.partition(partition);
        let i = match &self.zipf {
            // Rank 0 is the hottest key.
            Some(z) => z.sample(rng),
            None => rng.random_range(0..keys.len()),
        };
        keys[i].clone()
    }

    /// The next transaction of a client of DC `dc`.
    pub fn next(&self, rng: &mut impl Rng, dc: DcId) -> TxnPlan {
        match &self.kind {
            WorkloadKind::Random(w) if w.shape == TxnShape::ReadOrWrite => self.read_or_write_txn(rng, w),
            WorkloadKind::Random(w) => self.random_txn(rng, w, dc),
            WorkloadKind::Bank { accounts, initial, max_amount, audit_fraction } => {
                let account = |i: u32| {
                    let n = self.keys.partitions() as u32;
                    self.keys.partition((i % n) as usize)[(i / n) as usize].clone()
                };
                if rng.random_bool(*audit_fraction) {
                    let all = (0..*accounts).map(account).collect();
                    return TxnPlan { read_rounds: vec![all], writes: Vec::new(), abort: false, transfer: None };
                }
                let from = rng.random_range(0..*accounts);
                let to = (from + rng.random_range(1..*accounts)) % accounts;
                let transfer = Transfer {
                    from: account(from),
                    to: account(to),
                    amount: rng.random_range(1..=*max_amount),
                    initial: *initial,
                };
                let read_rounds = vec![vec![transfer.from.clone(), transfer.to.clone()]];
                TxnPlan { read_rounds, writes: Vec::new(), abort: false, transfer: Some(transfer) }
            }
            WorkloadKind::Groups { groups, read_only_fraction } => {
                let g = rng.random_range(0..*groups as usize);
                let group: Vec<Key> = (0..self.keys.partitions()).map(|p| self.keys.partition(p)[g].clone()).collect();
                if rng.random_bool(*read_only_fraction) {
                    // Read the group in two calls half the time, to check
                    // that a snapshot holds across calls too.
                    let read_rounds = if group.len() > 1 && rng.random_bool(0.5) {
                        let mid = group.len() / 2;
                        vec![group[..mid].to_vec(), group[mid..].to_vec()]
                    } else {
                        vec![group]
                    };
                    TxnPlan { read_rounds, writes: Vec::new(), abort: false, transfer: None }
                } else {
                    let writes = group.into_iter().map(PlannedWrite::value).collect();
                    TxnPlan { read_rounds: Vec::new(), writes, abort: false, transfer: None }
                }
            }
        }
    }

    /// A key by its rank over the whole key space: rank `r` is key `r / n`
    /// of partition `r % n`, so the hottest keys sit in different
    /// partitions, as hashing would put them.
    fn pick_anywhere(&self, rng: &mut impl Rng) -> Key {
        let n = self.keys.partitions();
        let r = match &self.zipf {
            Some(z) => z.sample(rng),
            None => rng.random_range(0..n * self.keys.partition(0).len()),
        };
        self.keys.partition(r % n)[r / n].clone()
    }

    fn read_or_write_txn(&self, rng: &mut impl Rng, w: &WorkloadConfig) -> TxnPlan {
        let read_only = w.writes_per_txn == 0 || (w.reads_per_txn > 0 && rng.random_bool(w.read_only_fraction));
        let count = if read_only { w.reads_per_txn } else { w.writes_per_txn } as usize;
        let all = self.keys.partitions() * self.keys.partition(0).len();
        let mut keys: Vec<Key> = Vec::with_capacity(count);
        while keys.len() < count.min(all) {
            let k = self.pick_anywhere(rng);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if read_only {
            TxnPlan { read_rounds: vec![keys], writes: Vec::new(), abort: false, transfer: None }
        } else {
            TxnPlan {
                read_rounds: Vec::new(),
                writes: keys.into_iter().map(PlannedWrite::value).collect(),
                abort: false,
                transfer: None,
            }
        }
    }

    fn random_txn(&self, rng: &mut impl Rng, w: &WorkloadConfig, dc: DcId) -> TxnPlan {
        let n = self.keys.partitions();
        // Drawn only under partial replication, so that a fully replicated
        // cluster's plans are what they were before locality existed.
        let partitions: Vec<usize> = match self.held.get(usize::from(dc.0)) {
            Some(held) if !rng.random_bool(w.multi_dc_fraction) => {
                let p = (w.partitions_per_txn as usize).min(held.len());
                sample(rng, held.len(), p).into_iter().map(|i| held[i]).collect()
            }
            _ => sample(rng, n, (w.partitions_per_txn as usize).min(n)).into_vec(),
        };
        let read_only = w.writes_per_txn == 0 || rng.random_bool(w.read_only_fraction);
        let reads: Vec<Key> =
            (0..w.reads_per_txn as usize).map(|i| self.pick_in(rng, partitions[i % partitions.len()])).collect();
        let mut writes: Vec<PlannedWrite> = if read_only {
            Vec::new()
        } else {
            (0..w.writes_per_txn as usize)
                .map(|i| PlannedWrite::value(self.pick_in(rng, partitions[i % partitions.len()])))
                .collect()
        };
        if !writes.is_empty() && rng.random_bool(w.rewrite_fraction) {
            let again = writes[0].clone();
            writes.push(again);
        }
        // Drawn only when deletes are asked for, so that a workload without
        // them draws the same plans as before deletes existed.
        if w.delete_fraction > 0.0 {
            for write in &mut writes {
                write.delete = rng.random_bool(w.delete_fraction);
            }
        }
        let rounds = if reads.len() > 1 { rng.random_range(1..=w.max_read_rounds.min(reads.len() as u32)) } else { 1 };
        let mut read_rounds: Vec<Vec<Key>> = Vec::new();
        if !reads.is_empty() {
            let per = reads.len().div_ceil(rounds as usize);
            read_rounds = reads.chunks(per).map(|c| c.to_vec()).collect();
        }
        let abort = !writes.is_empty() && rng.random_bool(w.abort_fraction);
        TxnPlan { read_rounds, writes, abort, transfer: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn random_plans_have_the_configured_shape() {
        let t = Topology::full(1, 8).unwrap();
        let w = WorkloadConfig {
            read_only_fraction: 0.0,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            ..Default::default()
        };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..100 {
            let plan = g.next(&mut rng, DcId(0));
            let reads: Vec<&Key> = plan.read_rounds.iter().flatten().collect();
            assert_eq!(reads.len(), 19);
            assert_eq!(plan.writes.len(), 1);
            let mut parts: Vec<u32> = reads.iter().map(|k| t.partition_of(k).0).collect();
            parts.sort();
            parts.dedup();
            assert_eq!(parts.len(), 4, "reads spread over exactly 4 partitions");
        }
    }

    /// Under partial replication a local-DC transaction touches only the
    /// partitions the client's DC holds; the multi-DC share touches others.
    #[test]
    fn local_dc_transactions_stay_in_the_clients_dc() {
        let t = Topology::round_robin(3, 6, 1).unwrap();
        let w = WorkloadConfig { read_only_fraction: 0.0, partitions_per_txn: 2, ..Default::default() };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut remote = 0;
        for i in 0..2000 {
            let dc = DcId(i % 3);
            let plan = g.next(&mut rng, dc);
            let keys = plan.read_rounds.iter().flatten().chain(plan.writes.iter().map(|w| &w.key));
            if keys.into_iter().any(|k| !t.holds(dc, t.partition_of(k))) {
                remote += 1;
            }
        }
        // 5 % multi-DC, and most of those touch a partition held elsewhere.
        assert!((50..=100).contains(&remote), "{remote} of 2000 left their DC");
        let all_local = WorkloadConfig { multi_dc_fraction: 0.0, ..Default::default() };
        let g = Generator::new(WorkloadKind::Random(all_local), &t);
        for _ in 0..200 {
            let plan = g.next(&mut rng, DcId(1));
            assert!(plan.read_rounds.iter().flatten().all(|k| t.holds(DcId(1), t.partition_of(k))));
        }
    }

    #[test]
    fn read_or_write_plans_only_read_or_only_write_distinct_keys_anywhere() {
        let t = Topology::full(1, 16).unwrap();
        let w = WorkloadConfig {
            shape: TxnShape::ReadOrWrite,
            reads_per_txn: 5,
            writes_per_txn: 5,
            read_only_fraction: 0.9,
            keys_per_partition: 100,
            ..Default::default()
        };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (mut writes, mut partitions) = (0, std::collections::BTreeSet::new());
        for _ in 0..2000 {
            let plan = g.next(&mut rng, DcId(0));
            assert!(!plan.abort);
            let keys: Vec<&Key> = match (&plan.read_rounds[..], plan.writes.is_empty()) {
                ([keys], true) => keys.iter().collect(),
                ([], false) => {
                    writes += 1;
                    plan.writes.iter().map(|w| &w.key).collect()
                }
                _ => panic!("reads or writes, not both: {plan:?}"),
            };
            assert_eq!(keys.len(), 5);
            let mut distinct = keys.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), 5, "distinct keys");
            partitions.extend(keys.iter().map(|k| t.partition_of(k)));
        }
        assert!((140..260).contains(&writes), "a write fraction of 0.1: {writes} of 2000");
        assert_eq!(partitions.len(), 16, "keys from every partition");
        // The hottest key overall is the first of partition 0.
        let hot = g.keys().partition(0)[0].clone();
        let hits = (0..2000).filter(|_| g.pick_anywhere(&mut rng) == hot).count();
        assert!(hits > 100, "{hits} of 2000 for the hottest of 1600 keys at zipf 0.99");
    }

    #[test]
    fn zipf_makes_the_first_keys_hot() {
        let t = Topology::full(1, 1).unwrap();
        let w = WorkloadConfig { partitions_per_txn: 1, ..Default::default() };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let hot = g.keys().partition(0)[0].clone();
        let hits = (0..2000).filter(|_| g.pick_in(&mut rng, 0) == hot).count();
        // Rank 1 of zipf(0.99) over 1000 keys has about 13 % of the draws.
        assert!((200..330).contains(&hits), "{hits} of 2000");
    }
}
