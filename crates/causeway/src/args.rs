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

/// Geo-SDUR's replica groups, log and techniques (`--protocol sdur`).
#[derive(Args, Debug, Clone, Default)]
pub struct OrderedArgs {
    /// Where each partition's replica group lives (sdur): `wan2`, one
    /// member per DC (the default: every DC holds every partition); `wan1`,
    /// partition n's majority in DC n mod M and its third member in the
    /// next DC; or the DC of each member, partition by partition, members
    /// by commas and partitions by slashes (`2,2,0/0,0,1`: two members of
    /// partition 0 in DC 2 and one in DC 0, …).
    #[arg(long = "members", value_name = "wan1|wan2|SPEC")]
    pub members: Option<String>,
    /// Reordering (sdur): how many log positions a local transaction may be
    /// applied ahead of a global still pending (the paper's 80, 160, 320;
    /// 0: off).
    #[arg(long, value_name = "POSITIONS", default_value_t = 0)]
    pub reorder: u64,
    /// Delaying (sdur): a global transaction's parts for the partitions near
    /// its client leave this many milliseconds late (the paper's 20, 40,
    /// 60), or `rtt`: each as late as the round-trip times say it would be
    /// delivered before the farthest.
    #[arg(long, value_name = "MS|rtt")]
    pub delay_ms: Option<String>,
    /// Certify read sets as bloom filters of this many bits (sdur; 0: by
    /// their keys).
    #[arg(long, value_name = "BITS", default_value_t = 0)]
    pub bloom_bits: u32,
    /// With bloom filters, how many of the last entries a partition keeps
    /// to certify against (older snapshots abort).
    #[arg(long, value_name = "K", default_value_t = 10_000)]
    pub bloom_history: u32,
    /// A replica group's leader heartbeat, in milliseconds (sdur).
    #[arg(long, value_name = "MS", default_value_t = 50.0)]
    pub heartbeat_ms: f64,
    /// A replica group's election timeout, in milliseconds (sdur; keep it
    /// well above the WAN round trip).
    #[arg(long, value_name = "MS", default_value_t = 1000.0)]
    pub election_ms: f64,
}

impl OrderedArgs {
    /// The groups asked for, as the DC of each member per partition; `None`:
    /// the protocol's placement (one replica per DC).
    pub fn groups(&self, dcs: u16, partitions: u32) -> Result<Option<Vec<Vec<u16>>>> {
        let Some(spec) = self.members.as_deref() else { return Ok(None) };
        let groups: Vec<Vec<u16>> = match spec {
            "wan2" => return Ok(None),
            "wan1" => {
                anyhow::ensure!(
                    dcs >= 2,
                    "--members wan1 needs at least 2 DCs (a majority in one, a member in another)"
                );
                (0..partitions)
                    .map(|p| {
                        let home = (p % u32::from(dcs)) as u16;
                        vec![home, home, (home + 1) % dcs]
                    })
                    .collect()
            }
            spec => spec
                .split('/')
                .map(|group| {
                    group
                        .split(',')
                        .map(|dc| {
                            let dc: u16 = dc.trim().parse().with_context(|| {
                                format!("--members {spec:?}: {dc:?} is not a DC number (DCs are 0 to {})", dcs - 1)
                            })?;
                            anyhow::ensure!(
                                dc < dcs,
                                "--members {spec:?}: DC {dc} does not exist (the cluster has {dcs})"
                            );
                            Ok(dc)
                        })
                        .collect::<Result<Vec<u16>>>()
                })
                .collect::<Result<Vec<_>>>()?,
        };
        anyhow::ensure!(
            groups.len() == partitions as usize,
            "--members {spec:?} places {} partitions; the cluster has {partitions}",
            groups.len()
        );
        Ok(Some(groups))
    }

    /// The settings of the ordered log, with the round-trip times of `wan`
    /// for `--delay-ms rtt`.
    pub fn tuning(&self, wan: Option<&WanModel>, dcs: u16) -> Result<causeway_protocol::OrderedTuning> {
        use causeway_protocol::{DelayTuning, OrderedTuning};
        let ms = |v: f64, flag: &str| -> Result<u64> {
            anyhow::ensure!(
                v.is_finite() && v > 0.0 && v <= 600_000.0,
                "{flag} must be more than 0 and at most 600000"
            );
            Ok(((v * 1000.0) as u64).max(1))
        };
        let heartbeat_us = ms(self.heartbeat_ms, "--heartbeat-ms")?;
        let election_us = ms(self.election_ms, "--election-ms")?;
        anyhow::ensure!(election_us > 2 * heartbeat_us, "--election-ms must exceed twice --heartbeat-ms");
        let delaying = match self.delay_ms.as_deref() {
            None | Some("0") => DelayTuning::Off,
            Some("rtt") => {
                let model = wan.cloned().unwrap_or_else(|| WanModel::default_model().without_wan(dcs));
                DelayTuning::FromRtt { rtt_us: model.rtt_matrix(dcs).map_err(anyhow::Error::msg)? }
            }
            Some(v) => {
                let d: f64 =
                    v.parse().with_context(|| format!("--delay-ms {v:?}: a number of milliseconds, or rtt"))?;
                anyhow::ensure!(d.is_finite() && (0.0..=60_000.0).contains(&d), "--delay-ms must be from 0 to 60000");
                if d == 0.0 {
                    DelayTuning::Off
                } else {
                    DelayTuning::Fixed { delay_us: (d * 1000.0) as u64 }
                }
            }
        };
        let d = OrderedTuning::default();
        anyhow::ensure!(
            self.bloom_bits == 0 || (64..=1 << 20).contains(&self.bloom_bits),
            "--bloom-bits must be 0 or from 64 to 1048576"
        );
        anyhow::ensure!(self.bloom_history >= 1, "--bloom-history must be at least 1");
        Ok(OrderedTuning {
            heartbeat_us,
            election_us,
            reorder_threshold: self.reorder,
            delaying,
            bloom_bits: (self.bloom_bits > 0).then_some(self.bloom_bits),
            bloom_history: self.bloom_history,
            bloom_audit: false,
            clock_allowance_us: d.clock_allowance_us,
        })
    }
}

/// The cluster: its protocol, its shape, its network.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Protocol the cluster runs: wren, cure, h-cure, ec, paris, bpr,
    /// promptcc, promptcc-naive, eiger or sdur (paris and bpr also run on
    /// partial replication: `sim --replication`; promptcc, promptcc-naive
    /// and eiger run in one DC; sdur places replica groups: `--members`).
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
    #[command(flatten)]
    pub ordered: OrderedArgs,
}

impl ClusterArgs {
    /// The plan of an embedded cluster whose DC 0 serves clients on
    /// `client_port` (DC i on `client_port + i`; 0: ports the OS picks).
    pub fn plan(&self, client_port: u16) -> Result<ClusterPlan> {
        let wan = self.net.model()?;
        let (delta_r, delta_g) = self.net.intervals_ms()?;
        let groups = self.ordered.groups(self.dcs, self.partitions)?;
        let ordered = self.ordered.tuning(wan.as_ref(), self.dcs)?;
        let mut plan = ClusterPlan::embedded(
            self.protocol,
            self.dcs,
            self.partitions,
            self.replication,
            wan.as_ref(),
            client_port,
        )
        .and_then(|p| p.with_intervals_ms(delta_r, delta_g))
        .and_then(|p| p.with_ordered(ordered))
        .map_err(anyhow::Error::msg)?;
        if let Some(groups) = groups {
            plan = plan.with_groups(&groups).map_err(anyhow::Error::msg)?;
        }
        Ok(plan)
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
