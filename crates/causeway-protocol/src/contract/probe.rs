//! Measuring from outside a replica whether it made a read wait: a read
//! request whose reply did not leave in the step that received it waited,
//! until the step that sends its reply. The simulator, the hand-cranked
//! harness and the runtime's replica tasks all measure this way.

use super::effects::Effects;
use super::message::{Message, ReadTag};
use crate::ids::Addr;
use rustc_hash::FxHashMap;

/// One replica's read requests that are waiting, with the moment each
/// arrived (in whatever time the driver keeps: `T`).
#[derive(Debug)]
pub struct ReadWaitProbe<T> {
    waiting: FxHashMap<(Addr, ReadTag), T>,
}

impl<T> Default for ReadWaitProbe<T> {
    fn default() -> Self {
        ReadWaitProbe { waiting: FxHashMap::default() }
    }
}

impl<T: Copy> ReadWaitProbe<T> {
    /// After the replica's step on a message from `from` whose read tag
    /// (taken before the step) is `tag`: `None` if it was no read request,
    /// `Some(true)` if the step answered it, `Some(false)` if it waits (and
    /// is remembered from `now()`, read only then).
    pub fn after_step<M: Message, Tm, R>(
        &mut self,
        from: Addr,
        tag: Option<ReadTag>,
        out: &Effects<M, Tm, R>,
        now: impl FnOnce() -> T,
    ) -> Option<bool> {
        let tag = tag?;
        let answered = out.messages.iter().any(|(to, m)| *to == from && m.read_reply() == Some(tag));
        if !answered {
            self.waiting.insert((from, tag), now());
        }
        Some(answered)
    }

    /// The replica sends `msg` to `to`: if it answers a read that waited,
    /// that read's tag and when it arrived.
    pub fn on_send<M: Message>(&mut self, to: Addr, msg: &M) -> Option<(ReadTag, T)> {
        if self.waiting.is_empty() {
            return None;
        }
        let tag = msg.read_reply()?;
        self.waiting.remove(&(to, tag)).map(|since| (tag, since))
    }

    /// Reads waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Forgets every waiting read (the replica crashed).
    pub fn clear(&mut self) {
        self.waiting.clear();
    }
}

/// What drivers report of read-only transactions counted by round trips
/// (`(rounds, transactions)` pairs; a driver that buckets the last count
/// gives it as its floor): the mean, and the shares that took 2 or more
/// and 3 or more. `None` without any.
pub fn round_trip_summary(counts: impl IntoIterator<Item = (u32, u64)>) -> Option<(f64, f64, f64)> {
    let (mut n, mut sum, mut two, mut three) = (0u64, 0u64, 0u64, 0u64);
    for (rounds, count) in counts {
        n += count;
        sum += u64::from(rounds) * count;
        two += if rounds >= 2 { count } else { 0 };
        three += if rounds >= 3 { count } else { 0 };
    }
    (n > 0).then(|| (sum as f64 / n as f64, two as f64 / n as f64, three as f64 / n as f64))
}
