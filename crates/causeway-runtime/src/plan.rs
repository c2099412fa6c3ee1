//! The resolved description of a cluster: which node hosts which replicas and
//! serves which DC's clients. A config file ([`crate::config`]) or the
//! embedded cluster ([`ClusterPlan::embedded`]) produces one; a node starts
//! from it.

use crate::auth::AuthPlan;
use crate::disk::Fsync;
use crate::error::StartError;
use causeway_protocol::twopc::Rhythm;
use causeway_protocol::{DcId, Limits, ProtocolKind, ReplicaId, Topology, Tuning};
use causeway_transport::HostAddr;
use causeway_workload::WanModel;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ClusterPlan {
    /// Peers of another cluster are refused at the handshake.
    pub name: String,
    pub protocol: ProtocolKind,
    pub topology: Arc<Topology>,
    pub tuning: Tuning,
    pub limits: Limits,
    /// Extra one-way delay on links between DCs, when WAN emulation is on.
    pub wan: Option<WanDelays>,
    /// Authenticates session tokens; nodes that share it accept each
    /// other's. `None`: each node draws its own.
    pub token_key: Option<Vec<u8>>,
    pub nodes: Vec<NodePlan>,
    /// Emulated clock skew, in microseconds added to the real clock of each
    /// replica listed: one machine has one clock, and benchmarks of
    /// protocols that wait on clocks (Cure) need the skew of a real
    /// cluster. Empty outside benchmarks.
    pub clock_offsets_us: BTreeMap<ReplicaId, i64>,
    /// When records count as durable.
    pub fsync: Fsync,
    /// The smallest log tail that calls for a checkpoint
    /// ([`crate::disk::CHECKPOINT_MIN_BYTES`] unless set).
    pub checkpoint_min_bytes: u64,
    /// How links between nodes, and to clients, are secured.
    pub tls: TlsPlan,
    /// What one node's client connections may hold.
    pub connections: ConnectionLimits,
    /// Who may connect as a client, and as what.
    pub auth: AuthPlan,
    /// How far ahead of a node's clock a timestamp in a peer's message may
    /// be: a message that reaches further is held back — unacknowledged,
    /// its link waiting behind it — until the node's clock comes within
    /// this of it, so that a poisoned or broken clock moves no other.
    pub max_clock_offset: Duration,
    /// The most bytes of messages a node holds for one peer node it cannot
    /// deliver them to; past it the backlog is dropped and the peer told
    /// (its replicas resume what they lost from the senders'). Per peer.
    pub max_peer_backlog_bytes: usize,
}

/// The default of [`ClusterPlan::max_clock_offset`] (CockroachDB's too).
pub const MAX_CLOCK_OFFSET: Duration = Duration::from_millis(500);

/// Bounds on a node's client connections, so that no client, authenticated
/// or not, makes a server hold memory or sockets without end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open client connections per node; the next is answered with an
    /// error and closed.
    pub max_clients: usize,
    /// A session with nothing asked and nothing pending for this long is
    /// closed; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// A frame (the hello included) must arrive whole within this of its
    /// first byte, and the hello within this of the connection.
    pub frame_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_clients: 1024,
            idle_timeout: Some(Duration::from_secs(3600)),
            frame_timeout: Duration::from_secs(10),
        }
    }
}

/// How a cluster secures its links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsPlan {
    /// Plain TCP: a config file that says `tls = "off"`, or a node alone
    /// (the embedded cluster). Anyone who reaches a peer port can claim to
    /// be a peer.
    Off,
    /// Mutual TLS between nodes with the certificates in `dir` (written by
    /// `causeway certs`): `ca.pem`, and `<node>.pem` and `<node>.key` for
    /// each node; TLS on the client listeners too when `clients`.
    Dir { dir: PathBuf, clients: bool },
}

impl TlsPlan {
    /// The CA certificate's file.
    pub fn ca_file(dir: &std::path::Path) -> PathBuf {
        dir.join("ca.pem")
    }

    /// The CA key's file (`causeway certs` keeps it beside the CA to sign
    /// more nodes later; a production CA key lives elsewhere).
    pub fn ca_key_file(dir: &std::path::Path) -> PathBuf {
        dir.join("ca.key")
    }

    /// Node `name`'s certificate and key files.
    pub fn node_files(dir: &std::path::Path, name: &str) -> (PathBuf, PathBuf) {
        (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")))
    }
}

#[derive(Clone, Debug)]
pub struct NodePlan {
    pub name: String,
    /// Replicas this node runs, each in its own task.
    pub replicas: Vec<ReplicaId>,
    /// Where clients of each DC this node serves connect (a host name is
    /// resolved when the node starts).
    pub clients: Vec<(DcId, HostAddr)>,
    /// Where the other nodes connect; `None` for a node alone in its
    /// cluster. A host name is resolved when the node starts (to listen)
    /// and by the other nodes at every reconnect.
    pub peer: Option<HostAddr>,
    /// Where Prometheus scrapes; `None`: no metrics endpoint.
    pub metrics: Option<HostAddr>,
    /// Where the node keeps its replicas' logs; `None`: nowhere — it keeps
    /// nothing across a restart.
    pub data_dir: Option<PathBuf>,
}

/// One-way delays between DCs, from an RTT matrix.
#[derive(Clone, Debug)]
pub struct WanDelays {
    /// `one_way[a][b]`: half the RTT between the regions of DCs `a` and `b`.
    pub one_way: Vec<Vec<Duration>>,
    /// Each delay grows by up to this fraction of itself (FIFO kept).
    pub jitter: f64,
}

impl WanDelays {
    /// DC `i` sits in region `i` of the model.
    pub fn from_model(model: &WanModel, dcs: u16) -> Result<WanDelays, String> {
        if usize::from(dcs) > model.regions.len() {
            return Err(format!(
                "WAN emulation has {} regions ({}) but the cluster has {dcs} DCs",
                model.regions.len(),
                model.regions.join(", ")
            ));
        }
        let n = usize::from(dcs);
        let one_way = (0..n).map(|a| (0..n).map(|b| Duration::from_micros(model.rtt_us[a][b] / 2)).collect()).collect();
        Ok(WanDelays { one_way, jitter: model.jitter })
    }

    pub fn between(&self, a: DcId, b: DcId) -> Duration {
        self.one_way[usize::from(a.0)][usize::from(b.0)]
    }

    /// The delay stage of the link from DC `a` to DC `b`; `None` inside a DC.
    pub fn spec(&self, a: DcId, b: DcId) -> Option<causeway_transport::DelaySpec> {
        let one_way = self.between(a, b);
        (a != b).then(|| causeway_transport::DelaySpec::new(one_way, one_way.mul_f64(self.jitter)))
    }
}

/// The client ports of an embedded cluster's DCs: `first`, `first + 1`, …
/// (or all 0: the OS chooses each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientPorts {
    pub first: u16,
    pub dcs: u16,
}

impl ClientPorts {
    /// DC `dc`'s port.
    pub fn port(self, dc: DcId) -> u16 {
        if self.first == 0 {
            0
        } else {
            self.first + dc.0
        }
    }

    /// Whether `port` is one of them.
    pub fn contains(self, port: u16) -> bool {
        self.first != 0 && (self.first..self.first + self.dcs).contains(&port)
    }

    /// `7100–7102`: the range, as a message names it.
    pub fn range(self) -> String {
        format!("{}–{}", self.first, u32::from(self.first) + u32::from(self.dcs) - 1)
    }
}

/// The ports of `dcs` DCs from `first` on, if they fit below 65536.
pub fn client_ports(first: u16, dcs: u16) -> Result<ClientPorts, String> {
    let ports = ClientPorts { first, dcs };
    let last = u32::from(first) + u32::from(dcs.max(1)) - 1;
    if first != 0 && last > u32::from(u16::MAX) {
        return Err(format!(
            "{dcs} DCs need client ports {} (one per DC), but ports end at 65535: start at {} or lower, or at 0 for \
             free ports",
            ports.range(),
            u32::from(u16::MAX) + 1 - u32::from(dcs)
        ));
    }
    Ok(ports)
}

impl NodePlan {
    /// Where this node listens for `what`: `at`, a name resolved now.
    pub async fn listen_addr(&self, what: &str, at: &HostAddr) -> Result<SocketAddr, StartError> {
        at.lookup().await.map_err(|e| {
            StartError::Invalid(format!("node {:?}: its {what} address {at} does not resolve: {e}", self.name))
        })
    }
}

/// How far apart the clocks of one DC (of the cluster, under partial
/// replication) may be ([`Rhythm::MAX_CLOCK_SPREAD_US`]).
const MAX_CLOCK_SPREAD_US: i64 = Rhythm::MAX_CLOCK_SPREAD_US as i64;

impl ClusterPlan {
    /// The emulated clock offsets of the replicas of each DC — of the whole
    /// cluster under partial replication, where a cohort takes commits from
    /// other DCs' coordinators — if they spread over [`MAX_CLOCK_SPREAD_US`]
    /// or more: where, and how far.
    pub fn clock_spread_error(&self) -> Option<String> {
        let partial = !self.topology.is_fully_replicated();
        let mut by_dc: BTreeMap<Option<DcId>, (i64, i64)> = BTreeMap::new();
        for node in &self.nodes {
            for &r in &node.replicas {
                let o = self.clock_offset_us(r);
                let e = by_dc.entry((!partial).then_some(r.dc)).or_insert((o, o));
                *e = (e.0.min(o), e.1.max(o));
            }
        }
        by_dc.into_iter().find(|(_, (lo, hi))| hi - lo >= MAX_CLOCK_SPREAD_US).map(|(dc, (lo, hi))| {
            let whose = match dc {
                Some(dc) => format!("DC {}", dc.0),
                None => "the cluster (partial replication: a cohort takes commits from every DC)".into(),
            };
            format!(
                "the clock offsets of {whose} spread over {} ms; they must agree within {} ms (half the commit \
                 timeout: a replica takes a one-partition commit only until then by its own clock)",
                (hi - lo) / 1000,
                MAX_CLOCK_SPREAD_US / 1000
            )
        })
    }

    /// Why the emulated clock offsets would make nodes hold each other's
    /// messages back, if they would: they must spread less than
    /// `max_clock_offset` over the whole cluster.
    pub fn clock_offset_error(&self) -> Option<String> {
        let offsets = self.nodes.iter().flat_map(|n| n.replicas.iter()).map(|&r| self.clock_offset_us(r));
        let (lo, hi) = offsets.fold((0, 0), |(lo, hi), o| (lo.min(o), hi.max(o)));
        let max = self.max_clock_offset.as_micros() as i64;
        (hi - lo >= max).then(|| {
            format!(
                "the clock offsets spread over {} ms, not less than max_clock_offset_ms = {}: nodes would hold \
                 each other's messages back",
                (hi - lo) / 1000,
                max / 1000
            )
        })
    }

    /// What every node of the cluster must agree on, compared when two
    /// nodes connect: the protocol (its messages mean nothing to another),
    /// the shape of the cluster and the placement of its replicas on nodes.
    /// A node started from another config file is refused by name.
    pub fn peer_terms(&self) -> Vec<(String, String)> {
        let t = &self.topology;
        let placement: Vec<String> = t
            .partitions()
            .map(|p| t.replicas_of(p).iter().map(|dc| dc.0.to_string()).collect::<Vec<_>>().join("+"))
            .collect();
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let replicas: Vec<String> =
                    n.replicas.iter().map(|r| format!("{}.{}", r.dc.0, r.partition.0)).collect();
                format!("{}={}", n.name, replicas.join(","))
            })
            .collect();
        let digest = |text: String| format!("{:016x}", causeway_protocol::topology::fnv1a64(text.as_bytes()));
        vec![
            ("protocol".into(), self.protocol.name().into()),
            ("message format".into(), causeway_protocol::MESSAGE_FORMAT.to_string()),
            ("dcs".into(), t.dc_count().to_string()),
            ("partitions".into(), t.partition_count().to_string()),
            ("placement (digest)".into(), digest(placement.join(" "))),
            ("nodes and their replicas (digest)".into(), digest(nodes.join(" "))),
        ]
    }

    /// M DCs × N partitions in one process: one node runs every replica and
    /// serves every DC's clients. `replication`: each partition in R DCs
    /// ([`Topology::placed`]); `None`: every DC holds every partition. `client_port`: the first DC's client port (the
    /// others follow, so all of them must fit under 65536); 0 lets the OS
    /// choose. Refused if the protocol does not run on that shape.
    pub fn embedded(
        protocol: ProtocolKind,
        dcs: u16,
        partitions: u32,
        replication: Option<u16>,
        wan: Option<&WanModel>,
        client_port: u16,
    ) -> Result<ClusterPlan, String> {
        let topology = Topology::placed(dcs, partitions, replication).map_err(|e| e.to_string())?;
        let wan = wan.map(|m| WanDelays::from_model(m, dcs)).transpose()?;
        let ports = client_ports(client_port, dcs)?;
        let clients =
            topology.dcs().map(|dc| (dc, SocketAddr::from(([127, 0, 0, 1], ports.port(dc))).into())).collect();
        let node = NodePlan {
            name: "embedded".into(),
            replicas: topology.all_replicas(),
            clients,
            peer: None,
            metrics: None,
            data_dir: None,
        };
        // The protocol must accept the shape (PrompTCC runs in one DC).
        protocol.check(&topology, &Tuning::default())?;
        Ok(ClusterPlan {
            name: "embedded".into(),
            protocol,
            topology: Arc::new(topology),
            tuning: Tuning::default(),
            limits: Limits::default(),
            wan,
            token_key: None,
            nodes: vec![node],
            clock_offsets_us: BTreeMap::new(),
            fsync: Fsync::default(),
            checkpoint_min_bytes: crate::disk::CHECKPOINT_MIN_BYTES,
            tls: TlsPlan::Off,
            connections: ConnectionLimits::default(),
            // One process on one machine: its user runs everything.
            auth: AuthPlan::anonymous(causeway_wire::Role::Admin),
            max_clock_offset: MAX_CLOCK_OFFSET,
            max_peer_backlog_bytes: causeway_transport::DEFAULT_MAX_BACKLOG_BYTES,
        })
    }

    /// Places each partition's replica group by `groups[n]`, the DC of each
    /// member (a DC listed twice holds two), for the protocols of replica
    /// groups; the embedded node hosts them all.
    pub fn with_groups(mut self, groups: &[Vec<u16>]) -> Result<ClusterPlan, String> {
        let groups = groups.iter().map(|g| g.iter().map(|&dc| DcId(dc)).collect()).collect();
        let topology = Topology::with_groups(self.topology.dc_count(), self.topology.partition_count(), groups)
            .map_err(|e| e.to_string())?;
        self.protocol.check(&topology, &self.tuning)?;
        for node in &mut self.nodes {
            node.replicas = topology.all_replicas();
        }
        self.topology = Arc::new(topology);
        Ok(self)
    }

    /// Sets the settings of the protocols of ordered logs (Geo-SDUR) and
    /// checks that the protocol accepts them.
    pub fn with_ordered(mut self, ordered: causeway_protocol::OrderedTuning) -> Result<ClusterPlan, String> {
        self.tuning.ordered = ordered;
        self.protocol.check(&self.topology, &self.tuning)?;
        Ok(self)
    }

    /// Sets Δ_R and Δ_G, in milliseconds (each in (0, 60000]), and checks
    /// that the protocol accepts the plan.
    pub fn with_intervals_ms(mut self, delta_r_ms: f64, delta_g_ms: f64) -> Result<ClusterPlan, String> {
        for (v, what) in [(delta_r_ms, "Δ_R"), (delta_g_ms, "Δ_G")] {
            if !(v.is_finite() && v > 0.0 && v <= 60_000.0) {
                return Err(format!("{what} must be in (0, 60000] ms, got {v}"));
            }
        }
        self.tuning.apply_interval_us = ((delta_r_ms * 1000.0) as u64).max(1);
        self.tuning.stabilization_interval_us = ((delta_g_ms * 1000.0) as u64).max(1);
        self.protocol.check(&self.topology, &self.tuning)?;
        Ok(self)
    }

    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The DC of a node: that of its first replica.
    pub fn dc_of_node(&self, node: usize) -> Option<DcId> {
        self.nodes.get(node)?.replicas.first().map(|r| r.dc)
    }

    /// The emulated clock offset of `replica` ([`ClusterPlan::clock_offsets_us`]).
    pub fn clock_offset_us(&self, replica: ReplicaId) -> i64 {
        self.clock_offsets_us.get(&replica).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ports_that_do_not_fit_are_refused_with_the_range_they_need() {
        let plan = ClusterPlan::embedded(ProtocolKind::Wren, 3, 1, None, None, 65533).unwrap();
        let ports: Vec<u16> = plan.nodes[0].clients.iter().map(|(_, a)| a.port()).collect();
        assert_eq!(ports, vec![65533, 65534, 65535]);
        let e = ClusterPlan::embedded(ProtocolKind::Wren, 3, 1, None, None, 65534).unwrap_err();
        assert!(e.contains("65534–65536") && e.contains("start at 65533"), "{e}");
        let free = ClusterPlan::embedded(ProtocolKind::Wren, 3, 1, None, None, 0).unwrap();
        assert!(free.nodes[0].clients.iter().all(|(_, a)| a.port() == 0));
        assert!(client_ports(7100, 3).unwrap().contains(7102));
        assert!(!client_ports(7100, 3).unwrap().contains(7103));
        assert!(!client_ports(0, 3).unwrap().contains(0));
    }
}
