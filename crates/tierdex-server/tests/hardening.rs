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
        (json!({"query": q, "size": -1}), "size"),
        (json!({"query": q, "size": "abc"}), "size"),
        (json!({"query": q, "size": 2.5}), "size"),
        (json!({"query": q, "track_total_hits": "abc"}), "track_total_hits"),
        (json!({"query": q, "track_total_hits": -3}), "track_total_hits"),
        (json!({"query": q, "_source": 5}), "_source"),
    ];
    for (b, names) in bodies {
        let (st, v) = json_request("POST", &s.url("/fruit/_search"), &[JSON], Some(&b.to_string())).await;
        assert_eq!(st, 400, "{b}: {v}");
        assert!(v["error"]["reason"].as_str().unwrap().contains(names), "{b}: {v}");
    }
    for (path, names) in [
        ("/fruit/_search?q=apple&from=-5", "from"),
        ("/fruit/_search?q=apple&from=abc", "from"),
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

/// Item 15: every error the server sends is JSON in Elasticsearch's shape,
/// on every route and the fallback: methods a route does not take, bodies
/// over the limit (with and without a length), malformed bodies, bad URLs,
/// and requests too malformed for any handler to see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_error_in_json() {
    let s = start(|c| c.max_body_bytes = 4096).await;
    let paths = [
        "/",
        "/health",
        "/stats",
        "/metrics",
        "/search",
        "/fruit/_search",
        "/fruit/_count",
        "/docs",
        "/docs/doc-1",
        "/refresh",
        "/flush",
        "/fruit",
        "/other",
        "/fruit/_doc",
        "/fruit/_doc/doc-2",
        "/_bulk",
        "/fruit/_bulk",
        "/fruit/_refresh",
        "/no/such/endpoint",
    ];
    let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
    let big = vec![b'x'; 10_000];
    let mut errors = 0;
    for path in paths {
        for method in methods {
            for body in [big.clone(), b"{not json".to_vec()] {
                let (st, h, text) = request(method, &s.url(path), &[JSON], Some(body)).await;
                // Elasticsearch answers the delete of a missing document
                // with a 404 and the document's result, not an error.
                let missing_doc = st == 404 && text.contains("\"result\":\"not_found\"");
                if st >= 400 && !missing_doc {
                    errors += 1;
                    assert_es_error(&format!("{method} {path}"), st, &h, &text);
                }
            }
        }
    }
    assert!(errors > 150, "{errors}");
    for (method, path) in [
        ("DELETE", "/fruit"),
        ("DELETE", "/docs/%ff"),
        ("PUT", "/fruit/_doc/%ff%fe"),
        ("GET", "/%ff/_search?q=apple"),
        ("GET", "/fruit/_search?q=%ff"),
        ("GET", "/search?q=apple&k=%ff"),
        ("GET", "/search?q=apple&mode=%C3%A9"),
        ("GET", "/fruit/_search?q=apple&size=99999999999999999999999"),
    ] {
        let (st, h, text) = request(method, &s.url(path), &[JSON], None).await;
        assert!(st >= 400, "{method} {path}: {st} {text}");
        assert_es_error(&format!("{method} {path}"), st, &h, &text);
    }
    // A chunked body over the limit (no length to refuse it by).
    let mut chunked =
        b"POST /fruit/_bulk HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for _ in 0..4 {
        chunked.extend_from_slice(format!("{:x}\r\n", 2000).as_bytes());
        chunked.extend_from_slice(&[b' '; 2000]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    // Requests hyper itself refuses before any handler sees them.
    let long_header = format!(
        "GET /health HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "y".repeat(1 << 20)
    );
    let raws: Vec<(Vec<u8>, u16)> = vec![
        (chunked, 413),
        (b"GET /docs/\xff\xfe HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(), 400),
        (b"G(T / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/9.9\r\nhost: x\r\n\r\n".to_vec(), 400),
        (long_header.into_bytes(), 431),
    ];
    for (req, want) in raws {
        let answer = raw(s.addr, &req, std::time::Duration::from_secs(5)).await;
        let shown = String::from_utf8_lossy(&req[..req.len().min(60)]).into_owned();
        let (st, headers, body) =
            parse_raw(&answer).unwrap_or_else(|| panic!("{shown}: {:?}", String::from_utf8_lossy(&answer)));
        assert_eq!(st, want, "{shown}: {body}");
        let ct = headers
            .iter()
            .find(|(k, _)| k == "content-type")
            .map(|(_, v)| v.as_str());
        assert_eq!(ct, Some("application/json"), "{shown}: {headers:?} {body:?}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{shown}: {e}: {body:?}"));
        assert_eq!(v["status"], st, "{v}");
        assert!(
            v["error"]["type"].is_string() && v["error"]["reason"].is_string(),
            "{v}"
        );
    }
    // The server still answers.
    let (st, _, _) = request("GET", &s.url("/health"), &[], None).await;
    assert_eq!(st, 200);
    s.stop().await;
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// Item 2: with an authentication file, every route but `/health` needs
/// credentials (401 with `WWW-Authenticate` without them), and a role that
/// allows it (403 otherwise): read, write, admin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_and_roles_guard_every_route() {
    let (reader, reader_header) = tierdex_server::new_api_key("reader").unwrap();
    let (writer, writer_header) = tierdex_server::new_api_key("ingest").unwrap();
    let file = json!({
        "api_keys": [
            {"id": "reader", "hash": tierdex_server::hash_secret(&reader).unwrap(), "role": "read"},
            {"id": "ingest", "hash": tierdex_server::hash_secret(&writer).unwrap(), "role": "write"},
        ],
        "users": [{"name": "root", "hash": tierdex_server::hash_secret("correct horse").unwrap(), "role": "admin"}],
    });
    let auth = std::sync::Arc::new(tierdex_server::Auth::from_json(&file.to_string()).unwrap());
    let s = start(|c| c.auth = Some(auth)).await;
    let read = format!("ApiKey {reader_header}");
    let write = format!("Bearer {writer_header}");
    let admin = basic("root", "correct horse");
    let doc = "{\"id\": \"auth-1\", \"title\": \"salak\"}";
    let bulk = "{\"index\":{\"_id\":\"auth-2\"}}\n{\"title\":\"salak\"}\n";
    // (method, path, body, status without credentials, read, write, admin)
    let cases: Vec<(&str, &str, Option<&str>, [u16; 4])> = vec![
        ("GET", "/health", None, [200, 200, 200, 200]),
        ("GET", "/", None, [401, 200, 200, 200]),
        ("GET", "/search?q=apple", None, [401, 200, 200, 200]),
        ("GET", "/fruit/_search?q=apple", None, [401, 200, 200, 200]),
        ("GET", "/fruit/_count?q=apple", None, [401, 200, 200, 200]),
        ("GET", "/stats", None, [401, 200, 200, 200]),
        ("GET", "/no/such", None, [401, 404, 404, 404]),
        ("POST", "/docs", Some(doc), [401, 403, 200, 200]),
        ("POST", "/fruit/_bulk", Some(bulk), [401, 403, 200, 200]),
        (
            "PUT",
            "/fruit/_doc/auth-3",
            Some("{\"title\": \"salak\"}"),
            [401, 403, 201, 200],
        ),
        ("POST", "/fruit/_refresh", None, [401, 403, 200, 200]),
        ("DELETE", "/fruit/_doc/auth-3", None, [401, 403, 200, 404]),
        ("POST", "/flush", None, [401, 403, 403, 200]),
        ("GET", "/metrics", None, [401, 403, 403, 200]),
        ("PUT", "/fruit", None, [401, 403, 403, 400]),
    ];
    for (method, path, body, want) in cases {
        let who = [
            ("nobody", None),
            ("read", Some(&read)),
            ("write", Some(&write)),
            ("admin", Some(&admin)),
        ];
        for ((who, creds), want) in who.into_iter().zip(want) {
            let mut headers = vec![JSON];
            if let Some(c) = creds {
                headers.push(("authorization", c.as_str()));
            }
            let (st, h, text) = request(method, &s.url(path), &headers, body.map(|b| b.as_bytes().to_vec())).await;
            assert_eq!(st, want, "{who}: {method} {path}: {text}");
            if st == 401 || st == 403 {
                assert_es_error(&format!("{who} {method} {path}"), st, &h, &text);
                assert!(text.contains("security_exception"), "{text}");
            }
            if st == 401 {
                let challenges: Vec<_> = h.get_all("www-authenticate").iter().collect();
                assert!(
                    challenges.iter().any(|v| v.to_str().unwrap().starts_with("Basic")),
                    "{h:?}"
                );
                assert!(
                    challenges.iter().any(|v| v.to_str().unwrap().starts_with("ApiKey")),
                    "{h:?}"
                );
            }
        }
    }
    // Wrong secrets and unknown names are 401s, whatever the scheme.
    for bad in [
        basic("root", "wrong"),
        basic("nobody", "correct horse"),
        basic("root", "correct horse").replace("Basic", "ApiKey"),
        format!("ApiKey {}", {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(format!("ingest:{reader}"))
        }),
        "ApiKey not-base64!".to_string(),
        "Negotiate abc".to_string(),
    ] {
        let (st, _, text) = request("GET", &s.url("/search?q=apple"), &[("authorization", &bad)], None).await;
        assert_eq!(st, 401, "{bad}: {text}");
    }
    // What was refused changed nothing; what was allowed is there.
    assert_eq!(s.count("salak").await, 2);
    s.stop().await;
}

/// Item 2: a non-loopback address without authentication is refused at
/// startup, unless `insecure` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_address_needs_authentication() {
    let dir = tempfile::tempdir().unwrap();
    tierdex::indexing::build_index(
        docs().into_iter().map(Ok),
        dir.path(),
        &tierdex::indexing::IndexOptions::default(),
    )
    .unwrap();
    let st = tierdex_server::state(tierdex_server::ServerConfig::new(dir.path().to_path_buf())).unwrap();
    let e = tierdex_server::serve(st.clone(), "0.0.0.0:0".parse().unwrap(), |_| {}, async {})
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(
        e.to_string().contains("--auth") && e.to_string().contains("--insecure"),
        "{e}"
    );
}

/// Item 2: CORS as Elasticsearch's `http.cors.*`: allowed origins (exact or
/// a regex) get the headers and their preflights answered; others, and
/// methods not allowed, are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_allows_what_it_is_told_and_refuses_the_rest() {
    let s = start(|c| {
        c.cors.allow_origin = vec![
            "https://app.example".parse().unwrap(),
            "/https://[a-z]+\\.trusted\\.example/".parse().unwrap(),
        ];
        c.cors.allow_methods = vec![reqwest::Method::OPTIONS, reqwest::Method::GET, reqwest::Method::POST];
        c.cors.allow_credentials = true;
    })
    .await;
    let app = ("origin", "https://app.example");
    let (st, h, text) = request(
        "OPTIONS",
        &s.url("/docs"),
        &[
            app,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        None,
    )
    .await;
    assert_eq!(st, 200, "{text}");
    assert_eq!(h["access-control-allow-origin"], "https://app.example");
    assert!(
        h["access-control-allow-methods"].to_str().unwrap().contains("POST"),
        "{h:?}"
    );
    assert!(
        h["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("content-type"),
        "{h:?}"
    );
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(h["access-control-max-age"], "1728000");
    let (st, h, text) = request(
        "POST",
        &s.url("/docs"),
        &[app, JSON],
        Some(b"{\"id\": \"cors-1\", \"title\": \"jabuticaba\"}".to_vec()),
    )
    .await;
    assert_eq!(st, 200, "{text}");
    assert_eq!(h["access-control-allow-origin"], "https://app.example");
    assert!(h["vary"].to_str().unwrap().contains("origin"), "{h:?}");
    let (st, h, _) = request(
        "GET",
        &s.url("/search?q=jabuticaba"),
        &[("origin", "https://api.trusted.example")],
        None,
    )
    .await;
    assert_eq!(
        (st, &h["access-control-allow-origin"]),
        (
            200,
            &"https://api.trusted.example"
                .parse::<reqwest::header::HeaderValue>()
                .unwrap()
        )
    );
    for (method, headers) in [
        (
            "OPTIONS",
            vec![
                ("origin", "https://evil.example"),
                ("access-control-request-method", "POST"),
            ],
        ),
        ("POST", vec![("origin", "https://app.example.evil.example"), JSON]),
        ("POST", vec![("origin", "https://a.trusted.example.evil"), JSON]),
        ("OPTIONS", vec![app, ("access-control-request-method", "DELETE")]),
        ("DELETE", vec![app]),
    ] {
        let (st, h, text) = request(
            method,
            &s.url("/docs"),
            &headers,
            Some(b"{\"id\": \"cors-2\", \"title\": \"jabuticaba\"}".to_vec()),
        )
        .await;
        assert_eq!(st, 403, "{method} {headers:?}: {text}");
        assert!(h.get("access-control-allow-origin").is_none());
        assert_es_error(method, st, &h, &text);
    }
    assert_eq!(s.count("jabuticaba").await, 1);
    s.stop().await;
}

/// Reads from `t` until the server closes it (or `limit` passes: `None`).
async fn closed_within(t: &mut tokio::net::TcpStream, limit: std::time::Duration) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match t.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    Some(got)
}

/// Item 8: slow-header sockets are closed after the header timeout (from
/// the connection's opening, however they trickle), idle keep-alive
/// connections after the idle timeout, stalled bodies after the header
/// timeout; beyond the connection limit a JSON 503; and a server stops
/// promptly with such sockets open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_idle_and_excess_connections_are_closed() {
    use std::time::{Duration, Instant};
    use tokio::io::AsyncWriteExt;
    let header = Duration::from_millis(600);
    let idle = Duration::from_millis(1500);
    let s = start(|c| {
        c.max_connections = 16;
        c.header_timeout = header;
        c.idle_timeout = idle;
    })
    .await;
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..16 {
        let mut t = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        t.write_all(b"GET /search?q=apple HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        slow.push(t);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Over the limit: a JSON 503.
    let answer = raw(
        s.addr,
        b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let (st, headers, body) = parse_raw(&answer).unwrap_or_else(|| panic!("{answer:?}"));
    assert_eq!(st, 503, "{body}");
    assert!(
        headers.contains(&("content-type".into(), "application/json".into())),
        "{headers:?}"
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["status"].as_u64(), v["error"]["type"].as_str()),
        (Some(503), Some("too_many_connections"))
    );
    // Each slow socket trickles a byte every 100 ms and is still closed
    // once the header timeout has passed since it opened.
    let trickling: Vec<_> = slow
        .into_iter()
        .map(|mut t| {
            tokio::spawn(async move {
                loop {
                    if t.write_all(b"x").await.is_err() {
                        return started.elapsed();
                    }
                    if closed_within(&mut t, Duration::from_millis(100)).await.is_some() {
                        return started.elapsed();
                    }
                    assert!(
                        started.elapsed() < Duration::from_secs(5),
                        "a slow-header socket stays open"
                    );
                }
            })
        })
        .collect();
    for t in trickling {
        let after = t.await.unwrap();
        assert!(
            after >= header && after < header + Duration::from_secs(2),
            "closed after {after:?}"
        );
    }
    // The slots are free again.
    let (st, _, _) = request("GET", &s.url("/health"), &[], None).await;
    assert_eq!(st, 200);
    // A socket that sends nothing is a slow header too.
    let opened = Instant::now();
    let mut silent = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(4)).await.is_some());
    assert!(opened.elapsed() >= header, "{:?}", opened.elapsed());
    // An idle keep-alive connection lives for the idle timeout, then closes.
    let mut kept = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = Instant::now();
    let got = closed_within(&mut kept, Duration::from_secs(5))
        .await
        .expect("an idle connection stays open");
    let lived = answered.elapsed();
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(
        lived >= idle - Duration::from_millis(100) && lived < idle + Duration::from_secs(2),
        "{lived:?}"
    );
    // A body that stalls is refused after the header timeout.
    let mut stalled = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    stalled
        .write_all(
            b"POST /docs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":",
        )
        .await
        .unwrap();
    let sent = Instant::now();
    let got = closed_within(&mut stalled, Duration::from_secs(4))
        .await
        .expect("a stalled body stays open");
    assert!(
        sent.elapsed() >= header - Duration::from_millis(100),
        "{:?}",
        sent.elapsed()
    );
    let (st, _, body) = parse_raw(&got).unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("paused"), "{body}");
    // Stopping with a slow socket open takes no longer than its timeout.
    let mut lingering = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    lingering.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stopping = Instant::now();
    s.stop().await;
    assert!(
        stopping.elapsed() < header + Duration::from_secs(1),
        "{:?}",
        stopping.elapsed()
    );
}
