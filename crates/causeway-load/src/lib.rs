//! Closed-loop workload clients that drive a running cluster through the
//! client library, as applications would, and measure it: throughput,
//! latency, update visibility, and the history the checker judges.
//!
//! * [`driver`] — the clients: one session each, transaction after
//!   transaction, drawn from the simulator's workload generator.
//! * [`visibility`] — how long a commit takes to become visible in its own DC
//!   and in the others, from the replicas' published stable times.
//! * [`probe`] — a connection that reads a node's counters through its
//!   death and restart.
//! * [`preload`] — writes every key once before a benchmark.
//! * [`settle`] — waits until every DC holds the same data, for the
//!   history's final states.

pub mod driver;
pub mod preload;
pub mod probe;
pub mod settle;
pub mod visibility;

pub use driver::{run, ClassMeasure, LoadConfig, LoadReport, Phase, Progress};
