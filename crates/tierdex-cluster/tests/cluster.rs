//! Shards and replicas over NATS JetStream (issue #26): a broker over two
//! nodes answers as one index of the same documents: counts, top-10 ids
//! and scores, aggregations, on seeded random corpora; a node stopped and
//! started again catches up, and searches go on while it is away.

use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{json, Value};
use tierdex::update::IndexWriter;
use tierdex_cluster::broker::{self, Broker, BrokerConfig};
use tierdex_cluster::check::{hits_of, sorted_hits, sorted_one_index};
use tierdex_cluster::node::{Node, NodeConfig};
use tierdex_cluster::ClusterConfig;

const WORDS: &[&str] = &[
    "river", "stone", "light", "music", "garden", "winter", "paper", "engine", "ocean", "forest", "silver", "market",
    "story", "bridge", "cloud", "signal", "orange", "window", "mountain", "harbor",
];
const TAGS: &[&str] = &["science", "art", "history", "travel", "sport"];

fn mappings() -> Value {
    json!({ "properties": {
        "title": { "type": "text" },
        "body": { "type": "text" },
        "tag": { "type": "keyword" },
        "views": { "type": "long" },
        "n": { "type": "long" },
    }})
}

fn corpus(seed: u64, n: usize) -> Vec<(String, Value)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            // Skewed word choice so that document frequencies differ.
            let mut words = |len: usize| -> String {
                (0..len)
                    .map(|_| {
                        let r: f64 = rng.random();
                        WORDS[((r * r) * WORDS.len() as f64) as usize]
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let title = words(3);
            let body_len = 5 + (i * 7919) % 40;
            let body = words(body_len);
            let tag = TAGS[i % TAGS.len()];
            (
                format!("doc-{i}"),
                json!({ "title": title, "body": body, "tag": tag, "views": (i * 37) % 1000, "n": i }),
            )
        })
        .collect()
}

fn queries(seed: u64, n: usize) -> Vec<Value> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let w = |rng: &mut Pcg64| WORDS[rng.random_range(0..WORDS.len())];
            let (a, b) = (w(&mut rng), w(&mut rng));
            match i % 6 {
                0 => json!({ "match": { "body": a } }),
                1 => json!({ "match": { "body": format!("{a} {b}") } }),
                2 => json!({ "bool": { "must": [ { "match": { "body": a } }, { "match": { "title": b } } ] } }),
                3 => json!({ "match_phrase": { "body": format!("{a} {b}") } }),
                4 => json!({ "bool": { "must": [ { "match": { "body": a } } ],
                    "filter": [ { "term": { "tag": TAGS[i % TAGS.len()] } }, { "range": { "views": { "gte": 200 } } } ] } }),
                _ => json!({ "multi_match": { "query": format!("{a} {b}"), "fields": ["title", "body"] } }),
            }
        })
        .collect()
}

/// The single index of the same documents, in this process.
fn reference(dir: &std::path::Path, docs: &[(String, Value)]) -> IndexWriter {
    tierdex_cluster::check::reference_index(dir, &mappings(), docs).unwrap()
}

/// Count, top-10 (id, score) and aggregations of one index.
fn expected(w: &IndexWriter, query: &Value, aggs: Option<&Value>) -> tierdex_cluster::check::OneAnswer {
    let mut body = json!({ "query": query });
    if let Some(a) = aggs {
        body["aggs"] = a.clone();
    }
    tierdex_cluster::check::one_index(&w.searcher(), &body).unwrap()
}

/// The same top-10: scores equal in order; ids equal except within a run
/// of equal scores, which may be cut at the page's end in another order.
fn same_hits(got: &[(String, f32)], want: &[(String, f32)], what: &str) {
    let gs: Vec<f32> = got.iter().map(|h| h.1).collect();
    let ws: Vec<f32> = want.iter().map(|h| h.1).collect();
    assert_eq!(gs, ws, "{what}: scores");
    let last = ws.last().copied();
    let mut a: Vec<&str> = got.iter().filter(|h| Some(h.1) != last).map(|h| h.0.as_str()).collect();
    let mut b: Vec<&str> = want
        .iter()
        .filter(|h| Some(h.1) != last)
        .map(|h| h.0.as_str())
        .collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "{what}: ids");
}

struct Cluster {
    _nats: tierdex_cluster::local::NatsServer,
    nodes: Vec<Option<Node>>,
    dirs: Vec<tempfile::TempDir>,
    cfg: ClusterConfig,
    http: reqwest::Client,
    base: String,
}

/// Serves a broker on a loopback port; its base URL.
async fn serve_broker(b: Arc<Broker>, guard: Arc<tierdex_server::security::Guard>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, broker::router(b, guard)).await.unwrap() });
    base
}

impl Cluster {
    async fn start(bin: &std::path::Path, store: &std::path::Path, n: usize) -> Cluster {
        let nats = tierdex_cluster::local::NatsServer::start(bin, store, "n1", 0, None).unwrap();
        let cfg = ClusterConfig {
            urls: vec![nats.url()],
            stream_replicas: 1,
        };
        let mut nodes = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..n {
            let d = tempfile::tempdir().unwrap();
            nodes.push(Some(
                Node::start(NodeConfig {
                    cluster: cfg.clone(),
                    id: format!("node-{i}"),
                    data: d.path().to_path_buf(),
                })
                .await
                .unwrap(),
            ));
            dirs.push(d);
        }
        let b = Broker::connect(BrokerConfig {
            cluster: cfg.clone(),
            replica_timeout: Duration::from_secs(5),
            reassign_after: Duration::from_secs(1),
        })
        .await
        .unwrap();
        let base = serve_broker(b, Default::default()).await;
        Cluster {
            _nats: nats,
            nodes,
            dirs,
            cfg,
            http: reqwest::Client::new(),
            base,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn bulk(&self, index: &str, docs: &[(String, Value)]) {
        let nd = tierdex_cluster::check::bulk_body(docs.iter().map(|(id, v)| (id.as_str(), v)));
        let resp = self
            .http
            .post(format!("{}/{index}/_bulk", self.base))
            .header("content-type", "application/x-ndjson")
            .body(nd)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap();
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["errors"], json!(false), "{v}");
    }

    /// Creates an index of `shards` x (`replicas` + 1) copies with the
    /// test mappings; asserts that every copy was acknowledged.
    async fn create(&self, index: &str, shards: u32, replicas: u32) {
        let (status, v) = self
            .call(
                reqwest::Method::PUT,
                &format!("/{index}"),
                Some(json!({ "mappings": mappings(), "settings": {
                    "number_of_shards": shards, "number_of_replicas": replicas } })),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["shards_acknowledged"], json!(true), "{v}");
    }

    async fn search(&self, index: &str, body: Value) -> Value {
        let (status, v) = self
            .call(reqwest::Method::POST, &format!("/{index}/_search"), Some(body))
            .await;
        assert_eq!(status, 200, "{v}");
        v
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shards_answer_as_one_index() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(&bin, store.path(), 2).await;
    c.create("books", 3, 1).await;
    let docs = corpus(11, 1500);
    c.bulk("books", &docs[..1000]).await;
    c.bulk("books", &docs[1000..]).await;
    let (status, v) = c.call(reqwest::Method::POST, "/books/_refresh", None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");

    let ref_dir = tempfile::tempdir().unwrap();
    let single = reference(ref_dir.path(), &docs);
    let aggs = json!({ "tags": { "terms": { "field": "tag" },
        "aggs": { "v": { "avg": { "field": "views" } } } }, "most": { "max": { "field": "views" } } });
    for (i, q) in queries(5, 60).iter().enumerate() {
        let with_aggs = i % 3 == 0;
        let mut body = json!({ "query": q, "size": 10 });
        if with_aggs {
            body["aggs"] = aggs.clone();
        }
        let got = c.search("books", body).await;
        let (count, want, want_aggs) = expected(&single, q, with_aggs.then_some(&aggs));
        assert_eq!(got["hits"]["total"]["value"], json!(count), "query {q}");
        assert_eq!(got["_shards"]["failed"], json!(0));
        same_hits(&hits_of(&got), &want, &q.to_string());
        if let Some(a) = want_aggs {
            assert_eq!(got["aggregations"], a, "query {q}");
        }
    }
    // Paging: the second page is the reference's 10..20.
    let q = json!({ "match": { "body": "river stone" } });
    let p2 = c.search("books", json!({ "query": q, "from": 10, "size": 10 })).await;
    let s = single.searcher();
    let qq = tierdex::query::dsl::query(s.schema(), s.query_limits(), &q).unwrap();
    let r = s.search_parsed(&qq, tierdex::Mode::TopK, 20).unwrap();
    let want: Vec<f32> = r.hits[10..].iter().map(|h| h.score).collect();
    let got: Vec<f32> = hits_of(&p2).iter().map(|h| h.1).collect();
    assert_eq!(got, want, "second page scores");

    // Sorted: keys ending with a unique field give one index's pages.
    let sorts = [
        json!([{ "views": "desc" }, { "n": "asc" }]),
        json!(["tag", { "n": "desc" }]),
        json!([{ "views": { "order": "asc" } }, "_score", "n"]),
    ];
    for (i, q) in queries(8, 12).iter().enumerate() {
        let sort = &sorts[i % sorts.len()];
        let body = json!({ "query": q, "sort": sort, "from": i % 4, "size": 7 });
        let got = c.search("books", body.clone()).await;
        let (count, want) = sorted_one_index(&single.searcher(), &body).unwrap();
        assert_eq!(got["hits"]["total"]["value"], json!(count), "sorted {body}");
        assert_eq!(sorted_hits(&got), want, "sorted {body}");
    }
    // search_after pages walk one index's order.
    let q = json!({ "match": { "body": "river" } });
    let sort = json!([{ "tag": "desc" }, { "views": "asc" }, "n"]);
    let (count, want) =
        sorted_one_index(&single.searcher(), &json!({ "query": q, "sort": sort, "size": 10_000 })).unwrap();
    let mut walked = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut body = json!({ "query": q, "sort": sort, "size": 9 });
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let got = c.search("books", body).await;
        assert_eq!(got["hits"]["total"]["value"], json!(count));
        let page = got["hits"]["hits"].as_array().unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last["sort"].clone());
        walked.extend(sorted_hits(&got));
    }
    assert_eq!(walked.len(), want.len());
    assert_eq!(walked, want, "search_after chain");
    // Highlights: the snippets of one index, with the request's options.
    let hl = json!({ "fields": { "body": {} }, "pre_tags": ["["], "post_tags": ["]"], "fragment_size": 60 });
    let got = c
        .search("books", json!({ "query": q, "highlight": hl, "_source": false }))
        .await;
    let s = single.searcher();
    let spec = tierdex::query::dsl::HighlightSpec::parse(s.schema(), &hl).unwrap();
    let plan = s
        .plan(&tierdex::query::dsl::query(s.schema(), s.query_limits(), &q).unwrap())
        .unwrap();
    let page = got["hits"]["hits"].as_array().unwrap();
    assert_eq!(page.len(), 10);
    for h in page {
        let doc = s.index().find_id(h["_id"].as_str().unwrap()).unwrap().unwrap();
        let want = spec.render(&s.highlight(&plan, doc, spec.max_bytes).unwrap());
        assert!(want["body"][0].as_str().unwrap().contains("[river]"), "{want}");
        assert_eq!(h["highlight"], want, "{h}");
        assert!(h.get("_source").is_none());
    }

    // A node away: every shard still answers from the other replica.
    let away = c.nodes[0].take().unwrap();
    drop(away);
    for q in queries(6, 10) {
        let got = c.search("books", json!({ "query": q })).await;
        assert_eq!(got["_shards"]["failed"], json!(0), "{got}");
        let (count, want, _) = expected(&single, &q, None);
        assert_eq!(got["hits"]["total"]["value"], json!(count));
        same_hits(&hits_of(&got), &want, &q.to_string());
    }
    // Writes go on while it is away; it catches up when back.
    let more = corpus(12, 300)
        .into_iter()
        .map(|(id, v)| (format!("more-{id}"), v))
        .collect::<Vec<_>>();
    c.bulk("books", &more).await;
    let (status, v) = c.call(reqwest::Method::DELETE, "/books/_doc/doc-7", None).await;
    assert_eq!(status, 200, "{v}");
    c.nodes[0] = Some(
        Node::start(NodeConfig {
            cluster: c.cfg.clone(),
            id: "node-0".into(),
            data: c.dirs[0].path().to_path_buf(),
        })
        .await
        .unwrap(),
    );
    // The map is read every few hundred ms: wait for the replicas to open.
    for _ in 0..100 {
        if c.nodes[0].as_ref().unwrap().replicas().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, v) = c.call(reqwest::Method::POST, "/books/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let mut all = docs.clone();
    all.retain(|(id, _)| id != "doc-7");
    all.extend(more.iter().cloned());
    for node in c.nodes.iter().flatten() {
        let total: u64 = node.replicas().iter().map(|r| r.2.docs).sum();
        let applied: u64 = node.replicas().iter().map(|r| r.2.applied).sum();
        assert_eq!(applied, 1500 + 300 + 1, "node {}: stream messages applied", node.id());
        assert!(node.replicas().iter().all(|r| r.2.rejected == 0));
        assert_eq!(total, all.len() as u64, "node {}: documents", node.id());
    }
    let ref2 = tempfile::tempdir().unwrap();
    let single = reference(ref2.path(), &all);
    for q in queries(7, 30) {
        let got = c.search("books", json!({ "query": q })).await;
        let (count, want, _) = expected(&single, &q, None);
        assert_eq!(got["hits"]["total"]["value"], json!(count), "after catching up: {q}");
        same_hits(&hits_of(&got), &want, &q.to_string());
    }
    let (status, v) = c.call(reqwest::Method::GET, "/books/_doc/doc-8", None).await;
    assert_eq!(status, 200);
    assert_eq!(v["_source"], docs[8].1);
    let (status, _) = c.call(reqwest::Method::GET, "/books/_doc/doc-7", None).await;
    assert_eq!(status, 404);
    // Deleted and created again: a new index, nothing of the old one.
    let (status, v) = c.call(reqwest::Method::DELETE, "/books", None).await;
    assert_eq!(status, 200, "{v}");
    c.create("books", 3, 1).await;
    c.bulk("books", &docs[..10]).await;
    let (_, v) = c.call(reqwest::Method::POST, "/books/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let (_, v) = c.call(reqwest::Method::POST, "/books/_count", None).await;
    assert_eq!(v["count"], json!(10), "{v}");
    for n in c.nodes.iter_mut() {
        if let Some(n) = n.take() {
            n.stop().await;
        }
    }
}

/// A node that leaves: after the reassignment delay its replicas are placed
/// on the other nodes, which replay the shards' streams and answer as one
/// index again; a replica answers no search before it has caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_removed_has_its_replicas_moved() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(&bin, store.path(), 3).await;
    c.create("moves", 2, 1).await;
    let docs = corpus(21, 800);
    c.bulk("moves", &docs).await;
    let (_, v) = c.call(reqwest::Method::GET, "/moves", None).await;
    let before: Vec<Vec<String>> = serde_json::from_value(v["moves"]["shards"].clone()).unwrap();
    assert!(before.iter().any(|s| s.contains(&"node-1".to_string())), "{before:?}");
    c.nodes[1].take().unwrap().stop().await;
    // Reassigned after the delay (1 s here), replayed, caught up.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = c.call(reqwest::Method::GET, "/moves", None).await;
        let now: Vec<Vec<String>> = serde_json::from_value(v["moves"]["shards"].clone()).unwrap();
        let moved = now.iter().all(|s| s.len() == 2 && !s.contains(&"node-1".to_string()));
        let ready = c
            .nodes
            .iter()
            .flatten()
            .flat_map(|n| n.replicas())
            .filter(|r| r.0 == "moves" && r.2.ready && r.2.docs as usize == docs.len() / 2)
            .count();
        let held: usize = c.nodes.iter().flatten().map(|n| n.replicas().len()).sum();
        if moved && held == 4 {
            let _ = ready;
            let (_, h) = c.call(reqwest::Method::GET, "/_cluster/health", None).await;
            if h["status"] == json!("green") {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "replicas not moved: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, v) = c.call(reqwest::Method::POST, "/moves/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let mut per_shard: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for n in c.nodes.iter().flatten() {
        for (ix, shard, st) in n.replicas() {
            if ix == "moves" {
                assert!(st.ready);
                per_shard.entry(shard).or_default().push(st.docs);
            }
        }
    }
    assert_eq!(per_shard.len(), 2);
    for (shard, docs_held) in &per_shard {
        assert_eq!(docs_held.len(), 2, "shard {shard}");
        assert_eq!(docs_held[0], docs_held[1], "shard {shard}: replicas differ");
    }
    let ref_dir = tempfile::tempdir().unwrap();
    let single = reference(ref_dir.path(), &docs);
    for q in queries(8, 20) {
        let got = c.search("moves", json!({ "query": q })).await;
        assert_eq!(got["_shards"]["failed"], json!(0), "{got}");
        let (count, want, _) = expected(&single, &q, None);
        assert_eq!(got["hits"]["total"]["value"], json!(count), "{q}");
        same_hits(&hits_of(&got), &want, &q.to_string());
    }
    for n in c.nodes.iter_mut() {
        if let Some(n) = n.take() {
            n.stop().await;
        }
    }
}

/// The broker answers bad requests with Elasticsearch-shaped 4xx errors
/// naming what is wrong, and writes nothing for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_clear_errors() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server ({})", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let c = Cluster::start(&bin, store.path(), 1).await;
    let put = |body: Value| c.call(reqwest::Method::PUT, "/bad", Some(body));
    let reason = |v: &Value| v["error"]["reason"].as_str().unwrap_or_default().to_string();

    let (status, v) = put(json!({ "settings": { "number_of_shards": 1 } })).await;
    assert_eq!(status, 400, "no mappings: {v}");
    assert!(reason(&v).contains("mappings"), "{v}");
    let (status, v) = put(json!({ "mappings": mappings(), "settings": { "number_of_shards": 0 } })).await;
    assert_eq!(status, 400, "{v}");
    assert!(reason(&v).contains("number_of_shards"), "{v}");
    let (status, v) = put(json!({ "mappings": mappings(), "settings": { "refresh_interval": "1s" } })).await;
    assert_eq!(status, 400, "{v}");
    assert!(reason(&v).contains("refresh_interval"), "{v}");
    let (status, v) = put(json!({ "mappings": mappings(), "settings": { "number_of_replicas": 99 } })).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = put(json!({ "mappings": { "properties": { "x": { "type": "no-such-type" } } } })).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = c
        .call(
            reqwest::Method::PUT,
            "/Bad-Name",
            Some(json!({ "mappings": mappings() })),
        )
        .await;
    assert_eq!(status, 400, "upper-case name: {v}");
    let (status, v) = c.call(reqwest::Method::POST, "/missing/_search", Some(json!({}))).await;
    assert_eq!(status, 404, "{v}");

    let (status, v) =
        put(json!({ "mappings": mappings(), "settings": { "number_of_shards": 2, "number_of_replicas": 0 } })).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = put(json!({ "mappings": mappings() })).await;
    assert_eq!(status, 400, "created twice: {v}");
    assert!(reason(&v).contains("already exists"), "{v}");
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/bad/_search",
            Some(json!({ "query": { "nope": {} } })),
        )
        .await;
    assert_eq!(status, 400, "unknown query: {v}");
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/bad/_search",
            Some(json!({ "query": { "match_all": {} }, "size": -1 })),
        )
        .await;
    assert_eq!(status, 400, "negative size: {v}");
    for (body, says) in [
        (json!({ "sort": ["nope"] }), "nope"),
        (json!({ "sort": ["body"] }), "body"),
        (json!({ "search_after": [1] }), "needs a [sort]"),
        (json!({ "sort": ["views"], "search_after": [1, 2, 3] }), "has 3 values"),
        (json!({ "sort": [{ "_doc": "desc" }] }), "descending"),
        (json!({ "highlight": { "type": "fvh" } }), "[type]"),
        (json!({ "highlight": { "fields": { "tag": {} } } }), "no stored text"),
        (json!({ "pit": { "id": "x" } }), "[pit]"),
    ] {
        let (status, v) = c.call(reqwest::Method::POST, "/bad/_search", Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(reason(&v).contains(says), "{body}: {v}");
    }
    let (status, v) = c
        .call(reqwest::Method::PUT, "/bad/_doc/1", Some(json!({ "views": "many" })))
        .await;
    assert_eq!(status, 400, "a long given a word: {v}");
    // _bulk: an unknown action refuses the request (nothing written); a bad
    // or broken document fails its item only, as in Elasticsearch.
    let resp = c
        .http
        .post(format!("{}/bad/_bulk", c.base))
        .header("content-type", "application/x-ndjson")
        .body("{\"index\":{\"_id\":\"a\"}}\n{\"title\":\"x\"}\n{\"frobnicate\":{}}\n{}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        400,
        "an unknown action: {:?}",
        resp.text().await
    );
    let resp = c
        .http
        .post(format!("{}/bad/_bulk", c.base))
        .header("content-type", "application/x-ndjson")
        .body("{\"index\":{\"_id\":\"a\"}}\n{\"title\":\"fine\"}\n{\"index\":{\"_id\":\"b\"}}\n{\"views\":\"many\"}\n{\"index\":{\"_id\":\"c\"}}\n{not json\n")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["errors"], json!(true), "{v}");
    assert_eq!(v["items"][0]["index"]["status"], json!(201), "{v}");
    assert_eq!(v["items"][1]["index"]["status"], json!(400), "{v}");
    assert_eq!(v["items"][2]["index"]["status"], json!(400), "broken JSON: {v}");
    let (_, v) = c.call(reqwest::Method::POST, "/bad/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let (status, v) = c.call(reqwest::Method::POST, "/bad/_count", None).await;
    assert_eq!((status, &v["count"]), (200, &json!(1)), "only the good document: {v}");
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// A node whose NATS server is gone still stops promptly (SIGTERM to
/// `tierdex node` must not hang on a server that never answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_stops_without_nats() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server ({})", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(&bin, store.path(), 1).await;
    c._nats.kill();
    let node = c.nodes[0].take().unwrap();
    let t = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), node.stop())
        .await
        .expect("the node did not stop within 20 s without NATS");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// Writes do not wait on replicas: with the only replica of a shard away
/// (or too busy to say in time whether an id exists), `index` and `delete`
/// items are still stored by JetStream and acknowledged; a `create` item,
/// which must know the id is new, is refused (503) and not written. The
/// replica applies the stored writes when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_do_not_wait_for_replicas() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server ({})", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(&bin, store.path(), 1).await;
    c.create("w", 1, 0).await;
    c.bulk("w", &corpus(3, 5)).await;
    c.nodes[0].take().unwrap().stop().await;
    let resp = c
        .http
        .post(format!("{}/w/_bulk", c.base))
        .header("content-type", "application/x-ndjson")
        .body(concat!(
            "{\"index\":{\"_id\":\"new-1\"}}\n{\"title\":\"one\"}\n",
            "{\"create\":{\"_id\":\"new-2\"}}\n{\"title\":\"two\"}\n",
            "{\"index\":{\"_id\":\"new-3\"}}\n{\"title\":\"three\"}\n",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["items"][0]["index"]["status"], json!(200), "{v}");
    assert_eq!(v["items"][1]["create"]["status"], json!(503), "{v}");
    assert_eq!(v["items"][2]["index"]["status"], json!(200), "{v}");
    c.nodes[0] = Some(
        Node::start(NodeConfig {
            cluster: c.cfg.clone(),
            id: "node-0".into(),
            data: c.dirs[0].path().to_path_buf(),
        })
        .await
        .unwrap(),
    );
    let mut count = Value::Null;
    for _ in 0..100 {
        let (_, r) = c.call(reqwest::Method::POST, "/w/_refresh", None).await;
        let (status, v) = c.call(reqwest::Method::POST, "/w/_count", None).await;
        if status == 200 && r["_shards"]["failed"] == json!(0) {
            // Refreshed everywhere: every shard answers.
            assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
            count = v["count"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count, json!(7), "5 + new-1 + new-3, not new-2");
    let (status, v) = c.call(reqwest::Method::GET, "/w/_doc/new-2", None).await;
    assert_eq!(status, 404, "{v}");
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// Walks a scroll to its end; the ids of every page and the last answer.
async fn drain(c: &Cluster, first: Value, keep: &str) -> (Vec<String>, Value) {
    let mut ids: Vec<String> = hits_of(&first).into_iter().map(|h| h.0).collect();
    let mut id = first["_scroll_id"].as_str().unwrap().to_string();
    loop {
        let (status, v) = c
            .call(
                reqwest::Method::POST,
                "/_search/scroll",
                Some(json!({ "scroll_id": id, "scroll": keep })),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        let page = hits_of(&v);
        id = v["_scroll_id"].as_str().unwrap().to_string();
        if page.is_empty() {
            return (ids, v);
        }
        ids.extend(page.into_iter().map(|h| h.0));
    }
}

/// Scrolls and points in time read the snapshots taken when they were
/// opened, whatever is written, deleted and refreshed meanwhile: a scroll
/// returns every match of its snapshot exactly once, a point in time pages
/// by `search_after` as one index of those documents; closed, they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scrolls_and_points_in_time_read_one_snapshot() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let c = Cluster::start(&bin, store.path(), 2).await;
    c.create("snap", 3, 1).await;
    let docs = corpus(21, 600);
    c.bulk("snap", &docs).await;
    let (_, v) = c.call(reqwest::Method::POST, "/snap/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let ref_dir = tempfile::tempdir().unwrap();
    let single = reference(ref_dir.path(), &docs);

    // Opened before the changes below.
    let all = json!({ "match_all": {} });
    let text = json!({ "match": { "body": "river" } });
    let (status, by_doc) = c
        .call(
            reqwest::Method::POST,
            "/snap/_search?scroll=1m",
            Some(json!({ "query": all, "sort": ["_doc"], "size": 37 })),
        )
        .await;
    assert_eq!(status, 200, "{by_doc}");
    assert_eq!(by_doc["hits"]["total"]["value"], json!(600));
    let (_, by_score) = c
        .call(
            reqwest::Method::POST,
            "/snap/_search?scroll=30s",
            Some(json!({ "query": text, "size": 13, "_source": false })),
        )
        .await;
    let (status, pit) = c.call(reqwest::Method::POST, "/snap/_pit?keep_alive=1m", None).await;
    assert_eq!(status, 200, "{pit}");
    let pit_id = pit["id"].as_str().unwrap().to_string();

    // Written, deleted and refreshed meanwhile: seen by none of them.
    let more: Vec<(String, Value)> = corpus(22, 150)
        .into_iter()
        .map(|(id, v)| (format!("new-{id}"), v))
        .collect();
    c.bulk("snap", &more).await;
    for id in ["doc-1", "doc-2", "doc-3"] {
        let (status, v) = c.call(reqwest::Method::DELETE, &format!("/snap/_doc/{id}"), None).await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, v) = c.call(reqwest::Method::POST, "/snap/_refresh", None).await;
    assert_eq!(v["_shards"]["failed"], json!(0), "{v}");
    let (_, now) = c.call(reqwest::Method::POST, "/snap/_count", None).await;
    assert_eq!(now["count"], json!(600 + 150 - 3), "{now}");

    let (mut ids, last) = drain(&c, by_doc, "1m").await;
    assert_eq!(last["hits"]["total"]["value"], json!(600));
    assert_eq!(ids.len(), 600, "every document of the snapshot once");
    ids.sort();
    ids.dedup();
    let mut want: Vec<String> = docs.iter().map(|d| d.0.clone()).collect();
    want.sort();
    assert_eq!(ids, want);

    let (count, _, _) = expected(&single, &text, None);
    assert_eq!(by_score["hits"]["total"]["value"], json!(count));
    let (mut ids, _) = drain(&c, by_score.clone(), "30s").await;
    assert_eq!(ids.len() as u64, count, "every match once");
    let s = single.searcher();
    let q = tierdex::query::dsl::query(s.schema(), s.query_limits(), &text).unwrap();
    let r = s.search_parsed(&q, tierdex::Mode::TopK, 10_000).unwrap();
    let mut want: Vec<String> = r.hits.iter().map(|h| s.doc_id(h.doc).unwrap()).collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want);

    // The point in time pages as one index of the documents it saw.
    let sort = json!([{ "views": "desc" }, "tag"]);
    let mut walked = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut body = json!({ "pit": { "id": pit_id, "keep_alive": "1m" }, "sort": sort, "size": 11 });
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let (status, v) = c.call(reqwest::Method::POST, "/_search", Some(body)).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["pit_id"], json!(pit_id));
        assert_eq!(v["hits"]["total"]["value"], json!(600));
        let Some(last) = v["hits"]["hits"].as_array().unwrap().last().cloned() else {
            break;
        };
        after = Some(last["sort"].clone());
        walked.extend(sorted_hits(&v));
    }
    let (_, want) = sorted_one_index(&s, &json!({ "query": all, "sort": sort, "size": 10_000 })).unwrap();
    assert_eq!(walked.len(), 600);
    assert!(
        tierdex_cluster::check::same_sorted(&walked, &want),
        "point-in-time pages"
    );

    // Closed: gone.
    let (status, v) = c
        .call(reqwest::Method::DELETE, "/_pit", Some(json!({ "id": pit_id })))
        .await;
    assert_eq!((status, v["num_freed"].clone()), (200, json!(3)), "{v}");
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/_search",
            Some(json!({ "pit": { "id": pit_id } })),
        )
        .await;
    assert_eq!(status, 404, "{v}");
    let scroll_id = by_score["_scroll_id"].clone();
    let (status, v) = c
        .call(
            reqwest::Method::DELETE,
            "/_search/scroll",
            Some(json!({ "scroll_id": [scroll_id] })),
        )
        .await;
    assert_eq!((status, v["num_freed"].clone()), (200, json!(3)), "{v}");
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/_search/scroll",
            Some(json!({ "scroll_id": scroll_id })),
        )
        .await;
    assert_eq!(status, 404, "{v}");

    // An expired snapshot is dropped by the node without being touched
    // (the `_doc` scroll above, kept for a minute, still holds 3).
    let open = |c: &Cluster| -> usize {
        c.nodes
            .iter()
            .flatten()
            .flat_map(|n| n.replicas())
            .map(|r| r.2.contexts)
            .sum()
    };
    let before = open(&c);
    let (status, _) = c.call(reqwest::Method::POST, "/snap/_pit?keep_alive=1s", None).await;
    assert_eq!(status, 200);
    assert_eq!(open(&c), before + 3, "the snapshots are open");
    let mut left = usize::MAX;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = open(&c);
        if left == before {
            break;
        }
    }
    assert_eq!(left, before, "expired snapshots swept");

    // Bad requests.
    for (method, path, body, says) in [
        ("POST", "/snap/_search?scroll=1m", json!({ "from": 5 }), "[from]"),
        ("POST", "/snap/_search?scroll=1m", json!({ "sort": ["nope"] }), "nope"),
        ("POST", "/snap/_search?scroll=2d", json!({}), "24h"),
        ("POST", "/snap/_search?nope=1", json!({}), "nope"),
        ("POST", "/_search", json!({ "query": all }), "needs a [pit]"),
        (
            "POST",
            "/_search",
            json!({ "pit": { "id": "bm90IGFuIGlk" } }),
            "not an id",
        ),
        ("POST", "/snap/_search", json!({ "pit": { "id": pit_id } }), "[pit]"),
        ("POST", "/snap/_pit", json!({}), "[keep_alive] is missing"),
        ("POST", "/_search/scroll", json!({ "scroll_id": "%%%" }), "not an id"),
    ] {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let (status, v) = c.call(m, path, Some(body.clone())).await;
        assert_eq!(status, 400, "{path} {body}: {v}");
        assert!(v.to_string().contains(says), "{path} {body}: {v}");
    }
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// A broker guards its API as a server does: the product header the
/// official clients check, JSON errors, JSON-only writes, cross-origin
/// requests refused, and with an authentication file, credentials and
/// roles (401 without, 403 for a role that is not enough).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_broker_is_guarded_as_a_server() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let c = Cluster::start(&bin, store.path(), 1).await;
    c.create("guarded", 1, 0).await;
    let http = reqwest::Client::new();
    let r = http.get(format!("{}/nowhere/at/all", c.base)).send().await.unwrap();
    assert_eq!(r.headers()["x-elastic-product"], "Elasticsearch");
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = r.json().await.expect("a JSON error");
    assert!(v["error"]["reason"].is_string(), "{v}");
    // A form or a no-cors fetch cannot write; no origin is allowed.
    let r = http
        .post(format!("{}/guarded/_bulk", c.base))
        .header("content-type", "text/plain")
        .body("{\"index\":{\"_id\":\"x\"}}\n{}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let r = http
        .get(format!("{}/guarded/_search", c.base))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // With an authentication file: a reader may search, not write.
    let hash = tierdex_server::security::hash_secret("s3cret").unwrap();
    let file = json!({ "api_keys": [ { "id": "reader", "hash": hash, "role": "read" },
                                      { "id": "writer", "hash": hash, "role": "write" } ] });
    let auth = tierdex_server::Auth::from_json(&file.to_string()).unwrap();
    let guard = Arc::new(tierdex_server::security::Guard {
        auth: Some(Arc::new(auth)),
        cors: Default::default(),
    });
    let b = Broker::connect(BrokerConfig {
        cluster: c.cfg.clone(),
        replica_timeout: Duration::from_secs(5),
        reassign_after: Duration::from_secs(60),
    })
    .await
    .unwrap();
    let base = serve_broker(b, guard).await;
    use base64::Engine as _;
    let key = |id: &str| {
        format!(
            "ApiKey {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:s3cret"))
        )
    };
    let doc = json!({ "title": "a", "body": "river", "tag": "art", "views": 1, "n": 1 });
    let put = |who: Option<String>| {
        let mut r = http.put(format!("{base}/guarded/_doc/1?refresh=true")).json(&doc);
        if let Some(k) = who {
            r = r.header("authorization", k);
        }
        r.send()
    };
    assert_eq!(put(None).await.unwrap().status().as_u16(), 401);
    assert_eq!(put(Some(key("reader"))).await.unwrap().status().as_u16(), 403);
    assert_eq!(put(Some(key("writer"))).await.unwrap().status().as_u16(), 201);
    let wrong = format!(
        "ApiKey {}",
        base64::engine::general_purpose::STANDARD.encode("reader:nope")
    );
    let search = |k: String| {
        http.post(format!("{base}/guarded/_search"))
            .header("authorization", k)
            .json(&json!({ "query": { "match": { "body": "river" } } }))
            .send()
    };
    assert_eq!(search(wrong).await.unwrap().status().as_u16(), 401);
    let r = search(key("reader")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["hits"]["total"]["value"], json!(1), "{v}");
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// The official Elasticsearch Python clients (8.x and 9.x, from
/// `TIERDEX_ES8_PY` / `TIERDEX_ES9_PY`; CI sets both) work against a broker
/// unmodified: bulk helpers, sorted and highlighted searches, aggregations,
/// `helpers.scan`, points in time, deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_elasticsearch_python_clients_work_with_a_broker() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let c = Cluster::start(&bin, store.path(), 2).await;
    for (env, major) in [("TIERDEX_ES8_PY", "8"), ("TIERDEX_ES9_PY", "9")] {
        let Some(python) = std::env::var_os(env) else {
            assert!(std::env::var_os("CI").is_none(), "CI must set {env}");
            eprintln!("SKIPPED: set {env} to a python with the client installed");
            continue;
        };
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("elasticsearch_broker.py");
        let base = c.base.clone();
        let index = format!("client-{major}");
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .arg(base)
                .arg(index)
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        assert!(out.status.success(), "{env}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["client_major"], major, "{env} runs another major version");
        assert_eq!(v["ping"], true);
        assert_eq!(v["info"], "tierdex");
        assert_eq!(
            (v["bulk_ok"].clone(), v["bulk_errors"].clone()),
            (json!(300), json!(0)),
            "{v}"
        );
        assert_eq!(v["count"], json!(300));
        assert!(v["river_total"].as_u64().unwrap() > 0, "{v}");
        let views: Vec<i64> = v["sorted_views"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        assert_eq!(views.len(), 5);
        assert!(views.windows(2).all(|w| w[0] >= w[1]), "{v}");
        assert!(v["highlight"].as_str().unwrap().contains("<b>river</b>"), "{v}");
        assert_eq!(v["tags"], json!({ "art": 100, "science": 100, "travel": 100 }));
        assert_eq!(
            (v["scan"].clone(), v["scan_unique"].clone()),
            (json!(300), json!(300)),
            "{v}"
        );
        assert_eq!(
            (v["pit_pages"].clone(), v["pit_unique"].clone()),
            (json!(300), json!(300)),
            "{v}"
        );
        assert_eq!(v["pit_closed"], json!(3));
        assert_eq!(v["after_delete"], json!(299));
        assert_eq!(v["get_d1"], "science");
        assert_eq!(v["exists_after"], false);
    }
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// Partial updates (`_update` and bulk `update`): merged by every replica
/// at their place in the shard's stream, so concurrent updates of one
/// document are all applied (none lost) and the replicas agree; answers as
/// Elasticsearch's (`updated`, `noop`, `created`, 404 for a missing one).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn updates_merge_in_stream_order() {
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", tierdex_cluster::local::INSTALL_HINT);
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let c = Cluster::start(&bin, store.path(), 2).await;
    c.create("u", 2, 1).await;
    let base = json!({ "title": "first", "body": "river stone", "tag": "t0", "views": 0, "n": 0 });
    let (status, v) = c
        .call(reqwest::Method::PUT, "/u/_doc/a?refresh=true", Some(base.clone()))
        .await;
    assert_eq!(status, 201, "{v}");
    let update = |id: &str, body: Value| {
        let path = format!("/u/_update/{id}");
        let c = &c;
        async move { c.call(reqwest::Method::POST, &path, Some(body)).await }
    };
    let get = |id: &str| {
        let path = format!("/u/_doc/{id}");
        let c = &c;
        async move { c.call(reqwest::Method::GET, &path, None).await }
    };

    // Gets and creates are real time: a write stored just before, not yet
    // refreshed, is seen.
    for i in 0..5 {
        let id = format!("rt-{i}");
        let (status, _) = c
            .call(reqwest::Method::PUT, &format!("/u/_doc/{id}"), Some(base.clone()))
            .await;
        assert_eq!(status, 201);
        let (status, v) = get(&id).await;
        assert_eq!(status, 200, "a get right after the write: {v}");
        let r = c
            .http
            .post(format!("{}/u/_bulk", c.base))
            .header("content-type", "application/x-ndjson")
            .body(format!("{{\"create\":{{\"_id\":\"{id}\"}}}}\n{}\n", base))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["items"][0]["create"]["status"], json!(409), "{v}");
    }
    let (status, v) = update("a", json!({ "doc": { "views": 5 } })).await;
    assert_eq!((status, v["result"].clone()), (200, json!("updated")), "{v}");
    let (_, v) = get("a").await;
    assert_eq!(v["_source"]["views"], json!(5), "{v}");
    assert_eq!(v["_source"]["title"], json!("first"), "merged, not replaced: {v}");
    let (status, v) = update("a", json!({ "doc": { "views": 5 } })).await;
    assert_eq!((status, v["result"].clone()), (200, json!("noop")), "{v}");
    let (_, v) = update("a", json!({ "doc": { "views": 5 }, "detect_noop": false })).await;
    assert_eq!(v["result"], json!("updated"), "{v}");
    let (status, v) = update("missing", json!({ "doc": { "views": 1 } })).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["type"], json!("document_missing_exception"), "{v}");
    let (status, v) = update(
        "b",
        json!({ "doc": { "views": 1 }, "upsert": { "title": "made", "views": 7 } }),
    )
    .await;
    assert_eq!((status, v["result"].clone()), (201, json!("created")), "{v}");
    let (status, v) = update("c", json!({ "doc": { "title": "as upsert" }, "doc_as_upsert": true })).await;
    assert_eq!(status, 201, "{v}");
    for (body, says) in [
        (json!({ "doc": { "views": "many" } }), "views"),
        (json!({ "script": "ctx._source.views++" }), "[script]"),
        (json!({}), "needs [doc]"),
        (json!({ "doc": [1] }), "must be an object"),
    ] {
        let (status, v) = update("a", body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(v.to_string().contains(says), "{body}: {v}");
    }
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/u/_update/a?routing=x",
            Some(json!({ "doc": { "n": 1 } })),
        )
        .await;
    assert_eq!(status, 400, "an unknown parameter: {v}");

    // Concurrent updates of different fields of one document: every one
    // is applied (a read-modify-write in the broker would lose some).
    let mut tasks = Vec::new();
    for i in 0..10 {
        for body in [
            json!({ "doc": { "views": 100 + i } }),
            json!({ "doc": { "n": 200 + i } }),
            json!({ "doc": { "tag": format!("x{i}") } }),
        ] {
            let http = c.http.clone();
            let url = format!("{}/u/_update/a", c.base);
            tasks.push(tokio::spawn(async move {
                let r = http.post(url).json(&body).send().await.unwrap();
                r.status().as_u16()
            }));
        }
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    // Bulk updates: merged, missing (404), created, refused (400).
    let nd = concat!(
        "{\"update\":{\"_id\":\"b\"}}\n{\"doc\":{\"body\":\"bulk merged\"}}\n",
        "{\"update\":{\"_id\":\"nope\"}}\n{\"doc\":{\"views\":1}}\n",
        "{\"update\":{\"_id\":\"d\"}}\n{\"doc\":{\"title\":\"bulk made\"},\"doc_as_upsert\":true}\n",
        "{\"update\":{\"_id\":\"b\"}}\n{\"doc\":{\"views\":\"many\"}}\n",
        "{\"update\":{\"_id\":\"b\"}}\n{\"lang\":\"painless\"}\n",
    );
    let r = c
        .http
        .post(format!("{}/u/_bulk?refresh=true", c.base))
        .header("content-type", "application/x-ndjson")
        .body(nd)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    let statuses: Vec<u64> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["update"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, vec![200, 404, 201, 400, 400], "{v}");
    let (_, r) = c.call(reqwest::Method::POST, "/u/_refresh", None).await;
    assert_eq!(r["_shards"]["failed"], json!(0), "{r}");
    // Every replica answers the same merged documents.
    for _ in 0..4 {
        let (_, v) = get("a").await;
        let s = &v["_source"];
        assert!(s["views"].as_i64().unwrap() >= 100, "{v}");
        assert!(s["n"].as_i64().unwrap() >= 200, "{v}");
        assert!(s["tag"].as_str().unwrap().starts_with('x'), "{v}");
        assert_eq!(s["body"], json!("river stone"), "{v}");
        let (_, v) = get("b").await;
        assert_eq!(
            v["_source"],
            json!({ "title": "made", "views": 7, "body": "bulk merged" }),
            "{v}"
        );
        let (_, v) = get("d").await;
        assert_eq!(v["_source"], json!({ "title": "bulk made" }), "{v}");
    }
    let tag = get("a").await.1["_source"]["tag"].clone();
    let got = c.search("u", json!({ "query": { "term": { "tag": tag } } })).await;
    assert_eq!(got["hits"]["total"]["value"], json!(1), "searchable as updated: {got}");
    let got = c
        .search("u", json!({ "query": { "match": { "body": "merged" } } }))
        .await;
    assert_eq!(hits_of(&got)[0].0, "b");
    // _mget (real time, each shard asked once) and the mapping.
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/u/_mget",
            Some(json!({ "ids": ["b", "nope", "d"] })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let found: Vec<bool> = v["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["found"] == json!(true))
        .collect();
    assert_eq!(found, vec![true, false, true], "{v}");
    assert_eq!(v["docs"][2]["_source"], json!({ "title": "bulk made" }));
    let (_, v) = c
        .call(
            reqwest::Method::POST,
            "/_mget",
            Some(json!({ "docs": [ { "_index": "u", "_id": "b", "_source": ["title"] },
                                   { "_index": "no-such", "_id": "b" } ] })),
        )
        .await;
    assert_eq!(v["docs"][0]["_source"], json!({ "title": "made" }), "{v}");
    assert_eq!(v["docs"][1]["error"]["type"], json!("index_not_found_exception"), "{v}");
    let (status, v) = c
        .call(reqwest::Method::POST, "/_mget", Some(json!({ "ids": ["b"] })))
        .await;
    assert_eq!(status, 400, "{v}");
    let (_, v) = c.call(reqwest::Method::GET, "/u/_mapping", None).await;
    assert_eq!(v["u"]["mappings"], mappings(), "{v}");
    // Delete by query: the five rt-* documents (tag t0) go, the rest stay.
    let (_, before) = c.call(reqwest::Method::POST, "/u/_count", None).await;
    let (status, v) = c
        .call(
            reqwest::Method::POST,
            "/u/_delete_by_query?refresh=true",
            Some(json!({ "query": { "term": { "tag": "t0" } } })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["total"].clone(), v["deleted"].clone()), (json!(5), json!(5)), "{v}");
    let (_, after) = c.call(reqwest::Method::POST, "/u/_count", None).await;
    assert_eq!(after["count"].as_u64().unwrap() + 5, before["count"].as_u64().unwrap());
    let (status, _) = get("rt-0").await;
    assert_eq!(status, 404);
    for body in [
        json!({}),
        json!({ "query": { "match_all": {} }, "size": 3 }),
        json!({ "query": { "nope": {} } }),
    ] {
        let (status, v) = c
            .call(reqwest::Method::POST, "/u/_delete_by_query", Some(body.clone()))
            .await;
        assert_eq!(status, 400, "{body}: {v}");
    }
    for n in c.nodes.into_iter().flatten() {
        n.stop().await;
    }
}
