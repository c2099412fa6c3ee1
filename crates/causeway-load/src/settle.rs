//! Waiting for a quiet cluster to converge, and reading what it holds: the
//! `final` lines of a history.

use causeway_client::{Client, ClientOptions, Error};
use causeway_history::FinalState;
use causeway_protocol::topology::fnv1a64;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Each DC's data under the keys that start with `prefix` (a run's own, in
/// a cluster that may hold others), once two rounds in a row read the same
/// everywhere (or `limit` has passed: then the last round, which the
/// checker will judge).
/// Endpoints of one DC on several nodes each hold part of its data; their
/// dumps are merged into one final line per DC, partial if some partition
/// of the key space was not covered — as when a node is down (an endpoint
/// that cannot be reached is left out; an error only if none can be), or
/// under partial replication.
pub async fn final_states(
    endpoints: &[(u16, SocketAddr)],
    prefix: &str,
    limit: Duration,
    connect: &ClientOptions,
) -> Result<Vec<FinalState>, Error> {
    let options = connect.clone();
    // An endpoint that cannot be reached (its node is down) is left out:
    // its DC's line is partial, or missing if no node of the DC answers.
    let mut clients = Vec::new();
    let mut unreachable = None;
    for &(dc, addr) in endpoints {
        match Client::connect_with(addr, options.clone()).await {
            Ok(client) => clients.push((dc, Some(client))),
            Err(e) => unreachable = Some(e),
        }
    }
    if let (true, Some(e)) = (clients.is_empty(), unreachable) {
        return Err(e);
    }
    let started = Instant::now();
    let mut last: Option<Vec<FinalState>> = None;
    loop {
        let mut per_dc: BTreeMap<u16, DcParts> = BTreeMap::new();
        for (dc, slot) in &mut clients {
            let Some(client) = slot else { continue };
            let dump = match client.dump().await {
                Ok(dump) => dump,
                // Its node died since: left out from now on.
                Err(e) if e.is_fatal() => {
                    *slot = None;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (state, covered, count) = per_dc.entry(*dc).or_default();
            let mine = dump.entries.iter().filter(|(k, _)| k.starts_with(prefix.as_bytes()));
            state.extend(mine.map(|(k, v)| (text(k), text(v))));
            covered.extend(&dump.partitions);
            *count = dump.cluster_partitions;
        }
        let converged = converged(&per_dc);
        let round: Vec<FinalState> = per_dc
            .into_iter()
            .map(|(dc, (state, covered, count))| FinalState { dc, state, partial: (covered.len() as u32) < count })
            .collect();
        if converged && last.as_ref() == Some(&round) || started.elapsed() > limit {
            return Ok(round);
        }
        last = Some(round);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the endpoints of one DC returned: data, partitions covered, partitions of the key space.
type DcParts = (BTreeMap<String, String>, BTreeSet<u32>, u32);

/// Whether every DC agrees on every key it holds: a key one DC lists, every
/// other DC covering its partition lists with the same value.
fn converged(per_dc: &BTreeMap<u16, DcParts>) -> bool {
    per_dc.values().all(|(a, _, count)| {
        a.iter().all(|(k, v)| {
            let partition = (fnv1a64(k.as_bytes()) % u64::from((*count).max(1))) as u32;
            per_dc.values().all(|(b, covered, _)| !covered.contains(&partition) || b.get(k) == Some(v))
        })
    })
}
