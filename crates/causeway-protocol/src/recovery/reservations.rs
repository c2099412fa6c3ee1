//! The reservations that keep a restarted replica from handing out a
//! timestamp or a transaction id it handed out before its crash: ahead of
//! its clock and its id counter, a replica makes durable how far they may
//! have gone, and a restarted replica resumes above.

use crate::contract::Effects;
use crate::hlc::{Hlc, Timestamp};
use serde::{Deserialize, Serialize};

/// A reservation, as a protocol's record carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reserved {
    /// The clock may have handed out timestamps up to this one.
    Clock(Timestamp),
    /// Transaction ids below this counter may have been handed out.
    TxIds(u64),
}

/// A protocol's record type that carries reservations.
pub trait Reserving: From<Reserved> {
    /// The reservation this record carries, if it is one.
    fn reservation(&self) -> Option<Reserved>;
}

/// How far ahead of the clock a reservation reaches, in microseconds: a
/// new one is made when the clock comes within half of it. A restarted
/// replica resumes its clock at its reservation, up to this far ahead of
/// real time, so it stays below a cluster's usual `max_clock_offset_ms`
/// (500): peers take a restarted replica's messages at once rather than
/// hold them until real time catches up. (Crashes that follow each other
/// faster than real time catches up push the clock further, a window
/// each.) About eight records a second per replica.
pub const CLOCK_WINDOW_US: u64 = 250_000;
/// How many transaction ids a reservation covers; a new one is made when
/// half are used.
pub const TXID_BLOCK: u64 = 1 << 16;

/// The clock and transaction-id reservations of a replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reservations {
    clock: Timestamp,
    txids: u64,
}

impl Reservations {
    /// Reservations restored from a record.
    pub fn restore<R: Reserving>(&mut self, record: &R) {
        match record.reservation() {
            Some(Reserved::Clock(t)) => self.clock = self.clock.max(t),
            Some(Reserved::TxIds(n)) => self.txids = self.txids.max(n),
            None => {}
        }
    }

    /// The reservations as records, for a checkpoint: replayed, they
    /// restore exactly these.
    pub fn records<R: From<Reserved>>(&self) -> [R; 2] {
        [Reserved::Clock(self.clock).into(), Reserved::TxIds(self.txids).into()]
    }

    /// Where a restarted replica's clock and transaction counter resume:
    /// above everything the previous incarnation may have handed out.
    pub fn resume_points(&self) -> (Timestamp, u64) {
        (self.clock, self.txids)
    }

    /// After each step: reserves ahead of the clock and the transaction
    /// counter when they come near the reservation. A step that went
    /// *beyond* it (a timestamp observed far ahead) may have revealed a
    /// value a crash would let the next incarnation hand out again, so its
    /// messages wait for the new reservation to be durable.
    pub fn after_step<M, T, R: Reserving>(&mut self, hlc: &Hlc, next_tx: u64, out: &mut Effects<M, T, R>) {
        let mut beyond = false;
        let clock = hlc.current();
        if clock.physical() + CLOCK_WINDOW_US / 2 > self.clock.physical() {
            beyond |= clock > self.clock;
            self.clock = Timestamp::from_physical(clock.physical() + CLOCK_WINDOW_US);
            out.persist(Reserved::Clock(self.clock).into());
        }
        if next_tx + TXID_BLOCK / 2 > self.txids {
            beyond |= next_tx > self.txids;
            self.txids = next_tx + TXID_BLOCK;
            out.persist(Reserved::TxIds(self.txids).into());
        }
        if beyond && !out.messages.is_empty() {
            let mut held: Vec<_> = out.messages.drain(..).collect();
            held.append(&mut out.after_durable);
            out.after_durable = held;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Addr, ReplicaId};

    impl Reserving for Reserved {
        fn reservation(&self) -> Option<Reserved> {
            Some(*self)
        }
    }

    type Out = Effects<&'static str, (), Reserved>;

    #[test]
    fn a_step_beyond_the_reservation_waits_for_the_new_one() {
        let (mut r, mut hlc, mut out) = (Reservations::default(), Hlc::new(), Out::default());
        hlc.observe(10, Timestamp::ZERO);
        out.send(Addr::Replica(ReplicaId::new(0, 0)), "a timestamp");
        r.after_step(&hlc, 0, &mut out);
        assert_eq!(out.records.len(), 2, "clock and ids reserved");
        assert!(out.messages.is_empty() && out.after_durable.len() == 1, "the message waits");
        let (clock, ids) = r.resume_points();
        assert!(clock > hlc.current() && ids == TXID_BLOCK);

        let mut restored = Reservations::default();
        out.records.iter().for_each(|record| restored.restore(record));
        assert_eq!(restored, r, "the records restore the reservations");

        let mut out = Out::default();
        out.send(Addr::Replica(ReplicaId::new(0, 0)), "within");
        r.after_step(&hlc, 5, &mut out);
        assert!(out.records.is_empty() && out.messages.len() == 1, "within the reservation nothing waits");

        // Near the end of the window: reserved again, ahead of time.
        hlc.observe(10 + CLOCK_WINDOW_US * 3 / 4, Timestamp::ZERO);
        let mut out = Out::default();
        out.send(Addr::Replica(ReplicaId::new(0, 0)), "near");
        r.after_step(&hlc, TXID_BLOCK / 2 + 1, &mut out);
        assert_eq!(out.records.len(), 2);
        assert_eq!(out.messages.len(), 1, "still within the old reservation: no wait");
    }
}
