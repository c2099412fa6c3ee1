//! What a request does to the session of its connection: the calls into
//! the protocol's session, the completions the cluster sends back, read-only
//! transactions in one request, session tokens and the admin hooks.

use super::admin::{self, DumpParts};
use super::host::ClientHost;
use crate::clock::now_micros;
use crate::token;
use causeway_protocol::contract::session::{CallResult, SessionEffects};
use causeway_protocol::{
    Addr, ClientId, CommitStamp, DcId, PartitionId, PhysicalMicros, Protocol, ReplicaId, Session, SessionError,
    SessionEvent, SessionSetup,
};
use causeway_wire::{Request, Response, Role, Stamp, WireError};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What serving one request produced.
pub enum Served {
    Reply(Response),
    /// The answer comes later, from the cluster (the operation waits in the
    /// driver).
    Wait,
    /// Reply, then close the connection.
    Close(Response),
}

/// An operation that waits for the cluster.
enum Operation {
    Begin,
    Read,
    Commit,
    ReadOnly,
    Dump,
}

impl Operation {
    /// Its name in `operation_latency_seconds`.
    fn name(&self) -> &'static str {
        match self {
            Operation::Begin => "begin",
            Operation::Read => "read",
            Operation::Commit => "commit",
            Operation::ReadOnly => "read_only",
            Operation::Dump => "dump",
        }
    }
}

/// How often an operation that waits for other nodes' partitions looks at
/// their links: one whose partition's node has gone is answered
/// [`WireError::PartitionUnavailable`] rather than left to hang.
const LINK_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// A begin still unanswered after this long is held by its coordinator
/// (restarted, waiting for its DC), and refused if a node of the DC is down.
const BEGIN_HELD_AFTER: Duration = Duration::from_secs(1);

/// The operation in flight: the request it answers, and since when.
struct Waiting {
    id: u64,
    op: Operation,
    since: Instant,
    /// The partitions on other nodes a read waits for (empty for other
    /// operations), and when to look next whether their links are down.
    needs: Vec<PartitionId>,
    check_at: Option<Instant>,
    /// Steps of the session, since the operation began, that sent requests
    /// while it waited: its round trips.
    round_trips: u32,
}

/// What a transaction's later operations hear once one of them was refused
/// (or the transaction ended) here because of `e`.
fn refused_earlier(e: &WireError) -> WireError {
    WireError::Session(SessionError::RefusedEarlier { cause: e.to_string() })
}

fn stamp(s: CommitStamp) -> Stamp {
    Stamp { ts: s.ts.0, dc: s.dc.0, txid: s.txid.0 }
}

/// One connection's session and the operation it waits for.
pub struct SessionDriver<'h, P: Protocol> {
    host: &'h ClientHost<P>,
    client: ClientId,
    dc: DcId,
    session: P::Session,
    waiting: Option<Waiting>,
    out: SessionEffects<P::Session>,
    /// Timers the session armed, by when they are due (then arming order).
    timers: BTreeMap<(Instant, u64), <P::Session as Session>::Timer>,
    armed: u64,
    /// The partitions the running transaction wrote, for the check at its
    /// commit that their nodes are reachable.
    written: BTreeSet<PartitionId>,
    /// An operation of the running transaction this driver refused (a
    /// read of a partition that is down): the transaction cannot commit.
    refused: Option<WireError>,
    /// The running transaction was ended here (a read in flight whose
    /// partition went down was abandoned): its operations are refused
    /// until the client commits or aborts it.
    ended: Option<WireError>,
    /// The partitions of this DC that another node hosts: a begin held by
    /// a restarted coordinator waits for every one of them.
    dc_elsewhere: Vec<PartitionId>,
    /// What this connection may do.
    role: Role,
}

impl<'h, P: Protocol> SessionDriver<'h, P> {
    pub fn new(host: &'h ClientHost<P>, client: ClientId, dc: DcId, coordinator: ReplicaId, role: Role) -> Self {
        let setup = SessionSetup { id: client, coordinator, topology: host.topology.clone(), limits: host.limits };
        let session = P::session(setup, &host.config);
        SessionDriver {
            host,
            client,
            dc,
            session,
            waiting: None,
            out: SessionEffects::<P::Session>::default(),
            timers: BTreeMap::new(),
            armed: 0,
            written: BTreeSet::new(),
            refused: None,
            ended: None,
            dc_elsewhere: hosted_elsewhere(host, dc),
            role,
        }
    }

    pub fn host(&self) -> &'h ClientHost<P> {
        self.host
    }

    pub fn dc(&self) -> DcId {
        self.dc
    }

    /// An operation waits for the cluster: no other request is served.
    pub fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }

    /// Sends what the session asked to send, and arms its timers.
    pub fn flush(&mut self) {
        if let Some(w) = self.waiting.as_mut().filter(|_| !self.out.messages.is_empty()) {
            w.round_trips += 1;
        }
        for (to, msg) in self.out.messages.drain(..) {
            self.host.router.send(Addr::Client(self.client), to, msg);
        }
        for (timer, after_us) in self.out.timers.drain(..) {
            self.armed += 1;
            self.timers.insert((Instant::now() + Duration::from_micros(after_us), self.armed), timer);
        }
    }

    /// When the session's next timer is due.
    /// When the next session timer, or the next look at the links of a
    /// waiting read, is due.
    pub fn next_timer(&self) -> Option<tokio::time::Instant> {
        let session = self.timers.keys().next().map(|&(at, _)| at);
        let links = self.waiting.as_ref().and_then(|w| w.check_at);
        session.into_iter().chain(links).min().map(tokio::time::Instant::from_std)
    }

    /// Fires the session's due timers, and looks at the links of a waiting
    /// read when that is due; the answer to the waiting request if one
    /// completes it.
    pub fn on_timers(&mut self) -> Option<(u64, Response)> {
        let now = Instant::now();
        if let Some(w) = self.waiting.as_mut().filter(|w| w.check_at.is_some_and(|at| at <= now)) {
            w.check_at = Some(now + LINK_CHECK_INTERVAL);
            if let Some(answer) = self.check_links() {
                return Some(answer);
            }
        }
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let timer = entry.remove();
            if let Some(event) = self.session.on_timer(now_micros(), timer, &mut self.out) {
                if let Some(id) = self.waiting.as_ref().map(|w| w.id) {
                    return Some((id, self.complete(event)));
                }
            }
        }
        None
    }

    /// Serves one request: answers it now, or starts what the cluster answers.
    /// The session checks every request against the limits (and refuses
    /// the commit of a transaction it refused an operation of).
    ///
    /// A request that needs a partition of this DC whose node cannot be
    /// reached now (a read of its keys, the commit of a transaction that
    /// wrote it) is refused at once with [`WireError::PartitionUnavailable`];
    /// a refused read leaves its transaction unable to commit, and a
    /// refused commit aborts it.
    pub fn serve(&mut self, id: u64, request: Request, dumps: &mpsc::UnboundedSender<DumpParts>) -> Served {
        if request.needs() > self.role {
            let e = WireError::Forbidden { request: request.name().into(), need: request.needs(), have: self.role };
            // A write refused leaves its transaction unable to commit, so
            // that none commits without it.
            if matches!(request, Request::Write { .. } | Request::Delete { .. }) {
                self.refused.get_or_insert_with(|| e.clone());
            }
            return Served::Reply(Response::Error(e));
        }
        let result = match request {
            Request::Hello { .. } => Err(WireError::invalid("Hello was already received")),
            Request::Begin => {
                // A transaction ended here is over: the session is idle.
                self.ended = None;
                // A coordinator that restarted holds new transactions until
                // its DC has agreed on stable times with it, which waits for
                // every node of the DC: a begin held while one is down is
                // answered with the node's name rather than left to hang.
                self.call(id, Operation::Begin, |s, now, out| s.begin(now, out)).inspect(|served| {
                    // A coordinator answers a begin at once unless it holds
                    // it: a slow answer is not yet a held one.
                    if let (Served::Wait, Some(w)) = (served, self.waiting.as_mut()) {
                        w.check_at = (!self.dc_elsewhere.is_empty()).then(|| Instant::now() + BEGIN_HELD_AFTER);
                    }
                })
            }
            Request::Read { keys } => {
                let needs = self.partitions(&keys);
                match self.refuse_in_txn(&needs) {
                    Some(e) => Err(e),
                    None => self
                        .call(id, Operation::Read, |s, now, out| s.read(now, &keys, out))
                        .map(|served| self.needing(served, needs)),
                }
            }
            Request::Write { key, value } => self.write(key, Some(value)),
            Request::Delete { key } => self.write(key, None),
            Request::Commit => self.commit(id),
            Request::Abort if self.ended.take().is_some() => Ok(Served::Reply(Response::Aborted)),
            Request::Abort => match self.session.abort(now_micros(), &mut self.out) {
                Ok(()) => {
                    self.host.metrics.txns_aborted.inc();
                    Ok(Served::Reply(Response::Aborted))
                }
                Err(e) => Err(e.into()),
            },
            Request::ReadOnly { keys } => {
                let needs = self.partitions(&keys);
                match self.unavailable(&needs) {
                    Some(e) => Err(e),
                    None => self
                        .call(id, Operation::ReadOnly, |s, now, out| s.read_only(now, &keys, out))
                        .map(|served| self.needing(served, needs)),
                }
            }
            Request::ExportSession => self
                .session
                .export_state()
                .map_err(WireError::from)
                .and_then(|state| token::encode::<P>(&self.host.token_key, self.dc, &state))
                .map(|t| Served::Reply(Response::Token(t))),
            Request::ResumeSession { token } => token::decode::<P>(&self.host.token_key, self.dc, &token)
                .and_then(|state| self.session.import_state(state).map_err(WireError::from))
                .map(|()| Served::Reply(Response::Resumed)),
            Request::DropPeerConnections => Ok(Served::Reply(admin::drop_peer_connections(self.host))),
            Request::Stats { waited_txns } => Ok(Served::Reply(admin::stats(self.host, waited_txns))),
            Request::Dump { after } => {
                admin::start_dump(self.host, self.dc, after, dumps.clone());
                self.waiting = Some(Waiting {
                    id,
                    op: Operation::Dump,
                    since: Instant::now(),
                    needs: Vec::new(),
                    check_at: None,
                    round_trips: 0,
                });
                Ok(Served::Wait)
            }
        };
        result.unwrap_or_else(|e| Served::Reply(Response::Error(e)))
    }

    fn write(&mut self, key: bytes::Bytes, value: Option<bytes::Bytes>) -> Result<Served, WireError> {
        if let Some(e) = &self.ended {
            return Err(refused_earlier(e));
        }
        let partition = self.host.topology.partition_of(&key);
        self.session.write(key, value)?;
        self.written.insert(partition);
        Ok(Served::Reply(Response::Written))
    }

    /// Commits the running transaction, unless an operation of it was
    /// refused here or a partition it wrote is down: then it is aborted.
    fn commit(&mut self, id: u64) -> Result<Served, WireError> {
        if let Some(e) = self.ended.take() {
            self.host.metrics.txns_aborted.inc();
            return Err(refused_earlier(&e));
        }
        let written: Vec<PartitionId> = std::mem::take(&mut self.written).into_iter().collect();
        let refusal = match self.refused.take() {
            Some(e) => Some(refused_earlier(&e)),
            None => self.unavailable(&written),
        };
        match refusal {
            None => self.call(id, Operation::Commit, |s, now, out| s.commit(now, out)),
            Some(e) => {
                self.session.abort(now_micros(), &mut self.out)?;
                self.host.metrics.txns_aborted.inc();
                Err(e)
            }
        }
    }

    /// A read of `keys` inside a transaction the driver must refuse: the
    /// transaction was ended here, or a partition it reads is down (which
    /// leaves the transaction unable to commit).
    fn refuse_in_txn(&mut self, needs: &[PartitionId]) -> Option<WireError> {
        if let Some(e) = &self.ended {
            return Some(refused_earlier(e));
        }
        let e = self.unavailable(needs)?;
        self.refused.get_or_insert_with(|| e.clone());
        Some(e)
    }

    /// The partitions that `keys` live in whose replica in this DC another
    /// node hosts, in order: those whose links can be down. None on a node
    /// without peers.
    fn partitions(&self, keys: &[bytes::Bytes]) -> Vec<PartitionId> {
        // A replica group's session goes to another member by itself.
        if !self.host.router.has_peers() || P::REPLICA_GROUPS {
            return Vec::new();
        }
        let (topology, router) = (&self.host.topology, &self.host.router);
        let mut parts: Vec<PartitionId> = keys.iter().map(|k| topology.partition_of(k)).collect();
        parts.sort_unstable();
        parts.dedup();
        parts.retain(|&p| topology.holds(self.dc, p) && router.hosted_elsewhere(ReplicaId::at(self.dc, p)));
        parts
    }

    /// The error for the first of `partitions` whose node in this DC
    /// cannot be reached now, if any.
    fn unavailable(&self, partitions: &[PartitionId]) -> Option<WireError> {
        partitions.iter().find_map(|&p| {
            let node = self.host.router.unreachable_host(ReplicaId::at(self.dc, p))?;
            Some(WireError::PartitionUnavailable { dc: self.dc.0, partition: p.0, node: node.to_string() })
        })
    }

    /// A waiting operation waits for `needs` too.
    fn needing(&mut self, served: Served, needs: Vec<PartitionId>) -> Served {
        if let (Served::Wait, Some(w)) = (&served, self.waiting.as_mut()) {
            w.check_at = (!needs.is_empty()).then(|| Instant::now() + LINK_CHECK_INTERVAL);
            w.needs = needs;
        }
        served
    }

    /// The waiting read (or begin), if a partition it needs has gone down
    /// since it was sent: given up (a read's transaction is over), and
    /// answered with [`WireError::PartitionUnavailable`]. A commit is never
    /// given up here: its coordinator decides it, or gives it up itself.
    fn check_links(&mut self) -> Option<(u64, Response)> {
        let w = self.waiting.as_ref()?;
        let needs = match w.op {
            Operation::Read | Operation::ReadOnly => &w.needs,
            Operation::Begin => &self.dc_elsewhere,
            Operation::Commit | Operation::Dump => return None,
        };
        let e = self.unavailable(needs)?;
        let in_txn = matches!(w.op, Operation::Read);
        self.session.abandon(now_micros(), &mut self.out).ok()?;
        if in_txn {
            self.ended = Some(e.clone());
        }
        let id = self.done()?;
        Some((id, Response::Error(e)))
    }

    /// Calls the session; an immediate completion is answered at once.
    fn call(
        &mut self,
        id: u64,
        op: Operation,
        f: impl FnOnce(&mut P::Session, PhysicalMicros, &mut SessionEffects<P::Session>) -> CallResult,
    ) -> Result<Served, WireError> {
        let event = f(&mut self.session, now_micros(), &mut self.out)?;
        self.waiting =
            Some(Waiting { id, op, since: Instant::now(), needs: Vec::new(), check_at: None, round_trips: 0 });
        match event.map(|ev| self.complete(ev)) {
            // Answered without the cluster (a read of the client's own
            // writes, a commit without writes).
            Some(reply) => Ok(Served::Reply(reply)),
            None => Ok(Served::Wait),
        }
    }

    /// A message from the cluster for this session; the answer to the
    /// waiting request when it completes it.
    pub fn on_message(&mut self, from: Addr, msg: P::Message) -> Option<(u64, Response)> {
        let event = self.session.on_message(now_micros(), from, msg, &mut self.out)?;
        let id = self.waiting.as_ref()?.id;
        Some((id, self.complete(event)))
    }

    /// The waiting operation is over with `response`: its request id and
    /// the response, timed.
    pub fn finish(&mut self, response: Response) -> Option<(u64, Response)> {
        self.done().map(|id| (id, response))
    }

    /// The waiting operation is over: its request id; its latency is
    /// recorded.
    fn done(&mut self) -> Option<u64> {
        let waiting = self.waiting.take()?;
        self.host.metrics.observe_op(waiting.op.name(), waiting.since.elapsed().as_secs_f64());
        Some(waiting.id)
    }

    /// The reply a session completion makes of the waiting operation;
    /// ends it.
    fn complete(&mut self, event: SessionEvent) -> Response {
        let metrics = &self.host.metrics;
        let op = self.waiting.as_ref().map(|w| &w.op);
        let response = match (op, event) {
            (_, SessionEvent::Failed(e)) => {
                if matches!(e, SessionError::RefusedEarlier { .. }) {
                    metrics.txns_aborted.inc();
                }
                Response::Error(e.into())
            }
            (_, SessionEvent::Aborted(why)) => {
                metrics.txns_aborted.inc();
                Response::TxnAborted(why)
            }
            (Some(Operation::Begin), SessionEvent::Started) => {
                metrics.txns_started.inc();
                self.written.clear();
                self.refused = None;
                Response::Started
            }
            (Some(Operation::Read), SessionEvent::Read(values)) => {
                Response::Values(values.into_iter().map(|(_, v)| v).collect())
            }
            (Some(Operation::Commit), SessionEvent::Committed(s)) => {
                metrics.txns_committed.inc();
                Response::Committed(s.map(stamp))
            }
            (Some(Operation::ReadOnly), SessionEvent::Read(values)) => {
                metrics.txns_started.inc();
                metrics.txns_committed.inc();
                // What the completing step sends (a release) is flushed
                // after the operation is over: not a round trip.
                metrics.observe_read_only_rounds(self.waiting.as_ref().map_or(0, |w| w.round_trips));
                Response::Values(values.into_iter().map(|(_, v)| v).collect())
            }
            (_, ev) => {
                tracing::warn!(client = ?self.client, ?ev, "unexpected session event");
                Response::Error(WireError::Unavailable(format!("the session answered {ev:?} out of turn")))
            }
        };
        self.done();
        response
    }

    /// The client went away: end its transaction so the coordinator can
    /// forget it at once.
    pub fn close(&mut self) {
        let _ = self.session.abort(now_micros(), &mut self.out);
        self.flush();
    }
}

/// Every partition of DC `dc` that another node than this one hosts.
fn hosted_elsewhere<P: Protocol>(host: &ClientHost<P>, dc: DcId) -> Vec<PartitionId> {
    if !host.router.has_peers() || P::REPLICA_GROUPS {
        return Vec::new();
    }
    host.topology
        .replicas_in(dc)
        .into_iter()
        .filter(|&r| host.router.hosted_elsewhere(r))
        .map(|r| r.partition)
        .collect()
}
