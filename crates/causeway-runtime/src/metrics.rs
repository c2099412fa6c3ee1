//! Prometheus metrics of a node, and the endpoint that serves them.
//!
//! Counters and histograms are updated where things happen; values that are
//! state rather than events (stable-time lag, queue lengths, versions) are
//! read from the replicas' published gauges when Prometheus scrapes.
//!
//! Names follow Prometheus's conventions: what counts events is a counter
//! (served with `_total`), what can go down is a gauge, and a value with a
//! unit is registered with its base unit (seconds, bytes), which names it
//! (`_seconds`, `_bytes`) and gives it a `# UNIT` line.

use causeway_protocol::{Message, MsgClass};
use causeway_wire::{ClassCount, NodeStats};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

pub type Labels = Vec<(&'static str, String)>;

fn latency_histogram() -> Histogram {
    // 50 µs to about 13 s.
    Histogram::new(exponential_buckets(50e-6, 2.0, 19))
}

pub struct Metrics {
    registry: Mutex<Registry>,
    pub txns_started: Counter,
    pub txns_committed: Counter,
    pub txns_aborted: Counter,
    pub op_latency: Family<Labels, Histogram, fn() -> Histogram>,
    pub reads_waited: Counter,
    pub read_wait: Histogram,
    pub bytes_sent: Family<Labels, Counter>,
    pub messages_sent: Family<Labels, Counter>,
    /// How far the visible snapshot trails the local clock, per origin kind.
    pub stable_lag: Family<Labels, Gauge<f64, AtomicU64>>,
    pub queue_length: Family<Labels, Gauge>,
    pub versions: Family<Labels, Gauge>,
    /// Whether a replica leads its group's ordered log (protocols of
    /// replica groups only).
    pub group_leader: Family<Labels, Gauge>,
    pub metadata_per_version: Family<Labels, Gauge>,
    pub client_connections: Gauge,
    /// Client connections closed by a limit, by why (`max_clients`,
    /// `idle_timeout`, `frame_timeout`).
    pub client_connections_refused: Family<Labels, Counter>,
    /// Client logins, by outcome (`user`, `anonymous`, `anonymous_refused`,
    /// `bad_credentials`, `rate_limited`).
    pub client_logins: Family<Labels, Counter>,
    pub peer_connected: Family<Labels, Gauge>,
    /// Set from the transport's own count (which only grows) at each scrape.
    pub peer_reconnects: Family<Labels, Counter>,
    /// Envelopes a peer node sent in the name of an address it does not host.
    pub peer_envelopes_refused: Counter,
    /// Times a peer's message was held back for a timestamp too far ahead
    /// of this node's clock, per peer.
    pub peer_messages_held: Family<Labels, Counter>,
    /// Times a peer node told this one it had shed its backlog to it.
    pub peer_gaps: Counter,
    /// Per peer: bytes held for it, and the backlogs shed (set from the
    /// transport's counts at each scrape).
    pub peer_backlog_bytes: Family<Labels, Gauge>,
    pub peer_backlogs_shed: Family<Labels, Counter>,
    pub peer_messages_shed: Family<Labels, Counter>,
    /// The per-class series of `bytes_sent` and `messages_sent`, by class
    /// index, looked up once: counting a message is on every send's path.
    sent_by_class: Vec<(MsgClass, Counter, Counter)>,
    /// Read requests (slices) answered — counted when answered, as those
    /// that waited are, so that over any interval the waited ones are a
    /// share of them — and the microseconds those that waited spent
    /// waiting, for benchmarks ([`causeway_client::wire::NodeStats`]).
    pub read_slices: Counter,
    pub read_wait_us: Counter,
    /// Times a replica waited for its checkpoint to be written before its
    /// next one was due: the disk falls behind the writes.
    pub checkpoint_waits: Counter,
    /// Client request frames read, answer frames queued, and the writes
    /// that carried answers, for benchmarks
    /// ([`causeway_client::wire::LinkCounts`]; not exported).
    pub client_frames_received: Counter,
    pub client_frames_sent: Counter,
    pub client_writes: Counter,
    /// Batches of stream groups spilled to disk and read back, and the
    /// bytes of each replica's spill on disk.
    pub stream_spills: Counter,
    pub stream_unspilled: Counter,
    pub stream_spilled: Family<Labels, Gauge>,
    /// `(DC, transaction)` of transactions with a read slice that waited,
    /// bounded by `NodeStats::MAX_WAITED_TXNS`.
    pub waited_txns: Mutex<rustc_hash::FxHashSet<(u16, u64)>>,
    /// The series of `op_latency` for each client operation, looked up once.
    op_series: Vec<(&'static str, Histogram)>,
    /// Read-only transactions by the round trips their session took
    /// ([`READ_ONLY_ROUNDS`] series: 1, 2, 3, then 4 or more).
    read_only_rounds: Family<Labels, Counter>,
    read_only_series: Vec<Counter>,
}

/// How many series `read_only_round_trips` has: 1, 2, 3, and the last
/// for 4 or more.
pub const READ_ONLY_ROUNDS: usize = 4;

/// Client operations timed by `operation_latency_seconds`.
pub const OPERATIONS: [&str; 5] = ["begin", "read", "commit", "read_only", "dump"];

impl Metrics {
    /// The metrics of a node whose protocol declares message `classes`.
    pub fn new(classes: &[MsgClass]) -> Self {
        debug_assert!(causeway_protocol::contract::classes_are_indexed(classes), "{classes:?}");
        let bytes_sent: Family<Labels, Counter> = Family::default();
        let messages_sent: Family<Labels, Counter> = Family::default();
        let sent_by_class = classes
            .iter()
            .map(|&c| {
                let label = vec![("class", c.name().to_string())];
                (c, bytes_sent.get_or_create(&label).clone(), messages_sent.get_or_create(&label).clone())
            })
            .collect();
        let op_latency: Family<Labels, Histogram, fn() -> Histogram> = Family::new_with_constructor(latency_histogram);
        let op_series =
            OPERATIONS.map(|op| (op, op_latency.get_or_create(&vec![("op", op.to_string())]).clone())).to_vec();
        let read_only_rounds: Family<Labels, Counter> = Family::default();
        let read_only_series = (1..=READ_ONLY_ROUNDS)
            .map(|r| {
                let label = if r < READ_ONLY_ROUNDS { r.to_string() } else { format!("{r}+") };
                read_only_rounds.get_or_create(&vec![("rounds", label)]).clone()
            })
            .collect();
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("causeway")),
            txns_started: Counter::default(),
            txns_committed: Counter::default(),
            txns_aborted: Counter::default(),
            op_latency,
            reads_waited: Counter::default(),
            read_wait: latency_histogram(),
            bytes_sent,
            messages_sent,
            stable_lag: Family::default(),
            queue_length: Family::default(),
            versions: Family::default(),
            group_leader: Family::default(),
            metadata_per_version: Family::default(),
            client_connections: Gauge::default(),
            client_connections_refused: Family::default(),
            client_logins: Family::default(),
            peer_connected: Family::default(),
            peer_reconnects: Family::default(),
            peer_envelopes_refused: Counter::default(),
            peer_messages_held: Family::default(),
            peer_gaps: Counter::default(),
            peer_backlog_bytes: Family::default(),
            peer_backlogs_shed: Family::default(),
            peer_messages_shed: Family::default(),
            sent_by_class,
            read_slices: Counter::default(),
            read_wait_us: Counter::default(),
            checkpoint_waits: Counter::default(),
            client_frames_received: Counter::default(),
            client_frames_sent: Counter::default(),
            client_writes: Counter::default(),
            stream_spills: Counter::default(),
            stream_unspilled: Counter::default(),
            stream_spilled: Family::default(),
            waited_txns: Mutex::default(),
            op_series,
            read_only_rounds,
            read_only_series,
        };
        {
            let mut r = m.registry.lock().unwrap_or_else(|e| e.into_inner());
            // Every metric with its help text (and base unit), as Prometheus lists them.
            macro_rules! register {
                ($($name:literal $(in $unit:ident)?: $help:literal => $metric:expr,)*) => {
                    $(register!(@one $name $(in $unit)?: $help => $metric);)*
                };
                (@one $name:literal: $help:literal => $metric:expr) => {
                    r.register($name, $help, $metric.clone())
                };
                (@one $name:literal in $unit:ident: $help:literal => $metric:expr) => {
                    r.register_with_unit($name, $help, Unit::$unit, $metric.clone())
                };
            }
            register! {
                "transactions_started": "Transactions begun by clients of this node" => m.txns_started,
                "transactions_committed": "Transactions committed by clients of this node" => m.txns_committed,
                "transactions_aborted": "Transactions aborted by clients of this node" => m.txns_aborted,
                "operation_latency" in Seconds: "Client operation latency, by operation" => m.op_latency,
                "read_only_round_trips": "Read-only transactions of this node's clients, by the round trips \
                    their session took (Wren: 2, its snapshot and its reads; EC: 1; PrompTCC: 1, or 2)"
                    => m.read_only_rounds,
                "reads_waited": "Read slices a replica could not answer at once" => m.reads_waited,
                "checkpoint_waits": "Times a replica stopped until its checkpoint was written, the next being due \
                    (the disk falls behind the writes)" => m.checkpoint_waits,
                "stream_spills": "Batches of replication groups a replica spilled to disk: past [peers] \
                    max_kept_mb of groups kept for peers in other DCs that have not acknowledged them (one is \
                    behind or cut off)" => m.stream_spills,
                "stream_unspilled": "Batches of spilled replication groups read back for a peer that resumed \
                    behind what memory holds" => m.stream_unspilled,
                "stream_spilled" in Bytes: "Bytes of a replica's spilled replication groups on disk, per replica \
                    (forgotten once every peer acknowledges them)" => m.stream_spilled,
                "read_wait" in Seconds: "How long read slices that waited waited" => m.read_wait,
                "sent" in Bytes: "Protocol message bytes sent, by message class" => m.bytes_sent,
                "messages_sent": "Protocol messages sent, by message class" => m.messages_sent,
                "stable_lag" in Seconds: "Local clock minus the visible snapshot's time, per replica and origin \
                    (local: LST, remote: RST; PaRiS: the UST; BPR: what the replica installed)" => m.stable_lag,
                "queue_length": "Messages waiting in a queue (replica inbox, peer link)" => m.queue_length,
                "versions": "Versions stored, per replica" => m.versions,
                "group_leader": "Whether the replica leads its partition's replica group, proposing to its \
                    ordered log (1) or not (0); Geo-SDUR only" => m.group_leader,
                "version_metadata" in Bytes: "Bytes of protocol metadata per stored version (Wren: two timestamps)"
                    => m.metadata_per_version,
                "client_connections": "Open client connections" => m.client_connections,
                "client_connections_closed_by_limit": "Client connections refused or closed by a limit of \
                    [connections] (max_clients, idle_timeout, frame_timeout)" => m.client_connections_refused,
                "client_logins": "Client logins by outcome: user, anonymous, anonymous_refused, bad_credentials \
                    (an unknown user or a wrong password), rate_limited (too many failures from the source)"
                    => m.client_logins,
                "peer_connected": "Whether the link to a peer node is connected (1) or not (0)" => m.peer_connected,
                "peer_reconnects": "Times the link to a peer node reconnected" => m.peer_reconnects,
                "peer_envelopes_refused": "Envelopes a peer node sent in the name of an address it does not \
                    host, dropped" => m.peer_envelopes_refused,
                "peer_messages_held": "Times a peer's message was held back (its link waiting behind it) because \
                    a timestamp in it ran further ahead of this node's clock than max_clock_offset_ms"
                    => m.peer_messages_held,
                "peer_gaps": "Times a peer node said it had dropped messages for this one (its backlog passed \
                    max_backlog_mb); the replicas resumed what they lost" => m.peer_gaps,
                "peer_backlog" in Bytes: "Bytes of messages held for a peer node, not yet acknowledged"
                    => m.peer_backlog_bytes,
                "peer_backlogs_shed": "Times the backlog for a peer node passed [peers] max_backlog_mb and was \
                    dropped (the peer is told, and resumes what it lost)" => m.peer_backlogs_shed,
                "peer_messages_shed": "Messages dropped with shed backlogs, per peer node" => m.peer_messages_shed,
            }
        }
        m
    }

    /// Counts a message about to be sent, by class.
    pub fn count_sent<M: Message>(&self, msg: &M) {
        // A class the protocol did not declare counts under its first.
        let Some((_, bytes, messages)) =
            self.sent_by_class.get(msg.class().index()).or_else(|| self.sent_by_class.first())
        else {
            return;
        };
        bytes.inc_by(postcard::experimental::serialized_size(msg).unwrap_or(0) as u64);
        messages.inc();
    }

    /// Records how long a client operation (one of [`OPERATIONS`]) took.
    pub fn observe_op(&self, op: &'static str, seconds: f64) {
        match self.op_series.iter().find(|(name, _)| *name == op) {
            Some((_, h)) => h.observe(seconds),
            None => self.op_latency.get_or_create(&vec![("op", op.to_string())]).observe(seconds),
        }
    }

    /// Counts a client connection refused or closed by the bound `why`
    /// of `[connections]` (`max_clients`, `frame_timeout`, `idle_timeout`).
    pub fn closed_by_limit(&self, why: &'static str) {
        self.client_connections_refused.get_or_create(&vec![("why", why.into())]).inc();
    }

    /// Counts a login by its outcome.
    pub fn count_login(&self, outcome: &'static str) {
        self.client_logins.get_or_create(&vec![("outcome", outcome.into())]).inc();
    }

    /// Records a read-only transaction that took `rounds` round trips.
    pub fn observe_read_only_rounds(&self, rounds: u32) {
        let i = (rounds.max(1) as usize).min(READ_ONLY_ROUNDS) - 1;
        self.read_only_series[i].inc();
    }

    /// Read-only transactions so far by round trips: 1, 2, 3, 4 or more.
    pub fn read_only_rounds(&self) -> Vec<u64> {
        self.read_only_series.iter().map(|c| c.get()).collect()
    }

    /// Records a read slice that was answered `waited` after it arrived
    /// (not in the step that received it).
    pub fn read_waited(&self, dc: u16, tx: u64, waited: std::time::Duration) {
        self.read_slices.inc();
        self.reads_waited.inc();
        self.read_wait.observe(waited.as_secs_f64());
        self.read_wait_us.inc_by(waited.as_micros() as u64);
        let mut set = self.waited_txns.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() < NodeStats::MAX_WAITED_TXNS {
            set.insert((dc, tx));
        }
    }

    /// Messages and bytes sent so far, by class, in the protocol's order.
    pub fn sent_by_class(&self) -> Vec<ClassCount> {
        self.sent_by_class
            .iter()
            .map(|(c, bytes, messages)| ClassCount {
                class: c.name().into(),
                messages: messages.get(),
                bytes: bytes.get(),
            })
            .collect()
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        let r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }
}

/// Serves `GET /metrics` (any path, really) as Prometheus text until the task
/// is aborted. `refresh` updates scrape-time gauges first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: std::sync::Arc<Metrics>,
    refresh: std::sync::Arc<dyn Fn() + Send + Sync>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            // Out of file descriptors, typically: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let metrics = metrics.clone();
        let refresh = refresh.clone();
        tokio::spawn(async move {
            // Read the request head (bounded); we answer every request the same.
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 16384 {
                match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
                    _ => return,
                }
                // An HTTP request starts with a method in capitals. Anything
                // else (a Causeway client at the wrong port) is told at once
                // rather than left waiting for a head that never comes.
                if !seen.iter().take_while(|b| **b != b' ').all(u8::is_ascii_uppercase) {
                    let bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                    let _ = stream.write_all(bad.as_bytes()).await;
                    let _ = stream.shutdown().await;
                    return;
                }
            }
            refresh();
            let body = metrics.encode();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn read_only_rounds_are_bucketed_one_two_three_and_more() {
        let m = super::Metrics::new(&[causeway_protocol::MsgClass::CLIENT]);
        for r in [1, 1, 2, 3, 4, 9, 0] {
            m.observe_read_only_rounds(r);
        }
        assert_eq!(m.read_only_rounds(), vec![3, 1, 1, 2], "0 counts as 1, 9 as 4 or more");
        assert!(m.encode().contains("read_only_round_trips_total{rounds=\"4+\"} 2"), "{}", m.encode());
    }
}
