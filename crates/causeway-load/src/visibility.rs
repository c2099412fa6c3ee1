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
//! ([`causeway_client::Client::stats`]) every millisecond by default, so it
//! measures an embedded cluster and separate server processes alike. The
//! interval bounds its resolution (a sample lands up to one interval late).

use crate::probe::Probe;
use causeway_client::Error;
use causeway_protocol::{DcId, PartitionId, Topology};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
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
    /// DCs where it is not yet visible.
    missing: Vec<DcId>,
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Follows commits from `commits` until the channel closes and every commit
/// is visible everywhere (or `drain` has passed since the close), asking
/// `probes` (one per node) for stable times every
/// `interval` (the resolution of the measurement, and its cost: a request
/// to every node each time).
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
                    pending.push(Unseen { commit: c, missing });
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
                    gauges.insert((DcId(r.dc), r.partition), r.visible_upto);
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
        let now = Instant::now();
        pending.retain_mut(|p| {
            p.missing.retain(|&dc| {
                let origin = usize::from(p.commit.origin.0);
                let everywhere = floor.get(usize::from(dc.0)).and_then(|row| row.get(origin)).copied().unwrap_or(0);
                let visible = (everywhere != u64::MAX && p.commit.ts <= everywhere)
                    || witness == Witness::ServingReplicas
                        && p.commit.partitions.iter().all(|&part| {
                            let at = reads_at.get(usize::from(dc.0)).and_then(|row| row.get(part as usize)).copied();
                            let seen = at.flatten().and_then(|at| gauges.get(&at)).and_then(|v| v.get(origin));
                            seen.is_some_and(|&v| v >= p.commit.ts)
                        });
                if visible {
                    let us = now.saturating_duration_since(p.commit.at).as_micros().max(1) as u64;
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
