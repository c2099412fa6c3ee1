//! What Causeway's clients do and where they are, shared by every driver:
//! the simulator, the load driver of benchmarks, and the runtime's WAN
//! emulation.
//!
//! * [`wan`] — the WAN model: round-trip times between regions and the
//!   latency inside a DC (`config/wan.toml`).
//! * [`keys`] — key spaces bucketed by partition.
//! * [`locality`] — local-DC against multi-DC transactions under partial
//!   replication.
//! * [`zipf`] — zipf key popularity, sampled through a guide table.
//! * [`plan`] — the workload's shape ([`WorkloadKind`], [`TxnShape`]) and
//!   the transaction plans a [`Generator`] draws from it, classed for
//!   measurement ([`TxnClass`]) where the workload tells kinds apart.
//! * [`social`] — the Geo-SDUR paper's social network: users, their lists
//!   and the keys that keep a user's lists in its partition.
//!
//! **Architecture invariant:** no I/O but reading a WAN file the caller
//! names, no clock, and randomness only from the generator the caller
//! passes in: the same seed plans the same transactions.

pub mod keys;
pub mod locality;
pub mod plan;
pub mod social;
pub mod wan;
pub mod zipf;

pub use keys::KeySpace;
pub use locality::Locality;
pub use plan::{
    fraction_ppm, Generator, PlannedWrite, Transfer, TxnClass, TxnPlan, TxnShape, WorkloadConfig, WorkloadKind,
};
pub use social::{List, SocialKeys, SocialMix, SocialStep, User};
pub use wan::{WanError, WanModel, DEFAULT_WAN_TOML};
pub use zipf::ZipfTable;
