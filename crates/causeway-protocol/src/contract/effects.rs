//! What one step of a state machine produces.
//!
//! **Durability.** A step may ask for records to be made durable
//! ([`Effects::persist`]) and hold messages back until they are
//! ([`Effects::send_after_durable`]): send-after-durable, as TigerBeetle's
//! and raft-rs's `Ready` do. A driver appends the records to the replica's
//! store, and releases the held messages once everything appended so far is
//! synced. Links are FIFO, so a driver holding a message also holds every
//! later message of the same replica behind it. After a crash a protocol is
//! rebuilt from the records that were synced ([`crate::Protocol::recover`]);
//! what was appended but not synced is lost, and so are the messages held
//! for it.

use super::spill::Spill;
use crate::ids::Addr;
use serde::{Deserialize, Serialize};

/// The record type of a protocol that keeps nothing durable (yet): there is
/// no value of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoRecord {}

/// Outputs of one step.
#[derive(Debug)]
pub struct Effects<M, T, R = NoRecord> {
    /// Messages that may leave at once, in order.
    pub messages: Vec<(Addr, M)>,
    /// Timers to arm: fire `timer` after this many microseconds.
    pub timers: Vec<(T, u64)>,
    /// Records to make durable, in order.
    pub records: Vec<R>,
    /// Messages that may leave only once every record appended so far
    /// (this step's and earlier ones') is durable; they follow `messages`.
    pub after_durable: Vec<(Addr, M)>,
    /// Records to keep on disk rather than in memory, and to read back
    /// ([`super::spill`]).
    pub spill: Vec<Spill<R>>,
    faults: FaultPoints,
}

impl<M, T, R> Default for Effects<M, T, R> {
    fn default() -> Self {
        Effects {
            messages: Vec::new(),
            timers: Vec::new(),
            records: Vec::new(),
            after_durable: Vec::new(),
            spill: Vec::new(),
            faults: FaultPoints::OFF,
        }
    }
}

impl<M, T, R> Effects<M, T, R> {
    pub fn send(&mut self, to: Addr, msg: M) {
        self.messages.push((to, msg));
    }

    /// Sends `msg` to every address, cloning it for all but the last.
    pub fn send_all(&mut self, to: &[Addr], msg: M)
    where
        M: Clone,
    {
        if let Some((last, others)) = to.split_last() {
            for &peer in others {
                self.messages.push((peer, msg.clone()));
            }
            self.messages.push((*last, msg));
        }
    }

    pub fn set_timer(&mut self, timer: T, after_us: u64) {
        self.timers.push((timer, after_us));
    }

    /// Asks for `record` to be made durable.
    pub fn persist(&mut self, record: R) {
        self.records.push(record);
    }

    /// Sends `msg` once every record of this step is durable: those
    /// persisted so far and those the step persists after this call.
    pub fn send_after_durable(&mut self, to: Addr, msg: M) {
        self.after_durable.push((to, msg));
    }

    /// As a driver whose disk syncs at once would: the records are durable
    /// and the messages that waited for them join the others, in order.
    /// For tests that drive one step and read what leaves.
    pub fn sync_at_once(&mut self) {
        self.records.clear();
        self.messages.append(&mut self.after_durable);
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
            && self.timers.is_empty()
            && self.records.is_empty()
            && self.after_durable.is_empty()
            && self.spill.is_empty()
    }

    /// Whether fault point `site` fires in this step (see [`FaultPoints`]).
    /// Never outside the simulator.
    pub fn buggify(&mut self, site: &'static str) -> bool {
        self.faults.fire(site)
    }

    /// The fault points of the next step; drivers set them before each one.
    pub fn set_faults(&mut self, faults: FaultPoints) {
        self.faults = faults;
    }

    /// How many fault points fired since the last [`Effects::set_faults`].
    pub fn faults_fired(&self) -> u32 {
        self.faults.fired
    }
}

/// FoundationDB-style fault points ("buggify"): places in a protocol where
/// it may do something legal but rare — skip an apply round, delay a report
/// — so that tests reach the interleavings real clusters meet once a month.
/// Only the simulator switches them on, from its seed: `run` decides which
/// sites are armed in this run (about a quarter), `step` whether an armed
/// site fires in this step (about a quarter of its passes). Both are words
/// the driver draws; the protocol stays deterministic and draws nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPoints {
    enabled: bool,
    run: u64,
    step: u64,
    fired: u32,
}

impl FaultPoints {
    /// No fault point fires: the runtime, and the simulator unless asked.
    pub const OFF: FaultPoints = FaultPoints { enabled: false, run: 0, step: 0, fired: 0 };

    /// Fault points armed by `run` (one word per run), firing by `step` (a
    /// fresh word per step).
    pub fn armed(run: u64, step: u64) -> FaultPoints {
        FaultPoints { enabled: true, run, step, fired: 0 }
    }

    /// Whether `site` fires now.
    pub fn fire(&mut self, site: &'static str) -> bool {
        if !self.enabled {
            return false;
        }
        let site_hash = crate::topology::fnv1a64(site.as_bytes());
        if !mix(self.run ^ site_hash).is_multiple_of(4) {
            return false;
        }
        self.step = mix(self.step);
        let fires = self.step.is_multiple_of(4);
        self.fired += u32::from(fires);
        fires
    }
}

/// SplitMix64's finalizer: a bijection that spreads bits.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_points_fire_only_when_armed_and_then_sometimes() {
        let mut off = FaultPoints::OFF;
        assert!((0..100).all(|_| !off.fire("x")));
        let sites: Vec<&'static str> = vec!["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
        let (mut armed, mut fired) = (0, 0);
        for run in 0..64u64 {
            for &site in &sites {
                let mut f = FaultPoints::armed(run, run * 7 + 1);
                let hits = (0..64).filter(|_| f.fire(site)).count();
                if hits > 0 {
                    armed += 1;
                    fired += hits;
                }
            }
        }
        let share = armed as f64 / (64.0 * sites.len() as f64);
        assert!((0.15..0.35).contains(&share), "a quarter of the sites are armed per run: {share}");
        let rate = fired as f64 / (armed as f64 * 64.0);
        assert!((0.15..0.35).contains(&rate), "an armed site fires a quarter of the time: {rate}");
        // The same words, the same decisions.
        let (mut a, mut b) = (FaultPoints::armed(3, 9), FaultPoints::armed(3, 9));
        assert!((0..50).all(|_| a.fire("s") == b.fire("s")));
    }
}
