//! `tierdex-bench load`: open-loop load against a running `tierdex serve`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex_bench::commands::read_command_file;

use super::*;

/// What a load run returns: per-rate results, the update stream's report,
/// the ids found missing, and RSS samples `(secs, bytes)`.
type LoadOutcome = (
    Vec<tierdex_bench::load::RateResult>,
    Option<tierdex_bench::load::UpdateReport>,
    Option<Vec<u64>>,
    Vec<(f64, u64)>,
);

/// Options of `tierdex-bench load`.
#[derive(clap::Args)]
pub struct Args {
    /// The server's base URL (loopback addresses only).
    #[arg(long, default_value = "http://127.0.0.1:9200")]
    pub url: String,
    /// Name of this series in the report (e.g. `ram, no cache`).
    #[arg(long)]
    pub label: String,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game file.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Rates to run (requests/s); default: a sweep from --start-rate.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// First rate of the sweep.
    #[arg(long, default_value_t = 100.0)]
    pub start_rate: f64,
    /// Each rate of the sweep is the previous one times this.
    #[arg(long, default_value_t = 1.5)]
    pub factor: f64,
    /// Highest rate the sweep may reach.
    #[arg(long, default_value_t = 200_000.0)]
    pub max_rate: f64,
    /// Seconds at each rate.
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Seconds of load at the first rate before measuring (not recorded).
    #[arg(long, default_value_t = 5.0)]
    pub warmup_secs: f64,
    /// Requests in flight at most; more are dropped and counted as errors.
    #[arg(long, default_value_t = 2048)]
    pub max_in_flight: usize,
    /// Client timeout per request (ms).
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// p99 a rate must meet to count within capacity (ms).
    #[arg(long, default_value_t = 50.0)]
    slo_p99_ms: f64,
    /// p99 beyond which the server is clearly past capacity and the sweep stops (ms).
    #[arg(long, default_value_t = 1000.0)]
    stop_p99_ms: f64,
    /// Longest the whole run may take (seconds).
    #[arg(long, default_value_t = 900)]
    pub max_secs: u64,
    /// Seed of the arrival schedules.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Results directory (series accumulate in load.json).
    #[arg(long, default_value = "bench/results/load")]
    pub out: PathBuf,
    /// Re-index this many documents per second through `POST /docs` while
    /// the queries run (0: no updates).
    #[arg(long, default_value_t = 0.0)]
    pub update_docs_per_sec: f64,
    /// Documents per update request.
    #[arg(long, default_value_t = 10)]
    pub update_batch: usize,
    /// Distinct ids the updates cycle over (first pass adds, then replaces).
    #[arg(long, default_value_t = 100_000)]
    pub update_ids: u64,
    /// Re-index real documents: the first `--update-ids` documents of this
    /// corpus (JSON lines, .zst/.gz ok; usually the one the index was built
    /// from), sent with their own ids, so they replace what the index holds.
    /// Without it, bodies are drawn from the query words, a worst case that
    /// makes every update match many queries.
    #[arg(long)]
    pub update_docs: Option<PathBuf>,
    /// After the run, wait for a refresh and check by search that every
    /// acknowledged update id is there exactly once.
    #[arg(long)]
    pub verify_updates: bool,
    /// The server's process id: its resident memory is sampled every second.
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// Runs `tierdex-bench load`.
pub fn run(a: Args) -> Result<()> {
    use tierdex_bench::load::{self, LoadPlan, RateResult, SweepRule};

    load::check_loopback(&a.url)?;
    let repo = repo_root();
    let path = a
        .queries
        .clone()
        .or_else(|| default_command_file(&repo))
        .context("no command file: pass --queries")?;
    let lines: Vec<(String, String)> = read_command_file(&path, 1)?
        .into_iter()
        .map(|q| (q.mode, q.text))
        .collect();
    let plan = LoadPlan {
        base: a.url.trim_end_matches('/').to_string(),
        paths: load::search_paths(&lines),
        duration: std::time::Duration::from_secs_f64(a.duration_secs),
        max_in_flight: a.max_in_flight,
        timeout: std::time::Duration::from_millis(a.timeout_ms),
        seed: a.seed,
    };
    if plan.paths.is_empty() {
        bail!("{}: no queries", path.display());
    }
    let rule = SweepRule {
        slo_p99_ms: a.slo_p99_ms,
        stop_p99_ms: a.stop_p99_ms,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if a.update_docs_per_sec < 0.0 || (a.update_docs_per_sec > 0.0 && (a.update_batch == 0 || a.update_ids == 0)) {
        bail!("--update-docs-per-sec must be ≥ 0, with a positive --update-batch and --update-ids");
    }
    let words: Vec<String> = lines
        .iter()
        .flat_map(|(_, q)| q.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect();
    let update_docs = match (&a.update_docs, a.update_docs_per_sec > 0.0) {
        (Some(path), true) => {
            let corpus = Corpus::open(std::slice::from_ref(path), ReadOptions::default())?;
            let docs = corpus
                .take(a.update_ids.min(10_000_000) as usize)
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("reading update documents from {}", path.display()))?;
            if docs.is_empty() {
                bail!("{} holds no documents", path.display());
            }
            eprintln!("updates re-index {} documents of {}", docs.len(), path.display());
            std::sync::Arc::new(docs)
        }
        _ => std::sync::Arc::new(Vec::new()),
    };
    let (results, updates, lost, rss): LoadOutcome = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(a.max_in_flight)
            .build()?;
        let health = client.get(format!("{}/health", plan.base)).send().await;
        if !health.is_ok_and(|r| r.status().is_success()) {
            bail!("{}/health does not answer: start `tierdex serve` first", plan.base);
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let updater = (a.update_docs_per_sec > 0.0).then(|| {
            tokio::spawn(load::run_updates(
                client.clone(),
                plan.base.clone(),
                load::UpdateStream {
                    docs_per_sec: a.update_docs_per_sec,
                    batch: a.update_batch,
                    ids: a.update_ids,
                    words: if words.is_empty() {
                        vec!["word".into()]
                    } else {
                        words.clone()
                    },
                    docs: update_docs.clone(),
                    seed: a.seed,
                },
                stop.clone(),
            ))
        });
        let sampler = a.server_pid.map(|pid| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let mut out = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(b) = load::rss_bytes(pid) {
                        out.push((t0.elapsed().as_secs_f64(), b));
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                out
            })
        });
        let first = a.rates.first().copied().unwrap_or(a.start_rate);
        if a.warmup_secs > 0.0 {
            let warm = LoadPlan {
                duration: std::time::Duration::from_secs_f64(a.warmup_secs),
                ..plan.clone()
            };
            load::run_rate(&client, &warm, first, 0).await?;
        }
        let started = Instant::now();
        let mut out = Vec::new();
        let mut rate = first;
        let mut i = 0;
        loop {
            if !a.rates.is_empty() {
                let Some(&r) = a.rates.get(i) else { break };
                rate = r;
            }
            if started.elapsed().as_secs() + a.duration_secs as u64 > a.max_secs || rate > a.max_rate {
                eprintln!("stopping: time or rate bound reached");
                break;
            }
            let r = load::run_rate(&client, &plan, rate, i * 100_003).await?;
            eprintln!(
                "{:>8.0}/s offered  {:>8.0}/s answered  errors {:>6}  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.1} ms",
                r.offered, r.achieved, r.errors, r.p50_ms, r.p99_ms, r.max_ms
            );
            let past = r.past(&rule);
            out.push(r);
            if past {
                eprintln!("past capacity: sweep stops");
                break;
            }
            rate *= a.factor;
            i += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let updates = match updater {
            Some(u) => Some(u.await?),
            None => None,
        };
        let rss = match sampler {
            Some(s) => s.await?,
            None => Vec::new(),
        };
        let lost = match (&updates, a.verify_updates) {
            (Some(u), true) => {
                // Past the server's refresh interval (1 s by default).
                tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                Some(load::verify_updates(&client, &plan.base, &u.acked).await?)
            }
            _ => None,
        };
        Ok((out, updates, lost, rss))
    })?;
    if let Some(u) = &updates {
        eprintln!(
            "updates: {} batches acknowledged ({} documents, {} distinct ids), {} failed; write p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
            u.batches_ok, u.docs_acked, u.acked.len(), u.batches_failed, u.p50_ms, u.p99_ms, u.max_ms
        );
    }
    if let Some(l) = &lost {
        eprintln!(
            "verified by id: {} of {} acknowledged ids missing",
            l.len(),
            updates.as_ref().map_or(0, |u| u.acked.len())
        );
    }
    if let (Some(first), Some(peak), Some(last)) = (rss.first(), rss.iter().map(|r| r.1).max(), rss.last()) {
        eprintln!(
            "server RSS: {:.1} MiB at start, {:.1} MiB peak, {:.1} MiB at the end",
            first.1 as f64 / 1048576.0,
            peak as f64 / 1048576.0,
            last.1 as f64 / 1048576.0
        );
    }
    // Accumulate series by label.
    std::fs::create_dir_all(&a.out)?;
    let json_path = a.out.join("load.json");
    let mut all: Vec<(String, Vec<RateResult>)> = std::fs::read(&json_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    all.retain(|(l, _)| l != &a.label);
    all.push((a.label.clone(), results));
    std::fs::write(&json_path, serde_json::to_string_pretty(&all)?)?;
    let mut md = format!(
        "# Open-loop load\n\nPoisson arrivals, latency from the scheduled send time; {} s per rate after a {} s warm-up; queries: {}. Machine: 2 cores (server and load generator share them).\n\n",
        a.duration_secs, a.warmup_secs, path.display()
    );
    for (label, r) in &all {
        md += &load::markdown(label, r, &rule);
        md += "\n";
    }
    let extra_path = a.out.join("load-updates.json");
    let mut extras: serde_json::Map<String, serde_json::Value> = std::fs::read(&extra_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if updates.is_some() || !rss.is_empty() {
        extras.insert(
            a.label.clone(),
            serde_json::json!({
                "updates": updates,
                "update_docs_per_sec": a.update_docs_per_sec,
                "update_docs": a.update_docs.as_ref().map(|p| p.display().to_string()),
                "acked_ids": updates.as_ref().map(|u| u.acked.len()),
                "lost_ids": lost.as_ref().map(|l| l.len()),
                "rss_samples": rss,
            }),
        );
        std::fs::write(&extra_path, serde_json::to_string_pretty(&extras)?)?;
    }
    for (label, v) in &extras {
        md += &format!(
            "### {label}: updates and memory\n\nUpdates: {} documents/s offered ({}); {} batches acknowledged ({} documents, {} distinct ids), {} failed; write p50 {} ms, p99 {} ms. Lost after the run (verified by id): {}. Server RSS samples: {}.\n\n",
            v["update_docs_per_sec"],
            match v["update_docs"].as_str() {
                Some(p) => format!("real documents re-indexed from `{p}`"),
                None => "generated from the query words".into(),
            },
            v["updates"]["batches_ok"],
            v["updates"]["docs_acked"],
            v["acked_ids"],
            v["updates"]["batches_failed"],
            v["updates"]["p50_ms"],
            v["updates"]["p99_ms"],
            v["lost_ids"],
            rss_summary(&v["rss_samples"]),
        );
    }
    std::fs::write(a.out.join("load.md"), &md)?;
    load::chart(&a.out.join("load-p99.svg"), &all)?;
    print!("{}", load::markdown(&a.label, &all.last().expect("pushed").1, &rule));
    Ok(())
}
