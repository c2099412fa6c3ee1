//! The binary's tests: they start `causeway` as processes (servers, the
//! shell, bench, sim) and check what a user sees, plus the workspace's
//! tidy checks and the golden sim digests.
//!
//! One test binary, each file a module: linked once rather than once per
//! file. Tests still run two at a time (one per core), as they did within
//! each file.

mod common;

mod bench;
mod cli;
mod damaged_logs;
mod first_hour;
mod golden;
mod hung_up_clients;
mod killed_leaders;
mod killed_servers;
mod logins;
mod multiprocess;
mod network_cut;
mod shell;
mod tidy;
mod tls;
