//! Snapshots through the `_snapshot` API (issue #23): a snapshot taken
//! while a client keeps writing, restored into a new index, answers exactly
//! like an index loaded with the writes the snapshot holds (a prefix of
//! them, holding every one acknowledged before the request); repositories
//! stay inside `path_repo`, survive a restart, and bad requests are 400s
//! that name what is wrong.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tierdex_server::{state, ServerConfig};

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

async fn start(data: &std::path::Path, repos: &std::path::Path) -> Server {
    let mut config = ServerConfig::new(data.to_path_buf());
    config.data = Some(data.to_path_buf());
    config.path_repo = vec![repos.to_path_buf()];
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
    async fn send(&self, method: &str, path: &str, body: Option<String>, ndjson: bool) -> (u16, Value) {
        send(&self.base, method, path, body, ndjson).await
    }

    async fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.send(method, path, body.map(|b| b.to_string()), false).await
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().await.unwrap().unwrap();
    }
}

async fn send(base: &str, method: &str, path: &str, body: Option<String>, ndjson: bool) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(method.parse().unwrap(), format!("{base}{path}"));
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

fn reason(v: &Value) -> String {
    v["error"]["reason"].as_str().unwrap_or_default().to_string()
}

const WORDS: [&str; 8] = ["night", "city", "river", "ghost", "star", "garden", "storm", "mirror"];
const GENRES: [&str; 4] = ["drama", "comedy", "noir", "scifi"];

/// Batch `i` as `_bulk` lines: three new documents and the deletion of
/// one document of batch `i - 2`.
fn batch(index: &str, i: usize) -> String {
    let mut lines = String::new();
    for j in 0..3 {
        let x = i * 3 + j;
        let doc = json!({
            "title": (0..1 + x % 4).map(|k| WORDS[(x * 7 + k * k) % 8]).collect::<Vec<_>>().join(" "),
            "genre": GENRES[x % 4],
            "year": 1900 + (x * 37) % 120,
        });
        lines += &format!(
            "{}\n{doc}\n",
            json!({"index": {"_index": index, "_id": format!("b{i}-{j}")}})
        );
    }
    if i >= 2 {
        lines += &format!(
            "{}\n",
            json!({"delete": {"_index": index, "_id": format!("b{}-1", i - 2)}})
        );
    }
    lines
}

/// What the test compares between two indices: hits with scores, totals,
/// sorted hits, aggregations.
async fn answers(s: &Server, index: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for body in [
        json!({"query": {"match": {"title": "ghost river"}}, "size": 20}),
        json!({"query": {"bool": {"must": {"match": {"title": "star"}}, "filter": {"term": {"genre": "noir"}}}}, "size": 10}),
        json!({"query": {"range": {"year": {"gte": 1950}}}, "sort": [{"year": "desc"}, "_doc"], "size": 15}),
        json!({"size": 0, "aggs": {"g": {"terms": {"field": "genre"}}, "y": {"stats": {"field": "year"}}}}),
    ] {
        let (st, mut v) = s.json("POST", &format!("/{index}/_search"), Some(body.clone())).await;
        assert_eq!(st, 200, "{index} {body}: {v}");
        let hits: Vec<Value> = v["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| json!([h["_id"], h["_score"], h["sort"]]))
            .collect();
        out.push(json!({"total": v["hits"]["total"], "hits": hits, "aggs": v["aggregations"].take()}));
    }
    out
}

const MAPPING: &str = r#"{"mappings": {"properties": {"title": {"type": "text"}, "genre": {"type": "keyword"}, "year": {"type": "long"}}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_taken_during_writes_restores_to_its_point() {
    let dir = tempfile::tempdir().unwrap();
    let repos = dir.path().join("repos");
    let s = start(&dir.path().join("data"), &repos).await;
    let mapping: Value = serde_json::from_str(MAPPING).unwrap();
    assert_eq!(s.json("PUT", "/films", Some(mapping.clone())).await.0, 200);
    assert_eq!(s.json("PUT", "/films/_alias/movies", None).await.0, 200);

    // Repositories: inside path_repo only; the registration is listed.
    let (st, v) = s
        .json(
            "PUT",
            "/_snapshot/backup",
            Some(json!({"type": "fs", "settings": {"location": "nightly"}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.json("GET", "/_snapshot/backup", None).await;
    assert_eq!(
        (st, &v["backup"]["settings"]["location"]),
        (200, &json!("nightly")),
        "{v}"
    );
    let outside = dir.path().join("elsewhere");
    let (st, v) = s
        .json(
            "PUT",
            "/_snapshot/bad",
            Some(json!({"type": "fs", "settings": {"location": outside.to_str().unwrap()}})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("path.repo"), "{v}");
    for (body, names) in [
        (json!({"type": "s3", "settings": {"bucket": "x"}}), "s3"),
        (
            json!({"type": "fs", "settings": {"location": "x", "compress": true}}),
            "compress",
        ),
        (json!({"type": "fs", "settings": {"location": "../x"}}), ".."),
    ] {
        let (st, v) = s.json("PUT", "/_snapshot/bad", Some(body)).await;
        assert_eq!(st, 400, "{v}");
        assert!(reason(&v).contains(names), "{names}: {v}");
    }
    assert_eq!(s.json("GET", "/_snapshot/bad", None).await.0, 404);

    // A client writes batches, one _bulk each, acknowledged in order.
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (base, acked, stop) = (s.base.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let (st, v) = send(&base, "POST", "/_bulk", Some(batch("films", i)), true).await;
                assert_eq!(st, 200, "{v}");
                assert_eq!(v["errors"], false, "{v}");
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    while acked.load(Ordering::SeqCst) < 30 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let before = acked.load(Ordering::SeqCst);
    let (st, v) = s
        .json(
            "PUT",
            "/_snapshot/backup/snap-1?wait_for_completion=true",
            Some(json!({"indices": "movies", "metadata": {"taken_by": "test"}})),
        )
        .await;
    let after = acked.load(Ordering::SeqCst);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["snapshot"]["state"], "SUCCESS", "{v}");
    assert_eq!(v["snapshot"]["indices"], json!(["films"]), "{v}");
    assert_eq!(v["snapshot"]["metadata"]["taken_by"], "test", "{v}");
    // A second snapshot, not waited for: accepted, then listed as done.
    let (st, v) = s.json("PUT", "/_snapshot/backup/snap-2", None).await;
    assert_eq!((st, &v["accepted"]), (200, &json!(true)), "{v}");
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let mut state = Value::Null;
    for _ in 0..200 {
        let (st, v) = s.json("GET", "/_snapshot/backup/snap-2", None).await;
        assert_eq!(st, 200, "{v}");
        state = v["snapshots"][0]["state"].clone();
        if state != "IN_PROGRESS" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state, "SUCCESS");
    let (_, v) = s.json("GET", "/_snapshot/backup/_all", None).await;
    let names: Vec<&str> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["snap-1", "snap-2"], "{v}");

    // Restore snap-1 under a new name; its aliases come along.
    let (st, v) = s
        .json(
            "POST",
            "/_snapshot/backup/snap-1/_restore?wait_for_completion=true",
            Some(json!({"indices": "films", "rename_pattern": "(.+)", "rename_replacement": "restored-$1"})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["snapshot"]["indices"], json!(["restored-films"]), "{v}");
    let (_, v) = s.json("GET", "/_alias/movies", None).await;
    assert!(v.get("restored-films").is_some(), "{v}");
    // It holds a prefix of the batches: every one acknowledged before the
    // request, none begun after it was answered.
    let mut held = 0;
    for i in (0..=after + 1).rev() {
        let (st, _) = s.json("GET", &format!("/restored-films/_doc/b{i}-0"), None).await;
        if st == 200 {
            held = i + 1;
            break;
        }
    }
    assert!(
        held >= before && held <= after + 1,
        "holds {held} batches; {before} acknowledged before, {after} after"
    );
    // The same batches loaded into a fresh index answer the same.
    assert_eq!(s.json("PUT", "/check", Some(mapping.clone())).await.0, 200);
    for i in 0..held {
        let (st, v) = s.send("POST", "/_bulk", Some(batch("check", i)), true).await;
        assert_eq!((st, &v["errors"]), (200, &json!(false)), "{v}");
    }
    assert_eq!(s.json("POST", "/check/_refresh", None).await.0, 200);
    assert_eq!(answers(&s, "restored-films").await, answers(&s, "check").await);

    // Refusals: an existing name, unknown keys, a missing snapshot, a
    // repository that does not exist.
    let (st, v) = s
        .json(
            "POST",
            "/_snapshot/backup/snap-1/_restore?wait_for_completion=true",
            None,
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("already exists"), "{v}");
    let (st, v) = s
        .json(
            "POST",
            "/_snapshot/backup/snap-1/_restore",
            Some(json!({"index_settings": {}})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(reason(&v).contains("index_settings"), "{v}");
    let (st, v) = s
        .json(
            "PUT",
            "/_snapshot/backup/snap-3",
            Some(json!({"include_global_state": true})),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(s.json("PUT", "/_snapshot/backup/snap-3?colour=red", None).await.0, 400);
    let (st, v) = s.json("PUT", "/_snapshot/backup/Snap", None).await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (400, Some("invalid_snapshot_name_exception")),
        "{v}"
    );
    let (st, v) = s
        .json("PUT", "/_snapshot/backup/snap-1?wait_for_completion=true", None)
        .await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (400, Some("invalid_snapshot_name_exception")),
        "{v}"
    );
    assert!(reason(&v).contains("already exists"), "{v}");
    assert_eq!(s.json("GET", "/_snapshot/backup/nope", None).await.0, 404);
    assert_eq!(s.json("GET", "/_snapshot/nope/_all", None).await.0, 404);
    assert_eq!(s.json("PUT", "/_snapshot/nope/x", None).await.0, 404);

    // Delete snap-1; the repository and the restored index survive a
    // restart.
    assert_eq!(s.json("DELETE", "/_snapshot/backup/snap-1", None).await.0, 200);
    let (st, v) = s.json("GET", "/_snapshot/backup/snap-1", None).await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (404, Some("snapshot_missing_exception")),
        "{v}"
    );
    let restored = answers(&s, "restored-films").await;
    s.stop().await;
    let s = start(&dir.path().join("data"), &repos).await;
    let (_, v) = s.json("GET", "/_snapshot", None).await;
    assert!(v.get("backup").is_some(), "{v}");
    assert_eq!(answers(&s, "restored-films").await, restored);
    let (_, v) = s.json("GET", "/_snapshot/backup/*", None).await;
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(s.json("DELETE", "/_snapshot/backup", None).await.0, 200);
    assert_eq!(s.json("GET", "/_snapshot/backup", None).await.0, 404);
    s.stop().await;
}
