//! Per-node physical clocks: virtual time shifted by an offset and stretched
//! by a drift. Monotonic, as the protocols assume of physical clocks.

/// Virtual time starts here, so that clocks with a negative offset still
/// read positive values.
pub const EPOCH_US: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeClock {
    pub offset_us: i64,
    pub drift_ppm: i32,
}

impl NodeClock {
    pub const PERFECT: NodeClock = NodeClock { offset_us: 0, drift_ppm: 0 };

    /// The reading of this clock at virtual time `t`. Drift accumulates from
    /// the start of the run ([`EPOCH_US`]): measured from time zero, 50 ppm
    /// would already be a 50 ms offset at the first event.
    pub fn read(&self, t: u64) -> u64 {
        let elapsed = t as i128 - EPOCH_US as i128;
        let drift = (elapsed * self.drift_ppm as i128) / 1_000_000;
        (t as i128 + self.offset_us as i128 + drift).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_drift_apply_and_time_never_goes_back() {
        let c = NodeClock { offset_us: -5_000, drift_ppm: 100 };
        assert_eq!(c.read(EPOCH_US), EPOCH_US - 5_000, "no drift accumulated yet at the start");
        assert_eq!(c.read(EPOCH_US + 1_000_000), EPOCH_US + 1_000_000 - 5_000 + 100);
        let mut last = 0;
        for t in (EPOCH_US..EPOCH_US + 10_000).step_by(7) {
            let r = c.read(t);
            assert!(r >= last);
            last = r;
        }
        let slow = NodeClock { offset_us: 0, drift_ppm: -100 };
        assert_eq!(slow.read(EPOCH_US + 1_000_000), EPOCH_US + 1_000_000 - 100);
    }
}
