//! `tierdex-bench`: tierdex side by side with Lucene and tantivy.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::run;
use tierdex_bench::engines::{dir_bytes, Answer, Engine, EngineSpec, QueryOptions};
use tierdex_bench::limited::{self, jvm_heap_mb, limit_name, EngineInfo, LimitedResults, Plan, Workload};
use tierdex_bench::limits;
use tierdex_bench::quality::find_collections;
use tierdex_bench::report::{EngineResult, Machine, QualityResult, Results};
use tierdex_bench::stats::{count_agreement, query_times, rows, top10_overlap, QueryTime};
use tierdex_bench::workload;

/// Benchmarks tierdex against Lucene and tantivy on the same corpus, queries,
/// analysis and threads.
#[derive(Parser)]
#[command(name = "tierdex-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the engines, index a corpus with each, run the query sets,
    /// measure ranking quality, and write JSON, markdown and charts.
    Compare(CompareArgs),
    /// Print a generated workload over a tierdex index as `MODE<TAB>QUERY`
    /// lines with the category in a third column.
    Workload(WorkloadArgs),
    /// Memory-limited runs: every engine (and tierdex variant) answers one
    /// cold pass of queries inside a cgroup v1 memory limit (page cache
    /// included) after the page cache was dropped; reports device bytes read
    /// per query, QPS and latency per limit, with charts. Needs root and
    /// cgroup v1; exits with status 77 (skipped) when either is missing.
    Limited(LimitedArgs),
    /// Rewrite `limited.md` and the charts from the `limited.json` in a
    /// results directory of `limited`.
    LimitedReport {
        /// The results directory.
        dir: PathBuf,
    },
    /// Result cache: a Zipf query stream over generated workloads and the
    /// command file, replayed through the cache at several sizes, policies,
    /// matchings and shardings (hit rates), then live `query-stream` runs on
    /// the `ram` tier and on `direct` inside a memory limit (QPS, p99).
    Cache(CacheBenchArgs),
    /// Open-loop load against a running `tierdex serve` (loopback only):
    /// Poisson arrivals at each rate of a sweep that stops once the server is
    /// past capacity; latency from the scheduled send time; percentiles per
    /// rate, a capacity estimate and a chart of p99 vs offered rate. Each run
    /// adds a labelled series to the results directory.
    Load(LoadArgs),
    /// The maintenance workload (issue #6): from an empty index, equal
    /// batches added and flushed one after the other under each strategy,
    /// with a fixed query set after every flush; cumulative maintenance
    /// time, bytes and mean query time per strategy, with charts.
    Maintenance(MaintenanceArgs),
}

#[derive(clap::Args)]
struct MaintenanceArgs {
    /// Flushes (equal batches).
    #[arg(long, default_value_t = 100)]
    flushes: usize,
    /// Documents per batch.
    #[arg(long, default_value_t = 20_000)]
    docs_per_flush: usize,
    /// A JSON-lines corpus to split into the batches (default: the seeded
    /// generated corpus).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Seed of the generated corpus and of the queries.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Strategies to run (default: all).
    #[arg(long, value_delimiter = ',', value_parser = |s: &str| s.parse::<tierdex::update::Strategy>().map_err(|e| e.to_string()))]
    strategies: Vec<tierdex::update::Strategy>,
    /// Queries per workload category in the fixed query set (16 categories,
    /// drawn from an index of the first batch).
    #[arg(long, default_value_t = 10)]
    queries_per_category: usize,
    /// Passes over the query set after each flush (the best counts).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where the indexes are built (removed afterwards).
    #[arg(long, default_value = "target/maintenance-work")]
    work: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/maintenance")]
    out: PathBuf,
    /// Keep the runs of other strategies already in `OUT/maintenance.json`
    /// (the strategies run now replace theirs).
    #[arg(long)]
    append: bool,
    /// Run nothing: rewrite the table and charts from `OUT/maintenance.json`.
    #[arg(long)]
    report_only: bool,
}

#[derive(clap::Args)]
struct LoadArgs {
    /// The server's base URL (loopback addresses only).
    #[arg(long, default_value = "http://127.0.0.1:9200")]
    url: String,
    /// Name of this series in the report (e.g. `ram, no cache`).
    #[arg(long)]
    label: String,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game file.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Rates to run (requests/s); default: a sweep from --start-rate.
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    /// First rate of the sweep.
    #[arg(long, default_value_t = 100.0)]
    start_rate: f64,
    /// Each rate of the sweep is the previous one times this.
    #[arg(long, default_value_t = 1.5)]
    factor: f64,
    /// Highest rate the sweep may reach.
    #[arg(long, default_value_t = 200_000.0)]
    max_rate: f64,
    /// Seconds at each rate.
    #[arg(long, default_value_t = 10.0)]
    duration_secs: f64,
    /// Seconds of load at the first rate before measuring (not recorded).
    #[arg(long, default_value_t = 5.0)]
    warmup_secs: f64,
    /// Requests in flight at most; more are dropped and counted as errors.
    #[arg(long, default_value_t = 2048)]
    max_in_flight: usize,
    /// Client timeout per request (ms).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// p99 a rate must meet to count within capacity (ms).
    #[arg(long, default_value_t = 50.0)]
    slo_p99_ms: f64,
    /// p99 beyond which the server is clearly past capacity and the sweep stops (ms).
    #[arg(long, default_value_t = 1000.0)]
    stop_p99_ms: f64,
    /// Longest the whole run may take (seconds).
    #[arg(long, default_value_t = 900)]
    max_secs: u64,
    /// Seed of the arrival schedules.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Results directory (series accumulate in load.json).
    #[arg(long, default_value = "bench/results/load")]
    out: PathBuf,
    /// Re-index this many documents per second through `POST /docs` while
    /// the queries run (0: no updates).
    #[arg(long, default_value_t = 0.0)]
    update_docs_per_sec: f64,
    /// Documents per update request.
    #[arg(long, default_value_t = 10)]
    update_batch: usize,
    /// Distinct ids the updates cycle over (first pass adds, then replaces).
    #[arg(long, default_value_t = 100_000)]
    update_ids: u64,
    /// Re-index real documents: the first `--update-ids` documents of this
    /// corpus (JSON lines, .zst/.gz ok; usually the one the index was built
    /// from), sent with their own ids, so they replace what the index holds.
    /// Without it, bodies are drawn from the query words, a worst case that
    /// makes every update match many queries.
    #[arg(long)]
    update_docs: Option<PathBuf>,
    /// After the run, wait for a refresh and check by search that every
    /// acknowledged update id is there exactly once.
    #[arg(long)]
    verify_updates: bool,
    /// The server's process id: its resident memory is sampled every second.
    #[arg(long)]
    server_pid: Option<u32>,
}

#[derive(clap::Args)]
struct CacheBenchArgs {
    /// A tierdex index (queries are generated from its terms).
    index: PathBuf,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game
    /// file in ../shared/queries when present.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Generated queries per workload category (16 categories, TOP_10).
    #[arg(long, default_value_t = 2000)]
    per_category: usize,
    /// Queries in the stream.
    #[arg(long, default_value_t = 100_000)]
    stream_len: usize,
    /// Zipf exponent of query popularity.
    #[arg(long, default_value_t = 1.0)]
    exponent: f64,
    /// Seed of the workload and the stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Cache sizes to replay, in percent of the index size.
    #[arg(long, value_delimiter = ',', default_value = "0.05,0.1,0.25,0.5,1,5,10,20")]
    sizes: Vec<f64>,
    /// Cache sizes of the live runs, in percent of the index size.
    #[arg(long, value_delimiter = ',', default_value = "0.1,5")]
    live_sizes: Vec<f64>,
    /// Queries of the stream (its first N) answered by each live run; 0: no live runs.
    #[arg(long, default_value_t = 100_000)]
    live_len: usize,
    /// Thread counts of the live runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Tiers of the live runs: `ram` and/or `direct` (the latter inside the memory limit).
    #[arg(long, value_delimiter = ',', default_value = "ram,direct")]
    tiers: Vec<String>,
    /// Memory limit of the `direct` runs (MiB, page cache included).
    #[arg(long, default_value_t = 256)]
    limit_mb: u64,
    /// Buffer pool of the `direct` runs (MiB).
    #[arg(long, default_value_t = 64)]
    pool_mb: u64,
    /// Parent cgroup for the limited runs.
    #[arg(long, default_value = limits::MEMORY_ROOT)]
    cgroup_parent: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/cache")]
    out: PathBuf,
}

/// Exit status of a skipped run (the automake convention).
const SKIPPED: i32 = 77;

#[derive(clap::Args)]
struct LimitedArgs {
    /// Corpus: JSON lines (.zst/.gz ok), `{"id"|"url","title","body"}`; only
    /// read when an index must be built.
    #[arg(long)]
    corpus: PathBuf,
    /// Index only the first N documents.
    #[arg(long)]
    docs: Option<u64>,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game
    /// file in ../shared/queries when present.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Engines and variants (comma-separated): tierdex,
    /// tierdex:<ram|mmap|buffered|direct>, tierdex:mmap-<os|random|adaptive>,
    /// tierdex@<split|direct|split+direct>:<tier> (index layout and codec), lucene,
    /// lucene:<normal|random|sequential>, tantivy.
    #[arg(long, default_value = "tierdex,lucene,tantivy", value_delimiter = ',')]
    engines: Vec<String>,
    /// Memory limit in MiB (when no --sweep).
    #[arg(long, default_value_t = 256)]
    memory_mb: u64,
    /// Memory limits to run, in MiB (0: unlimited), e.g. 128,256,1024,0.
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<u64>,
    /// Measure every N-th query of the command file.
    #[arg(long, default_value_t = 8)]
    sample: usize,
    /// Generated queries per category.
    #[arg(long, default_value_t = 20)]
    generated: usize,
    /// Only these generated categories (comma-separated, e.g. term-10,term-100,term-1k), in the
    /// measured pass and the warm-up; default: all.
    #[arg(long, value_delimiter = ',')]
    categories: Vec<String>,
    /// Leave the command file out (measured pass and warm-up): generated queries only.
    #[arg(long)]
    no_commands: bool,
    /// Only these command-file categories (comma-separated: term, and, or, phrase, mixed), in the
    /// measured pass and the warm-up; default: all.
    #[arg(long, value_delimiter = ',')]
    command_categories: Vec<String>,
    /// Modes the generated queries cycle through.
    #[arg(long, default_value = "TOP_10,TOP_10_COUNT,COUNT", value_delimiter = ',')]
    modes: Vec<String>,
    /// Warm-up queries before the measured pass (for the JIT), none of them
    /// in the measured set.
    #[arg(long, default_value_t = 500)]
    warmup_queries: usize,
    /// Share of the memory limit given to tierdex's direct-tier page pool.
    #[arg(long, default_value_t = 0.5)]
    pool_share: f64,
    /// Longest one engine may run under one limit (seconds; 0: no limit). An engine that
    /// thrashes is stopped and reported as timed out, with the queries it answered.
    #[arg(long, default_value_t = 600)]
    run_timeout_secs: u64,
    /// tierdex's direct-tier page pool without a memory limit (MiB).
    #[arg(long, default_value_t = 4096)]
    unlimited_pool_mb: u64,
    /// JVM heap of Lucene in MiB (default: a quarter of the limit, at least 64).
    #[arg(long)]
    jvm_heap_mb: Option<u64>,
    /// Indexing threads per engine (when an index is built).
    #[arg(long, default_value_t = 2)]
    index_threads: usize,
    /// Indexing memory budget given to the peers (MiB).
    #[arg(long, default_value_t = 1024)]
    index_memory_mb: usize,
    /// An existing index for an engine, `ENGINE=DIR` (e.g. tierdex=/data/g1m, tierdex@split=/data/g1m-split, tierdex@direct=...); repeatable.
    #[arg(long = "index", value_name = "ENGINE=DIR")]
    indexes: Vec<String>,
    /// Parent of the cgroups.
    #[arg(long, default_value = limits::MEMORY_ROOT)]
    cgroup_parent: PathBuf,
    /// Seed of the generated queries and of the query order.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Working directory (corpus copy, indexes); default target/bench/<corpus>
    /// (the indexes of `compare` are reused).
    #[arg(long)]
    work: Option<PathBuf>,
    /// Where results go; default bench/results/<corpus>-limited.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct WorkloadArgs {
    /// A tierdex index.
    index: PathBuf,
    /// Queries per category.
    #[arg(long, default_value_t = 100)]
    per_category: usize,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Mode of every line.
    #[arg(long, default_value = "TOP_10")]
    mode: String,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Corpus: JSON lines (.zst/.gz ok), `{"id"|"url","title","body"}`.
    #[arg(long)]
    corpus: PathBuf,
    /// Index only the first N documents.
    #[arg(long)]
    docs: Option<u64>,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game
    /// file in ../shared/queries when present.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Engines to compare (comma-separated), tierdex first as the reference; variants as in
    /// `limited --engines` (e.g. tierdex:ram, tierdex@direct:ram).
    #[arg(long, default_value = "tierdex,lucene,tantivy", value_delimiter = ',')]
    engines: Vec<String>,
    /// Measured passes over the queries.
    #[arg(long)]
    passes: Option<usize>,
    /// Warm-up passes before measuring (the JVM needs several to compile
    /// Lucene's hot paths).
    #[arg(long)]
    warmup: Option<usize>,
    /// Query threads per engine.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Page pool of tierdex's direct tier in bytes (default: the CLI's, 128 MiB).
    #[arg(long)]
    pool_bytes: Option<u64>,
    /// Indexing threads per engine.
    #[arg(long, default_value_t = 2)]
    index_threads: usize,
    /// Indexing memory budget given to the peers (MiB).
    #[arg(long, default_value_t = 1024)]
    memory_mb: usize,
    /// Generated queries per category.
    #[arg(long)]
    generated: Option<usize>,
    /// Keep every N-th query of the command file.
    #[arg(long)]
    sample: Option<usize>,
    /// Directory of test collections with judgments (default ../shared/corpora).
    #[arg(long)]
    collections: Option<PathBuf>,
    /// Skip the ranking-quality part.
    #[arg(long)]
    no_quality: bool,
    /// A short run: 2 passes, every 4th command, 20 generated queries per
    /// category, quality on cranfield only.
    #[arg(long)]
    quick: bool,
    /// Reuse the indexes of a previous run with the same corpus (no indexing figures then).
    #[arg(long)]
    reuse_indexes: bool,
    /// Working directory (corpus copy, indexes); default target/bench/<corpus>.
    #[arg(long)]
    work: Option<PathBuf>,
    /// Where results go; default bench/results/<corpus>.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.command {
        Cmd::Compare(a) => compare(a),
        Cmd::Workload(a) => print_workload(a),
        Cmd::Limited(a) => limited(a),
        Cmd::LimitedReport { dir } => limited_report(&dir),
        Cmd::Cache(a) => cache_bench(a),
        Cmd::Load(a) => load_bench(a),
        Cmd::Maintenance(a) => maintenance_bench(a),
    };
    if let Err(e) = r {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn print_workload(a: WorkloadArgs) -> Result<()> {
    let searcher = Searcher::open(&a.index)?;
    for q in workload::generate(&searcher, a.per_category, a.seed)? {
        println!("{}\t{}\t{}", a.mode, q.text, q.category);
    }
    Ok(())
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} ({eta}) {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    pb
}

/// Builds each engine of `specs` once and returns its variants, in order,
/// with the reasons for those left out: a peer whose build fails, or a
/// variant whose options the built `tierdex` does not have. A failing
/// tierdex build is an error.
fn build_engines(specs: &[EngineSpec], repo: &Path) -> Result<(Vec<Engine>, Vec<String>)> {
    let mut built: BTreeMap<String, Option<Engine>> = BTreeMap::new();
    let (mut engines, mut left_out) = (Vec::new(), Vec::new());
    for spec in specs {
        if !built.contains_key(&spec.base) {
            eprintln!("building {} ...", spec.base);
            let program = match Engine::build(&spec.base, repo) {
                Ok(e) => Some(e),
                Err(e) if !spec.is_tierdex() => {
                    eprintln!("warning: {} left out: {e:#}", spec.base);
                    left_out.push(format!("{}: the build failed: {e:#}", spec.base));
                    None
                }
                Err(e) => return Err(e),
            };
            built.insert(spec.base.clone(), program);
        }
        let Some(program) = &built[&spec.base] else {
            continue;
        };
        let e = program.variant(spec.clone())?;
        let missing = e.missing_flags()?;
        if !missing.is_empty() {
            let msg = format!(
                "{}: `tierdex query-stream` has no {} yet",
                spec.name,
                missing.join(", ")
            );
            eprintln!("warning: {msg}; left out");
            left_out.push(msg);
            continue;
        }
        engines.push(e);
    }
    Ok((engines, left_out))
}

/// Names a run after its corpus (and document cap): work and results directories.
fn run_name(corpus: &Path, docs: Option<u64>) -> String {
    format!("{}{}", stem(corpus), docs.map_or(String::new(), |d| format!("-{d}")))
}

/// The search-benchmark-game command file next to the repository, when present.
fn default_command_file(repo: &Path) -> Option<PathBuf> {
    Some(repo.join("../shared/queries/search-benchmark-game/commands.txt")).filter(|p| p.exists())
}

fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.split('.').next().unwrap_or("corpus").to_string()
}

/// Writes the first `limit` documents of `source` as plain JSON lines
/// (`{"id","title","body"}`), unless an identical copy is already there.
fn prepare_corpus(source: &Path, limit: Option<u64>, out: &Path) -> Result<u64> {
    let meta = std::fs::metadata(source).with_context(|| format!("reading {}", source.display()))?;
    let stamp = format!("{} {} {:?}", source.display(), meta.len(), limit);
    let stamp_path = out.with_extension("stamp");
    if out.exists() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        let docs = std::fs::read_to_string(out.with_extension("docs"))?.trim().parse()?;
        return Ok(docs);
    }
    let corpus = Corpus::open(&[source.to_path_buf()], ReadOptions::default())?;
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    let pb = bar(limit.unwrap_or(0), "corpus");
    let mut n = 0u64;
    for doc in corpus {
        let doc = doc?;
        serde_json::to_writer(
            &mut w,
            &serde_json::json!({"id": doc.id, "title": doc.title(), "body": doc.body()}),
        )?;
        w.write_all(b"\n")?;
        n += 1;
        if n.is_multiple_of(4096) {
            pb.set_position(n);
        }
        if limit.is_some_and(|l| n >= l) {
            break;
        }
    }
    w.flush()?;
    pb.finish_and_clear();
    if n == 0 {
        bail!("{} holds no documents", source.display());
    }
    std::fs::write(out.with_extension("docs"), n.to_string())?;
    std::fs::write(stamp_path, stamp)?;
    Ok(n)
}

fn compare(a: CompareArgs) -> Result<()> {
    let started = Instant::now();
    let repo = repo_root();
    let shared = repo.join("../shared");
    let passes = a.passes.unwrap_or(if a.quick { 2 } else { 5 }).max(1);
    let warmup = a.warmup.unwrap_or(if a.quick { 2 } else { 3 });
    let per_category = a.generated.unwrap_or(if a.quick { 20 } else { 100 });
    let sample = a.sample.unwrap_or(if a.quick { 4 } else { 1 });
    let name = run_name(&a.corpus, a.docs);
    let work = a.work.clone().unwrap_or_else(|| repo.join("target/bench").join(&name));
    let out = a.out.clone().unwrap_or_else(|| repo.join("bench/results").join(&name));
    std::fs::create_dir_all(&work)?;

    if !a.engines.iter().any(|e| e == "tierdex") {
        bail!("the engines must include tierdex (the ratios are tierdex's)");
    }
    let (engines, _left_out) = build_engines(&EngineSpec::parse_list(&a.engines)?, &repo)?;
    let mut results = Results {
        machine: Machine::detect(),
        corpus: a.corpus.display().to_string(),
        passes,
        warmup,
        threads: a.threads,
        quick: a.quick,
        ..Default::default()
    };
    for e in &engines {
        results.engines.push(EngineResult {
            name: e.name.clone(),
            version: e.version()?,
            ..Default::default()
        });
    }

    let corpus = work.join("corpus.jsonl");
    results.docs = prepare_corpus(&a.corpus, a.docs, &corpus)?;
    eprintln!("corpus: {} documents", results.docs);
    // Variants with the same index key share one index (built once, its report copied).
    let mut built: BTreeMap<String, tierdex_bench::engines::IndexReport> = BTreeMap::new();
    for (e, r) in engines.iter().zip(results.engines.iter_mut()) {
        let key = e.spec.index_key();
        let dir = work.join(&key);
        if let Some(report) = built.get(&key) {
            r.index = report.clone();
            continue;
        }
        if a.reuse_indexes && dir.exists() {
            eprintln!("{}: reusing {}", e.name, dir.display());
            r.index.docs = results.docs;
            r.index.index_bytes = tierdex_bench::engines::dir_bytes(&dir)?;
            built.insert(key, r.index.clone());
            continue;
        }
        eprintln!("{}: indexing ...", e.name);
        r.index = e.index_with(&corpus, &dir, a.index_threads, a.memory_mb, &e.spec.index_args())?;
        built.insert(key, r.index.clone());
        eprintln!(
            "{}: {} docs in {:.1} s, {:.0} MiB",
            e.name,
            r.index.docs,
            r.index.wall_secs,
            r.index.index_bytes as f64 / (1 << 20) as f64
        );
    }

    // Query sets: the command file and workloads generated from the corpus.
    let mut queries: Vec<BenchQuery> = Vec::new();
    let command_file = a.queries.clone().or_else(|| default_command_file(&repo));
    if let Some(f) = &command_file {
        queries.extend(read_command_file(f, sample)?);
    }
    let searcher = Searcher::open(&work.join("tierdex"))?;
    for q in workload::generate(&searcher, per_category, 42)? {
        for mode in ["TOP_10", "TOP_10_COUNT", "COUNT"] {
            queries.push(BenchQuery {
                source: "generated".into(),
                category: q.category.clone(),
                mode: mode.into(),
                text: q.text.clone(),
            });
        }
    }
    drop(searcher);
    let lines: Vec<String> = queries.iter().map(|q| q.line()).collect();
    eprintln!(
        "{} queries x ({warmup} warm-up + {passes} measured passes) per engine",
        lines.len()
    );

    let mut answers: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
    let mut times: BTreeMap<String, Vec<QueryTime>> = BTreeMap::new();
    for (e, r) in engines.iter().zip(results.engines.iter_mut()) {
        let pb = bar((lines.len() * (warmup + passes)) as u64, &e.name);
        let options = QueryOptions {
            threads: a.threads,
            pool_bytes: a.pool_bytes,
            heap_mb: None,
        };
        let run = e.query_with(&work.join(e.spec.index_key()), &options, &lines, warmup, passes, &|n| {
            pb.set_position(n)
        })?;
        pb.finish_and_clear();
        r.query_peak_rss_kb = run.peak_rss_kb;
        r.query_wall_secs = run.wall_secs;
        r.errors = run.answers.iter().filter(|x| x.error.is_some()).count();
        eprintln!("{}: queries in {:.1} s, {} failed", e.name, run.wall_secs, r.errors);
        times.insert(e.name.clone(), query_times(&run.timings));
        answers.insert(e.name.clone(), run.answers);
    }
    results.rows = rows(&queries, &answers, &times);
    if let Some(ours) = answers.get("tierdex") {
        for (peer, theirs) in answers.iter().filter(|(n, _)| *n != "tierdex") {
            results
                .agreement
                .insert(peer.clone(), count_agreement(&queries, "commands", ours, theirs));
            results
                .overlap
                .insert(peer.clone(), top10_overlap(&queries, "commands", ours, theirs));
        }
    }

    if !a.no_quality {
        let root = a.collections.clone().unwrap_or_else(|| shared.join("corpora"));
        let mut collections = find_collections(&root)?;
        if a.quick {
            collections.retain(|c| c.name == "cranfield");
        }
        for c in &collections {
            let mut qr = QualityResult {
                collection: c.name.clone(),
                ..Default::default()
            };
            let (ids, qs): (Vec<String>, Vec<BenchQuery>) = c.bench_queries().into_iter().unzip();
            let lines: Vec<String> = qs.iter().map(|q| q.line()).collect();
            for e in &engines {
                let dir = work.join("quality").join(&c.name).join(e.spec.index_key());
                let report = e.index_with(&c.docs, &dir, a.index_threads, a.memory_mb, &e.spec.index_args())?;
                qr.docs = report.docs;
                let run = e.query(&dir, 1, &lines, 0, 1, &|_| {})?;
                qr.engines.insert(e.name.clone(), c.evaluate(&ids, &run.answers));
            }
            eprintln!("quality {}: {:?}", c.name, qr.engines);
            results.quality.push(qr);
        }
    }

    results.total_secs = started.elapsed().as_secs_f64();
    let charts = results.write(&out)?;
    println!("{}", results.markdown());
    eprintln!(
        "results: {} (results.json, results.md, {} charts) in {:.0} s",
        out.display(),
        charts.len(),
        results.total_secs
    );
    Ok(())
}

/// Whether `dir` holds a complete index of `engine`.
fn index_complete(engine: &str, dir: &Path) -> bool {
    match engine {
        "tierdex" => dir.join("manifest.json").is_file(),
        "tantivy" => dir.join("meta.json").is_file(),
        _ => std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("segments_"))
        }),
    }
}

fn limited(a: LimitedArgs) -> Result<()> {
    let started = Instant::now();
    if let Some(why) = limits::unavailable(&a.cgroup_parent) {
        eprintln!("limited: skipped: {why}");
        std::process::exit(SKIPPED);
    }
    limits::remove_on_interrupt();
    for g in limits::sweep_stale(&a.cgroup_parent) {
        eprintln!("removed the stale cgroup {}", g.display());
    }
    let repo = repo_root();
    let specs = EngineSpec::parse_list(&a.engines)?;
    if !specs.iter().any(|s| s.is_tierdex()) {
        bail!("the engines must include tierdex or a tierdex variant (its index yields the workloads)");
    }
    for m in &a.modes {
        if !tierdex_bench::commands::MODES.contains(&m.as_str()) {
            bail!("unknown mode `{m}`");
        }
    }
    if let Some(c) = a
        .categories
        .iter()
        .find(|c| !workload::CATEGORIES.contains(&c.as_str()))
    {
        bail!("unknown category `{c}` (known: {})", workload::CATEGORIES.join(", "));
    }
    if a.modes.is_empty() || !(0.0..=1.0).contains(&a.pool_share) {
        bail!("--modes must not be empty and --pool-share must be within 0..=1");
    }
    let mut limits_mb: Vec<u64> = Vec::new();
    for l in if a.sweep.is_empty() {
        vec![a.memory_mb]
    } else {
        a.sweep.clone()
    } {
        if !limits_mb.contains(&l) {
            limits_mb.push(l);
        }
    }
    let name = run_name(&a.corpus, a.docs);
    let work = a.work.clone().unwrap_or_else(|| repo.join("target/bench").join(&name));
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| repo.join("bench/results").join(format!("{name}-limited")));
    std::fs::create_dir_all(&work)?;

    let (engines, left_out) = build_engines(&specs, &repo)?;

    // Indexes: given, reused from the working directory, or built.
    let mut given: BTreeMap<String, PathBuf> = BTreeMap::new();
    for i in &a.indexes {
        let Some((engine, dir)) = i.split_once('=') else {
            bail!("--index {i}: expected ENGINE=DIR");
        };
        given.insert(engine.to_string(), PathBuf::from(dir));
    }
    let mut corpus_copy: Option<PathBuf> = None;
    let mut indexes: BTreeMap<String, (PathBuf, Option<tierdex_bench::engines::IndexReport>)> = BTreeMap::new();
    for (key, engine) in engines.iter().map(|e| (e.spec.index_key(), e)) {
        if indexes.contains_key(&key) {
            continue;
        }
        let base = &engine.spec.base;
        let dir = given.get(&key).cloned().unwrap_or_else(|| work.join(&key));
        if index_complete(base, &dir) {
            eprintln!("{key}: using the index in {}", dir.display());
            indexes.insert(key, (dir, None));
            continue;
        }
        if given.contains_key(&key) {
            bail!("--index {key}={}: no complete {base} index there", dir.display());
        }
        let corpus = match &corpus_copy {
            Some(c) => c.clone(),
            None => {
                let c = work.join("corpus.jsonl");
                let n = prepare_corpus(&a.corpus, a.docs, &c)?;
                eprintln!("corpus: {n} documents");
                corpus_copy = Some(c.clone());
                c
            }
        };
        eprintln!("{key}: indexing ...");
        let report = engine.index_with(
            &corpus,
            &dir,
            a.index_threads,
            a.index_memory_mb,
            &engine.spec.index_args(),
        )?;
        eprintln!(
            "{key}: {} docs in {:.1} s, {:.0} MiB",
            report.docs,
            report.wall_secs,
            report.index_bytes as f64 / (1 << 20) as f64
        );
        indexes.insert(key, (dir, Some(report)));
    }

    // Query sets, from the tierdex index (read here, before any cache drop).
    let tierdex_index = indexes
        .iter()
        .find(|(k, _)| k.as_str() == "tierdex")
        .or_else(|| indexes.iter().find(|(k, _)| k.starts_with("tierdex")))
        .map(|(_, (d, _))| d.clone())
        .context("no tierdex index")?;
    let searcher = Searcher::open(&tierdex_index)?;
    let docs = searcher.index().num_docs();
    let wanted = |q: &workload::WorkloadQuery| a.categories.is_empty() || a.categories.contains(&q.category);
    let mut generated = workload::generate(&searcher, a.generated, a.seed)?;
    generated.retain(wanted);
    let categories = if a.categories.is_empty() {
        workload::CATEGORIES.len()
    } else {
        a.categories.len()
    };
    let mut spare = workload::generate(&searcher, a.warmup_queries / categories + 2, a.seed ^ 0x5eed_5eed)?;
    spare.retain(wanted);
    drop(searcher);
    let command_file = if a.no_commands {
        None
    } else {
        a.queries.clone().or_else(|| default_command_file(&repo))
    };
    let command_wanted = |q: &BenchQuery| a.command_categories.is_empty() || a.command_categories.contains(&q.category);
    let mut measured: Vec<BenchQuery> = match &command_file {
        Some(f) => read_command_file(f, a.sample)?
            .into_iter()
            .filter(command_wanted)
            .collect(),
        None => Vec::new(),
    };
    let with_modes = |qs: Vec<workload::WorkloadQuery>| -> Vec<BenchQuery> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        qs.into_iter()
            .map(|q| {
                let i = seen.entry(q.category.clone()).or_default();
                *i += 1;
                BenchQuery {
                    source: "generated".into(),
                    mode: a.modes[(*i - 1) % a.modes.len()].clone(),
                    category: q.category,
                    text: q.text,
                }
            })
            .collect()
    };
    measured.extend(with_modes(generated));
    let mut rng = Pcg64::seed_from_u64(a.seed);
    measured.shuffle(&mut rng);
    let taken: std::collections::HashSet<&str> = measured.iter().map(|q| q.text.as_str()).collect();
    let fresh = |qs: Vec<BenchQuery>, rng: &mut Pcg64| -> Vec<BenchQuery> {
        let mut seen = std::collections::HashSet::new();
        let mut v: Vec<BenchQuery> = qs
            .into_iter()
            .filter(|q| !taken.contains(q.text.as_str()) && seen.insert(q.text.clone()))
            .collect();
        v.shuffle(rng);
        v
    };
    let spare = fresh(with_modes(spare), &mut rng);
    let unsampled = match &command_file {
        Some(f) => fresh(
            read_command_file(f, 1)?.into_iter().filter(command_wanted).collect(),
            &mut rng,
        ),
        None => Vec::new(),
    };
    // Half generated, half command-file queries, interleaved.
    let mut warmup: Vec<BenchQuery> = Vec::new();
    let (mut x, mut y) = (spare.into_iter(), unsampled.into_iter());
    while warmup.len() < a.warmup_queries {
        match (x.next(), y.next()) {
            (None, None) => break,
            (p, q) => warmup.extend(p.into_iter().chain(q).take(a.warmup_queries - warmup.len())),
        }
    }
    let measured_lines: Vec<String> = measured.iter().map(|q| q.line()).collect();
    let warmup_lines: Vec<String> = warmup.iter().map(|q| q.line()).collect();
    let mut by_source = BTreeMap::new();
    for q in &measured {
        *by_source.entry(q.source.clone()).or_insert(0usize) += 1;
    }
    eprintln!(
        "{} measured queries ({by_source:?}) after {} warm-up queries, per engine and limit",
        measured.len(),
        warmup.len()
    );

    let mut results = LimitedResults {
        machine: Machine::detect(),
        corpus: a.corpus.display().to_string(),
        corpus_bytes: std::fs::metadata(&a.corpus).map_or(0, |m| m.len()),
        docs,
        limits_mb: limits_mb.clone(),
        left_out,
        workload: Workload {
            command_file: command_file.as_ref().map(|f| f.display().to_string()),
            sample: a.sample,
            generated_per_category: a.generated,
            modes: a.modes.clone(),
            seed: a.seed,
            warmup: warmup.len(),
            measured: measured.len(),
            by_source,
            categories: a.categories.clone(),
            command_categories: a.command_categories.clone(),
        },
        read_ahead_kb: limits::read_ahead_kb(&tierdex_index),
        counter: limited::COUNTER_NOTE.into(),
        heap_rule: match a.jvm_heap_mb {
            Some(h) => format!("JVM heap (-Xms = -Xmx): {h} MiB under every limit (--jvm-heap-mb)."),
            None => limited::HEAP_RULE.into(),
        },
        pool_share: a.pool_share,
        unlimited_pool_mb: Some(a.unlimited_pool_mb),
        queries: measured.clone(),
        ..Default::default()
    };
    for e in &engines {
        let (dir, report) = &indexes[&e.spec.index_key()];
        results.engines.push(EngineInfo {
            name: e.name.clone(),
            base: e.spec.base.clone(),
            version: e.version()?,
            access: e.spec.access(),
            index_dir: dir.display().to_string(),
            index_bytes: dir_bytes(dir)?,
            index: report.clone(),
        });
    }
    for &mb in &limits_mb {
        for e in &engines {
            let dir = &indexes[&e.spec.index_key()].0;
            let options = QueryOptions {
                threads: 1,
                pool_bytes: Some(match mb {
                    0 => a.unlimited_pool_mb << 20,
                    _ => ((mb << 20) as f64 * a.pool_share) as u64,
                }),
                heap_mb: (e.spec.base == "lucene").then(|| jvm_heap_mb(mb, a.jvm_heap_mb)),
            };
            let plan = Plan {
                engine: e,
                index: dir,
                memory_mb: mb,
                options,
                warmup: &warmup_lines,
                measured: &measured_lines,
                cgroup_parent: &a.cgroup_parent,
                time_limit: (a.run_timeout_secs > 0).then(|| std::time::Duration::from_secs(a.run_timeout_secs)),
            };
            let pb = bar((warmup_lines.len() + measured_lines.len()) as u64, &e.name);
            pb.set_message(limit_name(mb));
            let r = limited::run(&plan, &|n| {
                if n % 16 == 0 {
                    pb.set_position(n)
                }
            });
            pb.finish_and_clear();
            let run = match r {
                Ok(mut run) => {
                    limited::categorize(&mut run, &measured);
                    run
                }
                Err(err) => limited::Run {
                    engine: e.name.clone(),
                    memory_mb: mb,
                    outcome: "failed".into(),
                    detail: format!("{err:#}"),
                    measured_queries: measured_lines.len(),
                    ..Default::default()
                },
            };
            eprintln!(
                "{} @ {}: {}{} | {:.0} QPS, p50 {:.0} µs, p99 {:.0} µs, {:.1} KiB read/query, max memory {:.0} MiB, \
                 failcnt {}, start+warm-up {:.1} s / {:.1} MiB read",
                e.name,
                limit_name(mb),
                run.outcome,
                if run.detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", run.detail)
                },
                run.qps,
                run.latency.p50_us,
                run.latency.p99_us,
                run.bytes_per_query() / 1024.0,
                run.memory.max_usage_bytes as f64 / (1 << 20) as f64,
                run.memory.failcnt,
                run.setup_secs,
                run.setup_io.read_bytes as f64 / (1 << 20) as f64,
            );
            results.runs.push(run);
            results.total_secs = started.elapsed().as_secs_f64();
            results.write_json(&out)?;
        }
        results.compute_agreement(mb);
    }
    results.total_secs = started.elapsed().as_secs_f64();
    let charts = results.write(&out)?;
    println!("{}", results.markdown());
    eprintln!(
        "results: {} (limited.json, limited.md, {} charts) in {:.0} s",
        out.display(),
        charts.len(),
        results.total_secs
    );
    Ok(())
}

fn limited_report(dir: &Path) -> Result<()> {
    let path = dir.join("limited.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let results: LimitedResults = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let charts = results.write(dir)?;
    eprintln!("rewrote {} (limited.md, {} charts)", dir.display(), charts.len());
    Ok(())
}

fn cache_bench(a: CacheBenchArgs) -> Result<()> {
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
        run(
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

fn maintenance_bench(a: MaintenanceArgs) -> Result<()> {
    use tierdex_bench::maintenance;
    let earlier = || -> Result<(Vec<maintenance::StrategyRun>, Option<String>)> {
        let json = a.out.join("maintenance.json");
        let runs = serde_json::from_str(
            &std::fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?,
        )
        .with_context(|| format!("parsing {}", json.display()))?;
        let what = std::fs::read_to_string(a.out.join("maintenance.md"))
            .ok()
            .and_then(|md| {
                md.lines()
                    .next()
                    .and_then(|l| l.strip_prefix("# Maintenance: "))
                    .map(str::to_string)
            });
        Ok((runs, what))
    };
    if a.report_only {
        let (runs, what) = earlier()?;
        let what = what.unwrap_or_else(|| "from maintenance.json".into());
        print!("{}", maintenance::write(&a.out, &runs, &what)?);
        return Ok(());
    }
    if a.flushes == 0 || a.docs_per_flush == 0 {
        bail!("--flushes and --docs-per-flush must be positive");
    }
    let total = a.flushes * a.docs_per_flush;
    let docs: Vec<tierdex::Document> = match &a.corpus {
        Some(path) => {
            let corpus = Corpus::open(std::slice::from_ref(path), ReadOptions::default())?;
            let docs = corpus.take(total).collect::<std::result::Result<Vec<_>, _>>()?;
            if docs.len() < total {
                bail!(
                    "{} holds {} documents, fewer than {} flushes × {}",
                    path.display(),
                    docs.len(),
                    a.flushes,
                    a.docs_per_flush
                );
            }
            docs
        }
        None => {
            let gen = tierdex::corpus::gen::Generator::new(tierdex::corpus::gen::GenOptions {
                docs: total as u64,
                seed: a.seed,
                ..Default::default()
            });
            gen.docs().collect()
        }
    };
    let batches: Vec<Vec<tierdex::Document>> = docs
        .chunks(a.docs_per_flush)
        .map(<[tierdex::Document]>::to_vec)
        .collect();
    drop(docs);
    // A fixed query set drawn from an index of the first batch.
    std::fs::create_dir_all(&a.work)?;
    let qdir = a.work.join("queries-index");
    let _ = std::fs::remove_dir_all(&qdir);
    tierdex::indexing::build_index(batches[0].iter().cloned().map(Ok), &qdir, &Default::default())?;
    let queries: Vec<String> = workload::generate(&Searcher::open(&qdir)?, a.queries_per_category, a.seed)?
        .into_iter()
        .map(|q| q.text)
        .collect();
    let _ = std::fs::remove_dir_all(&qdir);
    let strategies = if a.strategies.is_empty() {
        tierdex::update::Strategy::ALL.to_vec()
    } else {
        a.strategies.clone()
    };
    let what = format!(
        "{} flushes of {} documents ({}), {} queries after each flush (top-10 and count, best of {})",
        a.flushes,
        a.docs_per_flush,
        a.corpus
            .as_ref()
            .map_or(format!("generated corpus, seed {}", a.seed), |p| p
                .display()
                .to_string()),
        queries.len(),
        a.repeats
    );
    eprintln!("maintenance: {what}");
    let mut runs = match a.append {
        true => {
            let (mut runs, before) = earlier()?;
            if before.as_deref().is_some_and(|b| b != what) {
                bail!(
                    "--append: {} holds another workload ({})",
                    a.out.display(),
                    before.unwrap_or_default()
                );
            }
            runs.retain(|r| !strategies.iter().any(|s| s.name() == r.strategy));
            runs
        }
        false => Vec::new(),
    };
    for st in strategies {
        let pb = ProgressBar::new(a.flushes as u64);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} flushes ({elapsed}, eta {eta})")?
                .progress_chars("=> "),
        );
        pb.set_prefix(st.name().to_string());
        let run = maintenance::run_strategy(&a.work, st, &batches, &queries, a.repeats, &|i| {
            pb.set_position(i as u64)
        })?;
        pb.finish_and_clear();
        eprintln!(
            "{:>16}: {:.1} s maintenance, mean query {:.0} µs",
            run.strategy,
            run.total_secs(),
            run.mean_query_us()
        );
        runs.push(run);
        runs.sort_by_key(|r| {
            tierdex::update::Strategy::ALL
                .iter()
                .position(|s| s.name() == r.strategy)
                .unwrap_or(usize::MAX)
        });
        // Partial results survive an interruption.
        maintenance::write(&a.out, &runs, &what)?;
    }
    print!("{}", maintenance::write(&a.out, &runs, &what)?);
    Ok(())
}

/// "first / peak / last MiB" of RSS samples `[[secs, bytes], ...]`.
fn rss_summary(v: &serde_json::Value) -> String {
    let b: Vec<f64> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s[1].as_f64())
        .map(|x| x / 1048576.0)
        .collect();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => format!(
            "{f:.0} MiB at start, {:.0} MiB peak, {l:.0} MiB at the end ({} samples)",
            b.iter().copied().fold(0.0, f64::max),
            b.len()
        ),
        _ => "none".into(),
    }
}

/// What a load run returns: per-rate results, the update stream's report,
/// the ids found missing, and RSS samples `(secs, bytes)`.
type LoadOutcome = (
    Vec<tierdex_bench::load::RateResult>,
    Option<tierdex_bench::load::UpdateReport>,
    Option<Vec<u64>>,
    Vec<(f64, u64)>,
);

fn load_bench(a: LoadArgs) -> Result<()> {
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
