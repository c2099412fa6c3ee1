//! What the closed-loop clients do: the shape of the workload and the
//! transaction plans drawn from it.

use crate::keys::KeySpace;
use crate::social::{SocialKeys, SocialMix, SocialStep, User};
use crate::zipf::ZipfTable;
use causeway_protocol::{DcId, Key, PartitionId, Topology};
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
    /// (the Wren paper's), either reads or writes of keys drawn from the
    /// whole key space (the PrompTCC paper's), or one of the Geo-SDUR
    /// paper's: its microbenchmark or its social network.
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
    /// The Geo-SDUR paper's microbenchmark: a transaction reads
    /// `reads_per_txn` keys (the paper: 2) and writes the same keys. A
    /// *local* one takes them all in the client's home partition (the
    /// partition of the replica its session is attached to); a *global*
    /// one — a share `global_ppm` parts per million of them — one in the
    /// home partition and the others each in another partition. Keys drawn
    /// uniformly (or by `zipf`) over `keys_per_partition` (the paper: a
    /// million). Plans are classed [`TxnClass::Local`] or
    /// [`TxnClass::Global`]; read-only transactions, aborts, rewrites and
    /// deletes do not apply.
    SdurMicro { global_ppm: u32 },
    /// The Geo-SDUR paper's social network ([`crate::social`]):
    /// `keys_per_partition` users per partition (the paper: 100,000), the
    /// client's users in its home partition; timelines, posts and follows
    /// in the shares of the mix. Plans are classed [`TxnClass::Timeline`],
    /// [`TxnClass::Post`], [`TxnClass::FollowLocal`] or
    /// [`TxnClass::FollowGlobal`].
    Social(SocialMix),
}

impl TxnShape {
    /// The shape's name in reports: `read-then-write`, `read-or-write`,
    /// `sdur-micro`, `social`.
    pub fn name(&self) -> &'static str {
        match self {
            TxnShape::ReadThenWrite => "read-then-write",
            TxnShape::ReadOrWrite => "read-or-write",
            TxnShape::SdurMicro { .. } => "sdur-micro",
            TxnShape::Social(_) => "social",
        }
    }

    /// The share of global transactions of the microbenchmark.
    pub fn global_fraction(&self) -> Option<f64> {
        match self {
            TxnShape::SdurMicro { global_ppm } => Some(f64::from(*global_ppm) / 1e6),
            _ => None,
        }
    }
}

/// What kind a planned transaction is, for measurements by kind (the
/// Geo-SDUR paper's figures report each apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnClass {
    /// The microbenchmark's: every key in the home partition.
    Local,
    /// The microbenchmark's: keys in the home partition and others.
    Global,
    /// The social network's read-only timeline.
    Timeline,
    /// The social network's post (local).
    Post,
    /// A follow between two users of one partition.
    FollowLocal,
    /// A follow between users of two partitions.
    FollowGlobal,
}

impl TxnClass {
    pub const ALL: [TxnClass; 6] = [
        TxnClass::Local,
        TxnClass::Global,
        TxnClass::Timeline,
        TxnClass::Post,
        TxnClass::FollowLocal,
        TxnClass::FollowGlobal,
    ];

    /// The class's name in reports and figures.
    pub fn name(self) -> &'static str {
        match self {
            TxnClass::Local => "local",
            TxnClass::Global => "global",
            TxnClass::Timeline => "timeline",
            TxnClass::Post => "post",
            TxnClass::FollowLocal => "follow-local",
            TxnClass::FollowGlobal => "follow-global",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnClass> {
        TxnClass::ALL.into_iter().find(|c| c.name() == name)
    }
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

    /// The Geo-SDUR paper's microbenchmark ([`TxnShape::SdurMicro`]): two
    /// reads and two writes of the same keys, a share `global_fraction` of
    /// them global, uniform over a million keys per partition.
    pub fn sdur_micro(global_fraction: f64) -> Self {
        WorkloadConfig {
            reads_per_txn: 2,
            writes_per_txn: 2,
            partitions_per_txn: 2,
            keys_per_partition: 1_000_000,
            zipf: 0.0,
            read_only_fraction: 0.0,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            delete_fraction: 0.0,
            max_read_rounds: 1,
            shape: TxnShape::SdurMicro { global_ppm: fraction_ppm(global_fraction) },
            ..WorkloadConfig::default()
        }
    }

    /// The Geo-SDUR paper's social network ([`TxnShape::Social`]) over
    /// `users` users per partition, in `mix`'s shares. `reads_per_txn` and
    /// `writes_per_txn` bound what one transaction reads in one call (a
    /// timeline's posts) and writes (a follow's two lists).
    pub fn social(users: u32, mix: SocialMix) -> Self {
        WorkloadConfig {
            reads_per_txn: mix.list_len.max(2),
            writes_per_txn: 2,
            partitions_per_txn: 2,
            keys_per_partition: users,
            zipf: 0.0,
            read_only_fraction: 0.0,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            delete_fraction: 0.0,
            max_read_rounds: 2,
            shape: TxnShape::Social(mix),
            ..WorkloadConfig::default()
        }
    }
}

/// A fraction in parts per million (clamped to `[0, 1]`).
pub fn fraction_ppm(f: f64) -> u32 {
    if f.is_nan() {
        return u32::MAX;
    }
    (f.clamp(0.0, 1.0) * 1e6).round() as u32
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
                        TxnShape::ReadOrWrite => "a transaction reads or writes at least one key".into(),
                        _ => "a transaction needs at least one read or write".into(),
                    });
                }
                if w.shape == TxnShape::ReadOrWrite && !(0.0..=1.0).contains(&w.write_fraction()) {
                    return Err("the write fraction must be between 0 and 1".into());
                }
                match w.shape {
                    TxnShape::SdurMicro { global_ppm } => {
                        if global_ppm > 1_000_000 {
                            return Err("the global fraction must be between 0 and 1".into());
                        }
                        if w.reads_per_txn == 0 || w.writes_per_txn != w.reads_per_txn {
                            return Err(
                                "a microbenchmark transaction reads at least one key and writes the keys it read"
                                    .into(),
                            );
                        }
                        if global_ppm > 0 && w.reads_per_txn < 2 {
                            return Err("a global transaction needs two keys: one at home, one elsewhere".into());
                        }
                        if w.keys_per_partition < w.reads_per_txn {
                            return Err("a local transaction's keys are distinct keys of one partition: keys per partition must be at least the keys per transaction".into());
                        }
                    }
                    TxnShape::Social(mix) => {
                        mix.validate()?;
                        if w.keys_per_partition < 2 {
                            return Err("the social network needs at least 2 users per partition".into());
                        }
                        if w.reads_per_txn < mix.list_len || w.writes_per_txn < 2 {
                            return Err("a timeline reads a whole list of posts and a follow writes two lists: reads per transaction must be at least the list length, writes at least 2".into());
                        }
                    }
                    TxnShape::ReadThenWrite | TxnShape::ReadOrWrite => {}
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
    /// What kind of transaction it is, for measurements by kind; `None`
    /// for workloads that do not tell kinds apart.
    pub class: Option<TxnClass>,
    /// A step of the social network: its first round is `read_rounds[0]`;
    /// a timeline's second round and a post's or follow's writes follow
    /// from what that round read ([`SocialKeys::second_round`],
    /// [`SocialKeys::writes`]).
    pub social: Option<(SocialStep, SocialKeys)>,
}

impl TxnPlan {
    /// A plan of reads then writes, of no class.
    pub fn new(read_rounds: Vec<Vec<Key>>, writes: Vec<PlannedWrite>) -> Self {
        TxnPlan { read_rounds, writes, abort: false, transfer: None, class: None, social: None }
    }

    /// Whether the plan is one read-only call: one read round, no writes,
    /// and nothing that follows from what it reads.
    pub fn is_one_read_only_call(&self) -> bool {
        self.read_rounds.len() == 1
            && self.writes.is_empty()
            && !self.abort
            && self.transfer.is_none()
            && self.social.is_none()
    }
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
    /// Each DC's replicas' partitions, in [`Topology::replicas_in`] order:
    /// the homes of its clients ([`Generator::home_of`]).
    homes: Vec<Vec<PartitionId>>,
    /// The social network's names and lists ([`TxnShape::Social`]).
    social: Option<SocialKeys>,
}

impl Generator {
    pub fn new(kind: WorkloadKind, topology: &Topology) -> Self {
        Generator::with_key_prefix(kind, topology, "")
    }

    /// Plans over keys named `{prefix}k0, {prefix}k1, …`.
    pub fn with_key_prefix(kind: WorkloadKind, topology: &Topology, prefix: &str) -> Self {
        let keys_per_partition = match &kind {
            // Users are named by the social network's own scheme.
            WorkloadKind::Random(WorkloadConfig { shape: TxnShape::Social(_), .. }) => 1,
            WorkloadKind::Random(w) => w.keys_per_partition,
            WorkloadKind::Groups { groups, .. } => *groups,
            WorkloadKind::Bank { accounts, .. } => accounts.div_ceil(topology.partition_count()),
        };
        let keys = KeySpace::with_prefix(topology, keys_per_partition, prefix);
        let zipf = match &kind {
            WorkloadKind::Random(w) if w.zipf > 0.0 && !matches!(w.shape, TxnShape::Social(_)) => {
                let n = match w.shape {
                    TxnShape::ReadOrWrite => w.keys_per_partition as usize * keys.partitions(),
                    _ => w.keys_per_partition as usize,
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
        let homes = topology.dcs().map(|dc| topology.replicas_in(dc).iter().map(|r| r.partition).collect()).collect();
        let social = match &kind {
            WorkloadKind::Random(w) => match w.shape {
                TxnShape::Social(mix) => Some(SocialKeys::new(topology, prefix, w.keys_per_partition, mix)),
                _ => None,
            },
            _ => None,
        };
        Generator { kind, keys, zipf, held, homes, social }
    }

    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// The social network's names and lists, for a social workload.
    pub fn social(&self) -> Option<&SocialKeys> {
        self.social.as_ref()
    }

    /// The home partition of client `index` of DC `dc` (its `index`-th
    /// transaction-running client there): the partition of the DC's replica
    /// the client is attached to, when clients are dealt round-robin over
    /// the DC's replicas in [`Topology::replicas_in`] order — one endpoint
    /// per replica (a server process each), or one per DC that deals its
    /// sessions over them. A DC that holds no replica deals the partitions.
    pub fn home_of(&self, dc: DcId, index: u32) -> PartitionId {
        match self.homes.get(usize::from(dc.0)) {
            Some(homes) if !homes.is_empty() => homes[index as usize % homes.len()],
            _ => PartitionId(index % self.keys.partitions() as u32),
        }
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

    /// The next transaction of a client of DC `dc` whose home is the
    /// DC's first replica's partition ([`Generator::next_at`]).
    pub fn next(&self, rng: &mut impl Rng, dc: DcId) -> TxnPlan {
        self.next_at(rng, dc, self.home_of(dc, 0))
    }

    /// The next transaction of a client of DC `dc` whose session is
    /// attached to a replica of partition `home` (only the Geo-SDUR
    /// paper's workloads look at it).
    pub fn next_at(&self, rng: &mut impl Rng, dc: DcId, home: PartitionId) -> TxnPlan {
        match &self.kind {
            WorkloadKind::Random(w) if w.shape == TxnShape::ReadOrWrite => self.read_or_write_txn(rng, w),
            WorkloadKind::Random(w) if matches!(w.shape, TxnShape::SdurMicro { .. }) => self.micro_txn(rng, w, home),
            WorkloadKind::Random(w) if matches!(w.shape, TxnShape::Social(_)) => self.social_txn(rng, home),
            WorkloadKind::Random(w) => self.random_txn(rng, w, dc),
            WorkloadKind::Bank { accounts, initial, max_amount, audit_fraction } => {
                let account = |i: u32| {
                    let n = self.keys.partitions() as u32;
                    self.keys.partition((i % n) as usize)[(i / n) as usize].clone()
                };
                if rng.random_bool(*audit_fraction) {
                    let all = (0..*accounts).map(account).collect();
                    return TxnPlan::new(vec![all], Vec::new());
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
                TxnPlan { transfer: Some(transfer), ..TxnPlan::new(read_rounds, Vec::new()) }
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
                    TxnPlan::new(read_rounds, Vec::new())
                } else {
                    let writes = group.into_iter().map(PlannedWrite::value).collect();
                    TxnPlan::new(Vec::new(), writes)
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
            TxnPlan::new(vec![keys], Vec::new())
        } else {
            TxnPlan::new(Vec::new(), keys.into_iter().map(PlannedWrite::value).collect())
        }
    }

    /// The microbenchmark's transaction ([`TxnShape::SdurMicro`]): its keys
    /// distinct, the first in `home`, the others there too (local) or each
    /// in another partition (global); read in one call, then all written.
    fn micro_txn(&self, rng: &mut impl Rng, w: &WorkloadConfig, home: PartitionId) -> TxnPlan {
        let TxnShape::SdurMicro { global_ppm } = w.shape else { unreachable!("a microbenchmark plan") };
        let n = self.keys.partitions();
        let home = (home.0 as usize).min(n - 1);
        // Drawn only when globals may happen, so 0 % draws as few numbers.
        let global = n > 1 && global_ppm > 0 && rng.random_range(0..1_000_000) < global_ppm;
        let count = w.reads_per_txn as usize;
        let mut keys: Vec<Key> = Vec::with_capacity(count);
        while keys.len() < count {
            let p = if keys.is_empty() || !global { home } else { (home + rng.random_range(1..n)) % n };
            let k = self.pick_in(rng, p);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let writes = keys.iter().cloned().map(PlannedWrite::value).collect();
        let class = if global { TxnClass::Global } else { TxnClass::Local };
        TxnPlan { class: Some(class), ..TxnPlan::new(vec![keys], writes) }
    }

    /// The social network's next operation ([`TxnShape::Social`]) for a
    /// user of `home`.
    fn social_txn(&self, rng: &mut impl Rng, home: PartitionId) -> TxnPlan {
        let s = self.social.as_ref().expect("a social workload has its keys");
        let mix = *s.mix();
        let n = self.keys.partitions() as u32;
        let home = home.0.min(n - 1);
        let users = s.users_per_partition();
        let user = User { partition: home, index: rng.random_range(0..users) };
        let draw = rng.random_range(0..1_000_000);
        let (step, class) = if draw < mix.timeline_ppm {
            (SocialStep::Timeline { user }, TxnClass::Timeline)
        } else if draw < mix.timeline_ppm + mix.post_ppm {
            (SocialStep::Post { user }, TxnClass::Post)
        } else {
            let global = n > 1 && rng.random_range(0..1_000_000) < mix.follow_global_ppm;
            let followed = if global {
                User { partition: (home + rng.random_range(1..n)) % n, index: rng.random_range(0..users) }
            } else {
                // Another user of the same partition (if it has another).
                let other = if users > 1 { rng.random_range(1..users) } else { 0 };
                User { partition: home, index: (user.index + other) % users }
            };
            let class = if global { TxnClass::FollowGlobal } else { TxnClass::FollowLocal };
            (SocialStep::Follow { user, followed }, class)
        };
        let first = s.first_round(&step);
        TxnPlan { class: Some(class), social: Some((step, s.clone())), ..TxnPlan::new(vec![first], Vec::new()) }
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
        TxnPlan { abort, ..TxnPlan::new(read_rounds, writes) }
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

    /// The Geo-SDUR microbenchmark: two keys read then written; locals in
    /// the home partition, globals one key there and one elsewhere.
    #[test]
    fn micro_plans_stay_home_unless_global() {
        let t = Topology::full(3, 4).unwrap();
        let w = WorkloadConfig { keys_per_partition: 1000, ..WorkloadConfig::sdur_micro(0.1) };
        assert_eq!(WorkloadKind::Random(w.clone()).validate(), Ok(()));
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut globals = 0;
        for i in 0..4000u32 {
            let home = PartitionId(i % 4);
            let plan = g.next_at(&mut rng, DcId(1), home);
            let [reads] = &plan.read_rounds[..] else { panic!("one read round: {plan:?}") };
            assert_eq!(reads.len(), 2);
            assert_ne!(reads[0], reads[1], "distinct keys");
            let written: Vec<&Key> = plan.writes.iter().map(|w| &w.key).collect();
            assert_eq!(written, reads.iter().collect::<Vec<_>>(), "writes the keys it read");
            assert!(plan.writes.iter().all(|w| !w.delete) && !plan.abort && plan.social.is_none());
            assert_eq!(t.partition_of(&reads[0]), home, "the first key is at home");
            match plan.class {
                Some(TxnClass::Local) => assert_eq!(t.partition_of(&reads[1]), home),
                Some(TxnClass::Global) => {
                    globals += 1;
                    assert_ne!(t.partition_of(&reads[1]), home);
                }
                other => panic!("class {other:?}"),
            }
        }
        assert!((320..480).contains(&globals), "10 % of 4000 global: {globals}");
        // At 0 % every transaction is local; at 100 % every one global.
        for (f, class) in [(0.0, TxnClass::Local), (1.0, TxnClass::Global)] {
            let w = WorkloadConfig { keys_per_partition: 100, ..WorkloadConfig::sdur_micro(f) };
            let g = Generator::new(WorkloadKind::Random(w), &t);
            assert!((0..200).all(|_| g.next_at(&mut rng, DcId(0), PartitionId(2)).class == Some(class)));
        }
    }

    #[test]
    fn micro_and_social_workloads_refuse_what_they_cannot_plan() {
        let bad = |w: WorkloadConfig, says: &str| {
            let e = WorkloadKind::Random(w).validate().unwrap_err();
            assert!(e.contains(says), "{e:?} should say {says:?}");
        };
        let micro = WorkloadConfig::sdur_micro(0.5);
        bad(
            WorkloadConfig { shape: TxnShape::SdurMicro { global_ppm: 1_000_001 }, ..micro.clone() },
            "between 0 and 1",
        );
        bad(WorkloadConfig { writes_per_txn: 1, ..micro.clone() }, "writes the keys it read");
        bad(WorkloadConfig { reads_per_txn: 1, writes_per_txn: 1, ..micro.clone() }, "two keys");
        bad(WorkloadConfig { keys_per_partition: 1, ..micro.clone() }, "at least the keys per transaction");
        assert_eq!(fraction_ppm(0.01), 10_000);
        assert_eq!(TxnShape::SdurMicro { global_ppm: 10_000 }.global_fraction(), Some(0.01));
        let social = WorkloadConfig::social(100, SocialMix::default());
        assert_eq!(WorkloadKind::Random(social.clone()).validate(), Ok(()));
        bad(WorkloadConfig { keys_per_partition: 1, ..social.clone() }, "2 users");
        bad(WorkloadConfig { reads_per_txn: 3, ..social.clone() }, "list length");
        let mix = SocialMix { post_ppm: 200_000, ..SocialMix::default() };
        bad(WorkloadConfig { shape: TxnShape::Social(mix), ..social }, "at most 1");
        for c in TxnClass::ALL {
            assert_eq!(TxnClass::from_name(c.name()), Some(c));
        }
    }

    /// The social network: the paper's mix, every user at the client's
    /// home, follows global half the time.
    #[test]
    fn social_plans_follow_the_papers_mix_from_the_home_partition() {
        let t = Topology::full(2, 2).unwrap();
        let g = Generator::new(WorkloadKind::Random(WorkloadConfig::social(1000, SocialMix::default())), &t);
        let s = g.social().expect("social keys").clone();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut count: std::collections::BTreeMap<TxnClass, u32> = Default::default();
        for i in 0..8000u32 {
            let home = PartitionId(i % 2);
            let plan = g.next_at(&mut rng, DcId(0), home);
            let class = plan.class.expect("classed");
            *count.entry(class).or_default() += 1;
            let (step, _) = plan.social.clone().expect("a social step");
            assert!(!plan.is_one_read_only_call(), "what follows depends on the reads");
            assert!(plan.writes.is_empty(), "writes follow from the reads");
            let [first] = &plan.read_rounds[..] else { panic!("one planned round") };
            assert_eq!(first, &s.first_round(&step));
            match (step, class) {
                (SocialStep::Timeline { user }, TxnClass::Timeline) | (SocialStep::Post { user }, TxnClass::Post) => {
                    assert_eq!(user.partition, home.0);
                    assert!(first.iter().all(|k| t.partition_of(k) == home));
                }
                (SocialStep::Follow { user, followed }, TxnClass::FollowLocal | TxnClass::FollowGlobal) => {
                    assert_eq!(user.partition, home.0);
                    assert_ne!(user, followed);
                    let global = class == TxnClass::FollowGlobal;
                    assert_eq!(followed.partition != home.0, global, "{step:?} {class:?}");
                    assert_eq!(t.partition_of(&first[1]) != home, global);
                }
                other => panic!("{other:?}"),
            }
        }
        let share = |c| f64::from(count.get(&c).copied().unwrap_or(0)) / 8000.0;
        assert!((share(TxnClass::Timeline) - 0.85).abs() < 0.02, "{count:?}");
        assert!((share(TxnClass::Post) - 0.075).abs() < 0.015, "{count:?}");
        assert!((share(TxnClass::FollowLocal) - 0.0375).abs() < 0.012, "{count:?}");
        assert!((share(TxnClass::FollowGlobal) - 0.0375).abs() < 0.012, "{count:?}");
    }

    /// A client's home is the partition of the replica of its DC it is
    /// dealt to: under Geo-SDUR's "WAN 1" a DC that holds one partition
    /// only homes its clients there.
    #[test]
    fn homes_are_the_partitions_of_the_dcs_replicas_round_robin() {
        let groups = vec![vec![DcId(2), DcId(2), DcId(1)], vec![DcId(0), DcId(0), DcId(1)]];
        let t = Topology::with_groups(3, 2, groups).unwrap();
        let g = Generator::new(WorkloadKind::Random(WorkloadConfig::sdur_micro(0.0)), &t);
        let homes = |dc: u16| (0..4).map(|i| g.home_of(DcId(dc), i).0).collect::<Vec<_>>();
        assert_eq!(homes(0), [1, 1, 1, 1], "US-EAST holds two members of partition 1");
        assert_eq!(homes(1), [0, 1, 0, 1], "US-WEST one member of each");
        assert_eq!(homes(2), [0, 0, 0, 0]);
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
