//! `tierdex demo --cluster` (issue #26): the demo's documents and queries
//! through a local cluster on loopback (3 NATS servers with JetStream,
//! `--nodes` tierdex nodes in this process, a broker), each answer checked
//! against the demo's single index: counts and top-10 ids.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tierdex::search::Searcher;
use tierdex::Document;
use tierdex_cluster::check::{
    bulk_body, hits_of, json_close, one_index, same_sorted, same_top, sorted_hits, sorted_one_index,
};
use tierdex_cluster::local::{self, LocalCluster};

use crate::progress::bar;

/// The cluster's shape.
pub struct Shape {
    /// tierdex nodes.
    pub nodes: usize,
    /// Shards of the index.
    pub shards: u32,
    /// Copies beyond the first (Elasticsearch's `number_of_replicas`).
    pub replicas: u32,
}

/// A query of the demo: its category, the request body sent to the broker.
pub struct DemoQuery {
    /// Workload category (a row of the table).
    pub category: String,
    /// `_search` body: `query`, and `aggs` where the category has them.
    pub body: Value,
}

/// Per category: latency, queries, counts equal, top-10 ids equal.
type Row = (Histogram<u64>, u64, u64, u64);

/// Runs the documents and the queries through a local cluster kept under
/// `dir`, comparing with `searcher` (an index of the same documents).
pub fn run(
    shape: &Shape,
    dir: &Path,
    mapping: &Value,
    docs: &[Document],
    queries: &[DemoQuery],
    searcher: &Searcher,
) -> Result<()> {
    let Some(bin) = local::find_nats_server() else {
        bail!("--cluster needs nats-server: {}", local::INSTALL_HINT);
    };
    if shape.nodes == 0 || shape.shards == 0 {
        bail!("--nodes and --shards must be at least 1");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let c = LocalCluster::start(&bin, dir, 3, shape.nodes, "demo-node", Duration::from_secs(2)).await?;
        println!(
            "  cluster: 3 NATS servers (JetStream, 3 copies of every stream), {} nodes, a broker at {}",
            shape.nodes,
            c.base()
        );
        let http = reqwest::Client::builder().timeout(Duration::from_secs(300)).build()?;
        let r = exercise(&http, c.base(), shape, mapping, docs, queries, searcher).await;
        c.stop().await;
        r
    })
}

async fn call(http: &reqwest::Client, url: String, body: Option<&Value>) -> Result<Value> {
    let mut r = http.post(&url);
    if let Some(b) = body {
        r = r.json(b);
    }
    let resp = r.send().await.with_context(|| url.clone())?;
    let status = resp.status();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("{url}: {status}: {v}");
    }
    Ok(v)
}

async fn exercise(
    http: &reqwest::Client,
    base: &str,
    shape: &Shape,
    mapping: &Value,
    docs: &[Document],
    queries: &[DemoQuery],
    searcher: &Searcher,
) -> Result<()> {
    let created = http
        .put(format!("{base}/demo"))
        .json(&json!({ "mappings": mapping, "settings": {
            "number_of_shards": shape.shards, "number_of_replicas": shape.replicas } }))
        .send()
        .await?;
    if !created.status().is_success() {
        bail!("creating the index: {}", created.text().await?);
    }
    let pb = bar(Some(docs.len() as u64), false, "cluster _bulk");
    let t = Instant::now();
    for chunk in docs.chunks(1000) {
        let sources: Vec<Value> = chunk
            .iter()
            .map(|d| Value::Object(d.fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            .collect();
        let nd = bulk_body(chunk.iter().zip(&sources).map(|(d, s)| (d.id.as_str(), s)));
        let v: Value = http
            .post(format!("{base}/demo/_bulk"))
            .header("content-type", "application/x-ndjson")
            .body(nd)
            .send()
            .await?
            .json()
            .await?;
        if v["errors"] != json!(false) {
            bail!("_bulk: {}", v.to_string().chars().take(1000).collect::<String>());
        }
        pb.inc(chunk.len() as u64);
    }
    pb.finish_and_clear();
    let stored = t.elapsed().as_secs_f64();
    let r = call(http, format!("{base}/demo/_refresh"), None).await?;
    let applied = t.elapsed().as_secs_f64();
    if r["_shards"]["failed"] != json!(0) {
        bail!("not every replica caught up: {r}");
    }
    println!(
        "  cluster: {} documents into {} shards x {} copies: acknowledged (stored by JetStream) in {stored:.1} s, searchable on every replica in {applied:.1} s ({:.0} docs/s)",
        docs.len(),
        shape.shards,
        shape.replicas + 1,
        docs.len() as f64 / applied
    );

    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut first_difference = None;
    let (mut aggs_queries, mut aggs_bits) = (0u64, 0u64);
    let t = Instant::now();
    for q in queries {
        let mut body = q.body.clone();
        body["size"] = json!(10);
        body["track_total_hits"] = json!(true);
        let (want_count, want_top, want_aggs) =
            one_index(searcher, &q.body).with_context(|| format!("demo query {}", q.body))?;
        // Sorted: the same sort values in order, ids equal up to ties.
        let want_sorted = match body.get("sort") {
            Some(_) => Some(
                sorted_one_index(searcher, &body)
                    .with_context(|| format!("demo query {}", q.body))?
                    .1,
            ),
            None => None,
        };
        let started = Instant::now();
        let got = call(http, format!("{base}/demo/_search"), Some(&body)).await?;
        let us = started.elapsed().as_micros() as u64;
        let count_ok = got["hits"]["total"]["value"] == json!(want_count);
        let top_ok = match &want_sorted {
            Some(w) => same_sorted(&sorted_hits(&got), w),
            None => same_top(&hits_of(&got), &want_top).ids,
        };
        let got_aggs = got.get("aggregations").unwrap_or(&Value::Null);
        let (aggs_exact, aggs_ok) = match &want_aggs {
            None => (true, true),
            Some(w) => (got_aggs == w, json_close(got_aggs, w, 1e-12)),
        };
        if want_aggs.is_some() {
            aggs_queries += 1;
            aggs_bits += u64::from(aggs_exact);
        }
        let top_ok = top_ok && aggs_ok;
        if !(count_ok && top_ok && aggs_exact) && first_difference.is_none() {
            first_difference = Some(format!(
                "{}: count {} against {}; aggregations {} against {}",
                q.body,
                got["hits"]["total"]["value"],
                want_count,
                got.get("aggregations").unwrap_or(&Value::Null),
                want_aggs.as_ref().unwrap_or(&Value::Null)
            ));
        }
        if !rows.contains_key(&q.category) {
            order.push(q.category.clone());
        }
        let row = rows
            .entry(q.category.clone())
            .or_insert_with(|| (Histogram::new(3).expect("histogram"), 0, 0, 0));
        row.0.record(us.max(1))?;
        row.1 += 1;
        row.2 += u64::from(count_ok);
        row.3 += u64::from(top_ok);
    }
    println!(
        "  cluster: ran {} queries through the broker in {:.1} s (one at a time), each checked against the single index",
        queries.len(),
        t.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "  {:<20} {:>7} {:>10} {:>10} {:>14} {:>14}",
        "category", "queries", "p50 ms", "p99 ms", "counts equal", "top-10 equal*"
    );
    let (mut all, mut counts, mut tops) = (0, 0, 0);
    for c in &order {
        let (h, n, cn, tn) = &rows[c];
        println!(
            "  {:<20} {:>7} {:>10.2} {:>10.2} {:>14} {:>14}",
            c,
            n,
            h.value_at_quantile(0.5) as f64 / 1e3,
            h.value_at_quantile(0.99) as f64 / 1e3,
            format!("{cn} of {n}"),
            format!("{tn} of {n}")
        );
        all += n;
        counts += cn;
        tops += tn;
    }
    println!();
    println!(
        "  (*: the same top-10 ids and scores, ties at the page's end as sets; sorted: the same sort values, ids equal \
         within each run of equal values; and the same aggregations, numbers within 1e-12)"
    );
    println!(
        "  cluster against one index: counts equal {counts} of {all}, top-10 and aggregations equal {tops} of {all}"
    );
    if aggs_queries > 0 {
        println!(
            "  aggregations equal to the last bit: {aggs_bits} of {aggs_queries} (float sums added shard by shard differ in their last bits)"
        );
    }
    if let Some(d) = first_difference {
        println!("  first difference: {d}");
    }
    Ok(())
}
