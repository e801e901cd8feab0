//! Faults in a cluster (issue #26), with real processes: three NATS
//! servers (JetStream, three copies of every stream), three `tierdex node`
//! processes, a broker, continuous writes and searches.
//!
//! * kill -9 a node: searches go on from the other replicas (the window
//!   with failures is reported); the node comes back and catches up, its
//!   replicas equal to their peers;
//! * kill one NATS server: writes go on;
//! * kill a second: writes are refused, not lost.
//!
//! Afterwards every acknowledged id is found exactly once. Skips (and says
//! so) where there is no nats-server.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tierdex_cluster::broker::{self, Broker, BrokerConfig};
use tierdex_cluster::local::{self, NatsServer};
use tierdex_cluster::wire::{Answer, Ask, ShardRequest};
use tierdex_cluster::ClusterConfig;

const SHARDS: u32 = 3;

/// A node process, killed when dropped (also when the test fails).
struct NodeProc(Child);

impl NodeProc {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn node(urls: &str, dir: &Path, i: usize) -> NodeProc {
    NodeProc(spawn_node(urls, dir, i))
}

fn spawn_node(urls: &str, dir: &Path, i: usize) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args([
            "node",
            "--cluster",
            urls,
            "--id",
            &format!("node-{i}"),
            "--cluster-stream-replicas",
            "3",
            "--data",
        ])
        .arg(dir.join(format!("node-{i}")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tierdex node starts")
}

struct Log {
    /// Ids acknowledged (stored by JetStream).
    acked: Vec<String>,
    /// Ids refused (not acknowledged).
    refused: usize,
    /// Times of acknowledged and of refused bulk items.
    ack_times: Vec<Instant>,
    refuse_times: Vec<Instant>,
    /// Times of searches that failed or were partial, and of good ones.
    bad_searches: Vec<Instant>,
    good_searches: usize,
}

async fn post(http: &reqwest::Client, url: String, body: String, ndjson: bool) -> Option<(u16, Value)> {
    let ct = if ndjson {
        "application/x-ndjson"
    } else {
        "application/json"
    };
    let r = http
        .post(url)
        .header("content-type", ct)
        .body(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .ok()?;
    let status = r.status().as_u16();
    Some((status, r.json().await.unwrap_or(Value::Null)))
}

/// The replicas' counters, by shard, asked of each node directly.
async fn replica_docs(client: &async_nats::Client, nodes: usize) -> Vec<Vec<(String, u64, u64, u64)>> {
    let mut out = vec![Vec::new(); SHARDS as usize];
    for shard in 0..SHARDS {
        for n in 0..nodes {
            let req = ShardRequest {
                index: "docs".into(),
                shard,
                uid: String::new(),
                ask: Ask::Status,
                context: None,
            };
            let subject = tierdex_cluster::names::node_subject(&format!("node-{n}"));
            if let Ok(Ok(m)) = tokio::time::timeout(
                Duration::from_secs(2),
                client.request(subject, serde_json::to_vec(&req).unwrap().into()),
            )
            .await
            {
                if let Ok(Answer::Status(s)) = serde_json::from_slice(&m.payload) {
                    out[shard as usize].push((format!("node-{n}"), s.docs, s.applied, s.skipped));
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_lose_nothing_acknowledged() {
    let Some(bin) = local::find_nats_server() else {
        eprintln!("SKIPPED: no nats-server: {}", local::INSTALL_HINT);
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start_cluster(&bin, &tmp.path().join("nats"), 3).unwrap();
    let urls: Vec<String> = nats.iter().map(NatsServer::url).collect();
    let cfg = ClusterConfig {
        urls: urls.clone(),
        stream_replicas: 3,
    };
    let client = cfg.connect("test").await.unwrap();
    local::wait_jetstream(&client, Duration::from_secs(30)).await.unwrap();
    let joined = urls.join(",");
    let mut nodes: Vec<NodeProc> = (0..3).map(|i| node(&joined, tmp.path(), i)).collect();
    let b = Broker::connect(BrokerConfig {
        cluster: cfg.clone(),
        replica_timeout: Duration::from_secs(2),
        reassign_after: Duration::from_secs(30),
    })
    .await
    .unwrap();
    let map = b.map().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while map.live_nodes().await.map(|n| n.len()).unwrap_or(0) < 3 {
        assert!(Instant::now() < deadline, "the nodes did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, broker::router(b, Default::default()))
            .await
            .unwrap()
    });
    let http = reqwest::Client::new();
    let create = json!({
        "mappings": { "properties": { "title": { "type": "text" }, "key": { "type": "keyword" }, "n": { "type": "long" } } },
        "settings": { "number_of_shards": SHARDS, "number_of_replicas": 1 },
    });
    let r = http.put(format!("{base}/docs")).json(&create).send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["shards_acknowledged"], json!(true), "{v}");

    let log = Arc::new(Mutex::new(Log {
        acked: Vec::new(),
        refused: 0,
        ack_times: Vec::new(),
        refuse_times: Vec::new(),
        bad_searches: Vec::new(),
        good_searches: 0,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, stop, http, base) = (log.clone(), stop.clone(), http.clone(), base.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut body = String::new();
                let ids: Vec<String> = (0..20).map(|j| format!("w-{}", i * 20 + j)).collect();
                for id in &ids {
                    body.push_str(&json!({ "index": { "_id": id } }).to_string());
                    body.push('\n');
                    body.push_str(&json!({ "title": format!("common words {id}"), "key": id, "n": i }).to_string());
                    body.push('\n');
                }
                i += 1;
                let answer = post(&http, format!("{base}/docs/_bulk"), body, true).await;
                let now = Instant::now();
                {
                    let mut l = log.lock().unwrap();
                    match answer {
                        Some((200, v)) => {
                            for (it, id) in v["items"].as_array().unwrap().iter().zip(&ids) {
                                if it["index"]["status"].as_u64().is_some_and(|s| s < 300) {
                                    l.acked.push(id.clone());
                                    l.ack_times.push(now);
                                } else {
                                    l.refused += 1;
                                    l.refuse_times.push(now);
                                }
                            }
                        }
                        _ => {
                            l.refused += ids.len();
                            l.refuse_times.push(now);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let searcher = {
        let (log, stop, http, base) = (log.clone(), stop.clone(), http.clone(), base.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let q = json!({ "query": { "match": { "title": "common" } }, "size": 10 }).to_string();
                let answer = post(&http, format!("{base}/docs/_search"), q, false).await;
                let ok = matches!(&answer, Some((200, v)) if v["_shards"]["failed"] == json!(0));
                {
                    let mut l = log.lock().unwrap();
                    match ok {
                        true => l.good_searches += 1,
                        false => l.bad_searches.push(Instant::now()),
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // kill -9 a node: searches go on from the other replicas.
    let killed_node = Instant::now();
    nodes[1].kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let node_window = {
        let l = log.lock().unwrap();
        l.bad_searches
            .iter()
            .filter(|t| **t >= killed_node)
            .max()
            .map(|t| *t - killed_node)
    };
    {
        let l = log.lock().unwrap();
        let late = l
            .bad_searches
            .iter()
            .filter(|t| **t >= killed_node + Duration::from_secs(2))
            .count();
        assert_eq!(late, 0, "searches still failed 2 s after the node was killed");
    }
    nodes[1] = node(&joined, tmp.path(), 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while map.live_nodes().await.map(|n| n.len()).unwrap_or(0) < 3 {
        assert!(Instant::now() < deadline, "node-1 did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // One NATS server lost: writes go on.
    let killed_nats = Instant::now();
    nats[2].kill();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (acked_after_one, refused_during_one, first_ack_after_one) = {
        let l = log.lock().unwrap();
        let after: Vec<&Instant> = l.ack_times.iter().filter(|t| **t >= killed_nats).collect();
        (
            after
                .iter()
                .filter(|t| ***t >= killed_nats + Duration::from_secs(3))
                .count(),
            l.refuse_times.iter().filter(|t| **t >= killed_nats).count(),
            after.first().map(|t| **t - killed_nats),
        )
    };
    assert!(
        acked_after_one > 0,
        "no write acknowledged 3-6 s after one NATS server of three was killed"
    );

    // A second one lost: no quorum, writes refused (not acknowledged).
    let killed_second = Instant::now();
    nats[1].kill();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let (acked_without_quorum, refused_without_quorum) = {
        let l = log.lock().unwrap();
        (
            l.ack_times
                .iter()
                .filter(|t| **t >= killed_second + Duration::from_secs(3))
                .count(),
            l.refuse_times.iter().filter(|t| **t >= killed_second).count(),
        )
    };
    assert_eq!(
        acked_without_quorum, 0,
        "writes acknowledged without a JetStream quorum"
    );
    assert!(refused_without_quorum > 0, "no write was refused without a quorum");

    // Servers back: the cluster heals, then everything acknowledged is there.
    nats[1].restart().unwrap();
    nats[2].restart().unwrap();
    local::wait_jetstream(&client, Duration::from_secs(60)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    searcher.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = post(&http, format!("{base}/docs/_refresh"), String::new(), false).await;
        if matches!(&r, Some((200, v)) if v["_shards"]["failed"] == json!(0)) {
            break;
        }
        assert!(Instant::now() < deadline, "the replicas did not catch up: {r:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let acked = {
        let l = log.lock().unwrap();
        let acked = l.acked.clone();
        eprintln!(
            "{} writes acknowledged, {} refused, {} searches answered whole, {} not; \
         search failover after kill -9 of a node: {:?}; first write acknowledged after one NATS server killed: {:?} \
         ({} refused meanwhile); whole run {:.1} s",
            acked.len(),
            l.refused,
            l.good_searches,
            l.bad_searches.len(),
            node_window.unwrap_or_default(),
            first_ack_after_one,
            refused_during_one,
            started.elapsed().as_secs_f64()
        );
        acked
    };
    assert!(acked.len() > 200, "too few writes to mean anything: {}", acked.len());
    for chunk in acked.chunks(500) {
        let q = json!({
            "query": { "terms": { "key": chunk } },
            "size": 0,
            "aggs": { "k": { "terms": { "field": "key", "size": chunk.len() + 10 } } },
        });
        let (status, v) = post(&http, format!("{base}/docs/_search"), q.to_string(), false)
            .await
            .expect("an answer");
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["_shards"]["failed"], json!(0));
        assert_eq!(
            v["hits"]["total"]["value"],
            json!(chunk.len()),
            "acknowledged ids missing"
        );
        let buckets = v["aggregations"]["k"]["buckets"].as_array().unwrap();
        assert_eq!(buckets.len(), chunk.len());
        assert!(buckets.iter().all(|b| b["doc_count"] == json!(1)), "an id found twice");
    }
    // Replicas of a shard hold the same documents (the node killed and
    // restarted applied nothing twice and missed nothing).
    for (shard, reps) in replica_docs(&client, 3).await.iter().enumerate() {
        assert_eq!(reps.len(), 2, "shard {shard}: replicas answering: {reps:?}");
        assert_eq!(reps[0].1, reps[1].1, "shard {shard}: replicas differ: {reps:?}");
        assert_eq!(
            reps[0].2, reps[1].2,
            "shard {shard}: applied sequences differ: {reps:?}"
        );
        eprintln!("shard {shard}: {reps:?} (node, docs, applied, skipped as already applied)");
    }
    drop(nodes);
}

/// `tierdex cluster up`: NATS, a node and a broker come up and answer;
/// SIGTERM stops them all (the children are sent SIGTERM in turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_up_starts_and_stops() {
    if local::find_nats_server().is_none() {
        eprintln!("SKIPPED: no nats-server: {}", local::INSTALL_HINT);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = local::free_port();
    let mut up = Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args([
            "cluster",
            "up",
            "2",
            "--nats",
            "1",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--dir",
        ])
        .arg(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health = http
            .get(format!("http://127.0.0.1:{port}/_cluster/health"))
            .send()
            .await;
        if let Ok(r) = health {
            let v: Value = r.json().await.unwrap();
            if v["number_of_nodes"] == json!(2) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the local cluster did not come up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let killed = Command::new("kill")
        .args(["-TERM", &up.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "cluster up did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "{status:?}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the broker still listens"
    );
    // The nodes and the NATS server stopped too.
    let left = Command::new("pgrep")
        .arg("-f")
        .arg(tmp.path().display().to_string())
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "processes left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// Options that do not apply are refused, never ignored: a broker takes
/// none of a local index's, a local `serve` none of a broker's, a node none
/// of a broker's, and the demo's cluster shape needs `--cluster`. None of
/// these needs a NATS server: they fail before connecting.
#[test]
fn cluster_options_that_do_not_apply_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().to_str().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["serve", "--cluster", "nats://127.0.0.1:1", "--threads", "2"],
            "cannot be used with",
        ),
        (
            &["serve", "--cluster", "nats://127.0.0.1:1", index],
            "cannot be used with",
        ),
        (
            &["serve", index, "--cluster-replica-timeout-ms", "5"],
            "apply to a broker",
        ),
        (&["serve", index, "--cluster-stream-replicas", "1"], "apply to a broker"),
        (
            &[
                "node",
                "--cluster",
                "nats://127.0.0.1:1",
                "--data",
                data,
                "--cluster-reassign-after-secs",
                "5",
            ],
            "not to a node",
        ),
        (&["demo", "--nodes", "2"], "--cluster"),
        // A broker takes an authentication file (read before connecting)
        // and refuses a public address without one.
        (
            &[
                "serve",
                "--cluster",
                "nats://127.0.0.1:1",
                "--auth",
                "/nonexistent/auth.json",
            ],
            "/nonexistent/auth.json",
        ),
        (
            &["serve", "--cluster", "nats://127.0.0.1:1", "--addr", "0.0.0.0:0"],
            "--insecure",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_tierdex"))
            .args(args)
            .env_remove("TIERDEX_CLUSTER")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `tierdex demo --cluster` runs the demo's documents and queries (text,
/// filters, ranges, sorts, aggregations) through a local cluster and finds every
/// answer equal to the single index's.
#[test]
fn demo_cluster_answers_as_one_index() {
    if local::find_nats_server().is_none() {
        eprintln!("SKIPPED: no nats-server: {}", local::INSTALL_HINT);
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(["demo", "--cluster", "--docs", "3000", "--queries", "4", "--nodes", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = text
        .lines()
        .find(|l| l.contains("cluster against one index:"))
        .unwrap_or_else(|| panic!("no summary line: {text}"));
    // "counts equal N of N, top-10 and aggregations equal N of N"
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .filter(|&n| n != 10)
        .collect();
    assert_eq!(numbers.len(), 4, "{line}");
    assert!(numbers[0] > 50, "{line}");
    assert!(numbers.iter().all(|&n| n == numbers[0]), "{line}");
    // Sorted categories go through the broker too.
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("sort-price-asc") && l.contains("4 of 4")),
        "{text}"
    );
}
