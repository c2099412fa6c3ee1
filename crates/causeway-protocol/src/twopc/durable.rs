//! What a replica of the family makes durable, and the reservations that
//! keep a restarted replica from handing out a timestamp or a transaction id
//! it handed out before its crash.
//!
//! The records are the inputs that changed what the replica must not forget,
//! in the order it took them: a prepare and its proposal, a decision taken
//! as coordinator, a decision learned as cohort, a group replicated from
//! another DC. A replica is rebuilt by taking them again
//! ([`crate::twopc::replica::recover`]). What is derived from them — the
//! version vector's local entry, the stable times, the coordinator's running
//! transactions — is not recorded: the first is recomputed by the apply
//! loop, the second learned again from the DC, and the third dies with the
//! process (its clients hear that the outcome is unknown).
//!
//! Which messages wait for the records before them to be durable, and why:
//!
//! * `PrepareResp` — a proposal must survive a crash of the cohort, or a
//!   commit acknowledged to a client could lose its writes here;
//! * `Commit` and `CommitResp` — the coordinator's decision must survive
//!   it, or a cohort that asks after a crash would be told "aborted" about a
//!   transaction a client was told committed;
//! * `Replicate`, `Heartbeat` and every stabilization message — they carry
//!   what this replica has installed, which the DC's stable times and the
//!   other DCs' version vectors build on; a crash must not take back what
//!   they promised;
//! * `Ack` — the peer forgets what it acknowledged.

use crate::contract::Effects;
use crate::hlc::{Hlc, Timestamp};
use crate::ids::{Addr, DcId, TxId};
use serde::{Deserialize, Serialize};

/// One record of a family replica: `P` what its cohort keeps of a prepared
/// transaction, `W` a replicated transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FamilyRecord<P, W> {
    /// The clock may have handed out timestamps up to this one.
    ClockReserved(Timestamp),
    /// Transaction ids below this counter may have been handed out.
    TxIdsReserved(u64),
    /// The cohort prepared `tx` for `coordinator` and proposed `pt`.
    Prepared { tx: TxId, pt: Timestamp, coordinator: Addr, prepared: P },
    /// The cohort learned that `tx` committed at `ct`.
    Committed { tx: TxId, ct: Timestamp },
    /// The cohort learned that `tx` never commits.
    Aborted { tx: TxId },
    /// As coordinator, this replica decided that `tx` commits at `ct`.
    Decided { tx: TxId, ct: Timestamp },
    /// A group of transactions committed at `ct` in DC `source`, installed.
    Applied { source: DcId, ct: Timestamp, txs: Vec<W> },
}

/// How far ahead of the clock a reservation reaches, in microseconds: a
/// new one is made when the clock comes within half of it.
pub const CLOCK_WINDOW_US: u64 = 1_000_000;
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
    pub fn restore<P, W>(&mut self, record: &FamilyRecord<P, W>) {
        match *record {
            FamilyRecord::ClockReserved(t) => self.clock = self.clock.max(t),
            FamilyRecord::TxIdsReserved(n) => self.txids = self.txids.max(n),
            _ => {}
        }
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
    pub fn after_step<M, T, P, W>(&mut self, hlc: &Hlc, next_tx: u64, out: &mut Effects<M, T, FamilyRecord<P, W>>) {
        let mut beyond = false;
        let clock = hlc.current();
        if clock.physical() + CLOCK_WINDOW_US / 2 > self.clock.physical() {
            beyond |= clock > self.clock;
            self.clock = Timestamp::from_physical(clock.physical() + CLOCK_WINDOW_US);
            out.persist(FamilyRecord::ClockReserved(self.clock));
        }
        if next_tx + TXID_BLOCK / 2 > self.txids {
            beyond |= next_tx > self.txids;
            self.txids = next_tx + TXID_BLOCK;
            out.persist(FamilyRecord::TxIdsReserved(self.txids));
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

    type Out = Effects<&'static str, (), FamilyRecord<(), ()>>;

    #[test]
    fn a_step_beyond_the_reservation_waits_for_the_new_one() {
        let (mut r, mut hlc, mut out) = (Reservations::default(), Hlc::new(), Out::default());
        hlc.observe(10, Timestamp::ZERO);
        out.send(Addr::Replica(crate::ids::ReplicaId::new(0, 0)), "a timestamp");
        r.after_step(&hlc, 0, &mut out);
        assert_eq!(out.records.len(), 2, "clock and ids reserved");
        assert!(out.messages.is_empty() && out.after_durable.len() == 1, "the message waits");
        let (clock, ids) = r.resume_points();
        assert!(clock > hlc.current() && ids == TXID_BLOCK);

        let mut out = Out::default();
        out.send(Addr::Replica(crate::ids::ReplicaId::new(0, 0)), "within");
        r.after_step(&hlc, 5, &mut out);
        assert!(out.records.is_empty() && out.messages.len() == 1, "within the reservation nothing waits");

        // Near the end of the window: reserved again, ahead of time.
        hlc.observe(10 + CLOCK_WINDOW_US * 3 / 4, Timestamp::ZERO);
        let mut out = Out::default();
        out.send(Addr::Replica(crate::ids::ReplicaId::new(0, 0)), "near");
        r.after_step(&hlc, TXID_BLOCK / 2 + 1, &mut out);
        assert_eq!(out.records.len(), 2);
        assert_eq!(out.messages.len(), 1, "still within the old reservation: no wait");
    }
}
