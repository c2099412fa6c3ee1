//! WAN emulation inside one process: a FIFO delay line per pair of DCs.
//!
//! An item released at `max(sent + delay ± jitter, previous release)` keeps
//! the order it was sent in, as the protocols require of every link.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

pub struct DelayLine<T> {
    tx: mpsc::UnboundedSender<(Instant, T)>,
    delay: Duration,
    jitter: f64,
    state: std::sync::Mutex<(Instant, ChaCha8Rng)>,
}

impl<T: Send + 'static> DelayLine<T> {
    /// Starts the line's task; `sink` receives each item when it is due.
    pub fn spawn(delay: Duration, jitter: f64, mut sink: impl FnMut(T) + Send + 'static) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, T)>();
        tokio::spawn(async move {
            while let Some((due, item)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                sink(item);
                // Everything else already due goes out without another sleep.
                while let Ok((due, item)) = rx.try_recv() {
                    tokio::time::sleep_until(due).await;
                    sink(item);
                }
            }
        });
        let seed = crate::clock::now_micros();
        DelayLine { tx, delay, jitter, state: std::sync::Mutex::new((Instant::now(), ChaCha8Rng::seed_from_u64(seed))) }
    }

    pub fn send(&self, item: T) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, rng) = &mut *state;
        let spread = self.delay.as_secs_f64() * self.jitter;
        let delay = if spread > 0.0 {
            Duration::from_secs_f64((self.delay.as_secs_f64() + rng.random_range(-spread..=spread)).max(0.0))
        } else {
            self.delay
        };
        let due = (now + delay).max(*last);
        *last = due;
        // A closed line means the runtime is shutting down.
        let _ = self.tx.send((due, item));
    }
}
