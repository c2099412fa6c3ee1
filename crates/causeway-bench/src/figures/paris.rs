//! The PaRiS paper's figures that are not a curve per configuration (those,
//! Fig. 1 and the blocking time, are drawn with Wren's in the parent
//! module under `paris-` names): peak throughput and its latency against
//! locality (Fig. 3), and peak throughput against the number of DCs
//! (Fig. 2b), each per configuration of the rest. Each takes runs on
//! partial replication only.

use super::{by_protocol, colour, draw_lines, group_key, group_suffix, peak, peak_curves, GroupKey, LineChart, Series};
use crate::report::BenchReport;
use anyhow::Result;
use plotters::prelude::SeriesLabelPosition;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The paper's default locality (`--locality`'s too).
pub(super) const DEFAULT_LOCALITY: &str = "95:5";

/// Percent of multi-DC transactions: the x axis of Fig. 3 (its reports
/// all carry it).
fn multi_dc_percent(r: &BenchReport) -> f64 {
    r.workload.multi_dc_percent().map_or(0.0, f64::from)
}

/// Fig. 3: per protocol, its peak throughput at each locality (a) and the
/// mean latency of that run (b); one pair of figures per configuration
/// whose runs span more than one locality.
pub(super) fn locality(reports: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut groups: BTreeMap<GroupKey, Vec<&BenchReport>> = BTreeMap::new();
    // Reports written before they carried their locality cannot be placed.
    for r in reports.iter().filter(|r| r.workload.multi_dc_fraction.is_some()) {
        groups.entry(GroupKey { locality: None, ..group_key(r) }).or_default().push(r);
    }
    groups.retain(|_, runs| runs.iter().map(|r| r.workload.locality()).collect::<BTreeSet<_>>().len() > 1);
    let keys: Vec<&GroupKey> = groups.keys().collect();
    let mut files = Vec::new();
    for (key, runs) in &groups {
        let suffix = group_suffix(key, &keys);
        let mut throughput = Vec::new();
        let mut latency = Vec::new();
        for (protocol, runs) in by_protocol(runs) {
            // By the share of multi-DC transactions, in order: the x axis.
            let mut at: BTreeMap<Option<u32>, Vec<&BenchReport>> = BTreeMap::new();
            for r in runs {
                at.entry(r.workload.multi_dc_percent()).or_default().push(r);
            }
            let peaks: Vec<&BenchReport> = at.values().filter_map(|v| peak(v)).collect();
            let series = |f: fn(&BenchReport) -> f64| Series {
                name: protocol.clone(),
                colour: colour(&protocol),
                dashed: false,
                points: peaks.iter().map(|r| (multi_dc_percent(r), f(r))).collect(),
            };
            throughput.push(series(|r| r.throughput_tps / 1000.0));
            latency.push(series(|r| r.latency_mean_ms));
        }
        let title = super::group_title(key);
        for (stem, what, y, series) in [
            (
                "paris-fig3a-locality-throughput",
                "Peak throughput",
                "peak throughput (thousand transactions/s)",
                throughput,
            ),
            ("paris-fig3b-locality-latency", "Mean latency at the peak", "mean transaction latency (ms)", latency),
        ] {
            files.extend(draw_lines(
                dir,
                &format!("{stem}{suffix}"),
                &LineChart {
                    title: format!("{what} against locality — {title}"),
                    x: "multi-DC transactions (%)",
                    y,
                    series,
                    legend: SeriesLabelPosition::UpperLeft,
                    log_y: false,
                },
            )?);
        }
    }
    Ok(files)
}

/// Fig. 2b: peak throughput against the number of DCs, one curve per
/// protocol and partitions per DC (each DC's share of the partitions,
/// `partitions × R / DCs`); one figure per configuration (mix, locality,
/// …) whose runs span more than one DC count.
pub(super) fn dcs(reports: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut groups: BTreeMap<GroupKey, Vec<&BenchReport>> = BTreeMap::new();
    for r in reports {
        // Both cleared (partitions as "any": a transaction's reach is then
        // the paper's whenever it touches 4).
        groups.entry(GroupKey { dcs: 0, partitions: u32::MAX, ..group_key(r) }).or_default().push(r);
    }
    groups.retain(|_, runs| runs.iter().map(|r| r.dcs).collect::<BTreeSet<_>>().len() > 1);
    let keys: Vec<&GroupKey> = groups.keys().collect();
    let mut files = Vec::new();
    for (key, runs) in &groups {
        // Partitions per DC, in tenths: a share need not be whole.
        let per_dc = |r: &BenchReport| {
            u64::from(r.partitions) * u64::from(r.replication.unwrap_or(r.dcs)) * 10 / u64::from(r.dcs.max(1))
        };
        let series = peak_curves(
            runs,
            |r| (per_dc(r), r.dcs),
            |p, tenths| format!("{p}, {} partitions per DC", tenths as f64 / 10.0),
        );
        files.extend(draw_lines(
            dir,
            &format!("paris-fig2b-dcs{}", group_suffix(key, &keys)),
            &LineChart {
                title: "Peak throughput as DCs are added (partial replication)".into(),
                x: "data centers",
                y: "peak throughput (thousand transactions/s)",
                series,
                legend: SeriesLabelPosition::LowerRight,
                log_y: false,
            },
        )?);
    }
    Ok(files)
}
