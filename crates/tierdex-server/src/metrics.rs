//! Request counters and the latency histogram, in Prometheus text format.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use serde::Serialize;

use crate::AppState;

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct Series {
    count: u64,
    sum_seconds: f64,
    buckets: [u64; BUCKETS.len()],
}

/// What the server counts.
#[derive(Default)]
pub struct Metrics {
    /// (route, status) → latency series.
    series: Mutex<BTreeMap<(String, u16), Series>>,
    rejected: AtomicU64,
    added: AtomicU64,
    deleted: AtomicU64,
    started: std::sync::OnceLock<Instant>,
}

/// Requests per route and status, for `/stats`.
#[derive(Debug, Serialize)]
pub struct RequestCounts {
    /// `route status` → requests.
    pub by_route: BTreeMap<String, u64>,
    /// Requests refused because the queue was full.
    pub rejected_overloaded: u64,
    /// Documents added (or replaced) through the API.
    pub docs_added: u64,
    /// Documents deleted through the API.
    pub docs_deleted: u64,
    /// Seconds since the first request.
    pub uptime_seconds: f64,
}

impl Metrics {
    fn record(&self, route: &str, status: u16, seconds: f64) {
        self.started.get_or_init(Instant::now);
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let s = m.entry((route.to_string(), status)).or_default();
        s.count += 1;
        s.sum_seconds += seconds;
        for (b, &le) in s.buckets.iter_mut().zip(&BUCKETS) {
            if seconds <= le {
                *b += 1;
            }
        }
    }

    /// Counts a request refused for overload.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts documents written by an acknowledged update.
    pub fn updated(&self, added: u64, deleted: u64) {
        self.added.fetch_add(added, Ordering::Relaxed);
        self.deleted.fetch_add(deleted, Ordering::Relaxed);
    }

    /// Counts for `/stats`.
    pub fn snapshot(&self) -> RequestCounts {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        RequestCounts {
            by_route: m.iter().map(|((r, s), v)| (format!("{r} {s}"), v.count)).collect(),
            rejected_overloaded: self.rejected.load(Ordering::Relaxed),
            docs_added: self.added.load(Ordering::Relaxed),
            docs_deleted: self.deleted.load(Ordering::Relaxed),
            uptime_seconds: self.started.get().map(|s| s.elapsed().as_secs_f64()).unwrap_or(0.0),
        }
    }

    /// The Prometheus exposition of every metric.
    pub fn render(&self, cache: Option<&tierdex::cache::CacheStats>) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        out += "# HELP tierdex_http_requests_total Requests answered, by route and status.\n# TYPE tierdex_http_requests_total counter\n";
        for ((route, status), s) in m.iter() {
            let _ = writeln!(
                out,
                "tierdex_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {}",
                s.count
            );
        }
        let errors: u64 = m.iter().filter(|((_, st), _)| *st >= 400).map(|(_, s)| s.count).sum();
        out += "# HELP tierdex_http_errors_total Requests answered with a 4xx or 5xx status.\n# TYPE tierdex_http_errors_total counter\n";
        let _ = writeln!(out, "tierdex_http_errors_total {errors}");
        out += "# HELP tierdex_http_request_duration_seconds Request latency, by route.\n# TYPE tierdex_http_request_duration_seconds histogram\n";
        let mut by_route: BTreeMap<&str, Series> = BTreeMap::new();
        for ((route, _), s) in m.iter() {
            let r = by_route.entry(route).or_default();
            r.count += s.count;
            r.sum_seconds += s.sum_seconds;
            for (a, b) in r.buckets.iter_mut().zip(&s.buckets) {
                *a += b;
            }
        }
        for (route, s) in &by_route {
            for (le, n) in BUCKETS.iter().zip(&s.buckets) {
                let _ = writeln!(
                    out,
                    "tierdex_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "tierdex_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "tierdex_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                s.sum_seconds
            );
            let _ = writeln!(
                out,
                "tierdex_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                s.count
            );
        }
        out += "# HELP tierdex_overloaded_total Requests refused with 503 because the query queue was full.\n# TYPE tierdex_overloaded_total counter\n";
        let _ = writeln!(
            out,
            "tierdex_overloaded_total {}",
            self.rejected.load(Ordering::Relaxed)
        );
        out += "# HELP tierdex_docs_written_total Documents written by acknowledged updates, by operation.\n# TYPE tierdex_docs_written_total counter\n";
        for (op, n) in [("add", &self.added), ("delete", &self.deleted)] {
            let _ = writeln!(
                out,
                "tierdex_docs_written_total{{op=\"{op}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        if let Some(c) = cache {
            out += "# HELP tierdex_cache_lookups_total Result cache lookups, by outcome.\n# TYPE tierdex_cache_lookups_total counter\n";
            for (outcome, n) in [
                ("hit", c.total.hits),
                ("partial_hit", c.total.partial_hits),
                ("miss", c.total.misses),
            ] {
                let _ = writeln!(out, "tierdex_cache_lookups_total{{outcome=\"{outcome}\"}} {n}");
            }
            out += "# HELP tierdex_cache_bytes Bytes the result cache holds.\n# TYPE tierdex_cache_bytes gauge\n";
            let _ = writeln!(out, "tierdex_cache_bytes {}", c.bytes_used);
            out += "# HELP tierdex_cache_evictions_total Result cache evictions.\n# TYPE tierdex_cache_evictions_total counter\n";
            let _ = writeln!(out, "tierdex_cache_evictions_total {}", c.total.evictions);
        }
        out
    }
}

/// Middleware: times every request and counts it by route and status.
pub async fn track(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let access = state
        .config()
        .access_log
        .then(|| (req.method().clone(), req.uri().path().to_string()));
    let started = Instant::now();
    let response = next.run(req).await;
    let took = started.elapsed();
    state
        .metrics
        .record(&route, response.status().as_u16(), took.as_secs_f64());
    if let Some((method, path)) = access {
        tracing::info!(
            target: "tierdex::access",
            method = %method,
            path = %path,
            route = %route,
            status = response.status().as_u16(),
            micros = took.as_micros() as u64,
            "request"
        );
    }
    response
}
