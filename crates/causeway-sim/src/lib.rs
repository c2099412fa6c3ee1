//! Causeway's deterministic simulator.
//!
//! It drives the sans-IO protocol state machines with virtual time, a WAN
//! model with per-link FIFO delivery, skewed and drifting clocks, DC cuts
//! that heal, and closed-loop workload clients that record a history. Same
//! configuration and seed, same history, byte for byte.
//!
//! [`harness::Harness`] is its hand-cranked sibling for scenario tests: no
//! clock runs and no message moves unless the test says so.

pub mod client;
pub mod clock;
pub mod config;
pub mod faults;
pub mod harness;
pub mod network;
pub mod report;
pub mod simulation;

pub use config::{Cut, LatencySpikes, Readers, SimConfig};
pub use faults::{
    random_crashes, random_leader_crashes, ComesBack, Crash, CrashTarget, DiskModel, Faults, Shedding, TransportFaults,
};
pub use report::SimReport;
pub use simulation::{Progress, Simulation};
