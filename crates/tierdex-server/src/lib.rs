//! tierdex over HTTP/JSON (DESIGN §7): search, live updates, stats, health
//! and Prometheus metrics, plus an Elasticsearch-compatible subset.
//!
//! Query evaluation runs on a dedicated pool of worker threads fed by a
//! bounded queue, never on the async executor; when the queue is full the
//! server answers 503 instead of growing memory. Request bodies are limited
//! in size. Every error is JSON in Elasticsearch's shape, with a status that
//! says whose fault it is (query syntax errors point at the position).
//! SIGTERM or SIGINT stops accepting connections and lets the requests in
//! flight finish.
//!
//! Connections are limited in number ([`ServerConfig::max_connections`],
//! a JSON 503 beyond), and closed when a request's head takes longer than
//! [`ServerConfig::header_timeout`] to arrive (or its body pauses that long)
//! or when they stay idle for [`ServerConfig::idle_timeout`] (see `conn`).
//!
//! Security (see [`security`]): requests carrying an `Origin` header are
//! refused (403) unless [`ServerConfig::cors`] allows that origin; writes
//! must declare a JSON or NDJSON content type (415); with
//! [`ServerConfig::auth`], every route but `/health` needs credentials (API
//! keys or basic-auth users) whose role allows it (401, 403). [`serve`]
//! refuses a non-loopback address without authentication unless
//! [`ServerConfig::insecure`] says so.
//!
//! A request's `timeout` runs from its arrival: a search still queued then is
//! never started, and one running is stopped inside the engine (the
//! collectors read the clock every 1,024 documents), answered 504. Timeouts
//! above [`ServerConfig::max_timeout`] are refused with a 400.
//!
//! Updates go through the index's [`IndexWriter`] on blocking threads, at
//! most [`ServerConfig::max_writes`] at a time (503 beyond): a write is
//! acknowledged (2xx) exactly when its batch is in the synced write-ahead
//! log. The writer's background thread (at a lower CPU priority than the
//! query workers) refreshes every [`ServerConfig::refresh_interval`]
//! (near-real-time search) and flushes when the buffer is full; a request may
//! also ask for `?refresh=true` (a refresh that fails after a durable write is
//! reported in the answer as `"forced_refresh": false` with `refresh_error`,
//! not as a failure of the write). Every search runs on one snapshot. On
//! shutdown the buffer is flushed to segments.

pub mod admin;
mod conn;
pub mod es;
pub mod indices;
mod metrics;
mod pool;
mod scroll;
pub use scroll::{MAX_CONTEXTS, MAX_KEEP_ALIVE};
pub mod security;
pub mod snapshots;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tierdex::cache::CacheConfig;
use tierdex::index::OpenOptions;
use tierdex::query::ast;
use tierdex::search::{Mode, SearchResults};
use tierdex::update::wal::Op;
use tierdex::update::{Applied, IndexWriter, Strategy, WriterOptions};

pub use conn::{fit_connections, FD_RESERVE};
pub use indices::{IndexHandle, IndexSettings, Indices};
pub use metrics::Metrics;
pub use pool::{Overloaded, Pool};
pub use security::{hash_secret, new_api_key, Auth, Cors, OriginRule, Role};

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Index directory (one index; ignored with [`ServerConfig::data`]).
    pub dir: PathBuf,
    /// A data directory holding many indices, one per subdirectory (see
    /// [`indices`]); `None`: the one index in `dir`.
    pub data: Option<PathBuf>,
    /// In a data directory, a write to an index that does not exist
    /// creates it with a dynamic mapping (as Elasticsearch's
    /// `action.auto_create_index`); off, it is a 404.
    pub auto_create_index: bool,
    /// Name of the index in Elasticsearch-style paths (`/{index}/_search`).
    pub index_name: String,
    /// Query worker threads.
    pub threads: usize,
    /// Requests that may wait for a worker before the server answers 503.
    pub queue: usize,
    /// How the index is opened.
    pub open: OpenOptions,
    /// Result cache, if any.
    pub cache: Option<CacheConfig>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Longest a search waits for its answer unless the request says otherwise.
    pub default_timeout: Duration,
    /// Serve searches only (no writer, no lock on the index).
    pub read_only: bool,
    /// Create an empty index (with this strategy) if the directory holds
    /// none; in a data directory, the strategy of new indices.
    pub create: Option<Strategy>,
    /// How often updates become searchable.
    pub refresh_interval: Duration,
    /// The writer's buffer.
    pub writer: WriterOptions,
    /// Write requests in progress at once; beyond, 503.
    pub max_writes: usize,
    /// Longest timeout a request may ask for; above, 400.
    pub max_timeout: Duration,
    /// API keys and users allowed in (none: no authentication).
    pub auth: Option<Arc<Auth>>,
    /// Cross-origin requests allowed (none by default: refused).
    pub cors: Cors,
    /// Allow a non-loopback address without authentication.
    pub insecure: bool,
    /// Connections open at once; beyond, 503 (fitted under the process's
    /// file-descriptor limit less [`FD_RESERVE`]).
    pub max_connections: usize,
    /// Longest a client may take to send a request's head (from its first
    /// byte, or from the connection's opening), and longest pause within a
    /// body.
    pub header_timeout: Duration,
    /// Longest a connection may stay idle between requests.
    pub idle_timeout: Duration,
    /// Log one line per request (target `tierdex::access`, level info:
    /// method, path, route, status, microseconds).
    pub access_log: bool,
    /// Log searches slower than this (target `tierdex::slowlog`, level
    /// warn: index, milliseconds, the query); `None`: none.
    pub slow_query: Option<Duration>,
    /// Directories snapshot repositories may be registered in (as
    /// Elasticsearch's `path.repo`); none: no repository can be.
    pub path_repo: Vec<PathBuf>,
}

impl ServerConfig {
    /// Defaults for the index in `dir`: 2 workers, a queue of 1000, no cache,
    /// 10 MiB bodies, 10 s timeout (at most 60 s), no authentication, no
    /// CORS, 1024 connections, 10 s to send a head, 60 s idle.
    pub fn new(dir: PathBuf) -> ServerConfig {
        let index_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .filter(|n| !n.is_empty() && !n.starts_with('_'))
            .unwrap_or_else(|| "tierdex".into());
        ServerConfig {
            dir,
            data: None,
            auto_create_index: true,
            index_name,
            threads: 2,
            queue: 1000,
            open: OpenOptions::default(),
            cache: None,
            max_body_bytes: 10 << 20,
            default_timeout: Duration::from_secs(10),
            read_only: false,
            create: None,
            refresh_interval: Duration::from_secs(1),
            writer: WriterOptions::default(),
            max_writes: 16,
            max_timeout: Duration::from_secs(60),
            auth: None,
            cors: Cors::default(),
            insecure: false,
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            access_log: false,
            slow_query: None,
            path_repo: Vec::new(),
        }
    }

    /// Checks that the settings make sense together.
    pub fn check(&self) -> tierdex::Result<()> {
        let bad = |m: String| Err(tierdex::Error::InvalidArgument(m));
        if self.default_timeout > self.max_timeout {
            return bad(format!(
                "the default timeout ({} ms) is above the maximum ({} ms)",
                self.default_timeout.as_millis(),
                self.max_timeout.as_millis()
            ));
        }
        if self.header_timeout.is_zero() || self.idle_timeout.is_zero() {
            return bad("the header and idle timeouts must be positive".into());
        }
        if self.max_connections == 0 {
            return bad("the connection limit must be positive".into());
        }
        Ok(())
    }

    /// `t` if a request may ask for it, else a 400 naming the maximum.
    pub fn check_timeout(&self, t: Duration, asked: &str) -> Result<Duration, ApiError> {
        if t > self.max_timeout {
            return Err(ApiError::bad_request(format!(
                "[timeout] {asked} is above this server's maximum of {} ms",
                self.max_timeout.as_millis()
            )));
        }
        Ok(t)
    }
}

/// Everything handlers share.
pub struct AppState {
    indices: Indices,
    /// Open scrolls and points in time.
    pub(crate) contexts: scroll::Contexts,
    /// Snapshot repositories and snapshots under way.
    pub(crate) snapshots: snapshots::Snapshots,
    writes: tokio::sync::Semaphore,
    pool: Pool,
    metrics: Metrics,
    config: ServerConfig,
}

/// An error answered as JSON.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) body: serde_json::Value,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// The error's HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The error's `reason`.
    pub fn reason(&self) -> String {
        self.body["error"]["reason"].as_str().unwrap_or_default().to_string()
    }

    /// An error of `status`, with Elasticsearch's `type` and `reason`.
    pub fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: serde_json::json!({ "error": { "type": kind, "reason": message.into() }, "status": status.as_u16() }),
        }
    }

    fn from_engine(query: &str, e: tierdex::Error) -> ApiError {
        match &e {
            tierdex::Error::Query(q) => {
                let mut err = ApiError::new(StatusCode::BAD_REQUEST, "query_parsing_exception", e.to_string());
                err.body["error"]["position"] = q.position().into();
                err.body["error"]["caret"] = tierdex::query::parser::render_error(query, q).into();
                err
            }
            _ => ApiError::engine(e),
        }
    }

    /// An engine error answered by whose fault it is: 400 for bad input,
    /// 404, 409, 503 and 504 for what their names say, 507 for a full disk,
    /// 500 for corruption, other I/O failures and bugs.
    pub fn engine(e: tierdex::Error) -> ApiError {
        use tierdex::ErrorKind;
        let (status, kind) = match e.kind() {
            ErrorKind::BadInput => (StatusCode::BAD_REQUEST, "bad_request"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::Conflict => (StatusCode::CONFLICT, "conflict"),
            ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ErrorKind::TimedOut => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
            ErrorKind::Corrupt => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_index"),
            ErrorKind::Io if is_disk_full(&e) => (StatusCode::INSUFFICIENT_STORAGE, "disk_full"),
            ErrorKind::Io => (StatusCode::INTERNAL_SERVER_ERROR, "io_error"),
            ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        };
        ApiError::new(status, kind, e.to_string())
    }
}

/// True for an I/O error caused by a full disk (or quota).
fn is_disk_full(e: &tierdex::Error) -> bool {
    match e {
        tierdex::Error::Io { source, .. } => matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)),
        _ => false,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// A search as the workers run it.
#[derive(Debug, Clone)]
pub struct SearchJob {
    /// Query text (for error messages).
    pub text: String,
    /// The parsed query.
    pub query: ast::Query,
    /// Mode.
    pub mode: Mode,
    /// Hits wanted.
    pub k: usize,
    /// Show the hits' `_source`, filtered (`None`: not at all).
    pub source: Option<tierdex::query::dsl::SourceFilter>,
    /// Hits skipped before the page.
    pub from: usize,
    /// The order (empty: by score).
    pub sort: Vec<tierdex::search::SortField>,
    /// Start after this hit's sort values.
    pub search_after: Option<Vec<tierdex::search::SortValue>>,
    /// Highlight the hits: which fields, tags, snippet bytes.
    pub highlight: Option<tierdex::query::dsl::HighlightSpec>,
    /// Longest wait for the answer.
    pub timeout: Duration,
    /// Aggregations over the matches (`aggs` of the request body).
    pub aggs: Option<tierdex::aggs::Aggregations>,
}

/// One hit of an answer.
#[derive(Debug, Clone, Serialize)]
pub struct HitOut {
    /// External id.
    pub id: String,
    /// The index holding it, in a search over several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// BM25 score.
    pub score: f32,
    /// The stored document's fields (`_source`), filtered, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
    /// With a sort: the hit's sort values, its document number last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<Vec<tierdex::search::SortValue>>,
    /// Highlighted title and body snippet, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highlight: Option<tierdex::search::Highlight>,
}

/// An answer as the workers produce it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// Exact number of matches (modes with a count).
    pub count: Option<u64>,
    /// Best hits.
    pub hits: Vec<HitOut>,
    /// How the cache answered, with a cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<tierdex::cache::Outcome>,
    /// The aggregations' results, in Elasticsearch's shape, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregations: Option<serde_json::Value>,
    /// Milliseconds from the request's arrival to its answer.
    pub took_ms: u64,
}

/// One search over several indices (see [`AppState::search_many`]): each
/// index answers its best `from + k` with the summed statistics, the hits
/// merge by score (ties by the indices' order, then by document), counts
/// add up and aggregation partials merge.
fn run_many(targets: &[(Arc<IndexHandle>, SearchJob)], deadline: Instant) -> tierdex::Result<Answer> {
    let snapshots: Vec<Arc<tierdex::search::Searcher>> = targets.iter().map(|(ix, _)| ix.searcher()).collect();
    let mut global = tierdex::query::global::GlobalStats::default();
    for ((_, job), s) in targets.iter().zip(&snapshots) {
        global.merge(&s.global_stats(&job.query)?);
    }
    let global = Arc::new(global);
    let mut hits: Vec<(f32, usize, tierdex::schema::DocId)> = Vec::new();
    let mut count: Option<u64> = None;
    let mut aggs: Option<tierdex::aggs::AggsPartial> = None;
    for (i, ((_, job), s)) in targets.iter().zip(&snapshots).enumerate() {
        let view = s.with_global_stats(global.clone());
        let mut req = tierdex::search::SearchRequest::new(&job.query, job.from.saturating_add(job.k));
        req.mode = job.mode;
        req.deadline = Some(deadline);
        let r = view.search_request(&req)?;
        if let Some(c) = r.count {
            *count.get_or_insert(0) += c;
        }
        hits.extend(r.hits.iter().map(|h| (h.score, i, h.doc)));
        if let Some(a) = &job.aggs {
            for p in view.aggregate_parts(&job.query, a)? {
                match aggs.as_mut() {
                    Some(m) => m.merge(p),
                    None => aggs = Some(p),
                }
            }
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let first = &targets[0].1;
    let mut out = Vec::with_capacity(first.k);
    for &(score, i, doc) in hits.iter().skip(first.from).take(first.k) {
        let s = &snapshots[i];
        out.push(HitOut {
            id: s.doc_id(doc)?,
            index: Some(targets[i].0.name().to_string()),
            score,
            source: match &targets[i].1.source {
                Some(f) => f.apply(&s.doc(doc)?),
                None => None,
            },
            sort: None,
            highlight: None,
        });
    }
    let aggregations = match &first.aggs {
        Some(req) => {
            let merged = aggs.unwrap_or_else(|| tierdex::aggs::AggsPartial::empty(req));
            Some(tierdex::aggs::finalize(req, &merged)?)
        }
        None => None,
    };
    Ok(Answer {
        count,
        hits: out,
        cache: None,
        aggregations,
        took_ms: 0,
    })
}

fn run_job(ix: &IndexHandle, thread: usize, job: &SearchJob, deadline: Instant) -> tierdex::Result<Answer> {
    run_on(&ix.searcher(), ix.cache(), thread, job, deadline)
}

/// Runs `job` on the snapshot `s` (through `cache` when given).
fn run_on(
    s: &tierdex::search::Searcher,
    cache: Option<&Arc<tierdex::cache::ResultCache>>,
    thread: usize,
    job: &SearchJob,
    deadline: Instant,
) -> tierdex::Result<Answer> {
    let d = Some(deadline);
    // Aggregations are computed in the request's own pass (not cached).
    let paged = job.from > 0 || !job.sort.is_empty() || job.search_after.is_some() || job.aggs.is_some();
    let (r, outcome): (SearchResults, _) = match cache {
        _ if paged => {
            let mut req = tierdex::search::SearchRequest::new(&job.query, job.k);
            req.mode = job.mode;
            req.from = job.from;
            req.sort = job.sort.clone();
            req.search_after = job.search_after.clone();
            req.deadline = d;
            req.aggs = job.aggs.as_ref();
            (s.search_request(&req)?, None)
        }
        Some(c) => c
            .search_until(s, thread, &job.query, job.mode, job.k, d)
            .map(|(r, o)| (r, Some(o)))?,
        None => (s.search_until(&job.query, job.mode, job.k, d)?, None),
    };
    let plan = if job.highlight.is_some() {
        Some(s.plan(&job.query)?)
    } else {
        None
    };
    let mut hits = Vec::with_capacity(r.hits.len());
    for (i, h) in r.hits.iter().enumerate() {
        hits.push(HitOut {
            id: s.doc_id(h.doc)?,
            index: None,
            score: h.score,
            source: match &job.source {
                Some(f) => f.apply(&s.doc(h.doc)?),
                None => None,
            },
            sort: r.sort.as_ref().map(|v| v[i].clone()),
            highlight: match (&plan, &job.highlight) {
                (Some(p), Some(spec)) => Some(s.highlight(p, h.doc, spec.max_bytes)?),
                _ => None,
            },
        });
    }
    Ok(Answer {
        count: r.count,
        hits,
        cache: outcome,
        aggregations: r.aggregations,
        took_ms: 0,
    })
}

impl AppState {
    /// Runs `job` over index `ix` on a worker and waits for it (up to its
    /// timeout).
    pub async fn search(self: &Arc<Self>, ix: &Arc<IndexHandle>, job: SearchJob) -> Result<Answer, ApiError> {
        let ix2 = ix.clone();
        let (timeout, text) = (job.timeout, job.text.clone());
        let answer = self
            .on_worker(timeout, text.clone(), move |thread, deadline| {
                run_job(&ix2, thread, &job, deadline)
            })
            .await?;
        self.slow_log(ix.name(), answer.took_ms, &text);
        Ok(answer)
    }

    /// Logs a search over the slow-query threshold.
    fn slow_log(&self, index: &str, took_ms: u64, query: &str) {
        if self.config.slow_query.is_some_and(|t| took_ms as u128 >= t.as_millis()) {
            tracing::warn!(target: "tierdex::slowlog", index, took_ms, query, "slow search");
        }
    }

    /// Runs `job` on a worker over the kept snapshot `snapshot` (a scroll
    /// or point in time), without the result cache.
    pub async fn search_snapshot(
        self: &Arc<Self>,
        snapshot: Arc<tierdex::search::Searcher>,
        job: SearchJob,
    ) -> Result<Answer, ApiError> {
        let (timeout, text) = (job.timeout, job.text.clone());
        self.on_worker(timeout, text, move |thread, deadline| {
            run_on(&snapshot, None, thread, &job, deadline)
        })
        .await
    }

    /// Runs one search over several indices (each with the query
    /// translated against its own mapping) on a worker, scored with their
    /// summed statistics ([`tierdex::query::global`]), and waits for it.
    pub async fn search_many(
        self: &Arc<Self>,
        targets: Vec<(Arc<IndexHandle>, SearchJob)>,
    ) -> Result<Answer, ApiError> {
        let Some((_, first)) = targets.first() else {
            return Err(ApiError::bad_request("no index to search"));
        };
        let (timeout, text) = (first.timeout, first.text.clone());
        let names: Vec<String> = targets.iter().map(|(ix, _)| ix.name().to_string()).collect();
        let answer = self
            .on_worker(timeout, text.clone(), move |_, deadline| run_many(&targets, deadline))
            .await?;
        self.slow_log(&names.join(","), answer.took_ms, &text);
        Ok(answer)
    }

    /// Runs `work` on a query worker with a deadline `timeout` from now,
    /// and waits for its answer (503 when the queue is full, 504 past the
    /// deadline).
    async fn on_worker(
        self: &Arc<Self>,
        timeout: Duration,
        text: String,
        work: impl FnOnce(usize, Instant) -> tierdex::Result<Answer> + Send + 'static,
    ) -> Result<Answer, ApiError> {
        let started = Instant::now();
        let deadline = started
            .checked_add(timeout)
            .ok_or_else(|| ApiError::bad_request(format!("[timeout] {} ms is too long", timeout.as_millis())))?;
        let rx = self
            .pool
            .submit(move |thread| work(thread, deadline))
            .map_err(|Overloaded| {
                self.metrics.rejected();
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    "every query worker is busy and the queue is full; retry later",
                )
            })?;
        let timed_out = || {
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("no answer within {} ms: the search was stopped", timeout.as_millis()),
            )
        };
        // The engine stops at the deadline; the margin covers a worker that
        // is between two readings of the clock.
        let answer = match tokio::time::timeout(timeout.saturating_add(Duration::from_millis(250)), rx).await {
            Err(_) | Ok(Ok(Err(tierdex::Error::TimedOut(_)))) => return Err(timed_out()),
            Ok(Err(_)) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    "the query worker stopped",
                ))
            }
            Ok(Ok(r)) => r.map_err(|e| ApiError::from_engine(&text, e))?,
        };
        Ok(Answer {
            took_ms: started.elapsed().as_millis() as u64,
            ..answer
        })
    }

    /// The indices the server holds.
    pub fn indices(&self) -> &Indices {
        &self.indices
    }

    /// The index of the native routes (`/search`, `/docs`, ...): the
    /// served index directory; a data directory has none (its indices are
    /// reached by name).
    pub fn default_index(&self) -> Result<Arc<IndexHandle>, ApiError> {
        if self.indices.is_data_dir() {
            return Err(ApiError::bad_request(
                "this server holds many indices: name one, e.g. /{index}/_search, /{index}/_doc",
            ));
        }
        self.indices
            .only()
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "index_not_found_exception", "no index"))
    }

    /// The served index's writer (none when read-only or with a data
    /// directory).
    pub fn writer(&self) -> Option<Arc<IndexWriter>> {
        self.default_index().ok().and_then(|ix| ix.writer().cloned())
    }

    /// Applies `ops` to index `ix` (durable when this returns `Ok`), then
    /// refreshes if asked. Once the batch is applied the write succeeds: a
    /// refresh that fails then is reported in [`Written::refresh`], not as
    /// an error.
    pub async fn write(self: &Arc<Self>, ix: &IndexHandle, ops: Vec<Op>, refresh: bool) -> Result<Written, ApiError> {
        let Some(w) = ix.writer().cloned() else {
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "read_only",
                "this server was started read-only",
            ));
        };
        let _permit = self.writes.try_acquire().map_err(|_| {
            self.metrics.rejected();
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "too many writes in progress; retry later",
            )
        })?;
        let writer = w.clone();
        let applied = match tokio::task::spawn_blocking(move || writer.apply(ops)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(ApiError::engine(e)),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    e.to_string(),
                ))
            }
        };
        self.metrics.updated(applied.added, applied.deleted);
        let refresh = if refresh {
            let r = match tokio::task::spawn_blocking(move || w.refresh().map(|_| ())).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(e) => Err(format!("the refresh stopped: {e}")),
            };
            if let Err(e) = &r {
                tracing::error!("refresh after an acknowledged write (seq {}) failed: {e}", applied.seq);
            }
            Some(r)
        } else {
            None
        };
        Ok(Written { applied, refresh })
    }

    /// Makes every acknowledged update of index `ix` searchable now.
    pub async fn refresh(self: &Arc<Self>, ix: &IndexHandle) -> Result<(), ApiError> {
        let Some(w) = ix.writer().cloned() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || w.refresh().map(|_| ()))
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
            .map_err(ApiError::engine)
    }

    /// Flushes every writer's buffer to segments (on shutdown).
    pub fn flush(&self) -> tierdex::Result<()> {
        for ix in self.indices.list() {
            if let Some(w) = ix.writer() {
                w.flush()?;
            }
        }
        Ok(())
    }

    /// The server's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}

/// What an acknowledged write did.
#[derive(Debug, Clone)]
pub struct Written {
    /// The batch, durable.
    pub applied: Applied,
    /// Whether the refresh asked for happened (`None`: none asked; the
    /// error when it failed).
    pub refresh: Option<Result<(), String>>,
}

impl Written {
    /// Adds `forced_refresh` (and `refresh_error` when it failed) to an
    /// answer, when a refresh was asked.
    pub fn annotate(&self, v: &mut serde_json::Value) {
        if let Some(r) = &self.refresh {
            v["forced_refresh"] = r.is_ok().into();
            if let Err(e) = r {
                v["refresh_error"] = format!("the write is durable but not yet searchable: {e}").into();
            }
        }
    }
}

/// Opens the index, or the indices of the data directory (with writers
/// unless read-only), and starts the workers.
pub fn state(config: ServerConfig) -> tierdex::Result<Arc<AppState>> {
    config.check()?;
    let indices = match &config.data {
        Some(data) => Indices::open_data(&config, data)?,
        None => Indices::single(&config)?,
    };
    let snapshots = snapshots::Snapshots::open(config.data.as_deref().unwrap_or(&config.dir))?;
    Ok(Arc::new(AppState {
        indices,
        contexts: scroll::Contexts::default(),
        snapshots,
        writes: tokio::sync::Semaphore::new(config.max_writes.max(1)),
        pool: Pool::new(config.threads.max(1), config.queue.max(1)),
        metrics: Metrics::default(),
        config,
    }))
}

/// `router` with what every Elasticsearch-facing service of tierdex answers
/// with (the cluster broker's; a server's [`router`] layers the same around
/// its metrics): writes only as JSON, queries only in UTF-8,
/// authentication and CORS as `guard` says, every error as JSON, and the
/// product header the official clients check.
pub fn guarded(router: Router, guard: Arc<security::Guard>) -> Router {
    router
        .layer(axum::middleware::from_fn(security::json_writes))
        .layer(axum::middleware::from_fn(utf8_query))
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            security::guard_auth,
        ))
        .layer(axum::middleware::from_fn_with_state(guard, security::guard_cors))
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::map_response(product_header))
}

/// Marks every answer with the product header the official Elasticsearch
/// clients check before they accept one (`X-Elastic-Product:
/// Elasticsearch`): the API this server speaks is Elasticsearch's subset
/// documented in the README, answered by tierdex (`GET /` says which).
async fn product_header(mut resp: Response) -> Response {
    resp.headers_mut().insert(
        axum::http::HeaderName::from_static("x-elastic-product"),
        axum::http::HeaderValue::from_static("Elasticsearch"),
    );
    resp
}

/// Makes every error answer JSON in Elasticsearch's shape: the framework's
/// own rejections (a body over the limit, a method a route does not take,
/// a malformed request) arrive as plain text or empty, and are rewritten
/// with their text as the reason.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if status.as_u16() < 400 || json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let reason = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let kind = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "content_too_long",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_client_error() => "bad_request",
        _ => "internal_error",
    };
    let mut out = ApiError::new(status, kind, reason).into_response();
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// True when `query` percent-decodes to UTF-8 (axum's extractors replace
/// invalid sequences with U+FFFD, which would search something else).
fn query_is_utf8(query: &str) -> bool {
    let b = query.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::str::from_utf8(&out).is_ok()
}

/// Middleware: a query string that is not UTF-8 is a 400.
async fn utf8_query(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if req.uri().query().is_some_and(|q| !query_is_utf8(q)) {
        return ApiError::bad_request("the query string is not valid UTF-8 once percent-decoded").into_response();
    }
    next.run(req).await
}

/// Every route of the server.
pub fn router(state: Arc<AppState>) -> Router {
    let limit = state.config.max_body_bytes;
    Router::new()
        .route("/", get(info).head(|| async { StatusCode::OK }))
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/metrics", get(prometheus))
        .route("/search", get(search_get).post(search_post))
        .route("/{index}/_search", get(es::search).post(es::search))
        .route("/_search", get(es::search_all).post(es::search_all))
        .route(
            "/_search/scroll",
            get(scroll::next_page).post(scroll::next_page).delete(scroll::clear),
        )
        .route(
            "/_search/scroll/{id}",
            get(scroll::next_page).post(scroll::next_page).delete(scroll::clear),
        )
        .route("/{index}/_pit", post(scroll::open_pit))
        .route("/_pit", axum::routing::delete(scroll::close_pit))
        .route("/{index}/_count", get(es::count).post(es::count))
        .route("/docs", post(add_docs))
        .route("/docs/{id}", axum::routing::delete(delete_doc))
        .route("/refresh", post(refresh))
        .route("/flush", post(flush))
        .route(
            "/{index}",
            get(es::get_index)
                .put(es::create_index)
                .delete(es::delete_index)
                .head(es::index_exists),
        )
        .route("/{index}/_settings", get(es::get_settings))
        .route("/_cat/indices", get(admin::cat_indices))
        .route("/_cat/indices/{index}", get(admin::cat_indices_of))
        .route("/_cat/health", get(admin::cat_health))
        .route("/_cat/aliases", get(admin::cat_aliases))
        .route("/_cluster/health", get(admin::cluster_health))
        .route("/_cluster/health/{index}", get(admin::cluster_health_of))
        .route("/_aliases", get(admin::get_aliases).post(admin::update_aliases))
        .route("/_alias", get(admin::get_aliases))
        .route("/_alias/{name}", get(admin::get_alias))
        .route("/{index}/_alias", get(admin::get_index_aliases))
        .route("/{index}/_aliases", get(admin::get_index_aliases))
        .route(
            "/{index}/_alias/{name}",
            get(admin::get_alias_of)
                .put(admin::put_alias)
                .post(admin::put_alias)
                .delete(admin::delete_alias),
        )
        .route(
            "/{index}/_mapping",
            get(es::get_mapping).put(es::update_mapping).post(es::update_mapping),
        )
        .route("/_mget", get(es::mget).post(es::mget))
        .route("/{index}/_mget", get(es::mget).post(es::mget))
        .route("/_forcemerge", post(es::forcemerge))
        .route("/{index}/_forcemerge", post(es::forcemerge))
        .route("/{index}/_doc", post(es::index_doc))
        .route(
            "/{index}/_doc/{id}",
            axum::routing::put(es::index_doc_id)
                .post(es::index_doc_id)
                .delete(es::delete_doc)
                .get(es::get_doc)
                .head(es::get_doc),
        )
        .route("/{index}/_update/{id}", post(es::update_doc))
        .route("/{index}/_create/{id}", post(es::create_doc).put(es::create_doc))
        .route("/{index}/_delete_by_query", post(es::delete_by_query))
        .route("/_bulk", post(es::bulk_all).put(es::bulk_all))
        .route("/{index}/_bulk", post(es::bulk).put(es::bulk))
        .route("/{index}/_refresh", get(es::refresh).post(es::refresh))
        .route("/_snapshot", get(snapshots::get_repositories_all))
        .route(
            "/_snapshot/{repo}",
            get(snapshots::get_repositories)
                .put(snapshots::put_repository)
                .post(snapshots::put_repository)
                .delete(snapshots::delete_repository),
        )
        .route(
            "/_snapshot/{repo}/{snapshot}",
            get(snapshots::get_snapshots)
                .put(snapshots::create_snapshot)
                .post(snapshots::create_snapshot)
                .delete(snapshots::delete_snapshot),
        )
        .route("/_snapshot/{repo}/{snapshot}/_restore", post(snapshots::restore))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(security::json_writes))
        .layer(axum::middleware::from_fn(utf8_query))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), security::cors))
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::map_response(product_header))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Serves on `addr` until `shutdown` resolves (SIGTERM or SIGINT with
/// [`termination`]); returns the bound address through `bound` as soon as
/// it listens. A non-loopback `addr` without authentication is refused
/// unless the configuration says `insecure`.
pub async fn serve(
    state: Arc<AppState>,
    addr: SocketAddr,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    check_exposure(addr, &state.config)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    bound(listener.local_addr()?);
    // Refreshes and flushes run on the writer's own low-priority thread for
    // as long as the server runs.
    state
        .indices
        .maintain(state.config.refresh_interval.max(Duration::from_millis(10)));
    let served = conn::serve(listener, router(state.clone()), &state.config, shutdown).await;
    state.indices.stop_maintenance();
    served
}

/// Refuses to serve on a non-loopback `addr` without authentication,
/// unless `config.insecure` says so (then warns).
pub fn check_exposure(addr: SocketAddr, config: &ServerConfig) -> std::io::Result<()> {
    if addr.ip().is_loopback() || config.auth.is_some() {
        return Ok(());
    }
    if !config.insecure {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "refusing to listen on {addr}, which is not a loopback address, without authentication: \
                 give an authentication file (tierdex serve --auth FILE), or say that anyone who can reach \
                 {addr} may read and change the index (--insecure)"
            ),
        ));
    }
    tracing::warn!("listening on {addr}, which is not a loopback address, without authentication (--insecure)");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
pub async fn termination() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// `GET /`: who answers, as Elasticsearch-style clients expect.
/// The Elasticsearch API level `GET /` reports in `version.number` (the
/// clients of its major version accept it); tierdex's own version is
/// `version.tierdex`.
pub const ES_API_VERSION: &str = "8.17.0";

async fn info(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "name": "tierdex",
        "cluster_name": state.config.index_name,
        "cluster_uuid": "_na_",
        "version": {
            "number": ES_API_VERSION,
            "distribution": "tierdex",
            "tierdex": env!("CARGO_PKG_VERSION"),
            "build_flavor": "default",
            "build_type": "tierdex",
            "build_hash": "unknown",
            "build_date": "unknown",
            "build_snapshot": false,
            "lucene_version": "none",
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
        },
        "tagline": "tierdex: read as needed",
    }))
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// One index's part of `/stats`.
fn index_stats(ix: &IndexHandle) -> serde_json::Value {
    let snapshot = ix.searcher();
    let index = snapshot.index();
    let mut v = serde_json::json!({
        "name": ix.name(),
        "docs": index.live_docs(),
        "deleted_docs": index.num_docs() - index.live_docs(),
        "segments": index.segments().len(),
        "layout": index.manifest().layout.to_string(),
        "codec": index.manifest().codec.to_string(),
        "bytes": index.manifest().segments.iter().map(|s| s.bytes()).sum::<u64>(),
        "tier": format!("{:?}", index.storage().options()),
    });
    if let Some(p) = index.storage().pool_stats() {
        v["pool"] = serde_json::json!({ "hits": p.hits, "misses": p.misses, "evictions": p.evictions, "resident_pages": p.resident_pages });
    }
    if let Some(c) = ix.cache() {
        v["cache"] = serde_json::to_value(c.stats()).expect("serialisable");
    }
    if let Some(w) = ix.writer() {
        v["writer"] = serde_json::to_value(w.stats()).expect("serialisable");
        v["writer"]["strategy"] = w.strategy().name().into();
    }
    v
}

/// `GET /stats`: the requests, and each index (the served one also as
/// `index`, with its `tier`, `pool`, `cache` and `writer` at the top).
async fn stats(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let mut v = serde_json::json!({
        "workers": state.config.threads,
        "requests": state.metrics.snapshot(),
        "indices": state.indices.list().iter().map(|ix| (ix.name().to_string(), index_stats(ix))).collect::<serde_json::Map<_, _>>(),
    });
    if let Ok(ix) = state.default_index() {
        let mut one = index_stats(&ix);
        for key in ["tier", "pool", "cache", "writer"] {
            if let Some(x) = one.as_object_mut().and_then(|o| o.remove(key)) {
                v[key] = x;
            }
        }
        v["index"] = one;
    }
    Json(v)
}

/// URI parameters of write requests; any other is a 400 naming it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// Refresh before answering: present (empty), `true` or `wait_for`;
    /// `false` (the default) does not.
    #[serde(default)]
    pub refresh: Option<String>,
    /// `create`: fail (409) when the id exists; `index` (the default)
    /// adds or replaces.
    #[serde(default)]
    pub op_type: Option<String>,
    /// Accepted and checked (a time value): a write is answered once it
    /// is durable, which does not wait for other nodes.
    #[serde(default)]
    pub timeout: Option<String>,
}

impl WriteParams {
    /// True when the request asks for a refresh.
    pub fn wants_refresh(&self) -> bool {
        matches!(self.refresh.as_deref(), Some("" | "true" | "wait_for"))
    }

    /// A 400 naming a value this server does not know.
    pub fn check(&self) -> Result<(), ApiError> {
        if let Some(r) = self.refresh.as_deref() {
            if !matches!(r, "" | "true" | "false" | "wait_for") {
                return Err(ApiError::bad_request(format!(
                    "[refresh] must be true, false or wait_for, not {r}"
                )));
            }
        }
        if let Some(o) = self.op_type.as_deref() {
            if !matches!(o, "index" | "create") {
                return Err(ApiError::bad_request(format!(
                    "[op_type] must be index or create, not {o}"
                )));
            }
        }
        if let Some(t) = &self.timeout {
            es::parse_time("timeout", t)?;
        }
        Ok(())
    }

    /// Whether the write must not replace an existing document.
    pub fn create_only(&self) -> bool {
        self.op_type.as_deref() == Some("create")
    }
}

/// Documents of a `POST /docs` body: a JSON array of `{"id", field: text...}`
/// objects, or one such object per line.
pub fn parse_docs(body: &[u8]) -> Result<Vec<tierdex::Document>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("body is not UTF-8"))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str(trimmed).map_err(|e| ApiError::bad_request(format!("bad document array: {e}")));
    }
    let mut docs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let d: tierdex::Document = serde_json::from_str(line)
            .map_err(|e| ApiError::bad_request(format!("line {}: bad document: {e}", i + 1)))?;
        docs.push(d);
    }
    if docs.is_empty() {
        return Err(ApiError::bad_request("no documents in the body"));
    }
    Ok(docs)
}

/// The answer to a native write: what was applied, and the refresh.
fn written_json(w: &Written) -> Json<serde_json::Value> {
    let mut v = serde_json::to_value(w.applied).expect("serialisable");
    w.annotate(&mut v);
    Json(v)
}

async fn add_docs(
    State(state): State<Arc<AppState>>,
    params: Result<UrlQuery<WriteParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    p.check()?;
    if p.create_only() {
        return Err(ApiError::bad_request("[op_type] is not supported on /docs"));
    }
    let ix = state.default_index()?;
    let docs = parse_docs(&body)?;
    let ops = docs.into_iter().map(Op::Add).collect();
    Ok(written_json(&state.write(&ix, ops, p.wants_refresh()).await?))
}

async fn delete_doc(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    params: Result<UrlQuery<WriteParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    p.check()?;
    let ix = state.default_index()?;
    let w = state
        .write(&ix, vec![Op::Delete(id.clone())], p.wants_refresh())
        .await?;
    if w.applied.deleted == 0 {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no document [{id}]"),
        ));
    }
    Ok(written_json(&w))
}

async fn refresh(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    let ix = state.default_index()?;
    state.refresh(&ix).await?;
    Ok(Json(
        serde_json::json!({ "refreshed": true, "docs": ix.searcher().num_docs() }),
    ))
}

async fn flush(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(w) = state.default_index()?.writer().cloned() else {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "read_only",
            "this server was started read-only",
        ));
    };
    let r = tokio::task::spawn_blocking(move || w.flush())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
        .map_err(ApiError::engine)?;
    Ok(Json(serde_json::to_value(r).expect("serialisable")))
}

async fn prometheus(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let cache = state.default_index().ok().and_then(|ix| ix.cache().map(|c| c.stats()));
    let mut text = state.metrics.render(cache.as_ref());
    text += &index_gauges(&state);
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// Prometheus gauges of each index (documents, deleted documents,
/// segments, bytes) and of the open scrolls and points in time.
fn index_gauges(state: &AppState) -> String {
    use std::fmt::Write;
    let list = state.indices.list();
    let rows: Vec<(String, [u64; 4])> = list
        .iter()
        .map(|ix| {
            let s = ix.searcher();
            let index = s.index();
            let name = ix.name().replace('\\', "\\\\").replace('"', "\\\"");
            let bytes = index.manifest().segments.iter().map(|s| s.bytes()).sum::<u64>();
            (
                name,
                [
                    index.live_docs(),
                    index.num_docs() - index.live_docs(),
                    index.segments().len() as u64,
                    bytes,
                ],
            )
        })
        .collect();
    let mut out = String::new();
    for (i, (metric, help)) in [
        (
            "tierdex_index_docs",
            "Live documents of each index (as of its last refresh).",
        ),
        (
            "tierdex_index_deleted_docs",
            "Deleted documents still held in each index's segments.",
        ),
        ("tierdex_index_segments", "Segments of each index."),
        ("tierdex_index_bytes", "Bytes of each index's segment files."),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for (name, values) in &rows {
            let _ = writeln!(out, "{metric}{{index=\"{name}\"}} {}", values[i]);
        }
    }
    let _ = writeln!(
        out,
        "# HELP tierdex_search_contexts Open scrolls and points in time.\n# TYPE tierdex_search_contexts gauge\ntierdex_search_contexts {}",
        state.contexts.open_count()
    );
    out += &process_gauges();
    out
}

/// Prometheus gauges of the process (Prometheus's standard names): open
/// file descriptors and their limit, resident and virtual memory.
fn process_gauges() -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).ok();
    let limit = {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct we own.
        (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0).then_some(l.rlim_cur)
    };
    // statm: sizes in pages (virtual, resident, ...).
    let statm = std::fs::read_to_string("/proc/self/statm").ok();
    let pages: Vec<u64> = statm
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let gauges: [(&str, &str, Option<u64>); 4] = [
        ("process_open_fds", "Open file descriptors.", fds.map(|n| n as u64)),
        ("process_max_fds", "Limit of open file descriptors.", limit),
        (
            "process_resident_memory_bytes",
            "Resident memory in bytes.",
            pages.get(1).map(|p| p * page),
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory in bytes.",
            pages.first().map(|p| p * page),
        ),
    ];
    for (metric, help, value) in gauges {
        if let Some(v) = value {
            let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge\n{metric} {v}");
        }
    }
    out
}

/// Parameters of `/search`.
#[derive(Debug, Deserialize)]
pub struct SearchParams {
    /// Query text (tierdex syntax).
    #[serde(alias = "query")]
    pub q: String,
    /// `top_k` (default), `top_k_and_count` or `count`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Hits (default 10, at most 10,000).
    #[serde(default)]
    pub k: Option<usize>,
    /// Highlight hits.
    #[serde(default)]
    pub highlight: Option<bool>,
    /// Longest wait in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// Most hits one request may ask for.
pub const MAX_K: usize = 10_000;

fn search_job(state: &AppState, ix: &IndexHandle, p: &SearchParams) -> Result<SearchJob, ApiError> {
    let mode: Mode = match &p.mode {
        Some(m) => m
            .parse()
            .map_err(|e: tierdex::Error| ApiError::bad_request(e.to_string()))?,
        None => Mode::TopK,
    };
    let k = p.k.unwrap_or(10);
    if k > MAX_K {
        return Err(ApiError::bad_request(format!("k = {k} is above the limit of {MAX_K}")));
    }
    let query = ix.searcher().parse(&p.q).map_err(|e| ApiError::from_engine(&p.q, e))?;
    Ok(SearchJob {
        text: p.q.clone(),
        query,
        mode,
        k,
        source: None,
        from: 0,
        sort: Vec::new(),
        search_after: None,
        highlight: p
            .highlight
            .unwrap_or(false)
            .then(|| tierdex::query::dsl::HighlightSpec {
                max_bytes: 200,
                ..Default::default()
            }),
        timeout: match p.timeout {
            Some(ms) => state
                .config
                .check_timeout(Duration::from_millis(ms), &format!("{ms} ms"))?,
            None => state.config.default_timeout,
        },
        aggs: None,
    })
}

async fn search_get(
    State(state): State<Arc<AppState>>,
    params: Result<UrlQuery<SearchParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Answer>, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ix = state.default_index()?;
    let job = search_job(&state, &ix, &p)?;
    Ok(Json(state.search(&ix, job).await?))
}

async fn search_post(
    State(state): State<Arc<AppState>>,
    body: Result<Json<SearchParams>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Answer>, ApiError> {
    let Json(p) = body.map_err(json_rejection)?;
    let ix = state.default_index()?;
    let job = search_job(&state, &ix, &p)?;
    Ok(Json(state.search(&ix, job).await?))
}

/// A 400 (or 413 for an oversized body) from a body that is not the JSON expected.
pub fn json_rejection(e: axum::extract::rejection::JsonRejection) -> ApiError {
    let status = e.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(status, "payload_too_large", e.body_text())
    } else {
        ApiError::bad_request(e.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_are_answered_by_whose_fault_they_are() {
        let status = |e: tierdex::Error| ApiError::engine(e).status.as_u16();
        assert_eq!(status(tierdex::Error::InvalidArgument("x".into())), 400);
        assert_eq!(status(tierdex::Error::NotFound("x".into())), 404);
        assert_eq!(status(tierdex::Error::Conflict("x".into())), 409);
        assert_eq!(status(tierdex::Error::Unavailable("x".into())), 503);
        assert_eq!(status(tierdex::Error::TimedOut(5)), 504);
        assert_eq!(status(tierdex::Error::Internal("x".into())), 500);
        assert_eq!(status(tierdex::Error::corrupt("f", "x")), 500);
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(status(tierdex::Error::io("f", full)), 507);
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(status(tierdex::Error::io("f", denied)), 500);
        let body = ApiError::engine(tierdex::Error::Conflict("busy".into())).body;
        assert_eq!(body["error"]["type"], "conflict");
        assert_eq!(body["status"], 409);
    }
}
