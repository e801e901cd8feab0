//! `tierdex-bench cluster-scale` (issue #26): how a local cluster's query
//! throughput grows with its nodes, and its indexing throughput with its
//! shards.
//!
//! * Queries: one index of 3 shards that wants a copy of every shard on
//!   every node is created with one node live; a second and a third node
//!   join (each replays the shards' streams, as a new replica does) and the
//!   same closed-loop load (`--clients` at once, command-file queries,
//!   top 10) is measured with 1, 2 and 3 nodes. The broker spreads each
//!   shard's requests over its replicas.
//! * Indexing: with 3 nodes live, an index of 1, 2 and 3 shards (one copy
//!   each, one shard per node) takes the same documents through `_bulk`
//!   (`--bulk-clients` requests in flight); stored (acknowledged by
//!   JetStream) and applied (searchable on every replica) throughput.
//!
//! Everything shares this machine's cores over loopback: the NATS servers,
//! the nodes (in this process), the broker and the clients. Writes
//! `cluster-scale.md`.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::cluster::{lines, read_corpus, single, start, Api, Local};

/// Arguments of `tierdex-bench cluster-scale`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON lines of {"url"|"id", "title", "body"} (.zst/.gz ok).
    #[arg(long)]
    corpus: PathBuf,
    /// The command file (JSON lines with a `query` in Lucene syntax).
    #[arg(long, default_value = "../shared/queries/search-benchmark-game/queries.txt")]
    queries: PathBuf,
    /// Documents to index (the corpus's first).
    #[arg(long, default_value_t = 50_000)]
    docs: usize,
    /// Most nodes (the query load is measured with 1 to this many).
    #[arg(long, default_value_t = 3)]
    max_nodes: usize,
    /// Query clients at once (closed loop).
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds of measured load per node count (after a warm-up pass).
    #[arg(long, default_value_t = 15.0)]
    seconds: f64,
    /// `_bulk` requests in flight while indexing.
    #[arg(long, default_value_t = 4)]
    bulk_clients: usize,
    /// Documents per `_bulk` request.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// NATS servers (stream copies: up to 3).
    #[arg(long, default_value_t = 3)]
    nats: usize,
    /// Where the NATS servers and the nodes keep their data (emptied first
    /// and removed at the end).
    #[arg(long, default_value = "target/bench-cluster-scale")]
    work: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/cluster")]
    out: PathBuf,
}

/// Runs the measurements.
pub fn run(a: Args) -> Result<()> {
    if a.max_nodes == 0 || a.clients == 0 || a.bulk_clients == 0 || a.batch == 0 {
        bail!("--max-nodes, --clients, --bulk-clients and --batch must be at least 1");
    }
    if !a.seconds.is_finite() || a.seconds <= 0.0 {
        bail!("--seconds must be positive");
    }
    if a.work.exists() {
        std::fs::remove_dir_all(&a.work).with_context(|| format!("emptying {}", a.work.display()))?;
    }
    std::fs::create_dir_all(&a.work)?;
    std::fs::create_dir_all(&a.out)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let r = rt.block_on(run_async(&a));
    drop(rt);
    let _ = std::fs::remove_dir_all(&a.work);
    r
}

/// One closed-loop load's outcome.
struct Load {
    queries: u64,
    secs: f64,
    latency_us: Histogram<u64>,
    errors: u64,
    partial: u64,
}

impl Load {
    fn qps(&self) -> f64 {
        self.queries as f64 / self.secs
    }

    fn ms(&self, quantile: f64) -> f64 {
        self.latency_us.value_at_quantile(quantile) as f64 / 1e3
    }

    fn summary(&self) -> String {
        format!(
            "{:.0} queries/s, p50 {:.1} ms, p99 {:.1} ms, {} errors, {} partial",
            self.qps(),
            self.ms(0.5),
            self.ms(0.99),
            self.errors,
            self.partial
        )
    }

    /// A row of the report's query table; `base`: the 1-node queries/s.
    fn row(&self, label: &str, base: Option<f64>, joined: Option<f64>) -> String {
        format!(
            "| {label} | {:.0} | {:.2}x | {:.1} | {:.1} | {} | {} | {} |",
            self.qps(),
            base.map_or(1.0, |b| self.qps() / b),
            self.ms(0.5),
            self.ms(0.99),
            self.errors,
            self.partial,
            joined.map_or("-".to_string(), |s| format!("{s:.1}"))
        )
    }
}

async fn run_async(a: &Args) -> Result<()> {
    let docs = read_corpus(&a.corpus, Some(a.docs))?;
    let text_mb = docs.iter().map(|d| d.1.to_string().len()).sum::<usize>() as f64 / 1e6;
    eprintln!("{} documents ({text_mb:.0} MB of JSON)", docs.len());
    let mut queries = Vec::new();
    for line in lines(&a.queries)?.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(&line?) {
            if let Some(q) = v["query"].as_str() {
                queries.push(json!({ "query": { "query_string": { "query": q } }, "size": 10 }));
            }
        }
    }
    if queries.is_empty() {
        bail!("{}: no queries", a.queries.display());
    }
    let mut c = start(&a.work, a.nats, 1).await?;
    let mapping = json!({ "properties": { "title": { "type": "text" }, "body": { "type": "text" } } });
    let shards = 3u32;

    // Queries: 1 node, then each joining node takes a copy of every shard.
    c.api
        .call(
            reqwest::Method::PUT,
            "/q",
            Some(json!({ "mappings": mapping, "settings": {
                "number_of_shards": shards, "number_of_replicas": a.max_nodes - 1 } })),
        )
        .await?;
    index_all(&c.api, "q", &docs, a).await?;
    refreshed(&c.api, "q").await?;
    // The queries the broker accepts (a warm-up pass too).
    let mut accepted = Vec::new();
    for q in &queries {
        if c.api
            .call(reqwest::Method::POST, "/q/_search", Some(q.clone()))
            .await
            .is_ok()
        {
            accepted.push(q.clone());
        }
    }
    eprintln!("{} of {} queries accepted", accepted.len(), queries.len());
    let accepted = Arc::new(accepted);
    let mut query_rows = Vec::new();
    for n in 1..=a.max_nodes {
        if n > 1 {
            let t = Instant::now();
            c.cluster.add_node().await?;
            wait_copies(&c, "q", shards as usize * n, Duration::from_secs(1800)).await?;
            eprintln!(
                "node {n} joined; its copies replayed in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            query_rows.push((n, Some(t.elapsed().as_secs_f64()), None));
        }
        // A warm-up pass over every query, then the measured load.
        load(&c.api, "q", &accepted, a.clients, 2.0).await?;
        let l = load(&c.api, "q", &accepted, a.clients, a.seconds).await?;
        eprintln!("{n} node(s): {}", l.summary());
        match query_rows.last_mut() {
            Some(row) if row.0 == n => row.2 = Some(l),
            _ => query_rows.push((n, None, Some(l))),
        }
    }
    c.api.call(reqwest::Method::DELETE, "/q", None).await?;
    let single = single_load(a, &mapping, &docs, &accepted).await?;
    while c.cluster.nodes.len() < 3 {
        c.cluster.add_node().await?;
    }

    // Indexing: 1, 2, 3 shards of one copy each on 3 nodes.
    let mut index_rows = Vec::new();
    for s in 1..=3u32 {
        let name = format!("ix{s}");
        c.api
            .call(
                reqwest::Method::PUT,
                &format!("/{name}"),
                Some(json!({ "mappings": mapping, "settings": { "number_of_shards": s, "number_of_replicas": 0 } })),
            )
            .await?;
        let t = Instant::now();
        index_all(&c.api, &name, &docs, a).await?;
        let stored = t.elapsed().as_secs_f64();
        refreshed(&c.api, &name).await?;
        let applied = t.elapsed().as_secs_f64();
        let count = c
            .api
            .call(reqwest::Method::POST, &format!("/{name}/_count"), None)
            .await?;
        if count["count"] != json!(docs.len()) {
            bail!("[{name}]: {} documents counted of {}", count["count"], docs.len());
        }
        eprintln!("{s} shard(s): stored in {stored:.1} s, applied in {applied:.1} s");
        index_rows.push((s, stored, applied));
        c.api.call(reqwest::Method::DELETE, &format!("/{name}"), None).await?;
    }
    c.cluster.stop().await;

    let mut r = String::new();
    writeln!(
        r,
        "# A local cluster's throughput against its nodes and shards (issue #26)\n"
    )?;
    writeln!(
        r,
        "{} documents of `{}` ({text_mb:.0} MB of JSON); {} NATS servers (streams with {} copies), nodes in the bench's process, broker and clients over loopback, all on this machine's {} cores. `tierdex-bench cluster-scale --corpus {} --docs {}`.\n",
        docs.len(),
        a.corpus.display(),
        a.nats,
        a.nats.min(3),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        a.corpus.display(),
        a.docs
    )?;
    writeln!(
        r,
        "## Queries: {shards} shards, one copy of each on every node\n\n{} clients at once, closed loop, {} command-file queries (top 10 with counts, `query_string`), {:.0} s per row after a warm-up pass.\n",
        a.clients,
        accepted.len(),
        a.seconds
    )?;
    writeln!(
        r,
        "| nodes | queries/s | vs 1 node | p50 ms | p99 ms | errors | partial | node joined: replay s |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    let base = query_rows.first().and_then(|row| row.2.as_ref()).map(Load::qps);
    for (n, joined, l) in &query_rows {
        if let Some(l) = l {
            writeln!(r, "{}", l.row(&n.to_string(), base, *joined))?;
        }
    }
    writeln!(
        r,
        "{}",
        single.row("one index, `tierdex serve` (no cluster)", base, None)
    )?;
    writeln!(
        r,
        "\n## Indexing: shards of one copy, one per node (3 nodes)\n\n`_bulk` of {} documents, {} requests in flight. Stored: acknowledged by JetStream (every document written to 3 NATS servers); applied: searchable on every replica (`_refresh` returned).\n",
        a.batch, a.bulk_clients
    )?;
    writeln!(
        r,
        "| shards | stored docs/s | applied docs/s | applied MB/s | applied vs 1 shard |\n|---:|---:|---:|---:|---:|"
    )?;
    let base = index_rows.first().map(|row| row.2);
    for (s, stored, applied) in &index_rows {
        let n = docs.len() as f64;
        writeln!(
            r,
            "| {s} | {:.0} | {:.0} | {:.1} | {:.2}x |",
            n / stored,
            n / applied,
            text_mb / applied,
            base.map_or(1.0, |b| b / applied)
        )?;
    }
    std::fs::write(a.out.join("cluster-scale.md"), &r)?;
    println!("{r}");
    Ok(())
}

/// The same load against one index of the same documents served by
/// `tierdex serve` in this process (2 search workers, no result cache: its
/// defaults), for what the cluster's layers cost.
async fn single_load(a: &Args, mapping: &Value, docs: &[(String, Value)], queries: &Arc<Vec<Value>>) -> Result<Load> {
    let dir = a.work.join("single");
    {
        let (dir, mapping, docs) = (dir.clone(), mapping.clone(), docs.to_vec());
        tokio::task::spawn_blocking(move || single(&dir, &mapping, &docs).map(drop)).await??;
    }
    let mut config = tierdex_server::ServerConfig::new(dir);
    config.index_name = "q".into();
    let state = tierdex_server::state(config)?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tierdex_server::serve(
        state,
        "127.0.0.1:0".parse()?,
        move |addr| {
            let _ = tx.send(addr);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let addr = rx.await.context("the single index's server did not start")?;
    let api = Api::new(&format!("http://{addr}"))?;
    load(&api, "q", queries, a.clients, 2.0).await?;
    let l = load(&api, "q", queries, a.clients, a.seconds).await?;
    eprintln!("one index: {}", l.summary());
    let _ = stop_tx.send(());
    server.await??;
    Ok(l)
}

/// Returns once every replica of the index has applied its whole stream:
/// `_refresh` waits up to a minute per call and reports the replicas still
/// behind as failed, so it is called again until none is (30 minutes at
/// most).
async fn refreshed(api: &Api, index: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let r = api
            .call(reqwest::Method::POST, &format!("/{index}/_refresh"), None)
            .await?;
        if r["_shards"]["failed"] == json!(0) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("[{index}]: not every replica caught up in 30 minutes: {r}");
        }
    }
}

/// Sends the documents through `_bulk`, `bulk_clients` requests in flight.
async fn index_all(api: &Api, index: &str, docs: &[(String, Value)], a: &Args) -> Result<()> {
    let chunks: Arc<Vec<Vec<(String, Value)>>> = Arc::new(docs.chunks(a.batch).map(<[_]>::to_vec).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let bar = indicatif::ProgressBar::new(docs.len() as u64);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..a.bulk_clients {
        let (api, chunks, next, bar, index) = (
            api.clone(),
            chunks.clone(),
            next.clone(),
            bar.clone(),
            index.to_string(),
        );
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = chunks.get(i) else {
                    return anyhow::Ok(());
                };
                api.bulk(&index, chunk).await?;
                bar.inc(chunk.len() as u64);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    bar.finish_and_clear();
    Ok(())
}

/// Waits until the nodes hold `copies` replicas of the index, all caught
/// up with the same stream sequences.
async fn wait_copies(c: &Local, index: &str, copies: usize, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let held: Vec<(u32, u64, bool)> = c
            .cluster
            .nodes
            .iter()
            .flat_map(|n| n.replicas())
            .filter(|(ix, _, _)| ix == index)
            .map(|(_, shard, st)| (shard, st.applied, st.ready))
            .collect();
        let mut last = std::collections::BTreeMap::new();
        for (shard, applied, _) in &held {
            let e = last.entry(*shard).or_insert(0u64);
            *e = (*e).max(*applied);
        }
        if held.len() == copies && held.iter().all(|(s, applied, ready)| *ready && *applied == last[s]) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "[{index}]: {} of {copies} copies caught up after {timeout:?}",
                held.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `clients` closed-loop clients send the queries (each from its own
/// offset) for `secs` seconds.
async fn load(api: &Api, index: &str, queries: &Arc<Vec<Value>>, clients: usize, secs: f64) -> Result<Load> {
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..clients {
        let (api, queries, index) = (api.clone(), queries.clone(), index.to_string());
        tasks.spawn(async move {
            let mut h = Histogram::<u64>::new(3)?;
            let (mut n, mut errors, mut partial) = (0u64, 0u64, 0u64);
            let mut i = k * queries.len() / clients;
            while Instant::now() < until {
                let q = &queries[i % queries.len()];
                i += 1;
                let t = Instant::now();
                match api
                    .call(reqwest::Method::POST, &format!("/{index}/_search"), Some(q.clone()))
                    .await
                {
                    Ok(v) => {
                        h.record(t.elapsed().as_micros() as u64)?;
                        n += 1;
                        if v["_shards"]["failed"] != json!(0) {
                            partial += 1;
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            anyhow::Ok((h, n, errors, partial))
        });
    }
    let mut out = Load {
        queries: 0,
        secs: 0.0,
        latency_us: Histogram::new(3)?,
        errors: 0,
        partial: 0,
    };
    while let Some(r) = tasks.join_next().await {
        let (h, n, e, p) = r??;
        out.latency_us.add(h)?;
        out.queries += n;
        out.errors += e;
        out.partial += p;
    }
    out.secs = start.elapsed().as_secs_f64();
    Ok(out)
}
