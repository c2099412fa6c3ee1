//! What the protocols that survive crashes share, whatever their records:
//!
//! * [`reservations`] — the clock and transaction-id reservations that keep
//!   a restarted replica from handing out a timestamp or an id again.
//! * [`stream`] — a replica's replication streams to its peers in the other
//!   DCs: groups sent once durable and kept until every peer acknowledges
//!   them, and streams resumed after a crash from what each side holds.
//! * [`seed`] — a replica whose disk is gone asks its partition's replicas
//!   in the other DCs, and its DC's, for what it lost.
//!
//! The two-phase-commit family ([`crate::twopc`]) and EC ([`crate::ec`])
//! use both; each brings its records and its messages.

pub mod reservations;
pub mod seed;
pub mod stream;

pub use reservations::{Reservations, Reserved, Reserving, CLOCK_WINDOW_US};
pub use seed::{Seed, SeedFacts, SeedGroup, SeedMsg, Seeding};
pub use stream::{Control, Incoming, PeerStreams, Position, StreamMsg, StreamRecord, DEFAULT_MAX_KEPT_BYTES};
