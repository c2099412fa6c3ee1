//! Client connections. A server runs each client's session state machine
//! (the paper's client library) next to its coordinator, so clients speak
//! one small protocol-independent wire protocol ([`causeway_wire`])
//! whatever protocol the cluster runs. One connection is one session.
//!
//! * [`host`] — what every connection of a node shares: the allocation of
//!   client ids and coordinators.
//! * [`listener`] — the accept loop: a slot per connection, TLS.
//! * [`connection`] — one connection: the handshake,
//!   framing, pipelining within a byte budget (back-pressure), answers in
//!   order.
//! * [`driver`] — what a request does to the session: calls, completions
//!   from the cluster, read-only transactions, session tokens.
//! * [`admin`] — the operator and benchmark hooks: `Dump`,
//!   `DropPeerConnections`, `Stats`.
//!
//! Every request is checked before it reaches the protocol: a bad one gets an
//! error reply (or, for a malformed frame or a wrong version, an error reply
//! and a closed connection), never a panic.

pub mod admin;
pub mod connection;
pub mod driver;
pub mod frame_codec;
pub mod host;
pub mod listener;

pub use host::ClientHost;
