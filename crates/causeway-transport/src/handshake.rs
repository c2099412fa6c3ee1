//! The handshake: the first frame each way on a connection.
//!
//! Body layout, both ways: magic `"CWTP"`, wire version (u32 big-endian),
//! then a postcard [`Hello`] (dialer) or [`Reply`] (acceptor). Public so tools
//! and tests can speak the protocol by hand.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use thiserror::Error;

use crate::NodeId;

/// Bumped on any incompatible change of the handshake, batch or ack frames.
pub const TRANSPORT_VERSION: u32 = 6;

pub const MAGIC: [u8; 4] = *b"CWTP";

/// The largest handshake frame accepted. Small, so a stranger cannot make us
/// buffer megabytes before we know who it is.
pub const MAX_HANDSHAKE_BYTES: usize = 4096;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

const HEAD: usize = MAGIC.len() + 4;

/// The dialer's first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub cluster: String,
    /// What both ends must agree on besides the cluster name, as named
    /// values ([`crate::TransportConfig::terms`]).
    pub terms: Vec<(String, String)>,
    pub node: NodeId,
    /// Distinguishes process lifetimes of `node`; larger is newer.
    pub incarnation: u64,
    /// The first sequence number the dialer has not seen acknowledged.
    pub base: u64,
    /// The dialer dropped messages the acceptor had not acknowledged (it
    /// shed its backlog): `base` may lie past what the acceptor expects,
    /// and the acceptor tells its user of the gap.
    pub skipped: bool,
}

/// The acceptor's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Send from this sequence number on; everything below was delivered.
    /// `incarnation` is the acceptor's: a dialer that sees it change knows
    /// the process it was sending to died.
    Accept { next: u64, incarnation: u64 },
    /// The acceptor closes the connection after this.
    Refuse(Refusal),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum Refusal {
    #[error("wire version {theirs} is not ours ({ours})")]
    Version { ours: u32, theirs: u32 },
    /// Ours is not named: a caller that does not know it learns nothing.
    #[error("cluster {theirs:?} is not ours")]
    Cluster { theirs: String },
    /// A term both ends must agree on differs (`None`: that end does not
    /// name it).
    #[error("{what} differs: the refusing node has {}, the connecting node {}", shown(ours), shown(theirs))]
    Terms { what: String, ours: Option<String>, theirs: Option<String> },
    #[error("node {0} is not a peer of this node")]
    UnknownNode(NodeId),
    /// The incarnation seen is not named: it is not the caller's to learn.
    #[error("incarnation {theirs} of node {node} is older than one we have seen")]
    Stale { node: NodeId, theirs: u64 },
    /// Under TLS: the certificate the caller presented does not name the
    /// node its hello claims to be.
    #[error("the certificate presented does not name node {0}")]
    NotThatNode(NodeId),
    #[error("base {base} is past {next}, the next message we expect")]
    Sequence { base: u64, next: u64 },
}

fn shown(term: &Option<String>) -> String {
    match term {
        Some(v) => format!("{v:?}"),
        None => "none".into(),
    }
}

/// The first term on which `ours` and `theirs` differ, as a refusal.
pub fn compare_terms(ours: &[(String, String)], theirs: &[(String, String)]) -> Option<Refusal> {
    let get = |terms: &[(String, String)], what: &str| terms.iter().find(|(k, _)| k == what).map(|(_, v)| v.clone());
    let mut names: Vec<&String> = ours.iter().chain(theirs).map(|(k, _)| k).collect();
    names.sort();
    names.dedup();
    names.into_iter().find_map(|what| {
        let (o, t) = (get(ours, what), get(theirs, what));
        (o != t).then(|| Refusal::Terms { what: what.clone(), ours: o, theirs: t })
    })
}

#[derive(Debug, Error)]
pub enum HandshakeError {
    #[error("not a Causeway transport handshake")]
    BadMagic,
    #[error("peer speaks wire version {theirs}, we speak {TRANSPORT_VERSION}")]
    Version { theirs: u32 },
    #[error("malformed handshake: {0}")]
    Malformed(postcard::Error),
    #[error("trailing bytes after the handshake")]
    Trailing,
}

/// A whole handshake frame, length prefix included, at the given wire version.
pub fn encode_frame<T: Serialize>(version: u32, body: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    crate::frame::encode_into(&mut out, body).expect("handshake types always encode");
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// Decodes a handshake frame body (after the length prefix) of our version.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, HandshakeError> {
    if body.len() < HEAD || body[..MAGIC.len()] != MAGIC {
        return Err(HandshakeError::BadMagic);
    }
    let version = u32::from_be_bytes(body[MAGIC.len()..HEAD].try_into().expect("4 bytes"));
    if version != TRANSPORT_VERSION {
        return Err(HandshakeError::Version { theirs: version });
    }
    let (value, rest) = postcard::take_from_bytes(&body[HEAD..]).map_err(HandshakeError::Malformed)?;
    if !rest.is_empty() {
        return Err(HandshakeError::Trailing);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_checks_head() {
        let terms = vec![("protocol".to_string(), "wren".to_string())];
        let hello = Hello { cluster: "c".into(), terms, node: 3, incarnation: 77, base: 5, skipped: false };
        let frame = encode_frame(TRANSPORT_VERSION, &hello);
        assert_eq!(u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
        assert_eq!(decode::<Hello>(&frame[4..]).unwrap(), hello);

        let other = encode_frame(TRANSPORT_VERSION + 1, &hello);
        assert!(
            matches!(decode::<Hello>(&other[4..]), Err(HandshakeError::Version { theirs }) if theirs == TRANSPORT_VERSION + 1)
        );
        assert!(matches!(decode::<Hello>(b"GET / HTTP/1.1"), Err(HandshakeError::BadMagic)));
        assert!(matches!(decode::<Hello>(&frame[4..frame.len() - 1]), Err(HandshakeError::Malformed(_))));
        let mut long = frame[4..].to_vec();
        long.push(0);
        assert!(matches!(decode::<Hello>(&long), Err(HandshakeError::Trailing)));
    }

    #[test]
    fn terms_that_differ_are_named_with_both_sides() {
        let t = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let ours = t(&[("protocol", "wren"), ("partitions", "4")]);
        assert_eq!(compare_terms(&ours, &ours), None);
        let why = compare_terms(&ours, &t(&[("protocol", "cure"), ("partitions", "4")])).unwrap();
        assert_eq!(why.to_string(), r#"protocol differs: the refusing node has "wren", the connecting node "cure""#);
        let why = compare_terms(&ours, &t(&[("protocol", "wren")])).unwrap();
        assert_eq!(why.to_string(), r#"partitions differs: the refusing node has "4", the connecting node none"#);
    }
}
