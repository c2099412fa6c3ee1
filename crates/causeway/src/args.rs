//! The flags every command that builds a cluster shares (`sim`, `dev`,
//! `demo`, `bench`, `sweep`), with one meaning each: the protocol, the
//! cluster's shape, the network between its DCs, and its clients.

use anyhow::{Context, Result};
use causeway_protocol::ProtocolKind;
use causeway_runtime::ClusterPlan;
use causeway_workload::WanModel;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// How the DCs of a cluster talk to each other: WAN latency and the
/// protocol's intervals.
#[derive(Args, Debug, Clone)]
pub struct NetworkArgs {
    /// WAN latency between DCs: the round-trip times of config/wan.toml (or
    /// --wan-file), DC i in region i. Off: DCs as near each other as the
    /// servers of one DC.
    #[arg(long, value_enum, value_name = "on|off", default_value = "on")]
    pub wan: OnOff,
    /// Another RTT matrix for the WAN latency (same format as config/wan.toml).
    #[arg(long, value_name = "FILE")]
    pub wan_file: Option<PathBuf>,
    /// Δ_R, apply and replication interval, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub delta_r_ms: f64,
    /// Δ_G, stabilization interval, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub delta_g_ms: f64,
}

impl NetworkArgs {
    /// WAN latency as asked: `None` off, `Some(None)` the built-in model,
    /// `Some(Some(file))` another one, as an absolute path (server
    /// processes read it from another directory).
    pub fn wan(&self) -> Result<Option<Option<PathBuf>>> {
        Ok(match (self.wan, &self.wan_file) {
            (OnOff::Off, Some(_)) => anyhow::bail!("--wan-file needs --wan on"),
            (OnOff::Off, None) => None,
            (OnOff::On, None) => Some(None),
            (OnOff::On, Some(file)) => {
                Some(Some(std::fs::canonicalize(file).with_context(|| format!("cannot read {}", file.display()))?))
            }
        })
    }

    /// The WAN model asked for, if any.
    pub fn model(&self) -> Result<Option<WanModel>> {
        self.wan()?.map(|file| WanModel::load(file.as_deref())).transpose().map_err(anyhow::Error::msg)
    }

    /// Δ_R and Δ_G in milliseconds, each in (0, 60000].
    pub fn intervals_ms(&self) -> Result<(f64, f64)> {
        for (v, flag) in [(self.delta_r_ms, "--delta-r-ms"), (self.delta_g_ms, "--delta-g-ms")] {
            anyhow::ensure!(
                v.is_finite() && v > 0.0 && v <= 60_000.0,
                "{flag} must be more than 0 and at most 60000, got {v}"
            );
        }
        Ok((self.delta_r_ms, self.delta_g_ms))
    }
}

/// The cluster: its protocol, its shape, its network.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Protocol the cluster runs: wren, cure, h-cure, ec, paris, bpr,
    /// promptcc, promptcc-naive or eiger (paris and bpr also run on partial
    /// replication: `sim --replication`; promptcc, promptcc-naive and eiger
    /// run in one DC).
    #[arg(long, default_value = "wren")]
    pub protocol: ProtocolKind,
    /// Data centers (with WAN latency, at most the regions of the WAN model:
    /// 5 in config/wan.toml).
    #[arg(long, default_value_t = 3)]
    pub dcs: u16,
    /// Partitions of the key space (each DC holds all of them, or with
    /// --replication some).
    #[arg(long, default_value_t = 4)]
    pub partitions: u32,
    /// Partial replication: each partition lives in this many DCs (1 to
    /// --dcs), dealt round-robin so the DCs hold as many partitions as each
    /// other. Only paris and bpr run on it; without the flag every DC holds
    /// every partition.
    #[arg(long, value_name = "R")]
    pub replication: Option<u16>,
    #[command(flatten)]
    pub net: NetworkArgs,
}

impl ClusterArgs {
    /// The plan of an embedded cluster whose DC 0 serves clients on
    /// `client_port` (DC i on `client_port + i`; 0: ports the OS picks).
    pub fn plan(&self, client_port: u16) -> Result<ClusterPlan> {
        let wan = self.net.model()?;
        let (delta_r, delta_g) = self.net.intervals_ms()?;
        ClusterPlan::embedded(self.protocol, self.dcs, self.partitions, self.replication, wan.as_ref(), client_port)
            .and_then(|p| p.with_intervals_ms(delta_r, delta_g))
            .map_err(anyhow::Error::msg)
    }
}

/// How many closed-loop clients run.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Closed-loop clients per partition in each DC (so --clients ×
    /// --partitions per DC), each one session.
    #[arg(long, default_value_t = 2)]
    pub clients: u32,
}

/// `1 DC`, `3 DCs`: a count and its noun.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `3 DCs × 4 partitions`.
pub fn shape(dcs: u16, partitions: u32) -> String {
    format!("{} × {}", count(dcs, "DC"), count(partitions, "partition"))
}

/// A topology's shape, as [`placed`] says it.
pub fn shape_of(topology: &causeway_protocol::Topology) -> String {
    let partial = (!topology.is_fully_replicated()).then(|| topology.replication());
    placed(topology.dc_count(), topology.partition_count(), partial)
}

/// `3 DCs × 4 partitions`, and `, each in 2 DCs` under partial replication.
pub fn placed(dcs: u16, partitions: u32, replication: Option<u16>) -> String {
    match replication {
        Some(r) => format!("{}, each in {}", shape(dcs, partitions), count(r, "DC")),
        None => shape(dcs, partitions),
    }
}
