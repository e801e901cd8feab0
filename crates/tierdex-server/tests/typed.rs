//! Typed documents through the Elasticsearch API (issue #21): an index
//! created with a mapping, documents with keywords, numbers and dates,
//! filtered, sorted and paged searches checked against a scan of what was
//! sent, real-time gets, `_mget`, mapping updates and errors.

use std::collections::HashMap;

use serde_json::{json, Value};
use tierdex_server::{state, ServerConfig};

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new(dir.path().join("talks"));
    config.index_name = "talks".into();
    config.create = Some(tierdex::update::Strategy::Logarithmic);
    let st = state(config).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(tierdex_server::serve(
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
        _dir: dir,
    }
}

impl Server {
    async fn send(&self, method: &str, path: &str, body: Option<String>, ndjson: bool) -> (u16, Value) {
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
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
    async fn json(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        self.send(method, path, Some(body.to_string()), false).await
    }
}

fn talk(i: usize) -> Value {
    let tags = [
        ["science", "brain"],
        ["art", "music"],
        ["science", "space"],
        ["health", "brain"],
    ][i % 4];
    let mut v = json!({
        "name": format!("talk {i} about {}", tags[0]),
        "tags": tags,
        "views": (i * 7919) % 1000,
        "date": 1_300_000_000 + (i as i64 * 86_400 * 13) % 400_000_000,
    });
    if !i.is_multiple_of(5) {
        v["rating"] = json!((i % 17) as f64 / 2.0);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_documents_through_the_elasticsearch_api() {
    let s = start().await;
    let mapping = json!({"mappings": {"dynamic": "strict", "properties": {
        "name": {"type": "text"},
        "tags": {"type": "keyword"},
        "views": {"type": "long"},
        "date": {"type": "date", "format": "epoch_second"},
        "rating": {"type": "double"}
    }}});
    let (st, v) = s.json("PUT", "/talks", mapping.clone()).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.send("GET", "/talks/_mapping", None, false).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["talks"]["mappings"]["properties"]["tags"]["type"], "keyword", "{v}");
    // Bulk-load typed documents.
    let docs: HashMap<String, Value> = (0..80).map(|i| (format!("t{i}"), talk(i))).collect();
    let mut bulk = String::new();
    for (id, d) in &docs {
        bulk.push_str(&json!({"index": {"_index": "talks", "_id": id}}).to_string());
        bulk.push('\n');
        bulk.push_str(&d.to_string());
        bulk.push('\n');
    }
    let (st, v) = s.send("POST", "/_bulk?refresh=true", Some(bulk), true).await;
    assert_eq!((st, v["errors"].as_bool()), (200, Some(false)), "{v}");

    // Filtered, sorted, paged: against a scan.
    let want: Vec<(&String, &Value)> = {
        let mut w: Vec<_> = docs
            .iter()
            .filter(|(_, d)| {
                d["tags"].as_array().unwrap().contains(&json!("brain")) && d["views"].as_u64().unwrap() >= 200
            })
            .collect();
        w.sort_by(|a, b| b.1["views"].as_u64().cmp(&a.1["views"].as_u64()).then(a.0.cmp(b.0)));
        w
    };
    let query = json!({"bool": {"filter": [{"term": {"tags": "brain"}}, {"range": {"views": {"gte": 200}}}]}});
    let (st, v) = s
        .json(
            "POST",
            "/talks/_search",
            json!({"query": query, "sort": [{"views": "desc"}], "size": 4, "from": 2, "_source": ["views"]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"]["total"]["value"], want.len(), "{v}");
    let hits = v["hits"]["hits"].as_array().unwrap();
    let got_views: Vec<u64> = hits.iter().map(|h| h["sort"][0].as_u64().unwrap()).collect();
    let want_views: Vec<u64> = want
        .iter()
        .skip(2)
        .take(4)
        .map(|(_, d)| d["views"].as_u64().unwrap())
        .collect();
    assert_eq!(got_views, want_views, "{v}");
    assert_eq!(hits[0]["_source"], json!({"views": hits[0]["sort"][0]}), "{v}");
    // search_after walks the whole order.
    let mut after: Option<Value> = None;
    let mut walked = Vec::new();
    loop {
        let mut body = json!({"query": query, "sort": [{"views": "desc"}], "size": 3});
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let (st, v) = s.json("POST", "/talks/_search", body).await;
        assert_eq!(st, 200, "{v}");
        let hits = v["hits"]["hits"].as_array().unwrap().clone();
        if hits.is_empty() {
            break;
        }
        walked.extend(hits.iter().map(|h| h["sort"][0].as_u64().unwrap()));
        after = Some(hits.last().unwrap()["sort"].clone());
    }
    let all_views: Vec<u64> = want.iter().map(|(_, d)| d["views"].as_u64().unwrap()).collect();
    assert_eq!(walked, all_views);
    // Dates by their format, ranges in counts, missing values sorted last.
    let in_range = docs
        .values()
        .filter(|d| (1_400_000_000..1_500_000_000).contains(&d["date"].as_i64().unwrap()))
        .count();
    let (st, v) = s
        .json(
            "POST",
            "/talks/_count",
            json!({"query": {"range": {"date": {"gte": 1_400_000_000, "lt": 1_500_000_000}}}}),
        )
        .await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(in_range as u64)), "{v}");
    let (_, v) = s
        .json(
            "POST",
            "/talks/_search",
            json!({"query": {"match_all": {}}, "sort": [{"rating": "asc"}], "size": 80}),
        )
        .await;
    let ratings: Vec<&Value> = v["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["sort"][0])
        .collect();
    assert!(
        ratings[..64].iter().all(|r| r.is_number()) && ratings[64..].iter().all(|r| r.is_null()),
        "{ratings:?}"
    );

    // Real-time get: a write without refresh is found at once.
    let (st, v) = s
        .json("PUT", "/talks/_doc/new1", json!({"name": "fresh", "views": 5}))
        .await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = s.send("GET", "/talks/_doc/new1", None, false).await;
    assert_eq!(
        (st, &v["found"], &v["_source"]["views"]),
        (200, &json!(true), &json!(5)),
        "{v}"
    );
    let (st, v) = s.send("GET", "/talks/_doc/t3?_source_includes=tags", None, false).await;
    assert_eq!((st, &v["_source"]), (200, &json!({"tags": docs["t3"]["tags"]})), "{v}");
    let (st, v) = s.send("GET", "/talks/_doc/nope", None, false).await;
    assert_eq!((st, &v["found"]), (404, &json!(false)), "{v}");
    let (st, _) = s.send("HEAD", "/talks/_doc/t1", None, false).await;
    assert_eq!(st, 200);
    let (st, _) = s.send("HEAD", "/talks/_doc/nope", None, false).await;
    assert_eq!(st, 404);
    let (st, v) = s
        .json("POST", "/talks/_mget", json!({"ids": ["t1", "nope", "new1"]}))
        .await;
    assert_eq!(st, 200, "{v}");
    let found: Vec<bool> = v["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["found"].as_bool().unwrap())
        .collect();
    assert_eq!(found, [true, false, true]);
    let (st, v) = s
        .json(
            "POST",
            "/_mget",
            json!({"docs": [{"_index": "talks", "_id": "t2", "_source": false}]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["docs"][0].get("_source").is_none() && v["docs"][0]["found"] == json!(true),
        "{v}"
    );

    // Bad documents and mapping changes are refused clearly.
    let (st, v) = s.json("PUT", "/talks/_doc/bad", json!({"views": "many"})).await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (400, Some("mapper_parsing_exception")),
        "{v}"
    );
    let (st, v) = s.json("PUT", "/talks/_doc/bad", json!({"speaker": "x"})).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["reason"].as_str().unwrap().contains("speaker"), "{v}");
    let (st, v) = s.json("PUT", "/talks", mapping).await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (400, Some("resource_already_exists_exception")),
        "{v}"
    );
    let (st, v) = s
        .json(
            "PUT",
            "/talks/_mapping",
            json!({"properties": {"speaker": {"type": "keyword"}}}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.json("PUT", "/talks/_doc/sp", json!({"speaker": "Ada"})).await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = s
        .json(
            "PUT",
            "/talks/_mapping",
            json!({"properties": {"views": {"type": "keyword"}}}),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"]["reason"].as_str().unwrap().contains("cannot be changed"),
        "{v}"
    );
    let (st, v) = s
        .json(
            "POST",
            "/talks/_search",
            json!({"query": {"match_all": {}}, "sort": ["name"]}),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["reason"].as_str().unwrap().contains("text field"), "{v}");
    let (st, v) = s
        .json(
            "POST",
            "/talks/_search",
            json!({"query": {"match_all": {}}, "from": 9_999, "size": 5}),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.send("POST", "/talks/_forcemerge", None, false).await;
    assert_eq!(st, 200, "{v}");
    let _ = s.stop.map(|t| t.send(()));
}

/// Aggregations through `_search` (issue #22): facets, a histogram and
/// stats over a filtered query equal a count of the documents sent; bad
/// aggregation requests are 400s that name what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregations_through_the_elasticsearch_api() {
    let s = start().await;
    let mapping = json!({"mappings": {"properties": {
        "name": {"type": "text"},
        "tags": {"type": "keyword"},
        "views": {"type": "long"},
        "date": {"type": "date", "format": "epoch_second"},
        "rating": {"type": "double"}
    }}});
    let (st, v) = s.json("PUT", "/talks", mapping).await;
    assert_eq!(st, 200, "{v}");
    let docs: Vec<Value> = (0..120).map(talk).collect();
    let mut bulk = String::new();
    for (i, d) in docs.iter().enumerate() {
        bulk.push_str(&json!({"index": {"_index": "talks", "_id": format!("t{i}")}}).to_string());
        bulk.push('\n');
        bulk.push_str(&d.to_string());
        bulk.push('\n');
    }
    let (st, v) = s.send("POST", "/_bulk?refresh=true", Some(bulk), true).await;
    assert_eq!((st, v["errors"].as_bool()), (200, Some(false)), "{v}");

    let selected: Vec<&Value> = docs.iter().filter(|d| d["views"].as_u64().unwrap() >= 300).collect();
    let body = json!({
        "size": 0,
        "query": {"range": {"views": {"gte": 300}}},
        "aggs": {
            "by_tag": {"terms": {"field": "tags", "size": 10},
                       "aggs": {"top_views": {"max": {"field": "views"}}}},
            "views_100": {"histogram": {"field": "views", "interval": 100}},
            "rating": {"stats": {"field": "rating"}}
        }
    });
    let (st, v) = s.json("POST", "/talks/_search", body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"]["total"]["value"], selected.len(), "{v}");
    assert!(v["hits"]["hits"].as_array().unwrap().is_empty(), "{v}");
    let aggs = &v["aggregations"];
    // Terms: counts and each bucket's max, by count then key.
    let mut tags: HashMap<String, (u64, u64)> = HashMap::new();
    for d in &selected {
        for t in d["tags"].as_array().unwrap() {
            let e = tags.entry(t.as_str().unwrap().to_string()).or_default();
            e.0 += 1;
            e.1 = e.1.max(d["views"].as_u64().unwrap());
        }
    }
    let mut want: Vec<(String, (u64, u64))> = tags.into_iter().collect();
    want.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    let got: Vec<(String, (u64, u64))> = aggs["by_tag"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let max = b["top_views"]["value"].as_f64().unwrap() as u64;
            (
                b["key"].as_str().unwrap().to_string(),
                (b["doc_count"].as_u64().unwrap(), max),
            )
        })
        .collect();
    assert_eq!(got, want, "{aggs}");
    // Histogram: every bucket from the first to the last value, in order.
    let mut hist: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for d in &selected {
        *hist.entry(d["views"].as_u64().unwrap() / 100 * 100).or_default() += 1;
    }
    let got: Vec<(u64, u64)> = aggs["views_100"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key"].as_f64().unwrap() as u64, b["doc_count"].as_u64().unwrap()))
        .collect();
    let want: Vec<(u64, u64)> = hist.into_iter().collect();
    assert_eq!(got, want, "{aggs}");
    // Stats over the documents that have a rating.
    let ratings: Vec<f64> = selected.iter().filter_map(|d| d["rating"].as_f64()).collect();
    assert_eq!(aggs["rating"]["count"], ratings.len(), "{aggs}");
    let sum: f64 = ratings.iter().sum();
    assert!((aggs["rating"]["sum"].as_f64().unwrap() - sum).abs() < 1e-9, "{aggs}");
    let min = ratings.iter().cloned().fold(f64::INFINITY, f64::min);
    assert_eq!(aggs["rating"]["min"].as_f64(), Some(min), "{aggs}");

    // Hits and aggregations together, `aggregations` as a synonym.
    let (st, v) = s
        .json(
            "POST",
            "/talks/_search",
            json!({"size": 3, "query": {"match": {"name": "science"}},
                   "aggregations": {"n": {"value_count": {"field": "views"}}}}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"]["hits"].as_array().unwrap().len(), 3, "{v}");
    let science = docs
        .iter()
        .filter(|d| d["name"].as_str().unwrap().ends_with("science"))
        .count();
    assert!(science > 3);
    assert_eq!(v["aggregations"]["n"]["value"], science, "{v}");

    // Errors name what is wrong.
    for (aggs, needle) in [
        (json!({"a": {"terms": {"field": "tags", "sise": 3}}}), "sise"),
        (json!({"a": {"terms": {"field": "name"}}}), "name"),
        (json!({"a": {"terms": {"field": "nope"}}}), "nope"),
        (json!({"a": {"percentiles": {"field": "views"}}}), "percentiles"),
    ] {
        let (st, v) = s.json("POST", "/talks/_search", json!({"size": 0, "aggs": aggs})).await;
        assert_eq!(st, 400, "{v}");
        assert!(v.to_string().contains(needle), "{needle}: {v}");
    }
    let (st, v) = s
        .json("POST", "/talks/_search", json!({"aggs": {}, "aggregations": {}}))
        .await;
    assert_eq!(st, 400, "{v}");
    let _ = s.stop.map(|t| t.send(()));
}
