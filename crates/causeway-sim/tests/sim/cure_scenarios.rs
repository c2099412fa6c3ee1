//! Cure and H-Cure on the hand-cranked harness: the Wren paper's Figure 1,
//! where Cure and H-Cure block a read that Wren answers at once; clock skew
//! alone, which blocks Cure but not H-Cure; and read-your-writes without a
//! client cache.

use crate::common;

use causeway_protocol::cure::{Cure, CureConfig, CureMsg, CureReplica, CureTimer, HCure, WakeReads};
use causeway_protocol::twopc::FamilyReplica;
use causeway_protocol::wren::{Wren, WrenConfig, WrenMsg, WrenTimer};
use causeway_protocol::{ClientId, DcId, PartitionId, Protocol, ReplicaId, SessionEvent, Topology};
use causeway_sim::harness::{Harness, InFlight, Timer};
use common::scenario::{commit_where, key_in, run_txn, s};

const START_US: u64 = 1_000_000;

/// What the Figure 1 schedule needs to know of a protocol.
trait Scenario: Protocol {
    fn is_commit(msg: &Self::Message) -> bool;
    /// The periodic timers, in the order one round fires them.
    fn periodic() -> Vec<Timer<Self>>;
}

impl Scenario for Wren {
    fn is_commit(msg: &WrenMsg) -> bool {
        matches!(msg, WrenMsg::Commit { .. })
    }
    fn periodic() -> Vec<WrenTimer> {
        vec![WrenTimer::Apply, WrenTimer::Stabilize]
    }
}

impl Scenario for Cure {
    fn is_commit(msg: &CureMsg) -> bool {
        matches!(msg, CureMsg::Commit { .. })
    }
    fn periodic() -> Vec<CureTimer> {
        vec![CureTimer::Apply, CureTimer::Stabilize]
    }
}

impl Scenario for HCure {
    fn is_commit(msg: &CureMsg) -> bool {
        Cure::is_commit(msg)
    }
    fn periodic() -> Vec<CureTimer> {
        Cure::periodic()
    }
}

fn client(index: u32) -> ClientId {
    ClientId { dc: DcId(0), index }
}

fn values(event: Option<SessionEvent>) -> Option<Vec<Option<String>>> {
    match event? {
        SessionEvent::Read(values) => {
            Some(values.into_iter().map(|(_, v)| v.map(|v| String::from_utf8(v.to_vec()).unwrap())).collect())
        }
        other => panic!("expected a read result, got {other:?}"),
    }
}

/// One round of the periodic timers everywhere, `step_us` later,
/// delivering what `pick` allows.
fn tick<P: Scenario>(h: &mut Harness<P>, step_us: u64, pick: &dyn Fn(&InFlight<P::Message>) -> bool) {
    h.advance_clocks(step_us);
    for timer in P::periodic() {
        h.fire_all(timer);
        h.deliver_where(pick);
    }
}

const PX: ReplicaId = ReplicaId::at(DcId(0), PartitionId(0));

/// What c1 saw on the Figure 1 schedule.
struct Figure1 {
    /// The read's result before T2's commit reaches p_x, if it had one.
    before_commit: Option<Vec<Option<String>>>,
    /// Read slices that waited, counted before the commit is released.
    waited_before_commit: u64,
    /// The read's result once everything is delivered.
    result: Vec<Option<String>>,
}

/// The schedule of Figure 1: X1 and Y1 are stable; T2 writes X2 and Y2; p_y
/// commits it but the Commit to p_x is held back; then c1 — coordinated by
/// p_z, whose clock is past T2's commit time — reads x and y.
fn figure_1<P: Scenario>(config: P::Config) -> Figure1 {
    let topology = Topology::full(1, 4).unwrap();
    let (x, y) = (key_in(&topology, 0, "x"), key_in(&topology, 1, "y"));
    let (pz, pw) = (ReplicaId::new(0, 2), ReplicaId::new(0, 3));
    let mut h = Harness::<P>::new(topology, config, START_US);
    let (c0, c1, c2) = (client(0), client(1), client(2));
    h.add_session(c0, pw);
    h.add_session(c1, pz);
    h.add_session(c2, pw);
    let everything = |_: &InFlight<P::Message>| true;
    let held = |m: &InFlight<P::Message>| !(m.to == causeway_protocol::Addr::Replica(PX) && P::is_commit(&m.msg));

    assert!(matches!(run_txn(&mut h, c0, &[(&x, "X1"), (&y, "Y1")]), SessionEvent::Committed(Some(_))));
    tick(&mut h, 10_000, &everything);
    tick(&mut h, 10_000, &everything);

    // p_x's clock lags while T2 prepares (the paper's proposal of 6).
    h.set_clock(PX, START_US + 15_000);
    let t2 = commit_where(&mut h, c2, &[(&x, "X2"), (&y, "Y2")], held);
    assert!(matches!(t2, Some(SessionEvent::Committed(Some(_)))), "T2 committed");
    tick(&mut h, 10_000, &held);
    tick(&mut h, 10_000, &held);
    // The clocks agree again: whatever waits now waits for T2 alone.
    h.set_all_clocks(START_US + 40_000);

    h.begin(c1).unwrap();
    h.deliver_where(held);
    assert_eq!(h.take_event(c1), Some(SessionEvent::Started));
    let at_once = h.read(c1, &[&x, &y]).unwrap();
    h.deliver_where(held);
    let mut before_commit = values(at_once.or_else(|| h.take_event(c1)));
    if before_commit.is_none() {
        // Time passes and every timer fires: still nothing, T2 is pending.
        tick(&mut h, 10_000, &held);
        before_commit = values(h.take_event(c1));
    }
    let waited_before_commit = h.reads_waited;
    h.deliver_all();
    let result = before_commit.clone().or_else(|| values(h.take_event(c1))).expect("the read is answered");
    assert_eq!(h.commit(c1).unwrap(), Some(SessionEvent::Committed(None)));
    Figure1 { before_commit, waited_before_commit, result }
}

#[test]
fn figure_1_wren_answers_at_once_with_older_consistent_versions() {
    let f = figure_1::<Wren>(WrenConfig::default());
    assert_eq!(f.before_commit, Some(vec![s("X1"), s("Y1")]));
    assert_eq!(f.waited_before_commit, 0, "no Wren read waits");
}

/// Cure blocks p_x's read: T2 is prepared there below the snapshot, so p_x
/// cannot tell which version of x to return. The commit releases it, and the
/// read returns T2's writes on both partitions.
#[test]
fn figure_1_cure_blocks_the_read_at_p_x_until_t2_commits_there() {
    let f = figure_1::<Cure>(Cure::configure(&Default::default()));
    assert_eq!(f.before_commit, None, "the read is not answered while T2 is pending at p_x");
    assert_eq!(f.waited_before_commit, 1, "p_x's slice waits, p_y's is answered at once");
    assert_eq!(f.result, vec![s("X2"), s("Y2")]);
}

/// HLCs do not help here: the wait is for a pending transaction, not for a
/// clock.
#[test]
fn figure_1_h_cure_blocks_too() {
    let f = figure_1::<HCure>(HCure::configure(&Default::default()));
    assert_eq!(f.before_commit, None);
    assert_eq!(f.waited_before_commit, 1);
    assert_eq!(f.result, vec![s("X2"), s("Y2")]);
}

/// A coordinator whose clock runs 5 ms ahead of a cohort's, and nothing
/// pending anywhere: what the snapshot asks of the cohort is only that its
/// clock catch up.
fn skewed_read<P>(config: CureConfig) -> (Harness<P>, ClientId, ReplicaId)
where
    P: Protocol<Config = CureConfig, Message = CureMsg, Replica = CureReplica>,
{
    let topology = Topology::full(1, 2).unwrap();
    let x = key_in(&topology, 1, "x");
    let (p0, p1) = (ReplicaId::new(0, 0), ReplicaId::new(0, 1));
    let mut h = Harness::<P>::new(topology, config, START_US);
    let (writer, reader) = (client(0), client(1));
    h.add_session(writer, p1);
    h.add_session(reader, p0);
    run_txn(&mut h, writer, &[(&x, "X1")]);
    h.set_all_clocks(START_US + 20_000);
    h.fire_all(CureTimer::Apply);
    h.deliver_all();

    h.set_clock(p0, START_US + 25_000);
    h.begin(reader).unwrap();
    h.deliver_all();
    assert_eq!(h.take_event(reader), Some(SessionEvent::Started));
    assert!(h.read(reader, &[&x]).unwrap().is_none(), "x is read from p1");
    h.deliver_all();
    assert_eq!(h.replica(p1).core().prepared.len(), 0, "nothing pending: the clock alone is in the way");
    (h, reader, p1)
}

#[test]
fn cure_waits_on_clock_skew_alone_until_the_cohorts_clock_passes_the_snapshot() {
    let (mut h, reader, p1) = skewed_read::<Cure>(Cure::configure(&Default::default()));
    assert_eq!(h.take_event(reader), None, "p1's clock is 5 ms behind the snapshot");
    assert_eq!(h.reads_waited, 1);
    assert_eq!(h.replica(p1).parked_reads(), 1);

    h.set_clock(p1, START_US + 24_999);
    h.fire(p1, CureTimer::Own(WakeReads));
    h.deliver_all();
    assert_eq!(h.take_event(reader), None, "one microsecond early");
    h.set_clock(p1, START_US + 25_000);
    h.fire(p1, CureTimer::Own(WakeReads));
    h.deliver_all();
    assert_eq!(values(h.take_event(reader)), Some(vec![s("X1")]));
}

#[test]
fn h_cure_does_not_wait_on_clock_skew_alone() {
    let (mut h, reader, p1) = skewed_read::<HCure>(HCure::configure(&Default::default()));
    assert_eq!(values(h.take_event(reader)), Some(vec![s("X1")]), "answered at once");
    assert_eq!(h.reads_waited, 0);
    assert!(
        h.replica(p1).core().clock() >= causeway_protocol::Timestamp::from_physical(START_US + 25_000),
        "the HLC moved up"
    );
}

/// Cure needs no client cache: the next snapshot covers the client's last
/// commit, and a partition installs a commit the moment it arrives. With
/// every clock frozen, the commit time lies a few logical ticks past the
/// physical clock: H-Cure answers at once, Cure once the clock has moved on.
#[test]
fn cure_reads_its_own_writes_in_the_next_transaction_without_a_cache() {
    assert_eq!(own_write_then_read::<HCure>(), (Some(vec![s("mine")]), 0));
    assert_eq!(own_write_then_read::<Cure>(), (Some(vec![s("mine")]), 1));
}

/// What the second transaction read, and how many slices waited.
fn own_write_then_read<P>() -> (Option<Vec<Option<String>>>, u64)
where
    P: Protocol<Config = CureConfig, Message = CureMsg, Replica = CureReplica>,
{
    let topology = Topology::full(2, 2).unwrap();
    let x = key_in(&topology, 1, "x");
    let mut h = Harness::<P>::new(topology, CureConfig::default(), START_US);
    let me = client(0);
    h.add_session(me, ReplicaId::new(0, 0));
    assert!(matches!(run_txn(&mut h, me, &[(&x, "mine")]), SessionEvent::Committed(Some(_))));
    // No apply, no stabilization: only the commit itself has happened.
    h.begin(me).unwrap();
    h.deliver_all();
    h.take_event(me);
    h.read(me, &[&x]).unwrap();
    h.deliver_all();
    if let Some(read) = h.take_event(me) {
        return (values(Some(read)), h.reads_waited);
    }
    h.advance_clocks(1);
    h.fire_all(CureTimer::Own(WakeReads));
    h.deliver_all();
    (values(h.take_event(me)), h.reads_waited)
}
