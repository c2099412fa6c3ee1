//! What an EC replica makes durable, and the messages that wait for it.
//!
//! The records are what the replica must not forget, in the order it took
//! them: every write it applied — those of its own DC (from its own
//! coordinator or another partition's `Apply`), each at its position in
//! the stream to its peers, and the groups replicated from the other DCs,
//! each at its position in the sender's stream — and the reservations of
//! its clock and transaction ids ([`crate::recovery::reservations`]). A
//! replica is rebuilt by applying them again ([`super::replica::recover`]):
//! the store (last-writer-wins, so order does not matter), the newest write
//! from each DC, how far each peer's stream was received, and the writes of
//! its DC kept for the peers until they say what they hold. The commits its
//! coordinator waited on die with the process (their clients hear nothing
//! and give up: the outcome is unknown).
//!
//! A checkpoint ([`super::replica::checkpoint`]) is records too: the
//! versions held (`Stored`), the writes of this DC not yet acknowledged by
//! every peer (as the `Local` records they were), and where the streams
//! and the newest writes stand (`Positions`), with the reservations and
//! how far the stream was spilled (`Spilled`).
//!
//! Which messages wait for the records before them to be durable, and why:
//!
//! * `Applied` and `CommitResp` — a commit is acknowledged only when every
//!   partition it wrote holds the writes durably, or a crash could lose an
//!   acknowledged write;
//! * `Replicate`, `ResumeFrom` — a peer must never hold a position of our
//!   stream that a crash could take back and hand to another write;
//! * `Ack` — the peer forgets what it acknowledged.

use super::messages::EcWrites;
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::recovery::{Reserved, Reserving, StreamRecord};
use serde::{Deserialize, Serialize};

/// One record of an EC replica.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EcRecord {
    /// How far the clock and the transaction ids may have gone.
    Reserved(Reserved),
    /// A transaction of this DC applied here, at position `seq` of the
    /// stream to the peers.
    Local { seq: u64, tx: EcWrites },
    /// Transactions of DC `source` applied here, at position `upto` of its
    /// replica's stream.
    Replicated { source: DcId, upto: u64, txs: Vec<EcWrites> },
    /// In a checkpoint: the versions held of transactions of DC `source`,
    /// applied again and nothing else.
    Stored { source: DcId, txs: Vec<EcWrites> },
    /// In a checkpoint: the position of the last write of this DC in the
    /// stream to the peers, the newest commit time applied from each DC,
    /// and per peer's DC the position of the last group taken from it.
    Positions { seq: u64, newest_from: Vec<Timestamp>, taken: Vec<(DcId, u64)> },
    /// A group of the stream to the peers, the writes at the positions up
    /// to `upto`, as it is spilled ([`crate::contract::spill`]); never in
    /// the log.
    Kept { upto: u64, txs: Vec<EcWrites> },
    /// The stream's groups up to `upto` were spilled: the driver's disk
    /// holds those a peer may still lack. Kept in checkpoints while any
    /// may be.
    Spilled { upto: u64 },
}

impl StreamRecord<u64, EcWrites> for EcRecord {
    fn kept(upto: u64, txs: Vec<EcWrites>) -> Self {
        EcRecord::Kept { upto, txs }
    }

    fn into_kept(self) -> Option<(u64, Vec<EcWrites>)> {
        match self {
            EcRecord::Kept { upto, txs } => Some((upto, txs)),
            _ => None,
        }
    }

    fn spilled(upto: u64) -> Self {
        EcRecord::Spilled { upto }
    }
}

impl From<Reserved> for EcRecord {
    fn from(r: Reserved) -> Self {
        EcRecord::Reserved(r)
    }
}

impl Reserving for EcRecord {
    fn reservation(&self) -> Option<Reserved> {
        match self {
            EcRecord::Reserved(r) => Some(*r),
            _ => None,
        }
    }
}
