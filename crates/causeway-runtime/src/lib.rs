//! Causeway's runtime: tokio tasks drive the same sans-IO state machines the
//! simulator drives, with the real clock, real timers and real sockets.
//!
//! A transaction's way through this crate: a client connection
//! ([`clients`]) runs the client's session next to its coordinator; the
//! session's messages and the replicas' go through the [`router`] — to a
//! replica task of this node ([`replica_task`], one task per partition
//! replica, owning its state), through a WAN delay line when they cross DCs
//! inside one process, or to another node over the transport ([`peers`]). A
//! [`plan::ClusterPlan`] (from a [`config`] file, or
//! [`plan::ClusterPlan::embedded`]) says which node runs what; each replica
//! keeps its records in a log on disk ([`disk`]); [`node::start`]
//! starts one; [`metrics`] serves Prometheus text, and [`stats`] the
//! counters benchmarks read over the client wire.

pub mod alarm;
pub mod auth;
pub mod clients;
pub mod clock;
pub mod config;
pub mod disk;
pub mod dump;
pub mod envelope;
pub mod error;
pub mod metrics;
pub mod node;
pub mod outgoing;
pub mod peers;
pub mod plan;
pub mod replica_task;
pub mod router;
pub mod stats;
pub mod tls;
pub mod token;

pub use error::StartError;
pub use node::{start, start_with, NodeHandle, StartOptions};
pub use plan::ClusterPlan;
