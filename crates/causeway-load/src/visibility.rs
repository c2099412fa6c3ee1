//! Update visibility latency: from the moment a client learns its commit to
//! the moment new transactions in a DC can read it.
//!
//! A write from DC `o` with commit time `ts` is visible in DC `d` once every
//! replica in `d` of the partitions it wrote has `visible_upto(o) ≥ ts`
//! (Wren: LST for `d = o`, RST otherwise). Under partial replication a
//! partition `d` does not hold is read at its serving replica in another
//! DC ([`Topology::serving_dc`]), so that replica's is the one that counts
//! (BPR: what it has installed) — unless the snapshot is one DC-wide time
//! taken at `d`'s coordinators (PaRiS's UST, [`Witness::OwnReplicas`]):
//! then `d`'s own replicas say it for every partition. Replicas publish those stable
//! times; this tracker asks every node for them over the client wire
//! ([`causeway_client::Client::stats`]), so it measures an embedded
//! cluster and separate server processes alike. A reading carries each
//! replica's latest changes with the wall-clock time each was published
//! ([`causeway_client::wire::ReplicaReading::changes`]: at least 0.5 ms
//! apart, reaching back at least 16 ms): a write became visible at the
//! first change that covers it, so polls every 10 ms (the servers answer
//! each) time it to within 0.5 ms. A poll later than the changes reach
//! leaves a gap; a write that became visible in it is timed by the first
//! change kept after it, up to the gap late. Where no change says it (a
//! node that keeps none), the poll that first shows it does. Times are
//! clamped between the commit and the poll, so a node's clock that
//! differs from this process's (a cluster on other machines) cannot give
//! a negative or future time.

use crate::probe::Probe;
use causeway_client::wire::VisibleChange;
use causeway_client::Error;
use causeway_protocol::{DcId, PartitionId, Topology};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Whose stable times say what a DC's new transactions can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Witness {
    /// For each partition, the replica that serves it for the DC: its
    /// own, or its preferred one in another DC.
    ServingReplicas,
    /// The DC's own replicas, for every partition: the snapshot is one
    /// time for the whole DC, taken at its coordinators (PaRiS).
    OwnReplicas,
}

/// A commit to follow.
#[derive(Clone, Debug)]
pub struct Commit {
    pub ts: u64,
    pub origin: DcId,
    pub partitions: Vec<u32>,
    pub at: Instant,
}

/// Visibility latencies in microseconds.
pub struct Visibility {
    pub local: Histogram<u64>,
    pub remote: Histogram<u64>,
    /// Commits still not visible everywhere when the tracker stopped.
    pub unfinished: u64,
}

/// A commit not yet visible in every DC.
struct Unseen {
    commit: Commit,
    /// When the client learned it, on the wall clock (µs since the epoch).
    at_us: u64,
    /// DCs where it is not yet visible.
    missing: Vec<DcId>,
}

/// Changes kept per replica at most (a commit that stays pending longer
/// than they reach back, as through an outage, is timed by the oldest
/// change kept that covers it).
const MAX_HISTORY: usize = 4096;

fn unix_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// When `history` (one replica's changes, oldest first; stable times
/// only grow) first shows `origin`'s writes up to `ts` visible: the first
/// change that covers `ts` (if it is the oldest kept, the crossing was
/// then or earlier). `None` where no change kept covers it.
fn crossing(history: Option<&VecDeque<VisibleChange>>, origin: usize, ts: u64) -> Option<u64> {
    let h = history?;
    let first = h.partition_point(|c| c.visible_upto.get(origin).is_none_or(|&v| v < ts));
    h.get(first).filter(|c| c.visible_upto.get(origin).is_some()).map(|c| c.at_us)
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Follows commits from `commits` until the channel closes and every commit
/// is visible everywhere (or `drain` has passed since the close), asking
/// `probes` (one per node) for stable times every `interval` (the cost of
/// the measurement, a request to every node each time; its resolution
/// too for nodes that keep no changes, and past the changes' reach).
pub async fn track(
    mut probes: Vec<Probe>,
    topology: Topology,
    witness: Witness,
    mut commits: mpsc::UnboundedReceiver<Commit>,
    interval: Duration,
    drain: Duration,
) -> Result<Visibility, Error> {
    let dcs = topology.dc_count();
    // `reads_at[dc][partition]`: the replica whose stable times say what
    // `dc` sees of the partition (under `OwnReplicas`, only those `dc`
    // holds, and what they say holds for every partition). Fixed for the
    // run: worked out once, not per tick and commit.
    let reads_at: Vec<Vec<Option<(DcId, u32)>>> = topology
        .dcs()
        .map(|dc| {
            let at = |p: PartitionId| match witness {
                Witness::ServingReplicas => Some((topology.serving_dc(dc, p), p.0)),
                Witness::OwnReplicas => topology.holds(dc, p).then_some((dc, p.0)),
            };
            topology.partitions().map(at).collect()
        })
        .collect();
    // `visible[(dc, partition)][origin]`, as last read.
    let mut gauges: BTreeMap<(DcId, u32), Vec<u64>> = BTreeMap::new();
    // Each replica's changes of those, oldest first, as far back as a
    // pending commit may need.
    let mut history: BTreeMap<(DcId, u32), VecDeque<VisibleChange>> = BTreeMap::new();
    let mut local = histogram();
    let mut remote = histogram();
    let mut pending: Vec<Unseen> = Vec::new();
    let mut closed_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(interval.max(Duration::from_micros(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        loop {
            match commits.try_recv() {
                Ok(c) => {
                    let missing = (0..dcs).map(DcId).collect();
                    let at_us =
                        unix_us().saturating_sub(Instant::now().saturating_duration_since(c.at).as_micros() as u64);
                    pending.push(Unseen { commit: c, at_us, missing });
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    closed_at.get_or_insert_with(Instant::now);
                    break;
                }
            }
        }
        if !pending.is_empty() {
            let polls = probes.iter_mut().map(|c| c.stats(false));
            for stats in futures_util::future::join_all(polls).await {
                // A node that is down reports nothing until it is back: its
                // replicas keep their last stable times meanwhile.
                let Some(stats) = stats? else { continue };
                for r in stats.replicas {
                    let at = (DcId(r.dc), r.partition);
                    let h = history.entry(at).or_default();
                    let newest = h.back().map_or(0, |c| c.at_us);
                    h.extend(r.changes.into_iter().filter(|c| c.at_us > newest));
                    gauges.insert(at, r.visible_upto);
                }
            }
            // Keep, of each replica's changes, the last one at or before the
            // oldest pending commit and all after it.
            let oldest = pending.iter().map(|p| p.at_us).min().unwrap_or(u64::MAX);
            for h in history.values_mut() {
                while h.len() > MAX_HISTORY || h.len() > 1 && h[1].at_us <= oldest {
                    h.pop_front();
                }
            }
        }
        // `floor[dc][origin]`: what every replica `dc` reads from shows of
        // `origin`. A commit at or below it is visible there whatever it
        // wrote (the common case: one comparison instead of a lookup per
        // partition).
        let mut floor = vec![vec![u64::MAX; usize::from(dcs)]; usize::from(dcs)];
        for (row, witnesses) in floor.iter_mut().zip(&reads_at) {
            for at in witnesses.iter().flatten() {
                match gauges.get(at) {
                    Some(visible) => row.iter_mut().zip(visible).for_each(|(f, &v)| *f = (*f).min(v)),
                    // Not heard from yet: nothing is known visible there.
                    None => row.iter_mut().for_each(|f| *f = 0),
                }
            }
        }
        let now_us = unix_us();
        pending.retain_mut(|p| {
            p.missing.retain(|&dc| {
                let origin = usize::from(p.commit.origin.0);
                let row = reads_at.get(usize::from(dc.0));
                let everywhere = floor.get(usize::from(dc.0)).and_then(|row| row.get(origin)).copied().unwrap_or(0);
                // The replica `dc` reads `part` at.
                let at = |part: u32| row.and_then(|row| row.get(part as usize)).copied().flatten();
                let visible = (everywhere != u64::MAX && p.commit.ts <= everywhere)
                    || witness == Witness::ServingReplicas
                        && p.commit.partitions.iter().all(|&part| {
                            let seen = at(part).and_then(|at| gauges.get(&at)).and_then(|v| v.get(origin));
                            seen.is_some_and(|&v| v >= p.commit.ts)
                        });
                if visible {
                    // When the last of the replicas that decide it covered
                    // it (those of the partitions it wrote, or every one
                    // the DC reads from); the poll's time where no change
                    // says.
                    let when = |at: (DcId, u32)| crossing(history.get(&at), origin, p.commit.ts).unwrap_or(now_us);
                    let became = match witness {
                        Witness::ServingReplicas => {
                            p.commit.partitions.iter().filter_map(|&part| at(part)).map(when).max()
                        }
                        Witness::OwnReplicas => row.into_iter().flatten().flatten().map(|&at| when(at)).max(),
                    }
                    .unwrap_or(p.at_us);
                    let us = became.clamp(p.at_us, now_us.max(p.at_us)).saturating_sub(p.at_us).max(1);
                    let h = if dc == p.commit.origin { &mut local } else { &mut remote };
                    let _ = h.record(us);
                }
                !visible
            });
            !p.missing.is_empty()
        });
        if let Some(at) = closed_at {
            if pending.is_empty() || at.elapsed() > drain {
                return Ok(Visibility { local, remote, unfinished: pending.len() as u64 });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(at_us: u64, visible_upto: &[u64]) -> VisibleChange {
        VisibleChange { at_us, visible_upto: visible_upto.to_vec() }
    }

    /// A write is visible from the first change that covers it, for the
    /// DC that wrote it; a history that never covers it says nothing.
    #[test]
    fn a_write_becomes_visible_at_the_first_change_that_covers_it() {
        let h: VecDeque<_> = [change(100, &[5, 1]), change(200, &[9, 1]), change(300, &[12, 7])].into();
        assert_eq!(crossing(Some(&h), 0, 9), Some(200));
        assert_eq!(crossing(Some(&h), 0, 10), Some(300));
        assert_eq!(crossing(Some(&h), 1, 7), Some(300));
        // Covered by the oldest change kept: then, or before.
        assert_eq!(crossing(Some(&h), 0, 3), Some(100));
        assert_eq!(crossing(Some(&h), 0, 13), None);
        assert_eq!(crossing(Some(&h), 2, 1), None, "no such origin");
        assert_eq!(crossing(None, 0, 1), None);
    }
}
