//! Every message PrompTCC sends.

use super::vclock::Wire;
use crate::contract::{Key, Message, MsgClass, ReadTag, Value};
use crate::hlc::Timestamp;
use crate::ids::{ClientId, PartitionId};
use crate::write_only::{Decided, TxnMessages, WtxId};
use serde::{Deserialize, Serialize};

/// One key read: its value (`None`: no version, or a delete).
pub type ReadValue = (Key, Option<Value>);

/// What a partition says of its snapshot vector with a first round's
/// values, for the client to tell whether they are of one snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cover {
    /// PrompTCC-naive: `S_i` itself (Alg. 2 line 43); the values are of the
    /// snapshot if it covers them all.
    Vector(Wire),
    /// PrompTCC (§V): two scalars — `S_i[i]`, below which this partition
    /// has ended every transaction it numbered, and the smallest entry of
    /// `S_i` — and the commit timestamps of the versions of the keys read
    /// that are newer than those returned but not yet visible here (almost
    /// always none). The values are of the snapshot if it is at or below
    /// `own` at this partition (no transaction still open here is in it)
    /// and holds none of those versions.
    Floor { own: Timestamp, floor: Timestamp, pending: Vec<Wire> },
}

/// The commit timestamps of the versions a read returns. The client only
/// ever joins them (a first round) or tests them against its snapshot (a
/// round at it), for which their join says as much.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadTs {
    /// PrompTCC-naive: one per version, in full.
    Each(Vec<Wire>),
    /// PrompTCC (§V's local-max-read-ts): their join, above the client's
    /// floor.
    Joined(Wire),
    /// PrompTCC: no entry of theirs is above the client's floor (as many
    /// bytes as an empty list).
    AtFloor,
}

/// Stable-time gossip inside the DC.
pub const STABILIZATION: MsgClass = MsgClass::new(2, "stabilization");

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PtccMsg {
    // Client ↔ partitions.
    /// A read round. `deps`: the client's `D_c` — in a first round — or,
    /// `at_snapshot`, the transaction's snapshot (a second round, and the
    /// later reads of a transaction); the partition adopts it into `S_i`
    /// (Alg. 2 lines 37, 46) and reads the newest visible versions (line
    /// 40), at the snapshot only versions within it (line 49).
    Read { tag: ReadTag, keys: Vec<Key>, deps: Wire, at_snapshot: bool },
    /// `cover`: what the client needs of `S_i` after the read. `read_ts`:
    /// the commit timestamps of the versions returned.
    ReadResp { tag: ReadTag, cover: Cover, values: Vec<ReadValue>, read_ts: ReadTs },
    /// A read at a snapshot whose version of a key may have been
    /// collected (§VII): the transaction must start again.
    TooOld { tag: ReadTag },
    /// A write-only transaction's writes to one partition (Alg. 1 line 7).
    Write {
        tx: WtxId,
        writes: Vec<(Key, Option<Value>)>,
        participants: Vec<PartitionId>,
        coordinator: PartitionId,
        deps: Wire,
    },
    /// The transaction committed at the sending partition; with the
    /// sequence numbers every participant gave it.
    Committed { tx: WtxId, decided: Decided },
    /// The transaction was given up (a participant never received it):
    /// nothing of it will ever be visible.
    Aborted { tx: WtxId },
    // Between the partitions of a transaction.
    /// A participant prepared `tx` at `seq` (Alg. 2 line 8); it repeats what
    /// the coordinator needs if the client's own message to it is late.
    Prepared { tx: WtxId, seq: Timestamp, participants: Vec<PartitionId>, client: ClientId },
    /// The coordinator's decision: every participant's number (line 16).
    Commit { tx: WtxId, decided: Decided },
    /// A participant has waited too long for the decision of `tx`.
    Resolve { tx: WtxId, participants: Vec<PartitionId>, client: ClientId },
    /// The coordinator asks whether `tx` is prepared; a participant that
    /// has not prepared it never will (it fences the id).
    Query { tx: WtxId },
    /// The answer: the number `tx` got here, or none (fenced).
    Vote { tx: WtxId, seq: Option<Timestamp> },
    /// `tx` is given up: drop what was prepared.
    Abort { tx: WtxId },
    /// To the coordinator: `tx` committed at the sending participant (the
    /// coordinator answers the client once every participant has).
    CommittedHere { tx: WtxId },
    /// To itself: the outcome records up to the `upto`-th are durable, and
    /// may take effect.
    Logged { upto: u64 },
    // Stabilization over the DC's tree (§IV-E).
    /// Up the tree: each partition's own entry `S_p[p]` in the subtree.
    Report { entries: Vec<(PartitionId, Timestamp)> },
    /// Down the tree: the root's snapshot vector.
    Stable { snapshot: Wire },
}

impl Message for PtccMsg {
    const CLASSES: &'static [MsgClass] = &[MsgClass::CLIENT, MsgClass::TRANSACTION, STABILIZATION];

    fn class(&self) -> MsgClass {
        match self {
            PtccMsg::Read { .. }
            | PtccMsg::ReadResp { .. }
            | PtccMsg::TooOld { .. }
            | PtccMsg::Write { .. }
            | PtccMsg::Committed { .. }
            | PtccMsg::Aborted { .. } => MsgClass::CLIENT,
            PtccMsg::Prepared { .. }
            | PtccMsg::Commit { .. }
            | PtccMsg::Resolve { .. }
            | PtccMsg::Query { .. }
            | PtccMsg::Vote { .. }
            | PtccMsg::Abort { .. }
            | PtccMsg::CommittedHere { .. }
            | PtccMsg::Logged { .. } => MsgClass::TRANSACTION,
            PtccMsg::Report { .. } | PtccMsg::Stable { .. } => STABILIZATION,
        }
    }

    fn is_background(&self) -> bool {
        self.class() == STABILIZATION
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            PtccMsg::Read { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            PtccMsg::ReadResp { tag, .. } | PtccMsg::TooOld { tag } => Some(*tag),
            _ => None,
        }
    }
}

/// What the shared write-only transactions say, in PrompTCC's messages.
impl TxnMessages for PtccMsg {
    fn committed(tx: WtxId, decided: Decided) -> Self {
        PtccMsg::Committed { tx, decided }
    }
    fn aborted(tx: WtxId) -> Self {
        PtccMsg::Aborted { tx }
    }
    fn prepared(tx: WtxId, seq: Timestamp, participants: Vec<PartitionId>, client: ClientId) -> Self {
        PtccMsg::Prepared { tx, seq, participants, client }
    }
    fn commit(tx: WtxId, decided: Decided) -> Self {
        PtccMsg::Commit { tx, decided }
    }
    fn resolve(tx: WtxId, participants: Vec<PartitionId>, client: ClientId) -> Self {
        PtccMsg::Resolve { tx, participants, client }
    }
    fn query(tx: WtxId) -> Self {
        PtccMsg::Query { tx }
    }
    fn vote(tx: WtxId, seq: Option<Timestamp>) -> Self {
        PtccMsg::Vote { tx, seq }
    }
    fn abort(tx: WtxId) -> Self {
        PtccMsg::Abort { tx }
    }
    fn logged(upto: u64) -> Self {
        PtccMsg::Logged { upto }
    }
    fn committed_here(tx: WtxId) -> Option<Self> {
        Some(PtccMsg::CommittedHere { tx })
    }
}
