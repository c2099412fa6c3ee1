//! The client wire protocol of Causeway: what a client and a server say to
//! each other, shared by the client library and the server so neither
//! defines it alone.
//!
//! A TCP connection carries length-delimited frames (a 4-byte big-endian
//! length, then the body); each body is one postcard-encoded
//! [`RequestFrame`] (client → server) or [`ResponseFrame`] (server →
//! client). The first request must be [`Request::Hello`]; a server answers a
//! different [`WIRE_VERSION`] with [`WireError::VersionMismatch`], and
//! credentials it refuses with [`WireError::Unauthenticated`], and closes
//! the connection. The [`Welcome`] names the connection's [`Role`]; a
//! request beyond it is answered [`WireError::Forbidden`]. Requests on one connection are answered in order, so a
//! client may pipeline them (send several before reading the answers).
//!
//! One connection is one session: one transaction at a time, which the
//! server runs against a coordinator in its DC.
//!
//! * [`frames`] — requests, responses, the handshake's [`Welcome`], commit
//!   stamps and dumps.
//! * [`role`] — [`Role`]: what a connection may do (read, write, admin).
//! * [`stats`] — what a node answers to the benchmarks' `Stats` request.
//! * [`error`] — [`WireError`]: a session's own errors, and the
//!   connection's.
//!
//! The size [`Limits`] and their one check are the protocol contract's
//! ([`causeway_protocol::limits`]): the client, the server and the sessions
//! refuse an oversized request the same way.

pub mod error;
pub mod frames;
pub mod role;
pub mod stats;

pub use causeway_protocol::{AbortReason, Limits, SessionError};
pub use error::WireError;
pub use frames::{Credentials, Dump, Request, RequestFrame, Response, ResponseFrame, Stamp, Welcome, DUMP_PAGE_BYTES};
pub use role::Role;
pub use stats::{ClassCount, LinkCounts, NodeStats, ReplicaReading, VisibleChange};

/// Bumped on any incompatible change of the frames (8: the hello carries
/// credentials, the welcome the connection's role, and a request may be
/// refused for its role; 9: a node's stats count its frames and writes, and carry the latest
/// changes of each replica's stable times).
pub const WIRE_VERSION: u32 = 9;

/// The largest frame either side accepts by default (16 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;
