//! The rhythm of a family replica: Δ_R (apply and replicate), Δ_G
//! (stabilize), and how long a silent client's transaction is kept — and
//! the timers that keep it.

use crate::contract::{Effects, Tuning};
use std::convert::Infallible;

/// The periodic timers of every replica of the family, and the protocol's
/// own (`X`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyTimer<X = Infallible> {
    /// Δ_R: apply, replicate, heartbeat.
    Apply,
    /// Δ_G: a round of stabilization.
    Stabilize,
    /// Drop the transactions of clients that went silent.
    ExpireContexts,
    /// Heal what a crash left behind: ask about old prepared transactions,
    /// give up commits a cohort never answered, acknowledge and resume
    /// replication streams.
    Heal,
    /// A timer of the protocol's own.
    Own(X),
}

/// Intervals in microseconds of the replica's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rhythm {
    /// Δ_R: how often a replica applies committed transactions and
    /// replicates them (or sends a heartbeat).
    pub apply_interval_us: u64,
    /// Δ_G: how often a round of stabilization starts.
    pub stabilization_interval_us: u64,
    /// A coordinator forgets a transaction whose client has been silent this
    /// long, so that a vanished client cannot hold back garbage collection.
    pub tx_context_timeout_us: u64,
    /// A coordinator gives up a commit whose cohorts have not all proposed
    /// within this long (one crashed with the prepare).
    pub commit_timeout_us: u64,
    /// A cohort asks the coordinator about a transaction prepared this long
    /// ago without a decision (the coordinator may have crashed), and again
    /// as often until it hears.
    pub resolve_after_us: u64,
    /// How often the [`FamilyTimer::Heal`] round runs.
    pub heal_interval_us: u64,
    /// Groups of the stream to the peers kept in memory, in bytes, before
    /// the oldest are spilled to disk ([`crate::recovery::stream`]).
    pub max_kept_bytes: u64,
}

impl Default for Rhythm {
    fn default() -> Self {
        Rhythm {
            apply_interval_us: 5_000,
            stabilization_interval_us: 5_000,
            tx_context_timeout_us: 10_000_000,
            commit_timeout_us: Rhythm::DEFAULT_COMMIT_TIMEOUT_US,
            resolve_after_us: 1_000_000,
            heal_interval_us: 100_000,
            max_kept_bytes: crate::recovery::DEFAULT_MAX_KEPT_BYTES,
        }
    }
}

impl Rhythm {
    /// [`Rhythm::commit_timeout_us`] unless set.
    pub const DEFAULT_COMMIT_TIMEOUT_US: u64 = 1_000_000;

    /// How far apart the clocks of one DC may be — of the whole cluster
    /// under partial replication, where a cohort takes commits from other
    /// DCs' coordinators: half the coordinators' default commit timeout. A
    /// replica takes a transaction that writes only its partition (one
    /// phase) until half the timeout after the commit request by its own
    /// clock, so that once the client has heard the outcome is unknown, it
    /// cannot commit. The config, `bench` and the simulator (which both
    /// count every clock of the cluster) refuse clocks further apart.
    pub const MAX_CLOCK_SPREAD_US: u64 = Rhythm::DEFAULT_COMMIT_TIMEOUT_US / 2;

    /// The shared settings applied.
    pub fn tuned(tuning: &Tuning) -> Rhythm {
        Rhythm {
            apply_interval_us: tuning.apply_interval_us,
            stabilization_interval_us: tuning.stabilization_interval_us,
            max_kept_bytes: tuning.max_kept_bytes,
            ..Rhythm::default()
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.apply_interval_us == 0 || self.stabilization_interval_us == 0 {
            return Err("Δ_R and Δ_G must be positive".into());
        }
        if self.commit_timeout_us == 0 || self.resolve_after_us == 0 || self.heal_interval_us == 0 {
            return Err("the commit timeout, the resolve delay and the heal interval must be positive".into());
        }
        if self.max_kept_bytes == 0 {
            return Err("the bound on groups kept in memory for the peers must be positive".into());
        }
        Ok(())
    }

    /// How often silent clients' transactions are looked for.
    pub fn expiry_interval_us(&self) -> u64 {
        self.tx_context_timeout_us / 2 + 1
    }

    /// Arms the periodic timers, when a replica starts.
    pub fn start<X, M, R>(&self, out: &mut Effects<M, FamilyTimer<X>, R>) {
        for timer in [FamilyTimer::Apply, FamilyTimer::Stabilize, FamilyTimer::ExpireContexts, FamilyTimer::Heal] {
            self.rearm(timer, out);
        }
    }

    /// Arms a periodic timer again after it fired (the protocol's own
    /// timers are the protocol's to arm).
    pub fn rearm<X, M, R>(&self, timer: FamilyTimer<X>, out: &mut Effects<M, FamilyTimer<X>, R>) {
        let after = match timer {
            FamilyTimer::Apply => self.apply_interval_us,
            FamilyTimer::Stabilize => self.stabilization_interval_us,
            FamilyTimer::ExpireContexts => self.expiry_interval_us(),
            FamilyTimer::Heal => self.heal_interval_us,
            FamilyTimer::Own(_) => return,
        };
        out.set_timer(timer, after);
    }
}
