//! What a replica of the family makes durable — its clock and
//! transaction-id reservations among it ([`crate::recovery::reservations`]).
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
//! A checkpoint ([`crate::twopc::replica::checkpoint`]) is records too: what
//! replaying every record so far would rebuild, compacted — the versions
//! the store still holds (`Installed`), the commits waiting for the apply
//! loop (`Queued`), the groups of the stream to the peers not yet
//! acknowledged by all (`Kept`) and how far they were spilled
//! (`Spilled`), each peer's stream position (an `Applied`
//! of no transaction), and the prepared transactions, kept decisions and
//! reservations as their own records say them. The last three variants
//! appear only in checkpoints.
//!
//! Which messages wait for the records before them to be durable, and why:
//!
//! * `PrepareResp` — a proposal must survive a crash of the cohort, or a
//!   commit acknowledged to a client could lose its writes here;
//! * `Commit` and `CommitResp` — the coordinator's decision must survive
//!   it, or a cohort that asks after a crash would be told "aborted" about a
//!   transaction a client was told committed. A transaction that wrote one
//!   partition has no decision: its cohort's `Prepared` and `Alone` are
//!   durable before its `PrepareResp` leaves, and before it commits (by a
//!   `Commit` to itself, which waits for them too, so that no read sees a
//!   version a crash could take back); a restart commits what they say, and
//!   its coordinator's `CommitResp` waits for nothing;
//! * `Replicate`, `Heartbeat` and every stabilization message — they carry
//!   what this replica has installed, which the DC's stable times and the
//!   other DCs' version vectors build on; a crash must not take back what
//!   they promised;
//! * `Ack` — the peer forgets what it acknowledged.

use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId, TxId};
use crate::recovery::{Reserved, Reserving, StreamRecord};
use serde::{Deserialize, Serialize};

/// One record of a family replica: `P` what its cohort keeps of a prepared
/// transaction, `W` a replicated transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FamilyRecord<P, W> {
    /// How far the clock and the transaction ids may have gone.
    Reserved(Reserved),
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
    /// In a checkpoint: versions the store holds, of transactions committed
    /// at `ct` in DC `source` — installed again, and nothing else.
    Installed { source: DcId, ct: Timestamp, txs: Vec<W> },
    /// In a checkpoint: `tx` committed here at `ct` and waits for the apply
    /// loop to install (Wren) and replicate it.
    Queued { tx: TxId, ct: Timestamp, writes: W },
    /// In a checkpoint: a group of this replica's stream, at `ct`, that a
    /// peer has not acknowledged yet — kept to be resent. Also how a group
    /// is spilled ([`crate::contract::spill`]).
    Kept { ct: Timestamp, txs: Vec<W> },
    /// The replica lost its state and asks for it
    /// ([`crate::recovery::seed`]): until [`FamilyRecord::Reseeded`]
    /// follows, a restart asks again, and keeps only the reservations
    /// recorded since.
    Reseeding,
    /// The records of the re-seed precede this one: it is complete. The
    /// replica serves no read at a snapshot below `horizon`: the versions
    /// such a read needs may have been collected where it took its own
    /// ([`crate::recovery::seed::SeedFacts::collected_upto`]). Kept in
    /// checkpoints. Nor any read at all, nor a part in the DC's
    /// stabilization, while for some DC of `holes` its replica's stream has
    /// not brought it up to the position beside it (what the lost replica
    /// may have received; that replica may also have been re-seeding and
    /// given nothing).
    Reseeded { horizon: Timestamp, holes: Vec<(DcId, Timestamp)> },
    /// Follows `tx`'s `Prepared` in the same step: `tx` wrote only this
    /// partition, and commits at its proposal by itself (one phase) — its
    /// coordinator records no decision. Replayed, it is committed.
    Alone { tx: TxId },
    /// A stable snapshot this replica knew, at or above everything it has
    /// told others the oldest snapshot in use may be (PaRiS's UST, at the
    /// root of a DC): a restart resumes from it instead of waiting to hear
    /// from every DC again ([`super::FamilyReplica::restore_stable`]).
    /// Kept in checkpoints.
    Stable { at: Timestamp },
    /// The groups of this replica's stream up to `upto` were spilled: the
    /// driver's disk holds those a peer may still lack. Kept in
    /// checkpoints while any may be. (Last, as new variants go: records
    /// on disk are read by their variant's index.)
    Spilled { upto: Timestamp },
}

impl<P, W> From<Reserved> for FamilyRecord<P, W> {
    fn from(r: Reserved) -> Self {
        FamilyRecord::Reserved(r)
    }
}

impl<P, W> StreamRecord<Timestamp, W> for FamilyRecord<P, W> {
    fn kept(ct: Timestamp, txs: Vec<W>) -> Self {
        FamilyRecord::Kept { ct, txs }
    }

    fn into_kept(self) -> Option<(Timestamp, Vec<W>)> {
        match self {
            FamilyRecord::Kept { ct, txs } => Some((ct, txs)),
            _ => None,
        }
    }

    fn spilled(upto: Timestamp) -> Self {
        FamilyRecord::Spilled { upto }
    }
}

impl<P, W> Reserving for FamilyRecord<P, W> {
    fn reservation(&self) -> Option<Reserved> {
        match self {
            FamilyRecord::Reserved(r) => Some(*r),
            _ => None,
        }
    }
}
