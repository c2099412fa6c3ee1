//! The Geo-SDUR paper's figures (Sciascia, Pedone, DSN 2013, §VI), from
//! runs of its workloads (`--workload sdur-micro`, `--workload social`),
//! one set per placement of the replica groups (`WAN 1`: each partition's
//! majority in one region; `WAN 2`: a member per region; another placement
//! is named by its `--members`):
//!
//! * `sdur-fig2-wan1`, `sdur-fig2-wan2` — Fig. 2: throughput of local and
//!   global transactions against the share of globals, their latency (p99
//!   as bars, the mean as a diamond on each), and the CDFs of locals
//!   without globals and of locals and globals with 10 % of them;
//! * `sdur-fig3-delay-wan1` — Fig. 3: throughput and latency of locals and
//!   globals with globals delayed (baseline, D = 20, 40, 60 ms), against the
//!   share of globals;
//! * `sdur-fig4-reorder-wan1`, `sdur-fig5-reorder-wan2` — Figs. 4–5: the
//!   same with reordering (baseline, R = 80, 160, 320);
//! * `sdur-fig6-social-wan1` — Fig. 6: the social network's timeline, post,
//!   local and global follow, with and without reordering.
//!
//! A sweep repeated in rounds (`--rounds`), or several sweeps drawn
//! together (`causeway plot A B …`), give a setting several runs: every bar
//! is their median, and a CDF the run of median throughput.
//! When a sweep ran several loads, each gets its figures (`-12cpd`).

use super::{category_label, err, lines_in, register_font, LineChart, Series, PALETTE, SIZE};
use crate::report::{BenchReport, ClassReport};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a bar stands for: one setting of a run, over its rounds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Setting {
    members: String,
    kind: String,
    /// Global transactions in parts per million (the microbenchmark).
    global_ppm: u32,
    reorder: u64,
    delay: Option<String>,
    clients_per_dc: u32,
    dcs: u16,
    partitions: u32,
}

fn setting(r: &BenchReport) -> Setting {
    let o = r.ordered.clone().unwrap_or_default();
    Setting {
        members: o.members,
        kind: r.workload.kind.clone().unwrap_or_default(),
        global_ppm: causeway_workload::fraction_ppm(r.workload.global_fraction.unwrap_or(0.0)),
        reorder: o.reorder_threshold,
        delay: o.delay,
        clients_per_dc: r.clients_per_dc,
        dcs: r.dcs,
        partitions: r.partitions,
    }
}

/// The runs of one setting: its rounds.
struct Runs<'a>(Vec<&'a BenchReport>);

impl Runs<'_> {
    /// The median of `f` over the rounds that have it (the mean of the
    /// middle two for an even count).
    fn median(&self, f: impl Fn(&BenchReport) -> Option<f64>) -> Option<f64> {
        let mut v: Vec<f64> = self.0.iter().filter_map(|r| f(r)).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (n > 0).then(|| (v[(n - 1) / 2] + v[n / 2]) / 2.0)
    }

    /// The round of median throughput (for its CDFs).
    fn typical(&self) -> &BenchReport {
        let mut v = self.0.clone();
        v.sort_by(|a, b| a.throughput_tps.total_cmp(&b.throughput_tps));
        v[(v.len() - 1) / 2]
    }

    fn class(&self, name: &str, f: fn(&ClassReport) -> f64) -> Option<f64> {
        self.median(|r| r.txn_classes.find(name).map(f))
    }
}

fn group<'a>(reports: &[&'a BenchReport]) -> BTreeMap<Setting, Runs<'a>> {
    let mut out: BTreeMap<Setting, Runs> = BTreeMap::new();
    for r in reports {
        out.entry(setting(r)).or_insert_with(|| Runs(Vec::new())).0.push(r);
    }
    out
}

/// The placement's name in titles (`WAN 1`) and in file names (`wan1`).
fn placement(members: &str) -> (String, String) {
    let o = crate::report::OrderedReport { members: members.to_string(), ..Default::default() };
    match o.deployment() {
        Some(d) => (format!("{d} ({members})"), d.to_lowercase().replace(' ', "")),
        None => (format!("members {members}"), format!("m{}", members.replace(',', "").replace('/', "-"))),
    }
}

fn percent(ppm: u32) -> String {
    let pct = f64::from(ppm) / 10_000.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0} %")
    } else {
        format!("{pct} %")
    }
}

/// A bar's height, and the diamond on it (the mean on a p99 bar).
type Bar = (f64, Option<f64>);

/// One series of bars: a bar per category (none where no run measured it).
struct Bars {
    name: String,
    colour: RGBColor,
    values: Vec<Option<Bar>>,
}

struct BarPanel {
    title: String,
    y: String,
    categories: Vec<String>,
    series: Vec<Bars>,
}

/// A figure of panels in a grid, under one title.
enum Panel {
    Bars(BarPanel),
    Lines(LineChart<'static>),
}

fn draw_panels(dir: &Path, stem: &str, title: &str, cols: usize, panels: &[Panel]) -> Result<Vec<PathBuf>> {
    register_font();
    let rows = panels.len().div_ceil(cols);
    // Panels of two thirds of an ordinary figure, under the title.
    let size = (SIZE.0 * 2 / 3 * cols as u32, (SIZE.1 * 3 / 4) * rows as u32 + 40);
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    panels_on(BitMapBackend::new(&png, size).into_drawing_area(), title, cols, panels)?;
    panels_on(SVGBackend::new(&svg, size).into_drawing_area(), title, cols, panels)?;
    Ok(vec![png, svg])
}

fn panels_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, title: &str, cols: usize, panels: &[Panel]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let rows = panels.len().div_ceil(cols);
    for (area, panel) in body.split_evenly((rows, cols)).iter().zip(panels) {
        match panel {
            Panel::Bars(p) => bars_in(area, p)?,
            Panel::Lines(chart) => lines_in(area, chart)?,
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

fn bars_in<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &BarPanel) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    let top = p
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().map(|(b, d)| b.max(d.unwrap_or(0.0))))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.2;
    let n = p.categories.len().max(1);
    let names = p.categories.clone();
    let mut c = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n as f64, 0.0..top)
        .map_err(err)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| category_label(&names, *x))
        .y_desc(p.y.as_str())
        .y_label_formatter(&|v| if top > 20.0 { format!("{v:.0}") } else { format!("{v:.1}") })
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let k = p.series.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, s) in p.series.iter().enumerate() {
        let colour = s.colour;
        let left = |i: usize| i as f64 + 0.1 + width * j as f64;
        c.draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
            v.map(|(bar, _)| Rectangle::new([(left(i) + 0.01, 0.0), (left(i) + width - 0.01, bar)], colour.filled()))
        }))
        .map_err(err)?
        .label(&s.name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour.filled()));
        // The mean as a diamond on its bar.
        c.draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
            let mean = v.and_then(|(_, d)| d)?;
            let at = (left(i) + width / 2.0, mean);
            Some(
                EmptyElement::at(at)
                    + Polygon::new(vec![(0, -6), (6, 0), (0, 6), (-6, 0)], WHITE.filled())
                    + PathElement::new(vec![(0, -6), (6, 0), (0, 6), (-6, 0), (0, -6)], BLACK.stroke_width(1)),
            )
        }))
        .map_err(err)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Draws every Geo-SDUR figure the reports allow.
pub(super) fn draw(reports: &[&BenchReport], dir: &Path) -> Result<Vec<PathBuf>> {
    let groups = group(reports);
    // One set of figures per placement, workload and load.
    let mut sets: BTreeMap<(String, String, u16, u32), BTreeSet<u32>> = BTreeMap::new();
    for s in groups.keys() {
        sets.entry((s.members.clone(), s.kind.clone(), s.dcs, s.partitions)).or_default().insert(s.clients_per_dc);
    }
    let mut files = Vec::new();
    for ((members, kind, dcs, partitions), loads) in &sets {
        for &load in loads {
            let suffix = if loads.len() > 1 { format!("-{load}cpd") } else { String::new() };
            let runs: BTreeMap<&Setting, &Runs> = groups
                .iter()
                .filter(|(s, _)| {
                    (&s.members, &s.kind, s.dcs, s.partitions, s.clients_per_dc)
                        == (members, kind, *dcs, *partitions, load)
                })
                .collect();
            let (name, stem) = placement(members);
            let what = format!("{name}, {dcs} DCs × {partitions} partitions, {load} clients per DC");
            if kind == "sdur-micro" {
                files.extend(fig2(&runs, dir, &format!("sdur-fig2-{stem}{suffix}"), &what)?);
                files.extend(techniques(&runs, dir, Technique::Delay, &stem, &suffix, &what)?);
                files.extend(techniques(&runs, dir, Technique::Reorder, &stem, &suffix, &what)?);
            } else if kind == "social" {
                files.extend(fig6(&runs, dir, &format!("sdur-fig6-social-{stem}{suffix}"), &what)?);
            }
        }
    }
    Ok(files)
}

/// The colour of the `i`-th series (the baseline first).
fn shade(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Fig. 2: locals and globals against the share of globals, no technique.
fn fig2(runs: &BTreeMap<&Setting, &Runs>, dir: &Path, stem: &str, what: &str) -> Result<Vec<PathBuf>> {
    let base: BTreeMap<u32, &Runs> =
        runs.iter().filter(|(s, _)| s.reorder == 0 && s.delay.is_none()).map(|(s, r)| (s.global_ppm, *r)).collect();
    if base.len() < 2 {
        return Ok(Vec::new());
    }
    let categories: Vec<String> = base.keys().map(|&g| percent(g)).collect();
    let per = |class: &str, f: fn(&Runs, &str) -> Option<Bar>| -> Vec<Option<Bar>> {
        base.values().map(|r| f(r, class)).collect()
    };
    let tps = |r: &Runs, c: &str| r.class(c, |x| x.throughput_tps).map(|t| (t, None));
    let lat = |r: &Runs, c: &str| r.class(c, |x| x.latency.p99_ms).map(|p| (p, r.class(c, |x| x.latency.mean_ms)));
    let throughput = BarPanel {
        title: "Throughput".into(),
        y: "committed transactions/s".into(),
        categories: categories.clone(),
        series: vec![
            Bars { name: "locals".into(), colour: shade(0), values: per("local", tps) },
            Bars { name: "globals".into(), colour: shade(1), values: per("global", tps) },
        ],
    };
    let latency = BarPanel {
        title: "Latency: p99 (bars), mean (diamonds)".into(),
        y: "latency (ms)".into(),
        categories,
        series: vec![
            Bars { name: "locals".into(), colour: shade(0), values: per("local", lat) },
            Bars { name: "globals".into(), colour: shade(1), values: per("global", lat) },
        ],
    };
    // The CDFs of locals without globals, and of both at 10 % (or the
    // share nearest it).
    let mut series = Vec::new();
    let cdf = |r: &BenchReport, class: &str| -> Vec<(f64, f64)> {
        r.txn_classes.find(class).map(|c| c.latency.cdf.iter().map(|p| (p[0], p[1])).collect()).unwrap_or_default()
    };
    if let Some(zero) = base.get(&0) {
        series.push(Series {
            name: "locals, 0 %".into(),
            colour: shade(2),
            dashed: false,
            points: cdf(zero.typical(), "local"),
        });
    }
    if let Some((&g, r)) = base.iter().filter(|(&g, _)| g > 0).min_by_key(|(&g, _)| g.abs_diff(100_000)) {
        let r = r.typical();
        for (name, class, colour, dashed) in [("locals", "local", 0, false), ("globals", "global", 1, true)] {
            series.push(Series {
                name: format!("{name} in {}", percent(g)),
                colour: shade(colour),
                dashed,
                points: cdf(r, class),
            });
        }
    }
    series.retain(|s| !s.points.is_empty());
    let cdfs = LineChart {
        title: "Latency CDF".into(),
        x: "latency (ms)",
        y: "fraction of transactions",
        series,
        legend: SeriesLabelPosition::LowerRight,
        log_y: false,
    };
    draw_panels(
        dir,
        stem,
        &format!("Geo-SDUR: local and global transactions against the share of globals — {what}"),
        3,
        &[Panel::Bars(throughput), Panel::Bars(latency), Panel::Lines(cdfs)],
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Technique {
    Delay,
    Reorder,
}

/// Figs. 3–5: locals and globals against the share of globals, one series
/// per delay or reordering threshold (the other off), the baseline first.
fn techniques(
    runs: &BTreeMap<&Setting, &Runs>,
    dir: &Path,
    technique: Technique,
    stem: &str,
    suffix: &str,
    what: &str,
) -> Result<Vec<PathBuf>> {
    // Per value of the technique (None: the baseline), per global share.
    let mut by: BTreeMap<Option<(u64, String)>, BTreeMap<u32, &Runs>> = BTreeMap::new();
    for (s, r) in runs {
        let value = match technique {
            Technique::Delay if s.reorder == 0 => {
                s.delay.as_ref().map(|d| (d.parse::<f64>().map_or(u64::MAX, |v| v as u64), d.clone()))
            }
            Technique::Reorder if s.delay.is_none() => (s.reorder > 0).then(|| (s.reorder, s.reorder.to_string())),
            _ => continue,
        };
        if s.global_ppm > 0 {
            by.entry(value).or_default().insert(s.global_ppm, r);
        }
    }
    if by.keys().filter(|k| k.is_some()).count() == 0 {
        return Ok(Vec::new());
    }
    let shares: BTreeSet<u32> = by.values().flat_map(|m| m.keys().copied()).collect();
    let categories: Vec<String> = shares.iter().map(|&g| percent(g)).collect();
    let label = |v: &Option<(u64, String)>| match (technique, v) {
        (_, None) => "baseline".to_string(),
        (Technique::Delay, Some((_, d))) if d == "rtt" => "D from RTTs".to_string(),
        (Technique::Delay, Some((_, d))) => format!("D = {d} ms"),
        (Technique::Reorder, Some((_, r))) => format!("R = {r}"),
    };
    let panel = |class: &str, latency: bool| {
        let series = by
            .iter()
            .enumerate()
            .map(|(i, (v, at))| Bars {
                name: label(v),
                colour: shade(i),
                values: shares
                    .iter()
                    .map(|g| {
                        let r = at.get(g)?;
                        if latency {
                            r.class(class, |x| x.latency.p99_ms).map(|p| (p, r.class(class, |x| x.latency.mean_ms)))
                        } else {
                            r.class(class, |x| x.throughput_tps).map(|t| (t, None))
                        }
                    })
                    .collect(),
            })
            .collect();
        let who = if class == "local" { "locals" } else { "globals" };
        Panel::Bars(BarPanel {
            title: if latency {
                format!("Latency of {who}: p99 (bars), mean (diamonds)")
            } else {
                format!("Throughput of {who}")
            },
            y: if latency { "latency (ms)".into() } else { "committed transactions/s".into() },
            categories: categories.clone(),
            series,
        })
    };
    let (figure, name) = match (technique, stem) {
        (Technique::Delay, _) => ("sdur-fig3-delay", "delaying"),
        (Technique::Reorder, "wan2") => ("sdur-fig5-reorder", "reordering"),
        (Technique::Reorder, _) => ("sdur-fig4-reorder", "reordering"),
    };
    draw_panels(
        dir,
        &format!("{figure}-{stem}{suffix}"),
        &format!("Geo-SDUR with {name}, against the share of globals — {what}"),
        2,
        &[panel("local", false), panel("local", true), panel("global", false), panel("global", true)],
    )
}

/// Fig. 6: the social network's operations, one series per reordering
/// threshold (the baseline first).
fn fig6(runs: &BTreeMap<&Setting, &Runs>, dir: &Path, stem: &str, what: &str) -> Result<Vec<PathBuf>> {
    let by: BTreeMap<u64, &Runs> =
        runs.iter().filter(|(s, _)| s.delay.is_none()).map(|(s, r)| (s.reorder, *r)).collect();
    if by.is_empty() {
        return Ok(Vec::new());
    }
    let classes = ["timeline", "post", "follow-local", "follow-global"];
    let label = |r: u64| if r == 0 { "baseline".to_string() } else { format!("R = {r}") };
    let panel = |latency: bool| {
        Panel::Bars(BarPanel {
            title: if latency { "Latency: p99 (bars), mean (diamonds)".into() } else { "Throughput".into() },
            y: if latency { "latency (ms)".into() } else { "committed transactions/s".into() },
            categories: classes.iter().map(|c| c.to_string()).collect(),
            series: by
                .iter()
                .enumerate()
                .map(|(i, (&r, runs))| Bars {
                    name: label(r),
                    colour: shade(i),
                    values: classes
                        .iter()
                        .map(|c| {
                            if latency {
                                runs.class(c, |x| x.latency.p99_ms).map(|p| (p, runs.class(c, |x| x.latency.mean_ms)))
                            } else {
                                runs.class(c, |x| x.throughput_tps).map(|t| (t, None))
                            }
                        })
                        .collect(),
                })
                .collect(),
        })
    };
    draw_panels(
        dir,
        stem,
        &format!("Geo-SDUR: the social network with and without reordering — {what}"),
        2,
        &[panel(false), panel(true)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_are_named_as_the_paper_names_them() {
        assert_eq!(placement("2,2,1/0,0,1"), ("WAN 1 (2,2,1/0,0,1)".to_string(), "wan1".to_string()));
        assert_eq!(placement("0,1,2/0,1,2").1, "wan2");
        assert_eq!(placement("0/1").1, "m0-1", "one member each: neither");
        assert_eq!(percent(10_000), "1 %");
        assert_eq!(percent(5_000), "0.5 %");
    }

    /// A report of `members` at `global` globals, with the technique set,
    /// its classes' latencies from `ms`.
    fn report(members: &str, kind: &str, global: f64, reorder: u64, delay: Option<&str>, ms: f64) -> BenchReport {
        use crate::report::{ByClass, ClassReport, Distribution, OrderedReport};
        let class = |tps: f64, ms: f64| ClassReport {
            throughput_tps: tps,
            committed: tps as u64,
            aborted: 0,
            latency: Distribution {
                count: 10,
                mean_ms: ms,
                p50_ms: ms,
                p90_ms: ms * 1.5,
                p99_ms: ms * 2.0,
                max_ms: ms * 3.0,
                cdf: (1..=100).map(|i| [ms * f64::from(i) / 50.0, f64::from(i) / 100.0]).collect(),
            },
            by_dc: Vec::new(),
        };
        let names: &[&str] = if kind == "social" {
            &["timeline", "post", "follow-local", "follow-global"]
        } else {
            &["local", "global"]
        };
        let mut r = crate::report::tests::sample();
        r.workload.kind = Some(kind.into());
        r.workload.global_fraction = (kind == "sdur-micro").then_some(global);
        r.ordered = Some(OrderedReport {
            members: members.into(),
            reorder_threshold: reorder,
            delay: delay.map(str::to_string),
            ..OrderedReport::default()
        });
        r.txn_classes = ByClass(names.iter().map(|n| (n.to_string(), class(100.0, ms))).collect());
        r
    }

    #[test]
    fn every_figure_of_the_paper_is_drawn_from_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut reports = Vec::new();
        for (members, name) in [("2,2,1/0,0,1", "wan1"), ("0,1,2/0,1,2", "wan2")] {
            for g in [0.0, 0.01, 0.1, 0.5] {
                reports.push(report(members, "sdur-micro", g, 0, None, 10.0 + g * 100.0));
                if g > 0.0 {
                    for r in [80, 160, 320] {
                        reports.push(report(members, "sdur-micro", g, r, None, 5.0));
                    }
                    if name == "wan1" {
                        for d in ["20", "40", "60"] {
                            reports.push(report(members, "sdur-micro", g, 0, Some(d), 7.0));
                        }
                    }
                }
            }
            for r in [0, 320] {
                reports.push(report(members, "social", 0.0, r, None, 20.0));
            }
        }
        let files = super::super::draw_all(&reports, dir.path()).unwrap();
        let names: BTreeSet<String> =
            files.iter().map(|f| f.file_stem().unwrap().to_string_lossy().into_owned()).collect();
        let want = [
            "sdur-fig2-wan1",
            "sdur-fig2-wan2",
            "sdur-fig3-delay-wan1",
            "sdur-fig4-reorder-wan1",
            "sdur-fig5-reorder-wan2",
            "sdur-fig6-social-wan1",
            "sdur-fig6-social-wan2",
        ];
        assert_eq!(names, want.iter().map(|s| s.to_string()).collect(), "exactly the paper's figures");
        for stem in want {
            let png = std::fs::read(dir.path().join(format!("{stem}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{stem}.png");
        }
        let fig3 = std::fs::read_to_string(dir.path().join("sdur-fig3-delay-wan1.svg")).unwrap();
        for label in ["baseline", "D = 20 ms", "D = 60 ms", "1 %", "50 %"] {
            assert!(fig3.contains(label), "Fig. 3 names {label:?}");
        }
        let fig5 = std::fs::read_to_string(dir.path().join("sdur-fig5-reorder-wan2.svg")).unwrap();
        assert!(fig5.contains("R = 320") && !fig5.contains("D = 20"), "Fig. 5: reordering alone");
        let fig6 = std::fs::read_to_string(dir.path().join("sdur-fig6-social-wan1.svg")).unwrap();
        assert!(fig6.contains("follow-global") && fig6.contains("R = 320"));
        let fig2 = std::fs::read_to_string(dir.path().join("sdur-fig2-wan1.svg")).unwrap();
        assert!(fig2.contains("locals, 0 %") && fig2.contains("globals in 10 %"), "Fig. 2's CDFs");
    }

    #[test]
    fn a_setting_over_rounds_is_its_median() {
        let mk = |tps: f64| BenchReport { throughput_tps: tps, ..crate::report::tests::sample() };
        let (a, b, c) = (mk(3.0), mk(1.0), mk(2.0));
        let runs = Runs(vec![&a, &b, &c]);
        assert_eq!(runs.median(|r| Some(r.throughput_tps)), Some(2.0));
        assert_eq!(runs.typical().throughput_tps, 2.0);
        let two = Runs(vec![&a, &b]);
        assert_eq!(two.median(|r| Some(r.throughput_tps)), Some(2.0), "the mean of the middle two");
        assert_eq!(Runs(vec![&a]).median(|_| None), None);
    }
}
