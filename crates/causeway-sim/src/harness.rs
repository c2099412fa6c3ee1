//! A hand-cranked cluster for scenario tests: nothing moves unless the test
//! says so. Messages wait in one in-flight list until the test delivers
//! them (all, or those a predicate picks); timers fire when the test fires
//! them; each replica's physical clock reads what the test set.
//!
//! It is generic over the protocol, so the same scenario (the paper's
//! Figure 1, say) can be replayed against every protocol of the engine.

use causeway_protocol::contract::replica::ReplicaEffects;
use causeway_protocol::contract::session::SessionEffects;
use causeway_protocol::{
    Addr, ClientId, Key, Limits, Message, PhysicalMicros, Protocol, ReadWaitProbe, Replica, ReplicaId, Session,
    SessionError, SessionEvent, SessionSetup, Topology, Value,
};
use std::collections::BTreeMap;
use std::sync::Arc;

pub type Timer<P> = <<P as Protocol>::Replica as Replica>::Timer;

/// A message on its way.
#[derive(Clone, Debug)]
pub struct InFlight<M> {
    pub from: Addr,
    pub to: Addr,
    pub msg: M,
}

pub struct Harness<P: Protocol> {
    pub topology: Arc<Topology>,
    config: P::Config,
    replicas: BTreeMap<ReplicaId, P::Replica>,
    clocks: BTreeMap<ReplicaId, PhysicalMicros>,
    sessions: BTreeMap<ClientId, (P::Session, ReplicaId)>,
    probes: BTreeMap<ReplicaId, ReadWaitProbe<()>>,
    /// Messages sent and not delivered yet, in send order.
    pub in_flight: Vec<InFlight<P::Message>>,
    /// Completions the sessions reported, in order.
    pub events: Vec<(ClientId, SessionEvent)>,
    /// Read requests a replica did not answer in the step it received them.
    pub reads_waited: u64,
    pub reads_answered_at_once: u64,
}

impl<P: Protocol> Harness<P> {
    /// A cluster with every replica's clock at `start_us`. Timers the
    /// replicas arm are ignored: tests fire them by hand.
    pub fn new(topology: Topology, config: P::Config, start_us: PhysicalMicros) -> Self {
        let topology = Arc::new(topology);
        P::validate(&topology, &config).expect("scenario topology fits the protocol");
        let mut h = Harness {
            config,
            replicas: BTreeMap::new(),
            clocks: BTreeMap::new(),
            sessions: BTreeMap::new(),
            probes: BTreeMap::new(),
            in_flight: Vec::new(),
            events: Vec::new(),
            reads_waited: 0,
            reads_answered_at_once: 0,
            topology: topology.clone(),
        };
        for id in topology.all_replicas() {
            let mut r = P::replica(id, topology.clone(), &h.config);
            let mut out = ReplicaEffects::<P::Replica>::default();
            r.start(start_us, &mut out);
            h.replicas.insert(id, r);
            h.clocks.insert(id, start_us);
            h.probes.insert(id, ReadWaitProbe::default());
            h.absorb(Addr::Replica(id), out);
        }
        h
    }

    pub fn replica(&self, id: ReplicaId) -> &P::Replica {
        &self.replicas[&id]
    }

    pub fn replica_mut(&mut self, id: ReplicaId) -> &mut P::Replica {
        self.replicas.get_mut(&id).expect("known replica")
    }

    /// Replica `id` loses its disk and comes back through the protocol's
    /// re-seed: what was in flight to or from it is lost with it, and it
    /// starts at once (its question goes out). False if the protocol
    /// cannot re-seed.
    pub fn reseed(&mut self, id: ReplicaId) -> bool {
        let Some((r, _records)) = P::reseed(id, self.topology.clone(), &self.config) else { return false };
        self.replace(id, r);
        true
    }

    /// Replica `id` crashes and comes back from a checkpoint of its state
    /// (as if every record it had was durable and then compacted): what
    /// was in flight to or from it is lost.
    pub fn restart_from_checkpoint(&mut self, id: ReplicaId) {
        let records = self.replicas[&id].checkpoint();
        let r = P::recover(id, self.topology.clone(), &self.config, records);
        self.replace(id, r);
    }

    /// Replica `id` crashed and `r` takes its place: what was in flight to
    /// or from it is lost, and `r` starts.
    fn replace(&mut self, id: ReplicaId, mut r: P::Replica) {
        let me = Addr::Replica(id);
        self.in_flight.retain(|m| m.from != me && m.to != me);
        let mut out = ReplicaEffects::<P::Replica>::default();
        r.start(self.clocks[&id], &mut out);
        self.replicas.insert(id, r);
        self.absorb(me, out);
    }

    /// The link between replicas `a` and `b` sheds its backlog both ways:
    /// what was in flight between them is lost and returned, and each hears
    /// of it ([`causeway_protocol::Replica::on_peer_lost`]).
    pub fn shed_between(&mut self, a: ReplicaId, b: ReplicaId) -> Vec<InFlight<P::Message>> {
        let (aa, ab) = (Addr::Replica(a), Addr::Replica(b));
        let (lost, kept) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|m| (m.from == aa && m.to == ab) || (m.from == ab && m.to == aa));
        self.in_flight = kept;
        for (me, peer) in [(a, ab), (b, aa)] {
            let mut out = ReplicaEffects::<P::Replica>::default();
            let now = self.clocks[&me];
            self.replicas.get_mut(&me).expect("known replica").on_peer_lost(now, peer, &mut out);
            self.absorb(Addr::Replica(me), out);
        }
        lost
    }

    pub fn session(&self, id: ClientId) -> &P::Session {
        &self.sessions[&id].0
    }

    /// The physical clock of replica `id`.
    pub fn replica_clock(&self, id: ReplicaId) -> PhysicalMicros {
        self.clocks[&id]
    }

    pub fn set_clock(&mut self, id: ReplicaId, now: PhysicalMicros) {
        self.clocks.insert(id, now);
    }

    /// Sets every replica's clock.
    pub fn set_all_clocks(&mut self, now: PhysicalMicros) {
        for c in self.clocks.values_mut() {
            *c = now;
        }
    }

    /// Moves every replica's clock forward.
    pub fn advance_clocks(&mut self, by: PhysicalMicros) {
        for c in self.clocks.values_mut() {
            *c += by;
        }
    }

    /// A session of `coordinator`'s DC; its clock reads its coordinator's.
    pub fn add_session(&mut self, id: ClientId, coordinator: ReplicaId) {
        self.add_session_with(id, coordinator, Limits::default());
    }

    /// [`Harness::add_session`] with other limits.
    pub fn add_session_with(&mut self, id: ClientId, coordinator: ReplicaId, limits: Limits) {
        let setup = SessionSetup { id, coordinator, topology: self.topology.clone(), limits };
        let s = P::session(setup, &self.config);
        self.sessions.insert(id, (s, coordinator));
    }

    /// Messages go in flight; timers are for the test to fire.
    fn absorb<T, R>(&mut self, from: Addr, out: causeway_protocol::Effects<P::Message, T, R>) {
        for (to, msg) in out.messages.into_iter().chain(out.after_durable) {
            self.in_flight.push(InFlight { from, to, msg });
        }
    }

    fn session_call<T>(
        &mut self,
        id: ClientId,
        call: impl FnOnce(&mut P::Session, PhysicalMicros, &mut SessionEffects<P::Session>) -> T,
    ) -> T {
        let mut out = SessionEffects::<P::Session>::default();
        let (s, coordinator) = self.sessions.get_mut(&id).expect("known session");
        let now = self.clocks[coordinator];
        let r = call(s, now, &mut out);
        self.absorb(Addr::Client(id), out);
        r
    }

    pub fn begin(&mut self, c: ClientId) -> Result<Option<SessionEvent>, SessionError> {
        self.session_call(c, |s, now, out| s.begin(now, out))
    }

    pub fn read(&mut self, c: ClientId, keys: &[&str]) -> Result<Option<SessionEvent>, SessionError> {
        let keys: Vec<Key> = keys.iter().map(|k| Key::from(k.to_string())).collect();
        self.session_call(c, |s, now, out| s.read(now, &keys, out))
    }

    /// A read-only transaction as one call.
    pub fn read_only(&mut self, c: ClientId, keys: &[&str]) -> Result<Option<SessionEvent>, SessionError> {
        let keys: Vec<Key> = keys.iter().map(|k| Key::from(k.to_string())).collect();
        self.session_call(c, |s, now, out| s.read_only(now, &keys, out))
    }

    pub fn write(&mut self, c: ClientId, key: &str, value: &str) -> Result<(), SessionError> {
        let (k, v) = (Key::from(key.to_string()), Value::from(value.to_string()));
        self.session_call(c, |s, _, _| s.write(k, Some(v)))
    }

    pub fn delete(&mut self, c: ClientId, key: &str) -> Result<(), SessionError> {
        let k = Key::from(key.to_string());
        self.session_call(c, |s, _, _| s.write(k, None))
    }

    pub fn commit(&mut self, c: ClientId) -> Result<Option<SessionEvent>, SessionError> {
        self.session_call(c, |s, now, out| s.commit(now, out))
    }

    pub fn abort(&mut self, c: ClientId) -> Result<(), SessionError> {
        self.session_call(c, |s, now, out| s.abort(now, out))
    }

    /// Delivers one in-flight message (by index) and queues what it causes.
    pub fn deliver_at(&mut self, index: usize) {
        let InFlight { from, to, msg } = self.in_flight.remove(index);
        match to {
            Addr::Replica(id) => {
                let tag = msg.read_request();
                let now = self.clocks[&id];
                let mut out = ReplicaEffects::<P::Replica>::default();
                self.replicas.get_mut(&id).expect("known replica").on_message(now, from, msg, &mut out);
                let probe = self.probes.get_mut(&id).expect("known replica");
                match probe.after_step(from, tag, &out, || ()) {
                    Some(true) => self.reads_answered_at_once += 1,
                    Some(false) => self.reads_waited += 1,
                    None => {}
                }
                for (to, msg) in &out.messages {
                    probe.on_send(*to, msg);
                }
                self.absorb(to, out);
            }
            Addr::Client(id) => {
                let event = self.session_call(id, |s, now, out| s.on_message(now, from, msg, out));
                if let Some(e) = event {
                    self.events.push((id, e));
                }
            }
        }
    }

    /// Delivers, in FIFO order, every message `pick` selects — including
    /// those the deliveries cause — until none is left. Returns how many.
    pub fn deliver_where(&mut self, mut pick: impl FnMut(&InFlight<P::Message>) -> bool) -> usize {
        let mut n = 0;
        while let Some(i) = self.in_flight.iter().position(&mut pick) {
            self.deliver_at(i);
            n += 1;
        }
        n
    }

    /// Delivers everything, to a fixed point.
    pub fn deliver_all(&mut self) -> usize {
        self.deliver_where(|_| true)
    }

    /// Fires `timer` at one replica.
    pub fn fire(&mut self, id: ReplicaId, timer: Timer<P>) {
        let now = self.clocks[&id];
        let mut out = ReplicaEffects::<P::Replica>::default();
        self.replicas.get_mut(&id).expect("known replica").on_timer(now, timer, &mut out);
        let probe = self.probes.get_mut(&id).expect("known replica");
        for (to, msg) in &out.messages {
            probe.on_send(*to, msg);
        }
        self.absorb(Addr::Replica(id), out);
    }

    /// Fires `timer` at every replica, in id order.
    pub fn fire_all(&mut self, timer: Timer<P>) {
        let ids: Vec<ReplicaId> = self.replicas.keys().copied().collect();
        for id in ids {
            self.fire(id, timer);
        }
    }

    /// Fires `timer` at session `c` (sessions arm timers; the test decides
    /// when they fire); a completion it brings joins the log.
    pub fn fire_session(&mut self, c: ClientId, timer: <P::Session as Session>::Timer) {
        let event = self.session_call(c, |s, now, out| s.on_timer(now, timer, out));
        if let Some(e) = event {
            self.events.push((c, e));
        }
    }

    /// The last completion a session reported, taken out of the log.
    pub fn take_event(&mut self, c: ClientId) -> Option<SessionEvent> {
        let i = self.events.iter().rposition(|(id, _)| *id == c)?;
        Some(self.events.remove(i).1)
    }
}
