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
use tierdex::update::IndexWriter;
use tierdex_cluster::check::{self, hits_of, same_top};
use tierdex_cluster::local::{self, LocalCluster};

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

pub(crate) fn lines(path: &Path) -> Result<Box<dyn BufRead>> {
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
pub(crate) fn read_corpus(path: &Path, limit: Option<usize>) -> Result<Vec<(String, Value)>> {
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

/// The broker's HTTP API.
#[derive(Clone)]
pub(crate) struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    pub(crate) fn new(base: &str) -> Result<Api> {
        Ok(Api {
            base: base.to_string(),
            http: reqwest::Client::builder().timeout(Duration::from_secs(600)).build()?,
        })
    }

    /// Sends a request; its JSON answer, or an error for a status other
    /// than 2xx.
    pub(crate) async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
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

    /// Indexes the documents with one `_bulk`; an error if any item failed.
    pub(crate) async fn bulk(&self, index: &str, docs: &[(String, Value)]) -> Result<()> {
        let resp = self
            .http
            .post(format!("{}/{index}/_bulk", self.base))
            .header("content-type", "application/x-ndjson")
            .body(check::bulk_body(docs.iter().map(|(id, v)| (id.as_str(), v))))
            .send()
            .await?;
        let v: Value = resp.json().await?;
        if v["errors"] != json!(false) {
            bail!("bulk errors: {}", v.to_string().chars().take(2000).collect::<String>());
        }
        Ok(())
    }
}

/// A local cluster in this process and its API.
pub(crate) struct Local {
    pub(crate) cluster: LocalCluster,
    pub(crate) api: Api,
}

/// Starts `nats` NATS servers, `nodes` nodes and a broker under `work`.
pub(crate) async fn start(work: &Path, nats: usize, nodes: usize) -> Result<Local> {
    let Some(bin) = local::find_nats_server() else {
        bail!("no nats-server: {}", local::INSTALL_HINT);
    };
    let cluster = LocalCluster::start(&bin, work, nats, nodes, "node", Duration::from_secs(30)).await?;
    let api = Api::new(cluster.base())?;
    Ok(Local { cluster, api })
}

/// One index of the same documents, in this process.
pub(crate) fn single(dir: &Path, mapping: &Value, docs: &[(String, Value)]) -> Result<IndexWriter> {
    Ok(check::reference_index(dir, mapping, docs)?)
}

/// A query's count, top-10 (id, score) and aggregations in one index.
fn expected(w: &IndexWriter, query: &Value, aggs: Option<&Value>) -> Result<check::OneAnswer> {
    let mut body = json!({ "query": query });
    if let Some(a) = aggs {
        body["aggs"] = a.clone();
    }
    Ok(check::one_index(&w.searcher(), &body)?)
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
    let c = start(&a.work, a.nats, a.nodes).await?;
    let mapping = json!({ "properties": { "title": { "type": "text" }, "body": { "type": "text" } } });
    c.api.call(
        reqwest::Method::PUT,
        "/wiki",
        Some(json!({ "mappings": mapping, "settings": { "number_of_shards": a.shards, "number_of_replicas": a.replicas } })),
    )
    .await?;
    let t = Instant::now();
    let bar = indicatif::ProgressBar::new(docs.len() as u64);
    for chunk in docs.chunks(a.batch) {
        c.api.bulk("wiki", chunk).await?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let stored = t.elapsed().as_secs_f64();
    c.api.call(reqwest::Method::POST, "/wiki/_refresh", None).await?;
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
            .api
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
        let t = same_top(&hits_of(&got), &want.1);
        let (s_ok, n_ok, i_ok) = (t.exact, t.near, t.ids);
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
    for node in &c.cluster.nodes {
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
    c.cluster.stop().await;
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
    c.api.call(
        reqwest::Method::PUT,
        "/ted",
        Some(json!({ "mappings": mapping, "settings": { "number_of_shards": a.shards, "number_of_replicas": a.replicas } })),
    )
    .await?;
    for chunk in docs.chunks(500) {
        c.api.bulk("ted", chunk).await?;
    }
    c.api.call(reqwest::Method::POST, "/ted/_refresh", None).await?;
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
            .api
            .call(
                reqwest::Method::POST,
                "/ted/_search",
                Some(json!({ "query": q, "aggs": aggs, "size": 10 })),
            )
            .await?;
        let ids_ok = same_top(&hits_of(&got), &top).ids;
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
