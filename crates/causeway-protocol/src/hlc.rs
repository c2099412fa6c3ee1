//! Timestamps and the hybrid logical clock (Kulkarni et al., OPODIS 2014).
//!
//! A [`Timestamp`] is one `u64`: physical time in microseconds in the high 52
//! bits and a logical counter in the low 12. Adding one to a timestamp bumps
//! the counter; when the counter overflows the carry moves physical time on by
//! a microsecond, which keeps the value monotonic — the only property the
//! protocols rely on. 52 bits of microseconds last until the year 2112.
//!
//! The clock never reads the system time itself: callers pass the physical
//! clock reading in (sans-IO), so the simulator can skew and drift it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Physical clock reading in microseconds, as injected by the driver.
pub type PhysicalMicros = u64;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const LOGICAL_BITS: u32 = 12;
    pub const ZERO: Timestamp = Timestamp(0);
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// The timestamp of a physical clock reading, with a zero logical part.
    pub fn from_physical(micros: PhysicalMicros) -> Self {
        Timestamp(micros << Self::LOGICAL_BITS)
    }

    /// The physical part, in microseconds.
    pub fn physical(self) -> PhysicalMicros {
        self.0 >> Self::LOGICAL_BITS
    }

    /// The logical counter.
    pub fn logical(self) -> u64 {
        self.0 & ((1 << Self::LOGICAL_BITS) - 1)
    }

    /// The next timestamp (`t + 1` in the papers' listings), saturating at
    /// the largest (which no honest clock reaches: 2^52 µs is year 2112).
    pub fn next(self) -> Self {
        Timestamp(self.0.saturating_add(1))
    }

    /// The previous timestamp (`t - 1`), saturating at zero.
    pub fn prev(self) -> Self {
        Timestamp(self.0.saturating_sub(1))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.physical(), self.logical())
    }
}

/// A hybrid logical clock: never behind the physical clock, strictly
/// increasing across the events that tick it, and pushed forward by the
/// timestamps it observes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hlc {
    current: Timestamp,
}

impl Hlc {
    pub fn new() -> Self {
        Hlc { current: Timestamp::ZERO }
    }

    /// The last value this clock handed out or observed.
    pub fn current(&self) -> Timestamp {
        self.current
    }

    /// Ticks for a new event: `max(clock, floor + 1, hlc + 1)`, where `floor`
    /// is a timestamp the new one must exceed (Wren's `ht`). Returns the new
    /// value.
    pub fn tick(&mut self, now: PhysicalMicros, floor: Timestamp) -> Timestamp {
        let candidate = Timestamp::from_physical(now).max(floor.next()).max(self.current.next());
        debug_assert!(candidate > self.current);
        self.current = candidate;
        candidate
    }

    /// Observes a timestamp and the physical clock without ticking:
    /// `max(hlc, seen, clock)`.
    pub fn observe(&mut self, now: PhysicalMicros, seen: Timestamp) -> Timestamp {
        self.current = self.current.max(seen).max(Timestamp::from_physical(now));
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let t = Timestamp::from_physical(1_234_567);
        assert_eq!(t.physical(), 1_234_567);
        assert_eq!(t.logical(), 0);
        assert_eq!(t.next().logical(), 1);
        assert_eq!(t.next().physical(), 1_234_567);
    }

    #[test]
    fn logical_overflow_carries_into_physical_time() {
        let t = Timestamp(Timestamp::from_physical(7).0 | 0xfff);
        assert_eq!(t.next(), Timestamp::from_physical(8));
        assert!(t.next() > t);
    }

    #[test]
    fn tick_follows_physical_clock_when_it_leads() {
        let mut hlc = Hlc::new();
        assert_eq!(hlc.tick(100, Timestamp::ZERO), Timestamp::from_physical(100));
        assert_eq!(hlc.tick(250, Timestamp::ZERO), Timestamp::from_physical(250));
    }

    #[test]
    fn tick_is_strictly_monotonic_when_the_clock_stalls_or_goes_back() {
        let mut hlc = Hlc::new();
        let a = hlc.tick(100, Timestamp::ZERO);
        let b = hlc.tick(100, Timestamp::ZERO);
        let c = hlc.tick(90, Timestamp::ZERO);
        assert!(a < b && b < c);
        assert_eq!(c.physical(), 100);
        assert_eq!(c.logical(), 2);
    }

    #[test]
    fn tick_exceeds_the_floor() {
        let mut hlc = Hlc::new();
        let floor = Timestamp::from_physical(5_000);
        let t = hlc.tick(100, floor);
        assert_eq!(t, floor.next());
        assert!(hlc.tick(100, Timestamp::ZERO) > floor.next());
    }

    #[test]
    fn observe_moves_forward_without_ticking() {
        let mut hlc = Hlc::new();
        hlc.tick(100, Timestamp::ZERO);
        let seen = Timestamp::from_physical(400);
        assert_eq!(hlc.observe(50, seen), seen);
        assert_eq!(hlc.observe(50, Timestamp::ZERO), seen, "never goes back");
        assert_eq!(hlc.observe(500, Timestamp::ZERO), Timestamp::from_physical(500));
    }
}
