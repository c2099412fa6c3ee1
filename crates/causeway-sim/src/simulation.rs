//! The deterministic simulator: one thread, virtual time, one seeded random
//! source. Given the same configuration and seed it makes the same choices in
//! the same order, so a run — and any bug it finds — replays exactly.

use crate::client::WorkloadClient;
use crate::clock::{NodeClock, EPOCH_US};
use crate::config::{ConfigError, SimConfig};
use crate::faults::{ComesBack, CrashTarget};
use crate::network::{Carried, Network, NodeIx};
use crate::report::{FaultReport, Percentiles, SimReport};
use causeway_history::{FinalState, History, TxnRecord};
use causeway_protocol::contract::protocol::RecordOf;
use causeway_protocol::contract::replica::ReplicaEffects;
use causeway_protocol::contract::session::SessionEffects;
use causeway_protocol::contract::{MemoryLog, MemorySpill, Next, SendGate, Spill, SpillQueue};
use causeway_protocol::{
    Addr, ClientId, DcId, FaultPoints, Message, MsgClass, Protocol, ReadWaitProbe, Replica, ReplicaCounters, ReplicaId,
    Session, SessionSetup, Timestamp, Topology,
};
use causeway_workload::{Generator, WorkloadKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use std::time::Instant;

type TimerOf<P> = <<P as Protocol>::Replica as Replica>::Timer;
type SessionTimerOf<P> = <<P as Protocol>::Session as Session>::Timer;

enum Event<T, S> {
    Link(u32),
    /// A replica's timer, armed by the incarnation it names (a crash
    /// forgets the timers of the incarnation that died).
    Timer(NodeIx, u32, T),
    SessionTimer(NodeIx, S),
    ClientNext(NodeIx),
    /// A client gives up a transaction that has not finished since it
    /// began (its `seq`): its coordinator may have crashed with its request.
    ClientTimeout(NodeIx, u64),
    /// A replica's disk has made its first `upto` records durable.
    Sync(NodeIx, u32, usize),
    /// A replica's disk takes the next of its incarnation's spill
    /// operations.
    SpillWork(NodeIx, u32),
    Crash(NodeIx, ComesBack),
    /// A crash of whichever member leads a partition's log by then.
    CrashLeader(crate::faults::Crash),
    Restart(NodeIx),
    CutStart(u16),
    CutEnd(u16),
    /// A busy link between replicas sheds its backlog ([`crate::Shedding`]).
    Shed,
    /// The workload's duration is up: clients start no new transactions.
    DurationEnd,
    SettleCheck,
}

struct Scheduled<T, S> {
    at: u64,
    seq: u64,
    event: Event<T, S>,
}

impl<T, S> PartialEq for Scheduled<T, S> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T, S> Eq for Scheduled<T, S> {}
impl<T, S> PartialOrd for Scheduled<T, S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T, S> Ord for Scheduled<T, S> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A simulated cluster running protocol `P` under a workload.
pub struct Simulation<P: Protocol> {
    cfg: SimConfig,
    topology: Arc<Topology>,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled<TimerOf<P>, SessionTimerOf<P>>>>,
    network: Network<Carried<P::Message>>,
    protocol_config: P::Config,
    replicas: Vec<P::Replica>,
    /// Each replica's life: its incarnation, whether it is down, its records
    /// and the messages that wait for them to be durable.
    lives: Vec<Life<P>>,
    /// Draws for the faults (disk, fault points, restarts), apart from the
    /// main source so that turning faults off changes nothing else.
    fault_rng: ChaCha8Rng,
    /// How long a replica's disk takes over a spill operation: a source of
    /// its own, so that spilling changes no other draw of a run.
    spill_rng: ChaCha8Rng,
    /// The word that arms this run's fault points, when they are on.
    buggify_run: Option<u64>,
    fault_report: FaultReport,
    clients: Vec<WorkloadClient<P::Session>>,
    node_addr: Vec<Addr>,
    node_dc: Vec<u16>,
    clocks: Vec<NodeClock>,
    addr_node: FxHashMap<Addr, NodeIx>,
    generator: Generator,
    /// Reused for every replica step.
    outbox: ReplicaEffects<P::Replica>,
    /// Reused for every session step.
    session_out: SessionEffects<P::Session>,
    /// Reused for the messages a replica's step lets leave.
    released: Vec<(Addr, P::Message)>,
    history: Vec<TxnRecord>,
    /// Per DC, the newest commit time acknowledged to one of its clients:
    /// a causal protocol has not settled until every replica sees it.
    newest_acknowledged: Vec<Timestamp>,
    /// Crashes and restarts still to come: a run settles after its last
    /// fault.
    crash_events_due: u32,
    // Workload progress.
    started_at: u64,
    finished: u64,
    stopping: bool,
    workload_end: Option<u64>,
    settled_at: Option<u64>,
    /// Messages sent that are not background traffic and not yet delivered.
    foreground_in_flight: u64,
    // Measurements.
    events: u64,
    messages_by_class: BTreeMap<MsgClass, u64>,
    /// Serialized size (postcard, as the runtime's wire sends it) per class.
    bytes_by_class: BTreeMap<MsgClass, u64>,
    /// Each replica's read requests that are waiting, with when they came.
    read_probes: Vec<ReadWaitProbe<u64>>,
    reads: u64,
    reads_waited: u64,
    /// The furthest any delivered message reached past its receiver's
    /// clock, in microseconds: what a node's guard against poisoned
    /// clocks (the runtime's `max_clock_offset_ms`) must allow.
    max_reach_ahead_us: u64,
    read_wait_us: Vec<u64>,
    /// Read-only transactions by the round trips they took.
    read_only_rounds: BTreeMap<u32, u64>,
    latencies_us: Vec<u64>,
    progress: Option<Box<dyn FnMut(Progress)>>,
    /// Per partition and position, the digest of the entry its group's log
    /// delivered there first.
    log_agreement: FxHashMap<(u32, u64), u64>,
    delivered_buf: Vec<(u64, u64)>,
}

/// One replica's life across crashes.
struct Life<P: Protocol> {
    incarnation: u32,
    down: bool,
    log: MemoryLog<RecordOf<P>>,
    /// What it spilled: on its disk, so a crash keeps it.
    spill: MemorySpill<RecordOf<P>>,
    /// Its spill operations not carried out yet, and whether the disk is
    /// at them.
    spill_queue: SpillQueue<RecordOf<P>>,
    spill_working: bool,
    gate: SendGate<P::Message>,
    /// How it comes back from its crash.
    comes_back: ComesBack,
    /// A sync of the log is on its way.
    syncing: bool,
}

/// Where a run is, for a progress display.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub finished_txns: u64,
    pub target_txns: Option<u64>,
    pub sim_time_us: u64,
    pub target_sim_time_us: Option<u64>,
    pub settling: bool,
}

impl<P: Protocol> Simulation<P> {
    pub fn new(cfg: SimConfig, protocol_config: &P::Config) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let topology = Arc::new(cfg.topology()?);
        P::validate(&topology, protocol_config).map_err(ConfigError::Invalid)?;
        let reseeds = cfg.faults.crashes.iter().any(|c| c.comes_back == ComesBack::Reseeded);
        if reseeds && P::reseed(ReplicaId::new(0, 0), topology.clone(), protocol_config).is_none() {
            return Err(ConfigError::Invalid(format!("{} cannot re-seed a replica whose disk is lost", P::NAME)));
        }
        debug_assert!(causeway_protocol::contract::classes_are_indexed(<P::Message as Message>::CLASSES));
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let generator = Generator::new(cfg.workload.clone(), &topology);
        let buggify_run = cfg.faults.buggify.then(|| ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xb0661f7).random());
        let mut sim = Simulation {
            network: Network::new(cfg.wan.clone(), cfg.spikes, cfg.faults.transport, cfg.dcs),
            protocol_config: protocol_config.clone(),
            lives: Vec::new(),
            fault_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xfa17_5eed),
            spill_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5b11_d15c),
            buggify_run,
            fault_report: FaultReport::default(),
            topology: topology.clone(),
            now: EPOCH_US,
            seq: 0,
            queue: BinaryHeap::new(),
            replicas: Vec::new(),
            clients: Vec::new(),
            node_addr: Vec::new(),
            node_dc: Vec::new(),
            clocks: Vec::new(),
            addr_node: FxHashMap::default(),
            generator,
            outbox: Default::default(),
            session_out: Default::default(),
            released: Vec::new(),
            history: Vec::new(),
            newest_acknowledged: vec![Timestamp::ZERO; usize::from(cfg.dcs)],
            crash_events_due: 0,
            started_at: EPOCH_US,
            finished: 0,
            stopping: false,
            workload_end: None,
            settled_at: None,
            foreground_in_flight: 0,
            events: 0,
            messages_by_class: BTreeMap::new(),
            bytes_by_class: BTreeMap::new(),
            read_probes: Vec::new(),
            reads: 0,
            reads_waited: 0,
            max_reach_ahead_us: 0,
            read_wait_us: Vec::new(),
            read_only_rounds: BTreeMap::new(),
            latencies_us: Vec::new(),
            progress: None,
            log_agreement: FxHashMap::default(),
            delivered_buf: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(0),
            cfg,
        };
        let half_skew = (sim.cfg.max_skew_us / 2) as i64;
        let drift = sim.cfg.max_drift_ppm as i32;
        let clock = |rng: &mut ChaCha8Rng| NodeClock {
            offset_us: if half_skew > 0 { rng.random_range(-half_skew..=half_skew) } else { 0 },
            drift_ppm: if drift > 0 { rng.random_range(-drift..=drift) } else { 0 },
        };
        for id in topology.all_replicas() {
            let node = sim.node_addr.len() as NodeIx;
            sim.addr_node.insert(Addr::Replica(id), node);
            sim.node_addr.push(Addr::Replica(id));
            sim.node_dc.push(id.dc.0);
            sim.clocks.push(clock(&mut rng));
            sim.replicas.push(P::replica(id, topology.clone(), protocol_config));
            sim.read_probes.push(ReadWaitProbe::default());
            sim.lives.push(Life {
                incarnation: 0,
                down: false,
                log: MemoryLog::default(),
                spill: MemorySpill::default(),
                spill_queue: SpillQueue::default(),
                spill_working: false,
                gate: SendGate::default(),
                comes_back: ComesBack::FromItsDisk,
                syncing: false,
            });
        }
        for dc in topology.dcs() {
            // A DC's clients of a partition use its first member there.
            for coordinator in topology.replicas_in(dc).into_iter().filter(|r| r.member == 0) {
                let p = coordinator.partition;
                for k in 0..sim.cfg.clients_per_partition {
                    let id = ClientId { dc, index: p.0 * sim.cfg.clients_per_partition + k };
                    let setup = SessionSetup { id, coordinator, topology: topology.clone(), limits: sim.cfg.limits };
                    let session = P::session(setup, protocol_config);
                    let node = sim.node_addr.len() as NodeIx;
                    sim.addr_node.insert(Addr::Client(id), node);
                    sim.node_addr.push(Addr::Client(id));
                    sim.node_dc.push(dc.0);
                    sim.clocks.push(clock(&mut rng));
                    let client_rng = ChaCha8Rng::seed_from_u64(rng.random());
                    let mut client = WorkloadClient::new(session, id.to_string(), dc.0, client_rng);
                    client.reads_only_from = sim.cfg.readers.iter().find(|r| r.dc == dc.0).map(|r| r.from_us);
                    client.home = Some(p);
                    sim.clients.push(client);
                }
            }
        }
        sim.rng = ChaCha8Rng::seed_from_u64(rng.random());
        Ok(sim)
    }

    /// Calls `report` every so often while the run goes on.
    pub fn with_progress(mut self, report: impl FnMut(Progress) + 'static) -> Self {
        self.progress = Some(Box::new(report));
        self
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub fn replica(&self, id: ReplicaId) -> &P::Replica {
        let node = self.addr_node[&Addr::Replica(id)];
        &self.replicas[node as usize]
    }

    fn schedule(&mut self, at: u64, event: Event<TimerOf<P>, SessionTimerOf<P>>) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled { at, seq: self.seq, event }));
    }

    fn client_node(&self, i: usize) -> NodeIx {
        (self.replicas.len() + i) as NodeIx
    }

    /// The local clock of `node` now.
    fn clock_of(&self, node: NodeIx) -> u64 {
        self.clocks[node as usize].read(self.now)
    }

    /// Runs the workload to its end, lets the cluster settle, and reports.
    pub fn run(mut self) -> SimReport {
        let wall = Instant::now();
        for node in 0..self.replicas.len() {
            let local = self.clock_of(node as NodeIx);
            self.arm_faults();
            self.replicas[node].start(local, &mut self.outbox);
            // Real servers do not tick in lockstep: give each periodic timer
            // a random phase within its first period.
            for (_, after) in self.outbox.timers.iter_mut() {
                *after += self.rng.random_range(0..=*after);
            }
            self.flush_outbox(node as NodeIx);
        }
        for crash in self.cfg.faults.crashes.clone() {
            if let CrashTarget::Leader { .. } = crash.target {
                // Who leads is known only when the crash comes.
                self.schedule(self.started_at + crash.at_us, Event::CrashLeader(crash));
                self.crash_events_due += 2;
                continue;
            }
            for node in self.crashed_nodes(crash.target) {
                self.schedule(self.started_at + crash.at_us, Event::Crash(node, crash.comes_back));
                self.schedule(self.started_at + crash.at_us + crash.down_us, Event::Restart(node));
                self.crash_events_due += 2;
            }
        }
        for i in 0..self.clients.len() {
            // Spread the first transactions over the first millisecond.
            let at = self.now + self.rng.random_range(0..1_000);
            let node = self.client_node(i);
            self.schedule(at, Event::ClientNext(node));
        }
        for cut in self.cfg.cuts.clone() {
            self.schedule(self.started_at + cut.start_us, Event::CutStart(cut.dc));
            self.schedule(self.started_at + cut.end_us, Event::CutEnd(cut.dc));
        }
        if let Some(d) = self.cfg.duration_us {
            self.schedule(self.started_at + d, Event::DurationEnd);
        }
        if let Some(s) = self.cfg.faults.shedding.filter(|s| s.mean_interval_us > 0) {
            let first = self.fault_rng.random_range(1..=2 * s.mean_interval_us);
            self.schedule(self.started_at + first, Event::Shed);
        }
        while let Some(Reverse(Scheduled { at, event, .. })) = self.queue.pop() {
            debug_assert!(at >= self.now, "time went back");
            self.now = at;
            self.events += 1;
            if self.events.is_multiple_of(100_000) {
                self.report_progress();
            }
            match event {
                Event::Link(id) => self.on_link_ready(id),
                Event::Timer(node, incarnation, timer) => {
                    if self.alive(node, incarnation) {
                        let local = self.clock_of(node);
                        self.arm_faults();
                        self.replicas[node as usize].on_timer(local, timer, &mut self.outbox);
                        self.flush_outbox(node);
                    }
                }
                Event::SessionTimer(node, timer) => self.on_session_timer(node, timer),
                Event::ClientNext(node) => self.start_client_txn(node),
                Event::ClientTimeout(node, seq) => self.on_client_timeout(node, seq),
                Event::Sync(node, incarnation, upto) => {
                    if self.alive(node, incarnation) {
                        self.on_sync(node, upto);
                    }
                }
                Event::SpillWork(node, incarnation) => {
                    if self.alive(node, incarnation) {
                        self.spill_work(node);
                    }
                }
                Event::Crash(node, comes_back) => {
                    self.crash_events_due -= 1;
                    self.crash(node, comes_back)
                }
                Event::CrashLeader(crash) => {
                    self.crash_events_due -= 1;
                    let node = self.crashed_nodes(crash.target)[0];
                    if self.lives[node as usize].down {
                        // Nobody leads and its first member is down: the
                        // crash finds nothing to take down.
                        self.crash_events_due -= 1;
                    } else {
                        self.fault_report.leader_crashes += u64::from(self.replicas[node as usize].leads());
                        self.crash(node, crash.comes_back);
                        self.schedule(self.now + crash.down_us, Event::Restart(node));
                    }
                }
                Event::Restart(node) => {
                    self.crash_events_due -= 1;
                    self.restart(node)
                }
                Event::CutStart(dc) => self.network.cut(dc),
                Event::CutEnd(dc) => {
                    self.shed_at_heal(dc);
                    for (id, at) in self.network.heal(self.now, dc) {
                        self.schedule(at, Event::Link(id));
                    }
                }
                Event::Shed => self.shed_some_link(),
                Event::DurationEnd => self.begin_stopping(),
                Event::SettleCheck => {
                    if self.on_settle_check() {
                        break;
                    }
                }
            }
        }
        self.into_report(wall.elapsed())
    }

    /// Whether `node`'s incarnation `incarnation` is the one running.
    fn alive(&self, node: NodeIx, incarnation: u32) -> bool {
        let life = &self.lives[node as usize];
        !life.down && life.incarnation == incarnation
    }

    /// The replica nodes a crash takes down.
    fn crashed_nodes(&self, target: CrashTarget) -> Vec<NodeIx> {
        let ids: Vec<ReplicaId> = match target {
            CrashTarget::Replica { dc, partition } => vec![ReplicaId::new(dc, partition)],
            CrashTarget::Member(id) => vec![id],
            CrashTarget::Leader { partition } => {
                let members = self.topology.members_of(causeway_protocol::PartitionId(partition));
                let leading = members.iter().copied().find(|&m| {
                    let node = self.addr_node[&Addr::Replica(m)];
                    !self.lives[node as usize].down && self.replicas[node as usize].leads()
                });
                leading.or_else(|| members.first().copied()).into_iter().collect()
            }
            CrashTarget::Dc(dc) => self.topology.replicas_in(DcId(dc)),
        };
        ids.into_iter().filter_map(|id| self.addr_node.get(&Addr::Replica(id)).copied()).collect()
    }

    /// Arms the fault points of the next step, when the run has them on.
    fn arm_faults(&mut self) {
        if let Some(run) = self.buggify_run {
            let step = self.fault_rng.random();
            self.outbox.set_faults(FaultPoints::armed(run, step));
            self.session_out.set_faults(FaultPoints::armed(run, step));
        }
    }

    /// `node` crashes: it loses its memory, the records it had not synced
    /// and the messages that waited for them — with its disk, every record;
    /// what is sent to it waits until it restarts. A second crash of a
    /// replica that is down changes nothing but its disk.
    fn crash(&mut self, node: NodeIx, comes_back: ComesBack) {
        let life = &mut self.lives[node as usize];
        // What its disk had not done yet dies with it.
        life.spill_queue.clear();
        life.spill_working = false;
        if comes_back != ComesBack::FromItsDisk {
            self.fault_report.disks_lost += 1;
            life.log = MemoryLog::default();
            life.spill = MemorySpill::default();
            life.comes_back = comes_back;
        }
        if life.down {
            return;
        }
        self.fault_report.crashes += 1;
        self.fault_report.messages_lost += life.gate.held() as u64;
        life.down = true;
        life.incarnation += 1;
        life.syncing = false;
        // The disk may have written some of what was not synced yet: a
        // prefix of it survives, and the record after it is torn (and cut
        // at recovery, as the log's checksums would).
        let unsynced = life.log.len() - life.log.synced();
        let survive = if unsynced > 0 { self.fault_rng.random_range(0..=unsynced) } else { 0 };
        life.log.sync_to(life.log.synced() + survive);
        self.fault_report.records_lost += (unsynced - survive) as u64;
        life.log.crash();
        life.gate.crash();
        self.read_probes[node as usize].clear();
        for carried in self.network.node_down(node) {
            if let Carried::Msg(msg) = carried {
                self.fault_report.messages_to_down += 1;
                if !msg.is_background() {
                    self.foreground_in_flight -= 1;
                }
            }
        }
    }

    /// `node` restarts: the protocol rebuilds it from its durable records.
    fn restart(&mut self, node: NodeIx) {
        let i = node as usize;
        if !self.lives[i].down {
            return;
        }
        self.fault_report.restarts += 1;
        self.lives[i].down = false;
        let id = self.replicas[i].id();
        let (topology, config) = (self.topology.clone(), &self.protocol_config);
        self.replicas[i] = match std::mem::take(&mut self.lives[i].comes_back) {
            ComesBack::FromItsDisk => {
                let records = self.lives[i].log.durable();
                self.fault_report.restarts_from_checkpoint += u64::from(self.lives[i].log.checkpoints() > 0);
                P::recover(id, topology, config, records)
            }
            ComesBack::Reseeded => {
                let (replica, records) = P::reseed(id, topology, config).expect("checked by Simulation::new");
                let log = &mut self.lives[i].log;
                log.append(records);
                log.sync_all();
                replica
            }
            ComesBack::Empty => P::replica(id, topology, config),
        };
        // Up before it starts: what it sends itself as it starts (a
        // member's note that its records are durable) reaches it.
        self.network.node_up(node);
        let local = self.clock_of(node);
        self.arm_faults();
        self.replicas[i].start(local, &mut self.outbox);
        for (_, after) in self.outbox.timers.iter_mut() {
            *after += self.fault_rng.random_range(0..=*after);
        }
        self.flush_outbox(node);
    }

    /// The disk of `node` has synced its first `upto` records: the messages
    /// that waited for them leave.
    fn on_sync(&mut self, node: NodeIx, upto: usize) {
        let life = &mut self.lives[node as usize];
        life.syncing = false;
        life.log.sync_to(upto);
        self.send_released(node);
        self.sync_later(node);
    }

    /// Replaces `node`'s log by a checkpoint once enough records came since
    /// the last one. Taken after the step's records are appended, so it
    /// covers exactly them; it makes them durable at once (as the disk
    /// log's checkpoint does), which may release messages.
    fn checkpoint_if_due(&mut self, node: NodeIx) {
        let every = self.cfg.faults.disk.checkpoint_every;
        let life = &mut self.lives[node as usize];
        if every == 0
            || self.cfg.faults.crashes.is_empty()
            || life.log.since_checkpoint() < every + (node as usize * 7) % every
        {
            return;
        }
        life.log.checkpoint(self.replicas[node as usize].checkpoint());
        self.fault_report.checkpoints += 1;
        self.send_released(node);
    }

    /// The disk takes `node`'s next spill operation a little later, unless
    /// it is at them already.
    fn spill_later(&mut self, node: NodeIx) {
        let life = &mut self.lives[node as usize];
        if life.spill_working || life.spill_queue.is_empty() {
            return;
        }
        life.spill_working = true;
        let incarnation = life.incarnation;
        let after = self.spill_rng.random_range(50..500);
        self.schedule(self.now + after, Event::SpillWork(node, incarnation));
    }

    /// `node`'s disk carries out its next spill operation, in order: a
    /// `Put` once the records before it are durable (else later), then the
    /// replica hears it is done; a `Get` is answered.
    fn spill_work(&mut self, node: NodeIx) {
        let life = &mut self.lives[node as usize];
        life.spill_working = false;
        let op = match life.spill_queue.next(life.log.synced()) {
            Next::Ready(op) => op,
            Next::WaitFor(_) => {
                self.sync_later(node);
                return self.spill_later(node);
            }
            Next::Empty => return,
        };
        match &op {
            Spill::Put(batch) => {
                self.fault_report.spills += 1;
                self.fault_report.spilled_bytes += batch.iter().map(|(_, r)| record_bytes(r)).sum::<u64>();
            }
            Spill::Get { .. } => self.fault_report.unspilled_batches += 1,
            Spill::Forget { .. } => {}
        }
        if let Some(done) = self.lives[node as usize].spill.carry_out(op) {
            let local = self.clock_of(node);
            self.arm_faults();
            done.tell(&mut self.replicas[node as usize], local, &mut self.outbox);
            self.flush_outbox(node);
        }
        self.spill_later(node);
    }

    /// The messages of `node` whose records are now durable leave, in order.
    fn send_released(&mut self, node: NodeIx) {
        let life = &mut self.lives[node as usize];
        let mut released = std::mem::take(&mut self.released);
        life.gate.release(life.log.synced(), |to, msg| released.push((to, msg)));
        for (to, msg) in released.drain(..) {
            self.send_from_replica(node, to, msg);
        }
        self.released = released;
    }

    /// Starts a sync of what `node` appended and has not synced, unless one
    /// is on its way: at the end of this step with a zero-latency disk,
    /// after the disk's sync time otherwise.
    fn sync_later(&mut self, node: NodeIx) {
        let (lo, hi) = self.cfg.faults.disk.sync_us;
        let life = &mut self.lives[node as usize];
        if life.syncing || life.log.synced() == life.log.len() {
            return;
        }
        let upto = life.log.len();
        if hi == 0 {
            life.log.sync_to(upto);
            self.send_released(node);
            return;
        }
        life.syncing = true;
        let incarnation = life.incarnation;
        let after = self.fault_rng.random_range(lo..=hi).max(1);
        self.schedule(self.now + after, Event::Sync(node, incarnation, upto));
    }

    fn report_progress(&mut self) {
        let progress = Progress {
            finished_txns: self.finished,
            target_txns: self.cfg.txns,
            sim_time_us: self.now - self.started_at,
            target_sim_time_us: self.cfg.duration_us,
            settling: self.stopping,
        };
        if let Some(report) = self.progress.as_mut() {
            report(progress);
        }
    }

    fn workload_over(&self) -> bool {
        self.cfg.txns.is_some_and(|n| self.finished >= n)
            || self.cfg.duration_us.is_some_and(|d| self.now >= self.started_at + d)
    }

    fn start_client_txn(&mut self, node: NodeIx) {
        if self.stopping || self.workload_over() {
            self.begin_stopping();
            return;
        }
        let i = node as usize - self.replicas.len();
        let (local, elapsed) = (self.clock_of(node), self.now - EPOCH_US);
        self.arm_faults();
        let mut out = std::mem::take(&mut self.session_out);
        let done = self.clients[i].start(local, elapsed, &self.generator, &mut out);
        self.flush_session(node, out, done.is_some());
        match done {
            Some(record) => self.record(node, record),
            None if self.cfg.faults.can_lose_requests() => {
                let seq = self.clients[i].seq();
                self.schedule(self.now + self.cfg.faults.client_timeout_us, Event::ClientTimeout(node, seq));
            }
            None => {}
        }
    }

    /// The client's transaction `seq` has not finished: it gives it up and
    /// starts over on a new session, as a client whose connection died
    /// would. The history lists it as `unknown` if it was committing.
    fn on_client_timeout(&mut self, node: NodeIx, seq: u64) {
        let i = node as usize - self.replicas.len();
        let client = &mut self.clients[i];
        if client.is_idle() || client.seq() != seq {
            return;
        }
        let id = client.session.id();
        let coordinator =
            ReplicaId::at(id.dc, causeway_protocol::PartitionId(id.index / self.cfg.clients_per_partition));
        debug_assert!(self.topology.members_of(coordinator.partition).contains(&coordinator));
        let setup = SessionSetup { id, coordinator, topology: self.topology.clone(), limits: self.cfg.limits };
        let record = client.abandon(P::session(setup, &self.protocol_config), self.now - EPOCH_US);
        self.fault_report.transactions_abandoned += u64::from(record.status == causeway_history::Status::Unknown);
        self.record(node, record);
    }

    fn on_session_timer(&mut self, node: NodeIx, timer: SessionTimerOf<P>) {
        let i = node as usize - self.replicas.len();
        let (local, elapsed) = (self.clock_of(node), self.now - EPOCH_US);
        self.arm_faults();
        let mut out = std::mem::take(&mut self.session_out);
        let event = self.clients[i].session.on_timer(local, timer, &mut out);
        let done = event.and_then(|e| self.clients[i].on_event(local, elapsed, e, &mut out));
        self.flush_session(node, out, done.is_some());
        if let Some(record) = done {
            self.record(node, record);
        }
    }

    fn begin_stopping(&mut self) {
        if !self.stopping {
            self.stopping = true;
            self.schedule(self.now, Event::SettleCheck);
        }
    }

    /// True when the run is over: the workload has drained and every write
    /// is applied and replicated everywhere (or the settle limit passed).
    /// One chain of checks runs, started by `begin_stopping`.
    fn on_settle_check(&mut self) -> bool {
        debug_assert!(self.stopping, "settle checks start when the workload stops");
        if !self.clients.iter().all(|c| c.is_idle()) {
            self.schedule(self.now + 1_000, Event::SettleCheck);
            return false;
        }
        let end = *self.workload_end.get_or_insert(self.now);
        let settled = self.crash_events_due == 0
            && !self.network.any_cut()
            && self.foreground_in_flight == 0
            && self.replicas.iter().all(|r| r.is_quiescent())
            && self.lives.iter().all(|l| !l.down)
            && self.every_acknowledged_write_visible();
        if settled {
            self.settled_at = Some(self.now);
            return true;
        }
        if self.now - end > self.cfg.settle_limit_us {
            return true;
        }
        self.schedule(self.now + 1_000, Event::SettleCheck);
        false
    }

    /// Whether a causal protocol's every replica sees the newest write
    /// acknowledged in each DC: its stable times have caught up with every
    /// commit, crashes and cuts included. (An eventually consistent store
    /// has no such time: it settles when nothing is left to apply.)
    fn every_acknowledged_write_visible(&self) -> bool {
        if P::GUARANTEE != causeway_protocol::Guarantee::Causal {
            return true;
        }
        self.replicas
            .iter()
            .all(|r| self.newest_acknowledged.iter().enumerate().all(|(dc, &t)| r.visible_upto(DcId(dc as u16)) >= t))
    }

    fn on_link_ready(&mut self, id: u32) {
        if self.network.is_held(id) {
            self.network.link_mut(id).scheduled = false;
            return;
        }
        let (from, to) = {
            let l = self.network.link(id);
            (l.from, l.to)
        };
        while let Some(carried) = self.network.pop_ready(id, self.now) {
            match carried {
                Carried::Msg(msg) => self.deliver(from, to, msg),
                Carried::Lost => self.peer_lost(from, to),
            }
            if self.network.is_held(id) {
                // The step crashed nothing, but a link may be held now.
                break;
            }
        }
        if self.network.has_packets() {
            // Every packet's arrival has its own event.
            self.network.link_mut(id).scheduled = true;
            return;
        }
        let link = self.network.link_mut(id);
        match link.head_ready() {
            Some(at) => self.schedule(at, Event::Link(id)),
            None => link.scheduled = false,
        }
    }

    fn deliver(&mut self, from: NodeIx, to: NodeIx, msg: P::Message) {
        if !msg.is_background() {
            self.foreground_in_flight -= 1;
        }
        let from_addr = self.node_addr[from as usize];
        let local = self.clock_of(to);
        let reach = causeway_protocol::contract::newest_timestamp(&msg).physical();
        self.max_reach_ahead_us = self.max_reach_ahead_us.max(reach.saturating_sub(local));
        if (to as usize) < self.replicas.len() {
            debug_assert!(!self.lives[to as usize].down, "a message delivered to a replica that is down");
            let tag = msg.read_request();
            self.arm_faults();
            self.replicas[to as usize].on_message(local, from_addr, msg, &mut self.outbox);
            // Measured from outside the protocol: did the reply leave in the
            // same step as the request arrived?
            let now = self.now;
            if let Some(at_once) = self.read_probes[to as usize].after_step(from_addr, tag, &self.outbox, || now) {
                self.reads += 1;
                self.reads_waited += u64::from(!at_once);
            }
            self.flush_outbox(to);
        } else {
            let i = to as usize - self.replicas.len();
            let elapsed = self.now - EPOCH_US;
            self.arm_faults();
            let mut out = std::mem::take(&mut self.session_out);
            let event = self.clients[i].session.on_message(local, from_addr, msg, &mut out);
            let done = event.and_then(|e| self.clients[i].on_event(local, elapsed, e, &mut out));
            self.flush_session(to, out, done.is_some());
            if let Some(record) = done {
                self.record(to, record);
            }
        }
    }

    fn record(&mut self, node: NodeIx, record: TxnRecord) {
        let client = &self.clients[node as usize - self.replicas.len()];
        if client.is_read_only_call() && record.status == causeway_history::Status::Committed {
            *self.read_only_rounds.entry(client.round_trips).or_default() += 1;
        }
        if let Some(causeway_history::CommitTs(stamp)) = &record.commit_ts {
            if let [causeway_history::StampElem::Int(ts), causeway_history::StampElem::Int(dc), ..] = stamp[..] {
                let newest = &mut self.newest_acknowledged[dc as usize];
                *newest = (*newest).max(Timestamp(ts));
            }
        }
        self.latencies_us.push(record.end_us - record.start_us);
        self.finished += 1;
        self.history.push(record);
        let think = match &self.cfg.workload {
            WorkloadKind::Random(w) => w.think_time_us,
            _ => 0,
        };
        if self.workload_over() {
            self.begin_stopping();
        } else {
            self.schedule(self.now + think, Event::ClientNext(node));
        }
    }

    fn send(&mut self, from: NodeIx, to_addr: Addr, msg: P::Message) {
        let Some(&to) = self.addr_node.get(&to_addr) else {
            panic!("message to unknown address {to_addr:?}: {msg:?}");
        };
        if self.network.is_down(to) {
            self.fault_report.messages_to_down += 1;
            return;
        }
        let class = msg.class();
        *self.messages_by_class.entry(class).or_default() += 1;
        let bytes = postcard::experimental::serialized_size(&msg).expect("protocol messages serialize");
        *self.bytes_by_class.entry(class).or_default() += bytes as u64;
        if !msg.is_background() {
            self.foreground_in_flight += 1;
        }
        let (a, b) = (self.node_dc[from as usize], self.node_dc[to as usize]);
        for (link, at) in self.network.send(&mut self.rng, self.now, from, to, a, b, Carried::Msg(msg)) {
            self.schedule(at, Event::Link(link));
        }
    }

    /// Link `id` (between two replicas) drops what is on its way and marks
    /// the gap for its receiver, as a node that sheds its backlog to a peer.
    fn shed(&mut self, id: u32) {
        let (from, to, a, b) = {
            let l = self.network.link(id);
            (l.from, l.to, l.from_dc, l.to_dc)
        };
        let dropped = self.network.drain(id);
        let mut messages = 0;
        for carried in dropped {
            if let Carried::Msg(msg) = carried {
                messages += 1;
                if !msg.is_background() {
                    self.foreground_in_flight -= 1;
                }
            }
        }
        self.fault_report.backlogs_shed += 1;
        self.fault_report.messages_shed += messages;
        // The sender knows what it dropped, as the runtime's transport does.
        self.peer_lost(to, from);
        if self.network.is_down(to) {
            return;
        }
        for (link, at) in self.network.send(&mut self.fault_rng, self.now, from, to, a, b, Carried::Lost) {
            self.schedule(at, Event::Link(link));
        }
    }

    /// As a cut of `dc` heals: each link between replicas across it that
    /// holds messages sheds them with the configured chance.
    fn shed_at_heal(&mut self, dc: u16) {
        let Some(shedding) = self.cfg.faults.shedding else { return };
        let replicas = self.replicas.len() as NodeIx;
        let held: Vec<u32> = self
            .network
            .busy_links()
            .filter(|(_, l)| l.from < replicas && l.to < replicas && l.crosses_dcs())
            .filter(|(_, l)| l.from_dc == dc || l.to_dc == dc)
            .map(|(id, _)| id)
            .collect();
        for id in held {
            if self.fault_rng.random_bool(shedding.at_heal) {
                self.shed(id);
            }
        }
    }

    /// A random busy link between replicas sheds its backlog; the next
    /// such moment is drawn.
    fn shed_some_link(&mut self) {
        let Some(shedding) = self.cfg.faults.shedding else { return };
        let replicas = self.replicas.len() as NodeIx;
        let busy: Vec<u32> =
            self.network.busy_links().filter(|(_, l)| l.from < replicas && l.to < replicas).map(|(id, _)| id).collect();
        if !busy.is_empty() {
            let id = busy[self.fault_rng.random_range(0..busy.len())];
            self.shed(id);
        }
        if !self.stopping {
            let next = self.fault_rng.random_range(1..=2 * shedding.mean_interval_us.max(1));
            self.schedule(self.now + next, Event::Shed);
        }
    }

    /// Replica `to` hears that messages between it and `from` were lost:
    /// the receiver of a shed link before anything sent after, the sender
    /// as it sheds.
    fn peer_lost(&mut self, from: NodeIx, to: NodeIx) {
        if (to as usize) >= self.replicas.len() || self.lives[to as usize].down {
            return;
        }
        let local = self.clock_of(to);
        let from_addr = self.node_addr[from as usize];
        self.replicas[to as usize].on_peer_lost(local, from_addr, &mut self.outbox);
        self.flush_outbox(to);
    }

    /// A replica's message leaves: the read probe sees whether it answers a
    /// read that waited.
    fn send_from_replica(&mut self, node: NodeIx, to: Addr, msg: P::Message) {
        if let Some((_, since)) = self.read_probes[node as usize].on_send(to, &msg) {
            self.read_wait_us.push(self.now - since);
        }
        self.send(node, to, msg);
    }

    /// Checks what `node`'s ordered log delivered in its last step against
    /// what the other members of its group delivered at the same
    /// positions: one entry per position, or the run stops with the seed.
    fn check_log_agreement(&mut self, node: NodeIx) {
        let mut delivered = std::mem::take(&mut self.delivered_buf);
        self.replicas[node as usize].take_deliveries(&mut delivered);
        let partition = self.replicas[node as usize].id().partition.0;
        for (pos, digest) in delivered.drain(..) {
            let seen = *self.log_agreement.entry((partition, pos)).or_insert(digest);
            assert_eq!(
                seen,
                digest,
                "seed {}: two members of p{partition}'s group delivered different entries at position {pos} ({} now)",
                self.cfg.seed,
                self.replicas[node as usize].id()
            );
            self.fault_report.log_positions_checked += 1;
        }
        self.delivered_buf = delivered;
    }

    fn flush_outbox(&mut self, node: NodeIx) {
        self.check_log_agreement(node);
        let mut outbox = std::mem::take(&mut self.outbox);
        self.fault_report.fault_points_fired += u64::from(outbox.faults_fired());
        outbox.set_faults(FaultPoints::OFF);
        let life = &mut self.lives[node as usize];
        let mut released = std::mem::take(&mut self.released);
        life.gate.take(&mut outbox, &mut life.log, |to, msg| released.push((to, msg)));
        // After the step's records are appended: a `Put` waits for them.
        let appended = life.log.len();
        life.spill_queue.take(&mut outbox.spill, appended);
        for (to, msg) in released.drain(..) {
            self.send_from_replica(node, to, msg);
        }
        self.released = released;
        self.spill_later(node);
        self.sync_later(node);
        self.checkpoint_if_due(node);
        let incarnation = self.lives[node as usize].incarnation;
        for (timer, after) in outbox.timers.drain(..) {
            self.schedule(self.now + after.max(1), Event::Timer(node, incarnation, timer));
        }
        self.outbox = outbox;
    }

    /// Sends what a session step produced. A step that sent requests and
    /// did not finish the transaction is one of its round trips (the last
    /// step's messages, such as a release, are answered by nobody).
    fn flush_session(&mut self, node: NodeIx, mut out: SessionEffects<P::Session>, finished: bool) {
        if !out.messages.is_empty() && !finished {
            self.clients[node as usize - self.replicas.len()].round_trips += 1;
        }
        self.fault_report.fault_points_fired += u64::from(out.faults_fired());
        out.set_faults(FaultPoints::OFF);
        for (to, msg) in out.messages.drain(..) {
            self.send(node, to, msg);
        }
        for (timer, after) in out.timers.drain(..) {
            self.schedule(self.now + after.max(1), Event::SessionTimer(node, timer));
        }
        self.session_out = out;
    }

    fn final_states(&self) -> Vec<FinalState> {
        let mut per_dc: BTreeMap<u16, BTreeMap<String, String>> = BTreeMap::new();
        for r in &self.replicas {
            let state = per_dc.entry(r.id().dc.0).or_default();
            for (k, v) in r.latest_values() {
                state.insert(String::from_utf8_lossy(&k).into_owned(), String::from_utf8_lossy(&v).into_owned());
            }
        }
        self.topology
            .dcs()
            .map(|DcId(dc)| FinalState {
                dc,
                state: per_dc.remove(&dc).unwrap_or_default(),
                partial: !self.topology.is_fully_replicated(),
            })
            .collect()
    }

    /// The widest gap between two nodes' clocks over the run (offsets are
    /// fixed and drift grows steadily, so it is widest at the start or the
    /// end).
    fn clock_spread_us(&self) -> u64 {
        let spread = |t: u64| {
            let readings = self.clocks.iter().map(|c| c.read(t));
            readings.clone().max().unwrap_or(0) - readings.min().unwrap_or(0)
        };
        spread(EPOCH_US).max(spread(self.now))
    }

    fn into_report(self, wall: std::time::Duration) -> SimReport {
        let finals = self.final_states();
        let counters = self.replicas.iter().fold(ReplicaCounters::default(), |sum, r| sum + r.counters());
        let end = self.workload_end.unwrap_or(self.now);
        let clock_spread_us = self.clock_spread_us();
        SimReport {
            protocol: P::NAME,
            guarantee: P::GUARANTEE,
            reads_never_wait: P::READS_NEVER_WAIT,
            seed: self.cfg.seed,
            dcs: self.cfg.dcs,
            partitions: self.cfg.partitions,
            replication: self.cfg.replication,
            clients: self.clients.len(),
            committed: self.history.iter().filter(|t| t.status == causeway_history::Status::Committed).count(),
            aborted: self.history.iter().filter(|t| t.status == causeway_history::Status::Aborted).count(),
            unknown: self.history.iter().filter(|t| t.status == causeway_history::Status::Unknown).count(),
            updates: self.history.iter().filter(|t| t.commit_ts.is_some()).count(),
            sim_time_us: end - self.started_at,
            settle_time_us: self.settled_at.map(|s| s - end),
            wall,
            events: self.events,
            messages_by_class: self.messages_by_class,
            bytes_by_class: self.bytes_by_class,
            version_metadata_bytes: self.replicas.first().map_or(0, |r| r.version_metadata_bytes()),
            reads: self.reads,
            reads_waited: self.reads_waited,
            max_reach_ahead_us: self.max_reach_ahead_us,
            clock_spread_us,
            read_wait_us: Percentiles::of(self.read_wait_us),
            read_only_rounds: self.read_only_rounds,
            txn_latency_us: Percentiles::of(self.latencies_us),
            counters,
            faults: FaultReport { transport: self.network.counts, ..self.fault_report },
            history: History { txns: self.history, finals },
        }
    }
}

/// A record's size on disk, for the spill counters.
fn record_bytes<R: serde::Serialize>(record: &R) -> u64 {
    postcard::experimental::serialized_size(record).map_or(0, |n| n as u64)
}
