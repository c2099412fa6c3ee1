//! The EC client session: the shared session, with EC's side — reads go
//! straight to the partitions of its DC in one round and return whatever
//! each has applied; writes are sent to the coordinator at commit.

use super::messages::EcMsg;
use crate::contract::{CommitStamp, Effects, Key, ReadTag, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, ReplicaId};
use crate::session_core::{Awaiting, ClientRole, Reply, SessionCore};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::Arc;

/// An EC session.
pub type EcSession = SessionCore<EcClient>;

/// A read round being gathered from the partitions.
#[derive(Debug)]
struct Gather {
    tag: ReadTag,
    /// Partitions that have not answered yet.
    waiting: usize,
    values: Vec<(Key, Option<Value>)>,
}

/// EC's side of a session.
#[derive(Debug)]
pub struct EcClient {
    id: ClientId,
    coordinator: ReplicaId,
    topology: Arc<Topology>,
    /// Transactions begun: with the read round, names a read's tag.
    txns: u64,
    reading: Option<Gather>,
    /// Commit time of the last update transaction: the next one is later.
    hwt: Timestamp,
}

impl EcClient {
    pub fn new(id: ClientId, coordinator: ReplicaId, topology: Arc<Topology>) -> Self {
        EcClient { id, coordinator, topology, txns: 0, reading: None, hwt: Timestamp::ZERO }
    }
}

/// What an EC session token carries: only the time of its last commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcSessionState {
    pub hwt: Timestamp,
}

type Out = Effects<EcMsg, Infallible>;

impl ClientRole for EcClient {
    type Message = EcMsg;
    type Timer = Infallible;
    type State = EcSessionState;

    /// Every read returns the newest version, even of a key read before.
    const REPEATABLE_READS: bool = false;

    /// No snapshot to fetch: the transaction starts at once.
    fn start(&mut self, _now: PhysicalMicros, _out: &mut Out) -> bool {
        self.txns += 1;
        true
    }

    fn request_read(&mut self, _now: PhysicalMicros, round: u32, keys: Vec<Key>, out: &mut Out) {
        let tag = ReadTag { tx: self.txns, round };
        let slices = self.topology.group_by_partition(keys, |k| k);
        let waiting = slices.len();
        for (partition, keys) in slices {
            out.send(Addr::Replica(ReplicaId { partition, ..self.coordinator }), EcMsg::ReadReq { tag, keys });
        }
        self.reading = Some(Gather { tag, waiting, values: Vec::new() });
    }

    fn request_commit(&mut self, _now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut Out) {
        out.send(Addr::Replica(self.coordinator), EcMsg::CommitReq { hwt: self.hwt, writes: writes.to_vec() });
    }

    /// Nothing at the cluster to release.
    fn release(&mut self, _now: PhysicalMicros, _out: &mut Out) {}

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        from: Addr,
        msg: EcMsg,
        awaiting: Awaiting,
        _out: &mut Out,
    ) -> Option<Reply> {
        let from_my_dc = matches!(from, Addr::Replica(r) if r.dc == self.id.dc);
        let from_coordinator = from == Addr::Replica(self.coordinator);
        match (msg, awaiting) {
            (EcMsg::ReadResp { tag, values }, Awaiting::Read) if from_my_dc => {
                let gather = self.reading.as_mut().filter(|g| g.tag == tag)?;
                gather.values.extend(values);
                gather.waiting -= 1;
                if gather.waiting > 0 {
                    return None;
                }
                self.reading.take().map(|g| Reply::Values(g.values))
            }
            (EcMsg::CommitResp { tx, ct }, Awaiting::Commit) if from_coordinator => {
                Some(Reply::Committed(CommitStamp { ts: ct, dc: self.id.dc, txid: tx }))
            }
            (EcMsg::CommitUnknown { ct, .. }, Awaiting::Commit) if from_coordinator => {
                // If it took effect, the next commit must still be later.
                self.hwt = self.hwt.max(ct);
                Some(Reply::Failed(SessionError::OutcomeUnknown))
            }
            (EcMsg::TxError { error }, Awaiting::Commit) if from_coordinator => Some(Reply::Failed(error)),
            _ => None,
        }
    }

    fn committed(&mut self, stamp: &CommitStamp, _writes: Vec<(Key, Option<Value>)>) {
        self.hwt = self.hwt.max(stamp.ts);
    }

    fn finished(&mut self) {
        self.reading = None;
    }

    fn export_state(&self) -> EcSessionState {
        EcSessionState { hwt: self.hwt }
    }

    fn import_state(&mut self, state: EcSessionState) -> Result<(), SessionError> {
        self.hwt = self.hwt.max(state.hwt);
        Ok(())
    }
}
