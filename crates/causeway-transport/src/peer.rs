//! What the transport keeps per peer, shared by `send`, the peer's outbound
//! link task and the inbound connections it makes to us.

use std::sync::Mutex;

use crate::config::HostAddr;
use crate::outbox::Outbox;
use crate::stats::PeerCounters;
use crate::NodeId;

pub(crate) struct PeerShared {
    pub node: NodeId,
    pub addr: HostAddr,
    pub outbox: Outbox,
    pub counters: PeerCounters,
    pub inbound: Mutex<InboundState>,
}

impl PeerShared {
    pub fn new(node: NodeId, addr: HostAddr) -> Self {
        PeerShared {
            node,
            addr,
            outbox: Outbox::default(),
            counters: PeerCounters::default(),
            inbound: Mutex::new(InboundState::default()),
        }
    }
}

/// The receiving end of the link from this peer. Survives its connections:
/// that is what lets a new connection resume where the last one stopped.
#[derive(Default)]
pub(crate) struct InboundState {
    /// The peer's incarnation we are receiving from; `None` before its first connection.
    pub incarnation: Option<u64>,
    /// The next sequence number to deliver.
    pub next: u64,
    /// Bumped by every accepted handshake: a connection whose generation is
    /// no longer current has been superseded and must stop delivering.
    pub generation: u64,
}
