//! The simulator's tests: properties over many seeds, scenarios, faults,
//! crashes and the checker's planted bugs.
//!
//! One test binary per crate, each file a module: the crate's code and
//! its generic instances are compiled and linked once rather than once per
//! file, which was most of the test build's time and disk.

mod common;

mod bank;
mod checker_sees_bugs;
mod crashes;
mod cure_properties;
mod cure_scenarios;
mod deletes;
mod durability;
mod ec_rejected;
mod eiger_scenarios;
mod faults;
mod groups_invariant;
mod one_dc_properties;
mod paris_properties;
mod paris_scenarios;
mod reach;
mod reseed_scenarios;
mod sdur_properties;
mod sdur_scenarios;
mod sdur_workloads;
mod wren_properties;
mod wren_scenarios;
