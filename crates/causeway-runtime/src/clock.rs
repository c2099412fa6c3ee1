//! The real clock, read where the sans-IO core expects `now`.

use causeway_protocol::PhysicalMicros;
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch. A clock set before 1970 reads 0: the
/// HLC then runs on its logical part, which keeps it monotonic.
pub fn now_micros() -> PhysicalMicros {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}
