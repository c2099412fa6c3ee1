//! What a server answers when a request fails.

use crate::role::Role;
use causeway_protocol::SessionError;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Errors a server reports; the connection stays usable unless said otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum WireError {
    /// The connection is closed after this one.
    #[error("wire version mismatch: server speaks {server}, client {client}")]
    VersionMismatch { server: u32, client: u32 },
    /// The connection is closed after this one.
    #[error("the first request must be Hello")]
    HelloExpected,
    /// The hello's credentials were refused (unknown user or wrong
    /// password, said alike), or it had none and the cluster admits no
    /// anonymous client, or too many logins failed from this address
    /// lately. The connection is closed after this one.
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// The connection's role may not make this request; nothing of it took
    /// effect (a refused write leaves its transaction unable to commit).
    #[error("{request} needs the role {need}; this connection has {have}")]
    Forbidden { request: String, need: Role, have: Role },
    /// What the session said of the request: no transaction, a key too
    /// large, an unknown transaction, …
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("invalid session token: {0}")]
    BadToken(String),
    /// The connection is closed after this one.
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("server unavailable: {0}")]
    Unavailable(String),
    /// The request needs partition `partition` of DC `dc`, whose replica
    /// lives on another node (`node`) this server cannot reach now: it was
    /// refused at once rather than left to wait. Nothing of it took effect;
    /// a commit refused so aborted its transaction. Other partitions still
    /// serve; retrying later may succeed.
    #[error("partition {partition} of DC {dc} is unavailable: its node {node} cannot be reached")]
    PartitionUnavailable { dc: u16, partition: u32, node: String },
    /// The answer would not fit in one frame; the request was served but
    /// its answer is lost. Ask for less.
    #[error("the answer is {size} bytes, over the frame limit of {limit} bytes")]
    AnswerTooLarge { size: u64, limit: u64 },
}

impl WireError {
    /// An invalid argument, as the session would say it.
    pub fn invalid(why: impl Into<String>) -> WireError {
        WireError::Session(SessionError::InvalidArgument(why.into()))
    }
}
