//! Causeway's benchmark harness: closed-loop clients, through the client
//! library, against an embedded cluster, one server process per replica,
//! or a running cluster; what they measured as a [`report::BenchReport`]
//! (JSON); series of runs ([`sweep`]) and the Wren paper's figures drawn
//! from them ([`figures`]).
//!
//! * [`spec`] — one run's parameters, with the paper's defaults.
//! * [`deploy`] — bringing the cluster up and down.
//! * [`run`] — warm-up, measured time, counters from every node, visibility.
//! * [`report`] — the JSON report and the printed summary.
//! * [`cpu`] — CPU time from the kernel's accounting.
//! * [`syscalls`] — system calls counted by `perf stat` (`--syscalls`).
//! * [`sweep`] — a series of runs over protocols, clients, partitions, DCs
//!   and mixes.
//! * [`figures`] — PNG and SVG figures in the shapes of the paper's.

pub mod cpu;
pub mod deploy;
pub mod figures;
pub mod report;
pub mod run;
pub mod spec;
pub mod sweep;
pub mod syscalls;

pub use report::BenchReport;
pub use run::{run, Outcome};
pub use spec::{new_run_id, paper_workload, promptcc_workload, BenchSpec, Deployment};
