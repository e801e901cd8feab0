//! The result-cache benchmark (DESIGN §6): a Zipf-distributed query stream
//! over tens of thousands of distinct queries (generated workloads and the
//! command file), answered through the cache.
//!
//! * Hit rates come from replaying the stream through the engine's own
//!   [`ResultCache`] in process, with every distinct query (and every word
//!   of a disjunction, for partial matching) evaluated once on the index:
//!   exact for one thread, and cheap enough to sweep sizes, policies,
//!   matchings and shardings.
//! * Speed comes from live runs of `tierdex query-stream` with the cache
//!   options, on the `ram` tier and on the `direct` tier inside a cgroup
//!   memory limit: QPS, p50/p99 latency and the cache's own metrics.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use tierdex::cache::{CacheConfig, Canonical, ResultCache, Sharding};
use tierdex::query::ast;
use tierdex::search::{Mode, SearchResults, Searcher};

use crate::commands::BenchQuery;
use crate::stats::percentile;

pub use tierdex::search::protocol_mode;

/// `len` indices into a pool of `n` queries, Zipf-distributed with
/// `exponent` over a seeded random ranking of the pool (so popularity is
/// not tied to where a query came from).
pub fn zipf_stream(n: usize, len: usize, exponent: f64, seed: u64) -> Result<Vec<usize>> {
    if n == 0 {
        bail!("no queries to draw from");
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut rank: Vec<usize> = (0..n).collect();
    rank.shuffle(&mut rng);
    let zipf = Zipf::new(n as f64, exponent).map_err(|e| anyhow::anyhow!("Zipf({n}, {exponent}): {e}"))?;
    Ok((0..len)
        .map(|_| rank[(zipf.sample(&mut rng) as usize).clamp(1, n) - 1])
        .collect())
}

/// A distinct query, parsed and canonicalised once.
pub struct Prepared {
    /// The query as in the pool.
    pub query: BenchQuery,
    ast: ast::Query,
    canon: Canonical,
    mode: Mode,
    k: usize,
}

/// Parses the pool (queries that do not parse or have an unknown mode are
/// dropped and counted).
pub fn prepare(searcher: &Searcher, pool: Vec<BenchQuery>) -> (Vec<Prepared>, usize) {
    let mut dropped = 0;
    let mut out = Vec::with_capacity(pool.len());
    for q in pool {
        let (Some((mode, k)), Ok(ast)) = (protocol_mode(&q.mode), searcher.parse(&q.text)) else {
            dropped += 1;
            continue;
        };
        let Ok(canon) = Canonical::new(searcher, &ast) else {
            dropped += 1;
            continue;
        };
        out.push(Prepared {
            query: q,
            ast,
            canon,
            mode,
            k,
        });
    }
    (out, dropped)
}

/// Results of every query (and word clause) the replays ask for, evaluated
/// once on the index.
pub struct Answers<'s> {
    searcher: &'s Searcher,
    memo: HashMap<(String, Mode, usize), SearchResults>,
    /// Evaluations done so far.
    pub evaluations: u64,
}

impl<'s> Answers<'s> {
    /// An empty memo over `searcher`.
    pub fn new(searcher: &'s Searcher) -> Self {
        Answers {
            searcher,
            memo: HashMap::new(),
            evaluations: 0,
        }
    }

    fn get(&mut self, q: &ast::Query, mode: Mode, k: usize) -> tierdex::Result<SearchResults> {
        let key = (format!("{q:?}"), mode, k);
        if let Some(r) = self.memo.get(&key) {
            return Ok(r.clone());
        }
        let r = self.searcher.search_parsed(q, mode, k)?;
        self.evaluations += 1;
        self.memo.insert(key, r.clone());
        Ok(r)
    }
}

/// One simulated configuration and what the cache reported after the stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimResult {
    /// Cache budget as a percentage of the index size.
    pub percent: f64,
    /// Budget in bytes.
    pub bytes: u64,
    /// `lru` or `dlirs`.
    pub policy: String,
    /// `isomorphic` or `partial`.
    pub matching: String,
    /// `1`, `4`, `per-thread(2)`...
    pub shards: String,
    /// Worker threads the stream was dealt to (round robin).
    pub threads: usize,
    /// Hits on equal keys.
    pub hits: u64,
    /// Hits from a disjunction's word results.
    pub partial_hits: u64,
    /// Evaluations.
    pub misses: u64,
    /// (hits + partial) / lookups.
    pub hit_rate: f64,
    /// Bytes held at the end.
    pub bytes_used: u64,
    /// Entries evicted.
    pub evictions: u64,
    /// Entries at the end.
    pub entries: u64,
}

/// Replays `stream` through a fresh cache with `config`, the stream dealt
/// round robin to `threads` worker numbers.
pub fn replay(
    prepared: &[Prepared],
    stream: &[usize],
    answers: &mut Answers<'_>,
    config: CacheConfig,
    threads: usize,
) -> Result<tierdex::cache::CacheStats> {
    let cache = ResultCache::new(config)?;
    let snapshot = answers.searcher.snapshot();
    for (i, &q) in stream.iter().enumerate() {
        let p = &prepared[q];
        cache.get_or_eval(snapshot, i % threads.max(1), &p.canon, &p.ast, p.mode, p.k, |sub| {
            answers.get(sub, p.mode, p.k)
        })?;
    }
    Ok(cache.stats())
}

/// Describes a sharding for tables.
pub fn shards_name(s: Sharding) -> String {
    match s {
        Sharding::Hashed(n) => n.to_string(),
        Sharding::PerThread(n) => format!("per-thread({n})"),
    }
}

/// A simulation row from a replay's stats.
pub fn sim_result(percent: f64, config: CacheConfig, threads: usize, st: &tierdex::cache::CacheStats) -> SimResult {
    SimResult {
        percent,
        bytes: config.bytes,
        policy: config.policy.to_string(),
        matching: format!("{:?}", config.matching).to_lowercase(),
        shards: shards_name(config.sharding),
        threads,
        hits: st.total.hits,
        partial_hits: st.total.partial_hits,
        misses: st.total.misses,
        hit_rate: st.hit_rate,
        bytes_used: st.bytes_used,
        evictions: st.total.evictions,
        entries: st.total.entries,
    }
}

/// One live run of `tierdex query-stream` over the stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiveRun {
    /// `ram`, or `direct@256MiB` and the like.
    pub tier: String,
    /// Worker threads.
    pub threads: usize,
    /// `none`, `lru` or `dlirs`.
    pub policy: String,
    /// Budget as a percentage of the index (0 without a cache).
    pub percent: f64,
    /// `isomorphic` or `partial`.
    pub matching: String,
    /// Sharding name.
    pub shards: String,
    /// Queries answered.
    pub queries: usize,
    /// Queries that failed.
    pub errors: usize,
    /// Queries per second between the first and the last answer.
    pub qps: f64,
    /// Median service time (µs).
    pub p50_us: f64,
    /// 99th percentile service time (µs).
    pub p99_us: f64,
    /// Hit rate the cache reported (partial hits included).
    pub hit_rate: f64,
    /// The cache's metrics as printed by `query-stream`.
    pub cache: Option<serde_json::Value>,
}

/// How to start one live run.
pub struct LiveSpec<'a> {
    /// The `tierdex` binary.
    pub binary: &'a Path,
    /// The index.
    pub index: &'a Path,
    /// `ram` or `direct`.
    pub tier: &'a str,
    /// Pool bytes for `direct`.
    pub pool_bytes: u64,
    /// Worker threads.
    pub threads: usize,
    /// `None`: no cache.
    pub cache: Option<CacheConfig>,
    /// Cache budget as a percentage of the index (for the report).
    pub percent: f64,
    /// Memory group to run in (page cache dropped before), if any.
    pub cgroup: Option<&'a crate::limits::Cgroup>,
}

/// Runs `tierdex query-stream` on `lines` (protocol lines) with `spec`.
pub fn live_run(spec: &LiveSpec<'_>, lines: &[String], tier_name: &str) -> Result<LiveRun> {
    let mut cmd = Command::new(spec.binary);
    cmd.arg("query-stream")
        .arg(spec.index)
        .args(["--tier", spec.tier, "--threads", &spec.threads.to_string()]);
    if spec.tier == "direct" {
        cmd.args(["--pool-bytes", &spec.pool_bytes.to_string()]);
    }
    if let Some(c) = spec.cache {
        cmd.args(["--cache-policy", &c.policy.to_string()])
            .args(["--cache-bytes", &c.bytes.to_string()])
            .args(["--cache-match", &format!("{:?}", c.matching).to_lowercase()])
            .args([
                "--cache-shards",
                &match c.sharding {
                    Sharding::Hashed(n) => n.to_string(),
                    Sharding::PerThread(_) => "per-thread".into(),
                },
            ]);
    }
    let mut cmd = match spec.cgroup {
        Some(cg) => {
            crate::limits::drop_caches()?;
            cg.wrap(&cmd)
        }
        None => cmd,
    };
    let stderr_path = std::env::temp_dir().join(format!("tierdex-cache-bench-{}.stderr", std::process::id()));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()
        .with_context(|| format!("starting {}", spec.binary.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        stdin.write_all(text.as_bytes())?;
        Ok(())
    });
    let out = BufReader::new(child.stdout.take().expect("piped"));
    let (mut first, mut last) = (None, Instant::now());
    let mut times = Vec::with_capacity(lines.len());
    let mut errors = 0;
    for line in out.lines() {
        let line = line.context("reading query-stream output")?;
        last = Instant::now();
        first.get_or_insert(last);
        let v: serde_json::Value = serde_json::from_str(&line).context("query-stream answer")?;
        if v.get("error").is_some() {
            errors += 1;
        }
        times.push(v["elapsed_us"].as_f64().unwrap_or(0.0));
    }
    writer.join().expect("stdin writer").context("feeding query-stream")?;
    let status = child.wait()?;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_file(&stderr_path);
    if !status.success() || times.len() != lines.len() {
        bail!(
            "query-stream ({tier_name}) exited with {status} after {} of {} answers: {}",
            times.len(),
            lines.len(),
            stderr.trim()
        );
    }
    let cache: Option<serde_json::Value> = stderr
        .lines()
        .find_map(|l| l.strip_prefix("cache stats: "))
        .and_then(|j| serde_json::from_str(j).ok());
    let elapsed = first.map(|f| last.duration_since(f).as_secs_f64()).unwrap_or(0.0);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let c = spec.cache;
    Ok(LiveRun {
        tier: tier_name.into(),
        threads: spec.threads,
        policy: c.map(|c| c.policy.to_string()).unwrap_or_else(|| "none".into()),
        percent: spec.percent,
        matching: c
            .map(|c| format!("{:?}", c.matching).to_lowercase())
            .unwrap_or_default(),
        shards: c.map(|c| shards_name(c.sharding)).unwrap_or_default(),
        queries: times.len(),
        errors,
        qps: if elapsed > 0.0 {
            (times.len() - 1) as f64 / elapsed
        } else {
            0.0
        },
        p50_us: percentile(&sorted, 0.5),
        p99_us: percentile(&sorted, 0.99),
        hit_rate: cache.as_ref().and_then(|v| v["hit_rate"].as_f64()).unwrap_or(0.0),
        cache,
    })
}

/// Everything one `tierdex-bench cache` run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheResults {
    /// The index.
    pub index: PathBuf,
    /// Its size in bytes.
    pub index_bytes: u64,
    /// Distinct queries in the pool, by source.
    pub pool: HashMap<String, usize>,
    /// Stream length.
    pub stream_len: usize,
    /// Distinct queries that occur in the stream.
    pub stream_distinct: usize,
    /// Zipf exponent.
    pub exponent: f64,
    /// Seed.
    pub seed: u64,
    /// Replays.
    pub simulated: Vec<SimResult>,
    /// Live runs.
    pub live: Vec<LiveRun>,
    /// What the machine is.
    pub machine: crate::report::Machine,
}

fn pct(p: f64) -> String {
    if p >= 1.0 {
        format!("{p:.0}%")
    } else {
        format!("{p}%")
    }
}

impl CacheResults {
    /// The markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let pool: Vec<String> = {
            let mut p: Vec<_> = self.pool.iter().collect();
            p.sort();
            p.iter().map(|(k, v)| format!("{v} {k}")).collect()
        };
        let m = &self.machine;
        let machine = format!(
            "{} ({} CPUs, {:.0} GiB, Linux {})",
            m.cpu, m.cpus, m.memory_gib, m.kernel
        );
        s += &format!(
            "# Result cache\n\nIndex `{}`: {} MiB. Pool: {} distinct queries ({}). Stream: {} queries, Zipf exponent {}, seed {}; {} distinct queries occur in it, so no cache can answer more than {:.1}% of the stream.\n\nMachine: {}\n\n",
            self.index.display(),
            self.index_bytes >> 20,
            self.pool.values().sum::<usize>(),
            pool.join(", "),
            self.stream_len,
            self.exponent,
            self.seed,
            self.stream_distinct,
            100.0 * (1.0 - self.stream_distinct as f64 / self.stream_len.max(1) as f64),
            machine,
        );
        s += "## Hit rate by cache size (replay through the engine's cache, one thread)\n\n";
        s += "| size | bytes | LRU | DLIRS | DLIRS − LRU | LRU partial | DLIRS partial | partial adds (DLIRS) |\n|---|---|---|---|---|---|---|---|\n";
        let mut percents: Vec<f64> = self.simulated.iter().map(|r| r.percent).collect();
        percents.sort_by(f64::total_cmp);
        percents.dedup();
        let find = |p: f64, policy: &str, matching: &str| {
            self.simulated.iter().find(|r| {
                r.percent == p && r.policy == policy && r.matching == matching && r.shards == "1" && r.threads == 1
            })
        };
        for &p in &percents {
            let cells: Vec<Option<&SimResult>> = [
                ("lru", "isomorphic"),
                ("dlirs", "isomorphic"),
                ("lru", "partial"),
                ("dlirs", "partial"),
            ]
            .iter()
            .map(|(a, b)| find(p, a, b))
            .collect();
            let Some(any) = cells.iter().flatten().next() else {
                continue;
            };
            let rate = |c: Option<&SimResult>| c.map(|r| format!("{:.2}%", 100.0 * r.hit_rate)).unwrap_or_default();
            let diff = |a: Option<&SimResult>, b: Option<&SimResult>| match (a, b) {
                (Some(a), Some(b)) => format!("{:+.2}", 100.0 * (a.hit_rate - b.hit_rate)),
                _ => String::new(),
            };
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                pct(p),
                crate::limited::bytes(any.bytes as f64),
                rate(cells[0]),
                rate(cells[1]),
                diff(cells[1], cells[0]),
                rate(cells[2]),
                rate(cells[3]),
                diff(cells[3], cells[1]),
            );
        }
        s += "\n## Shards (replay, stream dealt round robin to the threads)\n\n| size | policy | matching | shards | threads | hit rate | evictions | bytes used |\n|---|---|---|---|---|---|---|---|\n";
        for r in self.simulated.iter().filter(|r| r.shards != "1" || r.threads != 1) {
            s += &format!(
                "| {} | {} | {} | {} | {} | {:.2}% | {} | {} |\n",
                pct(r.percent),
                r.policy,
                r.matching,
                r.shards,
                r.threads,
                100.0 * r.hit_rate,
                r.evictions,
                crate::limited::bytes(r.bytes_used as f64)
            );
        }
        if !self.live.is_empty() {
            s += "\n## Live runs (`tierdex query-stream`)\n\nQPS between the first and the last answer; latency is each query's service time inside the engine (cache lookup included). The speedup is against the run without a cache on the same tier and threads.\n\n| tier | threads | cache | size | matching | shards | hit rate | QPS | speedup | p50 µs | p99 µs |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
            for r in &self.live {
                let base = self
                    .live
                    .iter()
                    .find(|b| b.tier == r.tier && b.threads == r.threads && b.policy == "none");
                let speedup = base
                    .filter(|b| b.qps > 0.0)
                    .map(|b| format!("{:.2}x", r.qps / b.qps))
                    .unwrap_or_default();
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} | {:.1}% | {:.0} | {} | {:.0} | {:.0} |\n",
                    r.tier,
                    r.threads,
                    r.policy,
                    if r.policy == "none" {
                        String::new()
                    } else {
                        pct(r.percent)
                    },
                    r.matching,
                    r.shards,
                    100.0 * r.hit_rate,
                    r.qps,
                    speedup,
                    r.p50_us,
                    r.p99_us
                );
            }
        }
        s
    }

    /// Writes `cache.json`, `cache.md` and `cache-hit-rate.svg` to `dir`.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join("cache.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)?)?;
        let md = dir.join("cache.md");
        std::fs::write(&md, self.markdown())?;
        let chart = dir.join("cache-hit-rate.svg");
        self.hit_rate_chart(&chart)?;
        Ok(vec![json, md, chart])
    }

    fn hit_rate_chart(&self, path: &Path) -> Result<()> {
        let draw = |e| anyhow::anyhow!("drawing {}: {e}", path.display());
        let root = SVGBackend::new(path, (900, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(draw)?;
        let series: Vec<(String, Vec<(f64, f64)>)> = [
            ("lru", "isomorphic"),
            ("dlirs", "isomorphic"),
            ("lru", "partial"),
            ("dlirs", "partial"),
        ]
        .iter()
        .map(|(p, m)| {
            let mut pts: Vec<(f64, f64)> = self
                .simulated
                .iter()
                .filter(|r| r.policy == *p && r.matching == *m && r.shards == "1" && r.threads == 1)
                .map(|r| (r.percent.log10(), 100.0 * r.hit_rate))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (format!("{p} {m}"), pts)
        })
        .collect();
        let pts: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        if pts.is_empty() {
            return Ok(());
        }
        let x_lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min) - 0.1;
        let x_hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max) + 0.1;
        let y_lo = (pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min) - 2.0)
            .max(0.0)
            .floor();
        let y_hi = (pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max) + 2.0)
            .min(100.0)
            .ceil();
        let (plot, legend) = root.split_horizontally(700);
        let mut chart = ChartBuilder::on(&plot)
            .caption("Result cache hit rate vs size (Zipf stream)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(draw)?;
        chart
            .configure_mesh()
            .x_desc("cache size, % of the index (log scale)")
            .y_desc("hit rate %")
            .x_label_formatter(&|v| pct((10f64.powf(*v) * 1000.0).round() / 1000.0))
            .draw()
            .map_err(draw)?;
        for (j, (name, p)) in series.iter().enumerate() {
            crate::report::series_with_legend(&mut chart, &legend, j, name, p)?;
        }
        root.present().map_err(draw)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_stream_is_skewed_and_deterministic() {
        let s = zipf_stream(1000, 20_000, 1.0, 7).unwrap();
        assert_eq!(s, zipf_stream(1000, 20_000, 1.0, 7).unwrap());
        assert!(s.iter().all(|&i| i < 1000));
        let mut counts = vec![0u32; 1000];
        for &i in &s {
            counts[i] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // Rank 1 of Zipf(1000, 1) has probability 1/H(1000) ≈ 13%.
        assert!((2000..3400).contains(&counts[0]), "{}", counts[0]);
        assert!(counts[999] <= 3);
        assert!(zipf_stream(0, 10, 1.0, 1).is_err());
    }

    #[test]
    fn writes_report_and_chart() {
        let row = |percent: f64, policy: &str, matching: &str, hit_rate: f64| SimResult {
            percent,
            bytes: 1000,
            policy: policy.into(),
            matching: matching.into(),
            shards: "1".into(),
            threads: 1,
            hits: 1,
            partial_hits: 0,
            misses: 1,
            hit_rate,
            bytes_used: 10,
            evictions: 0,
            entries: 1,
        };
        let mut simulated = Vec::new();
        for (i, p) in [0.1, 1.0].into_iter().enumerate() {
            for policy in ["lru", "dlirs"] {
                for m in ["isomorphic", "partial"] {
                    simulated.push(row(p, policy, m, 0.5 + 0.1 * i as f64));
                }
            }
        }
        let r = CacheResults {
            index: "x".into(),
            index_bytes: 1 << 20,
            pool: HashMap::from([("generated".to_string(), 3)]),
            stream_len: 10,
            stream_distinct: 3,
            exponent: 1.0,
            seed: 1,
            simulated,
            live: Vec::new(),
            machine: crate::report::Machine::detect(),
        };
        let dir = tempfile::tempdir().unwrap();
        r.write(dir.path()).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("cache-hit-rate.svg")).unwrap();
        assert_eq!(svg.matches("<circle").count(), 8);
        assert!(svg.contains("dlirs partial"));
        let md = std::fs::read_to_string(dir.path().join("cache.md")).unwrap();
        assert!(md.contains("| 0.1% |") && md.contains("| 1% |"), "{md}");
    }

    #[test]
    fn protocol_modes() {
        assert_eq!(protocol_mode("COUNT"), Some((Mode::Count, 0)));
        assert_eq!(protocol_mode("TOP_100"), Some((Mode::TopK, 100)));
        assert_eq!(protocol_mode("nope"), None);
    }
}
