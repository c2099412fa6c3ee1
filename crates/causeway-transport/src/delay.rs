//! The WAN-emulation stage: a FIFO line that holds each item for a one-way
//! delay plus random jitter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::{sleep_until, Instant};

/// The delay of one directed link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelaySpec {
    pub one_way: Duration,
    /// Each item waits an extra uniformly random `[0, jitter]`.
    pub jitter: Duration,
}

impl DelaySpec {
    pub fn new(one_way: Duration, jitter: Duration) -> Self {
        DelaySpec { one_way, jitter }
    }

    /// Half a round-trip time each way.
    pub fn from_rtt(rtt: Duration, jitter: Duration) -> Self {
        DelaySpec { one_way: rtt / 2, jitter }
    }
}

/// Computes release times: `max(enqueued + one_way + jitter, previous release)`.
/// The max keeps FIFO: jitter may stretch gaps between items, never reorder them.
pub(crate) struct ReleaseClock {
    spec: DelaySpec,
    last: Option<Instant>,
    rng: SplitMix64,
}

impl ReleaseClock {
    pub(crate) fn new(spec: DelaySpec) -> Self {
        ReleaseClock { spec, last: None, rng: SplitMix64::seeded() }
    }

    pub(crate) fn release(&mut self, enqueued: Instant) -> Instant {
        let jitter_nanos = self.spec.jitter.as_nanos().min(u64::MAX as u128) as u64;
        let jitter = match jitter_nanos {
            0 => Duration::ZERO,
            j => Duration::from_nanos(self.rng.next() % (j + 1)),
        };
        let at = enqueued + self.spec.one_way + jitter;
        let at = self.last.map_or(at, |last| at.max(last));
        self.last = Some(at);
        at
    }
}

/// Jitter needs no cryptographic quality, only to differ between lines and runs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn seeded() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        SplitMix64(now ^ COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A FIFO delay stage: items pushed in are handed to the sink after their
/// delay, in push order. Runs as a task on the current tokio runtime; dropping
/// the line stops the task and discards what it still holds.
pub struct DelayLine<T> {
    tx: mpsc::UnboundedSender<(Instant, T)>,
    task: JoinHandle<()>,
}

impl<T: Send + 'static> DelayLine<T> {
    /// Starts the line. Must be called within a tokio runtime. The sink runs
    /// on the line's task and must not block.
    pub fn new(spec: DelaySpec, sink: impl FnMut(T) + Send + 'static) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(ReleaseClock::new(spec), rx, sink));
        DelayLine { tx, task }
    }

    /// Never blocks. The item's delay starts now.
    pub fn push(&self, item: T) {
        // Fails only once the task is gone (runtime shutting down): nothing to deliver to then.
        let _ = self.tx.send((Instant::now(), item));
    }

    pub(crate) fn abort_handle(&self) -> AbortHandle {
        self.task.abort_handle()
    }
}

impl<T> Drop for DelayLine<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run<T>(mut clock: ReleaseClock, mut rx: mpsc::UnboundedReceiver<(Instant, T)>, mut sink: impl FnMut(T)) {
    let mut held: VecDeque<(Instant, T)> = VecDeque::new();
    let mut incoming = Vec::new();
    let mut open = true;
    while open || !held.is_empty() {
        let due = held.front().map(|(at, _)| *at);
        tokio::select! {
            biased;
            _ = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                while held.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, item) = held.pop_front().expect("front checked");
                    sink(item);
                }
            }
            n = rx.recv_many(&mut incoming, 1024), if open => {
                open = n > 0;
                held.extend(incoming.drain(..).map(|(at, item)| (clock.release(at), item)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_times_respect_delay_and_stay_monotonic() {
        let spec = DelaySpec::new(Duration::from_millis(50), Duration::from_millis(20));
        let mut clock = ReleaseClock::new(spec);
        let t0 = Instant::now();
        let mut last = t0;
        for i in 0..10_000u64 {
            let enq = t0 + Duration::from_micros(i);
            let at = clock.release(enq);
            assert!(at >= enq + spec.one_way, "released before its delay");
            assert!(at >= last, "reordered");
            last = at;
        }
        // The jitter is actually drawn: not every item sits at the floor.
        let mut clock = ReleaseClock::new(spec);
        let spread: Vec<Duration> =
            (0..100u64).map(|i| t0 + Duration::from_secs(i)).map(|e| clock.release(e) - e).collect();
        assert!(spread.iter().any(|d| *d > spec.one_way + Duration::from_millis(1)));
        assert!(spread.iter().all(|d| *d <= spec.one_way + spec.jitter));
    }

    #[test]
    fn from_rtt_halves() {
        let d = DelaySpec::from_rtt(Duration::from_millis(80), Duration::ZERO);
        assert_eq!(d.one_way, Duration::from_millis(40));
    }
}
