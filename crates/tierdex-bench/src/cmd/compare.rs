//! `tierdex-bench compare`: builds the engines, indexes a corpus with each,
//! runs the query sets, measures ranking quality, and writes JSON, markdown
//! and charts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::{Answer, EngineSpec, QueryOptions};
use tierdex_bench::quality::find_collections;
use tierdex_bench::report::{EngineResult, Machine, QualityResult, Results};
use tierdex_bench::stats::{count_agreement, query_times, rows, top10_overlap, QueryTime};
use tierdex_bench::workload;

use super::*;

/// Options of `tierdex-bench compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus: JSON lines (.zst/.gz ok), `{"id"|"url","title","body"}`.
    #[arg(long)]
    pub corpus: PathBuf,
    #[command(flatten)]
    pub input: CorpusQueries,
    /// Engines to compare (comma-separated), tierdex first as the reference; variants as in
    /// `limited --engines` (e.g. tierdex:ram, tierdex@direct:ram).
    #[arg(long, default_value = "tierdex,lucene,tantivy", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Measured passes over the queries.
    #[arg(long)]
    pub passes: Option<usize>,
    /// Warm-up passes before measuring (the JVM needs several to compile
    /// Lucene's hot paths).
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Query threads per engine.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Page pool of tierdex's direct tier in bytes (default: the CLI's, 128 MiB).
    #[arg(long)]
    pub pool_bytes: Option<u64>,
    /// Indexing threads per engine.
    #[arg(long, default_value_t = 2)]
    pub index_threads: usize,
    /// Indexing memory budget given to the peers (MiB).
    #[arg(long, default_value_t = 1024)]
    pub memory_mb: usize,
    /// Generated queries per category.
    #[arg(long)]
    pub generated: Option<usize>,
    /// Keep every N-th query of the command file.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Directory of test collections with judgments (default ../shared/corpora).
    #[arg(long)]
    pub collections: Option<PathBuf>,
    /// Skip the ranking-quality part.
    #[arg(long)]
    pub no_quality: bool,
    /// A short run: 2 passes, every 4th command, 20 generated queries per
    /// category, quality on cranfield only.
    #[arg(long)]
    pub quick: bool,
    /// Reuse the indexes of a previous run with the same corpus (no indexing figures then).
    #[arg(long)]
    pub reuse_indexes: bool,
    /// Working directory (corpus copy, indexes); default target/bench/<corpus>.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Where results go; default bench/results/<corpus>.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `tierdex-bench compare`.
pub fn run(a: Args) -> Result<()> {
    let started = Instant::now();
    let repo = repo_root();
    let shared = repo.join("../shared");
    let passes = a.passes.unwrap_or(if a.quick { 2 } else { 5 }).max(1);
    let warmup = a.warmup.unwrap_or(if a.quick { 2 } else { 3 });
    let per_category = a.generated.unwrap_or(if a.quick { 20 } else { 100 });
    let sample = a.sample.unwrap_or(if a.quick { 4 } else { 1 });
    let name = run_name(&a.corpus, a.input.docs);
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
    results.docs = prepare_corpus(&a.corpus, a.input.docs, &corpus)?;
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
    let command_file = a.input.queries.clone().or_else(|| default_command_file(&repo));
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
