//! Many indices in one data directory (issue #23): creation with mappings
//! and settings, creation on the first write, listing (`_cat`), health,
//! aliases (search and write through them), deletion, and all of it
//! surviving a restart.

use serde_json::{json, Value};
use tierdex_server::{state, ServerConfig};

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

async fn start(data: &std::path::Path, tune: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut config = ServerConfig::new(data.to_path_buf());
    config.data = Some(data.to_path_buf());
    tune(&mut config);
    let st = state(config).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(tierdex_server::serve(
        st,
        "127.0.0.1:0".parse().unwrap(),
        move |a| addr_tx.send(a).unwrap(),
        async move {
            let _ = rx.await;
        },
    ));
    let addr = addr_rx.await.unwrap();
    Server {
        base: format!("http://{addr}"),
        stop: Some(tx),
        done: Some(done),
    }
}

impl Server {
    async fn send(&self, method: &str, path: &str, body: Option<String>, ndjson: bool) -> (u16, String) {
        let client = reqwest::Client::new();
        let mut req = client.request(method.parse().unwrap(), format!("{}{path}", self.base));
        if let Some(b) = body {
            let ct = if ndjson {
                "application/x-ndjson"
            } else {
                "application/json"
            };
            req = req.header("content-type", ct).body(b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    }
    async fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, text) = self.send(method, path, body.map(|b| b.to_string()), false).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().await.unwrap().unwrap();
    }
    async fn ids(&self, index: &str, query: Value) -> Vec<String> {
        let (s, v) = self
            .json(
                "POST",
                &format!("/{index}/_search"),
                Some(json!({"query": query, "size": 100})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let mut ids: Vec<String> = v["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    }
}

fn reason(v: &Value) -> String {
    v["error"]["reason"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_data_directory_holds_many_indices_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), |_| {}).await;

    let (st, v) = s.json("GET", "/_cat/indices?format=json", None).await;
    assert_eq!((st, v), (200, json!([])));

    // Created with a mapping and settings; a second creation is refused.
    let books = json!({
        "settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}},
        "mappings": {"properties": {"title": {"type": "text"}, "genre": {"type": "keyword"}, "year": {"type": "long"}}},
    });
    let (st, v) = s.json("PUT", "/books", Some(books.clone())).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["acknowledged"], true);
    let (st, v) = s.json("PUT", "/books", Some(books)).await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["type"], "resource_already_exists_exception");
    for bad in ["Books", "_books", "a%20b", "a%2Cb"] {
        let (st, v) = s.json("PUT", &format!("/{bad}"), Some(json!({}))).await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
    let (st, v) = s
        .json("PUT", "/x", Some(json!({"settings": {"number_of_shards": 2}})))
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("one shard"), "{v}");
    let (st, v) = s
        .json(
            "PUT",
            "/x",
            Some(json!({"settings": {"index": {"refresh_interval": "5s"}}})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("refresh_interval"), "{v}");
    let (st, _) = s.json("HEAD", "/x", None).await;
    assert_eq!(st, 404, "a refused creation leaves nothing behind");

    // Documents into it, and into an index created by its first write.
    for (i, (title, genre, year)) in [
        ("dune", "scifi", 1965),
        ("emma", "classic", 1815),
        ("solaris", "scifi", 1961),
    ]
    .iter()
    .enumerate()
    {
        let (st, v) = s
            .json(
                "PUT",
                &format!("/books/_doc/b{i}"),
                Some(json!({"title": title, "genre": genre, "year": year})),
            )
            .await;
        assert_eq!(st, 201, "{v}");
        assert_eq!(v["_index"], "books");
    }
    let (st, v) = s
        .json(
            "POST",
            "/logs-1/_doc?refresh=true",
            Some(json!({"msg": "disk full", "level": "error"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["_index"], "logs-1");
    let bulk = [
        json!({"index": {"_index": "logs-2", "_id": "l1"}}),
        json!({"msg": "disk ok", "level": "info"}),
        json!({"index": {"_index": "books", "_id": "b9"}}),
        json!({"title": "ubik", "genre": "scifi", "year": 1969}),
        json!({"delete": {"_index": "nowhere", "_id": "z"}}),
        json!({"index": {"_index": "Bad", "_id": "z"}}),
        json!({"x": 1}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let (st, text) = s.send("POST", "/_bulk?refresh=true", Some(bulk), true).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["errors"], true);
    let items = v["items"].as_array().unwrap();
    assert_eq!(items[0]["index"]["status"], 201);
    assert_eq!(items[0]["index"]["_index"], "logs-2");
    assert_eq!(items[1]["index"]["status"], 201);
    assert_eq!(items[1]["index"]["_index"], "books");
    assert_eq!(items[2]["delete"]["status"], 404, "a delete creates no index: {v}");
    assert_eq!(items[3]["index"]["status"], 400, "{v}");
    let (st, _) = s.json("HEAD", "/nowhere", None).await;
    assert_eq!(st, 404);

    let (_, v) = s.json("POST", "/books/_refresh", None).await;
    assert!(v["_shards"].is_object());
    assert_eq!(
        s.ids("books", json!({"term": {"genre": "scifi"}})).await,
        ["b0", "b2", "b9"]
    );
    assert_eq!(s.ids("logs-2", json!({"match": {"msg": "disk"}})).await, ["l1"]);
    let (_, v) = s.json("GET", "/logs-1/_mapping", None).await;
    assert_eq!(v["logs-1"]["mappings"]["properties"]["level"]["type"], "text", "{v}");

    // Listing and health.
    let (st, v) = s.json("GET", "/_cat/indices?format=json", None).await;
    assert_eq!(st, 200);
    let rows = v.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["index"].as_str().unwrap()).collect();
    assert_eq!(names, ["books", "logs-1", "logs-2"]);
    assert_eq!(rows[0]["docs.count"], "4");
    assert_eq!(rows[0]["health"], "green");
    let (st, text) = s.send("GET", "/_cat/indices?v&h=index,docs.count", None, false).await;
    assert_eq!(st, 200);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["index", "docs.count"]);
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["books", "4"]);
    let (st, metrics) = s.send("GET", "/metrics", None, false).await;
    assert_eq!(st, 200);
    assert!(metrics.contains("tierdex_index_docs{index=\"books\"} 4"), "{metrics}");
    assert!(metrics.contains("tierdex_index_docs{index=\"logs-2\"} 1"), "{metrics}");
    assert!(metrics.contains("tierdex_search_contexts 0"), "{metrics}");
    // The process: open files (the indices' files among them) and memory.
    let gauge = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    assert!(gauge("process_open_fds ") > 3, "{metrics}");
    assert!(gauge("process_max_fds ") >= gauge("process_open_fds "), "{metrics}");
    assert!(gauge("process_resident_memory_bytes ") > 1 << 20, "{metrics}");
    assert!(
        gauge("process_virtual_memory_bytes ") >= gauge("process_resident_memory_bytes "),
        "{metrics}"
    );
    let (st, v) = s.json("GET", "/_cluster/health", None).await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "green");
    assert_eq!(v["active_primary_shards"], 3);
    let (st, v) = s
        .json(
            "PUT",
            "/mirror",
            Some(
                json!({"settings": {"number_of_replicas": 1, "index.tierdex.tier": "ram"}, "aliases": {"mirrors": {}}}),
            ),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.json("GET", "/_alias/mirrors", None).await;
    assert_eq!((st, &v), (200, &json!({"mirror": {"aliases": {"mirrors": {}}}})));
    let (_, v) = s.json("GET", "/_cluster/health", None).await;
    assert_eq!(v["status"], "yellow", "a replica a single node cannot hold");
    assert_eq!(v["unassigned_shards"], 1);
    let (st, v) = s
        .json("GET", "/_cluster/health?wait_for_status=green&timeout=1s", None)
        .await;
    assert_eq!((st, &v["timed_out"]), (408, &json!(true)));
    let (st, _) = s.json("GET", "/_cluster/health?wait_for_status=yellow", None).await;
    assert_eq!(st, 200);
    let (st, v) = s.json("GET", "/books", None).await;
    assert_eq!(st, 200);
    assert_eq!(v["books"]["settings"]["index"]["number_of_shards"], "1");
    assert_eq!(v["books"]["mappings"]["properties"]["genre"]["type"], "keyword");
    let (_, v) = s.json("GET", "/mirror/_settings", None).await;
    assert_eq!(v["mirror"]["settings"]["index"]["number_of_replicas"], "1");

    // Aliases: one index (reads and writes), two indices (a pattern too).
    let (st, v) = s
        .json(
            "POST",
            "/_aliases",
            Some(json!({"actions": [
                {"add": {"index": "books", "alias": "library"}},
                {"add": {"indices": ["logs-1", "logs-2"], "alias": "logs"}},
            ]})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(s.ids("library", json!({"term": {"genre": "classic"}})).await, ["b1"]);
    let (st, v) = s
        .json(
            "PUT",
            "/library/_doc/b10?refresh=true",
            Some(json!({"title": "it", "genre": "horror"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["_index"], "books");
    let (st, v) = s.json("POST", "/logs/_doc", Some(json!({"msg": "x"}))).await;
    assert_eq!(st, 400, "a write through an alias of two indices: {v}");
    let (st, v) = s.json("PUT", "/logs", Some(json!({}))).await;
    assert_eq!(st, 400, "an index named as an alias: {v}");
    let (st, v) = s.json("GET", "/_alias/logs", None).await;
    assert_eq!(st, 200);
    assert!(
        v["logs-1"]["aliases"]["logs"].is_object() && v["logs-2"]["aliases"]["logs"].is_object(),
        "{v}"
    );
    let (_, v) = s.json("GET", "/books", None).await;
    assert_eq!(v["books"]["aliases"], json!({"library": {}}));
    let (st, _) = s.json("GET", "/_alias/nothing", None).await;
    assert_eq!(st, 404);
    let (st, v) = s
        .json(
            "POST",
            "/_aliases",
            Some(json!({"actions": [{"add": {"index": "books", "alias": "ok"}}, {"add": {"index": "missing", "alias": "x"}}]})),
        )
        .await;
    assert_eq!(st, 404, "{v}");
    let (_, v) = s.json("GET", "/_alias/ok", None).await;
    assert_eq!(v["error"]["type"], "aliases_not_found_exception", "all or nothing: {v}");
    let (st, _) = s.json("DELETE", "/logs-2/_alias/logs", None).await;
    assert_eq!(st, 200);
    assert_eq!(s.ids("logs", json!({"match_all": {}})).await.len(), 1);

    // Deleting an index drops it from its aliases.
    let (st, v) = s.json("DELETE", "/logs-1", None).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.json("POST", "/logs-1/_search", Some(json!({}))).await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"]["type"], "index_not_found_exception");
    let (st, _) = s.json("GET", "/_alias/logs", None).await;
    assert_eq!(st, 404);
    let (st, _) = s.json("DELETE", "/logs-*", None).await;
    assert_eq!(st, 400, "deletion by pattern is refused");
    assert!(!dir.path().join("logs-1").exists());
    s.stop().await;

    // A restart finds the indices, their documents and aliases again.
    let s = start(dir.path(), |_| {}).await;
    let (_, v) = s.json("GET", "/_cat/indices?format=json", None).await;
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["books", "logs-2", "mirror"]);
    assert_eq!(
        s.ids("library", json!({"term": {"genre": "scifi"}})).await,
        ["b0", "b2", "b9"]
    );
    let (_, v) = s.json("GET", "/mirror/_settings", None).await;
    assert_eq!(v["mirror"]["settings"]["index"]["number_of_replicas"], "1");
    assert_eq!(v["mirror"]["settings"]["index"]["tierdex"]["tier"], "ram", "{v}");
    let (_, v) = s.json("GET", "/books/_settings", None).await;
    assert_eq!(
        v["books"]["settings"]["index"]["tierdex"]["tier"], "mmap",
        "the server's tier: {v}"
    );
    let (st, v) = s
        .json(
            "PUT",
            "/x",
            Some(json!({"settings": {"index": {"tierdex": {"tier": "tape"}}}})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("tape"), "{v}");
    s.stop().await;

    // Without auto-creation, a write to an unknown index is a 404.
    let s = start(dir.path(), |c| c.auto_create_index = false).await;
    let (st, v) = s.json("POST", "/fresh/_doc", Some(json!({"a": 1}))).await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = s.json("PUT", "/fresh", Some(json!({}))).await;
    assert_eq!(st, 200, "explicit creation still works: {v}");
    s.stop().await;
}

#[tokio::test]
async fn one_served_directory_names_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new(dir.path().join("only"));
    config.create = Some(tierdex::update::Strategy::Logarithmic);
    let st = state(config).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(tierdex_server::serve(
        st,
        "127.0.0.1:0".parse().unwrap(),
        move |a| addr_tx.send(a).unwrap(),
        async move {
            let _ = rx.await;
        },
    ));
    let s = Server {
        base: format!("http://{}", addr_rx.await.unwrap()),
        stop: Some(tx),
        done: Some(done),
    };
    let (st, v) = s.json("PUT", "/other", Some(json!({}))).await;
    assert_eq!(st, 400);
    assert!(reason(&v).contains("--data"), "{v}");
    let (st, v) = s.json("POST", "/other/_doc", Some(json!({"a": 1}))).await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = s.json("DELETE", "/only", None).await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.json("GET", "/_cat/indices?format=json", None).await;
    assert_eq!(st, 200);
    assert_eq!(v[0]["index"], "only");
    let (st, v) = s.json("POST", "/_aliases", Some(json!({"actions": []}))).await;
    assert_eq!(st, 400, "{v}");
    s.stop().await;
}

/// A search over several indices (a list, a pattern, an alias of two)
/// answers as one index holding all their documents: the same hits with
/// the same scores (summed statistics), the same count and aggregations.
#[tokio::test]
async fn a_search_over_several_indices_answers_as_one_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), |_| {}).await;
    let words = ["red", "green", "blue", "lamp", "chair", "table", "soft", "oak"];
    let mut bulk = String::new();
    for i in 0..120usize {
        let text: Vec<&str> = (0..(3 + i % 7)).map(|j| words[(i * 5 + j * j + i / 7) % 8]).collect();
        let doc = json!({"title": text.join(" "), "kind": words[i % 3], "price": (i * 37) % 100});
        let part = if i % 3 == 0 || i % 7 == 0 { "part-a" } else { "part-b" };
        for index in [part, "whole"] {
            bulk.push_str(&format!(
                "{}\n{doc}\n",
                json!({"index": {"_index": index, "_id": format!("p{i}")}})
            ));
        }
    }
    let (st, text) = s.send("POST", "/_bulk?refresh=true", Some(bulk), true).await;
    assert_eq!(st, 200, "{text}");
    assert!(text.contains("\"errors\":false"), "{text}");
    let (st, _) = s
        .json(
            "POST",
            "/_aliases",
            Some(json!({"actions": [{"add": {"index": "part-*", "alias": "parts"}}]})),
        )
        .await;
    assert_eq!(st, 200);
    let hits = |v: &Value| -> Vec<(String, f64)> {
        v["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["_id"].as_str().unwrap().to_string(), h["_score"].as_f64().unwrap()))
            .collect()
    };
    for body in [
        json!({"query": {"match": {"title": "red lamp"}}, "size": 15}),
        json!({"query": {"match": {"title": {"query": "oak chair", "operator": "and"}}}, "size": 5, "from": 3}),
        json!({"query": {"bool": {"must": {"match": {"title": "soft"}}, "filter": {"range": {"price": {"lt": 50}}}}}}),
        json!({"query": {"match_phrase": {"title": "blue lamp"}}, "size": 50}),
        json!({"size": 0, "aggs": {"kinds": {"terms": {"field": "kind.keyword"}}, "p": {"stats": {"field": "price"}}}}),
    ] {
        let (st, want) = s.json("POST", "/whole/_search", Some(body.clone())).await;
        assert_eq!(st, 200, "{want}");
        for path in ["/part-a,part-b/_search", "/part-*/_search", "/parts/_search"] {
            let (st, got) = s.json("POST", path, Some(body.clone())).await;
            assert_eq!(st, 200, "{path} {body}: {got}");
            assert_eq!(got["hits"]["total"], want["hits"]["total"], "{path} {body}");
            let (g, w) = (hits(&got), hits(&want));
            assert_eq!(g.len(), w.len(), "{path} {body}");
            for ((gi, gs), (wi, ws)) in g.iter().zip(&w) {
                assert!((gs - ws).abs() < 1e-4, "{path} {body}: {gi} {gs} against {wi} {ws}");
            }
            let ids = |v: &[(String, f64)]| {
                let mut x: Vec<String> = v.iter().map(|h| h.0.clone()).collect();
                x.sort();
                x
            };
            // Equal scores may order either way across the indices.
            if w.windows(2).all(|p| p[0].1 != p[1].1) {
                assert_eq!(ids(&g), ids(&w), "{path} {body}");
            }
            assert_eq!(got["aggregations"], want["aggregations"], "{path} {body}");
            assert_eq!(got["_shards"]["total"], 2);
            if let Some(h) = got["hits"]["hits"].as_array().and_then(|h| h.first()) {
                assert!(h["_index"].as_str().unwrap().starts_with("part-"), "{h}");
            }
        }
    }
    let (_, want) = s
        .json(
            "POST",
            "/whole/_count",
            Some(json!({"query": {"match": {"title": "green"}}})),
        )
        .await;
    let (_, got) = s
        .json(
            "POST",
            "/parts/_count",
            Some(json!({"query": {"match": {"title": "green"}}})),
        )
        .await;
    assert_eq!(got["count"], want["count"]);
    let (st, v) = s
        .json("POST", "/parts/_search", Some(json!({"sort": [{"price": "asc"}]})))
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("[sort]"), "{v}");
    let (st, v) = s.json("POST", "/nothing-*/_search", Some(json!({}))).await;
    assert_eq!((st, &v["hits"]["total"]["value"]), (200, &json!(0)), "{v}");
    s.stop().await;
}

/// `_update` merges into the latest `_source` (refreshed or not), upserts,
/// detects no-ops and loses no concurrent update; `_delete_by_query`
/// deletes exactly what the query matches.
#[tokio::test]
async fn partial_updates_and_deletes_by_query() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), |_| {}).await;
    let (st, v) = s
        .json(
            "PUT",
            "/items/_doc/a",
            Some(json!({"name": "lamp", "stock": {"n": 1, "where": "shelf"}, "tags": ["x", "y"]})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    // Not refreshed: the update still sees the write.
    let (st, v) = s
        .json(
            "POST",
            "/items/_update/a",
            Some(json!({"doc": {"stock": {"n": 2}, "tags": ["z"]}})),
        )
        .await;
    assert_eq!((st, &v["result"]), (200, &json!("updated")), "{v}");
    let (_, v) = s.json("GET", "/items/_doc/a", None).await;
    assert_eq!(
        v["_source"],
        json!({"name": "lamp", "stock": {"n": 2, "where": "shelf"}, "tags": ["z"]}),
        "objects merge, arrays are replaced"
    );
    let (st, v) = s
        .json("POST", "/items/_update/a", Some(json!({"doc": {"name": "lamp"}})))
        .await;
    assert_eq!((st, &v["result"]), (200, &json!("noop")), "{v}");
    let (st, v) = s
        .json("POST", "/items/_update/b", Some(json!({"doc": {"name": "desk"}})))
        .await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"]["type"], "document_missing_exception");
    let (st, v) = s
        .json(
            "POST",
            "/items/_update/b",
            Some(json!({"doc": {"name": "desk"}, "doc_as_upsert": true})),
        )
        .await;
    assert_eq!((st, &v["result"]), (201, &json!("created")), "{v}");
    let (st, v) = s
        .json(
            "POST",
            "/items/_update/c",
            Some(json!({"doc": {"n": 1}, "upsert": {"name": "chair", "n": 0}})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let (_, v) = s.json("GET", "/items/_doc/c", None).await;
    assert_eq!(v["_source"], json!({"name": "chair", "n": 0}), "upsert as given");
    for bad in [
        json!({"script": "ctx._source.n++"}),
        json!({"doc": 3}),
        json!({}),
        json!({"doc": {}, "doc_as_upsert": "yes"}),
    ] {
        let (st, v) = s.json("POST", "/items/_update/a", Some(bad.clone())).await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
    // Concurrent updates (fewer than the server's 16 writes at once) lose
    // nothing.
    let (st, _) = s.json("PUT", "/items/_doc/counter", Some(json!({"k": 0}))).await;
    assert_eq!(st, 201);
    let mut tasks = Vec::new();
    for i in 0..12 {
        let base = s.base.clone();
        tasks.push(tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/items/_update/counter"))
                .header("content-type", "application/json")
                .body(json!({"doc": {format!("f{i}"): i}}).to_string())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let (_, v) = s.json("GET", "/items/_doc/counter", None).await;
    assert_eq!(v["_source"].as_object().unwrap().len(), 13, "{v}");

    // Create-only writes, and write parameters checked.
    let (st, v) = s.json("PUT", "/items/_create/a", Some(json!({"name": "again"}))).await;
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["type"], "version_conflict_engine_exception");
    let (st, v) = s
        .json("PUT", "/items/_doc/a?op_type=create", Some(json!({"name": "again"})))
        .await;
    assert_eq!(st, 409, "{v}");
    let (st, v) = s.json("PUT", "/items/_create/new", Some(json!({"name": "new"}))).await;
    assert_eq!((st, &v["result"]), (201, &json!("created")), "{v}");
    for q in [
        "routing=x",
        "refresh=soon",
        "op_type=upsert",
        "version=3",
        "timeout=fast",
    ] {
        let (st, v) = s
            .json("PUT", &format!("/items/_doc/q?{q}"), Some(json!({"name": "q"})))
            .await;
        assert_eq!(st, 400, "{q}: {v}");
    }
    let (st, _) = s
        .json(
            "PUT",
            "/items/_doc/q?refresh=false&timeout=1m",
            Some(json!({"name": "q"})),
        )
        .await;
    assert_eq!(st, 201);

    // Delete by query.
    let mut bulk = String::new();
    for i in 0..50 {
        bulk.push_str(&format!(
            "{}\n{}\n",
            json!({"index": {"_id": format!("d{i}")}}),
            json!({"name": if i % 5 == 0 { "broken part" } else { "part" }, "n": i})
        ));
    }
    let (st, text) = s.send("POST", "/items/_bulk?refresh=true", Some(bulk), true).await;
    assert_eq!(st, 200, "{text}");
    let (st, v) = s
        .json(
            "POST",
            "/items/_delete_by_query?refresh=true",
            Some(json!({"query": {"match": {"name": "broken"}}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["deleted"], 10);
    let (_, v) = s
        .json(
            "POST",
            "/items/_count",
            Some(json!({"query": {"match": {"name": "part"}}})),
        )
        .await;
    assert_eq!(v["count"], 40);
    let (_, v) = s.json("GET", "/items/_doc/d5", None).await;
    assert_eq!(v["found"], false);
    let (st, v) = s
        .json(
            "POST",
            "/items/_delete_by_query",
            Some(json!({"query": {"match_all": {}}, "slices": 2})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.json("POST", "/items/_delete_by_query", Some(json!({}))).await;
    assert_eq!(st, 400, "{v}");
    s.stop().await;
}

/// A scroll pages through every match of one snapshot (writes after it
/// began unseen), a point in time keeps a snapshot for `search_after`
/// chains, both are cleared, and unknown URI parameters are refused.
#[tokio::test]
async fn scrolls_and_points_in_time_keep_their_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), |_| {}).await;
    let mut bulk = String::new();
    for i in 0..250 {
        bulk.push_str(&format!(
            "{}\n{}\n",
            json!({"index": {"_id": format!("s{i}")}}),
            json!({"text": if i % 2 == 0 { "even stone" } else { "odd stone" }, "n": i})
        ));
    }
    let (st, _) = s.send("POST", "/rocks/_bulk?refresh=true", Some(bulk), true).await;
    assert_eq!(st, 200);
    for sort in [json!(["_doc"]), json!([{"n": "desc"}]), Value::Null] {
        let mut body = json!({"query": {"match": {"text": "stone"}}, "size": 40});
        if !sort.is_null() {
            body["sort"] = sort.clone();
        }
        let (st, v) = s.json("POST", "/rocks/_search?scroll=1m", Some(body)).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["hits"]["total"]["value"], 250);
        let mut seen: Vec<String> = Vec::new();
        let mut page = v;
        let id = page["_scroll_id"].as_str().unwrap().to_string();
        // Written after the scroll began: not in it.
        let (st, _) = s
            .json(
                "PUT",
                "/rocks/_doc/late?refresh=true",
                Some(json!({"text": "late stone"})),
            )
            .await;
        assert!(st == 201 || st == 200);
        loop {
            let hits = page["hits"]["hits"].as_array().unwrap().clone();
            if hits.is_empty() {
                break;
            }
            seen.extend(hits.iter().map(|h| h["_id"].as_str().unwrap().to_string()));
            let (st, next) = s
                .json(
                    "POST",
                    "/_search/scroll",
                    Some(json!({"scroll": "1m", "scroll_id": id})),
                )
                .await;
            assert_eq!(st, 200, "{next}");
            assert_eq!(next["hits"]["total"]["value"], 250);
            page = next;
        }
        assert_eq!(seen.len(), 250, "sort {sort}");
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 250, "every match once, sort {sort}");
        if sort == json!([{"n": "desc"}]) {
            assert_eq!(seen[0], "s249");
            assert_eq!(seen[249], "s0");
        }
        let (st, v) = s
            .json("DELETE", "/_search/scroll", Some(json!({"scroll_id": [id]})))
            .await;
        assert_eq!((st, &v["num_freed"]), (200, &json!(1)), "{v}");
        let (st, v) = s
            .json(
                "POST",
                "/_search/scroll",
                Some(json!({"scroll": "1m", "scroll_id": id})),
            )
            .await;
        assert_eq!(st, 404, "{v}");
        let (st, _) = s.json("DELETE", "/rocks/_doc/late?refresh=true", None).await;
        assert_eq!(st, 200);
    }
    let (_, v) = s
        .json(
            "POST",
            "/rocks/_search?scroll=1m&rest_total_hits_as_int=true",
            Some(json!({"size": 1})),
        )
        .await;
    assert_eq!(v["hits"]["total"], 250, "{v}");
    let (st, v) = s.json("POST", "/rocks/_search?scroll=48h", Some(json!({}))).await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s
        .json("POST", "/rocks/_search?scroll=1m", Some(json!({"from": 5})))
        .await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.json("POST", "/rocks/_search?sort=n:asc", Some(json!({}))).await;
    assert_eq!(st, 400, "an unknown URI parameter is refused: {v}");
    let (st, v) = s.json("DELETE", "/_search/scroll/_all", None).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["num_freed"].as_u64().unwrap() >= 1);

    // A point in time: later writes unseen, search_after chains over it.
    let (st, v) = s.json("POST", "/rocks/_pit?keep_alive=1m", None).await;
    assert_eq!(st, 200, "{v}");
    let pit = v["id"].as_str().unwrap().to_string();
    let (st, _) = s
        .json(
            "PUT",
            "/rocks/_doc/after-pit?refresh=true",
            Some(json!({"text": "new stone"})),
        )
        .await;
    assert_eq!(st, 201);
    let mut after: Option<Value> = None;
    let mut seen = 0;
    loop {
        let mut body = json!({"pit": {"id": pit, "keep_alive": "1m"}, "size": 100, "sort": [{"_shard_doc": "asc"}],
            "query": {"match": {"text": "stone"}}});
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let (st, v) = s.json("POST", "/_search", Some(body)).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["pit_id"], pit.as_str());
        let hits = v["hits"]["hits"].as_array().unwrap();
        if hits.is_empty() {
            break;
        }
        assert!(hits.iter().all(|h| h["_id"] != "after-pit"));
        seen += hits.len();
        after = Some(hits.last().unwrap()["sort"].clone());
    }
    assert_eq!(seen, 250);
    let (_, v) = s
        .json(
            "POST",
            "/rocks/_count",
            Some(json!({"query": {"match": {"text": "stone"}}})),
        )
        .await;
    assert_eq!(v["count"], 251, "the index itself moved on");
    let (st, v) = s
        .json("POST", "/rocks/_search", Some(json!({"pit": {"id": pit}})))
        .await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.json("DELETE", "/_pit", Some(json!({"id": pit}))).await;
    assert_eq!((st, &v["num_freed"]), (200, &json!(1)), "{v}");
    let (st, _) = s.json("POST", "/_search", Some(json!({"pit": {"id": pit}}))).await;
    assert_eq!(st, 404);
    s.stop().await;
}

/// Runs a client scenario script (`program` and its first arguments, then
/// the server's URL and an admin's and a reader's API key id and secret)
/// against a fresh data-directory server with those two keys, and checks
/// that the script found every answer right.
async fn client_scenario(what: &str, program: std::ffi::OsString, first: Vec<String>) {
    let keys: Vec<(String, String, &str)> = [("admin-key", "admin"), ("reader-key", "read")]
        .iter()
        .map(|(id, role)| {
            let (secret, _) = tierdex_server::new_api_key(id).unwrap();
            (id.to_string(), secret, *role)
        })
        .collect();
    let entries: Vec<Value> = keys
        .iter()
        .map(|(id, secret, role)| json!({"id": id, "hash": tierdex_server::hash_secret(secret).unwrap(), "role": role}))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let auth_file = dir.path().join("auth.json");
    std::fs::write(&auth_file, json!({ "api_keys": entries }).to_string()).unwrap();
    let auth = tierdex_server::Auth::load(&auth_file).unwrap();
    let repos = dir.path().join("repos");
    let s = start(&dir.path().join("data"), |c| {
        c.auth = Some(std::sync::Arc::new(auth));
        c.path_repo = vec![repos];
    })
    .await;
    let mut args = first;
    args.extend([
        s.base.clone(),
        keys[0].0.clone(),
        keys[0].1.clone(),
        keys[1].0.clone(),
        keys[1].1.clone(),
    ]);
    let out = tokio::task::spawn_blocking(move || std::process::Command::new(program).args(&args).output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["ok"], true, "{what}: {:#}", v["failures"]);
    s.stop().await;
}

fn script(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The client scenario with elasticsearch-py 8 and 9 and
/// opensearch-py, unmodified (`TIERDEX_ES8_PY`, `TIERDEX_ES9_PY`,
/// `TIERDEX_OPENSEARCH_PY`: pythons with the clients; `.ci/run` makes them): two indices with mappings, bulk loads, filters, sorts,
/// aggregations, highlights, search_after, helpers.scan, update, delete by
/// query, an alias, deleting an index, 401 and 403; the script checks every
/// answer against a scan of what it loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_clients_run_the_service_scenario() {
    for (env, name) in [
        ("TIERDEX_ES8_PY", "elasticsearch_scenario.py"),
        ("TIERDEX_ES9_PY", "elasticsearch_scenario.py"),
        ("TIERDEX_OPENSEARCH_PY", "opensearch_scenario.py"),
    ] {
        let Some(python) = std::env::var_os(env) else {
            assert!(std::env::var_os("CI").is_none(), "CI must set {env}");
            eprintln!("SKIPPED: set {env} to a python with the client");
            continue;
        };
        client_scenario(env, python, vec![script(name)]).await;
    }
}

/// The same scenario with the official Node client (`TIERDEX_NODE_ES`: a
/// directory whose `node_modules` holds @elastic/elasticsearch; `.ci/run`
/// installs it from npm).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_elasticsearch_node_client_runs_the_service_scenario() {
    let Some(modules) = std::env::var_os("TIERDEX_NODE_ES") else {
        assert!(std::env::var_os("CI").is_none(), "CI must set TIERDEX_NODE_ES");
        eprintln!("SKIPPED: set TIERDEX_NODE_ES to a directory with node_modules/@elastic/elasticsearch");
        return;
    };
    client_scenario(
        "node",
        "node".into(),
        vec![
            script("elasticsearch_scenario.js"),
            modules.to_string_lossy().into_owned(),
        ],
    )
    .await;
}

/// Two indices written at once through `_bulk` while both are searched:
/// every acknowledged document is found in its own index, once, and never
/// in the other (the latency side of issue #23's load test is
/// `tierdex-bench isolation`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_indices_written_at_once_keep_their_documents_apart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), |c| {
        c.refresh_interval = std::time::Duration::from_millis(50)
    })
    .await;
    let mapping = json!({"mappings": {"properties": {"title": {"type": "text"}, "tok": {"type": "keyword"}}}});
    for index in ["alpha", "beta"] {
        assert_eq!(s.json("PUT", &format!("/{index}"), Some(mapping.clone())).await.0, 200);
    }
    let base = s.base.clone();
    let writer = |index: &'static str| {
        let base = base.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut acked = Vec::new();
            for b in 0..40 {
                let mut body = String::new();
                for j in 0..25 {
                    let id = format!("{index}-{b}-{j}");
                    body += &format!("{}\n", json!({"index": {"_id": id}}));
                    body += &format!("{}\n", json!({"title": format!("shared words {b} {j}"), "tok": id}));
                }
                // Every other batch names its index in the body instead of the path.
                let (path, body) = if b % 2 == 0 {
                    (format!("/{index}/_bulk"), body)
                } else {
                    let routed = body.replace(
                        "{\"index\":{\"_id\"",
                        &format!("{{\"index\":{{\"_index\":\"{index}\",\"_id\""),
                    );
                    ("/_bulk".to_string(), routed)
                };
                let r = client
                    .post(format!("{base}{path}"))
                    .header("content-type", "application/x-ndjson")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap();
                assert_eq!((status, &v["errors"]), (200, &json!(false)), "{v}");
                for j in 0..25 {
                    acked.push(format!("{index}-{b}-{j}"));
                }
            }
            acked
        })
    };
    let searches = {
        let base = base.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            for i in 0..100 {
                let index = if i % 2 == 0 { "alpha" } else { "beta" };
                let r = client
                    .get(format!("{base}/{index}/_search?q=title:shared&size=5"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200);
            }
        })
    };
    let (a, b) = (writer("alpha"), writer("beta"));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    searches.await.unwrap();
    assert_eq!(s.json("POST", "/alpha,beta/_refresh", None).await.0, 200);
    for (own, other, acked) in [("alpha", "beta", &a), ("beta", "alpha", &b)] {
        for chunk in acked.chunks(200) {
            let q = json!({"query": {"terms": {"tok": chunk}}});
            let (_, v) = s.json("POST", &format!("/{own}/_count"), Some(q.clone())).await;
            assert_eq!(v["count"], chunk.len(), "{own}: {v}");
            let (_, v) = s.json("POST", &format!("/{other}/_count"), Some(q)).await;
            assert_eq!(v["count"], 0, "{other} holds documents of {own}: {v}");
        }
        let (_, v) = s.json("GET", &format!("/{own}/_count"), None).await;
        assert_eq!(v["count"], acked.len(), "{own}: {v}");
    }
    s.stop().await;
}
