//! `tierdex-bench`: tierdex side by side with Lucene and tantivy.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::{Answer, Engine};
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
    /// Engines to compare (comma-separated).
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
            &serde_json::json!({"id": doc.id, "title": doc.title, "body": doc.body}),
        )?;
        w.write_all(b"\n")?;
        n += 1;
        if n % 4096 == 0 {
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
    let name = format!(
        "{}{}",
        stem(&a.corpus),
        a.docs.map_or(String::new(), |d| format!("-{d}"))
    );
    let work = a.work.clone().unwrap_or_else(|| repo.join("target/bench").join(&name));
    let out = a.out.clone().unwrap_or_else(|| repo.join("bench/results").join(&name));
    std::fs::create_dir_all(&work)?;

    if !a.engines.iter().any(|e| e == "tierdex") {
        bail!("the engines must include tierdex (the ratios are tierdex's)");
    }
    let mut engines = Vec::new();
    for name in &a.engines {
        eprintln!("building {name} ...");
        match Engine::build(name, &repo) {
            Ok(e) => engines.push(e),
            Err(e) if name != "tierdex" => eprintln!("warning: {name} left out: {e:#}"),
            Err(e) => return Err(e),
        }
    }
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
    for (e, r) in engines.iter().zip(results.engines.iter_mut()) {
        let dir = work.join(&e.name);
        if a.reuse_indexes && dir.exists() {
            eprintln!("{}: reusing {}", e.name, dir.display());
            r.index.docs = results.docs;
            r.index.index_bytes = tierdex_bench::engines::dir_bytes(&dir)?;
            continue;
        }
        eprintln!("{}: indexing ...", e.name);
        r.index = e.index(&corpus, &dir, a.index_threads, a.memory_mb)?;
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
    let command_file = a
        .queries
        .clone()
        .or_else(|| Some(shared.join("queries/search-benchmark-game/commands.txt")).filter(|p| p.exists()));
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
        let run = e.query(&work.join(&e.name), a.threads, &lines, warmup, passes, &|n| {
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
                let dir = work.join("quality").join(&c.name).join(&e.name);
                let report = e.index(&c.docs, &dir, a.index_threads, a.memory_mb)?;
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
