//! Open-loop load against a search server (DESIGN §7): requests leave on a
//! Poisson schedule at a target rate, whatever the server's speed, and each
//! latency is counted from the request's *scheduled* send time, so a server
//! that stalls is charged for every request it delays (no coordinated
//! omission). A sweep raises the rate until the server is clearly past
//! capacity, then stops by itself. Loopback addresses only; every run is
//! bounded in requests and time.

use std::net::ToSocketAddrs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use plotters::prelude::*;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

/// What one run at one rate measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RateResult {
    /// Requests per second offered (the schedule's rate).
    pub offered: f64,
    /// Requests scheduled.
    pub sent: u64,
    /// Answered 200.
    pub ok: u64,
    /// Failed: non-200 answers, transport errors, client timeouts, and
    /// requests dropped because too many were in flight.
    pub errors: u64,
    /// Answers per second over the run.
    pub achieved: f64,
    /// Latency percentiles from the scheduled send time (ms).
    pub p50_ms: f64,
    /// 90th percentile (ms).
    pub p90_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// 99.9th percentile (ms).
    pub p999_ms: f64,
    /// Largest latency (ms).
    pub max_ms: f64,
}

/// How to load a server.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Base URL (`http://127.0.0.1:9200`).
    pub base: String,
    /// Request paths with query strings, used round robin.
    pub paths: Vec<String>,
    /// Seconds per rate.
    pub duration: Duration,
    /// Requests in flight at most; more are dropped and counted as errors.
    pub max_in_flight: usize,
    /// Client timeout per request.
    pub timeout: Duration,
    /// Seed of the arrival schedule.
    pub seed: u64,
}

/// Checks that `base` is an `http://` URL of a loopback address.
pub fn check_loopback(base: &str) -> Result<()> {
    let rest = base
        .strip_prefix("http://")
        .with_context(|| format!("`{base}`: only http:// URLs are supported"))?;
    let host = rest.split('/').next().unwrap_or("");
    let with_port = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addrs: Vec<_> = with_port
        .to_socket_addrs()
        .with_context(|| format!("resolving `{host}`"))?
        .collect();
    if addrs.is_empty() || !addrs.iter().all(|a| a.ip().is_loopback()) {
        bail!("`{host}` is not a loopback address: the load generator only runs against this machine");
    }
    Ok(())
}

/// `MODE<TAB>QUERY` lines as `/search` paths.
pub fn search_paths(lines: &[(String, String)]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|(mode, q)| {
            let (mode, k) = tierdex::search::protocol_mode(mode)?;
            let m = match mode {
                tierdex::search::Mode::TopK => "top_k",
                tierdex::search::Mode::TopKAndCount => "top_k_and_count",
                tierdex::search::Mode::Count => "count",
            };
            Some(format!("/search?q={}&mode={m}&k={k}", encode(q)))
        })
        .collect()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `plan` at `rate` requests per second for its duration.
pub async fn run_rate(client: &reqwest::Client, plan: &LoadPlan, rate: f64, offset: usize) -> Result<RateResult> {
    let exp = Exp::new(rate).map_err(|e| anyhow::anyhow!("rate {rate}: {e}"))?;
    let mut rng = Pcg64::seed_from_u64(plan.seed ^ rate.to_bits());
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?));
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let (mut t, mut sent) = (0.0f64, 0u64);
    loop {
        t += exp.sample(&mut rng);
        if t >= plan.duration.as_secs_f64() {
            break;
        }
        let scheduled = start + Duration::from_secs_f64(t);
        tokio::time::sleep_until(scheduled).await;
        sent += 1;
        if in_flight.load(std::sync::atomic::Ordering::Relaxed) >= plan.max_in_flight {
            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            continue;
        }
        in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let url = format!(
            "{}{}",
            plan.base,
            plan.paths[(offset + sent as usize) % plan.paths.len()]
        );
        let (client, hist, errors, in_flight, timeout) = (
            client.clone(),
            hist.clone(),
            errors.clone(),
            in_flight.clone(),
            plan.timeout,
        );
        tasks.spawn(async move {
            let ok = match client.get(&url).timeout(timeout).send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            // From the scheduled time, not the actual send.
            let us = scheduled.elapsed().as_micros().max(1) as u64;
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if ok {
                hist.lock().unwrap().saturating_record(us);
            } else {
                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = start.elapsed().as_secs_f64();
    let h = hist.lock().unwrap();
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(RateResult {
        offered: rate,
        sent,
        ok: h.len(),
        errors: errors.load(std::sync::atomic::Ordering::Relaxed),
        achieved: h.len() as f64 / elapsed.max(plan.duration.as_secs_f64()),
        p50_ms: ms(0.5),
        p90_ms: ms(0.9),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: h.max() as f64 / 1000.0,
    })
}

/// A concurrent stream of updates: batches of documents re-indexed at a
/// steady rate through `POST /docs`, cycling over a fixed set of ids (the
/// first pass adds them, later passes replace them). Every document's title
/// carries a token unique to its id, so that each acknowledged id can be
/// checked by a search after the run.
#[derive(Debug, Clone)]
pub struct UpdateStream {
    /// Documents per second.
    pub docs_per_sec: f64,
    /// Documents per request.
    pub batch: usize,
    /// Distinct ids cycled over.
    pub ids: u64,
    /// Words the bodies are drawn from (when `docs` is empty).
    pub words: Vec<String>,
    /// Real documents re-indexed in turn, with their own ids (the id space
    /// is then `docs.len()`); empty: generated bodies with ids `upd-K`.
    pub docs: Arc<Vec<tierdex::schema::Document>>,
    /// Seed of the bodies.
    pub seed: u64,
}

/// What an update stream did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateReport {
    /// Batches acknowledged (200).
    pub batches_ok: u64,
    /// Batches that failed.
    pub batches_failed: u64,
    /// Documents acknowledged.
    pub docs_acked: u64,
    /// Write latency percentiles (ms, from the scheduled send time).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// Largest (ms).
    pub max_ms: f64,
    /// Distinct ids acknowledged at least once.
    #[serde(skip)]
    pub acked: std::collections::BTreeSet<u64>,
}

/// The title token of update id `k`.
pub fn update_token(k: u64) -> String {
    format!("tdxupd{k}")
}

/// Runs `stream` against `base` until `stop` turns true.
pub async fn run_updates(
    client: reqwest::Client,
    base: String,
    stream: UpdateStream,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> UpdateReport {
    use rand::RngExt;
    let mut rng = Pcg64::seed_from_u64(stream.seed);
    let period = Duration::from_secs_f64(stream.batch as f64 / stream.docs_per_sec.max(1e-3));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
    let mut report = UpdateReport::default();
    let start = tokio::time::Instant::now();
    let mut next_id = 0u64;
    let mut n = 0u32;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let scheduled = start + period * n;
        n += 1;
        tokio::time::sleep_until(scheduled).await;
        let mut ids = Vec::with_capacity(stream.batch);
        let mut body = String::new();
        for _ in 0..stream.batch {
            let ids_len = if stream.docs.is_empty() {
                stream.ids
            } else {
                stream.docs.len() as u64
            };
            let k = next_id % ids_len;
            next_id += 1;
            if let Some(doc) = stream.docs.get(k as usize) {
                // The title token makes every re-indexed version findable.
                let d = serde_json::json!({
                    "id": doc.id,
                    "title": format!("{} {}", update_token(k), doc.title()),
                    "body": doc.body(),
                });
                body += &d.to_string();
                body.push('\n');
                ids.push(k);
                continue;
            }
            let words: Vec<&str> = (0..rng.random_range(50..400))
                .map(|_| stream.words[rng.random_range(0..stream.words.len())].as_str())
                .collect();
            let d = serde_json::json!({
                "id": format!("upd-{k}"),
                "title": format!("{} {}", update_token(k), words[0]),
                "body": words.join(" "),
            });
            body += &d.to_string();
            body.push('\n');
            ids.push(k);
        }
        let ok = match client
            .post(format!("{base}/docs"))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
        {
            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
            Err(_) => false,
        };
        let us = scheduled.elapsed().as_micros().max(1) as u64;
        if ok {
            hist.saturating_record(us);
            report.batches_ok += 1;
            report.docs_acked += ids.len() as u64;
            report.acked.extend(ids);
        } else {
            report.batches_failed += 1;
        }
    }
    report.p50_ms = hist.value_at_quantile(0.5) as f64 / 1000.0;
    report.p99_ms = hist.value_at_quantile(0.99) as f64 / 1000.0;
    report.max_ms = hist.max() as f64 / 1000.0;
    report
}

/// Checks every acknowledged update id by searching its title token; returns
/// the ids not found exactly once.
pub async fn verify_updates(
    client: &reqwest::Client,
    base: &str,
    acked: &std::collections::BTreeSet<u64>,
) -> Result<Vec<u64>> {
    let mut lost = Vec::new();
    for &k in acked {
        let url = format!("{base}/search?q=title:{}&mode=count&k=0", update_token(k));
        let bytes = client.get(&url).send().await?.bytes().await?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)?;
        if v["count"].as_u64() != Some(1) {
            lost.push(k);
        }
    }
    Ok(lost)
}

/// Resident memory of process `pid` in bytes (Linux `/proc`).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// When a sweep stops, and what counts as keeping up.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SweepRule {
    /// p99 the server must meet to count a rate within capacity (ms).
    pub slo_p99_ms: f64,
    /// A run whose p99 exceeds this is clearly past capacity (ms).
    pub stop_p99_ms: f64,
}

impl RateResult {
    /// Whether the server kept up: nearly everything answered, at the
    /// offered rate, within the p99 objective.
    pub fn within(&self, rule: &SweepRule) -> bool {
        self.errors as f64 <= 0.001 * self.sent as f64
            && self.achieved >= 0.95 * self.offered
            && self.p99_ms <= rule.slo_p99_ms
    }

    /// Whether the server is clearly past capacity.
    pub fn past(&self, rule: &SweepRule) -> bool {
        self.errors as f64 > 0.01 * self.sent as f64
            || self.achieved < 0.8 * self.offered
            || self.p99_ms > rule.stop_p99_ms
    }
}

/// The highest offered rate the server kept up with.
pub fn capacity(results: &[RateResult], rule: &SweepRule) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.within(rule))
        .map(|r| r.offered)
        .fold(None, |a, b| Some(a.map_or(b, |a: f64| a.max(b))))
}

/// The markdown table of a sweep.
pub fn markdown(title: &str, results: &[RateResult], rule: &SweepRule) -> String {
    let mut s = format!(
        "### {title}\n\n| offered/s | achieved/s | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in results {
        s += &format!(
            "| {:.0} | {:.0} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |\n",
            r.offered, r.achieved, r.errors, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
        );
    }
    s += &match capacity(results, rule) {
        Some(c) => format!("\nCapacity (highest rate kept up with: errors ≤ 0.1%, ≥ 95% of the offered rate answered, p99 ≤ {} ms): **{c:.0} requests/s**.\n", rule.slo_p99_ms),
        None => format!("\nNo rate was kept up with (p99 ≤ {} ms).\n", rule.slo_p99_ms),
    };
    s
}

/// Draws p99 against the offered rate, one line per series (log y).
pub fn chart(path: &Path, series: &[(String, Vec<RateResult>)]) -> Result<()> {
    let draw = |e| anyhow::anyhow!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (900, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, r)| r.iter().map(|r| (r.offered, r.p99_ms.max(0.01))))
        .collect();
    if pts.is_empty() {
        return Ok(());
    }
    let x_hi = pts.iter().map(|p| p.0).fold(0.0, f64::max) * 1.05;
    let y_lo = pts.iter().map(|p| p.1.log10()).fold(f64::INFINITY, f64::min).floor();
    let y_hi = pts
        .iter()
        .map(|p| p.1.log10())
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil()
        .max(y_lo + 1.0);
    let (plot, legend) = root.split_horizontally(700);
    let mut c = ChartBuilder::on(&plot)
        .caption("p99 latency vs offered rate (open loop)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi, y_lo..y_hi)
        .map_err(draw)?;
    c.configure_mesh()
        .x_desc("offered requests/s")
        .y_desc("p99 ms (log scale)")
        .y_label_formatter(&|v| format!("{}", 10f64.powf(*v)))
        .draw()
        .map_err(draw)?;
    for (j, (name, r)) in series.iter().enumerate() {
        let p: Vec<(f64, f64)> = r.iter().map(|r| (r.offered, r.p99_ms.max(0.01).log10())).collect();
        crate::report::series_with_legend(&mut c, &legend, j, name, &p)?;
    }
    root.present().map_err(draw)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_every_series() {
        let r = |offered: f64, p99: f64| RateResult {
            offered,
            sent: 10,
            ok: 10,
            errors: 0,
            achieved: offered,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: p99,
            p999_ms: p99,
            max_ms: p99,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let series = vec![
            ("one".to_string(), vec![r(100.0, 2.0), r(200.0, 3.0)]),
            ("two".to_string(), vec![r(100.0, 1.0), r(300.0, 40.0)]),
        ];
        chart(&path, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("one") && svg.contains("two"));
    }

    #[test]
    fn only_loopback_targets() {
        assert!(check_loopback("http://127.0.0.1:9200").is_ok());
        assert!(check_loopback("http://localhost:9200/x").is_ok());
        assert!(check_loopback("http://[::1]:9200").is_ok());
        assert!(check_loopback("http://8.8.8.8:80").is_err());
        assert!(check_loopback("https://127.0.0.1:9200").is_err());
    }

    #[test]
    fn capacity_is_the_highest_rate_kept_up_with() {
        let r = |offered: f64, achieved: f64, p99: f64, errors: u64| RateResult {
            offered,
            sent: 1000,
            ok: 1000 - errors,
            errors,
            achieved,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: p99,
            p999_ms: p99,
            max_ms: p99,
        };
        let rule = SweepRule {
            slo_p99_ms: 50.0,
            stop_p99_ms: 1000.0,
        };
        let runs = [
            r(100.0, 100.0, 5.0, 0),
            r(200.0, 199.0, 20.0, 0),
            r(400.0, 390.0, 80.0, 0),
            r(800.0, 500.0, 3000.0, 40),
        ];
        assert_eq!(capacity(&runs, &rule), Some(200.0));
        assert!(!runs[2].past(&rule) && runs[3].past(&rule));
        assert_eq!(
            search_paths(&[("COUNT".into(), "a b".into()), ("X".into(), "c".into())]),
            vec!["/search?q=a%20b&mode=count&k=0"]
        );
    }

    /// A server that answers after a fixed stall: open-loop latencies must
    /// include the time requests waited behind the stall.
    #[test]
    fn latency_counts_from_the_scheduled_time() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            // One answer at a time, 20 ms each (50/s), on any number of
            // connections.
            let one = Arc::new(tokio::sync::Mutex::new(()));
            tokio::spawn(async move {
                loop {
                    let (mut sock, _) = listener.accept().await.unwrap();
                    let one = one.clone();
                    tokio::spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buf = vec![0u8; 4096];
                        while let Ok(n) = sock.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            {
                                let _turn = one.lock().await;
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            if sock
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                                .await
                                .is_err()
                            {
                                break;
                            }
                        }
                    });
                }
            });
            let client = reqwest::Client::new();
            let plan = LoadPlan {
                base: format!("http://{addr}"),
                paths: vec!["/x".into()],
                duration: Duration::from_millis(1500),
                max_in_flight: 10_000,
                timeout: Duration::from_secs(30),
                seed: 1,
            };
            let light = run_rate(&client, &plan, 5.0, 0).await.unwrap();
            assert!(light.p50_ms >= 19.0 && light.p50_ms < 200.0, "{light:?}");
            assert_eq!(light.errors, 0);
            // Four times the capacity: the queue grows for the whole run and
            // the latest requests wait well over a second behind it. A closed-loop
            // client would still report 20 ms.
            let rule = SweepRule {
                slo_p99_ms: 100.0,
                stop_p99_ms: 500.0,
            };
            let short = LoadPlan {
                duration: Duration::from_millis(500),
                ..plan
            };
            let over = run_rate(&client, &short, 200.0, 0).await.unwrap();
            assert!(over.p99_ms > 900.0, "{over:?}");
            assert!(over.past(&rule) && !light.past(&rule), "{over:?} {light:?}");
        });
    }
}

/// A stream of writes into one index of a data-directory server through
/// `POST /{index}/_bulk`: batches of new documents at a steady rate, each
/// carrying a keyword `tok` unique to it (`{prefix}{k}`), so that where
/// every acknowledged document landed can be checked afterwards.
#[derive(Debug, Clone)]
pub struct BulkStream {
    /// The index written to.
    pub index: String,
    /// Prefix of the documents' ids and tokens.
    pub prefix: String,
    /// Documents per second.
    pub docs_per_sec: f64,
    /// Documents per request.
    pub batch: usize,
    /// Text of the documents, used round robin.
    pub texts: Arc<Vec<(String, String)>>,
}

/// What a bulk stream did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BulkReport {
    /// Batches acknowledged (200 without item errors).
    pub batches_ok: u64,
    /// Batches that failed.
    pub batches_failed: u64,
    /// Documents acknowledged.
    pub docs_acked: u64,
    /// Documents per second acknowledged over the run.
    pub docs_per_sec: f64,
    /// Write latency percentiles (ms, from the scheduled send time).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// The numbers `k` of the acknowledged documents.
    #[serde(skip)]
    pub acked: Vec<u64>,
}

/// Runs `stream` against `base` until `stop` turns true.
pub async fn run_bulk(
    client: reqwest::Client,
    base: String,
    stream: BulkStream,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> BulkReport {
    let period = Duration::from_secs_f64(stream.batch as f64 / stream.docs_per_sec.max(1e-3));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
    let mut report = BulkReport::default();
    let start = tokio::time::Instant::now();
    let mut k = 0u64;
    let mut n = 0u32;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let scheduled = start + period * n;
        n += 1;
        tokio::time::sleep_until(scheduled).await;
        let mut body = String::new();
        let first = k;
        for _ in 0..stream.batch {
            let (title, text) = &stream.texts[(k as usize) % stream.texts.len().max(1)];
            let id = format!("{}{k}", stream.prefix);
            body += &serde_json::json!({"index": {"_id": id}}).to_string();
            body.push('\n');
            body += &serde_json::json!({"title": title, "body": text, "tok": id}).to_string();
            body.push('\n');
            k += 1;
        }
        let ok = match client
            .post(format!("{base}/{}/_bulk", stream.index))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => match r.json::<serde_json::Value>().await {
                Ok(v) => v["errors"] == false,
                Err(_) => false,
            },
            _ => false,
        };
        let us = scheduled.elapsed().as_micros().max(1) as u64;
        if ok {
            hist.saturating_record(us);
            report.batches_ok += 1;
            report.docs_acked += k - first;
            report.acked.extend(first..k);
        } else {
            report.batches_failed += 1;
        }
    }
    report.docs_per_sec = report.docs_acked as f64 / start.elapsed().as_secs_f64().max(1e-9);
    report.p50_ms = hist.value_at_quantile(0.5) as f64 / 1000.0;
    report.p99_ms = hist.value_at_quantile(0.99) as f64 / 1000.0;
    report
}

/// How many of the documents `{prefix}{k}` for `k` in `acked` index
/// `index` holds (by `terms` counts on `tok`, 500 at a time).
pub async fn count_tokens(
    client: &reqwest::Client,
    base: &str,
    index: &str,
    prefix: &str,
    acked: &[u64],
) -> Result<u64> {
    let mut found = 0;
    for chunk in acked.chunks(500) {
        let toks: Vec<String> = chunk.iter().map(|k| format!("{prefix}{k}")).collect();
        let v: serde_json::Value = client
            .post(format!("{base}/{index}/_count"))
            .json(&serde_json::json!({"query": {"terms": {"tok": toks}}}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        found += v["count"].as_u64().with_context(|| format!("no count in {v}"))?;
    }
    Ok(found)
}
