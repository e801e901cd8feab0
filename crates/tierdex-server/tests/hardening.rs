//! Issue #20, the server's part: cross-site writes, content types,
//! authentication, huge timeouts, connection limits and timeouts, bad input
//! answered 400, and every error in JSON.

mod common;

use common::*;
use serde_json::{json, Value};

const JSON: (&str, &str) = ("content-type", "application/json");
const NDJSON: (&str, &str) = ("content-type", "application/x-ndjson");
const EVIL: (&str, &str) = ("origin", "http://evil.example");

/// Method, URL, headers, body and the status expected.
type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, &'a str, u16);

/// Item 2: a web page cannot write to (or read from) a server on the
/// loopback: writes need a JSON content type, and requests from another
/// origin are refused unless CORS allows them. Nothing refused changes the
/// index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_and_non_json_writes_are_refused_and_change_nothing() {
    let s = start(|_| {}).await;
    let delete = "{\"delete\":{\"_index\":\"fruit\",\"_id\":\"doc-1\"}}\n";
    let add = "{\"index\":{\"_index\":\"fruit\",\"_id\":\"evil-1\"}}\n{\"title\":\"pwned\"}\n";
    let before = s.count("apple banana cherry date elder fig grape honeydew").await;
    let refused: Vec<Case> = vec![
        // The issue's own example: text/plain with a foreign origin.
        (
            "POST",
            s.url("/_bulk"),
            vec![("content-type", "text/plain"), EVIL],
            delete,
            403,
        ),
        // A foreign origin with the right content type (a preflight would be needed).
        ("POST", s.url("/_bulk"), vec![NDJSON, EVIL], delete, 403),
        ("POST", s.url("/fruit/_bulk"), vec![JSON, ("origin", "null")], add, 403),
        // The content types an HTML form or a no-cors fetch may send.
        (
            "POST",
            s.url("/_bulk"),
            vec![("content-type", "text/plain")],
            delete,
            415,
        ),
        (
            "POST",
            s.url("/fruit/_bulk"),
            vec![("content-type", "application/x-www-form-urlencoded")],
            add,
            415,
        ),
        (
            "POST",
            s.url("/docs"),
            vec![("content-type", "multipart/form-data; boundary=x")],
            "{\"id\":\"evil-2\",\"title\":\"pwned\"}",
            415,
        ),
        (
            "POST",
            s.url("/docs"),
            vec![],
            "{\"id\":\"evil-3\",\"title\":\"pwned\"}",
            415,
        ),
        (
            "PUT",
            s.url("/fruit/_doc/evil-4"),
            vec![("content-type", "text/plain")],
            "{\"title\":\"pwned\"}",
            415,
        ),
        (
            "POST",
            s.url("/fruit/_doc"),
            vec![("content-type", "text/plain;charset=UTF-8")],
            "{\"title\":\"pwned\"}",
            415,
        ),
        (
            "DELETE",
            s.url("/docs/doc-2"),
            vec![("content-type", "text/plain")],
            "",
            415,
        ),
        ("DELETE", s.url("/fruit/_doc/doc-3"), vec![EVIL], "", 403),
        ("POST", s.url("/flush"), vec![("content-type", "text/plain")], "", 415),
        ("POST", s.url("/refresh"), vec![EVIL], "", 403),
        // Reads from a foreign origin are refused too (a page could read the index).
        ("GET", s.url("/search?q=apple"), vec![EVIL], "", 403),
        (
            "POST",
            s.url("/fruit/_search"),
            vec![JSON, EVIL],
            "{\"query\":{\"match\":{\"body\":\"apple\"}}}",
            403,
        ),
    ];
    for (method, url, headers, body, want) in &refused {
        let (st, h, text) = request(method, url, headers, Some(body.as_bytes().to_vec())).await;
        assert_eq!(st, *want, "{method} {url} {headers:?}: {text}");
        assert_es_error(&format!("{method} {url}"), st, &h, &text);
        assert!(h.get("access-control-allow-origin").is_none(), "{method} {url}: {h:?}");
    }
    assert_eq!(s.count("pwned").await, 0);
    assert_eq!(
        s.count("apple banana cherry date elder fig grape honeydew").await,
        before
    );
    // The right content types are accepted, charset parameters included;
    // bodyless writes need none.
    let ok: Vec<Case> = vec![
        (
            "POST",
            s.url("/fruit/_bulk"),
            vec![("content-type", "application/x-ndjson; charset=UTF-8")],
            "{\"index\":{\"_id\":\"ok-1\"}}\n{\"title\":\"quince\"}\n",
            200,
        ),
        (
            "POST",
            s.url("/_bulk"),
            vec![JSON],
            "{\"index\":{\"_index\":\"fruit\",\"_id\":\"ok-2\"}}\n{\"title\":\"quince\"}\n",
            200,
        ),
        (
            "POST",
            s.url("/docs"),
            vec![("content-type", "Application/JSON;charset=utf-8")],
            "[{\"id\":\"ok-3\",\"title\":\"quince\"}]",
            200,
        ),
        (
            "POST",
            s.url("/docs"),
            vec![NDJSON],
            "{\"id\":\"ok-4\",\"title\":\"quince\"}",
            200,
        ),
        ("DELETE", s.url("/docs/ok-4"), vec![], "", 200),
        ("DELETE", s.url("/fruit/_doc/ok-3"), vec![JSON], "", 200),
        ("POST", s.url("/refresh"), vec![], "", 200),
        ("POST", s.url("/fruit/_refresh"), vec![JSON], "", 200),
    ];
    for (method, url, headers, body, want) in &ok {
        let (st, _, text) = request(method, url, headers, Some(body.as_bytes().to_vec())).await;
        assert_eq!(st, *want, "{method} {url} {headers:?}: {text}");
    }
    assert_eq!(s.count("quince").await, 2);
    s.stop().await;
}

/// Item 2: `/stats` shows the index's name, not where it lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_expose_no_path() {
    let s = start(|_| {}).await;
    let (st, _, text) = request("GET", &s.url("/stats"), &[], None).await;
    assert_eq!(st, 200);
    let dir = s.dir.path().to_str().unwrap().to_string();
    assert!(!text.contains(&dir), "/stats shows {dir}: {text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["index"]["name"], "fruit");
    s.stop().await;
}

/// Item 5: a huge timeout is a 400 (it used to panic the handler: "overflow
/// when adding duration to instant"), and so is one above the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_and_malformed_timeouts_are_400s() {
    let s = start(|_| {}).await;
    let search = |t: Value| json!({"query": {"match": {"body": "apple"}}, "timeout": t}).to_string();
    let cases: Vec<(&str, String, Option<String>, &str)> = vec![
        (
            "GET",
            s.url("/search?q=apple&timeout=18446744073709551615"),
            None,
            "timeout",
        ),
        ("GET", s.url("/search?q=apple&timeout=600001"), None, "timeout"),
        (
            "POST",
            s.url("/fruit/_search"),
            Some(search(json!("18446744073709551615s"))),
            "timeout",
        ),
        (
            "POST",
            s.url("/fruit/_search"),
            Some(search(json!("999999999999999999m"))),
            "timeout",
        ),
        (
            "POST",
            s.url("/fruit/_search"),
            Some(search(json!("18446744073709551615ms"))),
            "timeout",
        ),
        ("POST", s.url("/fruit/_search"), Some(search(json!("61s"))), "timeout"),
        ("POST", s.url("/fruit/_search"), Some(search(json!(5))), "timeout"),
        ("POST", s.url("/fruit/_search"), Some(search(json!("5"))), "timeout"),
        (
            "POST",
            s.url("/fruit/_search"),
            Some(search(json!("5 parsecs"))),
            "timeout",
        ),
        ("POST", s.url("/fruit/_search"), Some(search(json!(null))), "timeout"),
        (
            "GET",
            s.url("/fruit/_search?q=apple&timeout=18446744073709551615s"),
            None,
            "timeout",
        ),
        ("GET", s.url("/fruit/_search?q=apple&timeout=1000000h"), None, "timeout"),
    ];
    for (method, url, body, names) in cases {
        let (st, h, text) = request(method, &url, &[JSON], body.clone().map(String::into_bytes)).await;
        assert_eq!(st, 400, "{method} {url} {body:?}: {text}");
        assert_es_error(&url, st, &h, &text);
        assert!(text.contains(names), "{url} {body:?}: {text}");
    }
    // Sensible ones work.
    for (url, body) in [
        (s.url("/search?q=apple&timeout=60000"), None),
        (s.url("/fruit/_search"), Some(search(json!("2s")))),
        (s.url("/fruit/_search"), Some(search(json!("1500ms")))),
        (s.url("/fruit/_search?q=apple&timeout=1m"), None),
    ] {
        let (st, _, text) = request(
            if body.is_some() { "POST" } else { "GET" },
            &url,
            &[JSON],
            body.map(String::into_bytes),
        )
        .await;
        assert_eq!(st, 200, "{url}: {text}");
    }
    s.stop().await;
}

/// Item 14: bad search parameters are 400s that name them, never read as
/// something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_search_parameters_are_named_400s() {
    let s = start(|_| {}).await;
    let q = json!({"match": {"body": "apple"}});
    let bodies = [
        (json!({"query": q, "from": -5}), "from"),
        (json!({"query": q, "from": "abc"}), "from"),
        (json!({"query": q, "from": 1.5}), "from"),
        (json!({"query": q, "from": 10}), "from"),
        (json!({"query": q, "size": -1}), "size"),
        (json!({"query": q, "size": "abc"}), "size"),
        (json!({"query": q, "size": 2.5}), "size"),
        (json!({"query": q, "track_total_hits": "abc"}), "track_total_hits"),
        (json!({"query": q, "track_total_hits": -3}), "track_total_hits"),
        (json!({"query": q, "_source": ["title"]}), "_source"),
    ];
    for (b, names) in bodies {
        let (st, v) = json_request("POST", &s.url("/fruit/_search"), &[JSON], Some(&b.to_string())).await;
        assert_eq!(st, 400, "{b}: {v}");
        assert!(v["error"]["reason"].as_str().unwrap().contains(names), "{b}: {v}");
    }
    for (path, names) in [
        ("/fruit/_search?q=apple&from=-5", "from"),
        ("/fruit/_search?q=apple&from=abc", "from"),
        ("/fruit/_search?q=apple&from=3", "from"),
        ("/fruit/_search?q=apple&size=-1", "size"),
        ("/fruit/_search?q=apple&size=abc", "size"),
        ("/search?q=apple&k=-1", "k"),
        ("/search?q=apple&k=ten", "k"),
        ("/search?q=apple&timeout=-5", "timeout"),
        ("/search?q=apple&highlight=yes", "highlight"),
        // Invalid UTF-8 after percent-decoding was read as U+FFFD.
        ("/fruit/_search?q=%ff%fe", "UTF-8"),
        ("/search?q=%ff%fe", "UTF-8"),
        ("/fruit/_count?q=caf%e9", "UTF-8"),
    ] {
        let (st, v) = json_request("GET", &s.url(path), &[], None).await;
        assert_eq!(st, 400, "{path}: {v}");
        assert!(v["error"]["reason"].as_str().unwrap().contains(names), "{path}: {v}");
    }
    // Valid percent-encoded UTF-8 still works.
    let (st, v) = json_request("GET", &s.url("/fruit/_search?q=caf%C3%A9"), &[], None).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = json_request(
        "POST",
        &s.url("/fruit/_search"),
        &[JSON],
        Some(&json!({"query": q, "from": 0, "size": 3, "track_total_hits": 100, "_source": true}).to_string()),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    s.stop().await;
}

fn item_statuses(v: &Value) -> Vec<(String, u64)> {
    v["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|i| {
            let r = i.as_object().unwrap().values().next().unwrap();
            (
                r["_id"].as_str().unwrap_or("").to_string(),
                r["status"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Item 14: a numeric bulk `_id` is that number as an id (a retry replaces,
/// never duplicates); a bad `_id` or `_index` fails its item alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_ids_are_kept_and_bad_items_fail_alone() {
    let s = start(|_| {}).await;
    let body = [
        json!({"index": {"_id": 5}}),
        json!({"title": "kiwano"}),
        json!({"index": {"_id": ""}}),
        json!({"title": "kiwano empty"}),
        json!({"create": {"_id": "k-2"}}),
        json!({"title": "kiwano two"}),
        json!({"index": {"_id": true}}),
        json!({"title": "kiwano bool"}),
        json!({"index": {"_id": 1.5}}),
        json!({"title": "kiwano float"}),
        json!({"index": {"_id": "k-3", "_index": 7}}),
        json!({"title": "kiwano index"}),
        json!({"index": {"_id": "k-4", "if_seq_no": 3}}),
        json!({"title": "kiwano seq"}),
        json!({"delete": {"_id": ""}}),
        json!({"delete": {}}),
        json!({"delete": {"_id": 7}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n")
        + "\n";
    let (st, v) = json_request("POST", &s.url("/fruit/_bulk?refresh=true"), &[NDJSON], Some(&body)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["errors"], true);
    let statuses = item_statuses(&v);
    assert_eq!(
        statuses,
        vec![
            ("5".into(), 201),
            ("".into(), 400),
            ("k-2".into(), 201),
            ("".into(), 400),
            ("".into(), 400),
            ("k-3".into(), 400),
            ("k-4".into(), 400),
            ("".into(), 400),
            ("".into(), 400),
            ("7".into(), 404),
        ],
        "{v}"
    );
    for i in v["items"].as_array().unwrap() {
        let r = i.as_object().unwrap().values().next().unwrap();
        if r["status"] == 400 {
            assert!(r["error"]["reason"].is_string(), "{r}");
        }
    }
    assert_eq!(s.count("kiwano").await, 2);
    // The retry replaces document "5".
    let retry = format!("{}\n{}\n", json!({"index": {"_id": 5}}), json!({"title": "kiwano"}));
    let (st, v) = json_request("POST", &s.url("/fruit/_bulk?refresh=true"), &[NDJSON], Some(&retry)).await;
    assert_eq!((st, item_statuses(&v)), (200, vec![("5".into(), 200)]), "{v}");
    assert_eq!(s.count("kiwano").await, 2);
    let (st, v) = json_request("GET", &s.url("/fruit/_search?q=kiwano&size=5"), &[], None).await;
    assert_eq!(st, 200);
    let mut ids: Vec<&str> = v["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["5", "k-2"]);
    s.stop().await;
}
