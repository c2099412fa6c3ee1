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
//! * [`plan`] — the workload's shape ([`WorkloadKind`]) and the transaction
//!   plans a [`Generator`] draws from it.
//!
//! **Architecture invariant:** no I/O but reading a WAN file the caller
//! names, no clock, and randomness only from the generator the caller
//! passes in: the same seed plans the same transactions.

pub mod keys;
pub mod locality;
pub mod plan;
pub mod wan;
pub mod zipf;

pub use keys::KeySpace;
pub use locality::Locality;
pub use plan::{Generator, PlannedWrite, Transfer, TxnPlan, TxnShape, WorkloadConfig, WorkloadKind};
pub use wan::{WanError, WanModel, DEFAULT_WAN_TOML};
pub use zipf::ZipfTable;
