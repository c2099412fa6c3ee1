//! The server-to-server transport of Causeway.
//!
//! Protocol-agnostic: a [`Transport<M>`] carries values of any [`WireMessage`]
//! type `M` between the processes of one cluster, over one persistent TCP
//! connection per direction per pair of nodes. Each node *dials* every peer
//! for its outbound direction and *accepts* the peers' outbound connections;
//! data flows dialer → acceptor; acknowledgements ride on the batches of the
//! other direction when there are any, and flow back on the same socket when
//! there are not.
//!
//! # Wire format
//!
//! Every frame is a 4-byte big-endian length, then that many bytes of body
//! ([`frame`]). Integers written as "varint" use postcard's encoding.
//!
//! * **Handshake** ([`handshake`]). The dialer's first frame is `"CWTP"`, the
//!   wire version ([`TRANSPORT_VERSION`], u32 big-endian) and a postcard
//!   [`handshake::Hello`]: cluster name, sender node id, sender incarnation
//!   (its start time in nanoseconds), `base`, the first sequence number it
//!   has not seen acknowledged, and `skipped`, whether it dropped messages
//!   the acceptor had not acknowledged (a shed backlog). Magic and version have a fixed layout so any
//!   version can read them. The acceptor answers with the same head and a
//!   [`handshake::Reply`]: `Accept { next, incarnation }`, the next sequence
//!   number it expects from that sender and its own incarnation, or `Refuse(reason)` — another wire version, an
//!   unknown node, another cluster, a stale incarnation — and closes.
//! * **Batch** (dialer → acceptor): varint sequence number of the first
//!   message, a varint *reverse ack* (how far the dialer has delivered the
//!   acceptor's own link to it, as an ack says; 0 for nothing new), then the
//!   messages, each postcard-encoded, back to back. The
//!   sequence number counts messages on the directed link from 0 within the
//!   sender's incarnation. A writer puts everything queued into as few frames
//!   and as few writes as it can (write coalescing), and does not wait for
//!   acknowledgements before writing more (pipelining).
//! * **Ack** (acceptor → dialer): one varint, the number of the next message
//!   the acceptor expects — cumulative: everything below it was delivered.
//!   Sent after [`TransportConfig::ack_every`] messages or every
//!   [`TransportConfig::ack_interval`], whichever comes first, unless a
//!   batch of the receiver's to the sender carried it as its reverse ack
//!   meanwhile: under traffic both ways, acks cost no write of their own
//!   (issue 17). A reverse ack past what was ever written to that peer
//!   closes the connection, as a bad ack does.
//!
//! # Guarantees
//!
//! * **FIFO per link**: messages from A to B are delivered to B's `deliver`
//!   callback in the order A called [`Transport::send`].
//! * **Exactly once across reconnects**, within the lifetime of both
//!   processes: a sender keeps every message until it is acknowledged, and on
//!   reconnect re-sends from the number the acceptor says it expects; the
//!   acceptor drops anything it has already delivered, and a new connection
//!   from a peer supersedes the old one before it answers, so two connections
//!   never deliver for the same link at once.
//! * **Bad input closes the connection**, never the process: malformed or
//!   oversized frames, undecodable messages, sequence gaps and refused
//!   handshakes end that one connection and are counted in
//!   [`TransportStats::protocol_errors`].
//!
//! # Not guaranteed
//!
//! * **Peer restarts.** A restarted process has a new incarnation and has lost
//!   its state: when a sender restarts, its receiver starts the link again at
//!   whatever the new incarnation sends (from 0); when a receiver restarts,
//!   messages it had acknowledged before are gone, and so are those it had
//!   not: the sender learns the new incarnation at the handshake and drops
//!   what it held for the process that died (counted in
//!   [`PeerStats::dropped_for_restart`]), so a message is never delivered to
//!   a process it was not sent to — it may have been taken by the one before.
//!   Crash recovery belongs to the layers above. An incarnation older than
//!   the one already seen is refused as stale (a zombie or impostor must not
//!   rewind the link).
//! * **Every message, when a backlog is shed.** What is held for one peer
//!   is bounded ([`TransportConfig::max_backlog_bytes`]); past it the link
//!   drops it all and reconnects, its hello saying so (`skipped`), and the
//!   acceptor tells its user of the gap ([`Inlet::on_gap`]) before anything
//!   sent later. FIFO holds for what is delivered.
//! * **Delivery of what the receiver holds back.** An [`Inlet::admit`] may
//!   hold a message (the runtime's guard against far-future timestamps):
//!   it stays unacknowledged, and the link waits behind it.
//!
//! # WAN emulation
//!
//! A [`Peer`] with a [`DelaySpec`] holds each message sent to it in a
//! [`DelayLine`] until `max(enqueued + one_way + jitter, release of the
//! previous message)`, which keeps FIFO. [`DelayLine`] is public so in-memory
//! links can use the same stage.

mod config;
mod conn;
mod delay;
pub mod frame;
pub mod handshake;
mod inbound;
mod outbound;
mod outbox;
mod peer;
mod shared;
mod stats;
pub mod tls;
mod transport;

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use config::{HostAddr, Peer, TransportConfig, DEFAULT_MAX_BACKLOG_BYTES, DEFAULT_MAX_FRAME_BYTES};
pub use delay::{DelayLine, DelaySpec};
pub use handshake::TRANSPORT_VERSION;
pub use peer::LinkState;
pub use shared::{Admit, Deliver, Inlet, OnGap};
pub use stats::{PeerStats, TransportStats};
pub use transport::{SendError, Transport};

/// Identifies a server process of the cluster.
pub type NodeId = u32;

/// What a [`Transport`] can carry. (What a message means, and its class for
/// byte accounting, is its user's business: the runtime counts the classes
/// each protocol declares.)
pub trait WireMessage: Serialize + DeserializeOwned + Send + Sync + 'static {}
