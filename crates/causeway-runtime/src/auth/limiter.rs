//! Failed logins, counted per source so that one source cannot try
//! passwords without end: past `max` failures in a window, its logins are
//! refused unchecked until the window ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Sources tracked at most; past this the expired are dropped, then the
/// oldest window (a source with that many addresses can shed its count,
/// but not the cost of each try: the verifications are bounded too).
pub const MAX_SOURCES: usize = 16_384;

/// One source's window: when it began and the logins tried in it that did
/// not succeed.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: Instant,
    failed: u32,
}

#[derive(Debug)]
pub struct FailedLogins {
    max: u32,
    window: Duration,
    by_source: HashMap<IpAddr, Window>,
}

impl FailedLogins {
    pub fn new(max: u32, window: Duration) -> Self {
        FailedLogins { max, window, by_source: HashMap::new() }
    }

    /// A login from `from` is about to be tried: counts it as failed until
    /// [`succeeded`](Self::succeeded) says otherwise (so that logins tried at
    /// once cannot all pass before the first fails), or says how long the
    /// source must wait.
    pub fn attempt(&mut self, from: IpAddr, now: Instant) -> Result<(), Duration> {
        let key = source(from);
        if !self.by_source.contains_key(&key) && self.by_source.len() >= MAX_SOURCES {
            self.make_room(now);
        }
        let w = self.by_source.entry(key).or_insert(Window { start: now, failed: 0 });
        if now.duration_since(w.start) >= self.window {
            *w = Window { start: now, failed: 0 };
        }
        if w.failed >= self.max {
            return Err((w.start + self.window).saturating_duration_since(now).max(Duration::from_secs(1)));
        }
        w.failed += 1;
        Ok(())
    }

    /// A login counted by [`attempt`](Self::attempt) from `from` succeeded:
    /// it is taken off the source's count (its failures still count: one
    /// good password must not buy the tries of others).
    pub fn succeeded(&mut self, from: IpAddr) {
        let key = source(from);
        if let Some(w) = self.by_source.get_mut(&key) {
            w.failed = w.failed.saturating_sub(1);
            if w.failed == 0 {
                self.by_source.remove(&key);
            }
        }
    }

    /// Sources tracked now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_source.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.by_source.is_empty()
    }

    fn make_room(&mut self, now: Instant) {
        let window = self.window;
        self.by_source.retain(|_, w| now.duration_since(w.start) < window);
        if self.by_source.len() >= MAX_SOURCES {
            if let Some(oldest) = self.by_source.iter().min_by_key(|(_, w)| w.start).map(|(k, _)| *k) {
                self.by_source.remove(&oldest);
            }
        }
    }
}

/// The source a login is counted against: an IPv4 address, or an IPv6
/// address's /64 (one host commonly holds a whole /64).
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut o = v6.octets();
                o[8..].fill(0);
                IpAddr::V6(o.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_source_past_its_failures_waits_for_the_window() {
        let t0 = Instant::now();
        let mut f = FailedLogins::new(3, Duration::from_secs(60));
        for _ in 0..3 {
            assert!(f.attempt(ip("10.0.0.1"), t0).is_ok());
        }
        let wait = f.attempt(ip("10.0.0.1"), t0 + Duration::from_secs(10)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(50));
        assert!(f.attempt(ip("10.0.0.2"), t0).is_ok(), "another source is not held");
        assert!(f.attempt(ip("10.0.0.1"), t0 + Duration::from_secs(60)).is_ok(), "a new window");
    }

    #[test]
    fn a_success_takes_back_its_own_count_only_and_counts_are_by_source() {
        let t0 = Instant::now();
        let mut f = FailedLogins::new(2, Duration::from_secs(60));
        assert!(f.attempt(ip("10.0.0.1"), t0).is_ok());
        assert!(f.attempt(ip("10.0.0.1"), t0).is_ok());
        f.succeeded(ip("10.0.0.1"));
        assert!(f.attempt(ip("10.0.0.1"), t0).is_ok(), "the success is not a failure");
        assert!(f.attempt(ip("10.0.0.1"), t0).is_err(), "the failure before it still counts");
        f.succeeded(ip("10.0.0.1"));
        f.succeeded(ip("10.0.0.1"));
        assert!(f.is_empty());
        // One IPv6 host's /64 is one source, and a mapped IPv4 address its IPv4 one.
        assert!(f.attempt(ip("2001:db8::1"), t0).is_ok());
        assert!(f.attempt(ip("2001:db8::2"), t0).is_ok());
        assert!(f.attempt(ip("2001:db8::3"), t0).is_err());
        assert!(f.attempt(ip("::ffff:10.0.0.1"), t0).is_ok());
        assert!(f.attempt(ip("10.0.0.1"), t0).is_ok());
        assert!(f.attempt(ip("::ffff:10.0.0.1"), t0).is_err());
    }

    #[test]
    fn the_table_is_bounded() {
        let t0 = Instant::now();
        let mut f = FailedLogins::new(1, Duration::from_secs(60));
        for i in 0..(MAX_SOURCES as u32 + 100) {
            let _ = f.attempt(IpAddr::V4(i.into()), t0 + Duration::from_micros(u64::from(i)));
        }
        assert_eq!(f.len(), MAX_SOURCES);
        // The newest sources are still held.
        assert!(f.attempt(IpAddr::V4((MAX_SOURCES as u32 + 99).into()), t0 + Duration::from_secs(1)).is_err());
    }
}
