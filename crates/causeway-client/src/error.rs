//! What can go wrong in a client call.

use crate::wire::{AbortReason, Role, SessionError, WireError};
use std::fmt;
use std::io;
use std::time::Duration;

/// The error of a [`Client`](crate::Client) call.
///
/// Errors the server reports about one request ([`InvalidArgument`],
/// [`NoActiveTransaction`], [`Unavailable`], [`PartitionUnavailable`], …)
/// leave the connection usable. [`Timeout`], [`Disconnected`],
/// [`Protocol`], [`VersionMismatch`] and an [`OutcomeUnknown`] that came
/// from a broken connection end it: every later call on that client
/// returns [`Disconnected`]; connect again (and [resume the
/// session](crate::Client::resume_session) if its causal past matters).
///
/// A commit ends in one of three ways: it committed (`Ok`), it did not
/// ([`Aborted`], [`RefusedEarlier`], [`PartitionUnavailable`], …), or
/// nobody can say ([`OutcomeUnknown`]): its transaction may have taken
/// effect. Only that last one calls for reading the keys to find out.
///
/// [`PartitionUnavailable`]: Error::PartitionUnavailable
/// [`OutcomeUnknown`]: Error::OutcomeUnknown
/// [`Aborted`]: Error::Aborted
/// [`RefusedEarlier`]: Error::RefusedEarlier
///
/// [`InvalidArgument`]: Error::InvalidArgument
/// [`NoActiveTransaction`]: Error::NoActiveTransaction
/// [`Unavailable`]: Error::Unavailable
/// [`Timeout`]: Error::Timeout
/// [`Disconnected`]: Error::Disconnected
/// [`Protocol`]: Error::Protocol
/// [`VersionMismatch`]: Error::VersionMismatch
///
/// An error's text names its cause: `Unreachable` shows the I/O error
/// (`cannot reach 127.0.0.1:7100: Connection refused (os error 111)`), so
/// printing an error is enough. For that reason no variant returns its
/// cause from [`source`](std::error::Error::source) as well: a printer that
/// walks the chain (`anyhow`'s `{:#}`) would show it twice. The I/O error
/// itself is in the variant's `source` field.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No TCP connection could be made to the server.
    Unreachable {
        /// The address as given to [`Client::connect`](crate::Client::connect).
        addr: String,
        /// Why the connection failed.
        source: io::Error,
    },
    /// Something answers at the address, but not as a Causeway server does
    /// (another service's port, such as a server's metrics endpoint).
    NotCauseway {
        /// The address as given to [`Client::connect`](crate::Client::connect).
        addr: String,
        /// What happened at the handshake.
        detail: String,
    },
    /// The TLS handshake with the server failed: its certificate is not of
    /// the CA given, does not name the host dialed, or the server does not
    /// speak TLS.
    Tls {
        /// The address as given to [`Client::connect`](crate::Client::connect).
        addr: String,
        /// What went wrong.
        detail: String,
    },
    /// The server did not answer in time. The connection is closed.
    Timeout {
        /// The operation that timed out (`connect`, `hello`, `read`, `commit`, …).
        what: &'static str,
        /// How long the client waited.
        after: Duration,
    },
    /// The connection is closed, or was closed by an earlier error.
    Disconnected,
    /// An argument is invalid (an empty key, …); the client or the server found it.
    InvalidArgument(String),
    /// A key, a value or a request is over the server's [limits](crate::wire::Limits).
    TooLarge {
        /// What is too large (`key`, `value`, `keys in one read`, `request`, …).
        what: String,
        /// Its size (bytes, or a count for `keys in one read`).
        size: u64,
        /// The largest size allowed.
        limit: u64,
    },
    /// The call needs a running transaction; call [`begin`](crate::Client::begin) first.
    NoActiveTransaction,
    /// The call needs no running transaction; commit or abort it first.
    TransactionActive,
    /// The coordinator no longer knows the transaction (it may have expired); it is gone.
    UnknownTransaction,
    /// The transaction was aborted at its commit because one of its
    /// operations had been refused (`cause`): committing the rest would
    /// have applied part of it. It is over.
    RefusedEarlier {
        /// Why the first refused operation was refused.
        cause: String,
    },
    /// An answer of the server is larger than one frame may be: the request
    /// was served, its answer lost. Ask for less.
    AnswerTooLarge {
        /// The answer's size in bytes.
        size: u64,
        /// The frame limit in bytes.
        limit: u64,
    },
    /// The session token is malformed, or from another DC or cluster.
    BadToken(String),
    /// The server cannot serve the request now (its DC's partitions are
    /// unreachable, it is shutting down, …); retrying later may succeed.
    Unavailable(String),
    /// The request needs a partition whose replica in this DC is down (the
    /// server cannot reach the node that holds it), and was refused at
    /// once rather than left to wait. Nothing of the request took effect: a
    /// read returned nothing (and, inside a transaction, leaves it unable
    /// to commit, as any failed read does); a commit aborted its
    /// transaction. Requests that need only other partitions still serve;
    /// retrying later may succeed. The connection stays usable.
    PartitionUnavailable {
        /// The DC the session lives in.
        dc: u16,
        /// The partition that cannot be reached (the first, if several).
        partition: u32,
        /// The node that holds it.
        node: String,
    },
    /// A commit was sent, but whether it took effect is not known: the
    /// coordinator could not confirm it (the server said so), or the
    /// connection broke or timed out while the commit was in flight. The
    /// transaction may have committed — under a protocol without atomic
    /// commits (EC) even in part — or not at all; read its keys to find
    /// out. It is over either way. When it came from a broken connection
    /// (`connection_lost`) the connection is closed, as after
    /// [`Disconnected`](Error::Disconnected) or [`Timeout`](Error::Timeout):
    /// connect again.
    OutcomeUnknown {
        /// Why: what the server said, or how the connection failed.
        cause: String,
        /// The connection ended with this error ([`Error::is_fatal`]).
        connection_lost: bool,
    },
    /// The server speaks another version of the wire protocol. The connection is closed.
    VersionMismatch {
        /// The server's [`WIRE_VERSION`](crate::wire::WIRE_VERSION).
        server: u32,
        /// This client's [`WIRE_VERSION`](crate::wire::WIRE_VERSION).
        client: u32,
    },
    /// The server refused the login: unknown user or wrong password (said
    /// alike), no credentials where the cluster admits no anonymous client,
    /// or too many failed logins from this address lately. The connection
    /// is closed.
    Unauthenticated(String),
    /// The connection's role may not make this request (a write under
    /// `read`, an operator hook under `write`). Nothing of it took effect;
    /// a refused write leaves its transaction unable to commit. The
    /// connection stays usable.
    Forbidden {
        /// The request refused (`Write`, `Dump`, …).
        request: String,
        /// The least role that may make it.
        need: Role,
        /// This connection's role.
        have: Role,
    },
    /// The store aborted the transaction (a conflict under a serializable
    /// protocol); it is over, and another attempt may commit.
    Aborted(AbortReason),
    /// Any other error the server reported.
    Server(WireError),
    /// The server said something this client does not understand (a bad
    /// frame, an answer to the wrong request). The connection is closed.
    Protocol(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unreachable { addr, source } => write!(f, "cannot reach {addr}: {source}"),
            Error::NotCauseway { addr, detail } => write!(f, "{addr} is not a Causeway server: {detail}"),
            Error::Tls { addr, detail } => write!(f, "TLS with {addr} failed: {detail}"),
            Error::Timeout { what, after } => write!(f, "{what} timed out after {after:?}"),
            Error::Disconnected => f.write_str("the connection to the server is closed"),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::TooLarge { what, size, limit } => write!(f, "{what}: {size}, over the limit of {limit}"),
            Error::NoActiveTransaction => f.write_str("no transaction is active; call begin first"),
            Error::TransactionActive => f.write_str("a transaction is already active; commit or abort it first"),
            Error::UnknownTransaction => {
                f.write_str("the coordinator does not know this transaction (it may have expired)")
            }
            Error::RefusedEarlier { cause } => {
                write!(f, "the transaction was aborted, not committed: an operation in it was refused ({cause})")
            }
            Error::AnswerTooLarge { size, limit } => {
                write!(f, "the server's answer is {size} bytes, over the frame limit of {limit} bytes")
            }
            Error::BadToken(s) => write!(f, "invalid session token: {s}"),
            Error::Unavailable(s) => write!(f, "server unavailable: {s}"),
            Error::PartitionUnavailable { dc, partition, node } => {
                write!(f, "partition {partition} of DC {dc} is unavailable: its node {node} cannot be reached")
            }
            Error::OutcomeUnknown { cause, .. } => write!(
                f,
                "the outcome of the commit is unknown ({cause}): it may have taken effect, in whole or in part, or not at all"
            ),
            Error::VersionMismatch { server, client } => {
                write!(f, "wire version mismatch: server speaks {server}, client {client}")
            }
            Error::Unauthenticated(why) => write!(f, "login refused: {why}"),
            Error::Forbidden { request, need, have } => {
                write!(f, "{request} needs the role {need}; this connection has {have}")
            }
            Error::Aborted(reason) => write!(f, "{reason}"),
            Error::Server(e) => write!(f, "server error: {e}"),
            Error::Protocol(s) => write!(f, "protocol error: {s}"),
        }
    }
}

/// No `source`: each error's text already names its cause (see [`Error`]).
impl std::error::Error for Error {}

impl Error {
    /// Whether the store aborted a sound transaction that may commit if run
    /// again: a conflict found by certification (a serializable protocol,
    /// Geo-SDUR), or a snapshot that outlived what the store keeps. The
    /// transaction is over; [`Client::retry`](crate::Client::retry) runs it
    /// again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Aborted(AbortReason::Conflict(_) | AbortReason::Expired(_)))
    }

    /// Whether this error ended the connection: every later call on the client fails.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Unreachable { .. }
                | Error::NotCauseway { .. }
                | Error::Timeout { .. }
                | Error::Disconnected
                | Error::VersionMismatch { .. }
                | Error::Unauthenticated(_)
                | Error::Protocol(_)
                | Error::OutcomeUnknown { connection_lost: true, .. }
                | Error::Server(WireError::Malformed(_) | WireError::HelloExpected)
        )
    }
}

impl Error {
    /// A commit was in flight when the connection failed with `self`
    /// (`Timeout`, `Disconnected`): its outcome is unknown. Other errors
    /// pass unchanged.
    pub(crate) fn commit_in_flight(self) -> Error {
        match self {
            e @ (Error::Timeout { .. } | Error::Disconnected) => {
                let cause = match e {
                    Error::Disconnected => "the connection broke while the commit was in flight".to_string(),
                    e => format!("{e} while the commit was in flight"),
                };
                Error::OutcomeUnknown { cause, connection_lost: true }
            }
            e => e,
        }
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::VersionMismatch { server, client } => Error::VersionMismatch { server, client },
            WireError::Session(e) => e.into(),
            WireError::BadToken(s) => Error::BadToken(s),
            WireError::Unavailable(s) => Error::Unavailable(s),
            WireError::PartitionUnavailable { dc, partition, node } => {
                Error::PartitionUnavailable { dc, partition, node }
            }
            WireError::AnswerTooLarge { size, limit } => Error::AnswerTooLarge { size, limit },
            WireError::Unauthenticated(why) => Error::Unauthenticated(why),
            WireError::Forbidden { request, need, have } => Error::Forbidden { request, need, have },
            e @ (WireError::HelloExpected | WireError::Malformed(_)) => Error::Server(e),
        }
    }
}

impl From<SessionError> for Error {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::NoActiveTransaction => Error::NoActiveTransaction,
            SessionError::TransactionActive => Error::TransactionActive,
            SessionError::UnknownTransaction => Error::UnknownTransaction,
            SessionError::InvalidArgument(s) => Error::InvalidArgument(s),
            SessionError::TooLarge { what, size, limit } => Error::TooLarge { what, size, limit },
            SessionError::RefusedEarlier { cause } => Error::RefusedEarlier { cause },
            SessionError::OutcomeUnknown => Error::OutcomeUnknown {
                cause: "the coordinator could not confirm the commit in time".into(),
                connection_lost: false,
            },
            e @ SessionError::OperationInProgress => Error::Server(WireError::Session(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_error_names_its_cause_once() {
        let e = Error::Unreachable {
            addr: "127.0.0.1:1".into(),
            source: io::Error::new(io::ErrorKind::ConnectionRefused, "Connection refused"),
        };
        assert_eq!(e.to_string(), "cannot reach 127.0.0.1:1: Connection refused");
        assert!(e.source().is_none(), "the text already shows it");
    }

    #[test]
    fn an_outcome_unknown_is_fatal_only_when_the_connection_broke() {
        let said: Error = WireError::Session(SessionError::OutcomeUnknown).into();
        assert!(matches!(said, Error::OutcomeUnknown { connection_lost: false, .. }), "{said:?}");
        assert!(!said.is_fatal(), "the server said it; the connection lives on");
        let timeout = Error::Timeout { what: "commit", after: Duration::from_secs(10) };
        for broken in [Error::Disconnected, timeout] {
            let e = broken.commit_in_flight();
            assert!(matches!(e, Error::OutcomeUnknown { connection_lost: true, .. }), "{e:?}");
            assert!(e.is_fatal());
            assert!(e.to_string().contains("may have taken effect"), "{e}");
        }
        // What the server answered stays what it is.
        let aborted = Error::Aborted(AbortReason::Unavailable("a partition of DC 0 did not answer in time".into()))
            .commit_in_flight();
        assert!(matches!(aborted, Error::Aborted(_)));
    }

    #[test]
    fn a_partition_unavailable_names_the_partition_and_keeps_the_connection() {
        let e: Error = WireError::PartitionUnavailable { dc: 1, partition: 3, node: "b3".into() }.into();
        assert!(matches!(e, Error::PartitionUnavailable { dc: 1, partition: 3, ref node } if node == "b3"), "{e:?}");
        assert!(!e.is_fatal());
        assert_eq!(e.to_string(), "partition 3 of DC 1 is unavailable: its node b3 cannot be reached");
    }
}
