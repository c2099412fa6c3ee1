//! The deterministic simulator: one thread, virtual time, one seeded random
//! source. Given the same configuration and seed it makes the same choices in
//! the same order, so a run — and any bug it finds — replays exactly.

use crate::client::WorkloadClient;
use crate::clock::{NodeClock, EPOCH_US};
use crate::config::{ConfigError, SimConfig};
use crate::network::{Network, NodeIx};
use crate::report::{Percentiles, SimReport};
use causeway_history::{FinalState, History, TxnRecord};
use causeway_protocol::contract::replica::ReplicaEffects;
use causeway_protocol::contract::session::SessionEffects;
use causeway_protocol::{
    Addr, ClientId, DcId, Message, MsgClass, Protocol, ReadWaitProbe, Replica, ReplicaCounters, ReplicaId, Session,
    SessionSetup, Topology,
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
    Timer(NodeIx, T),
    SessionTimer(NodeIx, S),
    ClientNext(NodeIx),
    CutStart(u16),
    CutEnd(u16),
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
    network: Network<P::Message>,
    replicas: Vec<P::Replica>,
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
    history: Vec<TxnRecord>,
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
    read_wait_us: Vec<u64>,
    latencies_us: Vec<u64>,
    progress: Option<Box<dyn FnMut(Progress)>>,
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
        let topology =
            Arc::new(Topology::full(cfg.dcs, cfg.partitions).map_err(|e| ConfigError::Invalid(e.to_string()))?);
        P::validate(&topology, protocol_config).map_err(ConfigError::Invalid)?;
        debug_assert!(causeway_protocol::contract::classes_are_indexed(<P::Message as Message>::CLASSES));
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let generator = Generator::new(cfg.workload.clone(), &topology);
        let mut sim = Simulation {
            network: Network::new(cfg.wan.clone(), cfg.spikes, cfg.dcs),
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
            history: Vec::new(),
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
            read_wait_us: Vec::new(),
            latencies_us: Vec::new(),
            progress: None,
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
        }
        for dc in topology.dcs() {
            for p in topology.partitions() {
                for k in 0..sim.cfg.clients_per_partition {
                    let id = ClientId { dc, index: p.0 * sim.cfg.clients_per_partition + k };
                    let setup = SessionSetup { id, coordinator: ReplicaId::at(dc, p), topology: topology.clone() };
                    let session = P::session(setup, protocol_config);
                    let node = sim.node_addr.len() as NodeIx;
                    sim.addr_node.insert(Addr::Client(id), node);
                    sim.node_addr.push(Addr::Client(id));
                    sim.node_dc.push(dc.0);
                    sim.clocks.push(clock(&mut rng));
                    let client_rng = ChaCha8Rng::seed_from_u64(rng.random());
                    sim.clients.push(WorkloadClient::new(session, id.to_string(), dc.0, client_rng));
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
            self.replicas[node].start(local, &mut self.outbox);
            // Real servers do not tick in lockstep: give each periodic timer
            // a random phase within its first period.
            for (_, after) in self.outbox.timers.iter_mut() {
                *after += self.rng.random_range(0..=*after);
            }
            self.flush_outbox(node as NodeIx);
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
        while let Some(Reverse(Scheduled { at, event, .. })) = self.queue.pop() {
            debug_assert!(at >= self.now, "time went back");
            self.now = at;
            self.events += 1;
            if self.events.is_multiple_of(100_000) {
                self.report_progress();
            }
            match event {
                Event::Link(id) => self.on_link_ready(id),
                Event::Timer(node, timer) => {
                    let local = self.clock_of(node);
                    self.replicas[node as usize].on_timer(local, timer, &mut self.outbox);
                    self.flush_outbox(node);
                }
                Event::SessionTimer(node, timer) => self.on_session_timer(node, timer),
                Event::ClientNext(node) => self.start_client_txn(node),
                Event::CutStart(dc) => self.network.cut(dc),
                Event::CutEnd(dc) => {
                    for (id, at) in self.network.heal(self.now, dc) {
                        self.schedule(at, Event::Link(id));
                    }
                }
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
        let mut out = std::mem::take(&mut self.session_out);
        let done = self.clients[i].start(local, elapsed, &self.generator, &mut out);
        self.flush_session(node, out);
        if let Some(record) = done {
            self.record(node, record);
        }
    }

    fn on_session_timer(&mut self, node: NodeIx, timer: SessionTimerOf<P>) {
        let i = node as usize - self.replicas.len();
        let (local, elapsed) = (self.clock_of(node), self.now - EPOCH_US);
        let mut out = std::mem::take(&mut self.session_out);
        let event = self.clients[i].session.on_timer(local, timer, &mut out);
        let done = event.and_then(|e| self.clients[i].on_event(local, elapsed, e, &mut out));
        self.flush_session(node, out);
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
        let settled =
            !self.network.any_cut() && self.foreground_in_flight == 0 && self.replicas.iter().all(|r| r.is_quiescent());
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

    fn on_link_ready(&mut self, id: u32) {
        if self.network.is_held(id) {
            self.network.link_mut(id).scheduled = false;
            return;
        }
        let (from, to) = {
            let l = self.network.link(id);
            (l.from, l.to)
        };
        while let Some(msg) = self.network.link_mut(id).pop_ready(self.now) {
            self.deliver(from, to, msg);
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
        if (to as usize) < self.replicas.len() {
            let tag = msg.read_request();
            self.replicas[to as usize].on_message(local, from_addr, msg, &mut self.outbox);
            // Measured from outside the protocol: did the reply leave in the
            // same step as the request arrived?
            if let Some(at_once) = self.read_probes[to as usize].after_step(from_addr, tag, &self.outbox, self.now) {
                self.reads += 1;
                self.reads_waited += u64::from(!at_once);
            }
            self.flush_outbox(to);
        } else {
            let i = to as usize - self.replicas.len();
            let elapsed = self.now - EPOCH_US;
            let mut out = std::mem::take(&mut self.session_out);
            let event = self.clients[i].session.on_message(local, from_addr, msg, &mut out);
            let done = event.and_then(|e| self.clients[i].on_event(local, elapsed, e, &mut out));
            self.flush_session(to, out);
            if let Some(record) = done {
                self.record(to, record);
            }
        }
    }

    fn record(&mut self, node: NodeIx, record: TxnRecord) {
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
        let class = msg.class();
        *self.messages_by_class.entry(class).or_default() += 1;
        let bytes = postcard::experimental::serialized_size(&msg).expect("protocol messages serialize");
        *self.bytes_by_class.entry(class).or_default() += bytes as u64;
        if !msg.is_background() {
            self.foreground_in_flight += 1;
        }
        let (a, b) = (self.node_dc[from as usize], self.node_dc[to as usize]);
        if let Some((link, at)) = self.network.send(&mut self.rng, self.now, from, to, a, b, msg) {
            self.schedule(at, Event::Link(link));
        }
    }

    fn flush_outbox(&mut self, node: NodeIx) {
        let mut outbox = std::mem::take(&mut self.outbox);
        for (to, msg) in outbox.messages.drain(..) {
            if let Some((_, since)) = self.read_probes[node as usize].on_send(to, &msg) {
                self.read_wait_us.push(self.now - since);
            }
            self.send(node, to, msg);
        }
        for (timer, after) in outbox.timers.drain(..) {
            self.schedule(self.now + after.max(1), Event::Timer(node, timer));
        }
        self.outbox = outbox;
    }

    fn flush_session(&mut self, node: NodeIx, mut out: SessionEffects<P::Session>) {
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

    fn into_report(self, wall: std::time::Duration) -> SimReport {
        let finals = self.final_states();
        let counters = self.replicas.iter().fold(ReplicaCounters::default(), |sum, r| sum + r.counters());
        let end = self.workload_end.unwrap_or(self.now);
        SimReport {
            protocol: P::NAME,
            guarantee: P::GUARANTEE,
            reads_never_wait: P::READS_NEVER_WAIT,
            seed: self.cfg.seed,
            dcs: self.cfg.dcs,
            partitions: self.cfg.partitions,
            clients: self.clients.len(),
            committed: self.history.iter().filter(|t| t.status == causeway_history::Status::Committed).count(),
            aborted: self.history.iter().filter(|t| t.status == causeway_history::Status::Aborted).count(),
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
            read_wait_us: Percentiles::of(self.read_wait_us),
            txn_latency_us: Percentiles::of(self.latencies_us),
            counters,
            history: History { txns: self.history, finals },
        }
    }
}
