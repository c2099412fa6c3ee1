//! Waiting for a quiet cluster to converge, and reading what it holds: the
//! `final` lines of a history.

use causeway_client::{Client, Error};
use causeway_history::FinalState;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Each endpoint's data, once two rounds in a row read the same everywhere
/// (or `limit` has passed: then the last round, which the checker will
/// judge). Endpoints of one DC on several nodes each hold part of the data.
pub async fn final_states(endpoints: &[(u16, SocketAddr)], limit: Duration) -> Result<Vec<FinalState>, Error> {
    let mut clients = Vec::new();
    for &(dc, addr) in endpoints {
        clients.push((dc, Client::connect(addr).await?));
    }
    let started = Instant::now();
    let mut last: Option<Vec<FinalState>> = None;
    loop {
        let mut round = Vec::new();
        for (dc, client) in &mut clients {
            let dump = client.dump().await?;
            let state: BTreeMap<String, String> = dump.entries.iter().map(|(k, v)| (text(k), text(v))).collect();
            round.push(FinalState { dc: *dc, state, partial: dump.partial });
        }
        let converged = converged(&round);
        if converged && last.as_ref() == Some(&round) || started.elapsed() > limit {
            return Ok(round);
        }
        last = Some(round);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether every DC agrees on every key (merging the parts of a DC first).
fn converged(states: &[FinalState]) -> bool {
    let mut per_dc: BTreeMap<u16, BTreeMap<&str, &str>> = BTreeMap::new();
    for s in states {
        per_dc.entry(s.dc).or_default().extend(s.state.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    let mut dcs = per_dc.values();
    let first = dcs.next();
    dcs.all(|d| Some(d) == first)
}
