//! Counters kept while running, and the snapshots [`crate::Transport::stats`] returns.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::NodeId;

/// What happened on the links with one peer, both directions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerStats {
    pub node: NodeId,
    /// Our outbound connection to it is up (handshake done).
    pub connected: bool,
    /// Messages written to it for the first time, and their encoded bytes.
    pub msgs_sent: u64,
    pub bytes_sent: u64,
    /// Messages written again after a reconnect (not in `msgs_sent`).
    pub msgs_resent: u64,
    /// Messages it had not acknowledged when it restarted: dropped, not
    /// handed to its new process.
    pub dropped_for_restart: u64,
    /// Batch frames written, and all bytes written including framing.
    pub frames_sent: u64,
    pub wire_bytes_sent: u64,
    /// Writes of batch frames handed to the socket (each holds one or more
    /// frames: everything the outbox had when the writer woke).
    pub writes: u64,
    /// Acknowledgement frames written back to it, one write each.
    pub acks_sent: u64,
    /// Acknowledgements of what it sent us that rode on our batches to it
    /// (no write of their own).
    pub acks_carried: u64,
    /// Messages delivered from it, and their encoded bytes.
    pub msgs_received: u64,
    pub bytes_received: u64,
    pub frames_received: u64,
    /// Received messages dropped because they had been delivered already.
    pub duplicates_dropped: u64,
    /// Times a message from it was held back by the receiver's admission
    /// check (its link waiting behind it), counting each time it was asked.
    pub held: u64,
    /// Outbound connections established after the first one.
    pub reconnects: u64,
    /// Failed outbound attempts: connect errors, refused or broken handshakes.
    pub connect_failures: u64,
    /// Inbound connections from it that passed the handshake.
    pub inbound_connections: u64,
    /// Messages sent to it and not yet acknowledged (queued, delayed or in flight).
    pub unacked: u64,
    /// Bytes of those messages held for it ([`crate::TransportConfig::max_backlog_bytes`]).
    pub backlog_bytes: u64,
    /// Times its backlog passed the bound and was dropped, and the messages dropped.
    pub backlogs_shed: u64,
    pub msgs_shed: u64,
}

/// A snapshot of a transport's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    pub node: NodeId,
    /// One entry per peer, in node id order.
    pub peers: Vec<PeerStats>,
    /// Inbound connections closed for bad input: refused handshakes,
    /// malformed or oversized frames, undecodable messages, sequence gaps.
    pub protocol_errors: u64,
}

impl TransportStats {
    pub fn peer(&self, node: NodeId) -> Option<&PeerStats> {
        self.peers.iter().find(|p| p.node == node)
    }

    pub fn msgs_sent(&self) -> u64 {
        self.peers.iter().map(|p| p.msgs_sent).sum()
    }

    pub fn msgs_received(&self) -> u64 {
        self.peers.iter().map(|p| p.msgs_received).sum()
    }

    pub fn reconnects(&self) -> u64 {
        self.peers.iter().map(|p| p.reconnects).sum()
    }
}

/// The live counters of one peer. Relaxed: they are statistics, not synchronisation.
#[derive(Default)]
pub(crate) struct PeerCounters {
    pub connected: AtomicBool,
    /// Accepted by `send` (sequence numbers handed out, including those still in a delay line).
    pub enqueued: AtomicU64,
    /// Cumulative ack: every sequence number below this was delivered.
    pub acked: AtomicU64,
    pub msgs_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub msgs_resent: AtomicU64,
    pub dropped_for_restart: AtomicU64,
    pub frames_sent: AtomicU64,
    pub wire_bytes_sent: AtomicU64,
    pub writes: AtomicU64,
    pub acks_sent: AtomicU64,
    pub acks_carried: AtomicU64,
    pub msgs_received: AtomicU64,
    pub bytes_received: AtomicU64,
    pub frames_received: AtomicU64,
    pub duplicates_dropped: AtomicU64,
    pub held: AtomicU64,
    pub backlog_bytes: AtomicU64,
    pub backlogs_shed: AtomicU64,
    pub msgs_shed: AtomicU64,
    pub reconnects: AtomicU64,
    pub connect_failures: AtomicU64,
    pub inbound_connections: AtomicU64,
}

impl PeerCounters {
    pub(crate) fn snapshot(&self, node: NodeId) -> PeerStats {
        let load = |a: &AtomicU64| a.load(Relaxed);
        let acked = load(&self.acked);
        PeerStats {
            node,
            connected: self.connected.load(Relaxed),
            msgs_sent: load(&self.msgs_sent),
            bytes_sent: load(&self.bytes_sent),
            msgs_resent: load(&self.msgs_resent),
            dropped_for_restart: load(&self.dropped_for_restart),
            frames_sent: load(&self.frames_sent),
            wire_bytes_sent: load(&self.wire_bytes_sent),
            writes: load(&self.writes),
            acks_sent: load(&self.acks_sent),
            acks_carried: load(&self.acks_carried),
            msgs_received: load(&self.msgs_received),
            bytes_received: load(&self.bytes_received),
            frames_received: load(&self.frames_received),
            duplicates_dropped: load(&self.duplicates_dropped),
            held: load(&self.held),
            reconnects: load(&self.reconnects),
            connect_failures: load(&self.connect_failures),
            inbound_connections: load(&self.inbound_connections),
            unacked: load(&self.enqueued).saturating_sub(acked),
            backlog_bytes: load(&self.backlog_bytes),
            backlogs_shed: load(&self.backlogs_shed),
            msgs_shed: load(&self.msgs_shed),
        }
    }
}
