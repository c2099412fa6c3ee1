//! The checker's tests: one history per anomaly kind, serializability's
//! phenomena, and generated histories.
//!
//! One test binary per crate, each file a module: the crate's code and
//! its generic instances are compiled and linked once rather than once per
//! file, which was most of the test build's time and disk.

mod common;

mod generated;
mod kinds;
mod serializable;
