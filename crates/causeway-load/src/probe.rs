//! A connection that reads a node's counters and stable times, and lives
//! through the node's death: a broken connection is made again (the node
//! may have restarted), at most every [`RETRY_AFTER`] so that a node that
//! does not answer does not hold up every reading; a node that cannot be
//! reached reads as nothing, so a run goes on while it is down.

use causeway_client::wire::NodeStats;
use causeway_client::{Client, ClientOptions, Error};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long a probe whose node could not be reached waits before it tries
/// again.
pub const RETRY_AFTER: Duration = Duration::from_millis(500);

pub struct Probe {
    addr: SocketAddr,
    options: ClientOptions,
    client: Option<Client>,
    /// When to try connecting again, after a failed attempt.
    retry_at: Option<Instant>,
}

impl Probe {
    /// Connects to the node at `addr`; connecting first keeps errors out of
    /// the run.
    pub async fn connect(addr: SocketAddr, connect: &ClientOptions) -> Result<Probe, Error> {
        let options = ClientOptions { name: "probe".into(), ..connect.clone() };
        let client = Client::connect_with(addr, options.clone()).await?;
        Ok(Probe { addr, options, client: Some(client), retry_at: None })
    }

    /// One probe per node (one client address per node).
    pub async fn connect_all(nodes: &[SocketAddr], connect: &ClientOptions) -> Result<Vec<Probe>, Error> {
        let mut probes = Vec::with_capacity(nodes.len());
        for &addr in nodes {
            probes.push(Probe::connect(addr, connect).await?);
        }
        Ok(probes)
    }

    /// The node's counters (`waited`: with the transactions whose reads
    /// waited); `None` if the node cannot be reached now. An error the node
    /// answered with is passed on.
    pub async fn stats(&mut self, waited: bool) -> Result<Option<NodeStats>, Error> {
        if let Some(client) = &mut self.client {
            match client.stats(waited).await {
                Ok(stats) => return Ok(Some(stats)),
                Err(e) if !e.is_fatal() => return Err(e),
                Err(_) => self.client = None,
            }
        }
        // Not connected, or the connection just broke: once more, unless
        // an attempt failed a moment ago.
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return Ok(None);
        }
        let stats = match Client::connect_with(self.addr, self.options.clone()).await {
            Ok(client) => self.client.insert(client).stats(waited).await,
            Err(e) => Err(e),
        };
        match stats {
            Ok(stats) => {
                self.retry_at = None;
                Ok(Some(stats))
            }
            Err(e) if !e.is_fatal() => Err(e),
            Err(_) => {
                self.client = None;
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                Ok(None)
            }
        }
    }
}
