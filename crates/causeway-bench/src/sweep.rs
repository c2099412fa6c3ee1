//! A series of runs: every combination of the protocols, client counts,
//! partition counts, DC counts, read:write mixes, (under partial
//! replication) localities and workload variants — value sizes, zipf
//! exponents, with the PrompTCC paper's transactions keys per transaction
//! and write fractions, with the Geo-SDUR paper's microbenchmark global
//! fractions — and, for Geo-SDUR, replica placements, delays and
//! reordering thresholds, asked for, each a fresh cluster, the whole series
//! repeated `rounds` times (so that runs to compare alternate), saved as
//! JSON next to the figures drawn from them.

use crate::report::BenchReport;
use crate::spec::BenchSpec;
use anyhow::{Context, Result};
use causeway_protocol::{DelayTuning, ProtocolKind};
use causeway_workload::TxnShape;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct Sweep {
    /// Everything the lists below do not vary.
    pub base: BenchSpec,
    pub protocols: Vec<ProtocolKind>,
    /// Clients per partition.
    pub clients: Vec<u32>,
    /// Clients per DC instead, when not empty.
    pub clients_per_dc: Vec<u32>,
    pub partitions: Vec<u32>,
    pub dcs: Vec<u16>,
    /// `(reads, writes)` per transaction.
    pub mixes: Vec<(u32, u32)>,
    /// Shares of multi-DC transactions (partial replication); empty: the
    /// base workload's.
    pub multi_dc: Vec<f64>,
    pub variants: Variants,
    /// Geo-SDUR's settings the sweep varies.
    pub ordered: OrderedVariants,
    /// How many times the whole series runs, one round after the other
    /// (at least 1).
    pub rounds: u32,
}

/// Geo-SDUR's settings a sweep varies; an empty list keeps the base run's.
#[derive(Clone, Debug, Default)]
pub struct OrderedVariants {
    /// Replica placements (`--members`): the DC of each member per
    /// partition; `None`, one replica per DC.
    pub members: Vec<Option<Vec<Vec<u16>>>>,
    /// Delays of global transactions (`--delay-ms`).
    pub delays: Vec<DelayTuning>,
    /// Reordering thresholds (`--reorder`).
    pub reorders: Vec<u64>,
}

impl OrderedVariants {
    fn is_empty(&self) -> bool {
        self.members.is_empty() && self.delays.is_empty() && self.reorders.is_empty()
    }

    /// Every combination, placements outermost, each applied to a copy of `base`.
    fn apply(&self, base: &BenchSpec) -> Vec<BenchSpec> {
        let members = if self.members.is_empty() { vec![base.groups.clone()] } else { self.members.clone() };
        let delays = if self.delays.is_empty() { vec![base.ordered.delaying.clone()] } else { self.delays.clone() };
        let reorders =
            if self.reorders.is_empty() { vec![base.ordered.reorder_threshold] } else { self.reorders.clone() };
        let mut out = Vec::new();
        for m in &members {
            for d in &delays {
                for &r in &reorders {
                    let mut s = base.clone();
                    s.groups = m.clone();
                    s.ordered.delaying = d.clone();
                    s.ordered.reorder_threshold = r;
                    out.push(s);
                }
            }
        }
        out
    }
}

/// Workload parameters a sweep varies; an empty list keeps the base run's.
#[derive(Clone, Debug, Default)]
pub struct Variants {
    pub value_sizes: Vec<usize>,
    pub zipfs: Vec<f64>,
    /// Keys each transaction reads or writes (the PrompTCC paper's
    /// transactions only).
    pub keys_per_txn: Vec<u32>,
    /// Shares of transactions that write (the PrompTCC paper's only).
    pub write_fractions: Vec<f64>,
    /// Shares of global transactions (the Geo-SDUR paper's microbenchmark
    /// only).
    pub global_fractions: Vec<f64>,
}

impl Variants {
    /// Every combination, each applied to a copy of `base`.
    fn apply(&self, base: &BenchSpec) -> Vec<BenchSpec> {
        let or = |v: &[f64], d: f64| if v.is_empty() { vec![d] } else { v.to_vec() };
        let w = &base.workload;
        let sizes = if self.value_sizes.is_empty() { vec![base.value_size] } else { self.value_sizes.clone() };
        let keys = if self.keys_per_txn.is_empty() { vec![w.reads_per_txn] } else { self.keys_per_txn.clone() };
        let mut out = Vec::new();
        for &size in &sizes {
            for zipf in or(&self.zipfs, w.zipf) {
                for &k in &keys {
                    for wf in or(&self.write_fractions, w.write_fraction()) {
                        for g in or(&self.global_fractions, w.shape.global_fraction().unwrap_or(0.0)) {
                            let mut s = base.clone();
                            s.value_size = size;
                            s.workload.zipf = zipf;
                            if s.workload.shape == TxnShape::ReadOrWrite {
                                s.workload.reads_per_txn = k;
                                s.workload.writes_per_txn = k;
                                s.workload.read_only_fraction = 1.0 - wf;
                            }
                            if let TxnShape::SdurMicro { global_ppm } = &mut s.workload.shape {
                                *global_ppm = causeway_workload::fraction_ppm(g);
                            }
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }
}

impl Sweep {
    /// The runs, in the order they run: round by round; in each, for each
    /// placement, delay and reordering threshold, workload variant, mix,
    /// DC count, partition count and locality, every protocol at rising
    /// load.
    pub fn specs(&self) -> Vec<BenchSpec> {
        let one: Vec<BenchSpec> = self
            .ordered
            .apply(&self.base)
            .iter()
            .flat_map(|base| self.variants.apply(base))
            .flat_map(|base| self.specs_of(&base))
            .collect();
        (1..=self.rounds.max(1))
            .flat_map(|round| {
                one.iter().map(move |s| {
                    let mut s = s.clone();
                    if self.rounds > 1 {
                        s.round = round;
                    }
                    s.run_id = crate::spec::new_run_id();
                    // Every run starts a cluster of its own: its logs too.
                    s.data_dir = self.base.data_dir.as_ref().map(|d| d.join(&s.run_id));
                    s
                })
            })
            .collect()
    }

    fn specs_of(&self, base: &BenchSpec) -> Vec<BenchSpec> {
        let mut out = Vec::new();
        let localities = match self.multi_dc.is_empty() {
            true => vec![base.workload.multi_dc_fraction],
            false => self.multi_dc.clone(),
        };
        for &(reads, writes) in &self.mixes {
            for &dcs in &self.dcs {
                for &partitions in &self.partitions {
                    for (&multi_dc, &protocol) in
                        localities.iter().flat_map(|l| self.protocols.iter().map(move |p| (l, p)))
                    {
                        let loads: Vec<(u32, Option<u32>)> = if self.clients_per_dc.is_empty() {
                            self.clients.iter().map(|&c| (c, None)).collect()
                        } else {
                            self.clients_per_dc.iter().map(|&c| (self.base.clients_per_partition, Some(c))).collect()
                        };
                        for (clients, per_dc) in loads {
                            let mut s = base.clone();
                            s.clients_per_dc = per_dc;
                            // The PrompTCC paper's transactions read or write
                            // their own count of keys: a mix does not apply.
                            if s.workload.shape == causeway_workload::TxnShape::ReadThenWrite {
                                s.workload.reads_per_txn = reads;
                                s.workload.writes_per_txn = writes;
                            }
                            s.workload.multi_dc_fraction = multi_dc;
                            s.dcs = dcs;
                            s.partitions = partitions;
                            s.protocol = protocol;
                            s.clients_per_partition = clients;
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }

    /// Checks every run before any starts.
    pub fn validate(&self) -> Result<(), String> {
        for (what, empty) in [
            ("--protocols", self.protocols.is_empty()),
            ("--clients", self.clients.is_empty() && self.clients_per_dc.is_empty()),
            ("--partitions", self.partitions.is_empty()),
            ("--dcs", self.dcs.is_empty()),
            ("--mix", self.mixes.is_empty()),
        ] {
            if empty {
                return Err(format!("{what} needs at least one value"));
            }
        }
        let promptcc = self.base.workload.shape == TxnShape::ReadOrWrite;
        let v = &self.variants;
        if !promptcc && (v.keys_per_txn.len() > 1 || v.write_fractions.len() > 1) {
            return Err("--keys-per-txn and --write-fraction lists vary the PrompTCC paper's transactions: give --workload promptcc".into());
        }
        let micro = matches!(self.base.workload.shape, TxnShape::SdurMicro { .. });
        if !micro && v.global_fractions.len() > 1 {
            return Err(
                "a --global-fraction list varies the Geo-SDUR microbenchmark: give --workload sdur-micro".into()
            );
        }
        if !self.ordered.is_empty() && self.protocols.iter().any(|p| *p != ProtocolKind::Sdur) {
            return Err(
                "--members, --delay-ms and --reorder lists vary Geo-SDUR's settings: give --protocols sdur".into()
            );
        }
        self.specs().iter().try_for_each(BenchSpec::validate)
    }
}

/// A file name for a run: `wren-3dc-4p-19r1w-8cpd` (8 clients per DC);
/// under partial replication `paris-3dc-6p-r2-local95-19r1w-8cpd` (each
/// partition in 2 DCs, 95 % of transactions local-DC); with the PrompTCC
/// paper's transactions `promptcc-1dc-8p-5k-w10-z99-v128-128cpd` (5 keys,
/// 10 % write, zipf 0.99, 128-byte values).
pub fn run_name(r: &BenchReport) -> String {
    let round = if r.round > 0 { format!("-round{}", r.round) } else { String::new() };
    if let Some(o) = &r.ordered {
        // Geo-SDUR: `sdur-wan1-micro-g10-r320-d20-12cpd` (the placement,
        // the workload and its global percent, reordering, delaying).
        let placement = match o.deployment() {
            Some(d) => d.to_lowercase().replace(' ', ""),
            None => format!("m{}", o.members.replace(',', "").replace('/', "-")),
        };
        let w = &r.workload;
        let workload = match (w.kind.as_deref(), w.global_fraction) {
            (Some("sdur-micro"), Some(g)) => format!("micro-g{}", fraction_name(g)),
            (Some(kind), _) => kind.to_string(),
            (None, _) => format!("{}r{}w", w.reads_per_txn, w.writes_per_txn),
        };
        let delay = o.delay.as_ref().map_or(String::new(), |d| format!("-d{d}"));
        return format!(
            "{}-{}dc-{}p-{placement}-{workload}-r{}{delay}-{}cpd{round}",
            r.protocol, r.dcs, r.partitions, o.reorder_threshold, r.clients_per_dc
        );
    }
    if let Some(wf) = r.workload.write_fraction {
        let w = &r.workload;
        return format!(
            "{}-{}dc-{}p-{}k-w{}-z{}-v{}-{}cpd",
            r.protocol,
            r.dcs,
            r.partitions,
            w.reads_per_txn,
            (wf * 100.0).round(),
            (w.zipf * 100.0).round(),
            w.value_size,
            r.clients_per_dc
        );
    }
    let placement = match (r.replication, r.workload.multi_dc_percent()) {
        (Some(rf), Some(multi)) => format!("-r{rf}-local{}", 100u32.saturating_sub(multi)),
        (Some(rf), None) => format!("-r{rf}"),
        _ => String::new(),
    };
    format!(
        "{}-{}dc-{}p{placement}-{}r{}w-{}cpd{round}",
        r.protocol, r.dcs, r.partitions, r.workload.reads_per_txn, r.workload.writes_per_txn, r.clients_per_dc
    )
}

/// A percent for a name: `10`, `1`, `0.5` → `0p5`.
fn fraction_name(f: f64) -> String {
    let pct = f * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{}", pct.round())
    } else {
        format!("{pct}").replace('.', "p")
    }
}

/// Writes one run's report as `DIR/runs/NAME.json`.
pub fn save_run(dir: &Path, report: &BenchReport) -> Result<()> {
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).with_context(|| format!("cannot create {}", runs.display()))?;
    let path = runs.join(format!("{}.json", run_name(report)));
    std::fs::write(&path, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes every report as one JSON array, `DIR/sweep.json`.
pub fn save(dir: &Path, reports: &[BenchReport]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("sweep.json");
    std::fs::write(&path, serde_json::to_vec_pretty(reports)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads `DIR/sweep.json` back, to draw its figures again.
pub fn load(dir: &Path) -> Result<Vec<BenchReport>> {
    let path = dir.join("sweep.json");
    let text = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not a sweep's reports", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_runs_every_combination_protocol_by_rising_load() {
        let sweep = Sweep {
            base: BenchSpec::default(),
            protocols: vec![ProtocolKind::Wren, ProtocolKind::Cure],
            clients: vec![1, 4],
            clients_per_dc: vec![],
            partitions: vec![2, 4],
            dcs: vec![3],
            mixes: vec![(19, 1), (10, 10)],
            multi_dc: vec![],
            variants: Variants::default(),
            ordered: OrderedVariants::default(),
            rounds: 1,
        };
        let specs = sweep.specs();
        assert_eq!(specs.len(), 2 * 2 * 2 * 2);
        let first: Vec<_> = specs[..4].iter().map(|s| (s.protocol, s.clients_per_partition, s.partitions)).collect();
        assert_eq!(
            first,
            vec![
                (ProtocolKind::Wren, 1, 2),
                (ProtocolKind::Wren, 4, 2),
                (ProtocolKind::Cure, 1, 2),
                (ProtocolKind::Cure, 4, 2)
            ]
        );
        assert_eq!(specs[8].workload.writes_per_txn, 10);
        assert_eq!(sweep.validate(), Ok(()));
        let per_dc = Sweep { clients_per_dc: vec![1, 2, 3], ..sweep.clone() };
        let loads: Vec<_> = per_dc.specs()[..3].iter().map(BenchSpec::clients_per_dc).collect();
        assert_eq!(loads, vec![1, 2, 3], "--clients-per-dc replaces --clients");
        let empty = Sweep { clients: vec![], ..sweep.clone() };
        assert!(empty.validate().unwrap_err().contains("--clients"));
        let keys = Sweep { variants: Variants { keys_per_txn: vec![2, 8], ..Variants::default() }, ..sweep };
        assert!(keys.validate().unwrap_err().contains("--workload promptcc"), "a list of keys needs its workload");
    }

    #[test]
    fn workload_variants_multiply_the_runs_and_set_what_they_vary() {
        let base = BenchSpec { workload: crate::promptcc_workload(5, 0.1), ..BenchSpec::default() };
        let sweep = Sweep {
            base,
            protocols: vec![ProtocolKind::Ec, ProtocolKind::PrompTcc],
            clients: vec![16],
            clients_per_dc: vec![],
            partitions: vec![8],
            dcs: vec![1],
            mixes: vec![(19, 1)],
            multi_dc: vec![],
            variants: Variants {
                value_sizes: vec![8, 2048],
                zipfs: vec![],
                keys_per_txn: vec![2, 16],
                write_fractions: vec![0.5],
                global_fractions: vec![],
            },
            ordered: OrderedVariants::default(),
            rounds: 1,
        };
        let specs = sweep.specs();
        assert_eq!(specs.len(), 2 * 2 * 2, "sizes × keys × protocols");
        let seen: Vec<_> = specs
            .iter()
            .map(|s| (s.value_size, s.workload.reads_per_txn, s.workload.write_fraction(), s.workload.zipf))
            .collect();
        assert_eq!(seen[0], (8, 2, 0.5, 0.99));
        assert_eq!(seen[7], (2048, 16, 0.5, 0.99));
        assert_eq!(
            (specs[0].protocol, specs[1].protocol),
            (ProtocolKind::Ec, ProtocolKind::PrompTcc),
            "EC beside each"
        );
        assert_eq!(sweep.validate(), Ok(()));
    }

    /// Geo-SDUR's sweeps: placements, delays, thresholds and global
    /// fractions multiply the runs; rounds repeat the whole series in order.
    #[test]
    fn geo_sdur_settings_and_rounds_multiply_the_runs_round_after_round() {
        let base = BenchSpec {
            protocol: ProtocolKind::Sdur,
            workload: causeway_workload::WorkloadConfig::sdur_micro(0.1),
            ..BenchSpec::default()
        };
        let wan1 = Some(vec![vec![2, 2, 1], vec![0, 0, 1]]);
        let sweep = Sweep {
            base,
            protocols: vec![ProtocolKind::Sdur],
            clients: vec![4],
            clients_per_dc: vec![],
            partitions: vec![2],
            dcs: vec![3],
            mixes: vec![(19, 1)],
            multi_dc: vec![],
            variants: Variants { global_fractions: vec![0.01, 0.5], ..Variants::default() },
            ordered: OrderedVariants {
                members: vec![wan1.clone(), None],
                delays: vec![DelayTuning::Off, DelayTuning::Fixed { delay_us: 20_000 }],
                reorders: vec![0, 320],
            },
            rounds: 3,
        };
        assert_eq!(sweep.validate(), Ok(()));
        let specs = sweep.specs();
        assert_eq!(specs.len(), 3 * 2 * 2 * 2 * 2, "rounds × placements × delays × thresholds × fractions");
        let one = specs.len() / 3;
        for (i, s) in specs.iter().enumerate() {
            assert_eq!(s.round as usize, i / one + 1, "round after round");
            let first = &specs[i % one];
            assert_eq!(
                (&s.groups, &s.ordered.delaying, s.ordered.reorder_threshold, s.workload.shape),
                (&first.groups, &first.ordered.delaying, first.ordered.reorder_threshold, first.workload.shape),
                "each round the same series"
            );
            assert_eq!(s.workload.reads_per_txn, 2, "a mix does not apply to the microbenchmark");
        }
        assert_eq!(specs[0].groups, wan1);
        assert_eq!(specs[0].workload.shape.global_fraction(), Some(0.01));
        assert_eq!(specs[1].workload.shape.global_fraction(), Some(0.5));
        assert_eq!(specs[2].ordered.reorder_threshold, 320);
        assert_eq!(specs[4].ordered.delaying, DelayTuning::Fixed { delay_us: 20_000 });
        assert_eq!(specs[8].groups, None);
        let ids: std::collections::BTreeSet<&str> = specs.iter().map(|s| s.run_id.as_str()).collect();
        assert_eq!(ids.len(), specs.len(), "every run its own id");
        let wren = Sweep { protocols: vec![ProtocolKind::Wren], ..sweep.clone() };
        assert!(wren.validate().unwrap_err().contains("--protocols sdur"));
        let paper = Sweep { base: BenchSpec { protocol: ProtocolKind::Sdur, ..BenchSpec::default() }, ..sweep };
        assert!(paper.validate().unwrap_err().contains("--workload sdur-micro"), "fractions need the microbenchmark");
    }
}
