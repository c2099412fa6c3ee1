//! The runtime's tests: embedded clusters over real sockets, bad input,
//! limits, logins, restarts and metrics.
//!
//! One test binary per crate, each file a module: the crate's code and
//! its generic instances are compiled and linked once rather than once per
//! file, which was most of the test build's time and disk.

mod common;

mod auth;
mod bad_input;
mod client_tls;
mod clock_guard;
mod connection_limits;
mod embedded;
mod metrics;
mod peer_input;
mod restart;
mod sockets;
