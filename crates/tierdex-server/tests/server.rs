//! The server end to end on a loopback port: every endpoint, bad inputs,
//! concurrent searches, overload and a clean shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{json, Value};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::Document;
use tierdex_server::{state, ServerConfig};

fn docs() -> Vec<Document> {
    let words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "honeydew"];
    (0..300)
        .map(|i: usize| {
            Document::title_body(
                format!("doc-{i}"),
                format!("{} {}", words[i % 8], words[(i / 8) % 8]),
                (0..20)
                    .map(|j| words[(i * 7 + j * j) % 8])
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        })
        .collect()
}

struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
    state: Arc<tierdex_server::AppState>,
    searcher: Searcher,
    _dir: tempfile::TempDir,
}

async fn start(tune: impl FnOnce(&mut ServerConfig)) -> Running {
    let dir = tempfile::tempdir().unwrap();
    build_index(docs().into_iter().map(Ok), dir.path(), &IndexOptions::default()).unwrap();
    let mut config = ServerConfig::new(dir.path().to_path_buf());
    config.index_name = "fruit".into();
    tune(&mut config);
    let st = state(config).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(tierdex_server::serve(
        st.clone(),
        "127.0.0.1:0".parse().unwrap(),
        move |a| {
            addr_tx.send(a).unwrap();
        },
        async move {
            let _ = rx.await;
        },
    ));
    let addr = addr_rx.await.unwrap();
    Running {
        addr,
        stop: Some(tx),
        done,
        state: st,
        searcher: Searcher::open(dir.path()).unwrap(),
        _dir: dir,
    }
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.done.await.unwrap().unwrap();
    }

    fn ids(&self, q: &str, k: usize) -> Vec<String> {
        let r = self.searcher.search(q, Mode::TopK, k).unwrap();
        r.hits.iter().map(|h| self.searcher.doc_id(h.doc).unwrap()).collect()
    }

    fn count(&self, q: &str) -> u64 {
        self.searcher.search(q, Mode::Count, 0).unwrap().count.unwrap()
    }
}

async fn get(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new().post(url).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn hit_ids(v: &Value, key: &str) -> Vec<String> {
    v.pointer(key)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().or(h["_id"].as_str()).unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_endpoints_answer_like_the_engine() {
    let s = start(|c| c.cache = Some(tierdex::cache::CacheConfig::default())).await;
    assert_eq!(get(&s.url("/health")).await, (200, json!({"status": "ok"})));
    for q in [
        "apple",
        "apple banana",
        "+apple +fig",
        "\"apple banana\"",
        "title:cherry -date",
    ] {
        let url = s.url(&format!("/search?q={}&k=5&mode=top_k_and_count", urlencode(q)));
        let (st, v) = get(&url).await;
        assert_eq!(st, 200, "{q}: {v}");
        assert_eq!(hit_ids(&v, "/hits"), s.ids(q, 5), "{q}");
        assert_eq!(v["count"].as_u64().unwrap(), s.count(q), "{q}");
        // Asked again: the cache answers, identically.
        let (_, again) = get(&url).await;
        assert_eq!(again["cache"], "hit");
        assert_eq!(again["hits"], v["hits"]);
    }
    let (st, v) = post(&s.url("/search"), &json!({"q": "grape", "k": 3, "highlight": true})).await;
    assert_eq!(st, 200);
    assert_eq!(hit_ids(&v, "/hits"), s.ids("grape", 3));
    assert!(
        v["hits"][0]["highlight"]["body"]["marks"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    let (st, v) = get(&s.url("/stats")).await;
    assert_eq!(st, 200);
    assert_eq!(v["index"]["docs"], 300);
    assert!(v["cache"]["total"]["hits"].as_u64().unwrap() >= 5, "{v}");
    let metrics = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("tierdex_http_requests_total{route=\"/search\",status=\"200\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tierdex_http_request_duration_seconds_bucket"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tierdex_cache_lookups_total{outcome=\"hit\"}"),
        "{metrics}"
    );
    s.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elasticsearch_queries_answer_like_their_tierdex_equivalents() {
    let s = start(|_| {}).await;
    let cases = [
        (json!({"query_string": {"query": "+apple -fig"}}), "+apple -fig"),
        (json!({"match": {"body": "apple banana"}}), "body:apple body:banana"),
        (
            json!({"match": {"title": {"query": "apple banana", "operator": "and"}}}),
            "+title:apple +title:banana",
        ),
        (
            json!({"match_phrase": {"body": "apple banana"}}),
            "body:\"apple banana\"",
        ),
        (json!({"term": {"_all": "cherry"}}), "cherry"),
        (
            json!({"bool": {"must": [{"match": {"body": "grape"}}], "should": {"match": {"title": "fig"}}, "must_not": [{"match_phrase": {"title": "apple date"}}]}}),
            "+body:grape title:fig -title:\"apple date\"",
        ),
    ];
    for (q, equivalent) in cases {
        let (st, v) = post(&s.url("/fruit/_search"), &json!({"query": q, "size": 7})).await;
        assert_eq!(st, 200, "{q}: {v}");
        assert_eq!(hit_ids(&v, "/hits/hits"), s.ids(equivalent, 7), "{q}");
        assert_eq!(
            v["hits"]["total"]["value"].as_u64().unwrap(),
            s.count(equivalent),
            "{q}"
        );
        assert_eq!(v["hits"]["total"]["relation"], "eq");
        let first = &v["hits"]["hits"][0];
        if !first.is_null() {
            assert_eq!(first["_index"], "fruit");
            assert!(first["_source"]["title"].is_string(), "{first}");
        }
        let (st, c) = post(&s.url("/fruit/_count"), &json!({"query": q})).await;
        assert_eq!((st, c["count"].as_u64().unwrap()), (200, s.count(equivalent)), "{q}");
    }
    // URI search, size 0, no total, no source, highlight.
    let (_, v) = get(&s.url("/fruit/_search?q=apple&size=2")).await;
    assert_eq!(hit_ids(&v, "/hits/hits"), s.ids("apple", 2));
    let (_, v) = post(
        &s.url("/fruit/_search"),
        &json!({"query": {"match": {"body": "fig"}}, "size": 0}),
    )
    .await;
    assert_eq!(v["hits"]["hits"], json!([]));
    assert_eq!(v["hits"]["total"]["value"].as_u64().unwrap(), s.count("body:fig"));
    let (_, v) = post(
        &s.url("/fruit/_search"),
        &json!({"query": {"match": {"body": "fig"}}, "track_total_hits": false, "_source": false, "highlight": {"fields": {"body": {}}}}),
    )
    .await;
    assert!(v["hits"].get("total").is_none());
    assert!(v["hits"]["hits"][0].get("_source").is_none());
    assert!(
        v["hits"]["hits"][0]["highlight"]["body"][0]
            .as_str()
            .unwrap()
            .contains("<em>fig</em>"),
        "{v}"
    );
    // Highlight options are honoured: fields, tags, the whole field.
    let q = json!({"match": {"body": "fig"}});
    let (st, v) = post(
        &s.url("/fruit/_search"),
        &json!({"query": q, "highlight": {"fields": {"title": {}}}}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["hits"]["hits"][0]["highlight"],
        json!({}),
        "only title, where fig is not asked: {v}"
    );
    let (_, v) = post(
        &s.url("/fruit/_search"),
        &json!({"query": q, "highlight": {"fields": [{"b*": {}}], "pre_tags": ["<b>"], "post_tags": ["</b>"], "number_of_fragments": 0}}),
    )
    .await;
    let hl = v["hits"]["hits"][0]["highlight"]["body"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hl.contains("<b>fig</b>") && !hl.contains('…'), "{v}");
    let (_, v) = post(
        &s.url("/fruit/_search"),
        &json!({"query": q, "highlight": {"fragment_size": 8}}),
    )
    .await;
    let short = v["hits"]["hits"][0]["highlight"]["body"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        short.len() < hl.len() && short.contains("<em>fig</em>"),
        "{short} vs {hl}"
    );
    for (bad, says) in [
        (json!({"type": "fvh"}), "[type]"),
        (json!({"fields": {"nope": {}}}), "not in the mapping"),
        (json!({"number_of_fragments": 5}), "number_of_fragments"),
    ] {
        let (st, v) = post(&s.url("/fruit/_search"), &json!({"query": q, "highlight": bad})).await;
        assert_eq!(st, 400, "{v}");
        assert!(v.to_string().contains(says), "{v}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors() {
    let s = start(|c| c.max_body_bytes = 4096).await;
    let (st, v) = get(&s.url("/search?q=%22unclosed")).await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["position"], 0);
    assert!(v["error"]["caret"].as_str().unwrap().contains('^'));
    for path in [
        "/search",
        "/search?q=a&mode=fastest",
        "/search?q=a&k=100000",
        "/search?q=a&k=-1",
    ] {
        let (st, v) = get(&s.url(path)).await;
        assert_eq!(st, 400, "{path}: {v}");
        assert!(v["error"]["reason"].is_string(), "{path}: {v}");
    }
    let bad_bodies = [
        json!({"query": {"fuzzy": {"body": "x"}}}),
        json!({"query": {"match": {"author": "x"}}}),
        json!({"query": {"match": {"body": "x", "title": "y"}}}),
        json!({"query": {"range": {"body": {"gte": "a"}}}}),
        json!({"query": {"match": {"body": "x"}}, "aggs": {"t": {"terms": {"field": "body"}}}}),
        json!({"query": {"match": {"body": "x"}}, "from": 10_000}),
        json!({"query": {"match": {"body": "x"}}, "sort": ["title"]}),
        json!({"query": {"query_string": {"query": "(a"}}}),
        json!([1, 2]),
    ];
    for b in bad_bodies {
        let (st, v) = post(&s.url("/fruit/_search"), &b).await;
        assert_eq!(st, 400, "{b}: {v}");
    }
    let r = reqwest::Client::new()
        .post(s.url("/fruit/_search"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let big = json!({"query": {"query_string": {"query": "a ".repeat(5000)}}});
    let (st, _) = post(&s.url("/fruit/_search"), &big).await;
    assert_eq!(st, 413);
    let (st, v) = post(&s.url("/nope/_search"), &json!({"query": {"match": {"body": "x"}}})).await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (404, Some("index_not_found_exception"))
    );
    let (st, _) = get(&s.url("/no/such/endpoint")).await;
    assert_eq!(st, 404);
    s.stop().await;
}

/// Every error the server sends is JSON in Elasticsearch's shape, the
/// framework's own rejections included (issue #19).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_body_is_json() {
    let s = start(|c| c.max_body_bytes = 4096).await;
    let client = reqwest::Client::new();
    let big = "x".repeat(10_000);
    for (method, path, body) in [
        (reqwest::Method::POST, "/fruit/_search", big.clone()),
        (reqwest::Method::POST, "/docs", big.clone()),
        (reqwest::Method::DELETE, "/fruit", String::new()),
        (reqwest::Method::PATCH, "/search", String::new()),
        (reqwest::Method::GET, "/no/such/endpoint", String::new()),
    ] {
        let r = client
            .request(method.clone(), s.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        assert!(status >= 400, "{method} {path}: {status}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        let v: serde_json::Value = r.json().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert!(ct.starts_with("application/json"), "{method} {path}: {ct}");
        assert_eq!(v["status"], status, "{method} {path}: {v}");
        assert!(
            v["error"]["type"].is_string() && v["error"]["reason"].is_string(),
            "{v}"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_searches_are_exact_and_overload_is_refused() {
    let s = start(|c| {
        c.threads = 2;
        c.queue = 4;
    })
    .await;
    let s = Arc::new(s);
    let queries = [
        "apple",
        "banana fig",
        "+cherry +date",
        "\"grape honeydew\"",
        "elder -apple",
    ];
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let q = queries[i % queries.len()];
            let (st, v) = get(&s.url(&format!("/search?q={}&k=10", urlencode(q)))).await;
            (q, st, v)
        }));
    }
    let (mut ok, mut overloaded) = (0, 0);
    for t in tasks {
        let (q, st, v) = t.await.unwrap();
        match st {
            200 => {
                assert_eq!(hit_ids(&v, "/hits"), s.ids(q, 10), "{q}");
                ok += 1;
            }
            503 => {
                assert_eq!(v["error"]["type"], "overloaded");
                overloaded += 1;
            }
            other => panic!("{q}: status {other}: {v}"),
        }
    }
    assert_eq!(ok + overloaded, 200);
    assert!(ok > 0);
    let s = Arc::into_inner(s).unwrap();
    s.stop().await;
}

/// The official `opensearch-py` client, unmodified, against the server. The
/// Python interpreter with `opensearch-py` installed comes from
/// `TIERDEX_OPENSEARCH_PY` (`.ci/run` sets one up); without it the test is
/// skipped loudly, except under CI where it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opensearch_python_client_works_unmodified() {
    python_client_session("TIERDEX_OPENSEARCH_PY", "opensearch_client.py", None).await;
}

/// The official `elasticsearch-py` clients, 8.x and 9.x, unmodified: they
/// refuse a server whose answers lack the `X-Elastic-Product:
/// Elasticsearch` header, and 9.x sends its bodies as
/// `application/vnd.elasticsearch+json; compatible-with=9`. Interpreters
/// from `TIERDEX_ES8_PY` and `TIERDEX_ES9_PY` (`.ci/run` sets them up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_elasticsearch_python_clients_work_unmodified() {
    python_client_session("TIERDEX_ES8_PY", "elasticsearch_client.py", Some("8")).await;
    python_client_session("TIERDEX_ES9_PY", "elasticsearch_client.py", Some("9")).await;
}

/// What the official Elasticsearch clients check, without them: every
/// answer (errors included) carries `X-Elastic-Product: Elasticsearch`,
/// `GET /` has Elasticsearch 8's shape, and writes may declare the clients'
/// versioned JSON and NDJSON types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_what_the_elasticsearch_clients_check() {
    let s = start(|_| {}).await;
    let c = reqwest::Client::new();
    for path in ["/", "/fruit/_search?q=apple", "/no-such-index/_search", "/nowhere"] {
        let r = c.get(s.url(path)).send().await.unwrap();
        assert_eq!(
            r.headers().get("x-elastic-product").map(|v| v.to_str().unwrap()),
            Some("Elasticsearch"),
            "{path}: {}",
            r.status()
        );
    }
    let (st, v) = get(&s.url("/")).await;
    assert_eq!(st, 200);
    assert_eq!(v["version"]["number"], tierdex_server::ES_API_VERSION);
    assert_eq!(v["version"]["tierdex"], env!("CARGO_PKG_VERSION"));
    assert!(
        v["version"]["build_flavor"].is_string() && v["cluster_uuid"].is_string(),
        "{v}"
    );
    let vnd = "application/vnd.elasticsearch+json; compatible-with=9";
    let r = c
        .put(s.url("/fruit/_doc/vnd-1?refresh=true"))
        .header("content-type", vnd)
        .body(json!({"title": "vnd", "body": "quince"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    let r = c
        .put(s.url("/_bulk?refresh=true"))
        .header(
            "content-type",
            "application/vnd.elasticsearch+x-ndjson; compatible-with=9",
        )
        .body("{\"index\":{\"_index\":\"fruit\",\"_id\":\"vnd-2\"}}\n{\"title\":\"vnd\",\"body\":\"quince\"}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    assert_eq!(es_count(&s, "title:vnd").await, 2);
    // Other types still refused.
    let r = c
        .put(s.url("/fruit/_doc/vnd-3"))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    s.stop().await;
}

/// Runs `script` with the Python from `env` against a fresh server and
/// checks every answer against the engine's own.
async fn python_client_session(env: &str, script: &str, major: Option<&str>) {
    let Some(python) = std::env::var_os(env) else {
        assert!(std::env::var_os("CI").is_none(), "CI must set {env}");
        eprintln!("SKIPPED: set {env} to a python with the client installed");
        return;
    };
    let s = start(|_| {}).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let url = format!("http://{}", s.addr);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(&script)
            .arg(&url)
            .arg("fruit")
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    if let Some(m) = major {
        assert_eq!(v["client_major"], m, "{env} runs another major version of the client");
        assert_eq!(v["ids_query"], json!(["doc-1", "doc-3"]));
    }
    assert_eq!(v["ping"], true);
    assert_eq!(v["info"], "tierdex");
    let ids = |x: &Value| {
        x.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&v["match_ids"]), s.ids("body:apple body:banana", 5));
    assert_eq!(v["match_total"].as_u64().unwrap(), s.count("body:apple body:banana"));
    assert!(v["match_source"].is_string());
    assert_eq!(ids(&v["bool_ids"]), s.ids("+body:\"apple banana\" -title:fig", 3));
    assert!(v["bool_highlight"].as_str().unwrap().contains("<em>"), "{v}");
    assert_eq!(v["count"].as_u64().unwrap(), s.count("+cherry -date"));
    assert_eq!(ids(&v["uri_ids"]), s.ids("grape", 2));
    assert_eq!(v["bad_query"], 400);
    assert_eq!(v["bad_index"], 404);
    // The write side.
    assert_eq!(v["create_existing"], "resource_already_exists_exception");
    assert_eq!(v["exists"], true);
    assert_eq!(v["index_result"], "created");
    assert!(!v["auto_id"].as_str().unwrap().is_empty());
    assert_eq!(v["bulk_ok"], 51, "{v}");
    assert_eq!(v["bulk_errors"], json!([]));
    assert_eq!(v["kumquat_count"], 52);
    assert_eq!(v["delete_result"], "deleted");
    assert_eq!(v["delete_again"], 404);
    assert_eq!(v["kumquat_after_delete"], 51);
    assert_eq!(v["bad_field"], "mapper_parsing_exception");
    // helpers.scan: every match, once, through a scroll.
    let mut want: Vec<String> = (0..50).map(|i| format!("py-bulk-{i}")).collect();
    want.push(v["auto_id"].as_str().unwrap().to_string());
    want.sort();
    assert_eq!(ids(&v["scan_ids"]), want, "{v}");
    assert_eq!(v["update_result"], "updated");
    assert_eq!(v["updated_body"], "kumquat marmalade");
    if major.is_some() {
        // most_fields sums the fields' scores, as the query language's
        // unqualified word over title and body does; best_fields matches
        // the same documents.
        assert_eq!(ids(&v["most_fields_ids"]), s.ids("title:apple body:apple", 5));
        assert_eq!(
            v["best_fields_total"].as_u64().unwrap(),
            s.count("title:apple body:apple")
        );
    }
    s.stop().await;
}

async fn send(method: reqwest::Method, url: &str, body: Option<String>) -> (u16, Value) {
    let mut r = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        r = r.header("content-type", "application/json").body(b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn es_count(s: &Running, q: &str) -> u64 {
    let (st, v) = get(&s.url(&format!("/fruit/_count?q={}", urlencode(q)))).await;
    assert_eq!(st, 200, "{v}");
    v["count"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_are_durable_searchable_and_checked() {
    use reqwest::Method;
    let s = start(|c| {
        c.refresh_interval = std::time::Duration::from_millis(100);
        c.writer.buffer_docs = 25;
    })
    .await;
    let dir = s._dir.path().to_path_buf();
    // Native: JSON lines and arrays, refresh on request.
    let lines = (0..10)
        .map(|i| {
            json!({"id": format!("new-{i}"), "title": "zucchini", "body": format!("zucchini number {i}")}).to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (st, v) = send(Method::POST, &s.url("/docs?refresh=true"), Some(lines)).await;
    assert_eq!((st, v["added"].as_u64()), (200, Some(10)), "{v}");
    assert_eq!(es_count(&s, "zucchini").await, 10);
    let arr = json!([{"id": "new-0", "title": "zucchini replaced", "body": "x"}]).to_string();
    let (st, v) = send(Method::POST, &s.url("/docs?refresh"), Some(arr)).await;
    assert_eq!((st, v["replaced"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(es_count(&s, "body:zucchini").await, 9);
    let (st, _) = send(Method::DELETE, &s.url("/docs/new-1?refresh=true"), None).await;
    assert_eq!(st, 200);
    let (st, v) = send(Method::DELETE, &s.url("/docs/new-1"), None).await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(es_count(&s, "body:zucchini").await, 8);
    // Near-real-time: visible without an explicit refresh.
    let (st, _) = send(
        Method::PUT,
        &s.url("/fruit/_doc/nrt-1"),
        Some(json!({"title": "rutabaga"}).to_string()),
    )
    .await;
    assert_eq!(st, 201);
    let waited = std::time::Instant::now();
    while es_count(&s, "rutabaga").await == 0 {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(3),
            "not visible after 3 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Bulk with a bad document: only its item fails.
    let bulk = [
        json!({"index": {"_id": "b-1"}}).to_string(),
        json!({"title": "okra"}).to_string(),
        json!({"create": {"_id": "b-1"}}).to_string(),
        json!({"title": "okra again"}).to_string(),
        json!({"index": {"_id": "b-2"}}).to_string(),
        json!({"colour": "green"}).to_string(),
        json!({"delete": {"_id": "doc-5"}}).to_string(),
    ]
    .join("\n")
        + "\n";
    let (st, v) = send(Method::POST, &s.url("/fruit/_bulk?refresh=true"), Some(bulk)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["errors"], true);
    let statuses: Vec<u64> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i.as_object().unwrap().values().next().unwrap()["status"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(statuses, vec![201, 409, 400, 200]);
    assert_eq!(es_count(&s, "okra").await, 1);
    // Bad inputs: clear 4xx.
    for (method, path, body) in [
        (Method::POST, "/docs", "not json"),
        (Method::POST, "/docs", "[{\"title\": \"no id\"}]"),
        (Method::POST, "/docs", "[{\"id\": \"\", \"title\": \"empty id\"}]"),
        (Method::POST, "/fruit/_bulk", "{\"update\": {\"_id\": \"1\"}}\n{}\n"),
        (Method::POST, "/fruit/_bulk", "{\"index\": {}}\n"),
        (Method::PUT, "/fruit/_doc/x", "[1, 2]"),
        (Method::PUT, "/other/_doc/x", "{}"),
    ] {
        let (st, v) = send(method.clone(), &s.url(path), Some(body.to_string())).await;
        assert!((400..500).contains(&st), "{method} {path} {body}: {st} {v}");
        assert!(v["error"].is_object(), "{method} {path}: {v}");
    }
    // Concurrent additions and searches: every search answers, counts never go back.
    let url = s.url("");
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let url = url.clone();
            tokio::spawn(async move {
                for i in 0..30 {
                    let d =
                        json!([{"id": format!("c-{t}-{i}"), "title": "parsnip", "body": "parsnip soup"}]).to_string();
                    let (st, v) = send(Method::POST, &format!("{url}/docs"), Some(d)).await;
                    assert_eq!(st, 200, "{v}");
                }
            })
        })
        .collect();
    let mut last = 0;
    for _ in 0..40 {
        let n = es_count(&s, "parsnip").await;
        assert!(n >= last, "count went back from {last} to {n}");
        last = n;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for w in writers {
        w.await.unwrap();
    }
    let (st, _) = send(Method::POST, &s.url("/refresh"), None).await;
    assert_eq!(st, 200);
    assert_eq!(es_count(&s, "parsnip").await, 60);
    let (_, stats) = get(&s.url("/stats")).await;
    assert!(stats["writer"]["flushes"].as_u64().unwrap() >= 1, "{stats}");
    let (_, metrics) = {
        let r = reqwest::get(s.url("/metrics")).await.unwrap();
        (r.status(), r.text().await.unwrap())
    };
    assert!(metrics.contains("tierdex_docs_written_total{op=\"add\"}"), "{metrics}");
    // After a clean stop and a flush, a plain searcher sees everything.
    let expected = es_count(&s, "parsnip okra zucchini rutabaga").await;
    let st = {
        let (tx, done) = (s.stop, s.done);
        tx.unwrap().send(()).unwrap();
        done.await.unwrap().unwrap();
        s.state.clone()
    };
    st.flush().unwrap();
    drop(st);
    let fresh = Searcher::open(&dir).unwrap();
    assert_eq!(
        fresh
            .search("parsnip okra zucchini rutabaga", Mode::Count, 0)
            .unwrap()
            .count,
        Some(expected)
    );
}
