//! The outputs of a comparison: the results JSON, a markdown summary a
//! person can read, and SVG charts of latency per category per engine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::engines::IndexReport;
use crate::quality::Metrics;
use crate::stats::{Agreement, Row, TypedAgreement};

/// The machine a run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Memory (GiB).
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads `/proc` for this machine's description.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let mem_kb: f64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: mem_kb / 1024.0 / 1024.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }
}

/// One engine's side of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineResult {
    /// Engine name.
    pub name: String,
    /// Its version line.
    pub version: String,
    /// Indexing cost.
    pub index: IndexReport,
    /// Peak RSS of the query process (KiB).
    pub query_peak_rss_kb: u64,
    /// Wall seconds of the query stream (all passes).
    pub query_wall_secs: f64,
    /// Queries the engine failed on.
    pub errors: usize,
}

/// Quality of the engines on one collection.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QualityResult {
    /// Collection name.
    pub collection: String,
    /// Documents in it.
    pub docs: u64,
    /// Metrics per engine.
    pub engines: BTreeMap<String, Metrics>,
}

/// Everything a comparison measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Results {
    /// Machine description.
    pub machine: Machine,
    /// Corpus file.
    pub corpus: String,
    /// Documents indexed.
    pub docs: u64,
    /// Measured passes per query.
    pub passes: usize,
    /// Warm-up passes before measuring.
    pub warmup: usize,
    /// Query threads per engine.
    pub threads: usize,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// Seconds the whole run took.
    pub total_secs: f64,
    /// Per engine.
    pub engines: Vec<EngineResult>,
    /// Latency rows.
    pub rows: Vec<Row>,
    /// Count agreement of tierdex with each peer on the command file.
    pub agreement: BTreeMap<String, Agreement>,
    /// Mean top-10 overlap of tierdex with each peer on the command file (and queries compared).
    pub overlap: BTreeMap<String, (f64, usize)>,
    /// Ranking quality.
    pub quality: Vec<QualityResult>,
    /// The typed workload, when the corpus has typed fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typed: Option<TypedResults>,
}

/// What the typed workload measured besides latency.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TypedResults {
    /// How tierdex indexed the corpus.
    pub tierdex_index: String,
    /// Documents of the sample the filters were chosen on.
    pub sample_docs: usize,
    /// Per category: queries with a filter and their mean selectivity on the sample.
    pub selectivity: BTreeMap<String, (usize, f64)>,
    /// Per engine: its answers compared with Lucene's.
    pub agreement: BTreeMap<String, TypedAgreement>,
    /// Engines that failed the structured-query probe (their typed answers
    /// count as failed).
    #[serde(default)]
    pub unsupported: Vec<String>,
}

fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0} ms", us / 1000.0)
    } else if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

/// `0.5` -> "2.0x faster"; `2.0` -> "2.0x slower".
pub fn verdict(ratio: f64) -> String {
    if !ratio.is_finite() || ratio <= 0.0 {
        "n/a".into()
    } else if ratio < 0.95 {
        format!("**{:.2}x faster**", 1.0 / ratio)
    } else if ratio > 1.05 {
        format!("{ratio:.2}x slower")
    } else {
        "on par".into()
    }
}

impl Results {
    /// Names of the engines, tierdex first.
    fn names(&self) -> Vec<String> {
        self.engines.iter().map(|e| e.name.clone()).collect()
    }

    /// The markdown summary.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(s, "## Peer comparison: {}\n", self.corpus);
        let _ = writeln!(
            s,
            "{} documents; {} measured passes after {} warm-up passes; {} query thread(s){}; machine: {} ({} CPUs, {:.0} GiB, Linux {}); whole run {:.0} s.\n",
            self.docs,
            self.passes,
            self.warmup,
            self.threads,
            if self.quick { "; **quick run** (sampled queries)" } else { "" },
            m.cpu,
            m.cpus,
            m.memory_gib,
            m.kernel,
            self.total_secs
        );
        let _ = writeln!(s, "| engine | version | index time | docs/s | index size | peak RSS indexing | peak RSS querying | failed queries |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
        for e in &self.engines {
            let i = &e.index;
            // A reused index (`--reuse-indexes`) has no indexing figures.
            let (time, speed, rss) = if i.wall_secs > 0.0 {
                (
                    format!("{:.1} s ({:.1} s merging)", i.wall_secs, i.merge_secs),
                    format!("{:.0}", i.docs as f64 / i.wall_secs),
                    mib(i.peak_rss_kb * 1024),
                )
            } else {
                ("reused".to_string(), "-".to_string(), "-".to_string())
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                e.name,
                e.version,
                time,
                speed,
                mib(i.index_bytes),
                rss,
                mib(e.query_peak_rss_kb * 1024),
                e.errors
            );
        }
        let names = self.names();
        let peers: Vec<&String> = names.iter().filter(|n| *n != "tierdex").collect();
        let mut sources: Vec<&str> = self.rows.iter().map(|r| r.source.as_str()).collect();
        sources.dedup();
        for source in sources {
            let _ = writeln!(
                s,
                "\n### Latency: {source} queries\n\nMean of per-query medians (p50 / p99 in brackets); ratio = tierdex's mean time over the peer's.\n"
            );
            let mut head = "| mode | category | n |".to_string();
            let mut rule = "|---|---|---:|".to_string();
            for n in &names {
                head += &format!(" {n} |");
                rule += "---:|";
            }
            for p in &peers {
                head += &format!(" vs {p} |");
                rule += "---|";
            }
            let _ = writeln!(s, "{head}\n{rule}");
            for r in self.rows.iter().filter(|r| r.source == source) {
                let mut line = format!("| {} | {} | {} |", r.mode, r.category, r.n);
                for n in &names {
                    match r.engines.get(n) {
                        Some(l) => line += &format!(" {} ({} / {}) |", ms(l.mean_us), ms(l.p50_us), ms(l.p99_us)),
                        None if r.failed.contains(n) => line += " failed |",
                        None => line += " - |",
                    }
                }
                for p in &peers {
                    line += &format!(" {} |", r.ratio.get(*p).map_or("-".into(), |&x| verdict(x)));
                }
                let _ = writeln!(s, "{line}");
            }
        }
        // Sections of comparisons that compared nothing (e.g. `--typed only`) are left out.
        for (peer, a) in self.agreement.iter().filter(|(_, a)| !a.by_category.is_empty()) {
            let _ = writeln!(
                s,
                "\n### Count agreement with {peer} (command file)\n\n{:.2}% of distinct queries with a count agree.\n",
                a.rate() * 100.0
            );
            let _ = writeln!(s, "| category | compared | equal |\n|---|---:|---:|");
            for (c, (n, eq)) in &a.by_category {
                let _ = writeln!(
                    s,
                    "| {c} | {n} | {eq} ({:.1}%) |",
                    100.0 * *eq as f64 / (*n).max(1) as f64
                );
            }
            if !a.examples.is_empty() {
                let _ = writeln!(s, "\nDisagreements (query: tierdex count vs {peer}):\n");
                for (q, x, y) in a.examples.iter().take(15) {
                    let _ = writeln!(s, "- `{q}`: {x} vs {y}");
                }
            }
        }
        if let Some(t) = &self.typed {
            typed_markdown(&mut s, t);
        }
        if self.overlap.values().any(|(_, n)| *n > 0) {
            let _ = writeln!(s, "\n### Top-10 overlap (command file)\n");
            for (peer, (o, n)) in &self.overlap {
                let _ = writeln!(
                    s,
                    "- with {peer}: {:.1}% of its top-10 ids also in tierdex's ({n} queries)",
                    o * 100.0
                );
            }
        }
        if !self.quality.is_empty() {
            let _ = writeln!(s, "\n### Ranking quality (BM25, queries as plain OR terms)\n");
            let mut head = "| collection | docs | queries |".to_string();
            let mut rule = "|---|---:|---:|".to_string();
            for n in &names {
                head += &format!(" {n} nDCG@10 / MAP |");
                rule += "---:|";
            }
            let _ = writeln!(s, "{head}\n{rule}");
            for q in &self.quality {
                let queries = q.engines.values().map(|m| m.queries).max().unwrap_or(0);
                let mut line = format!("| {} | {} | {} |", q.collection, q.docs, queries);
                for n in &names {
                    match q.engines.get(n) {
                        Some(m) => line += &format!(" {:.4} / {:.4} |", m.ndcg10, m.map),
                        None => line += " - |",
                    }
                }
                let _ = writeln!(s, "{line}");
            }
        }
        s
    }

    /// Writes `results.json`, `results.md` and one chart per (source, mode)
    /// into `dir`; returns the chart file names.
    pub fn write(&self, dir: &Path) -> Result<Vec<String>> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(self)?)?;
        let mut charts = Vec::new();
        let mut keys: Vec<(String, String)> = self.rows.iter().map(|r| (r.source.clone(), r.mode.clone())).collect();
        keys.sort();
        keys.dedup();
        for (source, mode) in keys {
            let rows: Vec<&Row> = self
                .rows
                .iter()
                .filter(|r| r.source == source && r.mode == mode)
                .collect();
            if rows.len() < 2 && source != "commands" {
                continue;
            }
            let name = format!("latency-{source}-{}.svg", mode.to_lowercase());
            chart(
                &dir.join(&name),
                &format!("{source} queries, {mode}: mean latency"),
                &rows,
                &self.names(),
            )?;
            charts.push(name);
        }
        let mut md = self.markdown();
        if !charts.is_empty() {
            md += "\n### Charts\n\n";
            for c in &charts {
                md += &format!("![{c}]({c})\n");
            }
        }
        std::fs::write(dir.join("results.md"), md)?;
        Ok(charts)
    }
}

/// The typed workload's section: filter selectivities and every engine's
/// agreement with Lucene.
fn typed_markdown(s: &mut String, t: &TypedResults) {
    let _ = writeln!(
        s,
        "\n### Typed fields\n\ntierdex: {}. Filters chosen on a sample of {} documents; \
         \"failed\" in a latency row: the engine answered none of its queries (the row compares the others).\n",
        if t.tierdex_index.is_empty() {
            "-"
        } else {
            &t.tierdex_index
        },
        t.sample_docs
    );
    if !t.unsupported.is_empty() {
        let _ = writeln!(
            s,
            "Not answering structured queries (a probe of known counts failed; their typed queries count as failed): {}.\n",
            t.unsupported.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "| category | queries with a filter | mean selectivity (sample) |\n|---|---:|---:|"
    );
    let order = crate::workload::typed::categories();
    let mut cats: Vec<(&String, &(usize, f64))> = t.selectivity.iter().collect();
    cats.sort_by_key(|(c, _)| order.iter().position(|o| o == *c).unwrap_or(usize::MAX));
    for (c, (n, sel)) in cats {
        let _ = writeln!(s, "| {c} | {n} | {:.3}% |", sel * 100.0);
    }
    for (engine, a) in &t.agreement {
        let (n, eq) = a
            .counts
            .by_category
            .values()
            .fold((0, 0), |(n, e), (x, y)| (n + x, e + y));
        let (sn, seq) = a.sorts.values().fold((0, 0), |(n, e), (x, y)| (n + x, e + y));
        if n == 0 && sn == 0 && a.overlap.1 == 0 {
            let _ = writeln!(
                s,
                "\n**{engine} vs lucene** (typed queries): nothing compared; {} failed here, {} failed in Lucene.",
                a.failed, a.reference_failed
            );
            continue;
        }
        let _ = writeln!(
            s,
            "\n**{engine} vs lucene** (typed queries): counts equal on {eq} of {n} answers ({:.2}%); \
             sorted results with the same sort values on {seq} of {sn} ({:.2}%); \
             top-10 overlap of unsorted queries {:.1}% ({} queries); {} failed here, {} failed in Lucene.\n",
            a.counts.rate() * 100.0,
            a.sort_rate() * 100.0,
            a.overlap.0 * 100.0,
            a.overlap.1,
            a.failed,
            a.reference_failed
        );
        if n > 0 {
            let _ = writeln!(
                s,
                "| category | counts compared | equal | sorted compared | equal |\n|---|---:|---:|---:|---:|"
            );
            let mut cats: Vec<&String> = a.counts.by_category.keys().chain(a.sorts.keys()).collect();
            cats.sort_by_key(|c| (order.iter().position(|o| o == *c).unwrap_or(usize::MAX), c.to_string()));
            cats.dedup();
            for c in cats {
                let (cn, ce) = a.counts.by_category.get(c).copied().unwrap_or_default();
                let (sn, se) = a.sorts.get(c).copied().unwrap_or_default();
                let _ = writeln!(s, "| {c} | {cn} | {ce} | {sn} | {se} |");
            }
        }
        for (q, x, y) in a.counts.examples.iter().take(10) {
            let _ = writeln!(s, "- count `{q}`: {x} vs {y}");
        }
        for e in a.sort_examples.iter().take(10) {
            let _ = writeln!(s, "- sort {e}");
        }
    }
    aggs_markdown(s, t, &order);
}

/// The aggregation agreement table: per category, per engine, the answers
/// whose aggregation results equal Lucene's (`stats::same_aggregations`).
fn aggs_markdown(s: &mut String, t: &TypedResults, order: &[String]) {
    let mut cats: Vec<&String> = t.agreement.values().flat_map(|a| a.aggs.keys()).collect();
    if cats.is_empty() {
        return;
    }
    cats.sort_by_key(|c| (order.iter().position(|o| o == *c).unwrap_or(usize::MAX), c.to_string()));
    cats.dedup();
    let engines: Vec<&String> = t.agreement.keys().collect();
    let _ = writeln!(
        s,
        "\n**Aggregations** (results equal to Lucene's: terms buckets by key and count, ties at the \
         smallest count shown free; histogram buckets; stats within 1e-9 relative)\n"
    );
    let head: Vec<String> = engines.iter().map(|e| format!("{e} equal / compared")).collect();
    let _ = writeln!(
        s,
        "| category | {} |\n|---|{}",
        head.join(" | "),
        "---:|".repeat(engines.len())
    );
    for c in cats {
        let cells: Vec<String> = engines
            .iter()
            .map(|e| match t.agreement[*e].aggs.get(c) {
                Some((n, eq)) => format!("{eq} / {n}"),
                None => "-".into(),
            })
            .collect();
        let _ = writeln!(s, "| {c} | {} |", cells.join(" | "));
    }
    for (e, a) in &t.agreement {
        for x in a.agg_examples.iter().take(5) {
            let _ = writeln!(s, "- {e} aggregation {x}");
        }
    }
}

const COLORS: [RGBColor; 4] = [
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0xd9, 0x5f, 0x02),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
];

/// A grouped bar chart (log scale) of mean latency per category per engine.
fn chart(path: &Path, title: &str, rows: &[&Row], engines: &[String]) -> Result<()> {
    let width = (160 + rows.len() * 28 * engines.len().max(1)).max(640) as u32;
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    let draw = |e| anyhow::anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(draw)?;
    let values: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.engines.values().map(|l| l.mean_us))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min).max(0.1) / 2.0;
    let hi = values.iter().copied().fold(1.0, f64::max) * 2.0;
    let n = rows.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, (lo..hi).log_scale())
        .map_err(draw)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_desc("microseconds (log)")
        .draw()
        .map_err(draw)?;
    let w = 0.8 / engines.len().max(1) as f64;
    for (j, e) in engines.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
                let v = r.engines.get(e)?.mean_us.max(lo);
                let x0 = i as f64 + 0.1 + j as f64 * w;
                Some(Rectangle::new([(x0, lo), (x0 + w * 0.9, v)], color.filled()))
            }))
            .map_err(draw)?
            .label(e.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            Text::new(
                r.category.clone(),
                (i as f64 + 0.5, lo),
                ("sans-serif", 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Top,
                    )),
            )
        }))
        .map_err(draw)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

/// A chart over two `f64` axes, as the line charts here draw them.
pub(crate) type LineChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Colours of the series of the bench's small line charts, in order.
const SERIES_COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Draws series `j` (a line with a dot at each point, in the `j`-th colour)
/// and its entry in the `legend` column.
pub(crate) fn series_with_legend(
    chart: &mut LineChart<'_, '_>,
    legend: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    j: usize,
    name: &str,
    points: &[(f64, f64)],
) -> Result<()> {
    let color = SERIES_COLORS[j % SERIES_COLORS.len()];
    let draw = |e| anyhow::anyhow!("drawing series {name}: {e}");
    chart
        .draw_series(LineSeries::new(points.to_vec(), color.stroke_width(2)))
        .map_err(draw)?;
    chart
        .draw_series(points.iter().map(|&pt| Circle::new(pt, 4, color.filled())))
        .map_err(draw)?;
    let y = 40 + 22 * j as i32;
    legend
        .draw(&PathElement::new(vec![(8, y), (40, y)], color.stroke_width(2)))
        .map_err(draw)?;
    legend
        .draw(&Text::new(name.to_string(), (48, y - 7), ("sans-serif", 14)))
        .map_err(draw)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Latency;

    #[test]
    fn writes_all_outputs() {
        let mut engines = BTreeMap::new();
        engines.insert(
            "tierdex".to_string(),
            Latency {
                n: 3,
                mean_us: 50.0,
                p50_us: 40.0,
                p99_us: 90.0,
                mean_min_us: 30.0,
            },
        );
        engines.insert(
            "lucene".to_string(),
            Latency {
                n: 3,
                mean_us: 100.0,
                p50_us: 80.0,
                p99_us: 300.0,
                mean_min_us: 70.0,
            },
        );
        let row = |c: &str| Row {
            source: "commands".into(),
            mode: "TOP_10".into(),
            category: c.into(),
            n: 3,
            excluded: 0,
            failed: Vec::new(),
            engines: engines.clone(),
            ratio: [("lucene".to_string(), 0.5)].into_iter().collect(),
        };
        let r = Results {
            engines: vec![
                EngineResult {
                    name: "tierdex".into(),
                    ..Default::default()
                },
                EngineResult {
                    name: "lucene".into(),
                    ..Default::default()
                },
            ],
            rows: vec![row("term"), row("and")],
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let charts = r.write(dir.path()).unwrap();
        assert_eq!(charts, vec!["latency-commands-top_10.svg"]);
        let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
        assert!(md.contains("**2.00x faster**"), "{md}");
        let svg = std::fs::read_to_string(dir.path().join(&charts[0])).unwrap();
        assert!(svg.contains("<svg") && svg.contains("tierdex"));
        let back: Results =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
        assert_eq!(back.rows.len(), 2);
    }

    #[test]
    fn typed_section_and_failed_engines() {
        let lat = Latency {
            n: 2,
            mean_us: 80.0,
            p50_us: 70.0,
            p99_us: 90.0,
            mean_min_us: 60.0,
        };
        let row = Row {
            source: "typed".into(),
            mode: "TOP_10".into(),
            category: "filter-1%-and".into(),
            n: 2,
            excluded: 0,
            failed: vec!["tierdex".into()],
            engines: [("lucene".to_string(), lat), ("tantivy".to_string(), lat)]
                .into_iter()
                .collect(),
            ratio: BTreeMap::new(),
        };
        let mut agreement = TypedAgreement::default();
        agreement.counts.by_category.insert("filter-1%-and".into(), (4, 4));
        agreement.sorts.insert("sort-price-asc".into(), (2, 1));
        agreement.sort_examples.push("`TOP_10 {..}`: hit 3".into());
        agreement.failed = 6;
        agreement.aggs.insert("agg-month-text".into(), (5, 4));
        let typed = TypedResults {
            tierdex_index: "title and body only".into(),
            sample_docs: 1000,
            selectivity: [("filter-1%-and".to_string(), (2, 0.0101))].into_iter().collect(),
            agreement: [("tantivy".to_string(), agreement)].into_iter().collect(),
            unsupported: vec!["tierdex".into()],
        };
        let r = Results {
            engines: ["tierdex", "lucene", "tantivy"]
                .iter()
                .map(|n| EngineResult {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            rows: vec![row],
            typed: Some(typed),
            // `--typed only`: the command file's comparisons compared nothing.
            agreement: [("lucene".to_string(), Agreement::default())].into_iter().collect(),
            overlap: [("lucene".to_string(), (1.0, 0))].into_iter().collect(),
            ..Default::default()
        };
        let md = r.markdown();
        assert!(md.contains("### Latency: typed queries"), "{md}");
        assert!(md.contains("| TOP_10 | filter-1%-and | 2 | failed | 80 µs"), "{md}");
        assert!(md.contains("tierdex: title and body only"), "{md}");
        assert!(md.contains("their typed queries count as failed): tierdex."), "{md}");
        assert!(md.contains("| filter-1%-and | 2 | 1.010% |"), "{md}");
        assert!(md.contains("counts equal on 4 of 4 answers (100.00%)"), "{md}");
        assert!(md.contains("same sort values on 1 of 2 (50.00%)"), "{md}");
        assert!(md.contains("| category | tantivy equal / compared |"), "{md}");
        assert!(md.contains("| agg-month-text | 4 / 5 |"), "{md}");
        assert!(md.contains("6 failed here"), "{md}");
        assert!(md.contains("| sort-price-asc | 0 | 0 | 2 | 1 |"), "{md}");
        assert!(!md.contains("Count agreement with") && !md.contains("Top-10 overlap (command file)"));
        let mut r = r;
        let t = r.typed.as_mut().unwrap();
        t.agreement.insert(
            "tierdex".into(),
            TypedAgreement {
                failed: 9,
                ..Default::default()
            },
        );
        assert!(r
            .markdown()
            .contains("**tierdex vs lucene** (typed queries): nothing compared; 9 failed here"));
        let back: Results = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.typed.unwrap().agreement["tantivy"].failed, 6);
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(1.0), "on par");
        assert_eq!(verdict(2.0), "2.00x slower");
        assert_eq!(verdict(0.25), "**4.00x faster**");
    }
}
