//! `tierdex-bench limited` and `limited-report`: memory-limited runs of
//! every engine, and rewriting their report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::{dir_bytes, EngineSpec, QueryOptions};
use tierdex_bench::limited::{self, jvm_heap_mb, limit_name, EngineInfo, LimitedResults, Plan, Workload};
use tierdex_bench::limits;
use tierdex_bench::report::Machine;
use tierdex_bench::workload;

use super::*;

/// Exit status of a skipped run (the automake convention).
const SKIPPED: i32 = 77;

/// Options of `tierdex-bench limited`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus: JSON lines (.zst/.gz ok), `{"id"|"url","title","body"}`; only
    /// read when an index must be built.
    #[arg(long)]
    pub corpus: PathBuf,
    #[command(flatten)]
    pub input: CorpusQueries,
    /// Engines and variants (comma-separated): tierdex,
    /// tierdex:<ram|mmap|buffered|direct>, tierdex:mmap-<os|random|adaptive>,
    /// tierdex@<split|direct|split+direct>:<tier> (index layout and codec), lucene,
    /// lucene:<normal|random|sequential>, lucene-bp (documents reordered by recursive graph
    /// bisection; its own index), lucene-bp:<normal|random|sequential>, tantivy.
    #[arg(long, default_value = "tierdex,lucene,tantivy", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Memory limit in MiB (when no --sweep).
    #[arg(long, default_value_t = 256)]
    pub memory_mb: u64,
    /// Memory limits to run, in MiB (0: unlimited), e.g. 128,256,1024,0.
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<u64>,
    /// Measure every N-th query of the command file.
    #[arg(long, default_value_t = 8)]
    pub sample: usize,
    /// Generated queries per category.
    #[arg(long, default_value_t = 20)]
    pub generated: usize,
    /// Only these generated categories (comma-separated, e.g. term-10,term-100,term-1k), in the
    /// measured pass and the warm-up; default: all.
    #[arg(long, value_delimiter = ',')]
    pub categories: Vec<String>,
    /// Leave the command file out (measured pass and warm-up): generated queries only.
    #[arg(long)]
    pub no_commands: bool,
    /// The typed workload instead of the text one (a corpus of `tierdex gen --typed`): text
    /// top-10 queries with filters of 0.1% to 50% selectivity, each next to the same text query
    /// without its filter (`unfiltered-<level>-<kind>`), and sorts by price and date.
    #[arg(long)]
    pub typed: bool,
    /// Only these command-file categories (comma-separated: term, and, or, phrase, mixed), in the
    /// measured pass and the warm-up; default: all.
    #[arg(long, value_delimiter = ',')]
    pub command_categories: Vec<String>,
    /// Modes the generated queries cycle through.
    #[arg(long, default_value = "TOP_10,TOP_10_COUNT,COUNT", value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Warm-up queries before the measured pass (for the JIT), none of them
    /// in the measured set.
    #[arg(long, default_value_t = 500)]
    pub warmup_queries: usize,
    /// Share of the memory limit given to tierdex's direct-tier page pool.
    #[arg(long, default_value_t = 0.5)]
    pub pool_share: f64,
    /// Longest one engine may run under one limit (seconds; 0: no limit). An engine that
    /// thrashes is stopped and reported as timed out, with the queries it answered.
    #[arg(long, default_value_t = 600)]
    pub run_timeout_secs: u64,
    /// tierdex's direct-tier page pool without a memory limit (MiB).
    #[arg(long, default_value_t = 4096)]
    pub unlimited_pool_mb: u64,
    /// JVM heap of Lucene in MiB (default: a quarter of the limit, at least 64).
    #[arg(long)]
    pub jvm_heap_mb: Option<u64>,
    /// Indexing threads per engine (when an index is built).
    #[arg(long, default_value_t = 2)]
    pub index_threads: usize,
    /// Indexing memory budget given to the peers (MiB).
    #[arg(long, default_value_t = 1024)]
    pub index_memory_mb: usize,
    /// An existing index for an engine, `ENGINE=DIR` (e.g. tierdex=/data/g1m, tierdex@split=/data/g1m-split, tierdex@direct=...); repeatable.
    #[arg(long = "index", value_name = "ENGINE=DIR")]
    pub indexes: Vec<String>,
    /// Parent of the cgroups.
    #[arg(long, default_value = limits::MEMORY_ROOT)]
    pub cgroup_parent: PathBuf,
    /// Seed of the generated queries and of the query order.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Working directory (corpus copy, indexes); default target/bench/<corpus>
    /// (the indexes of `compare` are reused).
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Where results go; default bench/results/<corpus>-limited.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `tierdex-bench limited`.
pub fn run(a: Args) -> Result<()> {
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
    let name = run_name(&a.corpus, a.input.docs);
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
                let n = prepare_corpus(&a.corpus, a.input.docs, &c, false)?.docs;
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
    let typed = if a.typed {
        let measured = typed_workload(&a.corpus, docs, &generated, a.generated, a.seed)?;
        let spare = typed_workload(&a.corpus, docs, &generated, a.generated, a.seed ^ 0x5eed_5eed)?;
        Some((measured, spare))
    } else {
        None
    };
    generated.retain(wanted);
    let categories = if a.categories.is_empty() {
        workload::CATEGORIES.len()
    } else {
        a.categories.len()
    };
    let mut spare = workload::generate(&searcher, a.warmup_queries / categories + 2, a.seed ^ 0x5eed_5eed)?;
    spare.retain(wanted);
    drop(searcher);
    let command_file = if a.no_commands || a.typed {
        None
    } else {
        a.input.queries.clone().or_else(|| default_command_file(&repo))
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
    let typed_spare = match typed {
        Some((typed, spare)) => {
            measured = typed;
            spare
        }
        None => {
            measured.extend(with_modes(generated));
            Vec::new()
        }
    };
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
    let spare = if a.typed {
        fresh(typed_spare, &mut rng)
    } else {
        fresh(with_modes(spare), &mut rng)
    };
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
            if a.typed {
                print_filter_bytes(&run);
            }
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

/// Runs `tierdex-bench limited-report`: rewrites `limited.md` and the
/// charts from a results directory's `limited.json`.
pub fn report(dir: &Path) -> Result<()> {
    let path = dir.join("limited.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let results: LimitedResults = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let charts = results.write(dir)?;
    eprintln!("rewrote {} (limited.md, {} charts)", dir.display(), charts.len());
    Ok(())
}

/// Documents of the corpus sampled to choose the typed workload's filters.
const TYPED_SAMPLE: u64 = 200_000;

/// The typed workload of `--typed`: every filtered text query followed by
/// its text query alone (`unfiltered-<level>-<kind>`), sorts and range
/// counts, each in its first mode.
fn typed_workload(
    corpus: &Path,
    docs: u64,
    texts: &[workload::WorkloadQuery],
    per_category: usize,
    seed: u64,
) -> Result<Vec<BenchQuery>> {
    let every = docs.div_ceil(TYPED_SAMPLE).max(1);
    let sample = workload::typed::TypedSample::read(open_lines(corpus)?, every)?;
    if !sample.has_typed() {
        bail!(
            "--typed: {} has no typed fields (make one with `tierdex gen --typed`)",
            corpus.display()
        );
    }
    let pools = workload::typed::TextPools::from_workload(texts);
    let mut out = Vec::new();
    for q in workload::typed::generate(&sample, &pools, per_category, seed) {
        let mode = q.modes[0].to_string();
        if let Some(level_kind) = q.category.strip_prefix("filter-") {
            let v: serde_json::Value = serde_json::from_str(&q.json)?;
            let text = v["query"]["bool"]["must"][0].clone();
            out.push(BenchQuery {
                source: "typed".into(),
                category: format!("unfiltered-{level_kind}"),
                mode: mode.clone(),
                text: serde_json::json!({ "query": text }).to_string(),
            });
        }
        out.push(BenchQuery {
            source: "typed".into(),
            category: q.category,
            mode,
            text: q.json,
        });
    }
    Ok(out)
}

/// Prints, per filter category of `run`, device bytes per query next to
/// those of the same text queries without the filter.
fn print_filter_bytes(run: &limited::Run) {
    let bytes: BTreeMap<&str, f64> = run
        .by_category
        .iter()
        .map(|c| (c.category.as_str(), c.summary.read_bytes_per_query))
        .collect();
    eprintln!("  device bytes per query, filtered / the same text query unfiltered:");
    for (category, filtered) in &bytes {
        let Some(level_kind) = category.strip_prefix("filter-") else {
            continue;
        };
        if let Some(plain) = bytes.get(format!("unfiltered-{level_kind}").as_str()) {
            eprintln!(
                "    {category:<18} {:>9.1} KiB / {:>9.1} KiB = {:.2}",
                filtered / 1024.0,
                plain / 1024.0,
                if *plain > 0.0 { filtered / plain } else { f64::NAN }
            );
        }
    }
}
