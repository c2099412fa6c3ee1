//! PrompTCC (Lykhenko, Soares, Rodrigues: "PrompTCC: Transactional Causally
//! Consistent Reads Can Be Fast and Fresh"), inside one DC as the paper
//! evaluates it: reads from the freshest snapshot that is committed at
//! every partition, in one round and, when the first did not come from one
//! snapshot, a second at the partitions behind — never a third; write-only
//! transactions in at most two rounds through a coordinator the client
//! picks among the partitions written.
//!
//! * [`vclock`] — the vectors (`D_c`, `S_i`, commit timestamps), one entry
//!   per partition; as messages carry them, and as received (a floor and
//!   the entries above it, read where they lie).
//! * [`session`] — the client library (Alg. 1).
//! * [`replica`] — a partition (Alg. 2): prepare, the commit wait, the
//!   visibility rule, reads, the tree that spreads `S_i` (§IV-E), and the
//!   end of transactions whose coordinator fell silent (§VIII).
//! * [`durable`] — what a partition makes durable, and what waits for it.
//! * [`messages`] — what they say to each other.
//!
//! Where this differs from the listings, and why:
//!
//! * A partition's sequence number `s_i` is a reading of its hybrid clock,
//!   ticked above every entry of the writer's `D_c`, rather than a bare
//!   counter. Every rule of the listing holds for it (it is a per-partition
//!   increasing number); in addition the entries of different partitions
//!   are comparable, so a transaction's largest number is above all it
//!   depends on. That number, with the partition that gave it, is the
//!   last-writer-wins order of versions: per-partition counters would
//!   order two transactions that both write two partitions differently at
//!   each, and the DC would not converge on one last writer per key.
//! * `S_i[i]` is one below the oldest prepared transaction, or the clock
//!   when none is (the paper's Prop. 2): the commit wait of line 23 is then
//!   "commit the oldest prepared transaction once it is decided".
//! * The client joins what it reads and writes into `D_c` rather than
//!   replacing it (lines 10 and 26), so a transaction that reads other
//!   partitions does not forget a write it made.
//! * A partition never raises its own entry `S_i[i]` from a client's
//!   `D_c` (Alg. 2 lines 37, 46 raise every entry): it knows better — one
//!   below its oldest transaction not yet ended — and an entry from a
//!   client can only be at or below that.
//! * An outcome takes effect (versions installed, `S_i[i]` past it) only
//!   once its record is durable, so that a crash takes back nothing a read
//!   or a report showed; a transaction that writes one partition commits
//!   in one round, once its prepare and commit are on disk.
//! * The client waits for every participant's commit, not only the
//!   coordinator's (§IV-D says so; Alg. 1 line 9 shows one): its next read
//!   must find its write committed wherever it reads. Each participant
//!   tells the coordinator once it has committed, and the coordinator
//!   answers the client once all have: one answer reaches the client's
//!   session instead of one per participant (a session handles each
//!   answer on its own, where a partition takes in its queued messages
//!   together).
//! * Fault tolerance (§VIII) without replica groups: a partition whose
//!   prepared transaction has no decision after [`PtccConfig::resolve_after_us`]
//!   asks the coordinator, which asks every participant; one that has not
//!   prepared it fences the id (durably) and the transaction is aborted,
//!   else it commits with the numbers the participants gave it.
//! * Garbage collection (§VII): a version goes once a newer visible one of
//!   its key has been committed here for the transaction timeout. A read
//!   at a snapshot that finds no version of a key whose oldest kept one is
//!   that old answers `TooOld` (the version it needed may be gone), and the
//!   transaction aborts; the client also aborts a transaction that reads
//!   past the timeout. A transaction's snapshot also takes in the
//!   entry-wise smallest `S_i` its first round saw (its entries are safe
//!   like any, and every partition of that round already covers it, so it
//!   costs no second round), so that later reads of partitions the first
//!   did not touch are fresh and find what they need among the kept
//!   versions.

pub mod durable;
pub mod messages;
pub mod replica;
pub mod session;
#[cfg(test)]
mod tests;
pub mod vclock;

use crate::contract::protocol::RecordOf;
use crate::contract::{Guarantee, Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use std::sync::Arc;

pub use durable::PtccRecord;
pub use messages::PtccMsg;
pub use replica::{PtccReplica, PtccTimer};
pub use session::{PtccClient, PtccSession, PtccSessionState};
pub use vclock::{Sparse, VClock, Wire};

/// Tunables of PrompTCC, in microseconds of the replica's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtccConfig {
    /// Δ_G: how often the leaves of the tree report their entries.
    pub stabilization_interval_us: u64,
    /// Fan-out of the tree of partitions (§IV-E).
    pub tree_fanout: u32,
    /// A prepared transaction without a decision this long asks its
    /// coordinator to end it.
    pub resolve_after_us: u64,
    /// A client gives a commit up (its outcome unknown) after this long.
    pub commit_timeout_us: u64,
    /// The transaction timeout of §VII: a partition keeps a version this
    /// long after a newer one of its key is visible, and a transaction
    /// that reads this long after its first read is aborted (the client
    /// starts it again).
    pub txn_timeout_us: u64,
    /// PrompTCC-naive: every vector sent whole, and `S_i` returned with
    /// every read (§IV), to measure what §V's parsimony saves. The protocol
    /// type sets it ([`PrompTccNaive`]).
    pub naive: bool,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    /// Never set outside tests.
    #[doc(hidden)]
    pub fault: PtccFault,
}

impl Default for PtccConfig {
    fn default() -> Self {
        PtccConfig {
            stabilization_interval_us: 5_000,
            tree_fanout: 4,
            resolve_after_us: 500_000,
            commit_timeout_us: 2_000_000,
            txn_timeout_us: 5_000_000,
            naive: false,
            fault: PtccFault::None,
        }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PtccFault {
    #[default]
    None,
    /// The client never takes a second round: a first round that met a
    /// transaction visible at one partition and not yet at another returns
    /// half of it.
    OneRound,
    /// A partition's own entry `S_i[i]` runs ahead of its prepared
    /// transactions: one that commits later, below what a reader's snapshot
    /// already covers, shows up in the middle of that reader's transaction.
    EarlyFrontier,
}

/// PrompTCC, or with `NAIVE` PrompTCC-naive: the same protocol, its
/// vectors sent whole.
pub struct PrompTccOn<const NAIVE: bool>;

/// PrompTCC (§V's metadata).
pub type PrompTcc = PrompTccOn<false>;

/// PrompTCC-naive (§IV's metadata: full vectors).
pub type PrompTccNaive = PrompTccOn<true>;

impl<const NAIVE: bool> PrompTccOn<NAIVE> {
    /// `config` as this variant runs it, whatever its `naive` says.
    fn variant(config: &PtccConfig) -> PtccConfig {
        PtccConfig { naive: NAIVE, ..config.clone() }
    }
}

impl<const NAIVE: bool> Protocol for PrompTccOn<NAIVE> {
    const NAME: &'static str = if NAIVE { "promptcc-naive" } else { "promptcc" };
    const GUARANTEE: Guarantee = Guarantee::Causal;
    const READS_NEVER_WAIT: bool = true;
    type Config = PtccConfig;
    type Message = PtccMsg;
    type Replica = PtccReplica;
    type Session = PtccSession;

    /// Δ_G is the tree's interval; PrompTCC replicates nothing (Δ_R unused).
    fn configure(tuning: &Tuning) -> PtccConfig {
        Self::variant(&PtccConfig {
            stabilization_interval_us: tuning.stabilization_interval_us,
            ..PtccConfig::default()
        })
    }

    fn validate(topology: &Topology, config: &PtccConfig) -> Result<(), String> {
        topology.one_replica_per_dc()?;
        if topology.dc_count() != 1 {
            return Err(format!(
                "PrompTCC runs inside one DC, as its paper evaluates it; this cluster has {} DCs (use --dcs 1, or wren across DCs)",
                topology.dc_count()
            ));
        }
        if config.stabilization_interval_us == 0
            || config.resolve_after_us == 0
            || config.commit_timeout_us == 0
            || config.txn_timeout_us == 0
        {
            return Err("Δ_G, the resolve interval and the commit and transaction timeouts must be positive".into());
        }
        if topology.partition_count() > 1 << 20 {
            return Err("PrompTCC takes at most 2^20 partitions".into());
        }
        if config.tree_fanout == 0 {
            return Err("the tree's fan-out must be at least 1".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &PtccConfig) -> PtccReplica {
        PtccReplica::new(id, topology, Self::variant(config))
    }

    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &PtccConfig,
        records: Vec<RecordOf<Self>>,
    ) -> PtccReplica {
        let mut replica = Self::replica(id, topology, config);
        replica.replay(records);
        replica
    }

    fn session(setup: SessionSetup, config: &PtccConfig) -> PtccSession {
        let client = PtccClient::new(setup.id, setup.topology.clone(), &Self::variant(config));
        SessionCore::new(&setup, client)
    }
}
