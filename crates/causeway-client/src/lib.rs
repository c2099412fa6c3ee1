//! The async Rust client of Causeway, a geo-replicated key-value store with
//! transactions under Transactional Causal Consistency.
//!
//! A [`Client`] is one TCP connection to a server of one data center (DC),
//! and one *session*: it runs one transaction at a time, and each
//! transaction sees everything the session wrote or saw before, and
//! everything those writes depended on. Reads never block on other DCs;
//! writes become visible atomically at commit.
//!
//! # A read-write transaction
//!
//! ```no_run
//! use causeway_client::{Client, Error};
//!
//! # async fn transfer() -> Result<(), Error> {
//! let mut client = Client::connect("127.0.0.1:7100").await?;
//! client.begin().await?;
//! // Many keys in one round trip; `None` for a key without a value.
//! let balances = client.read(&["alice", "bob"]).await?;
//! let balance = |v: &Option<causeway_client::Bytes>| -> i64 {
//!     v.as_deref().and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0)
//! };
//! let (alice, bob) = (balance(&balances[0]), balance(&balances[1]));
//! // Writes are buffered until commit (and pipelined: no round trip each).
//! client.write("alice", (alice - 10).to_string()).await?;
//! client.write("bob", (bob + 10).to_string()).await?;
//! let stamp = client.commit().await?;
//! println!("committed at {stamp:?}");
//! # Ok(())
//! # }
//! ```
//!
//! # A read-only transaction
//!
//! Between transactions, a read-only transaction reads a causal snapshot in
//! one round trip, with nothing to commit:
//!
//! ```no_run
//! # async fn ro(client: &mut causeway_client::Client) -> Result<(), causeway_client::Error> {
//! let values = client.read_only(&["alice", "bob"]).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Carrying a session to another connection
//!
//! A [`SessionToken`] holds a session's causal state. Export it between
//! transactions, and resume it on another connection to the same DC — after
//! a reconnect, or in another process — so that the new connection sees
//! what the old one wrote:
//!
//! ```no_run
//! use causeway_client::{Client, SessionToken};
//!
//! # async fn resume() -> Result<(), causeway_client::Error> {
//! let mut first = Client::connect("127.0.0.1:7100").await?;
//! first.begin().await?;
//! first.write("greeting", "hello").await?;
//! first.commit().await?;
//! let token: SessionToken = first.export_session().await?;
//! let text = token.to_string(); // hex, to pass around as text
//!
//! let mut second = Client::connect("127.0.0.1:7100").await?;
//! second.resume_session(&text.parse()?).await?;
//! let greeting = second.read_only(&["greeting"]).await?;
//! assert_eq!(greeting[0].as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # Serializable transactions, and retrying them
//!
//! Under a serializable protocol (Geo-SDUR, `protocol = "sdur"`) a commit
//! may fail with [`Error::Aborted`] for a
//! [conflict](wire::AbortReason::Conflict): certification found a
//! concurrent transaction it could not be ordered with. The transaction is
//! over and nothing of it took effect; run it again —
//! [`Client::retry`] does, with a growing pause between attempts. Under
//! TCC (the default, Wren) two such transactions both commit and the last
//! writer wins instead.
//!
//! # Errors
//!
//! Every call returns a typed [`Error`]: [`Error::Unreachable`],
//! [`Error::Timeout`], [`Error::InvalidArgument`],
//! [`Error::NoActiveTransaction`], … Arguments are checked against the
//! server's [limits](wire::Limits) before anything is sent. After a timeout
//! or a lost connection the client is unusable ([`Error::is_fatal`]):
//! connect again.
//!
//! # Logging in
//!
//! A cluster admits clients without credentials only when its config says
//! so (`[auth] anonymous = "…"`); otherwise log in as one of its users, over
//! TLS so that the password is not sent in the clear:
//!
//! ```no_run
//! use causeway_client::{Client, ClientOptions, ClientTls, Credentials};
//!
//! # async fn login() -> Result<(), Box<dyn std::error::Error>> {
//! let options = ClientOptions {
//!     tls: Some(ClientTls::from_ca_file("certs/ca.pem")?),
//!     credentials: Some(Credentials { user: "alice".into(), password: std::env::var("CAUSEWAY_PASSWORD")? }),
//!     ..ClientOptions::default()
//! };
//! let client = Client::connect_with("db-1.example:7100", options).await?;
//! println!("logged in as {}", client.server().role);
//! # Ok(())
//! # }
//! ```
//!
//! A refused login is [`Error::Unauthenticated`]; a request beyond the
//! connection's [`Role`] is [`Error::Forbidden`].
//!
//! Two errors come from failures of the cluster rather than of the call:
//! [`Error::PartitionUnavailable`] — the request needs a partition whose
//! replica in this DC is down; it was refused at once, nothing of it took
//! effect, and other partitions still serve — and [`Error::OutcomeUnknown`]
//! — a commit was sent but nobody can say whether it took effect (the
//! coordinator could not confirm it, or the connection broke or timed out
//! while it was in flight).
//!
//! The [`wire`] module is the protocol itself, for servers and other clients.

mod client;
mod error;
mod tls;
mod token;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use bytes::Bytes;
/// The wire protocol itself, for servers and other clients.
pub use causeway_wire as wire;
pub use causeway_wire::{Credentials, Dump, Limits, Role, Stamp, Welcome};
pub use client::{Client, ClientOptions};
pub use error::Error;
pub use tls::ClientTls;
pub use token::SessionToken;
