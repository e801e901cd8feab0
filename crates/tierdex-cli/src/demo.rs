//! `tierdex demo`: generate the default corpus (text and typed fields),
//! index it, run a mixed query workload (text queries, then filtered, sorted
//! and range queries on the typed fields) and report index size, indexing
//! speed and latency percentiles.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use tierdex::corpus::gen::{typed, GenOptions, Generator};
use tierdex::indexing::{build_index_with, IndexOptions, Progress};
use tierdex::query::{dsl, QueryLimits};
use tierdex::schema::mapping;
use tierdex::search::{Mode, SearchRequest, Searcher};
use tierdex::Document;
use tierdex_workload::typed::{TextPools, TypedSample};

use crate::human_bytes;
use crate::progress::bar;
use tierdex_workload as workload;

/// Options of `tierdex demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Documents to generate [default: 200000; 20000 with --cluster].
    #[arg(long)]
    docs: Option<u64>,
    /// Corpus and workload seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Queries per category.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Where to build the index (kept); default: a temporary directory
    /// removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Indexing threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Generate title and body only: no typed fields, no filtered, sorted
    /// or range queries.
    #[arg(long)]
    text_only: bool,
    /// Also run the documents and the queries through a local cluster
    /// (issue #26): 3 NATS servers with JetStream, --nodes nodes and a
    /// broker on loopback, every answer checked against the single index.
    /// Needs `nats-server` (`go install github.com/nats-io/nats-server/v2@v2.15.2`).
    #[arg(long)]
    cluster: bool,
    /// Nodes of the --cluster.
    #[arg(long, default_value_t = 3, requires = "cluster")]
    nodes: usize,
    /// Shards of the --cluster's index.
    #[arg(long, default_value_t = 3, requires = "cluster")]
    shards: u32,
    /// Copies beyond the first of each shard (Elasticsearch's
    /// number_of_replicas) in the --cluster.
    #[arg(long, default_value_t = 1, requires = "cluster")]
    replicas: u32,
}

/// Typed-value samples taken from this many generated documents (at most).
const SAMPLE_DOCS: u64 = 20_000;

/// Latency histogram, queries and total results of one (category, mode).
type Row = (Histogram<u64>, u64, u64);

/// Runs `tierdex demo`.
pub fn run(a: Args) -> Result<()> {
    let (dir, temporary) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tierdex-demo-{}", std::process::id())),
            true,
        ),
    };
    let result = demo(&a, &dir);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn demo(a: &Args, dir: &std::path::Path) -> Result<()> {
    let typed = !a.text_only;
    let n_docs = a.docs.unwrap_or(if a.cluster { 20_000 } else { 200_000 });
    if a.cluster && tierdex_cluster::local::find_nats_server().is_none() {
        anyhow::bail!("--cluster needs nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
    }
    println!(
        "tierdex demo: {} generated documents{} (seed {})",
        n_docs,
        if typed { " with typed fields" } else { "" },
        a.seed
    );
    let t = Instant::now();
    let gen = Generator::new(GenOptions {
        docs: n_docs,
        seed: a.seed,
        typed,
        ..GenOptions::default()
    });
    let docs = generate_parallel(&gen, n_docs);
    let mut sample = TypedSample::new();
    if typed {
        let every = (n_docs / SAMPLE_DOCS).max(1) as usize;
        for d in docs.iter().step_by(every) {
            sample.push_json(&serde_json::to_string(d)?)?;
        }
    }
    let text: u64 = docs.iter().map(|d| (d.title().len() + d.body().len()) as u64).sum();
    println!(
        "  generated {} of text in {:.1} s",
        human_bytes(text),
        t.elapsed().as_secs_f64()
    );

    let schema = if typed {
        mapping::from_mapping(&typed::mapping())?
    } else {
        IndexOptions::default().schema
    };
    let opts = IndexOptions {
        schema,
        merge: true,
        overwrite: true,
        threads: a.threads,
        ..IndexOptions::default()
    };
    let pb = bar(Some(n_docs), false, "indexing");
    let t = Instant::now();
    let kept = if a.cluster { docs.clone() } else { Vec::new() };
    // The documents handed over so far, for the last segments' cut.
    let handed = std::cell::Cell::new(0u64);
    let total = docs.len().max(1) as f64;
    let input = docs.into_iter().map(|d| {
        handed.set(handed.get() + 1);
        Ok(d)
    });
    let progress = |p| match p {
        Progress::Indexed { docs, .. } => pb.set_position(docs),
        Progress::MergeStarted { segments } => {
            pb.set_prefix("merging");
            pb.set_message(format!("{segments} segments"));
        }
        Progress::Merging { terms } => pb.set_message(format!("{terms} terms")),
    };
    let share = || handed.get() as f64 / total;
    let stats = build_index_with(input, dir, &opts, &progress, Some(&share))
        .with_context(|| format!("indexing into {}", dir.display()))?;
    pb.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "  indexed in {:.1} s ({:.1} s inverting, {:.1} s merging into one segment): {:.0} docs/s, {:.1} MB/s",
        secs,
        stats.index_secs,
        stats.merge_secs,
        stats.docs as f64 / secs,
        stats.text_bytes as f64 / 1e6 / secs
    );
    println!(
        "  index size {} ({:.0}% of the text)",
        human_bytes(stats.index_bytes),
        100.0 * stats.index_bytes as f64 / stats.text_bytes.max(1) as f64
    );

    let searcher = Searcher::open(dir)?;
    let queries = workload::generate(&searcher, a.queries, a.seed)?;
    let parsed: Vec<_> = queries
        .iter()
        .map(|q| tierdex::query::parse(&q.text).map(|p| (q, p)))
        .collect::<Result<_, _>>()?;
    // One warm-up pass, then one measured pass per mode.
    for (_, p) in &parsed {
        searcher.search_parsed(p, Mode::TopK, 10)?;
    }
    let modes = [
        (Mode::TopK, "top_k"),
        (Mode::TopKAndCount, "top_k_and_count"),
        (Mode::Count, "count"),
    ];
    let mut rows: BTreeMap<(String, usize), Row> = BTreeMap::new();
    let t = Instant::now();
    for (mi, (mode, _)) in modes.iter().enumerate() {
        for (q, p) in &parsed {
            let started = Instant::now();
            let r = searcher.search_parsed(p, *mode, 10)?;
            record(
                &mut rows,
                &q.category,
                mi,
                started,
                r.count.unwrap_or(r.hits.len() as u64),
            )?;
        }
    }
    println!(
        "  ran {} queries x {} modes in {:.1} s (one thread, after a warm-up pass)",
        parsed.len(),
        modes.len(),
        t.elapsed().as_secs_f64()
    );
    let mut order: Vec<_> = rows.keys().cloned().collect();
    order.sort_by_key(|(c, m)| (category_rank(c), c.clone(), *m));
    print_rows(&rows, &order, &modes);

    if typed {
        typed_queries(a, &searcher, &sample, &TextPools::from_workload(&queries), &modes)?;
    }
    println!();
    println!("  (mean result: matches for modes with a count, hits returned for top_k)");
    if a.cluster {
        let mut demo_queries: Vec<crate::demo_cluster::DemoQuery> = queries
            .iter()
            .map(|q| crate::demo_cluster::DemoQuery {
                category: q.category.clone(),
                body: serde_json::json!({ "query": { "query_string": { "query": q.text } } }),
            })
            .collect();
        if typed {
            for q in tierdex_workload::typed::generate(&sample, &TextPools::from_workload(&queries), a.queries, a.seed)
            {
                let v: serde_json::Value = serde_json::from_str(&q.json)?;
                let mut body = serde_json::json!({ "query": v["query"] });
                for key in ["aggs", "sort"] {
                    if let Some(x) = v.get(key) {
                        body[key] = x.clone();
                    }
                }
                demo_queries.push(crate::demo_cluster::DemoQuery {
                    category: q.category.clone(),
                    body,
                });
            }
        }
        println!();
        let mapping = if typed {
            typed::mapping()
        } else {
            serde_json::json!({ "properties": { "title": { "type": "text" }, "body": { "type": "text" } } })
        };
        let cluster_dir = std::env::temp_dir().join(format!("tierdex-demo-cluster-{}", std::process::id()));
        let shape = crate::demo_cluster::Shape {
            nodes: a.nodes,
            shards: a.shards,
            replicas: a.replicas,
        };
        let r = crate::demo_cluster::run(&shape, &cluster_dir, &mapping, &kept, &demo_queries, &searcher);
        let _ = std::fs::remove_dir_all(&cluster_dir);
        r?;
    }
    if a.dir.is_some() {
        println!(
            "  index kept in {}; try: tierdex search {} 'your query' --highlight",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Runs the typed workload (filters of 0.1% to 50% selectivity under text
/// queries, sorts by price and date, range counts) and prints its table.
fn typed_queries(
    a: &Args,
    searcher: &Searcher,
    sample: &TypedSample,
    texts: &TextPools,
    modes: &[(Mode, &str); 3],
) -> Result<()> {
    let queries = tierdex_workload::typed::generate(sample, texts, a.queries, a.seed);
    let limits = QueryLimits::default();
    let mut requests = Vec::with_capacity(queries.len());
    for q in &queries {
        let v: serde_json::Value = serde_json::from_str(&q.json)?;
        let query = dsl::query(searcher.schema(), &limits, &v["query"])
            .with_context(|| format!("workload query {}", q.json))?;
        let sort = match v.get("sort") {
            Some(s) => dsl::sort(searcher.schema(), s)?,
            None => Vec::new(),
        };
        let mode_ids: Vec<usize> = q
            .modes
            .iter()
            .map(|m| match *m {
                "TOP_10" => 0,
                "TOP_10_COUNT" => 1,
                _ => 2,
            })
            .collect();
        requests.push((q, query, sort, mode_ids));
    }
    let run = |query, sort: &Vec<_>, mode| -> Result<u64> {
        let mut req = SearchRequest::new(query, 10);
        req.mode = mode;
        req.sort = sort.clone();
        let r = searcher.search_request(&req)?;
        Ok(r.count.unwrap_or(r.hits.len() as u64))
    };
    for (_, query, sort, mode_ids) in &requests {
        run(query, sort, modes[mode_ids[0]].0)?;
    }
    let mut rows: BTreeMap<(String, usize), Row> = BTreeMap::new();
    let t = Instant::now();
    let mut ran = 0usize;
    for (mi, (mode, _)) in modes.iter().enumerate() {
        for (q, query, sort, mode_ids) in &requests {
            if !mode_ids.contains(&mi) {
                continue;
            }
            let started = Instant::now();
            let n = run(query, sort, *mode)?;
            record(&mut rows, &q.category, mi, started, n)?;
            ran += 1;
        }
    }
    println!();
    println!(
        "  typed fields: ran {} filtered, sorted and range queries in {:.1} s (one thread, after a warm-up pass)",
        ran,
        t.elapsed().as_secs_f64()
    );
    let rank: Vec<String> = tierdex_workload::typed::categories();
    let mut order: Vec<_> = rows.keys().cloned().collect();
    order.sort_by_key(|(c, m)| (rank.iter().position(|x| x == c).unwrap_or(99), *m));
    print_rows(&rows, &order, modes);
    println!("  (filter-S-K: a K text query (term, and, or) with a filter matching S of the documents;");
    println!("   sort-*: a filter or match_all sorted by the field; text-sort-*: a text query sorted by it;");
    println!("   range-*: documents in a random range of the field, counted)");
    Ok(())
}

/// Adds one query's latency (since `started`) and result to its row.
fn record(
    rows: &mut BTreeMap<(String, usize), Row>,
    category: &str,
    mode: usize,
    started: Instant,
    result: u64,
) -> Result<()> {
    let ns = started.elapsed().as_nanos() as u64;
    let row = rows
        .entry((category.to_string(), mode))
        .or_insert_with(|| (Histogram::new(3).expect("histogram"), 0, 0));
    row.0.record(ns.max(1))?;
    row.1 += 1;
    row.2 += result;
    Ok(())
}

/// Prints `rows` in `order` as a latency table.
fn print_rows(rows: &BTreeMap<(String, usize), Row>, order: &[(String, usize)], modes: &[(Mode, &str); 3]) {
    println!();
    println!(
        "  {:<20} {:<16} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "category", "mode", "queries", "p50 µs", "p90 µs", "p99 µs", "max µs", "mean result"
    );
    for key in order {
        let (h, n, total) = &rows[key];
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        println!(
            "  {:<20} {:<16} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>12.1}",
            key.0,
            modes[key.1].1,
            n,
            us(0.5),
            us(0.9),
            us(0.99),
            h.max() as f64 / 1e3,
            *total as f64 / *n as f64
        );
    }
}

fn category_rank(c: &str) -> usize {
    workload::CATEGORIES.iter().position(|x| *x == c).unwrap_or(99)
}

/// Generates documents `0..n` on all cores, in order.
fn generate_parallel(gen: &Generator, n: u64) -> Vec<Document> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()) as u64;
    let chunk = n.div_ceil(threads).max(1);
    let parts: Vec<Vec<Document>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (lo, hi) = ((t * chunk).min(n), ((t + 1) * chunk).min(n));
                s.spawn(move || (lo..hi).map(|i| gen.doc(i)).collect::<Vec<_>>())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread"))
            .collect()
    });
    parts.into_iter().flatten().collect()
}
