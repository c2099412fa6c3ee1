//! The handle: starts the tasks, queues messages, reports statistics.

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::delay::DelayLine;
use crate::frame::{self, MAX_VARINT_BYTES};
use crate::outbox::{lock, PushError};
use crate::peer::{LinkState, PeerShared};
use crate::shared::{Deliver, Inlet, Shared};
use crate::stats::TransportStats;
use crate::{inbound, outbound, NodeId, TransportConfig, WireMessage};

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SendError {
    #[error("node {0} is not a peer")]
    UnknownPeer(NodeId),
    #[error("message encodes to {bytes} bytes, more than the {max} a frame allows")]
    TooLarge { bytes: usize, max: usize },
    #[error("message does not encode: {0}")]
    Encode(String),
    #[error("the transport is shut down")]
    Closed,
}

/// The WAN stage of a link carries encoded messages.
type WanStage = DelayLine<Vec<u8>>;

/// A running transport. Clones share it.
pub struct Transport<M> {
    inner: Arc<Inner>,
    _msg: PhantomData<fn(M) -> M>,
}

impl<M> Clone for Transport<M> {
    fn clone(&self) -> Self {
        Transport { inner: self.inner.clone(), _msg: PhantomData }
    }
}

struct Inner {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    /// Parallel to `shared.peers`: the WAN stage of each link, if emulated.
    delays: Vec<Option<WanStage>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    delay_tasks: Vec<AbortHandle>,
    closed: AtomicBool,
    /// The largest encoded message that fits a frame.
    max_msg: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The tasks hold only `Shared`, so they would outlive the last handle otherwise.
        for t in lock(&self.tasks).iter() {
            t.abort();
        }
    }
}

impl<M: WireMessage> Transport<M> {
    /// Binds `cfg.listen`, starts accept and dial tasks on the current tokio runtime.
    pub async fn start(cfg: TransportConfig, deliver: Deliver<M>) -> io::Result<Self> {
        Self::start_inlet(cfg, deliver.into()).await
    }

    /// Like [`Transport::start`], with messages admitted before delivery
    /// ([`Inlet::admit`]).
    pub async fn start_inlet(cfg: TransportConfig, inlet: Inlet<M>) -> io::Result<Self> {
        cfg.validate()?;
        let listener = TcpListener::bind(cfg.listen).await?;
        Self::run(cfg, listener, inlet)
    }

    /// Like [`Transport::start`] on a listener bound already (`cfg.listen` is
    /// ignored): lets a cluster learn every node's address before any starts.
    /// Takes a [`Deliver`] or an [`Inlet`].
    pub async fn start_with_listener(
        cfg: TransportConfig,
        listener: std::net::TcpListener,
        inlet: impl Into<Inlet<M>>,
    ) -> io::Result<Self> {
        cfg.validate()?;
        listener.set_nonblocking(true)?;
        Self::run(cfg, TcpListener::from_std(listener)?, inlet.into())
    }

    fn run(cfg: TransportConfig, listener: TcpListener, inlet: Inlet<M>) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let mut peer_cfgs = cfg.peers.clone();
        peer_cfgs.sort_by_key(|p| p.node);
        let peers: Vec<Arc<PeerShared>> =
            peer_cfgs.iter().map(|p| Arc::new(PeerShared::new(p.node, p.name.clone(), p.addr.clone()))).collect();
        let max_msg = cfg.max_frame_bytes - 2 * MAX_VARINT_BYTES;
        let delays: Vec<_> = peer_cfgs
            .iter()
            .zip(&peers)
            .map(|(p, shared)| {
                let peer = shared.clone();
                p.delay.map(|spec| {
                    DelayLine::new(spec, move |bytes: Vec<u8>| {
                        // Size was checked by `send`.
                        // Counted when it entered the delay line.
                        let _ = peer.outbox.push_with(usize::MAX, None, |b| {
                            b.extend_from_slice(&bytes);
                            Ok(())
                        });
                    })
                })
            })
            .collect();
        let delay_tasks = delays.iter().flatten().map(DelayLine::abort_handle).collect();
        let shared = Arc::new(Shared {
            cfg,
            incarnation: new_incarnation(),
            peers,
            epoch: watch::Sender::new(0),
            protocol_errors: AtomicU64::new(0),
            on_gap: inlet.on_gap.clone(),
        });
        let mut tasks = vec![tokio::spawn(inbound::accept_loop(listener, shared.clone(), Arc::new(inlet)))];
        tasks.extend(shared.peers.iter().map(|p| tokio::spawn(outbound::run(shared.clone(), p.clone()))));
        let inner = Inner {
            shared,
            local_addr,
            delays,
            tasks: Mutex::new(tasks),
            delay_tasks,
            closed: AtomicBool::new(false),
            max_msg,
        };
        Ok(Transport { inner: Arc::new(inner), _msg: PhantomData })
    }

    /// Queues `msg` for `to`. Never blocks. The queue is bounded by
    /// [`TransportConfig::max_backlog_bytes`]: past it, the link drops its
    /// backlog, and the peer hears of the gap ([`crate::Inlet::on_gap`]).
    pub fn send(&self, to: NodeId, msg: M) -> Result<(), SendError> {
        let inner = &*self.inner;
        if inner.closed.load(Relaxed) {
            return Err(SendError::Closed);
        }
        let i = inner.shared.index(to).ok_or(SendError::UnknownPeer(to))?;
        let peer = &inner.shared.peers[i];
        let max = inner.max_msg;
        // The backlog's bytes count the message before anything can take
        // it (and take its bytes off once acknowledged).
        let backlog = &peer.counters.backlog_bytes;
        match &inner.delays[i] {
            None => {
                peer.outbox.push_with(max, Some(backlog), |b| frame::encode_into(b, &msg)).map_err(|e| match e {
                    PushError::Encode(e) => SendError::Encode(e.to_string()),
                    PushError::TooLarge(bytes) => SendError::TooLarge { bytes, max },
                })?;
            }
            Some(line) => {
                let mut bytes = Vec::new();
                frame::encode_into(&mut bytes, &msg).map_err(|e| SendError::Encode(e.to_string()))?;
                if bytes.len() > max {
                    return Err(SendError::TooLarge { bytes: bytes.len(), max });
                }
                backlog.fetch_add(bytes.len() as u64, Relaxed);
                line.push(bytes);
            }
        }
        peer.counters.enqueued.fetch_add(1, Relaxed);
        if backlog.load(Relaxed) > inner.shared.cfg.max_backlog_bytes as u64 && !peer.shed.swap(true, Relaxed) {
            peer.shed_now.notify_one();
        }
        Ok(())
    }
}

impl<M> Transport<M> {
    pub fn node(&self) -> NodeId {
        self.inner.shared.cfg.node
    }

    /// The address peers connect to (the bound port when `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Breaks every TCP connection now, both directions (test and chaos hook).
    /// Links reconnect by themselves and lose nothing.
    pub fn drop_connections(&self) {
        self.inner.shared.epoch.send_modify(|e| *e += 1);
    }

    /// Whether the outbound link to `node` is up, and since when; `None`
    /// for a node that is not a peer. Cheap: for a check on every request.
    pub fn link(&self, node: NodeId) -> Option<LinkState> {
        let peer = self.inner.shared.peer(node)?;
        let link = *peer.link.lock().unwrap_or_else(|e| e.into_inner());
        Some(link)
    }

    pub fn stats(&self) -> TransportStats {
        let shared = &self.inner.shared;
        TransportStats {
            node: shared.cfg.node,
            peers: shared.peers.iter().map(|p| p.counters.snapshot(p.node)).collect(),
            protocol_errors: shared.protocol_errors.load(Relaxed),
        }
    }

    /// Stops every task and closes every connection, for all clones; later
    /// sends fail with [`SendError::Closed`]. Unacknowledged messages are lost.
    pub async fn shutdown(self) {
        self.inner.closed.store(true, Relaxed);
        for t in &self.inner.delay_tasks {
            t.abort();
        }
        let tasks = std::mem::take(&mut *lock(&self.inner.tasks));
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
    }
}

/// Start time in nanoseconds, strictly increasing within the process so that
/// two transports started in one test still differ.
fn new_incarnation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let prev = LAST.fetch_update(Relaxed, Relaxed, |last| Some(now.max(last + 1))).expect("always Some");
    now.max(prev + 1)
}
