//! What can go wrong in a client call.

use crate::wire::{AbortReason, SessionError, WireError};
use std::fmt;
use std::io;
use std::time::Duration;

/// The error of a [`Client`](crate::Client) call.
///
/// Errors the server reports about one request ([`InvalidArgument`],
/// [`NoActiveTransaction`], [`Unavailable`], …) leave the connection
/// usable. [`Timeout`], [`Disconnected`], [`Protocol`] and
/// [`VersionMismatch`] end it: every later call on that client returns
/// [`Disconnected`]; connect again (and [resume the
/// session](crate::Client::resume_session) if its causal past matters).
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
    /// The server speaks another version of the wire protocol. The connection is closed.
    VersionMismatch {
        /// The server's [`WIRE_VERSION`](crate::wire::WIRE_VERSION).
        server: u32,
        /// This client's [`WIRE_VERSION`](crate::wire::WIRE_VERSION).
        client: u32,
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
            Error::VersionMismatch { server, client } => {
                write!(f, "wire version mismatch: server speaks {server}, client {client}")
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
    /// Whether this error ended the connection: every later call on the client fails.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Unreachable { .. }
                | Error::NotCauseway { .. }
                | Error::Timeout { .. }
                | Error::Disconnected
                | Error::VersionMismatch { .. }
                | Error::Protocol(_)
                | Error::Server(WireError::Malformed(_) | WireError::HelloExpected)
        )
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::VersionMismatch { server, client } => Error::VersionMismatch { server, client },
            WireError::Session(e) => e.into(),
            WireError::BadToken(s) => Error::BadToken(s),
            WireError::Unavailable(s) => Error::Unavailable(s),
            WireError::AnswerTooLarge { size, limit } => Error::AnswerTooLarge { size, limit },
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
            e @ (SessionError::OperationInProgress | SessionError::OutcomeUnknown) => {
                Error::Server(WireError::Session(e))
            }
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
}
