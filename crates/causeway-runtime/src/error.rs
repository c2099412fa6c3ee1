//! Why a node could not start.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no node named {0:?} in the cluster config")]
    UnknownNode(String),
    #[error("cannot listen for {what} on {addr}")]
    Bind { what: &'static str, addr: SocketAddr, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
    /// The node's data directory cannot be used: another cluster's or
    /// node's, damaged, or unreadable.
    #[error("{0}")]
    Storage(String),
}
