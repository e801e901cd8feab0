//! `tierdex query-stream`: the benchmark protocol (`bench/PROTOCOL.md`).
//! Reads `MODE<TAB>QUERY` lines on stdin, answers each with one JSON line in
//! input order. With `--cache-policy lru|dlirs`, a result cache answers
//! repeated queries; its metrics go to stderr at the end.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};

use crate::lines::{text_lines, Line};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use tierdex::cache::{Outcome, ResultCache};
use tierdex::search::Searcher;

use crate::existing_dir;

/// Options of `tierdex query-stream`.
#[derive(clap::Args)]
pub struct Args {
    /// Index directory.
    #[arg(value_parser = existing_dir)]
    dir: PathBuf,
    /// Worker threads evaluating queries (output stays in input order).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    tier: crate::tier::TierArgs,
    /// Add `bytes_requested`, `bytes_needed`, `ios` (and, with one thread,
    /// `device_bytes`) to each answer, and print the workload's totals and
    /// read amplification on stderr at the end.
    #[arg(long)]
    io_stats: bool,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
}

/// I/O of the whole stream, summed over queries and threads.
#[derive(Default)]
struct Totals {
    queries: AtomicU64,
    bytes_requested: AtomicU64,
    bytes_needed: AtomicU64,
    ios: AtomicU64,
}

impl Totals {
    fn add(&self, io: &crate::tier::QueryIo) {
        self.queries.fetch_add(1, Ordering::Relaxed);
        self.bytes_requested.fetch_add(io.bytes_requested, Ordering::Relaxed);
        self.bytes_needed.fetch_add(io.bytes_needed, Ordering::Relaxed);
        self.ios.fetch_add(io.ios, Ordering::Relaxed);
    }

    /// The totals as one JSON object (read amplification = requested / needed).
    fn summary(&self, searcher: &Searcher) -> serde_json::Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (requested, needed) = (get(&self.bytes_requested), get(&self.bytes_needed));
        let mut v = serde_json::json!({
            "queries": get(&self.queries),
            "bytes_requested": requested,
            "bytes_needed": needed,
            "ios": get(&self.ios),
            "read_amplification": if needed > 0 { requested as f64 / needed as f64 } else { 0.0 },
        });
        if let Some(p) = searcher.index().storage().pool_stats() {
            v["pool"] = serde_json::json!({
                "hits": p.hits, "misses": p.misses, "evictions": p.evictions, "resident_pages": p.resident_pages,
            });
        }
        v
    }
}

#[derive(Serialize)]
struct Hit {
    id: String,
    /// `null` for a sort that is not by score.
    score: Option<f32>,
    /// With a sort: the hit's sort values, one per key.
    #[serde(skip_serializing_if = "Option::is_none")]
    sort: Option<Vec<tierdex::search::SortValue>>,
}

#[derive(Serialize)]
struct Answer {
    count: Option<u64>,
    hits: Vec<Hit>,
    elapsed_us: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    io: Option<crate::tier::QueryIo>,
    /// How the result cache answered, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<Outcome>,
    /// A JSON request's `aggs`, answered in Elasticsearch's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregations: Option<serde_json::Value>,
}

/// What answering a line needs besides the line.
struct Ctx<'a> {
    searcher: &'a Searcher,
    cache: Option<&'a ResultCache>,
    /// `Some(device)`: add the query's I/O figures (device bytes too when true).
    io: Option<bool>,
    totals: &'a Totals,
}

/// Answers one protocol line as a JSON line (without the newline) on worker
/// `thread`.
fn answer(ctx: &Ctx<'_>, thread: usize, line: &str) -> String {
    let (s, io, totals) = (ctx.searcher, ctx.io, ctx.totals);
    let Some((mode_name, query)) = line.split_once('\t') else {
        return error("expected MODE<TAB>QUERY");
    };
    if query.contains('\t') && !query.trim_start().starts_with('{') {
        // A workload file's category column would otherwise be searched
        // (a JSON request may hold tabs as white space).
        return error("expected MODE<TAB>QUERY, found a third column (a query holds no tab)");
    }
    let Some((mode, k)) = tierdex::search::protocol_mode(mode_name.trim()) else {
        return error(&format!("unknown mode `{mode_name}`"));
    };
    let started = Instant::now();
    let (result, query_io) = crate::tier::measure(io == Some(true), || {
        if query.trim_start().starts_with('{') {
            return json_request(s, query, mode, k).map(|r| (r, None));
        }
        s.parse(query).and_then(|q| match ctx.cache {
            Some(c) => c.search(s, thread, &q, mode, k).map(|(r, o)| (r, Some(o))),
            None => s.search_parsed(&q, mode, k).map(|r| (r, None)),
        })
    });
    let elapsed_us = started.elapsed().as_micros() as u64;
    if io.is_some() {
        totals.add(&query_io);
    }
    let result = result.and_then(|(r, cache)| {
        let mut hits = Vec::with_capacity(r.hits.len());
        let by_score = r.sort.is_none();
        for (i, h) in r.hits.iter().enumerate() {
            hits.push(Hit {
                id: s.doc_id(h.doc)?,
                score: by_score.then_some(h.score),
                // The protocol's sort values: one per key, without the
                // trailing document number.
                sort: r.sort.as_ref().map(|v| {
                    let mut v = v[i].clone();
                    v.pop();
                    v
                }),
            });
        }
        Ok(Answer {
            count: r.count,
            hits,
            elapsed_us,
            io: io.map(|_| query_io),
            cache,
            aggregations: r.aggregations,
        })
    });
    match result {
        Ok(a) => serde_json::to_string(&a).expect("serialisable"),
        Err(e) => error(&e.to_string()),
    }
}

/// A JSON line's request (`{"query": Q, "sort": [..]}`, an Elasticsearch
/// request body; `size`, `from`, `search_after` and `aggs` too), run in
/// `mode` with `k` hits unless it says `size`.
fn json_request(
    s: &Searcher,
    line: &str,
    mode: tierdex::search::Mode,
    k: usize,
) -> tierdex::Result<tierdex::search::SearchResults> {
    use tierdex::query::dsl;
    let bad = |m: String| tierdex::Error::InvalidArgument(m);
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
    let o = v.as_object().ok_or_else(|| bad("a request is a JSON object".into()))?;
    if let Some(k) = o
        .keys()
        .find(|k| !["query", "sort", "size", "from", "search_after", "aggs", "aggregations"].contains(&k.as_str()))
    {
        return Err(bad(format!(
            "[{k}] is not supported (query, sort, size, from, search_after, aggs)"
        )));
    }
    let schema = s.schema();
    let query = dsl::query(
        schema,
        s.query_limits(),
        o.get("query").ok_or_else(|| bad("a request needs a `query`".into()))?,
    )?;
    let count = |key: &str| -> tierdex::Result<Option<usize>> {
        o.get(key)
            .map(|v| {
                v.as_u64()
                    .map(|n| n as usize)
                    .ok_or_else(|| bad(format!("[{key}] must be a whole number ≥ 0")))
            })
            .transpose()
    };
    let mut req = tierdex::search::SearchRequest::new(&query, count("size")?.unwrap_or(k));
    req.mode = mode;
    req.from = count("from")?.unwrap_or(0);
    if let Some(v) = o.get("sort") {
        req.sort = dsl::sort(schema, v)?;
    }
    if let Some(v) = o.get("search_after") {
        req.search_after = Some(dsl::search_after(v)?);
    }
    let aggs = tierdex::aggs::Aggregations::from_body(schema, s.query_limits(), o)?;
    req.aggs = aggs.as_ref();
    s.search_request(&req)
}

fn error(message: &str) -> String {
    serde_json::json!({ "error": message, "elapsed_us": 0 }).to_string()
}

/// Runs `tierdex query-stream`.
pub fn run(a: Args) -> Result<()> {
    let searcher = Searcher::open_with(&a.dir, a.tier.open_options())?;
    let cache = a.cache.build(a.threads)?;
    // Device bytes are per process: meaningful per query on one thread only.
    let io = a.io_stats.then_some(a.threads <= 1);
    let stdin = std::io::stdin().lock();
    let totals = Totals::default();
    let ctx = Ctx {
        searcher: &searcher,
        cache: cache.as_ref(),
        io,
        totals: &totals,
    };
    let report = |totals: &Totals| {
        if a.io_stats {
            eprintln!("io totals: {}", totals.summary(&searcher));
        }
        if let Some(c) = &cache {
            eprintln!(
                "cache stats: {}",
                serde_json::to_string(&c.stats()).expect("serialisable")
            );
        }
    };
    if a.threads <= 1 {
        let mut out = BufWriter::new(std::io::stdout().lock());
        for line in text_lines(stdin) {
            let text = match line.context("reading stdin")? {
                Ok(line) => answer(&ctx, 0, &line),
                Err(why) => error(&why),
            };
            writeln!(out, "{text}")?;
            out.flush()?;
        }
        report(&totals);
        return Ok(());
    }
    let (jobs_tx, jobs_rx) = crossbeam_channel::bounded::<(u64, Line)>(a.threads * 4);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<(u64, String)>(a.threads * 4);
    std::thread::scope(|scope| -> Result<()> {
        for thread in 0..a.threads {
            let (jobs_rx, done_tx, ctx) = (jobs_rx.clone(), done_tx.clone(), &ctx);
            scope.spawn(move || {
                for (i, line) in jobs_rx {
                    let text = match line {
                        Ok(line) => answer(ctx, thread, &line),
                        Err(why) => error(&why),
                    };
                    if done_tx.send((i, text)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let writer = scope.spawn(move || -> std::io::Result<()> {
            let mut out = BufWriter::new(std::io::stdout().lock());
            let mut next = 0u64;
            let mut pending = BTreeMap::new();
            for (i, text) in &done_rx {
                pending.insert(i, text);
                while let Some(text) = pending.remove(&next) {
                    writeln!(out, "{text}")?;
                    next += 1;
                }
                // Answers go out as soon as nothing else is ready: a client
                // may wait for them before it sends more (or closes stdin).
                if done_rx.is_empty() {
                    out.flush()?;
                }
            }
            out.flush()
        });
        for (i, line) in text_lines(stdin).enumerate() {
            let line = line.context("reading stdin")?;
            if jobs_tx.send((i as u64, line)).is_err() {
                break;
            }
        }
        drop(jobs_tx);
        writer.join().expect("writer thread")?;
        Ok(())
    })?;
    report(&totals);
    Ok(())
}
