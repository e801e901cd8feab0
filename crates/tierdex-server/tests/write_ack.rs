//! Issue #20 item 16: a write is acknowledged (2xx) exactly when it is
//! durable. A refresh asked for with the write that then fails must not turn
//! an applied, durable batch into a 5xx (a client would retry it).
//!
//! Its own test binary (one process, one writer): the writer's refresh
//! directory is found as the one this process created.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// The refresh directories of this process's writers.
fn buffer_dirs(index: &std::path::Path) -> Vec<PathBuf> {
    let prefix = format!("tierdex-buffer-{}-", std::process::id());
    let mut out: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    let local = index.join(".buffer");
    if out.is_empty() {
        out.push(local);
    }
    out
}

/// Removes the file standing in for the refresh directory, whatever happens.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if self.0.is_file() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_refresh_does_not_unacknowledge_a_durable_write() {
    let s = start(|c| c.refresh_interval = std::time::Duration::from_secs(3600)).await;
    let dirs = buffer_dirs(s.dir.path());
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let buffer = &dirs[0];
    // The refresh directory replaced by a file: every refresh now fails.
    let _ = std::fs::remove_dir_all(buffer);
    std::fs::write(buffer, b"not a directory").unwrap();
    let _cleanup = RemoveOnDrop(buffer.clone());
    let doc = r#"{"id": "durable-1", "title": "tamarillo"}"#;
    let (st, v) = json_request(
        "POST",
        &s.url("/docs?refresh=true"),
        &[("content-type", "application/json")],
        Some(doc),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["added"], 1, "{v}");
    assert_eq!(v["forced_refresh"], false, "{v}");
    assert!(v["refresh_error"].is_string(), "{v}");
    let (st, v) = json_request(
        "PUT",
        &s.url("/fruit/_doc/durable-2?refresh=true"),
        &[("content-type", "application/json")],
        Some(r#"{"title": "tamarillo two"}"#),
    )
    .await;
    assert_eq!((st, &v["result"]), (201, &Value::from("created")), "{v}");
    assert_eq!(v["forced_refresh"], false, "{v}");
    let bulk = "{\"index\":{\"_id\":\"durable-3\"}}\n{\"title\":\"tamarillo three\"}\n";
    let (st, v) = json_request(
        "POST",
        &s.url("/fruit/_bulk?refresh=true"),
        &[("content-type", "application/x-ndjson")],
        Some(bulk),
    )
    .await;
    assert_eq!((st, &v["errors"]), (200, &Value::from(false)), "{v}");
    assert_eq!(v["items"][0]["index"]["status"], 201, "{v}");
    assert_eq!(v["forced_refresh"], false, "{v}");
    // An explicit refresh that fails is the server's fault.
    let (st, v) = json_request("POST", &s.url("/refresh"), &[], None).await;
    assert!(st >= 500, "{st} {v}");
    // Once the cause is gone, the acknowledged documents are searchable...
    std::fs::remove_file(buffer).unwrap();
    let (st, v) = json_request("POST", &s.url("/refresh"), &[], None).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(s.count("tamarillo").await, 3);
    // ... and durable: a writer opened on the directory after the server
    // stops (no flush) finds them in the log.
    let dir = s.dir.path().to_path_buf();
    let state = s.state.clone();
    let _dir = s.stop_keeping_dir().await;
    drop(state);
    let w = tierdex::update::IndexWriter::open(&dir, Default::default()).unwrap();
    for id in ["durable-1", "durable-2", "durable-3"] {
        assert!(w.contains(id), "{id} lost");
    }
}
