//! The durability effect of the contract, end to end in the simulator, with
//! a protocol written for this test: a one-partition ledger whose replica
//! persists every write and acknowledges a commit only once its records are
//! durable (send-after-durable), and is rebuilt from its records after a
//! crash. With a disk that takes time to sync, crashes lose the records not
//! yet synced, and the acknowledgements that waited for them — never an
//! acknowledged write. Its session gives a commit up on a timer (a session
//! timer, driven by the simulator).
//!
//! The replica also spills every write, under its position, as it applies
//! it; after each restart it asks for what its spill holds above the writes
//! it recovered. The simulator writes a batch only once the records before
//! it are durable, so nothing can be there: a batch never outlives what it
//! holds.

use causeway_history::Status;
use causeway_protocol::contract::replica::ReplicaEffects;
use causeway_protocol::contract::Spill;
use causeway_protocol::session_core::{Awaiting, ClientRole, Reply, RoleEffects, SessionCore};
use causeway_protocol::{
    Addr, ClientId, CommitStamp, Guarantee, Key, Message, MsgClass, PhysicalMicros, Protocol, ReadTag, Replica,
    ReplicaCounters, ReplicaId, SessionError, SessionSetup, Timestamp, Topology, Tuning, TxId, Value,
};
use causeway_sim::{Crash, CrashTarget, DiskModel, Faults, SimConfig, SimReport, Simulation};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Restarts at which the ledger checked its spill against what it recovered.
static SPILLS_CHECKED: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum LedgerMsg {
    Read { tag: ReadTag, keys: Vec<Key> },
    Values { tag: ReadTag, values: Vec<(Key, Option<Value>)> },
    Write { txid: TxId, writes: Vec<(Key, Value)> },
    Written { txid: TxId },
}

impl Message for LedgerMsg {
    const CLASSES: &'static [MsgClass] = &[MsgClass::CLIENT];

    fn class(&self) -> MsgClass {
        MsgClass::CLIENT
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            LedgerMsg::Read { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            LedgerMsg::Values { tag, .. } => Some(*tag),
            _ => None,
        }
    }
}

/// The replica: every write it ever applied, in order.
struct LedgerReplica {
    id: ReplicaId,
    writes: Vec<(Key, Value)>,
    latest: BTreeMap<Key, Value>,
}

impl LedgerReplica {
    fn apply(&mut self, key: Key, value: Value) {
        self.latest.insert(key.clone(), value.clone());
        self.writes.push((key, value));
    }
}

impl Replica for LedgerReplica {
    type Message = LedgerMsg;
    type Timer = ();
    /// One write.
    type Record = (Key, Value);

    fn id(&self) -> ReplicaId {
        self.id
    }

    /// After a restart: anything spilled above what was recovered?
    fn start(&mut self, _now: PhysicalMicros, out: &mut ReplicaEffects<Self>) {
        if !self.writes.is_empty() {
            out.spill.push(Spill::Get { after: self.writes.len() as u64 });
        }
    }

    fn on_unspilled(
        &mut self,
        _now: PhysicalMicros,
        after: u64,
        entries: Vec<(u64, (Key, Value))>,
        _out: &mut ReplicaEffects<Self>,
    ) {
        let keys: Vec<u64> = entries.iter().map(|(k, _)| *k).collect();
        assert!(keys.is_empty(), "spilled writes {keys:?} outlived their records: only {after} were recovered");
        SPILLS_CHECKED.fetch_add(1, Ordering::Relaxed);
    }

    fn on_message(&mut self, _now: PhysicalMicros, from: Addr, msg: LedgerMsg, out: &mut ReplicaEffects<Self>) {
        match msg {
            LedgerMsg::Read { tag, keys } => {
                let values = keys.into_iter().map(|k| (k.clone(), self.latest.get(&k).cloned())).collect();
                out.send(from, LedgerMsg::Values { tag, values });
            }
            LedgerMsg::Write { txid, writes } => {
                let mut batch = Vec::new();
                for (k, v) in writes {
                    out.persist((k.clone(), v.clone()));
                    self.apply(k.clone(), v.clone());
                    batch.push((self.writes.len() as u64, (k, v)));
                }
                out.spill.push(Spill::Put(batch));
                out.send_after_durable(from, LedgerMsg::Written { txid });
            }
            LedgerMsg::Values { .. } | LedgerMsg::Written { .. } => {}
        }
    }

    fn on_timer(&mut self, _now: PhysicalMicros, _timer: (), _out: &mut ReplicaEffects<Self>) {}

    /// Replicas of the ledger never talk to each other.
    fn on_peer_lost(&mut self, _now: PhysicalMicros, _from: Addr, _out: &mut ReplicaEffects<Self>) {}

    /// The ledger's state is its history: nothing to compact.
    fn checkpoint(&self) -> Vec<(Key, Value)> {
        self.writes.clone()
    }

    fn is_quiescent(&self) -> bool {
        true
    }

    /// Every write held, each under its own name (`key#value`): the test
    /// reads the history's final lines as the list of surviving writes.
    fn latest_values(&self) -> Vec<(Key, Value)> {
        let name =
            |k: &Key, v: &Value| Key::from(format!("{}#{}", String::from_utf8_lossy(k), String::from_utf8_lossy(v)));
        self.writes.iter().map(|(k, v)| (name(k, v), v.clone())).collect()
    }

    fn counters(&self) -> ReplicaCounters {
        ReplicaCounters { versions: self.writes.len() as u64, ..ReplicaCounters::default() }
    }

    fn visible_upto(&self, _origin: causeway_protocol::DcId) -> Timestamp {
        Timestamp::MAX
    }

    fn version_metadata_bytes(&self) -> u64 {
        0
    }
}

/// A commit not acknowledged in time is given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CommitTimeout(TxId);

const COMMIT_TIMEOUT_US: u64 = 30_000;

struct LedgerClient {
    me: ClientId,
    replica: ReplicaId,
    txns: u64,
    committing: Option<TxId>,
}

impl ClientRole for LedgerClient {
    type Message = LedgerMsg;
    type Timer = CommitTimeout;
    type State = ();

    fn start(&mut self, _now: PhysicalMicros, _out: &mut RoleEffects<Self>) -> bool {
        self.txns += 1;
        true
    }

    fn request_read(&mut self, _now: PhysicalMicros, round: u32, keys: Vec<Key>, out: &mut RoleEffects<Self>) {
        let tag = ReadTag { tx: self.txns, round };
        out.send(Addr::Replica(self.replica), LedgerMsg::Read { tag, keys });
    }

    fn request_commit(&mut self, _now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut RoleEffects<Self>) {
        let txid = TxId((u64::from(self.me.index) << 32) | self.txns);
        self.committing = Some(txid);
        // The ledger's workload deletes nothing: every write has a value.
        let writes = writes.iter().filter_map(|(k, v)| Some((k.clone(), v.clone()?))).collect();
        out.send(Addr::Replica(self.replica), LedgerMsg::Write { txid, writes });
        out.set_timer(CommitTimeout(txid), COMMIT_TIMEOUT_US);
    }

    fn release(&mut self, _now: PhysicalMicros, _out: &mut RoleEffects<Self>) {}

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        _from: Addr,
        msg: LedgerMsg,
        awaiting: Awaiting,
        _out: &mut RoleEffects<Self>,
    ) -> Option<Reply> {
        match (msg, awaiting) {
            (LedgerMsg::Values { tag, values }, Awaiting::Read) if tag.tx == self.txns => Some(Reply::Values(values)),
            (LedgerMsg::Written { txid }, Awaiting::Commit) if Some(txid) == self.committing => {
                Some(Reply::Committed(CommitStamp { ts: Timestamp(self.txns), dc: self.me.dc, txid }))
            }
            _ => None,
        }
    }

    fn on_timer(
        &mut self,
        _now: PhysicalMicros,
        CommitTimeout(txid): CommitTimeout,
        awaiting: Option<Awaiting>,
        _out: &mut RoleEffects<Self>,
    ) -> Option<Reply> {
        (awaiting == Some(Awaiting::Commit) && Some(txid) == self.committing)
            .then(|| Reply::Failed(SessionError::UnknownTransaction))
    }

    fn committed(&mut self, _stamp: &CommitStamp, _writes: Vec<(Key, Option<Value>)>) {}

    fn finished(&mut self) {
        self.committing = None;
    }

    fn export_state(&self) {}

    fn import_state(&mut self, _state: ()) -> Result<(), SessionError> {
        Ok(())
    }
}

struct Ledger;

impl Protocol for Ledger {
    const NAME: &'static str = "ledger";
    const GUARANTEE: Guarantee = Guarantee::Eventual;
    const READS_NEVER_WAIT: bool = true;
    type Config = ();
    type Message = LedgerMsg;
    type Replica = LedgerReplica;
    type Session = SessionCore<LedgerClient>;

    fn configure(_: &Tuning) {}

    fn validate(topology: &Topology, _: &()) -> Result<(), String> {
        match (topology.dc_count(), topology.partition_count()) {
            (1, 1) => Ok(()),
            _ => Err("the ledger has one DC and one partition".into()),
        }
    }

    fn replica(id: ReplicaId, _: Arc<Topology>, _: &()) -> LedgerReplica {
        LedgerReplica { id, writes: Vec::new(), latest: BTreeMap::new() }
    }

    fn recover(id: ReplicaId, topology: Arc<Topology>, config: &(), records: Vec<(Key, Value)>) -> LedgerReplica {
        let mut r = Self::replica(id, topology, config);
        for (k, v) in records {
            r.apply(k, v);
        }
        r
    }

    fn session(setup: SessionSetup, _: &()) -> SessionCore<LedgerClient> {
        let role = LedgerClient { me: setup.id, replica: setup.coordinator, txns: 0, committing: None };
        SessionCore::new(&setup, role)
    }
}

fn ledger(seed: u64, sync_us: (u64, u64), crashes: Vec<Crash>) -> SimReport {
    let workload = WorkloadConfig {
        reads_per_txn: 2,
        writes_per_txn: 2,
        partitions_per_txn: 1,
        keys_per_partition: 50,
        abort_fraction: 0.0,
        rewrite_fraction: 0.0,
        ..WorkloadConfig::default()
    };
    let config = SimConfig {
        seed,
        dcs: 1,
        partitions: 1,
        clients_per_partition: 4,
        txns: None,
        duration_us: Some(400_000),
        workload: WorkloadKind::Random(workload),
        faults: Faults { crashes, disk: DiskModel { sync_us, ..DiskModel::default() }, ..Faults::default() },
        ..SimConfig::default()
    };
    Simulation::<Ledger>::new(config, &()).expect("a valid configuration").run()
}

/// The value of every write a committed transaction made (its last write of
/// each key: a session sends only that one).
fn acknowledged(report: &SimReport) -> BTreeSet<String> {
    let mut acked = BTreeSet::new();
    for t in report.history.txns.iter().filter(|t| t.status == Status::Committed) {
        let mut last: BTreeMap<&str, &str> = BTreeMap::new();
        for op in t.ops.iter().filter(|op| op.op == causeway_history::OpKind::Write) {
            last.insert(&op.key, op.value.as_deref().unwrap_or_default());
        }
        acked.extend(last.into_values().map(String::from));
    }
    acked
}

/// The writes the replica holds at the end.
fn held(report: &SimReport) -> BTreeSet<String> {
    report.history.finals.iter().flat_map(|f| f.state.values().cloned()).collect()
}

fn crashes() -> Vec<Crash> {
    let replica = CrashTarget::Replica { dc: 0, partition: 0 };
    [(50_000, 20_000), (150_000, 5_000), (250_000, 40_000)]
        .map(|(at_us, down_us)| Crash { target: replica, at_us, down_us, comes_back: Default::default() })
        .to_vec()
}

#[test]
fn crashes_lose_unsynced_records_and_unsent_acknowledgements_never_an_acknowledged_write() {
    let (mut lost_records, mut lost_acks, mut timeouts) = (0, 0, 0);
    for seed in 0..8 {
        let report = ledger(seed, (500, 8_000), crashes());
        assert_eq!(report.faults.crashes, 3, "seed {seed}");
        assert_eq!(report.faults.restarts, 3, "seed {seed}");
        let (acked, held) = (acknowledged(&report), held(&report));
        assert!(acked.len() > 100, "seed {seed}: only {} writes acknowledged", acked.len());
        let missing: Vec<_> = acked.difference(&held).collect();
        assert!(missing.is_empty(), "seed {seed}: acknowledged writes lost in a crash: {missing:?}");
        lost_records += report.faults.records_lost;
        lost_acks += report.faults.messages_lost;
        timeouts += report.history.txns.iter().filter(|t| t.status == Status::Aborted).count();
    }
    assert!(lost_records > 0, "no crash caught a record before its sync");
    assert!(SPILLS_CHECKED.load(Ordering::Relaxed) > 0, "no restart checked its spill");
    assert!(lost_acks > 0, "no acknowledgement waited for a record a crash lost");
    assert!(timeouts > 0, "no session timer gave a commit up");
}

/// The same runs on a disk that syncs at the end of each step: a crash finds
/// nothing unsynced.
#[test]
fn with_a_disk_that_syncs_at_once_a_crash_loses_nothing() {
    for seed in 0..4 {
        let report = ledger(seed, (0, 0), crashes());
        assert_eq!((report.faults.records_lost, report.faults.messages_lost), (0, 0), "seed {seed}");
        assert!(acknowledged(&report).is_subset(&held(&report)), "seed {seed}");
    }
}

/// Without crashes, every write of the run survives — including those of
/// transactions given up on a timer (they were applied, only late).
#[test]
fn without_crashes_every_acknowledged_write_is_held_and_reads_never_wait() {
    let report = ledger(1, (500, 8_000), Vec::new());
    assert_eq!(report.faults.crashes, 0);
    assert!(acknowledged(&report).is_subset(&held(&report)));
    assert_eq!(report.reads_waited, 0);
}
