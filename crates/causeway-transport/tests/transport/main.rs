//! The peer transport's tests: FIFO delivery, reconnects, TLS, bad input
//! and WAN delay.
//!
//! One test binary per crate, each file a module: the crate's code and
//! its generic instances are compiled and linked once rather than once per
//! file, which was most of the test build's time and disk.

mod common;

mod bad_input;
mod fifo;
mod reconnect;
mod tls;
mod wan;
