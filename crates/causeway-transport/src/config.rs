//! Configuration of a transport and its peers.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::tls::{valid_node_name, PeerTls};
use crate::{DelaySpec, NodeId};

/// The largest frame accepted by default (16 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;

/// The smallest `max_frame_bytes` allowed: room for a handshake and a few messages.
const MIN_FRAME_BYTES: usize = 1024;

#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// This node.
    pub node: NodeId,
    /// Cluster name; peers of another cluster are refused at handshake.
    pub cluster: String,
    /// What peers must agree on besides the cluster name (the runtime: the
    /// protocol, the cluster's shape): named values, compared at the
    /// handshake; a peer that differs is refused with both values named.
    pub terms: Vec<(String, String)>,
    /// Where peers connect to us (port 0 picks one: see [`crate::Transport::local_addr`]).
    /// Ignored by [`crate::Transport::start_with_listener`].
    pub listen: SocketAddr,
    /// The other nodes. Only these may connect to us, and only to these can we send.
    pub peers: Vec<Peer>,
    /// Bigger frames close the connection. Also bounds the encoded size of one message.
    pub max_frame_bytes: usize,
    /// Exponential backoff between connection attempts to a peer.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// The receiver acknowledges at least this often while messages arrive...
    pub ack_interval: Duration,
    /// ...and after this many messages, whichever comes first.
    pub ack_every: u64,
    /// Mutual TLS on every link; `None`: plain TCP, and anyone who can
    /// reach the port can claim to be a peer.
    pub tls: Option<PeerTls>,
    /// The most bytes of messages held for one peer and not acknowledged
    /// (queued, in a WAN delay line, written and unacknowledged). A send
    /// that takes the backlog past it has the link drop the whole backlog
    /// (shed it) and reconnect; the peer hears of the gap before anything
    /// sent later ([`crate::Inlet::on_gap`]). So memory stays bounded while
    /// a peer is unreachable or slow (the link's task sheds as soon as it
    /// runs: sends made before then may take the backlog past the bound).
    pub max_backlog_bytes: usize,
}

/// The default of [`TransportConfig::max_backlog_bytes`]: 256 MiB.
pub const DEFAULT_MAX_BACKLOG_BYTES: usize = 256 << 20;

impl TransportConfig {
    /// A configuration with the defaults: 16 MiB frames, backoff 10 ms to 1 s,
    /// acks every 20 ms or 1024 messages, backlogs of 256 MiB.
    pub fn new(node: NodeId, cluster: impl Into<String>, listen: SocketAddr, peers: Vec<Peer>) -> Self {
        TransportConfig {
            node,
            cluster: cluster.into(),
            terms: Vec::new(),
            listen,
            peers,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_secs(1),
            // An ack only lets the sender drop what it keeps for a resend
            // (ack_every bounds that): rare acks cost fewer writes.
            ack_interval: Duration::from_millis(20),
            ack_every: 1024,
            tls: None,
            max_backlog_bytes: DEFAULT_MAX_BACKLOG_BYTES,
        }
    }

    pub(crate) fn validate(&self) -> io::Result<()> {
        let invalid = |what: String| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        let mut nodes: Vec<NodeId> = self.peers.iter().map(|p| p.node).collect();
        nodes.sort_unstable();
        if let Some(w) = nodes.windows(2).find(|w| w[0] == w[1]) {
            return invalid(format!("peer {} is listed twice", w[0]));
        }
        if nodes.contains(&self.node) {
            return invalid(format!("node {} lists itself as a peer", self.node));
        }
        if self.max_frame_bytes < MIN_FRAME_BYTES || self.max_frame_bytes > u32::MAX as usize {
            return invalid(format!("max_frame_bytes {} is not in {MIN_FRAME_BYTES}..=u32::MAX", self.max_frame_bytes));
        }
        if self.max_backlog_bytes < self.max_frame_bytes {
            return invalid(format!(
                "max_backlog_bytes {} is below max_frame_bytes {}: one message could shed the backlog",
                self.max_backlog_bytes, self.max_frame_bytes
            ));
        }
        if self.reconnect_min.is_zero() || self.reconnect_min > self.reconnect_max {
            return invalid("reconnect_min must be > 0 and <= reconnect_max".into());
        }
        if self.tls.is_some() {
            if let Some(p) = self.peers.iter().find(|p| !valid_node_name(&p.name)) {
                return invalid(format!(
                    "peer {} is named {:?}: under TLS a node name must be lower-case letters, digits and inner hyphens",
                    p.node, p.name
                ));
            }
        }
        if self.ack_interval.is_zero() || self.ack_every == 0 {
            return invalid("ack_interval and ack_every must be > 0".into());
        }
        Ok(())
    }
}

/// Another node of the cluster.
#[derive(Clone, Debug)]
pub struct Peer {
    pub node: NodeId,
    /// Its name: under TLS, its certificate must name it.
    pub name: String,
    /// Where to dial it.
    pub addr: HostAddr,
    /// WAN emulation on the link from us to it.
    pub delay: Option<DelaySpec>,
}

/// Where something listens: an address, or a `host:port` whose name is
/// resolved when it is used — a peer's at every dial attempt, so a node
/// that moved is found again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAddr {
    Ip(SocketAddr),
    Name(String),
}

impl HostAddr {
    /// `host:port` as written: an address, or a name (not resolved here).
    /// Errors say what is wrong with the text.
    pub fn parse(text: &str) -> Result<HostAddr, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return if addr.port() == 0 { Err("needs a port other than 0".into()) } else { Ok(HostAddr::Ip(addr)) };
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err("needs a port: write host:port".into());
        };
        match port.parse::<u16>() {
            Ok(0) => Err("needs a port other than 0".into()),
            Ok(_) if host.is_empty() => Err("needs a host before the port".into()),
            Ok(_) => Ok(HostAddr::Name(text.to_string())),
            Err(_) => Err(format!("has no valid port ({port:?} is not a number from 1 to 65535)")),
        }
    }

    /// The host, whichever the form: an address (without brackets) or a name.
    pub fn host(&self) -> String {
        match self {
            HostAddr::Ip(a) => a.ip().to_string(),
            HostAddr::Name(text) => text.rsplit_once(':').map_or(text.as_str(), |(h, _)| h).to_string(),
        }
    }

    /// The port, whichever the form.
    pub fn port(&self) -> u16 {
        match self {
            HostAddr::Ip(a) => a.port(),
            HostAddr::Name(text) => text.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0),
        }
    }

    /// What it means now, without blocking the runtime: its first address.
    pub async fn lookup(&self) -> io::Result<SocketAddr> {
        match self {
            HostAddr::Ip(a) => Ok(*a),
            HostAddr::Name(host) => tokio::net::lookup_host(host.as_str())
                .await?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"))),
        }
    }

    /// What the name means now: its first address (blocking).
    pub fn resolve(&self) -> io::Result<SocketAddr> {
        use std::net::ToSocketAddrs;
        match self {
            HostAddr::Ip(a) => Ok(*a),
            HostAddr::Name(host) => host
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"))),
        }
    }
}

impl From<SocketAddr> for HostAddr {
    fn from(a: SocketAddr) -> Self {
        HostAddr::Ip(a)
    }
}

impl std::fmt::Display for HostAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostAddr::Ip(a) => write!(f, "{a}"),
            HostAddr::Name(host) => f.write_str(host),
        }
    }
}

impl Peer {
    pub fn new(node: NodeId, addr: impl Into<HostAddr>) -> Self {
        Peer { node, name: format!("node{node}"), addr: addr.into(), delay: None }
    }

    /// Names it (by default `node<id>`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn with_delay(mut self, delay: DelaySpec) -> Self {
        self.delay = Some(delay);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_or_a_name_has_no_port_and_no_brackets() {
        for (text, host) in
            [("127.0.0.1:7000", "127.0.0.1"), ("[::1]:7000", "::1"), ("db-1.example:7000", "db-1.example")]
        {
            assert_eq!(HostAddr::parse(text).unwrap().host(), host, "{text}");
        }
    }
}
