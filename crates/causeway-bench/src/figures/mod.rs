//! The Wren paper's figures, drawn from a sweep's reports as PNG and SVG,
//! each named after the paper's figure it redraws (the names
//! docs/BENCHMARKS.md shows):
//!
//! * `fig3a-throughput-latency` — mean latency against throughput, one
//!   curve per protocol as clients are added; `fig4-throughput-latency-18r2w`
//!   for another read:write mix, `fig5-throughput-latency-2ppt` for other
//!   partitions per transaction;
//! * `fig3b-read-wait` — mean read waiting time against throughput;
//! * `fig6-scaling` — peak throughput as partitions per DC grow, one curve
//!   per protocol and DC count, when the sweep varied them;
//! * `fig7a-bytes` — replication and stabilization bytes per committed
//!   transaction, per protocol;
//! * `fig7b-visibility` — CDFs of local and remote update-visibility latency.
//!
//! A sweep with several configurations draws the first two per
//! configuration, named by what sets it apart ([`group_suffix`]):
//! `fig3a-throughput-latency-3dc-2p`, `fig3b-read-wait-18r2w`, ….
//!
//! Runs on partial replication redraw the PaRiS paper's figures instead
//! ([`paris`]): `paris-fig1-throughput-latency-19r1w`, `paris-blocking-…`,
//! `paris-fig2b-dcs`, `paris-fig3a-locality-throughput`,
//! `paris-fig3b-locality-latency`, `paris-fig4-visibility`.
//!
//! Runs of the PrompTCC paper's transactions (`--workload promptcc`)
//! redraw its figures instead ([`promptcc`]): throughput and latency over
//! EC's against value size, zipf, keys per transaction, write fraction and
//! partitions, and the read-only round trips.
//!
//! Runs of the Geo-SDUR paper's workloads (`--workload sdur-micro`,
//! `social`) redraw its figures instead ([`sdur`]): local and global
//! transactions against the global fraction in each placement
//! (`sdur-fig2-wan1`, with CDFs), against the delay (`sdur-fig3-delay-…`),
//! the reordering threshold (`sdur-fig4-reorder-wan1`,
//! `sdur-fig5-reorder-wan2`), and the social network's operations with and
//! without reordering (`sdur-fig6-social-…`).
//!
//! Text is drawn with the DejaVu Sans font compiled into the binary, so
//! figures come out the same on a machine without fonts.

use crate::report::BenchReport;
use anyhow::{anyhow, Result};
use causeway_protocol::ProtocolKind;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Once;

mod paris;
mod promptcc;
mod sdur;

const SIZE: (u32, u32) = (960, 640);

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and valid; a failure would only lose text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Distinct colours (the Tableau 10), one per protocol in the order the
/// engine lists them; a protocol added later takes the next one.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// A protocol's colour, the same in every figure: its place among the
/// engine's protocols; grey for a name the engine does not know.
fn colour(protocol: &str) -> RGBColor {
    ProtocolKind::ALL
        .iter()
        .position(|k| k.name() == protocol)
        .map_or(RGBColor(0x55, 0x55, 0x55), |i| PALETTE[i % PALETTE.len()])
}

struct Series {
    name: String,
    colour: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

struct LineChart<'a> {
    title: String,
    x: &'a str,
    y: &'a str,
    series: Vec<Series>,
    /// Where the legend covers the least.
    legend: SeriesLabelPosition,
    /// A logarithmic y axis (the PaRiS paper's latencies and visibility).
    log_y: bool,
}

/// Draws `chart` to `stem.png` and `stem.svg`.
fn draw_lines(dir: &Path, stem: &str, chart: &LineChart) -> Result<Vec<PathBuf>> {
    register_font();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    lines_on(BitMapBackend::new(&png, SIZE).into_drawing_area(), chart)?;
    lines_on(SVGBackend::new(&svg, SIZE).into_drawing_area(), chart)?;
    Ok(vec![png, svg])
}

fn bounds(series: &[Series]) -> ((f64, f64), (f64, f64)) {
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let max_x = pts().map(|p| p.0).fold(0.0, f64::max);
    let max_y = pts().map(|p| p.1).fold(0.0, f64::max);
    ((0.0, if max_x > 0.0 { max_x * 1.1 } else { 1.0 }), (0.0, if max_y > 0.0 { max_y * 1.15 } else { 1.0 }))
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a figure failed: {e:?}")
}

fn lines_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &LineChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    lines_in(&root, chart)?;
    root.present().map_err(err)?;
    Ok(())
}

/// `chart` drawn into `root` (a whole figure, or a panel of one).
fn lines_in<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &LineChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let ((x0, x1), (y0, y1)) = bounds(&chart.series);
    let mut builder = ChartBuilder::on(root);
    builder.caption(&chart.title, ("sans-serif", 20)).margin(16).x_label_area_size(48).y_label_area_size(64);
    if chart.log_y {
        // From the decade below the least value to half again the most, as
        // the PaRiS paper draws latencies that differ by orders of magnitude.
        let positive = || chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|y| *y > 0.0);
        let lo = positive().fold(f64::INFINITY, f64::min);
        let lo = if lo.is_finite() { 10f64.powf(lo.log10().floor()) } else { 0.1 };
        let hi = positive().fold(lo, f64::max) * 1.5;
        let mut c = builder.build_cartesian_2d(x0..x1, (lo..hi).log_scale()).map_err(err)?;
        curves(&mut c, chart)?;
        legend(&mut c, chart.legend.clone())?;
    } else {
        let mut c = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?;
        curves(&mut c, chart)?;
        legend(&mut c, chart.legend.clone())?;
    }
    Ok(())
}

/// The mesh and the series of `chart`, on a linear or a logarithmic y axis.
fn curves<'a, DB, Y>(c: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>, chart: &LineChart) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    c.configure_mesh()
        .x_desc(chart.x)
        .y_desc(chart.y)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(err)?;
    for s in &chart.series {
        let (colour, dashed) = (s.colour, s.dashed);
        let style = ShapeStyle { color: colour.to_rgba(), filled: true, stroke_width: 2 };
        // A logarithmic axis has no zero: such points are left out.
        let points: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| !chart.log_y || p.1 > 0.0).collect();
        if s.dashed {
            c.draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, style)).map_err(err)?
        } else {
            c.draw_series(LineSeries::new(points.iter().copied(), style)).map_err(err)?
        }
        .label(&s.name)
        .legend(move |(x, y)| {
            // Two strokes: touching for a solid line, apart for a dashed one.
            let gap = if dashed { 6 } else { 0 };
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (9, 0)], colour.stroke_width(3))
                + PathElement::new(vec![(9 + gap, 0), (24, 0)], colour.stroke_width(3))
        });
        c.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled()))).map_err(err)?;
    }
    Ok(())
}

/// The legend box, the same in every figure.
fn legend<'a, DB, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    position: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    c.configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)
}

/// Runs that differ only in protocol and load: one set of curves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    dcs: u16,
    partitions: u32,
    reads: u32,
    writes: u32,
    /// Partitions per transaction (at most `partitions`).
    touched: u32,
    wan: bool,
    deployment: String,
    /// Under partial replication: replicas per partition.
    replication: Option<u16>,
    /// Under partial replication: `LOCAL:MULTI`.
    locality: Option<String>,
}

impl GroupKey {
    /// Each partition in fewer DCs than there are: the PaRiS paper's
    /// setting (a report at R = M is full replication, Wren's figures).
    fn partial(&self) -> bool {
        self.replication.is_some_and(|r| r < self.dcs)
    }
}

fn group_key(r: &BenchReport) -> GroupKey {
    let partial = r.replication.filter(|&rf| rf < r.dcs);
    GroupKey {
        replication: partial,
        locality: partial.and_then(|_| r.workload.locality()),
        dcs: r.dcs,
        partitions: r.partitions,
        reads: r.workload.reads_per_txn,
        writes: r.workload.writes_per_txn,
        touched: r.workload.partitions_per_txn,
        wan: r.wan,
        deployment: r.deployment.clone(),
    }
}

/// The paper's transaction: 19 reads and 1 write over 4 partitions (or
/// every partition, when there are fewer).
fn papers_mix(k: &GroupKey) -> bool {
    (k.reads, k.writes) == (19, 1)
}

fn papers_reach(k: &GroupKey) -> bool {
    k.touched == 4.min(k.partitions)
}

/// What sets a configuration apart, for its figures' names: what varies
/// between the sweep's configurations, and what departs from the paper's
/// default (the mix, partitions per transaction, a deployment other than
/// embedded) — `-3dc-2p`, `-18r2w`, `-2ppt`, `-processes`; empty for the
/// paper's default alone.
fn group_suffix(k: &GroupKey, all: &[&GroupKey]) -> String {
    let varies = |f: &dyn Fn(&GroupKey) -> String| all.iter().any(|g| f(g) != f(k));
    let mut parts = Vec::new();
    if varies(&|g| g.dcs.to_string()) {
        parts.push(format!("{}dc", k.dcs));
    }
    if varies(&|g| g.partitions.to_string()) {
        parts.push(format!("{}p", k.partitions));
    }
    if !papers_mix(k) || varies(&|g| format!("{}:{}", g.reads, g.writes)) {
        parts.push(format!("{}r{}w", k.reads, k.writes));
    }
    // The paper's 4 (or all, when fewer) counts as one value, whatever the partitions.
    let reach = |g: &GroupKey| if papers_reach(g) { "the paper's".to_string() } else { g.touched.to_string() };
    if !papers_reach(k) || varies(&reach) {
        parts.push(format!("{}ppt", k.touched));
    }
    if varies(&|g| g.wan.to_string()) {
        parts.push(if k.wan { "wan-on".into() } else { "wan-off".into() });
    }
    if k.deployment != "embedded" || varies(&|g| g.deployment.clone()) {
        parts.push(k.deployment.clone());
    }
    if varies(&|g| format!("{:?}", g.replication)) {
        parts.push(k.replication.map_or("full".into(), |r| format!("r{r}")));
    }
    // The paper's default locality, 95:5, unnamed unless it varies.
    if let Some(l) = &k.locality {
        if l != paris::DEFAULT_LOCALITY || varies(&|g| format!("{:?}", g.locality)) {
            parts.push(format!("local{}", l.split(':').next().unwrap_or(l)));
        }
    }
    parts.iter().map(|p| format!("-{p}")).collect()
}

/// The paper's figure a throughput-latency curve redraws: Fig. 5 varies the
/// partitions per transaction, Fig. 4 the mix, Fig. 3a is the default;
/// under partial replication, the PaRiS paper's Fig. 1.
fn throughput_figure(k: &GroupKey) -> &'static str {
    if k.partial() {
        "paris-fig1"
    } else if !papers_reach(k) {
        "fig5"
    } else if !papers_mix(k) {
        "fig4"
    } else {
        "fig3a"
    }
}

fn group_title(k: &GroupKey) -> String {
    let placement = match (k.replication, &k.locality) {
        (Some(r), Some(l)) => format!(", R = {r}, locality {l}"),
        (Some(r), None) => format!(", R = {r}"),
        _ => String::new(),
    };
    format!(
        "{} DCs × {} partitions{placement} · {}+{} over {} · WAN {} · {}",
        k.dcs,
        k.partitions,
        k.reads,
        k.writes,
        k.touched,
        if k.wan { "on" } else { "off" },
        k.deployment
    )
}

/// A figure of one value against throughput: file stem, title, y axis,
/// value, a logarithmic y axis.
type AgainstLoad = (String, &'static str, &'static str, fn(&BenchReport) -> f64, bool);

/// Per protocol, its runs sorted by load.
fn by_protocol<'a>(runs: &[&'a BenchReport]) -> BTreeMap<String, Vec<&'a BenchReport>> {
    let mut m: BTreeMap<String, Vec<&BenchReport>> = BTreeMap::new();
    for r in runs {
        m.entry(r.protocol.clone()).or_default().push(r);
    }
    for v in m.values_mut() {
        v.sort_by_key(|r| r.clients);
    }
    m
}

/// The run with the highest throughput (a protocol's peak).
fn peak<'a>(runs: &[&'a BenchReport]) -> Option<&'a BenchReport> {
    runs.iter().copied().max_by(|a, b| a.throughput_tps.total_cmp(&b.throughput_tps))
}

/// The name under a bar chart's category at `x`: category `i` spans
/// `i..i + 1`, its name under the middle, nothing at the other ticks.
fn category_label(names: &[String], x: f64) -> String {
    let i = x.floor() as usize;
    if (x - x.floor() - 0.5).abs() < 0.26 && i < names.len() {
        names[i].clone()
    } else {
        String::new()
    }
}

/// Draws every figure the reports allow into `dir`; returns the files.
pub fn draw_all(reports: &[BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    let (geo, reports): (Vec<&BenchReport>, Vec<&BenchReport>) =
        reports.iter().partition(|r| r.workload.kind.is_some());
    let (ptcc, reports): (Vec<&BenchReport>, Vec<&BenchReport>) =
        reports.into_iter().partition(|r| r.workload.write_fraction.is_some());
    let mut files = promptcc::draw(&ptcc, dir)?;
    files.extend(sdur::draw(&geo, dir)?);
    let mut groups: BTreeMap<GroupKey, Vec<&BenchReport>> = BTreeMap::new();
    for r in reports {
        groups.entry(group_key(r)).or_default().push(r);
    }
    let keys: Vec<&GroupKey> = groups.keys().collect();
    for (key, runs) in &groups {
        let protocols = by_protocol(runs);
        let curve = |f: fn(&BenchReport) -> f64| -> Vec<Series> {
            protocols
                .iter()
                .map(|(p, rs)| Series {
                    name: p.clone(),
                    colour: colour(p),
                    dashed: false,
                    points: rs.iter().map(|r| (r.throughput_tps / 1000.0, f(r))).collect(),
                })
                .collect()
        };
        let suffix = group_suffix(key, &keys);
        let against_load: [AgainstLoad; 2] = [
            (
                format!("{}-throughput-latency{suffix}", throughput_figure(key)),
                "Throughput and latency",
                "mean transaction latency (ms)",
                |r| r.latency_mean_ms,
                // The PaRiS paper's Fig. 1: BPR's latencies are PaRiS's
                // times ten or more.
                key.partial(),
            ),
            (
                match key.partial() {
                    true => format!("paris-blocking{suffix}"),
                    false => format!("fig3b-read-wait{suffix}"),
                },
                "Read waiting time",
                "mean waiting time per read request (ms)",
                |r| r.reads.wait_mean_ms,
                false,
            ),
        ];
        for (stem, title, y, value, log_y) in against_load {
            files.extend(draw_lines(
                dir,
                &stem,
                &LineChart {
                    title: format!("{title} — {}", group_title(key)),
                    x: "throughput (thousand transactions/s)",
                    y,
                    series: curve(value),
                    legend: SeriesLabelPosition::UpperLeft,
                    log_y,
                },
            )?);
        }
        if key.partial() && key.locality.as_deref() == Some(paris::DEFAULT_LOCALITY) {
            // Each protocol at its peak: past it, visibility measures the overload.
            let chosen: Vec<&BenchReport> = protocols.values().filter_map(|v| peak(v)).collect();
            files.extend(visibility(&chosen, dir, &format!("paris-fig4-visibility{suffix}"))?);
        }
    }
    let partial: Vec<&BenchReport> = groups.iter().filter(|(k, _)| k.partial()).flat_map(|(_, v)| v.clone()).collect();
    files.extend(paris::locality(&partial, dir)?);
    files.extend(paris::dcs(&partial, dir)?);
    let full: Vec<&BenchReport> = groups.iter().filter(|(k, _)| !k.partial()).flat_map(|(_, v)| v.clone()).collect();
    files.extend(scaling(&full, dir)?);
    // Figs. 7a and 7b compare protocols at one configuration: the first
    // group's, each protocol at its highest load.
    if let Some(runs) = groups.iter().find(|(k, _)| !k.partial()).map(|(_, v)| v) {
        let chosen: Vec<&BenchReport> = by_protocol(runs).into_values().filter_map(|v| v.last().copied()).collect();
        files.extend(bytes(&chosen, dir)?);
        files.extend(visibility(&chosen, dir, "fig7b-visibility")?);
    }
    Ok(files)
}

/// Fig. 6: peak throughput against partitions per DC, one curve per protocol
/// and DC count; drawn when the sweep has more than one partition or DC count.
fn scaling(reports: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    let sizes = reports.iter().map(|r| (r.dcs, r.partitions)).collect::<std::collections::BTreeSet<_>>();
    if sizes.len() < 2 {
        return Ok(Vec::new());
    }
    let series = peak_curves(reports, |r| (r.dcs, r.partitions), |p, dcs| format!("{p}, {dcs} DCs"));
    draw_lines(
        dir,
        "fig6-scaling",
        &LineChart {
            title: "Peak throughput as the cluster grows".into(),
            x: "partitions per DC",
            y: "peak throughput (thousand transactions/s)",
            series,
            legend: SeriesLabelPosition::LowerRight,
            log_y: false,
        },
    )
}

/// Peak throughput (thousand transactions/s) against `x`, one curve per
/// protocol and `line`: each point the best of the runs there. The curves
/// of the least `line` are solid, the others dashed.
fn peak_curves<L: Ord + Copy, X: Ord + Into<f64>>(
    reports: &[&BenchReport],
    line_and_x: impl Fn(&BenchReport) -> (L, X),
    name: impl Fn(&str, L) -> String,
) -> Vec<Series> {
    let mut peaks: BTreeMap<(String, L), BTreeMap<X, f64>> = BTreeMap::new();
    for r in reports {
        let (line, x) = line_and_x(r);
        let e = peaks.entry((r.protocol.clone(), line)).or_default().entry(x).or_insert(0.0);
        *e = e.max(r.throughput_tps / 1000.0);
    }
    let least = peaks.keys().map(|(_, line)| *line).min();
    peaks
        .into_iter()
        .map(|((p, line), pts)| Series {
            name: name(&p, line),
            colour: colour(&p),
            dashed: Some(line) != least,
            points: pts.into_iter().map(|(x, t)| (x.into(), t)).collect(),
        })
        .collect()
}

/// Fig. 7b (and the PaRiS paper's Fig. 4): CDFs of visibility latency,
/// local (solid) and remote (dashed).
fn visibility(runs: &[&BenchReport], dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    let mut series = Vec::new();
    for r in runs {
        for (which, d, dashed) in [("local", &r.visibility.local, false), ("remote", &r.visibility.remote, true)] {
            if d.count > 0 {
                series.push(Series {
                    name: format!("{} {which}", r.protocol),
                    colour: colour(&r.protocol),
                    dashed,
                    points: d.cdf.iter().map(|p| (p[0], p[1])).collect(),
                });
            }
        }
    }
    if series.is_empty() {
        return Ok(Vec::new());
    }
    draw_lines(
        dir,
        stem,
        &LineChart {
            title: "Update visibility latency (CDF): local solid, remote dashed".into(),
            x: "time from commit to visibility (ms)",
            y: "fraction of updates",
            series,
            legend: SeriesLabelPosition::LowerRight,
            log_y: false,
        },
    )
}

/// Fig. 7a: replication and stabilization bytes per committed transaction.
fn bytes(runs: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    register_font();
    let png = dir.join("fig7a-bytes.png");
    let svg = dir.join("fig7a-bytes.svg");
    bars_on(BitMapBackend::new(&png, SIZE).into_drawing_area(), runs)?;
    bars_on(SVGBackend::new(&svg, SIZE).into_drawing_area(), runs)?;
    Ok(vec![png, svg])
}

fn bars_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, runs: &[&BenchReport]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let kb = |b: f64| b / 1000.0;
    let top = runs
        .iter()
        .map(|r| kb(r.traffic.bytes_per_txn.get("replication").max(r.traffic.bytes_per_txn.get("stabilization"))))
        .fold(0.0, f64::max)
        .max(0.001)
        * 1.2;
    let n = runs.len();
    let names: Vec<String> = runs.iter().map(|r| r.protocol.clone()).collect();
    let mut c = ChartBuilder::on(&root)
        .caption("Bytes per committed transaction: replication and stabilization", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..n as f64, 0.0..top)
        .map_err(err)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| category_label(&names, *x))
        .y_desc("kB per committed transaction")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(err)?;
    let replication = RGBColor(0x44, 0x72, 0xc4);
    let stabilization = RGBColor(0xed, 0x7d, 0x31);
    for (i, r) in runs.iter().enumerate() {
        let x = i as f64;
        let per = &r.traffic.bytes_per_txn;
        c.draw_series([
            Rectangle::new([(x + 0.12, 0.0), (x + 0.48, kb(per.get("replication")))], replication.filled()),
            Rectangle::new([(x + 0.52, 0.0), (x + 0.88, kb(per.get("stabilization")))], stabilization.filled()),
        ])
        .map_err(err)?;
    }
    // Legend entries, drawn as empty series.
    for (name, colour) in [("replication", replication), ("stabilization", stabilization)] {
        c.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour.filled()));
    }
    legend(&mut c, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(dcs: u16, partitions: u32, (reads, writes): (u32, u32), touched: u32, deployment: &str) -> GroupKey {
        GroupKey {
            dcs,
            partitions,
            reads,
            writes,
            touched,
            wan: true,
            deployment: deployment.into(),
            replication: None,
            locality: None,
        }
    }

    fn name(k: &GroupKey, all: &[&GroupKey]) -> String {
        format!("{}-throughput-latency{}", throughput_figure(k), group_suffix(k, all))
    }

    #[test]
    fn figures_are_named_after_the_papers_and_what_sets_them_apart() {
        let default = key(3, 4, (19, 1), 4, "embedded");
        assert_eq!(name(&default, &[&default]), "fig3a-throughput-latency");
        let (a, b) = (key(3, 4, (18, 2), 4, "embedded"), key(3, 4, (10, 10), 4, "embedded"));
        assert_eq!(name(&a, &[&a, &b]), "fig4-throughput-latency-18r2w");
        assert_eq!(name(&b, &[&a, &b]), "fig4-throughput-latency-10r10w");
        let two = key(3, 8, (19, 1), 2, "embedded");
        assert_eq!(name(&two, &[&two]), "fig5-throughput-latency-2ppt");
        let (small, big) = (key(3, 2, (19, 1), 2, "embedded"), key(5, 8, (19, 1), 4, "embedded"));
        assert_eq!(name(&small, &[&small, &big]), "fig3a-throughput-latency-3dc-2p");
        assert_eq!(name(&big, &[&small, &big]), "fig3a-throughput-latency-5dc-8p");
        let processes = key(3, 2, (19, 1), 2, "processes");
        assert_eq!(name(&processes, &[&processes]), "fig3a-throughput-latency-processes");
        assert_eq!(group_suffix(&a, &[&a, &default]), "-18r2w");
        // Partial replication: the PaRiS paper's names, R and locality when they vary.
        let partial = |mix, locality: &str| GroupKey {
            replication: Some(2),
            locality: Some(locality.into()),
            ..key(3, 6, mix, 4, "embedded")
        };
        let (read_heavy, write_heavy) = (partial((19, 1), "95:5"), partial((10, 10), "95:5"));
        assert!(read_heavy.partial() && !GroupKey { replication: Some(3), ..default.clone() }.partial());
        assert_eq!(name(&read_heavy, &[&read_heavy]), "paris-fig1-throughput-latency");
        assert_eq!(name(&write_heavy, &[&read_heavy, &write_heavy]), "paris-fig1-throughput-latency-10r10w");
        let far = partial((19, 1), "50:50");
        assert_eq!(name(&far, &[&far]), "paris-fig1-throughput-latency-local50", "not the paper's default locality");
        assert_eq!(name(&read_heavy, &[&read_heavy, &far]), "paris-fig1-throughput-latency-local95");
        assert_eq!(group_suffix(&default, &[&a, &default]), "-19r1w", "the mix varies in the sweep");
    }
}
