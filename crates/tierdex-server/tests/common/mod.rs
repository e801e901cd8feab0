//! What the hardening tests share: a server on a loopback port over a small
//! index, and plain HTTP helpers (reqwest, and raw sockets for what a
//! well-behaved client never sends).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::Document;
use tierdex_server::{state, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// 300 documents over eight fruit words.
pub fn docs() -> Vec<Document> {
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

/// A server running on the test's runtime.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    pub state: Arc<tierdex_server::AppState>,
    pub dir: tempfile::TempDir,
}

/// Builds the fruit index and serves it (index name `fruit`), with
/// `tune` applied to the configuration.
pub async fn start(tune: impl FnOnce(&mut ServerConfig)) -> Running {
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
        done: Some(done),
        state: st,
        dir,
    }
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server (gracefully) and waits for it.
    pub async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.done.take().unwrap().await.unwrap().unwrap();
    }

    /// Stops the server without flushing its writer's buffer; the index
    /// directory stays until `self` is dropped.
    pub async fn stop_keeping_dir(mut self) -> tempfile::TempDir {
        self.stop.take().unwrap().send(()).unwrap();
        self.done.take().unwrap().await.unwrap().unwrap();
        self.dir
    }

    /// Documents matching `q` now (after a refresh), from the engine itself.
    pub async fn count(&self, q: &str) -> u64 {
        let st = self.state.clone();
        let q = q.to_string();
        tokio::task::spawn_blocking(move || {
            if let Some(w) = st.writer() {
                w.refresh().unwrap();
            }
            st.default_index()
                .unwrap()
                .searcher()
                .search(&q, tierdex::search::Mode::Count, 0)
                .unwrap()
                .count
                .unwrap()
        })
        .await
        .unwrap()
    }
}

/// A request with optional headers and body: (status, headers, body text).
pub async fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let client = reqwest::Client::new();
    let mut r = client.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if let Some(b) = body {
        r = r.body(b);
    }
    let r = r.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap_or_default())
}

/// Like [`request`], the body parsed as JSON (`Null` when it is not JSON).
pub async fn json_request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> (u16, Value) {
    let (st, _, text) = request(method, url, headers, body.map(|b| b.as_bytes().to_vec())).await;
    (st, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts `body` is an error in Elasticsearch's shape with `status`.
pub fn assert_es_error(what: &str, status: u16, headers: &reqwest::header::HeaderMap, body: &str) {
    let ct = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    assert!(
        ct.starts_with("application/json"),
        "{what}: {status} content-type {ct:?}: {body}"
    );
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {status}: not JSON ({e}): {body}"));
    assert_eq!(v["status"], status, "{what}: {v}");
    assert!(
        v["error"]["type"].is_string() && v["error"]["reason"].is_string(),
        "{what}: {v}"
    );
}

/// Sends raw bytes on a fresh connection and reads until the server closes
/// it or `wait` passes: the bytes answered.
pub async fn raw(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, s.read_to_end(&mut out)).await;
    out
}

/// Percent-encodes everything but unreserved characters.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A raw answer: status, headers (lower-case names) and body.
pub type RawAnswer = (u16, Vec<(String, String)>, String);

/// The status, headers and body of a raw HTTP/1.1 answer.
pub fn parse_raw(bytes: &[u8]) -> Option<RawAnswer> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some((status, headers, body.to_string()))
}
