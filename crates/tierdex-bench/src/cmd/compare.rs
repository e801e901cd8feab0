//! `tierdex-bench compare`: builds the engines, indexes a corpus with each,
//! runs the query sets, measures ranking quality, and writes JSON, markdown
//! and charts.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tierdex::search::Searcher;
use tierdex_bench::commands::{read_command_file, BenchQuery};
use tierdex_bench::engines::{Answer, EngineSpec, QueryOptions};
use tierdex_bench::quality::find_collections;
use tierdex_bench::report::{EngineResult, Machine, QualityResult, Results, TypedResults};
use tierdex_bench::stats::{count_agreement, query_times, rows, top10_overlap, typed_agreement, QueryTime};
use tierdex_bench::workload;
use tierdex_bench::workload::typed::{TextPools, TypedSample};

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
    /// `limited --engines` (e.g. tierdex:ram, tierdex@direct:ram, lucene-bp: Lucene with its
    /// documents reordered by recursive graph bisection, in its own index).
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
    /// The typed workload (text top-10 with filters of 0.1% to 50% selectivity,
    /// sorts by price and date, range counts, aggregations (terms, a monthly
    /// date histogram and stats over `match_all` and over a text query
    /// matching about 10%), as structured queries): `auto`
    /// runs it when the corpus's first record has typed fields (`tierdex gen
    /// --typed`); `on` requires them; `only` runs nothing else (no command file,
    /// no generated text workload); `off` drops the typed fields.
    #[arg(long, value_enum, default_value_t = TypedMode::Auto)]
    pub typed: TypedMode,
    /// Working directory (corpus copy, indexes); default target/bench/<corpus>.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Where results go; default bench/results/<corpus>.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// When `compare` runs the typed workload.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypedMode {
    /// When the corpus has typed fields.
    Auto,
    /// Always (a corpus without typed fields is an error).
    On,
    /// Never: typed fields are dropped.
    Off,
    /// Only the typed workload.
    Only,
}

/// Documents of the corpus sampled to choose the typed workload's filters.
const TYPED_SAMPLE: u64 = 200_000;

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

    let has_typed = a.typed != TypedMode::Off && corpus_has_typed_fields(&a.corpus)?;
    if !has_typed && matches!(a.typed, TypedMode::On | TypedMode::Only) {
        bail!(
            "--typed {:?}: the first record of {} has no typed field ({})",
            a.typed,
            a.corpus.display(),
            TYPED_FIELDS.join(", ")
        );
    }
    let corpus = work.join("corpus.jsonl");
    let prepared = prepare_corpus(&a.corpus, a.input.docs, &corpus, has_typed)?;
    results.docs = prepared.docs;
    eprintln!(
        "corpus: {} documents{}",
        results.docs,
        if has_typed { " with typed fields" } else { "" }
    );
    let mapping = work.join("mapping.json");
    let mut typed_results = TypedResults::default();
    if has_typed {
        std::fs::write(&mapping, serde_json::to_string_pretty(&typed_mapping())?)?;
    }
    // Variants with the same index key share one index (built once, its report copied).
    let mut built: BTreeMap<String, tierdex_bench::engines::IndexReport> = BTreeMap::new();
    for (e, r) in engines.iter().zip(results.engines.iter_mut()) {
        let key = e.spec.index_key();
        let dir = work.join(&key);
        if let Some(report) = built.get(&key) {
            r.index = report.clone();
            continue;
        }
        let mut args = e.spec.index_args();
        let mut input = &corpus;
        if has_typed && e.spec.is_tierdex() {
            // Until `tierdex index` takes mappings, tierdex indexes the text
            // only (its typed queries then fail and are left out).
            if e.index_has_flag("--mapping")? {
                args.extend(["--mapping".to_string(), mapping.display().to_string()]);
                typed_results.tierdex_index = "typed fields indexed (`tierdex index --mapping`)".into();
            } else if let Some(text) = &prepared.text_only {
                input = text;
                typed_results.tierdex_index =
                    "title and body only: this `tierdex index` has no `--mapping` yet, so its typed queries fail"
                        .into();
            }
        }
        if a.reuse_indexes && dir.exists() {
            eprintln!("{}: reusing {}", e.name, dir.display());
            r.index.docs = results.docs;
            r.index.index_bytes = tierdex_bench::engines::dir_bytes(&dir)?;
            built.insert(key, r.index.clone());
            continue;
        }
        eprintln!("{}: indexing ...", e.name);
        r.index = e.index_with(input, &dir, a.index_threads, a.memory_mb, &args)?;
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
    let only_typed = a.typed == TypedMode::Only;
    let command_file = a.input.queries.clone().or_else(|| default_command_file(&repo));
    if let (Some(f), false) = (&command_file, only_typed) {
        queries.extend(read_command_file(f, sample)?);
    }
    let searcher = Searcher::open(&work.join("tierdex"))?;
    let generated = workload::generate(&searcher, per_category, 42)?;
    drop(searcher);
    for q in generated.iter().filter(|_| !only_typed) {
        for mode in ["TOP_10", "TOP_10_COUNT", "COUNT"] {
            queries.push(BenchQuery {
                source: "generated".into(),
                category: q.category.clone(),
                mode: mode.into(),
                text: q.text.clone(),
            });
        }
    }
    if has_typed {
        let every = results.docs.div_ceil(TYPED_SAMPLE).max(1);
        let file = std::fs::File::open(&corpus).with_context(|| format!("reading {}", corpus.display()))?;
        let pools = TextPools::from_workload(&generated);
        let typed_sample = TypedSample::read_watching(BufReader::new(file), every, &pools.words)?;
        let typed = workload::typed::generate(&typed_sample, &pools, per_category, 42);
        typed_results.sample_docs = typed_sample.docs.len();
        for q in &typed {
            if let Some(s) = q.selectivity {
                let e = typed_results.selectivity.entry(q.category.clone()).or_insert((0, 0.0));
                e.1 = (e.1 * e.0 as f64 + s) / (e.0 + 1) as f64;
                e.0 += 1;
            }
            for mode in q.modes {
                queries.push(BenchQuery {
                    source: "typed".into(),
                    category: q.category.clone(),
                    mode: mode.to_string(),
                    text: q.json.clone(),
                });
            }
        }
        eprintln!(
            "typed workload: {} queries from a sample of {} documents",
            typed.len(),
            typed_sample.docs.len()
        );
    }
    let lines: Vec<String> = queries.iter().map(|q| q.line()).collect();
    // The exact lines every engine answers, with their categories: what a
    // per-query look at one category replays (`tierdex query-stream`).
    let mut tsv = String::new();
    for (l, q) in lines.iter().zip(&queries) {
        tsv.push_str(&format!("{l}\t{}\n", q.category));
    }
    std::fs::write(work.join("queries.tsv"), tsv)?;
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
        let index = work.join(e.spec.index_key());
        let structured = !has_typed || e.answers_structured_queries(&index, results.docs)?;
        let mut run = e.query_with(&index, &options, &lines, warmup, passes, &|n| pb.set_position(n))?;
        pb.finish_and_clear();
        if !structured {
            // Its answers to the typed queries are not answers to them (a
            // tierdex without structured queries reads the JSON as text).
            eprintln!(
                "{}: does not answer structured queries (probe); its typed queries count as failed",
                e.name
            );
            typed_results.unsupported.push(e.name.clone());
            for (q, answer) in queries.iter().zip(run.answers.iter_mut()) {
                if q.source == "typed" {
                    answer.error = Some("structured queries not supported (probe failed)".into());
                }
            }
        }
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
    if has_typed {
        // Every engine's structured answers against Lucene's.
        if let Some(reference) = answers.get("lucene") {
            for (name, theirs) in answers.iter().filter(|(n, _)| *n != "lucene") {
                typed_results
                    .agreement
                    .insert(name.clone(), typed_agreement(&queries, "typed", theirs, reference));
            }
        }
        results.typed = Some(typed_results);
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
