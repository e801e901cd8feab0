//! `tierdex-bench cluster` (issue #26): a local cluster (NATS servers with
//! JetStream, nodes holding replicas, a broker on loopback) against one
//! index of the same documents. Indexes a corpus through the broker's
//! `_bulk`, builds the single index in this process, then compares every
//! query of a command file (count, top-10 ids and scores) and, with
//! `--ted`, aggregations over the TED talks. Writes `cluster.md`.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tierdex::update::{IndexWriter, WriterOptions};
use tierdex::Schema;
use tierdex_cluster::broker::{self, Broker, BrokerConfig};
use tierdex_cluster::local::{self, NatsServer};
use tierdex_cluster::node::{Node, NodeConfig};
use tierdex_cluster::ClusterConfig;

/// Arguments of `tierdex-bench cluster`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON lines of {"url"|"id", "title", "body"} (.zst/.gz ok).
    #[arg(long)]
    corpus: PathBuf,
    /// The command file (search-benchmark-game `queries.txt`: JSON lines
    /// with a `query` in Lucene syntax).
    #[arg(long, default_value = "../shared/queries/search-benchmark-game/queries.txt")]
    queries: PathBuf,
    /// TED talks (JSON lines) and their mapping, for the aggregations.
    #[arg(long)]
    ted: Option<PathBuf>,
    /// The TED talks' mapping.
    #[arg(long, default_value = "examples/tedtalks/mapping.json")]
    ted_mapping: PathBuf,
    /// Documents to index (all when absent).
    #[arg(long)]
    docs: Option<usize>,
    /// Shards.
    #[arg(long, default_value_t = 3)]
    shards: u32,
    /// Copies beyond the first (Elasticsearch's number_of_replicas).
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// tierdex nodes (in this process).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// NATS servers (stream copies: up to 3).
    #[arg(long, default_value_t = 3)]
    nats: usize,
    /// Documents per `_bulk` request.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Where the NATS servers, the nodes and the single index keep their
    /// data (emptied first).
    #[arg(long, default_value = "target/bench-cluster")]
    work: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/cluster")]
    out: PathBuf,
}

fn lines(path: &Path) -> Result<Box<dyn BufRead>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let name = path.to_string_lossy();
    Ok(if name.ends_with(".zst") {
        Box::new(std::io::BufReader::new(zstd::Decoder::new(f)?))
    } else if name.ends_with(".gz") {
        Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(f)))
    } else {
        Box::new(std::io::BufReader::new(f))
    })
}

/// The corpus as (id, source) in order.
fn read_corpus(path: &Path, limit: Option<usize>) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for (n, line) in lines(path)?.lines().enumerate() {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line).with_context(|| format!("{}:{}", path.display(), n + 1))?;
        let id = v
            .get("url")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .with_context(|| format!("{}:{}: no url or id", path.display(), n + 1))?
            .to_string();
        let source = json!({ "title": v.get("title").cloned().unwrap_or(Value::Null), "body": v.get("body").cloned().unwrap_or(Value::Null) });
        out.push((id, source));
    }
    Ok(out)
}

struct Local {
    _nats: Vec<NatsServer>,
    nodes: Vec<Node>,
    base: String,
    http: reqwest::Client,
}

impl Local {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await?;
        let status = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{path}: {status}: {v}");
        }
        Ok(v)
    }

    async fn bulk(&self, index: &str, docs: &[(String, Value)]) -> Result<()> {
        let mut nd = String::new();
        for (id, v) in docs {
            nd.push_str(&json!({ "index": { "_id": id } }).to_string());
            nd.push('\n');
            nd.push_str(&v.to_string());
            nd.push('\n');
        }
        let resp = self
            .http
            .post(format!("{}/{index}/_bulk", self.base))
            .header("content-type", "application/x-ndjson")
            .body(nd)
            .send()
            .await?;
        let v: Value = resp.json().await?;
        if v["errors"] != json!(false) {
            bail!("bulk errors: {}", v.to_string().chars().take(2000).collect::<String>());
        }
        Ok(())
    }
}

async fn start(a: &Args) -> Result<Local> {
    let Some(bin) = local::find_nats_server() else {
        bail!("no nats-server: {}", local::INSTALL_HINT);
    };
    let nats = NatsServer::start_cluster(&bin, &a.work.join("nats"), a.nats)?;
    let cfg = ClusterConfig {
        urls: nats.iter().map(NatsServer::url).collect(),
        stream_replicas: a.nats.min(3),
    };
    let client = cfg.connect("bench").await?;
    local::wait_jetstream(&client, Duration::from_secs(60)).await?;
    let mut nodes = Vec::new();
    for i in 0..a.nodes {
        nodes.push(
            Node::start(NodeConfig {
                cluster: cfg.clone(),
                id: format!("node-{i}"),
                data: a.work.join(format!("node-{i}")),
            })
            .await?,
        );
    }
    let b = Broker::connect(BrokerConfig {
        cluster: cfg,
        replica_timeout: Duration::from_secs(30),
        reassign_after: Duration::from_secs(30),
    })
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.map().live_nodes().await?.len() < a.nodes {
        if Instant::now() > deadline {
            bail!("the nodes did not announce themselves");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, broker::router(b)).await });
    Ok(Local {
        _nats: nats,
        nodes,
        base,
        http: reqwest::Client::builder().timeout(Duration::from_secs(600)).build()?,
    })
}

fn single(dir: &Path, mapping: &Value, docs: &[(String, Value)]) -> Result<IndexWriter> {
    let schema = Schema::from_json(&mapping.to_string()).map_err(anyhow::Error::msg)?;
    let w = IndexWriter::create_with_schema(
        dir,
        schema,
        Default::default(),
        Default::default(),
        Default::default(),
        WriterOptions::default(),
    )?;
    for chunk in docs.chunks(5000) {
        let batch = chunk
            .iter()
            .map(|(id, v)| tierdex_cluster::node::source_doc(id.clone(), v).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        w.add(batch)?;
    }
    w.flush()?;
    w.refresh()?;
    Ok(w)
}

/// A query's count, top-10 (id, score) and aggregations.
type Answer = (u64, Vec<(String, f32)>, Option<Value>);

/// Count and top-10 of the single index.
fn expected(w: &IndexWriter, query: &Value, aggs: Option<&Value>) -> Result<Answer> {
    let s = w.searcher();
    let q = tierdex::query::dsl::query(s.schema(), s.query_limits(), query)?;
    let mut req = tierdex::search::SearchRequest::new(&q, 10);
    req.mode = tierdex::Mode::TopKAndCount;
    let r = s.search_request(&req)?;
    let hits = r
        .hits
        .iter()
        .map(|h| Ok((s.doc_id(h.doc)?, h.score)))
        .collect::<tierdex::Result<Vec<_>>>()?;
    let aggs = match aggs {
        None => None,
        Some(a) => {
            let body = json!({ "aggs": a });
            let req = tierdex::aggs::Aggregations::from_body(
                s.schema(),
                s.query_limits(),
                body.as_object().expect("object"),
            )?
            .context("no aggregations")?;
            let mut m = tierdex::aggs::AggsPartial::empty(&req);
            for p in s.aggregate_parts(&q, &req)? {
                m.merge(p);
            }
            Some(tierdex::aggs::finalize(&req, &m)?)
        }
    };
    Ok((r.count.unwrap_or(0), hits, aggs))
}

/// How two top-10 lists agree: (scores equal to the last bit, in order;
/// scores within a millionth, in order; the same ids, those tied with the
/// page's last score at that precision taken as a set that may be cut
/// elsewhere).
fn same_top(got: &[(String, f32)], want: &[(String, f32)]) -> (bool, bool, bool) {
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
    let exact = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a.1 == b.1);
    let near = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| close(a.1, b.1));
    let last = want.last().map(|h| h.1);
    let kept = |h: &&(String, f32)| last.is_none_or(|l| !close(h.1, l));
    let mut a: Vec<&str> = got.iter().filter(kept).map(|h| h.0.as_str()).collect();
    let mut b: Vec<&str> = want.iter().filter(kept).map(|h| h.0.as_str()).collect();
    a.sort_unstable();
    b.sort_unstable();
    (exact, near, near && a == b)
}

fn hits_of(v: &Value) -> Vec<(String, f32)> {
    v["hits"]["hits"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    (
                        h["_id"].as_str().unwrap_or_default().to_string(),
                        h["_score"].as_f64().unwrap_or(0.0) as f32,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the comparison.
pub fn run(a: Args) -> Result<()> {
    if a.work.exists() {
        std::fs::remove_dir_all(&a.work).with_context(|| format!("emptying {}", a.work.display()))?;
    }
    std::fs::create_dir_all(&a.work)?;
    std::fs::create_dir_all(&a.out)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run_async(a))
}

async fn run_async(a: Args) -> Result<()> {
    let mut report = String::new();
    let docs = read_corpus(&a.corpus, a.docs)?;
    let text_mb = docs.iter().map(|d| d.1.to_string().len()).sum::<usize>() as f64 / 1e6;
    eprintln!("{} documents ({text_mb:.0} MB of JSON)", docs.len());
    let c = start(&a).await?;
    let mapping = json!({ "properties": { "title": { "type": "text" }, "body": { "type": "text" } } });
    c.call(
        reqwest::Method::PUT,
        "/wiki",
        Some(json!({ "mappings": mapping, "settings": { "number_of_shards": a.shards, "number_of_replicas": a.replicas } })),
    )
    .await?;
    let t = Instant::now();
    let bar = indicatif::ProgressBar::new(docs.len() as u64);
    for chunk in docs.chunks(a.batch) {
        c.bulk("wiki", chunk).await?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let stored = t.elapsed().as_secs_f64();
    c.call(reqwest::Method::POST, "/wiki/_refresh", None).await?;
    let applied = t.elapsed().as_secs_f64();
    eprintln!(
        "cluster: stored in JetStream in {stored:.1} s, applied and searchable on every replica in {applied:.1} s"
    );
    let t = Instant::now();
    let ref_dir = a.work.join("single");
    let w = {
        let (dir, mapping, docs) = (ref_dir.clone(), mapping.clone(), docs.clone());
        tokio::task::spawn_blocking(move || single(&dir, &mapping, &docs)).await??
    };
    let single_secs = t.elapsed().as_secs_f64();
    eprintln!("single index: {single_secs:.1} s");

    let mut queries = Vec::new();
    for line in lines(&a.queries)?.lines() {
        let line = line?;
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if let Some(q) = v["query"].as_str() {
                queries.push(q.to_string());
            }
        }
    }
    let (mut n, mut counts, mut scores, mut near, mut ids, mut failed) = (0, 0, 0, 0, 0, 0);
    let mut mismatches = Vec::new();
    let t = Instant::now();
    for q in &queries {
        let query = json!({ "query_string": { "query": q } });
        let want = match expected(&w, &query, None) {
            Ok(x) => x,
            Err(_) => continue, // a query the engine refuses is refused by both
        };
        n += 1;
        let got = match c
            .call(
                reqwest::Method::POST,
                "/wiki/_search",
                Some(json!({ "query": query, "size": 10 })),
            )
            .await
        {
            Ok(v) => v,
            Err(e) => {
                failed += 1;
                mismatches.push(format!("{q}: {e}"));
                continue;
            }
        };
        let count_ok = got["hits"]["total"]["value"] == json!(want.0);
        let (s_ok, n_ok, i_ok) = same_top(&hits_of(&got), &want.1);
        counts += usize::from(count_ok);
        scores += usize::from(s_ok);
        near += usize::from(n_ok);
        ids += usize::from(i_ok);
        if !(count_ok && s_ok) && mismatches.len() < 20 {
            let g = hits_of(&got);
            let first = g.iter().zip(&want.1).find(|(a, b)| a != b);
            mismatches.push(format!(
                "{q}: count {} vs {}; first different hit: {first:?}",
                got["hits"]["total"]["value"], want.0
            ));
        }
    }
    let query_secs = t.elapsed().as_secs_f64();
    writeln!(report, "# A cluster against one index (issue #26)\n")?;
    writeln!(
        report,
        "{} NATS servers ({} stream copies), {} nodes, {} shards x {} copies; {} documents of `{}` ({text_mb:.0} MB of JSON).\n",
        a.nats,
        a.nats.min(3),
        a.nodes,
        a.shards,
        a.replicas + 1,
        docs.len(),
        a.corpus.display()
    )?;
    writeln!(report, "| step | seconds |\n|---|---:|")?;
    writeln!(
        report,
        "| cluster: `_bulk` of {} documents acknowledged (stored by JetStream) | {stored:.1} |",
        a.batch
    )?;
    writeln!(
        report,
        "| cluster: applied and searchable on every replica | {applied:.1} |"
    )?;
    writeln!(
        report,
        "| one index built in this process (same mapping) | {single_secs:.1} |\n"
    )?;
    writeln!(
        report,
        "Command file `{}`: {n} queries compared ({} refused by the parser alike), {failed} failed through the broker, in {query_secs:.1} s.\n",
        a.queries.display(),
        queries.len() - n
    )?;
    writeln!(report, "| equal | queries | share |\n|---|---:|---:|")?;
    for (what, k) in [
        ("count", counts),
        ("top-10 scores to the last bit, in order", scores),
        ("top-10 scores within a millionth, in order", near),
        ("top-10 ids (ties at the page's end as sets)", ids),
    ] {
        writeln!(report, "| {what} | {k} | {:.2}% |", 100.0 * k as f64 / n.max(1) as f64)?;
    }
    if !mismatches.is_empty() {
        writeln!(report, "\nFirst differences:\n")?;
        for m in &mismatches {
            writeln!(report, "- `{m}`")?;
        }
    }
    let mut replicas = String::new();
    for node in &c.nodes {
        for (ix, shard, st) in node.replicas() {
            replicas.push_str(&format!(
                "| {} | {ix} | {shard} | {} | {} | {} |\n",
                node.id(),
                st.docs,
                st.applied,
                st.rejected
            ));
        }
    }
    writeln!(
        report,
        "\nReplicas:\n\n| node | index | shard | documents | stream sequence applied | rejected |\n|---|---|---:|---:|---:|---:|\n{replicas}"
    )?;
    if let Some(ted) = &a.ted {
        writeln!(report, "{}", ted_aggs(&c, ted, &a).await?)?;
    }
    std::fs::write(a.out.join("cluster.md"), &report)?;
    println!("{report}");
    drop(w);
    for n in c.nodes {
        n.stop().await;
    }
    Ok(())
}

/// Aggregations over the TED talks through the cluster against one index.
async fn ted_aggs(c: &Local, path: &Path, a: &Args) -> Result<String> {
    let mapping: Value = serde_json::from_str(&std::fs::read_to_string(&a.ted_mapping)?)?;
    let mut docs = Vec::new();
    for line in lines(path)?.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut v: Value = serde_json::from_str(&line)?;
        // The id, as `tierdex index --id-field objectID` takes it.
        let id = v
            .as_object_mut()
            .and_then(|o| o.remove("objectID"))
            .and_then(|id| id.as_str().map(str::to_string))
            .context("a talk without an objectID")?;
        docs.push((id, v));
    }
    c.call(
        reqwest::Method::PUT,
        "/ted",
        Some(json!({ "mappings": mapping, "settings": { "number_of_shards": a.shards, "number_of_replicas": a.replicas } })),
    )
    .await?;
    for chunk in docs.chunks(500) {
        c.bulk("ted", chunk).await?;
    }
    c.call(reqwest::Method::POST, "/ted/_refresh", None).await?;
    let dir = a.work.join("single-ted");
    let w = single(&dir, &mapping, &docs)?;
    let aggs = json!({
        "tags": { "terms": { "field": "tags", "size": 20 }, "aggs": { "views": { "avg": { "field": "viewed_count" } } } },
        "per_year": { "date_histogram": { "field": "date", "calendar_interval": "year" },
                      "aggs": { "views": { "sum": { "field": "viewed_count" } } } },
        "duration": { "stats": { "field": "duration_range" } },
        "popular": { "range": { "field": "viewed_count", "ranges": [ { "to": 1000000 }, { "from": 1000000, "to": 5000000 }, { "from": 5000000 } ] } },
        "speakers": { "cardinality": { "field": "speakers.keyword" } },
        "events": { "terms": { "field": "event_name", "size": 5 } },
    });
    let queries = [
        json!({ "match_all": {} }),
        json!({ "match": { "description": "science" } }),
        json!({ "bool": { "must": [ { "match": { "description": "future technology" } } ], "filter": [ { "range": { "date": { "gte": "2010-01-01" } } } ] } }),
        json!({ "term": { "tags": "music" } }),
    ];
    let mut out = String::from(
        "\n## Aggregations over the TED talks\n\n| query | count | top-10 | aggregations |\n|---|---|---|---|\n",
    );
    for q in &queries {
        let (count, top, want) = expected(&w, q, Some(&aggs))?;
        let got = c
            .call(
                reqwest::Method::POST,
                "/ted/_search",
                Some(json!({ "query": q, "aggs": aggs, "size": 10 })),
            )
            .await?;
        let (_, _, ids_ok) = same_top(&hits_of(&got), &top);
        let aggs_ok = Some(&got["aggregations"]) == want.as_ref();
        out.push_str(&format!(
            "| `{q}` | {} | {} | {} |\n",
            if got["hits"]["total"]["value"] == json!(count) {
                "equal"
            } else {
                "DIFFERENT"
            },
            if ids_ok { "equal" } else { "DIFFERENT" },
            if aggs_ok { "equal" } else { "DIFFERENT" },
        ));
        if !aggs_ok {
            out.push_str(&format!(
                "\n  cluster: `{}`\n\n  single: `{}`\n\n",
                got["aggregations"],
                want.unwrap_or(Value::Null)
            ));
        }
    }
    Ok(out)
}
