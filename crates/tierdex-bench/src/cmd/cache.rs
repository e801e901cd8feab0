//! `tierdex-bench cache`: the result-cache benchmark.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::dir_bytes;
use tierdex_bench::limits;
use tierdex_bench::report::Machine;
use tierdex_bench::workload;

use super::*;

/// Options of `tierdex-bench cache`.
#[derive(clap::Args)]
pub struct Args {
    /// A tierdex index (queries are generated from its terms).
    pub index: PathBuf,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game
    /// file in ../shared/queries when present.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Generated queries per workload category (16 categories, TOP_10).
    #[arg(long, default_value_t = 2000)]
    pub per_category: usize,
    /// Queries in the stream.
    #[arg(long, default_value_t = 100_000)]
    pub stream_len: usize,
    /// Zipf exponent of query popularity.
    #[arg(long, default_value_t = 1.0)]
    pub exponent: f64,
    /// Seed of the workload and the stream.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Cache sizes to replay, in percent of the index size.
    #[arg(long, value_delimiter = ',', default_value = "0.05,0.1,0.25,0.5,1,5,10,20")]
    pub sizes: Vec<f64>,
    /// Cache sizes of the live runs, in percent of the index size.
    #[arg(long, value_delimiter = ',', default_value = "0.1,5")]
    pub live_sizes: Vec<f64>,
    /// Queries of the stream (its first N) answered by each live run; 0: no live runs.
    #[arg(long, default_value_t = 100_000)]
    pub live_len: usize,
    /// Thread counts of the live runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Tiers of the live runs: `ram` and/or `direct` (the latter inside the memory limit).
    #[arg(long, value_delimiter = ',', default_value = "ram,direct")]
    pub tiers: Vec<String>,
    /// Memory limit of the `direct` runs (MiB, page cache included).
    #[arg(long, default_value_t = 256)]
    pub limit_mb: u64,
    /// Buffer pool of the `direct` runs (MiB).
    #[arg(long, default_value_t = 64)]
    pub pool_mb: u64,
    /// Parent cgroup for the limited runs.
    #[arg(long, default_value = limits::MEMORY_ROOT)]
    pub cgroup_parent: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/cache")]
    pub out: PathBuf,
}

/// Runs `tierdex-bench cache`.
pub fn run(a: Args) -> Result<()> {
    use tierdex::cache::{CacheConfig, Matching, PolicyKind, Sharding};
    use tierdex_bench::cache::{self as cb, Answers, CacheResults, LiveSpec};

    let repo = repo_root();
    let searcher = Searcher::open(&a.index).with_context(|| format!("opening {}", a.index.display()))?;
    let index_bytes = dir_bytes(&a.index)?;
    // The pool: generated workloads and the command file, distinct lines.
    let mut pool: Vec<BenchQuery> = workload::generate(&searcher, a.per_category, a.seed)?
        .into_iter()
        .map(|q| BenchQuery {
            source: "generated".into(),
            category: q.category,
            mode: "TOP_10".into(),
            text: q.text,
        })
        .collect();
    if let Some(path) = a.queries.clone().or_else(|| default_command_file(&repo)) {
        pool.extend(read_command_file(&path, 1)?);
    }
    let mut seen = std::collections::HashSet::new();
    pool.retain(|q| seen.insert(q.line()));
    let mut by_source = std::collections::HashMap::new();
    for q in &pool {
        *by_source.entry(q.source.clone()).or_insert(0usize) += 1;
    }
    let (prepared, dropped) = cb::prepare(&searcher, pool);
    if dropped > 0 {
        eprintln!("{dropped} queries of the pool did not parse and were left out");
    }
    let stream = cb::zipf_stream(prepared.len(), a.stream_len, a.exponent, a.seed)?;
    let stream_distinct = stream.iter().collect::<std::collections::HashSet<_>>().len();
    eprintln!(
        "pool {} distinct queries; stream {} queries, {} distinct",
        prepared.len(),
        stream.len(),
        stream_distinct
    );

    // Replays: every size × policy × matching on one shard, then shardings.
    let mut answers = Answers::new(&searcher);
    let mut simulated = Vec::new();
    let budget = |p: f64| ((index_bytes as f64 * p / 100.0) as u64).max(1 << 16);
    let mut configs: Vec<(f64, CacheConfig, usize)> = Vec::new();
    for &p in &a.sizes {
        for policy in [PolicyKind::Lru, PolicyKind::Dlirs] {
            for matching in [Matching::Isomorphic, Matching::Partial] {
                configs.push((
                    p,
                    CacheConfig {
                        policy,
                        bytes: budget(p),
                        sharding: Sharding::Hashed(1),
                        matching,
                        min_hits: 0,
                    },
                    1,
                ));
            }
        }
    }
    for &p in &a.live_sizes {
        for policy in [PolicyKind::Lru, PolicyKind::Dlirs] {
            for sharding in [Sharding::Hashed(1), Sharding::Hashed(4), Sharding::PerThread(2)] {
                let matching = Matching::Isomorphic;
                configs.push((
                    p,
                    CacheConfig {
                        policy,
                        bytes: budget(p),
                        sharding,
                        matching,
                        min_hits: 0,
                    },
                    2,
                ));
            }
        }
    }
    let pb = bar(configs.len() as u64, "replays");
    for (p, config, threads) in configs {
        let st = cb::replay(&prepared, &stream, &mut answers, config, threads)?;
        simulated.push(cb::sim_result(p, config, threads, &st));
        pb.inc(1);
    }
    pb.finish_and_clear();
    eprintln!("replays done ({} evaluations)", answers.evaluations);
    drop(answers);
    drop(searcher);

    let mut results = CacheResults {
        index: a.index.clone(),
        index_bytes,
        pool: by_source,
        stream_len: stream.len(),
        stream_distinct,
        exponent: a.exponent,
        seed: a.seed,
        simulated,
        live: Vec::new(),
        machine: Machine::detect(),
    };
    results.write(&a.out)?;

    // Live runs.
    if a.live_len > 0 {
        tierdex_bench::engines::run(
            std::process::Command::new("cargo")
                .args(["build", "--release", "--quiet", "--bin", "tierdex"])
                .current_dir(&repo),
            "cargo build of tierdex",
        )?;
        let binary = repo.join("target/release/tierdex");
        let lines: Vec<String> = stream[..a.live_len.min(stream.len())]
            .iter()
            .map(|&i| prepared[i].query.line())
            .collect();
        let limited_ok = match limits::unavailable(&a.cgroup_parent) {
            Some(why) => {
                eprintln!("direct runs skipped: {why}");
                false
            }
            None => {
                limits::sweep_stale(&a.cgroup_parent);
                limits::remove_on_interrupt();
                true
            }
        };
        let mut plan: Vec<(String, usize, Option<CacheConfig>, f64)> = Vec::new();
        for tier in &a.tiers {
            if tier == "direct" && !limited_ok {
                continue;
            }
            for &t in &a.threads {
                plan.push((tier.clone(), t, None, 0.0));
                for &p in &a.live_sizes {
                    let c = |policy, matching, sharding| CacheConfig {
                        policy,
                        bytes: budget(p),
                        sharding,
                        matching,
                        min_hits: 0,
                    };
                    plan.push((
                        tier.clone(),
                        t,
                        Some(c(PolicyKind::Lru, Matching::Isomorphic, Sharding::Hashed(1))),
                        p,
                    ));
                    plan.push((
                        tier.clone(),
                        t,
                        Some(c(PolicyKind::Dlirs, Matching::Isomorphic, Sharding::Hashed(1))),
                        p,
                    ));
                    plan.push((
                        tier.clone(),
                        t,
                        Some(c(PolicyKind::Dlirs, Matching::Partial, Sharding::Hashed(1))),
                        p,
                    ));
                    if t > 1 {
                        plan.push((
                            tier.clone(),
                            t,
                            Some(c(PolicyKind::Dlirs, Matching::Isomorphic, Sharding::Hashed(4))),
                            p,
                        ));
                        plan.push((
                            tier.clone(),
                            t,
                            Some(c(PolicyKind::Dlirs, Matching::Isomorphic, Sharding::PerThread(t))),
                            p,
                        ));
                    }
                }
            }
        }
        let pb = bar(plan.len() as u64, "live runs");
        for (tier, threads, cache, percent) in plan {
            let limited = tier == "direct";
            let cg = if limited {
                Some(limits::Cgroup::create(&a.cgroup_parent, Some(a.limit_mb << 20))?)
            } else {
                None
            };
            let name = if limited {
                format!("direct@{}MiB", a.limit_mb)
            } else {
                tier.clone()
            };
            pb.set_message(format!(
                "{name} t{threads} {}",
                cache.map(|c| c.policy.to_string()).unwrap_or("none".into())
            ));
            let spec = LiveSpec {
                binary: &binary,
                index: &a.index,
                tier: &tier,
                pool_bytes: a.pool_mb << 20,
                threads,
                cache,
                percent,
                cgroup: cg.as_ref(),
            };
            let r = cb::live_run(&spec, &lines, &name)?;
            results.live.push(r);
            results.write(&a.out)?;
            pb.inc(1);
        }
        pb.finish_and_clear();
    }
    for p in results.write(&a.out)? {
        eprintln!("wrote {}", p.display());
    }
    print!("{}", results.markdown());
    Ok(())
}
