//! The cluster config file: one TOML file describes DCs, partitions,
//! placement, node addresses, protocol and intervals. Every node of a cluster
//! reads the same file; it is validated at start and each mistake is named
//! with where it is.
//!
//! ```toml
//! name = "demo"             # peers of another cluster are refused
//! protocol = "wren"         # wren (default); see `causeway sim --help`
//! partitions = 2            # partitions per DC
//! token_key = "…"           # optional, ≥ 16 characters: nodes that share it
//!                           # accept each other's session tokens
//! fsync = "always"          # when a commit counts as durable: "always" (on
//!                           # disk before it is acknowledged), "batch" (synced
//!                           # every 5 ms), "never" (benchmarks only)
//! max_clock_offset_ms = 500 # a peer's message with a timestamp further
//!                           # ahead of this node's clock is held back (not
//!                           # taken, its link waiting) until the clock is
//!                           # within this of it: no poisoned clock moves ours
//! checkpoint_min_mb = 64    # a replica's log is replaced by a checkpoint
//!                           # once this much, or its last checkpoint's size,
//!                           # was appended since the last one
//! tls = "off"               # required: "off" (plain TCP; any process that
//!                           # reaches a peer port can join), or the table:
//! # [tls]
//! # dir = "certs"           # ca.pem, <node>.pem, <node>.key (relative to
//! #                         # this file), as `causeway certs` writes them
//! # clients = true          # TLS on the client listeners too (default)
//!
//! [tuning]                  # optional
//! apply_interval_ms = 5.0   # Δ_R
//! stabilization_interval_ms = 5.0  # Δ_G
//!
//! [ordered]                 # optional; Geo-SDUR's log and techniques (defaults)
//! heartbeat_ms = 50         # a group's leader reaches its followers this often
//! election_ms = 1000        # followers that hear no leader this long (up to
//!                           # twice) elect another; keep it well above the RTT
//! reorder_threshold = 0     # log positions a local may pass a pending global
//! delay_ms = 0              # a global's parts for partitions near the client
//!                           # leave this late; "rtt": from the WAN model
//! bloom_bits = 0            # certify read sets as bloom filters of this many
//! bloom_history = 10000     # bits, against the last this many entries (0: keys)
//!
//! [limits]                  # optional; these are the defaults
//! max_key_bytes = 1024
//! max_value_bytes = 65536
//! max_keys_per_read = 128
//! max_writes_per_txn = 128
//! max_cached_writes = 100000   # a session's own writes not yet stable (Wren, PaRiS)
//!
//! [auth]                    # required: who may connect as a client
//! users = "users.toml"      # users, roles and password hashes (relative to
//!                           # this file), as `causeway user add` writes them
//! anonymous = "write"       # the role of a client without credentials
//!                           # (read, write, admin); left out: refused
//! max_failed_logins = 5     # failed logins from one source per window,
//! failed_login_window_s = 60  # past which its logins are refused unchecked
//!
//! [peers]                   # optional; the default is shown
//! max_backlog_mb = 256      # messages held for one unreachable or slow peer
//!                           # node; past it they are dropped, the peer is
//!                           # told, and its replicas resume what they lost
//! max_kept_mb = 64          # per replica: groups kept in memory for peers
//!                           # in other DCs until they acknowledge them; past
//!                           # it the oldest are spilled to disk under the
//!                           # data directory (`spill/dc0-p1/`) and read back
//!                           # when a peer that was cut off returns
//!
//! [connections]             # optional; these are the defaults
//! max_clients = 1024        # client connections per node; the next one is
//!                           # answered with an error and closed
//! idle_timeout_s = 3600     # a session with nothing asked or pending this
//!                           # long is closed (0: never)
//! frame_timeout_s = 10      # a request (the hello too) must arrive whole
//!                           # within this of its first byte
//!
//! [wan]                     # optional: emulate WAN latency between DCs
//! emulate = true
//! file = "config/wan.toml"  # RTT matrix; default: the built-in one
//!
//! [[dc]]
//! name = "virginia"
//! [[dc]]
//! name = "oregon"
//! # partial replication (PaRiS, BPR): where this DC reads and prepares a
//! # partition it does not hold, instead of the round-robin choice
//! # preferred = { 2 = "virginia" }
//!
//! [[node]]
//! name = "virginia-0"
//! dc = "virginia"
//! partitions = [0, 1]
//! peer = "127.0.0.1:7000"     # other servers connect here (a host name
//!                             # works too: "db-1.example:7000")
//! client = "127.0.0.1:7100"   # clients connect here
//! metrics = "127.0.0.1:9100"  # optional Prometheus endpoint
//! data_dir = "data/virginia-0"  # where the node keeps its logs (relative
//!                             # to this file); without one it keeps nothing
//! clock_offset_ms = 0         # optional, benchmarks only: emulated clock skew
//! # … one or more nodes per DC, together holding every partition.
//! # Geo-SDUR (protocol = "sdur") places a partition's group of replicas by
//! # the nodes that list it: two nodes of one DC listing partition 0 are two
//! # members of its group there (its majority in one region).
//! ```

use crate::auth::AuthPlan;
use crate::disk::Fsync;
use crate::plan::{ClusterPlan, ConnectionLimits, NodePlan, TlsPlan, WanDelays};
use causeway_protocol::{DcId, Limits, PartitionId, ProtocolKind, ReplicaId, Topology, Tuning};
use causeway_transport::HostAddr;
use causeway_workload::WanModel;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "default_name")]
    name: String,
    #[serde(default)]
    protocol: Option<String>,
    partitions: u32,
    #[serde(default)]
    tuning: TuningFile,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    wan: WanFile,
    #[serde(default)]
    dc: Vec<DcFile>,
    #[serde(default)]
    node: Vec<NodeFile>,
    /// Authenticates session tokens across the nodes of the cluster.
    token_key: Option<String>,
    fsync: Option<String>,
    checkpoint_min_mb: Option<u64>,
    /// `"off"`, or a table ([`TlsFile`]); read by hand for clear errors.
    tls: Option<toml::Value>,
    #[serde(default)]
    connections: ConnectionsFile,
    auth: Option<AuthFile>,
    max_clock_offset_ms: Option<u64>,
    #[serde(default)]
    peers: PeersFile,
    #[serde(default)]
    ordered: OrderedFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderedFile {
    heartbeat_ms: Option<f64>,
    election_ms: Option<f64>,
    reorder_threshold: Option<u64>,
    /// A number of milliseconds, or "rtt".
    delay_ms: Option<toml::Value>,
    bloom_bits: Option<u32>,
    bloom_history: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeersFile {
    max_backlog_mb: Option<u64>,
    max_kept_mb: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    anonymous: Option<String>,
    users: Option<PathBuf>,
    max_failed_logins: Option<u32>,
    failed_login_window_s: Option<u64>,
}

const AUTH_WHO: &str = "say who may connect as a client — users = \"users.toml\" \
    (made with `causeway user add`), and/or anonymous = \"read\", \"write\" or \"admin\" for clients \
    without credentials";

/// The `[auth]` table: required, so that admitting anonymous clients is a
/// choice.
fn auth_plan(file: Option<AuthFile>, path: &Path) -> Result<AuthPlan, String> {
    let file = file.ok_or_else(|| format!("no [auth] table: {AUTH_WHO}"))?;
    let anonymous = match file.anonymous.as_deref() {
        None => None,
        Some(name) => Some(causeway_wire::Role::parse(name).ok_or_else(|| {
            format!("[auth] anonymous = {name:?}: a role, \"read\", \"write\" or \"admin\" (leave it out to refuse clients without credentials)")
        })?),
    };
    let users_file = match file.users {
        Some(p) if p.as_os_str().is_empty() => return Err("[auth] users is empty".into()),
        Some(p) => Some(relative_to(path, &p)),
        None => None,
    };
    if anonymous.is_none() && users_file.is_none() {
        return Err(format!("[auth] admits nobody: {AUTH_WHO}"));
    }
    let max_failed_logins = match file.max_failed_logins {
        Some(0) => return Err("[auth] max_failed_logins = 0: every login would be refused; give 1 or more".into()),
        Some(n) => n,
        None => AuthPlan::MAX_FAILED_LOGINS,
    };
    let failed_login_window = match file.failed_login_window_s {
        Some(s) if (1..=86_400).contains(&s) => std::time::Duration::from_secs(s),
        Some(s) => return Err(format!("[auth] failed_login_window_s = {s}: from 1 to 86400")),
        None => AuthPlan::FAILED_LOGIN_WINDOW,
    };
    Ok(AuthPlan { anonymous, users_file, max_failed_logins, failed_login_window })
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionsFile {
    max_clients: Option<usize>,
    idle_timeout_s: Option<u64>,
    frame_timeout_s: Option<f64>,
}

fn connection_limits(file: &ConnectionsFile) -> Result<ConnectionLimits, String> {
    let d = ConnectionLimits::default();
    let max_clients = match file.max_clients {
        Some(0) => return Err("[connections] max_clients = 0: no client could connect; give 1 or more".into()),
        Some(n) if n > 1 << 20 => return Err(format!("[connections] max_clients = {n}: at most {}", 1 << 20)),
        Some(n) => n,
        None => d.max_clients,
    };
    let idle_timeout = match file.idle_timeout_s {
        Some(0) => None,
        Some(s) => Some(std::time::Duration::from_secs(s)),
        None => d.idle_timeout,
    };
    let frame_timeout = match file.frame_timeout_s {
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => std::time::Duration::from_secs_f64(s),
        Some(s) => return Err(format!("[connections] frame_timeout_s = {s}: must be more than 0 and at most 3600")),
        None => d.frame_timeout,
    };
    Ok(ConnectionLimits { max_clients, idle_timeout, frame_timeout })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    dir: PathBuf,
    #[serde(default = "yes")]
    clients: bool,
}

fn yes() -> bool {
    true
}

const TLS_MISSING: &str = "no tls setting: give [tls] dir = \"certs\" (certificates made by \
    `causeway certs --config <this file>`), or tls = \"off\" to run without encryption, where any \
    process that reaches a peer port can join as a peer";

/// The `tls` setting: required, so that running in the clear is a choice.
fn tls_plan(value: Option<toml::Value>, path: &Path) -> Result<TlsPlan, String> {
    match value {
        None => Err(TLS_MISSING.into()),
        Some(toml::Value::String(s)) if s == "off" => Ok(TlsPlan::Off),
        Some(toml::Value::String(s)) => {
            Err(format!("tls = {s:?}: write tls = \"off\", or a [tls] table with dir = \"…\""))
        }
        Some(table @ toml::Value::Table(_)) => {
            let file: TlsFile = table.try_into().map_err(|e| format!("[tls] {}", e.to_string().trim_end()))?;
            if file.dir.as_os_str().is_empty() {
                return Err("[tls] dir is empty".into());
            }
            Ok(TlsPlan::Dir { dir: relative_to(path, &file.dir), clients: file.clients })
        }
        Some(other) => Err(format!(
            "tls: found {}, where tls = \"off\" or a [tls] table with dir = \"…\" belongs",
            other.type_str()
        )),
    }
}

fn default_name() -> String {
    "causeway".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuningFile {
    apply_interval_ms: Option<f64>,
    stabilization_interval_ms: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_key_bytes: Option<u32>,
    max_value_bytes: Option<u32>,
    max_keys_per_read: Option<u32>,
    max_writes_per_txn: Option<u32>,
    max_cached_writes: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WanFile {
    #[serde(default)]
    emulate: bool,
    file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DcFile {
    name: String,
    /// Partition number → the DC whose replica of it this DC uses.
    #[serde(default)]
    preferred: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    name: String,
    dc: String,
    partitions: Vec<u32>,
    /// `host:port`. A name is resolved when it is used, never at load: a
    /// node resolves its own addresses when it starts, and the others
    /// resolve its peer name at every reconnect (so nodes whose names
    /// appear only once they run can start one by one).
    peer: String,
    client: String,
    metrics: Option<String>,
    /// Emulated clock skew for benchmarks: added to this node's clock.
    clock_offset_ms: Option<f64>,
    /// Where the node keeps its logs, relative to the config file.
    data_dir: Option<PathBuf>,
}

/// The most bytes of keys and values in one read answer or one write set:
/// well under the 16 MiB frame, which also carries metadata.
pub const MAX_BATCH_BYTES: u64 = 12 << 20;

/// Client ids carry their node's index in 8 bits.
pub const MAX_NODES: usize = 255;

/// Reads and validates a cluster config file.
pub fn load(path: &Path) -> Result<ClusterPlan, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
    parse(&text, path)
}

/// Parses and validates config text; `path` names it in errors and anchors
/// relative paths inside it.
pub fn parse(text: &str, path: &Path) -> Result<ClusterPlan, ConfigError> {
    let file: File = toml::from_str(text)
        .map_err(|e| ConfigError::Syntax { path: path.into(), message: e.to_string().trim_end().to_string() })?;
    let invalid = |message: String| ConfigError::Invalid { path: path.into(), message };
    resolve(file, path).map_err(invalid)
}

fn ms_to_us(ms: Option<f64>, what: &str, default: u64) -> Result<u64, String> {
    match ms {
        None => Ok(default),
        Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 60_000.0 => Ok(((ms * 1000.0) as u64).max(1)),
        Some(ms) => Err(format!("[tuning] {what} = {ms}: must be a positive number of milliseconds up to 60000")),
    }
}

/// How many DCs the file declares (the size of an RTT matrix for it).
fn dcs_for_rtt(file: &File) -> u16 {
    file.dc.len() as u16
}

/// The `[ordered]` section: Geo-SDUR's log timing and techniques. A
/// `delay_ms` of `"rtt"` takes the round-trip times from the WAN model
/// (`[wan] file`, or the built-in one), emulated or not.
fn ordered(o: &OrderedFile, wan: &WanFile, path: &Path, dcs: u16) -> Result<causeway_protocol::OrderedTuning, String> {
    use causeway_protocol::{DelayTuning, OrderedTuning};
    let d = OrderedTuning::default();
    let ms = |v: Option<f64>, what: &str, default: u64| match v {
        None => Ok(default),
        Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 600_000.0 => Ok(((ms * 1000.0) as u64).max(1)),
        Some(ms) => Err(format!("[ordered] {what} = {ms}: a positive number of milliseconds up to 600000")),
    };
    let heartbeat_us = ms(o.heartbeat_ms, "heartbeat_ms", d.heartbeat_us)?;
    let election_us = ms(o.election_ms, "election_ms", d.election_us)?;
    if election_us <= 2 * heartbeat_us {
        return Err(format!(
            "[ordered] election_ms ({}) must exceed twice heartbeat_ms ({})",
            election_us / 1000,
            heartbeat_us / 1000
        ));
    }
    let delaying = match &o.delay_ms {
        None => DelayTuning::Off,
        Some(toml::Value::String(s)) if s == "rtt" => {
            let model = match &wan.file {
                None => WanModel::default_model(),
                Some(f) => {
                    let f = relative_to(path, f);
                    let text = std::fs::read_to_string(&f).map_err(|e| format!("[wan] file {}: {e}", f.display()))?;
                    WanModel::parse(&text).map_err(|e| format!("[wan] file {}: {e}", f.display()))?
                }
            };
            DelayTuning::FromRtt {
                rtt_us: model.rtt_matrix(dcs).map_err(|e| format!("[ordered] delay_ms = \"rtt\": {e}"))?,
            }
        }
        Some(v) => match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
            Some(0.0) => DelayTuning::Off,
            Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 60_000.0 => {
                DelayTuning::Fixed { delay_us: (ms * 1000.0) as u64 }
            }
            _ => return Err(format!("[ordered] delay_ms = {v:?}: a number of milliseconds (0 to 60000) or \"rtt\"")),
        },
    };
    let bloom_bits = match o.bloom_bits {
        None | Some(0) => None,
        Some(b) if (64..=1 << 20).contains(&b) => Some(b),
        Some(b) => return Err(format!("[ordered] bloom_bits = {b}: 0 (keys), or from 64 to 1048576")),
    };
    let bloom_history = match o.bloom_history {
        None => d.bloom_history,
        Some(h) if h >= 1 => h,
        Some(h) => return Err(format!("[ordered] bloom_history = {h}: at least 1")),
    };
    Ok(OrderedTuning {
        heartbeat_us,
        election_us,
        reorder_threshold: o.reorder_threshold.unwrap_or(0),
        delaying,
        bloom_bits,
        bloom_history,
        bloom_audit: false,
        clock_allowance_us: d.clock_allowance_us,
    })
}

fn resolve(file: File, path: &Path) -> Result<ClusterPlan, String> {
    let protocol: ProtocolKind =
        file.protocol.as_deref().unwrap_or("wren").parse().map_err(|e: String| format!("protocol: {e}"))?;
    if file.partitions == 0 {
        return Err("partitions must be at least 1".into());
    }
    if file.dc.is_empty() {
        return Err("no [[dc]] given: a cluster needs at least one DC".into());
    }
    if file.dc.len() > usize::from(u16::MAX) {
        return Err("too many DCs".into());
    }
    let mut dc_ids = BTreeMap::new();
    for (i, dc) in file.dc.iter().enumerate() {
        if dc.name.is_empty() {
            return Err(format!("[[dc]] number {} has an empty name", i + 1));
        }
        if dc_ids.insert(dc.name.as_str(), DcId(i as u16)).is_some() {
            return Err(format!("DC {:?} is declared twice", dc.name));
        }
    }
    let defaults = Tuning::default();
    let tuning = Tuning {
        apply_interval_us: ms_to_us(file.tuning.apply_interval_ms, "apply_interval_ms", defaults.apply_interval_us)?,
        stabilization_interval_us: ms_to_us(
            file.tuning.stabilization_interval_ms,
            "stabilization_interval_ms",
            defaults.stabilization_interval_us,
        )?,
        max_kept_bytes: match file.peers.max_kept_mb {
            Some(mb) if (1..=65_536).contains(&mb) => mb << 20,
            Some(mb) => return Err(format!("[peers] max_kept_mb = {mb}: from 1 to 65536")),
            None => defaults.max_kept_bytes,
        },
        ordered: Default::default(),
    };
    let mut tuning = tuning;
    tuning.ordered = ordered(&file.ordered, &file.wan, path, dcs_for_rtt(&file))?;
    let d = Limits::default();
    let limits = Limits {
        max_key_bytes: file.limits.max_key_bytes.unwrap_or(d.max_key_bytes),
        max_value_bytes: file.limits.max_value_bytes.unwrap_or(d.max_value_bytes),
        max_keys_per_read: file.limits.max_keys_per_read.unwrap_or(d.max_keys_per_read),
        max_writes_per_txn: file.limits.max_writes_per_txn.unwrap_or(d.max_writes_per_txn),
        max_cached_writes: file.limits.max_cached_writes.unwrap_or(d.max_cached_writes),
    };
    for (what, v) in [
        ("max_key_bytes", limits.max_key_bytes),
        ("max_value_bytes", limits.max_value_bytes),
        ("max_keys_per_read", limits.max_keys_per_read),
        ("max_writes_per_txn", limits.max_writes_per_txn),
        ("max_cached_writes", limits.max_cached_writes),
    ] {
        if v == 0 {
            return Err(format!("[limits] {what} must be at least 1"));
        }
    }
    if limits.max_batch_bytes() > MAX_BATCH_BYTES {
        return Err(format!(
            "[limits] (max_key_bytes + max_value_bytes) × max(max_keys_per_read, max_writes_per_txn) is {:.1} MiB; \
             it must stay under {} MiB so a read answer or a write set fits in one message",
            limits.max_batch_bytes() as f64 / (1 << 20) as f64,
            MAX_BATCH_BYTES >> 20
        ));
    }

    if file.node.is_empty() {
        return Err("no [[node]] given: a cluster needs at least one node".into());
    }
    let mut names = BTreeSet::new();
    let mut addrs: BTreeMap<String, String> = BTreeMap::new();
    let mut holder: BTreeMap<(DcId, u32), Vec<&str>> = BTreeMap::new();
    let mut nodes = Vec::new();
    let mut clock_offsets_us = BTreeMap::new();
    let mut data_dirs: BTreeMap<PathBuf, String> = BTreeMap::new();
    for node in &file.node {
        let at = format!("node {:?}", node.name);
        if node.name.is_empty() {
            return Err("a [[node]] has an empty name".into());
        }
        if !names.insert(node.name.as_str()) {
            return Err(format!("{at} is declared twice"));
        }
        let dc = *dc_ids.get(node.dc.as_str()).ok_or_else(|| {
            let known: Vec<_> = dc_ids.keys().copied().collect();
            format!("{at}: unknown DC {:?} (declared DCs: {})", node.dc, known.join(", "))
        })?;
        let mut parsed = BTreeMap::new();
        for (what, text) in
            [("peer", Some(&node.peer)), ("client", Some(&node.client)), ("metrics", node.metrics.as_ref())]
        {
            let Some(text) = text else { continue };
            let addr = HostAddr::parse(text).map_err(|e| format!("{at}: {what} address {text:?} {e}"))?;
            // As written (names are not resolved here): no two places may
            // be named the same.
            if let Some(other) = addrs.insert(addr.to_string().to_ascii_lowercase(), format!("{at} ({what})")) {
                return Err(format!("duplicate address {addr}: used by {other} and by {at} ({what})"));
            }
            parsed.insert(what, addr);
        }
        if node.partitions.is_empty() {
            return Err(format!("{at} holds no partition"));
        }
        let mut replicas = Vec::new();
        for &p in &node.partitions {
            if p >= file.partitions {
                return Err(format!(
                    "{at}: partition {p} does not exist (partitions are 0 to {})",
                    file.partitions - 1
                ));
            }
            // A second node of the DC listing the partition is a second
            // member of its group there (replica groups only: the protocol
            // check below refuses it for the others, naming the nodes).
            let holders = holder.entry((dc, p)).or_default();
            holders.push(node.name.as_str());
            let member =
                u8::try_from(holders.len() - 1).map_err(|_| format!("{at}: too many members of partition {p}"))?;
            replicas.push(ReplicaId { dc, partition: PartitionId(p), member });
        }
        if let Some(ms) = node.clock_offset_ms {
            if !ms.is_finite() || ms.abs() > 3_600_000.0 {
                return Err(format!("{at}: clock_offset_ms must be a number of at most an hour either way, got {ms}"));
            }
            for &r in &replicas {
                clock_offsets_us.insert(r, (ms * 1000.0) as i64);
            }
        }
        let data_dir = match &node.data_dir {
            Some(dir) if dir.as_os_str().is_empty() => return Err(format!("{at}: data_dir is empty")),
            Some(dir) => Some(relative_to(path, dir)),
            None => None,
        };
        if let Some(dir) = &data_dir {
            if let Some(other) = data_dirs.insert(dir.clone(), node.name.clone()) {
                return Err(format!("{at}: data_dir {} is also node {other:?}'s", dir.display()));
            }
        }
        nodes.push(NodePlan {
            name: node.name.clone(),
            replicas,
            clients: vec![(dc, parsed["client"].clone())],
            peer: Some(parsed["peer"].clone()),
            metrics: parsed.get("metrics").cloned(),
            data_dir,
        });
    }
    // Placement: which DCs hold each partition, and how many members.
    let dcs = file.dc.len() as u16;
    let mut placement = vec![Vec::new(); file.partitions as usize];
    for (&(dc, p), holders) in &holder {
        placement[p as usize].extend(std::iter::repeat_n(dc, holders.len()));
    }
    for (p, holders) in placement.iter().enumerate() {
        if holders.is_empty() {
            return Err(format!("partition {p} has no replica: no node in any DC holds it"));
        }
    }
    for (name, &dc) in &dc_ids {
        if !holder.keys().any(|&(d, _)| d == dc) {
            return Err(format!("DC {name:?} has no node"));
        }
    }
    let mut topology = Topology::with_groups(dcs, file.partitions, placement).map_err(|e| e.to_string())?;
    for dc in &file.dc {
        let from = dc_ids[dc.name.as_str()];
        for (partition, to) in &dc.preferred {
            let at = format!("[[dc]] {:?}: preferred {partition} = {to:?}", dc.name);
            let p = partition.parse::<u32>().map_err(|_| format!("{at}: {partition:?} is not a partition number"))?;
            let known = || dc_ids.keys().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
            let to = *dc_ids
                .get(to.as_str())
                .ok_or_else(|| format!("{at}: no DC is named {to:?} (the DCs: {})", known()))?;
            topology = topology.prefer(from, PartitionId(p), to).map_err(|e| format!("{at}: {e}"))?;
        }
    }
    if topology.has_groups() && !protocol.replica_groups() {
        // Name the nodes: the protocol only knows the rule.
        let dc_name = |dc: DcId| file.dc[usize::from(dc.0)].name.as_str();
        if let Some(((dc, p), nodes)) = holder.iter().find(|(_, nodes)| nodes.len() > 1) {
            let names: Vec<String> = nodes.iter().map(|n| format!("{n:?}")).collect();
            let count = if names.len() == 2 { "two".to_string() } else { names.len().to_string() };
            let list = match names.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => names.join(""),
            };
            return Err(format!(
                "partition {p} of DC {:?} is held by {count} nodes: {list}; only a protocol of replica groups \
                 (protocol = \"sdur\") places several replicas of a partition in one DC",
                dc_name(*dc),
            ));
        }
    }
    protocol.check(&topology, &tuning).map_err(|e| {
        // Name what is missing where: the protocol only knows the rule.
        let holder = &holder;
        let missing: Vec<String> = dc_ids
            .iter()
            .flat_map(|(name, &dc)| {
                (0..file.partitions)
                    .filter(move |&p| !holder.contains_key(&(dc, p)))
                    .map(move |p| format!("{name:?} lacks partition {p}"))
            })
            .collect();
        if missing.is_empty() {
            e
        } else {
            format!("{e}; {}", missing.join(", "))
        }
    })?;
    let wan = if file.wan.emulate {
        let model = match &file.wan.file {
            None => WanModel::default_model(),
            Some(f) => {
                let f = relative_to(path, f);
                let text = std::fs::read_to_string(&f).map_err(|e| format!("[wan] file {}: {e}", f.display()))?;
                WanModel::parse(&text).map_err(|e| format!("[wan] file {}: {e}", f.display()))?
            }
        };
        Some(WanDelays::from_model(&model, dcs).map_err(|e| format!("[wan] {e}"))?)
    } else {
        None
    };
    let token_key = match file.token_key {
        Some(k) if k.len() < 16 => return Err("token_key must be at least 16 characters".into()),
        k => k.map(String::into_bytes),
    };
    if nodes.len() > MAX_NODES {
        return Err(format!("{} nodes: a cluster has at most {MAX_NODES}", nodes.len()));
    }
    let fsync = match &file.fsync {
        Some(mode) => mode.parse()?,
        None => Fsync::default(),
    };
    let checkpoint_min_bytes = match file.checkpoint_min_mb {
        Some(0) => return Err("checkpoint_min_mb = 0: a checkpoint after every record; give 1 or more".into()),
        Some(mb) if mb > 1 << 20 => return Err(format!("checkpoint_min_mb = {mb}: at most {}", 1u64 << 20)),
        Some(mb) => mb << 20,
        None => crate::disk::CHECKPOINT_MIN_BYTES,
    };
    let tls = tls_plan(file.tls, path)?;
    if matches!(tls, TlsPlan::Dir { .. }) {
        if let Some(node) = file.node.iter().find(|n| !causeway_transport::tls::valid_node_name(&n.name)) {
            return Err(format!(
                "node {:?}: under TLS a node's name goes in its certificate: use lower-case letters, digits and inner hyphens",
                node.name
            ));
        }
    }
    let connections = connection_limits(&file.connections)?;
    let auth = auth_plan(file.auth, path)?;
    let max_clock_offset = match file.max_clock_offset_ms {
        Some(ms) if (1..=3_600_000).contains(&ms) => std::time::Duration::from_millis(ms),
        Some(ms) => return Err(format!("max_clock_offset_ms = {ms}: from 1 to 3600000")),
        None => crate::plan::MAX_CLOCK_OFFSET,
    };
    // At least the largest frame between servers (64 MiB), at most 64 GiB.
    let max_peer_backlog_bytes = match file.peers.max_backlog_mb {
        Some(mb) if (64..=65_536).contains(&mb) => (mb << 20) as usize,
        Some(mb) => return Err(format!("[peers] max_backlog_mb = {mb}: from 64 (a frame between servers) to 65536")),
        None => causeway_transport::DEFAULT_MAX_BACKLOG_BYTES,
    };
    Ok(ClusterPlan {
        tls,
        connections,
        auth,
        max_clock_offset,
        max_peer_backlog_bytes,
        fsync,
        checkpoint_min_bytes,
        name: file.name,
        protocol,
        topology: Arc::new(topology),
        tuning,
        limits,
        wan,
        token_key,
        nodes,
        clock_offsets_us,
    })
    .and_then(|plan| match plan.clock_spread_error().or_else(|| plan.clock_offset_error()) {
        Some(why) => Err(why),
        None => Ok(plan),
    })
}

#[cfg(test)]
mod tests;

/// `p` as written in the config file at `config`: a relative path is taken
/// from the file's directory.
fn relative_to(config: &Path, p: &Path) -> PathBuf {
    config.parent().map_or_else(|| p.to_path_buf(), |dir| dir.join(p))
}
