//! One task per partition replica: it owns the state machine (no locks on
//! protocol state), feeds it messages and due timers with the real clock,
//! hands what it persists to its log ([`crate::disk`]) and what it spills
//! to its spill, and sends what it asks to send once the log reports it
//! durable.

use crate::clock::now_micros;
use crate::disk::{replica_name, ReplicaLog, ReplicaSpill};
use crate::metrics::Metrics;
use crate::outgoing::Outgoing;
use crate::router::{ReplicaInput, Router};
use causeway_protocol::contract::replica::ReplicaEffects;
use causeway_protocol::contract::{Done, Next, RecordLog, SendGate, Spill, SpillQueue};
use causeway_protocol::{Addr, DcId, Message, Protocol, ReadWaitProbe, Replica, ReplicaId};
use causeway_wire::{ReplicaReading, VisibleChange};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What a replica task publishes after each batch of steps, for metrics and
/// visibility measurements, without stopping the task.
pub struct ReplicaGauges {
    /// `visible[d]`: [`Replica::visible_upto`] for writes from DC `d`.
    pub visible: Vec<AtomicU64>,
    /// Its latest changes, with the wall-clock time each was published,
    /// for benchmarks to time visibility without polling every
    /// millisecond ([`ReplicaGauges::visible_changes`]).
    changes: Mutex<Changes>,
    pub versions: AtomicU64,
    /// Bytes of protocol metadata each stored version carries.
    pub metadata_per_version: AtomicU64,
    pub inbox: AtomicU64,
    /// Bytes of the replica's spill on disk.
    pub spilled: AtomicU64,
    /// Whether the replica leads its group's ordered log; `None` for
    /// protocols without replica groups.
    pub leads: Option<AtomicBool>,
}

impl ReplicaGauges {
    /// The gauges of a replica in a cluster of `dcs` DCs; `groups`: its
    /// protocol orders each partition's log in a replica group.
    pub fn new(dcs: u16, groups: bool) -> Self {
        ReplicaGauges {
            visible: (0..dcs).map(|_| AtomicU64::new(0)).collect(),
            changes: Mutex::new(Changes::default()),
            versions: AtomicU64::new(0),
            metadata_per_version: AtomicU64::new(0),
            inbox: AtomicU64::new(0),
            spilled: AtomicU64::new(0),
            leads: groups.then(|| AtomicBool::new(false)),
        }
    }

    pub fn visible_upto(&self, origin: DcId) -> u64 {
        self.visible[usize::from(origin.0)].load(Ordering::Relaxed)
    }

    /// `visible_upto` for every origin and its latest changes, oldest
    /// first, read together: the value is the last change's (the stores
    /// below may be a step ahead of it, and are read only before any).
    pub fn visible_changes(&self) -> (Vec<u64>, Vec<VisibleChange>) {
        let changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let visible = match changes.kept.back() {
            Some(last) => last.visible_upto.clone(),
            None => self.visible.iter().map(|v| v.load(Ordering::Relaxed)).collect(),
        };
        (visible, changes.kept.iter().cloned().collect())
    }

    /// Stores what the replica says is visible from each DC (asked once
    /// per DC: for some protocols it is a walk over a vector), recording a
    /// change at `now_us` if it is one.
    fn set_visible(&self, mut visible_upto: impl FnMut(DcId) -> u64, now_us: u64) {
        let mut changed = false;
        for (d, slot) in self.visible.iter().enumerate() {
            let v = visible_upto(DcId(d as u16));
            changed |= slot.swap(v, Ordering::Relaxed) != v;
        }
        if changed {
            let values = self.visible.iter().map(|v| v.load(Ordering::Relaxed));
            self.changes.lock().unwrap_or_else(|e| e.into_inner()).record(values, now_us);
        }
    }
}

/// A replica's latest changes of `visible_upto`, at most
/// [`ReplicaReading::MAX_CHANGES`], at least [`CHANGE_SPACING_US`] apart:
/// a change within that time of the last one kept is merged into it (its
/// value, stamped with the later time), so the changes a reading carries
/// reach back at least `MAX_CHANGES × CHANGE_SPACING_US` (16 ms) however
/// often a protocol moves its stable time (EC and Eiger, at every
/// write), and a write is timed at most that spacing late.
#[derive(Default)]
struct Changes {
    kept: VecDeque<VisibleChange>,
    /// When the last change kept was first recorded.
    last_started_us: u64,
}

/// See [`Changes`]: 0.5 ms, half the resolution of the 1 ms polls this
/// replaced, and 32 of them reach past the bench's 10 ms polls.
const CHANGE_SPACING_US: u64 = 500;

impl Changes {
    /// Hot path (a protocol that moves its stable time at every step, after
    /// every batch): a change merged into the last takes its place in the
    /// last's list, not in a new one.
    fn record(&mut self, visible_upto: impl Iterator<Item = u64>, now_us: u64) {
        match self.kept.back_mut() {
            Some(last) if now_us.saturating_sub(self.last_started_us) < CHANGE_SPACING_US => {
                last.at_us = now_us;
                last.visible_upto.clear();
                last.visible_upto.extend(visible_upto);
            }
            _ => {
                if self.kept.len() == ReplicaReading::MAX_CHANGES {
                    self.kept.pop_front();
                }
                self.kept.push_back(VisibleChange { at_us: now_us, visible_upto: visible_upto.collect() });
                self.last_started_us = now_us;
            }
        }
    }
}

/// Inputs handled before the task yields, so a busy replica batches its
/// sends (the transport coalesces them) without starving its timers.
const BATCH: usize = 256;

struct Timers<T> {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    pending: FxHashMap<u64, T>,
    seq: u64,
}

impl<T> Timers<T> {
    fn arm(&mut self, timer: T, after_us: u64) {
        self.seq += 1;
        self.heap.push(Reverse((Instant::now() + Duration::from_micros(after_us), self.seq)));
        self.pending.insert(self.seq, timer);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    fn pop_due(&mut self, now: Instant) -> Option<T> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => {
                let Reverse((_, seq)) = self.heap.pop()?;
                self.pending.remove(&seq)
            }
            _ => None,
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub async fn run<P: Protocol>(
    mut replica: P::Replica,
    mut log: ReplicaLog<<P::Replica as Replica>::Record>,
    mut spill: ReplicaSpill<<P::Replica as Replica>::Record>,
    clock_offset_us: i64,
    mut inbox: mpsc::UnboundedReceiver<ReplicaInput<P::Message>>,
    router: Arc<Router<P::Message>>,
    gauges: Arc<ReplicaGauges>,
    metrics: Arc<Metrics>,
) {
    let me = replica.id();
    // This replica's clock: the real one, skewed when a benchmark asks.
    let clock = || now_micros().saturating_add_signed(clock_offset_us);
    let mut out = ReplicaEffects::<P::Replica>::default();
    let mut timers = Timers { heap: BinaryHeap::new(), pending: FxHashMap::default(), seq: 0 };
    // Read requests not answered in the step that received them: when they came.
    let mut probe = ReadWaitProbe::default();
    let mut gate = SendGate::default();
    let mut spills = SpillQueue::default();
    let mut outgoing = Outgoing::new(me);
    replica.start(clock(), &mut out);
    let mut reseeding = replica.is_reseeding();
    let mut alarm = crate::alarm::Alarm::new();
    loop {
        flush::<P>(&mut out, &router, &mut outgoing, &mut timers, &mut probe, &mut gate, &mut log, &metrics);
        // The spill, in order: a batch once the records before it are
        // durable, and before a checkpoint that leaves its groups out (the
        // replica does so only once told the batch is on disk).
        while let Some(done) = next_spill::<P>(me, &mut out, &mut spills, &mut spill, &mut log, &gauges, &metrics) {
            done.tell(&mut replica, clock(), &mut out);
            flush::<P>(&mut out, &router, &mut outgoing, &mut timers, &mut probe, &mut gate, &mut log, &metrics);
        }
        // Every record of the steps so far is appended: a checkpoint taken
        // now covers exactly them. One in flight at most: the replica waits
        // for the disk rather than its log growing without bound.
        if log.keep_up().await {
            metrics.checkpoint_waits.inc();
        }
        if log.checkpoint_due() {
            log.checkpoint(replica.checkpoint());
        }
        publish::<P>(&replica, &gauges, &inbox);
        if reseeding && !replica.is_reseeding() {
            reseeding = false;
            let versions = replica.counters().versions;
            tracing::warn!("replica {} re-seeded: it holds {versions} versions and serves again", replica_name(me));
        }
        alarm.cover(timers.next_deadline());
        alarm.cover(outgoing.due());
        // What the replica sent itself is handled before the task waits,
        // but after what the log has made durable meanwhile.
        let own = outgoing.has_own();
        let input = tokio::select! {
            biased;
            () = log.wait_durable() => {
                release::<P>(&router, &mut outgoing, &mut probe, &mut gate, &log, &metrics);
                outgoing.release_due(router.as_ref(), Instant::now);
                continue;
            }
            () = std::future::ready(()), if own => {
                outgoing.next_own().map(|msg| Some(ReplicaInput::Message(Addr::Replica(me), msg)))
            }
            input = inbox.recv() => Some(input),
            () = alarm.ring() => None,
        };
        match input {
            // Every sender is gone: the node is shutting down.
            Some(None) => return,
            Some(Some(first)) => {
                let mut next = Some(first);
                let mut handled = 0;
                while let Some(input) = next {
                    match input {
                        ReplicaInput::Message(from, msg) => {
                            let tag = msg.read_request();
                            replica.on_message(clock(), from, msg, &mut out);
                            // One that waits is counted when answered.
                            if probe.after_step(from, tag, &out, Instant::now) == Some(true) {
                                metrics.read_slices.inc();
                            }
                        }
                        ReplicaInput::PeerLost(senders) => {
                            for from in senders {
                                replica.on_peer_lost(clock(), from, &mut out);
                            }
                        }
                        ReplicaInput::Dump { after, max_bytes, reply } => {
                            let page = crate::dump::page(replica.latest_values(), after, max_bytes);
                            let _ = reply.send(page);
                        }
                    }
                    handled += 1;
                    next = if handled >= BATCH {
                        None
                    } else {
                        match outgoing.next_own() {
                            Some(msg) => Some(ReplicaInput::Message(Addr::Replica(me), msg)),
                            None => inbox.try_recv().ok(),
                        }
                    };
                }
            }
            None => {}
        }
        let now = Instant::now();
        while let Some(timer) = timers.pop_due(now) {
            replica.on_timer(clock(), timer, &mut out);
        }
        outgoing.release_due(router.as_ref(), || now);
    }
}

/// Queues the step's spill operations (its records are appended) and
/// carries out the next one that can be: what the replica is to hear of
/// it, if anything. `None` once the queue is empty or waits for the log
/// (asked to sync: its report wakes the task).
fn next_spill<P: Protocol>(
    me: ReplicaId,
    out: &mut ReplicaEffects<P::Replica>,
    spills: &mut SpillQueue<<P::Replica as Replica>::Record>,
    spill: &mut ReplicaSpill<<P::Replica as Replica>::Record>,
    log: &mut ReplicaLog<<P::Replica as Replica>::Record>,
    gauges: &ReplicaGauges,
    metrics: &Metrics,
) -> Option<Done<<P::Replica as Replica>::Record>> {
    spills.take(&mut out.spill, log.appended());
    loop {
        let op = match spills.next(log.durable()) {
            Next::Ready(op) => op,
            Next::WaitFor(needs) => {
                log.need_durable(needs);
                return None;
            }
            Next::Empty => return None,
        };
        let put = matches!(op, Spill::Put(_));
        let done = spill.carry_out(op).unwrap_or_else(|e| crate::disk::crash_stop(me, &e));
        let bytes = spill.bytes();
        gauges.spilled.store(bytes, Ordering::Relaxed);
        if put {
            metrics.stream_spills.inc();
            tracing::warn!(
                "replica {}: a peer in another DC is behind; the oldest groups kept for it went to disk ({bytes} \
                 bytes spilled, [peers] max_kept_mb)",
                replica_name(me)
            );
        }
        if matches!(done, Some(Done::Unspilled(..))) {
            metrics.stream_unspilled.inc();
        }
        if done.is_some() {
            return done;
        }
    }
}

fn publish<P: Protocol>(
    replica: &P::Replica,
    gauges: &ReplicaGauges,
    inbox: &mpsc::UnboundedReceiver<ReplicaInput<P::Message>>,
) {
    gauges.set_visible(|d| replica.visible_upto(d).0, now_micros());
    gauges.versions.store(replica.counters().versions, Ordering::Relaxed);
    gauges.metadata_per_version.store(replica.version_metadata_bytes(), Ordering::Relaxed);
    gauges.inbox.store(inbox.len() as u64, Ordering::Relaxed);
    if let Some(leads) = &gauges.leads {
        leads.store(replica.leads(), Ordering::Relaxed);
    }
}

/// Sends `msg` from the replica, measuring a read answer that waited.
fn send<P: Protocol>(
    router: &Router<P::Message>,
    outgoing: &mut Outgoing<P::Message>,
    probe: &mut ReadWaitProbe<Instant>,
    metrics: &Metrics,
    to: Addr,
    msg: P::Message,
) {
    if let Some((tag, since)) = probe.on_send(to, &msg) {
        // The tag names the transaction, unique within the DC.
        metrics.read_waited(outgoing.me().dc.0, tag.tx, since.elapsed());
    }
    outgoing.send(router, to, msg, Instant::now);
}

#[allow(clippy::too_many_arguments)]
fn flush<P: Protocol>(
    out: &mut ReplicaEffects<P::Replica>,
    router: &Router<P::Message>,
    outgoing: &mut Outgoing<P::Message>,
    timers: &mut Timers<<P::Replica as Replica>::Timer>,
    probe: &mut ReadWaitProbe<Instant>,
    gate: &mut SendGate<P::Message>,
    log: &mut ReplicaLog<<P::Replica as Replica>::Record>,
    metrics: &Metrics,
) {
    for (timer, after) in out.timers.drain(..) {
        timers.arm(timer, after);
    }
    gate.take(out, log, |to, msg| send::<P>(router, outgoing, probe, metrics, to, msg));
}

/// The log reports more records durable: what waited for them leaves.
fn release<P: Protocol>(
    router: &Router<P::Message>,
    outgoing: &mut Outgoing<P::Message>,
    probe: &mut ReadWaitProbe<Instant>,
    gate: &mut SendGate<P::Message>,
    log: &ReplicaLog<<P::Replica as Replica>::Record>,
    metrics: &Metrics,
) {
    gate.release(log.durable(), |to, msg| send::<P>(router, outgoing, probe, metrics, to, msg));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changes are kept at least the spacing apart, a change inside it
    /// merged into the last (its later value and time), and the oldest
    /// dropped past the bound: what is kept never claims a value earlier
    /// than it was published.
    #[test]
    fn changes_are_spaced_merged_and_bounded() {
        let mut c = Changes::default();
        c.record([1].into_iter(), 1_000);
        c.record([2].into_iter(), 1_200);
        c.record([3].into_iter(), 1_499);
        c.record([4].into_iter(), 1_500);
        let kept: Vec<(u64, u64)> = c.kept.iter().map(|x| (x.at_us, x.visible_upto[0])).collect();
        assert_eq!(kept, vec![(1_499, 3), (1_500, 4)]);
        for i in 0..100u64 {
            c.record([10 + i].into_iter(), 10_000 + i * CHANGE_SPACING_US);
        }
        assert_eq!(c.kept.len(), ReplicaReading::MAX_CHANGES);
        assert_eq!(c.kept.back().map(|x| x.visible_upto[0]), Some(109));
        let span = c.kept.back().unwrap().at_us - c.kept.front().unwrap().at_us;
        assert_eq!(span, (ReplicaReading::MAX_CHANGES as u64 - 1) * CHANGE_SPACING_US);
    }

    /// A reading takes the values and the changes together: the last
    /// change is the value read; an unchanged value records nothing.
    #[test]
    fn the_last_change_is_the_value_read() {
        let g = ReplicaGauges::new(2, false);
        let (first, then) = ([5, 7], [6, 7]);
        g.set_visible(|d| first[usize::from(d.0)], 100);
        g.set_visible(|d| first[usize::from(d.0)], 2_000);
        g.set_visible(|d| then[usize::from(d.0)], 3_000);
        let (visible, changes) = g.visible_changes();
        assert_eq!(visible, vec![6, 7]);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes.last().map(|c| (c.at_us, c.visible_upto.clone())), Some((3_000, vec![6, 7])));
    }
}
