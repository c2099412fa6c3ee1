//! The PrompTCC paper's figures, from runs of its transactions (`--workload
//! promptcc`): each protocol's peak throughput, and the mean latency of that
//! run, divided by EC's at the same setting — the paper's normalization —
//! against the parameter a sweep varied, and the mean round trips of the
//! read-only transactions of that run:
//!
//! * `promptcc-fig2-value-size` — against bytes per value (Fig. 2);
//! * `promptcc-fig3-zipf`, `promptcc-fig4-zipf-latency` — against the zipf
//!   exponent (Figs. 3–4);
//! * `promptcc-fig5-keys` — against keys read per transaction (Fig. 5);
//! * `promptcc-fig6-write-fraction` — against the share that write (Fig. 6);
//! * `promptcc-fig7-partitions`, `promptcc-fig8-partitions-latency` —
//!   against partitions (Figs. 7–8);
//!
//! each with `-latency` (where the paper has none, for completeness) and
//! `-rounds` beside it. A figure is drawn for each setting of the other
//! parameters whose runs span more than one value of its own.

use super::{by_protocol, colour, draw_lines, peak, LineChart, Series};
use crate::report::BenchReport;
use anyhow::Result;
use plotters::prelude::SeriesLabelPosition;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A parameter the figures are drawn against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Axis {
    ValueSize,
    Zipf,
    Keys,
    WriteFraction,
    Partitions,
}

const AXES: [Axis; 5] = [Axis::ValueSize, Axis::Zipf, Axis::Keys, Axis::WriteFraction, Axis::Partitions];

impl Axis {
    /// The run's value, in thousandths where it is a fraction (an ordered
    /// key).
    fn of(self, r: &BenchReport) -> u64 {
        let w = &r.workload;
        match self {
            Axis::ValueSize => w.value_size as u64,
            Axis::Zipf => (w.zipf * 1000.0).round() as u64,
            Axis::Keys => u64::from(w.reads_per_txn),
            Axis::WriteFraction => (w.write_fraction.unwrap_or(0.0) * 1000.0).round() as u64,
            Axis::Partitions => u64::from(r.partitions),
        }
    }

    /// The value on the figure's x axis.
    fn x(self, key: u64) -> f64 {
        match self {
            Axis::Zipf | Axis::WriteFraction => key as f64 / 1000.0,
            _ => key as f64,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Axis::ValueSize => "bytes per value",
            Axis::Zipf => "zipf exponent",
            Axis::Keys => "keys read or written per transaction",
            Axis::WriteFraction => "share of transactions that write",
            Axis::Partitions => "partitions",
        }
    }

    /// The stems of the throughput and latency figures.
    fn stems(self) -> (&'static str, &'static str) {
        match self {
            Axis::ValueSize => ("promptcc-fig2-value-size", "promptcc-fig2-value-size-latency"),
            Axis::Zipf => ("promptcc-fig3-zipf", "promptcc-fig4-zipf-latency"),
            Axis::Keys => ("promptcc-fig5-keys", "promptcc-fig5-keys-latency"),
            Axis::WriteFraction => ("promptcc-fig6-write-fraction", "promptcc-fig6-write-fraction-latency"),
            Axis::Partitions => ("promptcc-fig7-partitions", "promptcc-fig8-partitions-latency"),
        }
    }
}

/// A run's setting of every axis but `but` (and what else sets runs
/// apart: DCs, deployment, WAN).
fn setting(r: &BenchReport, but: Axis) -> (Vec<u64>, u16, String, bool) {
    let values = AXES.iter().map(|&a| if a == but { 0 } else { a.of(r) }).collect();
    (values, r.dcs, r.deployment.clone(), r.wan)
}

/// Draws the figures of every axis the runs vary.
pub(super) fn draw(reports: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for axis in AXES {
        let mut groups: BTreeMap<_, Vec<&BenchReport>> = BTreeMap::new();
        for r in reports {
            groups.entry(setting(r, axis)).or_default().push(r);
        }
        groups.retain(|_, runs| runs.iter().map(|r| axis.of(r)).collect::<BTreeSet<_>>().len() > 1);
        let many = groups.len() > 1;
        for (i, runs) in groups.values().enumerate() {
            let suffix = if many { format!("-{}", i + 1) } else { String::new() };
            files.extend(draw_axis(axis, runs, dir, &suffix)?);
        }
    }
    Ok(files)
}

/// Per protocol, per value of the axis, the peak run.
fn peaks<'a>(axis: Axis, runs: &[&'a BenchReport]) -> BTreeMap<String, BTreeMap<u64, &'a BenchReport>> {
    by_protocol(runs)
        .into_iter()
        .map(|(p, rs)| {
            let mut at: BTreeMap<u64, Vec<&BenchReport>> = BTreeMap::new();
            for r in rs {
                at.entry(axis.of(r)).or_default().push(r);
            }
            let peaks = at.into_iter().filter_map(|(x, v)| peak(&v).map(|r| (x, r))).collect();
            (p, peaks)
        })
        .collect()
}

fn draw_axis(axis: Axis, runs: &[&BenchReport], dir: &Path, suffix: &str) -> Result<Vec<PathBuf>> {
    let peaks = peaks(axis, runs);
    let mut files = Vec::new();
    // What the runs share: every parameter but the one on the x axis.
    let title = |what: &str| {
        let (r, w) = (runs[0], &runs[0].workload);
        let mut parts = vec![format!("{} DC", r.dcs)];
        for a in AXES.into_iter().filter(|&a| a != axis) {
            parts.push(match a {
                Axis::Partitions => format!("{} partitions", r.partitions),
                Axis::Keys => format!("{} keys", w.reads_per_txn),
                Axis::WriteFraction => format!("{:.0} % write", w.write_fraction.unwrap_or(0.0) * 100.0),
                Axis::Zipf => format!("zipf {}", w.zipf),
                Axis::ValueSize => format!("{} B", w.value_size),
            });
        }
        format!("{what} — {}", parts.join(", "))
    };
    let series = |f: &dyn Fn(&BenchReport, u64) -> Option<f64>| -> Vec<Series> {
        peaks
            .iter()
            .map(|(p, at)| Series {
                name: p.clone(),
                colour: colour(p),
                dashed: false,
                points: at.iter().filter_map(|(&x, r)| f(r, x).map(|y| (axis.x(x), y))).collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    if let Some(ec) = peaks.get("ec") {
        let (throughput, latency) = axis.stems();
        let normalized = |of: fn(&BenchReport) -> f64| {
            move |r: &BenchReport, x: u64| ec.get(&x).map(|e| of(r) / of(e)).filter(|v| v.is_finite())
        };
        for (stem, what, y, of) in [
            (
                throughput,
                "Peak throughput over EC's",
                "throughput / EC's",
                (|r| r.throughput_tps) as fn(&BenchReport) -> f64,
            ),
            (latency, "Mean latency at the peak over EC's", "mean latency / EC's", |r| r.latency_mean_ms),
        ] {
            let chart = LineChart {
                title: title(what),
                x: axis.label(),
                y,
                series: series(&normalized(of)),
                legend: SeriesLabelPosition::LowerLeft,
                log_y: false,
            };
            files.extend(draw_lines(dir, &format!("{stem}{suffix}"), &chart)?);
        }
    }
    let rounds = LineChart {
        title: title("Read-only round trips at the peak"),
        x: axis.label(),
        y: "mean round trips per read-only transaction",
        series: series(&|r, _| r.reads.read_only_round_summary().map(|(mean, _, _)| mean)),
        legend: SeriesLabelPosition::UpperLeft,
        log_y: false,
    };
    files.extend(draw_lines(dir, &format!("{}-rounds{suffix}", axis.stems().0), &rounds)?);
    Ok(files)
}
