//! The `maintenance` workload (DESIGN §5, issue #6): starting from an empty
//! index, equal batches of documents are added and flushed one after the
//! other under each strategy, and a fixed set of queries runs after every
//! flush. Reported per strategy: the cumulative maintenance time (adding to
//! the buffer, flushing, merging), the bytes the flushes wrote and merged
//! (the engine's own accounting) and what the process read from and wrote
//! to the device (`/proc/self/io` `read_bytes`/`write_bytes`, so page-cache
//! hits are not counted as reads), and the mean query time after each flush.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

/// One flush of one strategy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlushPoint {
    /// Flush number (1-based).
    pub flush: usize,
    /// Seconds adding the batch (log and buffer).
    pub add_secs: f64,
    /// Seconds flushing (segment written, merges).
    pub flush_secs: f64,
    /// Cumulative maintenance seconds (adds and flushes) so far.
    pub cumulative_secs: f64,
    /// Of the flush, seconds writing the flushed documents as a segment
    /// (what every strategy pays; the rest is the strategy's own).
    #[serde(default)]
    pub segment_secs: f64,
    /// Segments after the flush.
    pub segments: usize,
    /// Bytes written by the flush (engine accounting).
    pub bytes_written: u64,
    /// Bytes of segments merged by the flush (engine accounting).
    pub bytes_merged: u64,
    /// Device bytes read during the add and flush (`/proc/self/io`).
    pub device_read: u64,
    /// Device bytes written during the add and flush (`/proc/self/io`).
    pub device_written: u64,
    /// Mean query time over the query set after the flush (µs).
    pub mean_query_us: f64,
}

/// One strategy's run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StrategyRun {
    /// The strategy.
    pub strategy: String,
    /// Every flush.
    pub flushes: Vec<FlushPoint>,
}

impl StrategyRun {
    /// Total maintenance seconds.
    pub fn total_secs(&self) -> f64 {
        self.flushes.last().map_or(0.0, |f| f.cumulative_secs)
    }

    /// Seconds of the strategy's own work: merges, or appends to the chain
    /// (total maintenance minus writing each flush's segment).
    pub fn own_secs(&self) -> f64 {
        // The flush may run inside the batch's last add (the buffer's
        // budget is the batch): its segment time is in `add_secs` then.
        self.flushes
            .iter()
            .map(|f| f.add_secs + f.flush_secs - f.segment_secs)
            .sum()
    }

    /// Mean of the mean query times over all flushes (µs).
    pub fn mean_query_us(&self) -> f64 {
        self.flushes.iter().map(|f| f.mean_query_us).sum::<f64>() / self.flushes.len().max(1) as f64
    }
}

/// `(read_bytes, write_bytes)` of this process from `/proc/self/io`.
fn proc_io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("read_bytes:"), field("write_bytes:"))
}

/// Mean time of `queries` (each in top-10 and count modes) on `s`, µs, best
/// of `repeats` passes.
fn query_time(s: &Searcher, queries: &[tierdex::query::ast::Query], repeats: usize) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        for q in queries {
            std::hint::black_box(s.search_parsed(q, Mode::TopK, 10)?);
            std::hint::black_box(s.search_parsed(q, Mode::Count, 0)?);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / (2 * queries.len().max(1)) as f64);
    }
    Ok(best)
}

/// Runs `strategy` over `batches` in a fresh index under `dir`.
pub fn run_strategy(
    dir: &Path,
    strategy: Strategy,
    batches: &[Vec<Document>],
    queries: &[String],
    repeats: usize,
    progress: &dyn Fn(usize),
) -> Result<StrategyRun> {
    let path = dir.join(strategy.name());
    let _ = std::fs::remove_dir_all(&path);
    let batch_docs = batches.iter().map(Vec::len).max().unwrap_or(1);
    let options = WriterOptions {
        // Flushes happen exactly once per batch, by the bench.
        buffer_docs: batch_docs + 1,
        buffer_bytes: usize::MAX,
        ..WriterOptions::default()
    };
    let w = IndexWriter::create(
        &path,
        Default::default(),
        Default::default(),
        strategy,
        WriterOptions {
            buffer_docs: batch_docs,
            ..options
        },
    )?;
    drop(w);
    // The merge unit is the batch; the buffer never fills on its own.
    let w = IndexWriter::open(
        &path,
        WriterOptions {
            buffer_docs: batch_docs,
            ..options
        },
    )?;
    let parsed: Vec<_> = queries
        .iter()
        .map(|q| tierdex::query::parse(q).map_err(tierdex::Error::from))
        .collect::<tierdex::Result<_>>()?;
    let mut flushes = Vec::with_capacity(batches.len());
    let mut cumulative = 0.0;
    for (i, batch) in batches.iter().enumerate() {
        let io0 = proc_io();
        let m0 = w.stats().maintenance;
        let t = Instant::now();
        for chunk in batch.chunks(1000) {
            w.add(chunk.to_vec())?;
        }
        let add_secs = t.elapsed().as_secs_f64();
        let t = Instant::now();
        w.flush()?;
        let flush_secs = t.elapsed().as_secs_f64();
        let io1 = proc_io();
        // The writer's own totals: a flush may also happen inside the last
        // add, when the buffer reaches its budget there.
        let m1 = w.stats().maintenance;
        cumulative += add_secs + flush_secs;
        let s = w.searcher();
        flushes.push(FlushPoint {
            flush: i + 1,
            add_secs,
            flush_secs,
            cumulative_secs: cumulative,
            segment_secs: m1.segment_secs - m0.segment_secs,
            segments: m1.segments,
            bytes_written: m1.bytes_written - m0.bytes_written,
            bytes_merged: m1.bytes_merged - m0.bytes_merged,
            device_read: io1.0.saturating_sub(io0.0),
            device_written: io1.1.saturating_sub(io0.1),
            mean_query_us: query_time(&s, &parsed, repeats)?,
        });
        progress(i + 1);
    }
    drop(w);
    let _ = std::fs::remove_dir_all(&path);
    Ok(StrategyRun {
        strategy: strategy.name().into(),
        flushes,
    })
}

/// The report table.
pub fn markdown(runs: &[StrategyRun], what: &str) -> String {
    let mut s = format!(
        "# Maintenance: {what}\n\n| strategy | total maintenance s | vs geometric | vs immediate-merge | strategy's own s (merges, chain appends) | own vs geometric | written GiB | merged GiB | device read MiB | device written GiB | mean query µs (all flushes) | after last flush µs | vs immediate-merge | segments at end |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    let find = |name: &str| runs.iter().find(|r| r.strategy == name);
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    for r in runs {
        let sum = |f: fn(&FlushPoint) -> u64| r.flushes.iter().map(f).sum::<u64>();
        let last = r.flushes.last();
        let ratio = |other: Option<&StrategyRun>| match other {
            Some(o) if o.total_secs() > 0.0 => format!("{:.2}x", r.total_secs() / o.total_secs()),
            _ => "–".into(),
        };
        let q_ratio = match find("immediate-merge") {
            Some(o) if o.mean_query_us() > 0.0 => format!("{:.2}x", r.mean_query_us() / o.mean_query_us()),
            _ => "–".into(),
        };
        let own_ratio = match find("geometric") {
            Some(o) if o.own_secs() > 0.0 => format!("{:.2}x", r.own_secs() / o.own_secs()),
            _ => "–".into(),
        };
        s += &format!(
            "| {} | {:.1} | {} | {} | {:.1} | {} | {:.2} | {:.2} | {:.1} | {:.2} | {:.0} | {:.0} | {} | {} |\n",
            r.strategy,
            r.total_secs(),
            ratio(find("geometric")),
            ratio(find("immediate-merge")),
            r.own_secs(),
            own_ratio,
            gib(sum(|f| f.bytes_written)),
            gib(sum(|f| f.bytes_merged)),
            sum(|f| f.device_read) as f64 / (1u64 << 20) as f64,
            gib(sum(|f| f.device_written)),
            r.mean_query_us(),
            last.map_or(0.0, |f| f.mean_query_us),
            q_ratio,
            last.map_or(0, |f| f.segments),
        );
    }
    s
}

/// Draws `y(point)` per flush for every strategy.
pub fn chart(path: &Path, runs: &[StrategyRun], title: &str, y_desc: &str, y: fn(&FlushPoint) -> f64) -> Result<()> {
    let draw = |e| anyhow::anyhow!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (900, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let x_hi = runs.iter().map(|r| r.flushes.len()).max().unwrap_or(1) as f64;
    let y_hi = runs
        .iter()
        .flat_map(|r| r.flushes.iter().map(y))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let (plot, legend) = root.split_horizontally(700);
    let mut c = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)
        .map_err(draw)?;
    c.configure_mesh()
        .x_desc("flushes")
        .y_desc(y_desc)
        .draw()
        .map_err(draw)?;
    for (j, r) in runs.iter().enumerate() {
        let p: Vec<(f64, f64)> = r.flushes.iter().map(|f| (f.flush as f64, y(f))).collect();
        crate::report::series_with_legend(&mut c, &legend, j, &r.strategy, &p)?;
    }
    root.present().map_err(draw)?;
    Ok(())
}

/// Writes `maintenance.json`, `maintenance.md` and the two charts to `out`.
pub fn write(out: &Path, runs: &[StrategyRun], what: &str) -> Result<String> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("maintenance.json"), serde_json::to_string_pretty(runs)?)?;
    let md = markdown(runs, what);
    std::fs::write(out.join("maintenance.md"), &md)?;
    chart(
        &out.join("maintenance-time.svg"),
        runs,
        "cumulative maintenance time",
        "seconds",
        |f| f.cumulative_secs,
    )?;
    chart(
        &out.join("maintenance-query.svg"),
        runs,
        "mean query time after each flush",
        "µs per query",
        |f| f.mean_query_us,
    )?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_of_every_strategy_reports_and_charts() {
        let docs: Vec<Document> = (0..120)
            .map(|i| {
                Document::title_body(
                    format!("d{i}"),
                    format!("title {}", i % 7),
                    format!("alpha beta w{} w{} gamma", i % 13, i % 5),
                )
            })
            .collect();
        let batches: Vec<Vec<Document>> = docs.chunks(20).map(<[Document]>::to_vec).collect();
        let queries = vec!["alpha".to_string(), "w3 w4".into(), "\"beta w1\"".into()];
        let dir = tempfile::tempdir().unwrap();
        let runs: Vec<StrategyRun> = Strategy::ALL
            .iter()
            .map(|&s| run_strategy(dir.path(), s, &batches, &queries, 1, &|_| {}).unwrap())
            .collect();
        for r in &runs {
            assert_eq!(r.flushes.len(), 6);
            assert!(r
                .flushes
                .windows(2)
                .all(|w| w[1].cumulative_secs >= w[0].cumulative_secs));
        }
        let seg = |name: &str| runs.iter().find(|r| r.strategy == name).unwrap().flushes[5].segments;
        assert_eq!(seg("immediate-merge"), 1);
        assert_eq!(seg("no-merge"), 6);
        assert_eq!(seg("logarithmic"), 2);
        for r in &runs {
            assert!(r.flushes.iter().all(|f| f.bytes_written > 0), "{}", r.strategy);
        }
        let merged = |name: &str| {
            runs.iter()
                .find(|r| r.strategy == name)
                .unwrap()
                .flushes
                .iter()
                .map(|f| f.bytes_merged)
                .sum::<u64>()
        };
        assert_eq!(merged("no-merge"), 0);
        assert!(merged("immediate-merge") > merged("logarithmic"));
        let md = write(dir.path(), &runs, "test").unwrap();
        assert!(md.contains("| geometric |"));
        assert!(dir.path().join("maintenance-time.svg").exists());
    }
}
