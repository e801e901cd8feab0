//! `tierdex-bench index-scale`: indexing speed against threads (issue
//! #24). Each engine indexes the same plain copy of a corpus with 1, 2, 4,
//! ... threads (as many as the machine has), one after the other, with the
//! same memory budget; the report gives docs/s, MB/s of text, peak RSS,
//! the merge's share of the time, the speed-up over one thread, and
//! tierdex's docs/s over each peer's at every thread count.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tierdex_bench::engines::{EngineSpec, IndexReport};

use super::*;

/// Options of `tierdex-bench index-scale`.
#[derive(clap::Args)]
pub struct Args {
    /// The corpus (JSON lines, .zst/.gz ok).
    #[arg(long, default_value = "../shared/corpora/enwiki-wikiextractor.jsonl.zst")]
    corpus: PathBuf,
    /// Index only the first N documents.
    #[arg(long)]
    docs: Option<u64>,
    /// Engines (tierdex variants may carry index options, e.g.
    /// `tierdex@nobloom` for no phrase filters; `lucene-bp` is Lucene with
    /// its documents reordered by recursive graph bisection; see `compare --help`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tierdex,tierdex@nobloom,tantivy,lucene"
    )]
    engines: Vec<String>,
    /// Thread counts (default: 1, 2, 4, ... up to the machine's cores).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Memory budget of every engine (MiB): tierdex's `--memory-mb`, the
    /// peers' own equivalents (Lucene's RAM buffer and heap, tantivy's
    /// writer arena).
    #[arg(long, default_value_t = 1024)]
    memory_mb: usize,
    /// Runs of each (engine, threads); the fastest counts.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Work directory (the corpus copy and the indexes).
    #[arg(long, default_value = "target/bench-index-scale")]
    work: PathBuf,
    /// Results directory (index-scale.json, index-scale.md).
    #[arg(long, default_value = "bench/results/index-scale")]
    out: PathBuf,
}

/// One (engine, threads) measurement.
#[derive(Debug, Clone, Serialize)]
struct Row {
    engine: String,
    threads: usize,
    report: IndexReport,
    docs_per_sec: f64,
    mb_per_sec: f64,
    merge_share: f64,
    /// Every run's wall-clock seconds, in order (the best is `report`).
    run_secs: Vec<f64>,
}

/// Runs `tierdex-bench index-scale`.
pub fn run(a: Args) -> Result<()> {
    let repo = repo_root();
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<usize> = if a.threads.is_empty() {
        std::iter::successors(Some(1usize), |t| Some(t * 2))
            .take_while(|&t| t <= cores)
            .collect()
    } else {
        a.threads.clone()
    };
    if threads.contains(&0) {
        bail!("thread counts must be at least 1");
    }
    std::fs::create_dir_all(&a.work)?;
    let copy = a.work.join(format!("{}.jsonl", run_name(&a.corpus, a.docs)));
    eprintln!("preparing {} ...", copy.display());
    let prepared = prepare_corpus(&a.corpus, a.docs, &copy, false)?;
    let text_bytes = text_bytes(&copy)?;
    let specs = EngineSpec::parse_list(&a.engines)?;
    let (engines, left_out) = build_engines(&specs, &repo)?;
    let mut rows = Vec::new();
    for &t in &threads {
        // Runs go round the engines (each engine's first run, then each
        // one's second, ...), so that a host slowing down or speeding up
        // during the measurement weighs on every engine alike.
        let mut best: Vec<Option<IndexReport>> = vec![None; engines.len()];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); engines.len()];
        for run in 0..a.runs {
            for ((e, best), times) in engines.iter().zip(best.iter_mut()).zip(times.iter_mut()) {
                eprintln!("{} with {t} thread(s), run {} ...", e.name, run + 1);
                let dir = a.work.join(format!("idx-{}", e.name.replace([':', '/'], "-")));
                let mut extra = e.spec.index_args();
                if e.spec.is_tierdex() {
                    extra.extend(["--memory-mb".to_string(), a.memory_mb.to_string()]);
                }
                let r = e
                    .index_with(&copy, &dir, t, a.memory_mb, &extra)
                    .with_context(|| format!("{} with {t} threads", e.name))?;
                eprintln!("  {:.1} s", r.wall_secs);
                times.push(r.wall_secs);
                if best.as_ref().is_none_or(|b| r.wall_secs < b.wall_secs) {
                    *best = Some(r);
                }
            }
        }
        for ((e, best), run_secs) in engines.iter().zip(best).zip(times) {
            let report = best.expect("at least one run");
            let secs = report.wall_secs.max(1e-9);
            rows.push(Row {
                engine: e.name.clone(),
                threads: t,
                docs_per_sec: prepared.docs as f64 / secs,
                mb_per_sec: text_bytes as f64 / 1e6 / secs,
                merge_share: report.merge_secs / (report.index_secs + report.merge_secs).max(1e-9),
                report,
                run_secs,
            });
            eprintln!(
                "{} with {t} thread(s), best run: {:.1} s, {:.0} docs/s, peak RSS {} MiB",
                e.name,
                rows.last().unwrap().report.wall_secs,
                rows.last().unwrap().docs_per_sec,
                rows.last().unwrap().report.peak_rss_kb / 1024
            );
        }
    }
    std::fs::create_dir_all(&a.out)?;
    let json = serde_json::json!({
        "corpus": a.corpus,
        "docs": prepared.docs,
        "text_bytes": text_bytes,
        "memory_mb": a.memory_mb,
        "cores": cores,
        "machine": machine(),
        "left_out": left_out,
        "rows": rows,
    });
    std::fs::write(a.out.join("index-scale.json"), serde_json::to_vec_pretty(&json)?)?;
    let md = markdown(&rows, prepared.docs, text_bytes, a.memory_mb, cores, &left_out);
    std::fs::write(a.out.join("index-scale.md"), &md)?;
    println!("{md}");
    Ok(())
}

/// Bytes of ids, titles and bodies in the plain corpus copy.
fn text_bytes(copy: &std::path::Path) -> Result<u64> {
    use std::io::BufRead;
    let mut total = 0u64;
    for line in open_lines(copy)?.lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        for k in ["id", "title", "body"] {
            total += v[k].as_str().map_or(0, str::len) as u64;
        }
    }
    Ok(total)
}

/// The CPU and its cores, for the report.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {cores} cores")
}

fn markdown(rows: &[Row], docs: u64, text: u64, memory_mb: usize, cores: usize, left_out: &[String]) -> String {
    let mut s = format!(
        "# Indexing against threads\n\n{docs} documents, {:.0} MB of text; every engine with a {memory_mb} MiB budget; \
         {cores} cores; wall-clock time of the whole indexing process, merged into one segment where the engine \
         merges; the best of the runs, which went round the engines (every run's time in the last \
         column).\n\n| engine | threads | time | docs/s | MB/s | speed-up | merge share | peak RSS | runs |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
        text as f64 / 1e6
    );
    for r in rows {
        let one = rows
            .iter()
            .find(|x| x.engine == r.engine && x.threads == 1)
            .map(|x| r.docs_per_sec / x.docs_per_sec);
        s += &format!(
            "| {} | {} | {:.1} s | {:.0} | {:.1} | {} | {:.0}% | {} MiB | {} |\n",
            r.engine,
            r.threads,
            r.report.wall_secs,
            r.docs_per_sec,
            r.mb_per_sec,
            one.map_or("-".into(), |x| format!("{x:.2}x")),
            100.0 * r.merge_share,
            r.report.peak_rss_kb / 1024,
            r.run_secs
                .iter()
                .map(|x| format!("{x:.1} s"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // tierdex's variants over each peer, thread count by thread count.
    let peers: Vec<&str> = dedup(
        rows.iter()
            .filter(|r| !r.engine.starts_with("tierdex"))
            .map(|r| r.engine.as_str()),
    );
    let ours: Vec<&str> = dedup(
        rows.iter()
            .filter(|r| r.engine.starts_with("tierdex"))
            .map(|r| r.engine.as_str()),
    );
    if !peers.is_empty() {
        s += "\ntierdex's docs/s over each peer's (above 1: tierdex faster):\n\n| tierdex | threads |";
        for p in &peers {
            s += &format!(" vs {p} |");
        }
        s += "\n|---|---:|";
        s += &"---:|".repeat(peers.len());
        s += "\n";
        for o in &ours {
            for r in rows.iter().filter(|r| r.engine == *o) {
                s += &format!("| {o} | {} |", r.threads);
                for p in &peers {
                    match rows.iter().find(|x| x.engine == *p && x.threads == r.threads) {
                        Some(x) => s += &format!(" {:.2} |", r.docs_per_sec / x.docs_per_sec),
                        None => s += " - |",
                    }
                }
                s += "\n";
            }
        }
    }
    for l in left_out {
        s += &format!("\nLeft out: {l}\n");
    }
    s
}

fn dedup<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}
