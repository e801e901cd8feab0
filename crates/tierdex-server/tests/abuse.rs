//! The abuse suite (issue #20): a server, with authentication on, driven
//! with what a hostile or careless client sends — cross-origin and
//! wrong-content-type writes, huge timeouts, hundreds of slow-header
//! sockets, malformed HTTP, bulk edge cases, oversized bodies, bad
//! credentials — while a separate client searches at a steady pace.
//! Throughout, that client's p99 latency stays under [`P99_BOUND`], the
//! refused writes change nothing, and the process's resident memory (the
//! server and these clients together) grows by less than [`RSS_GROWTH`] and
//! stays under [`RSS_BOUND`].
//!
//! The server runs on a runtime of its own (as `tierdex serve` does); the
//! steady client is a plain blocking HTTP/1.1 client on its own thread, so
//! that the latency it measures is the server's, not the abusers' scheduling.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{docs, parse_raw};
use serde_json::{json, Value};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex_server::ServerConfig;
use tokio::io::AsyncWriteExt;

/// The steady searcher's 99th-percentile latency bound.
const P99_BOUND: Duration = Duration::from_millis(100);
/// Largest growth of the process's resident memory over the idle server.
const RSS_GROWTH: u64 = 256 << 20;
/// Largest resident memory of the whole test process.
const RSS_BOUND: u64 = 768 << 20;
/// Slow-header sockets opened at once.
const SLOW_SOCKETS: usize = 300;
/// The server's header timeout in this suite.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The server's body limit in this suite.
const MAX_BODY: usize = 8 << 20;

/// Resident memory of this process (`VmRSS` in /proc/self/status), bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb << 10
}

/// A server on a runtime of its own thread.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: Arc<tierdex_server::AppState>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(auth: tierdex_server::Auth) -> Server {
        let dir = tempfile::tempdir().unwrap();
        build_index(docs().into_iter().map(Ok), dir.path(), &IndexOptions::default()).unwrap();
        let mut config = ServerConfig::new(dir.path().to_path_buf());
        config.index_name = "fruit".into();
        config.threads = 2;
        config.max_body_bytes = MAX_BODY;
        config.header_timeout = HEADER_TIMEOUT;
        config.refresh_interval = Duration::from_millis(200);
        config.auth = Some(Arc::new(auth));
        let state = tierdex_server::state(config).unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(tierdex_server::serve(
                st,
                "127.0.0.1:0".parse().unwrap(),
                move |a| addr_tx.send(a).unwrap(),
                async move {
                    let _ = stop_rx.await;
                },
            ))
            .unwrap();
        });
        Server {
            addr: addr_rx.recv().unwrap(),
            stop: Some(stop_tx),
            thread: Some(thread),
            state,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.thread.take().unwrap().join().unwrap();
    }

    /// Live documents matching `q` after a refresh, from the engine.
    fn count(&self, q: &str) -> u64 {
        if let Some(w) = self.state.writer() {
            w.refresh().unwrap();
        }
        self.state
            .default_index()
            .unwrap()
            .searcher()
            .search(q, tierdex::search::Mode::Count, 0)
            .unwrap()
            .count
            .unwrap()
    }
}

/// Credentials for the suite: a read key for the steady searcher, a write
/// key for the abusers (so that what is refused is refused for its own
/// reason, not for want of credentials).
struct Keys {
    auth: tierdex_server::Auth,
    read: String,
    write: String,
}

fn keys() -> Keys {
    let (reader, read) = tierdex_server::new_api_key("searcher").unwrap();
    let (writer, write) = tierdex_server::new_api_key("abuser").unwrap();
    let file = json!({"api_keys": [
        {"id": "searcher", "hash": tierdex_server::hash_secret(&reader).unwrap(), "role": "read"},
        {"id": "abuser", "hash": tierdex_server::hash_secret(&writer).unwrap(), "role": "write"},
    ]});
    Keys {
        auth: tierdex_server::Auth::from_json(&file.to_string()).unwrap(),
        read: format!("ApiKey {read}"),
        write: format!("ApiKey {write}"),
    }
}

/// The steady searcher: one keep-alive connection, a search every 10 ms,
/// each answer checked; returns the latencies.
fn steady_searcher(addr: SocketAddr, auth: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let queries = [
            "apple",
            "banana+fig",
            "%2Bcherry+%2Bdate",
            "%22grape+honeydew%22",
            "elder+-apple",
        ];
        let mut latencies = Vec::new();
        let mut conn: Option<std::net::TcpStream> = None;
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let q = queries[i % queries.len()];
            i += 1;
            let req = format!("GET /search?q={q}&k=10 HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\n\r\n");
            let started = Instant::now();
            let answer = (|| -> std::io::Result<(u16, Vec<u8>)> {
                if conn.is_none() {
                    let c = std::net::TcpStream::connect(addr)?;
                    c.set_nodelay(true)?;
                    c.set_read_timeout(Some(Duration::from_secs(10)))?;
                    conn = Some(c);
                }
                let c = conn.as_mut().unwrap();
                c.write_all(req.as_bytes())?;
                read_answer(c)
            })();
            let took = started.elapsed();
            match answer {
                Ok((200, body)) => {
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    assert!(v["hits"].is_array(), "{v}");
                    latencies.push(took);
                }
                Ok((status, body)) => panic!("steady search {q}: {status} {}", String::from_utf8_lossy(&body)),
                Err(_) => {
                    // The server closed the keep-alive connection (idle
                    // timeout): open a new one and count that time too.
                    conn = None;
                    latencies.push(took);
                    continue;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        latencies
    })
}

/// Reads one HTTP/1.1 answer with a content length.
fn read_answer(c: &mut std::net::TcpStream) -> std::io::Result<(u16, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = c.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status: u16 = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((status, buf[head_end..head_end + len].to_vec()))
}

/// Samples the process's resident memory every 20 ms until stopped: the
/// largest value seen.
fn rss_sampler(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut max = rss();
        while !stop.load(Ordering::Relaxed) {
            max = max.max(rss());
            std::thread::sleep(Duration::from_millis(20));
        }
        max.max(rss())
    })
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)]
}

async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<reqwest::Body>,
) -> (u16, Value) {
    let mut r = client.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if let Some(b) = body {
        r = r.body(b);
    }
    let r = r.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn assert_error(what: &str, status: u16, want: u16, v: &Value) {
    assert_eq!(status, want, "{what}: {v}");
    assert_eq!(v["status"], want, "{what}: {v}");
    assert!(v["error"]["type"].is_string(), "{what}: {v}");
}

/// Opens `n` sockets that send a partial request head and then trickle a
/// byte every 200 ms; returns once the server has closed every one of them
/// (it must, after its header timeout), with the longest any lived.
async fn slow_header_sockets(addr: SocketAddr, n: usize) -> Duration {
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let opened = Instant::now();
            let _ = s
                .write_all(format!("POST /docs HTTP/1.1\r\nhost: x\r\nx-slow-{i}: ").as_bytes())
                .await;
            let mut buf = [0u8; 1024];
            loop {
                if s.write_all(b"z").await.is_err() {
                    return opened.elapsed();
                }
                match tokio::time::timeout(
                    Duration::from_millis(200),
                    tokio::io::AsyncReadExt::read(&mut s, &mut buf),
                )
                .await
                {
                    Ok(Ok(0)) | Ok(Err(_)) => return opened.elapsed(),
                    _ => {}
                }
                assert!(
                    opened.elapsed() < HEADER_TIMEOUT * 4,
                    "a slow-header socket is still open after {:?}",
                    opened.elapsed()
                );
            }
        }));
    }
    let mut longest = Duration::ZERO;
    for t in tasks {
        longest = longest.max(t.await.unwrap());
    }
    longest
}

/// Writes that must be refused, and must change nothing.
async fn refused_writes(url: impl Fn(&str) -> String, write: &str) {
    let client = reqwest::Client::new();
    let evil = ("origin", "http://evil.example");
    let bulk_delete = "{\"delete\":{\"_index\":\"fruit\",\"_id\":\"doc-1\"}}\n";
    let bulk_add = "{\"index\":{\"_index\":\"fruit\",\"_id\":\"pwn-1\"}}\n{\"title\":\"pwned\"}\n";
    for round in 0..20 {
        let auth = ("authorization", write);
        for (method, path, headers, body, want) in [
            (
                "POST",
                "/_bulk",
                vec![auth, ("content-type", "text/plain"), evil],
                bulk_delete,
                403,
            ),
            (
                "POST",
                "/_bulk",
                vec![auth, ("content-type", "text/plain")],
                bulk_delete,
                415,
            ),
            (
                "POST",
                "/fruit/_bulk",
                vec![auth, ("content-type", "application/x-ndjson"), evil],
                bulk_add,
                403,
            ),
            (
                "POST",
                "/fruit/_bulk",
                vec![auth, ("content-type", "application/x-www-form-urlencoded")],
                bulk_add,
                415,
            ),
            (
                "POST",
                "/docs",
                vec![auth, ("content-type", "text/plain")],
                "{\"id\":\"pwn-2\",\"title\":\"pwned\"}",
                415,
            ),
            (
                "POST",
                "/docs",
                vec![auth],
                "[{\"id\":\"pwn-3\",\"title\":\"pwned\"}]",
                415,
            ),
            ("DELETE", "/fruit/_doc/doc-2", vec![auth, evil], "", 403),
            (
                "PUT",
                "/fruit/_doc/pwn-4",
                vec![auth, ("content-type", "text/plain")],
                "{\"title\":\"pwned\"}",
                415,
            ),
            // Bad credentials, and none.
            (
                "POST",
                "/docs",
                vec![
                    ("content-type", "application/json"),
                    ("authorization", "ApiKey YWJ1c2VyOm5vcGU="),
                ],
                "{\"id\":\"pwn-5\",\"title\":\"pwned\"}",
                401,
            ),
            (
                "POST",
                "/fruit/_bulk",
                vec![("content-type", "application/json")],
                bulk_add,
                401,
            ),
        ] {
            if round > 0 && want == 401 && path == "/docs" && round % 5 != 0 {
                continue;
            }
            let (st, v) = send(&client, method, &url(path), &headers, Some(body.to_string().into())).await;
            assert_error(&format!("{method} {path} {headers:?}"), st, want, &v);
        }
    }
}

/// Huge and malformed timeouts: 400s, never a panic.
async fn huge_timeouts(url: impl Fn(&str) -> String, read: &str) {
    let client = reqwest::Client::new();
    let auth = ("authorization", read);
    let json = ("content-type", "application/json");
    for _ in 0..20 {
        for t in [
            json!("18446744073709551615s"),
            json!("18446744073709551615ms"),
            json!("99999999999999999d"),
            json!(5),
            json!("3600s"),
        ] {
            let body = json!({"query": {"match": {"body": "apple"}}, "timeout": t}).to_string();
            let (st, v) = send(
                &client,
                "POST",
                &url("/fruit/_search"),
                &[auth, json],
                Some(body.into()),
            )
            .await;
            assert_error(&format!("timeout {t}"), st, 400, &v);
        }
        for path in [
            "/search?q=apple&timeout=18446744073709551615",
            "/fruit/_search?q=apple&timeout=18446744073709551615s",
            "/fruit/_search?q=%ff%fe",
        ] {
            let (st, v) = send(&client, "GET", &url(path), &[auth], None).await;
            assert_error(path, st, 400, &v);
        }
    }
}

/// Bulk edge cases: numeric and empty ids, bad lines, many items.
async fn bulk_edge_cases(url: impl Fn(&str) -> String, write: &str) {
    let client = reqwest::Client::new();
    let h = [("authorization", write), ("content-type", "application/x-ndjson")];
    let mut body = String::new();
    for i in 0..2000 {
        body += &format!(
            "{}\n{}\n",
            json!({"index": {"_id": i}}),
            json!({"title": "pitaya", "body": format!("pitaya {i}")})
        );
    }
    body += &format!(
        "{}\n{}\n",
        json!({"index": {"_id": ""}}),
        json!({"title": "pitaya empty"})
    );
    body += &format!(
        "{}\n{}\n",
        json!({"index": {"_id": [1]}}),
        json!({"title": "pitaya array"})
    );
    body += &format!(
        "{}\n{}\n",
        json!({"index": {"_id": "x", "version": 3}}),
        json!({"title": "pitaya version"})
    );
    body += &format!("{}\n{}\n", json!({"index": {"_id": "y"}}), "not json");
    body += &format!("{}\n", json!({"delete": {}}));
    for round in 0..3 {
        let (st, v) = send(&client, "POST", &url("/fruit/_bulk"), &h, Some(body.clone().into())).await;
        assert_eq!(st, 200, "{v}");
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), 2005);
        let want = if round == 0 { 201 } else { 200 };
        for (i, it) in items[..2000].iter().enumerate() {
            assert_eq!(it["index"]["_id"], i.to_string());
            assert_eq!(it["index"]["status"], want, "{it}");
        }
        for it in &items[2000..] {
            let r = it.as_object().unwrap().values().next().unwrap();
            assert_eq!(r["status"], 400, "{it}");
        }
    }
    // Framing errors fail the request with a 400 that says where.
    for bad in [
        "{\"index\":{}}\n",
        "not json\n",
        "{\"update\":{\"_id\":\"1\"}}\n{}\n",
        "\n\n",
        "{\"index\":5}\n{}\n",
    ] {
        let (st, v) = send(&client, "POST", &url("/fruit/_bulk"), &h, Some(bad.into())).await;
        assert_error(bad, st, 400, &v);
    }
}

/// Bodies over the limit, with a length and chunked: 413s.
async fn oversized_bodies(url: impl Fn(&str) -> String, write: &str) {
    let client = reqwest::Client::new();
    let big = axum::body::Bytes::from(vec![b' '; MAX_BODY + 1024]);
    for path in ["/docs", "/fruit/_doc/big", "/fruit/_bulk", "/fruit/_search"] {
        let h = [("authorization", write), ("content-type", "application/json")];
        for _ in 0..3 {
            let (st, v) = send(&client, "POST", &url(path), &h, Some(reqwest::Body::from(big.clone()))).await;
            assert_error(path, st, 413, &v);
        }
        // Chunked: no length to refuse it by, so it is read up to the limit.
        let (st, body) = chunked_upload(&url(path), write, MAX_BODY + (1 << 20)).await;
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_error(path, st, 413, &v);
    }
}

/// Sends `total` bytes to `url` as a chunked body on a raw socket; the
/// answer's status and body.
async fn chunked_upload(url: &str, auth: &str, total: usize) -> (u16, String) {
    use tokio::io::AsyncReadExt;
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let chunk = [
        format!("{:x}\r\n", 65536).into_bytes(),
        vec![b' '; 65536],
        b"\r\n".to_vec(),
    ]
    .concat();
    let mut sent = 0;
    while sent < total {
        if s.write_all(&chunk).await.is_err() {
            break;
        }
        sent += 65536;
    }
    let _ = s.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    let (st, _, body) = parse_raw(&answer).unwrap_or_else(|| panic!("chunked {path}: {answer:?}"));
    (st, body)
}

/// Malformed HTTP: JSON 400s from the server, which goes on.
async fn malformed_http(addr: SocketAddr) {
    for i in 0..50 {
        let req: &[u8] = match i % 3 {
            0 => b"G(T / HTTP/1.1\r\nhost: x\r\n\r\n",
            1 => b"GET /docs/\xff HTTP/1.1\r\nhost: x\r\n\r\n",
            _ => b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        };
        let answer = common::raw(addr, req, Duration::from_secs(5)).await;
        let (st, _, body) = parse_raw(&answer).unwrap_or_else(|| panic!("{answer:?}"));
        assert_eq!(st, 400, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], 400);
    }
}

/// What an abuser gets: the server's address, its URL maker and the keys.
#[derive(Clone)]
struct Ctx {
    addr: SocketAddr,
    base: String,
    read: String,
    write: String,
}

impl Ctx {
    fn url(&self) -> impl Fn(&str) -> String + Clone + Send + 'static {
        let base = self.base.clone();
        move |p: &str| format!("{base}{p}")
    }
}

/// The suite's tests run one at a time: they measure the whole process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Starts a server, runs `abuse` against it while the steady searcher
/// searches, and checks the latency and memory bounds; the server is
/// returned for the caller's checks of the index.
fn under_abuse<F>(name: &str, abuse: impl FnOnce(Ctx) -> F) -> Server
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let keys = keys();
    let server = Server::start(keys.auth);
    let ctx = Ctx {
        addr: server.addr,
        base: server.url(""),
        read: keys.read.clone(),
        write: keys.write,
    };
    let idle_rss = rss();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = rss_sampler(stop.clone());
    let searcher = steady_searcher(server.addr, keys.read, stop.clone());
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async { tokio::spawn(abuse(ctx)).await.unwrap() });
    // Abuse that ends quickly is still measured over enough steady searches.
    while started.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let latencies = searcher.join().unwrap();
    let max_rss = sampler.join().unwrap();
    let n = latencies.len();
    let p99 = p99(latencies);
    eprintln!(
        "{name}: {:?}; {n} steady searches, p99 {p99:?}; RSS idle {} MiB, max {} MiB",
        started.elapsed(),
        idle_rss >> 20,
        max_rss >> 20
    );
    assert!(n >= 100, "only {n} steady searches");
    assert!(p99 < P99_BOUND, "p99 {p99:?} over {P99_BOUND:?}");
    assert!(max_rss < idle_rss + RSS_GROWTH, "RSS grew from {idle_rss} to {max_rss}");
    assert!(max_rss < RSS_BOUND, "RSS {max_rss}");
    server
}

#[test]
fn the_server_keeps_answering_under_abuse_within_bounds() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let slowest = Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let recorded = slowest.clone();
    let server = under_abuse("abuse", move |ctx| async move {
        let slow = tokio::spawn(slow_header_sockets(ctx.addr, SLOW_SOCKETS));
        let (u, w) = (ctx.url(), ctx.write.clone());
        let writes = tokio::spawn(async move { refused_writes(u, &w).await });
        let (u, r) = (ctx.url(), ctx.read.clone());
        let timeouts = tokio::spawn(async move { huge_timeouts(u, &r).await });
        let (u, w) = (ctx.url(), ctx.write.clone());
        let bulk = tokio::spawn(async move { bulk_edge_cases(u, &w).await });
        let (u, w) = (ctx.url(), ctx.write.clone());
        let big = tokio::spawn(async move { oversized_bodies(u, &w).await });
        let garbage = tokio::spawn(malformed_http(ctx.addr));
        for t in [writes, timeouts, bulk, big, garbage] {
            t.await.unwrap();
        }
        *recorded.lock().unwrap() = slow.await.unwrap();
    });
    let slowest = *slowest.lock().unwrap();
    assert!(slowest < HEADER_TIMEOUT + Duration::from_secs(2), "{slowest:?}");
    // Nothing refused changed the index; the bulk documents are there.
    assert_eq!(server.count("pwned"), 0);
    assert_eq!(
        server.count("apple banana cherry date elder fig grape honeydew"),
        docs().len() as u64
    );
    assert_eq!(server.count("pitaya"), 2000);
    server.stop();
}

/// Huge tokens and huge phrases: a 4 MB single-token document is indexed
/// (and made searchable) in seconds without delaying the next write, and a
/// 40,000-word phrase is refused at once with a 400 (query size limits);
/// the steady searcher never notices.
#[test]
fn huge_tokens_and_phrases_neither_stall_nor_swell_the_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let server = under_abuse("huge", |ctx| async move {
        let client = reqwest::Client::new();
        let url = ctx.url();
        let write = [
            ("authorization", ctx.write.as_str()),
            ("content-type", "application/json"),
        ];
        let token = "a".repeat(4_000_000);
        let doc = json!({"id": "huge-token", "title": "huge", "body": token}).to_string();
        let started = Instant::now();
        let (st, v) = send(&client, "POST", &url("/docs?refresh=true"), &write, Some(doc.into())).await;
        assert_eq!(st, 200, "{v}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a 4 MB token took {:?}",
            started.elapsed()
        );
        let started = Instant::now();
        let small = json!({"id": "after-huge", "title": "small"}).to_string();
        let (st, v) = send(&client, "POST", &url("/docs"), &write, Some(small.into())).await;
        assert_eq!(st, 200, "{v}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the next write took {:?}",
            started.elapsed()
        );
        let words: Vec<String> = (0..40_000).map(|i| format!("w{i}")).collect();
        let phrase = words.join(" ");
        let read = [
            ("authorization", ctx.read.as_str()),
            ("content-type", "application/json"),
        ];
        for _ in 0..4 {
            let started = Instant::now();
            let body = json!({"query": {"match_phrase": {"body": phrase}}}).to_string();
            let (st, v) = send(&client, "POST", &url("/fruit/_search"), &read, Some(body.into())).await;
            assert_error("40,000-word match_phrase", st, 400, &v);
            let body = json!({"q": format!("\"{phrase}\"")}).to_string();
            let (st, v) = send(&client, "POST", &url("/search"), &read, Some(body.into())).await;
            assert_error("40,000-word phrase", st, 400, &v);
            assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        }
    });
    assert_eq!(server.count("huge"), 1);
    server.stop();
}
