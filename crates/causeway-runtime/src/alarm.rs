//! One timer for a task that waits on a changing next deadline in a loop
//! (a replica task's protocol timers, a client connection's session
//! timers).
//!
//! Why not a fresh `sleep_until` in every turn of the loop: each one clones
//! the runtime's handle and inserts into and removes from its timer wheel,
//! shared by the runtime's threads — on every message, where the deadline
//! almost never fires (a commit's timeout, a stabilization tick). The
//! alarm is moved only when a deadline comes before the one it is set for;
//! for a later one (the earlier deadline was dropped) it goes off early,
//! the task finds nothing due and sets it again (docs/BENCHMARKS.md,
//! stop 33).

use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

pub struct Alarm {
    sleep: Pin<Box<Sleep>>,
    set_for: Option<Instant>,
}

impl Default for Alarm {
    fn default() -> Self {
        Self::new()
    }
}

impl Alarm {
    /// An alarm set for nothing.
    pub fn new() -> Self {
        // Far ahead, and never awaited before it is set.
        let far = Instant::now() + Duration::from_secs(86_400);
        Alarm { sleep: Box::pin(tokio::time::sleep_until(far)), set_for: None }
    }

    /// Makes sure the alarm goes off at `due` or before.
    pub fn cover(&mut self, due: Option<Instant>) {
        if let Some(at) = due.filter(|&at| self.set_for.is_none_or(|set| at < set)) {
            self.sleep.as_mut().reset(at);
            self.set_for = Some(at);
        }
    }

    /// Goes off at the time it is set for (then it is set for nothing);
    /// never while set for nothing.
    pub async fn ring(&mut self) {
        match self.set_for {
            Some(_) => {
                (&mut self.sleep).await;
                self.set_for = None;
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn goes_off_at_the_earliest_deadline_covered_and_only_when_set() {
        let mut alarm = Alarm::new();
        // Set for nothing: it never goes off.
        assert!(tokio::time::timeout(Duration::from_secs(3600), alarm.ring()).await.is_err());
        let t0 = Instant::now();
        alarm.cover(Some(t0 + Duration::from_millis(50)));
        alarm.cover(Some(t0 + Duration::from_millis(80))); // later: stays at 50
        alarm.cover(None);
        alarm.ring().await;
        assert_eq!(Instant::now() - t0, Duration::from_millis(50));
        // An earlier deadline moves it.
        let t1 = Instant::now();
        alarm.cover(Some(t1 + Duration::from_millis(40)));
        alarm.cover(Some(t1 + Duration::from_millis(10)));
        alarm.ring().await;
        assert_eq!(Instant::now() - t1, Duration::from_millis(10));
        // Gone off, it is set for nothing until covered again.
        assert!(tokio::time::timeout(Duration::from_secs(3600), alarm.ring()).await.is_err());
    }
}
