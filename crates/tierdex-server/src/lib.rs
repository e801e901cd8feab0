//! tierdex over HTTP/JSON (DESIGN §7): search, stats, health and Prometheus
//! metrics, plus the search side of an Elasticsearch-compatible API.
//!
//! Query evaluation runs on a dedicated pool of worker threads fed by a
//! bounded queue, never on the async executor; when the queue is full the
//! server answers 503 instead of growing memory. Request bodies are limited
//! in size. Errors are JSON with a 4xx status (query syntax errors point at
//! the position). SIGTERM or SIGINT stops accepting connections and lets the
//! requests in flight finish.
//!
//! A request's `timeout` runs from its arrival: a search still queued then is
//! never started, and one running is stopped inside the engine (the
//! collectors read the clock every 1,024 documents), answered 504.
//!
//! Not yet here (issue #8, after the write path of issue #6): adding and
//! deleting documents, and refresh.

pub mod es;
mod metrics;
mod pool;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tierdex::cache::{CacheConfig, ResultCache};
use tierdex::index::OpenOptions;
use tierdex::query::ast;
use tierdex::search::{Mode, SearchResults, Searcher};

pub use metrics::Metrics;
pub use pool::{Overloaded, Pool};

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Index directory.
    pub dir: PathBuf,
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
}

impl ServerConfig {
    /// Defaults for the index in `dir`: 2 workers, a queue of 64, no cache,
    /// 1 MiB bodies, 10 s timeout.
    pub fn new(dir: PathBuf) -> ServerConfig {
        let index_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .filter(|n| !n.is_empty() && !n.starts_with('_'))
            .unwrap_or_else(|| "tierdex".into());
        ServerConfig {
            dir,
            index_name,
            threads: 2,
            queue: 64,
            open: OpenOptions::default(),
            cache: None,
            max_body_bytes: 1 << 20,
            default_timeout: Duration::from_secs(10),
        }
    }
}

/// Everything handlers share.
pub struct AppState {
    searcher: Arc<Searcher>,
    cache: Option<Arc<ResultCache>>,
    pool: Pool,
    metrics: Metrics,
    config: ServerConfig,
}

/// An error answered as JSON.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: serde_json::Value,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> ApiError {
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
            tierdex::Error::InvalidArgument(m) => ApiError::bad_request(m.clone()),
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "engine_error", e.to_string()),
        }
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
    /// Fetch stored documents of the hits.
    pub source: bool,
    /// Highlight the hits (snippet bytes).
    pub highlight: Option<usize>,
    /// Longest wait for the answer.
    pub timeout: Duration,
}

/// One hit of an answer.
#[derive(Debug, Clone, Serialize)]
pub struct HitOut {
    /// External id.
    pub id: String,
    /// BM25 score.
    pub score: f32,
    /// Stored title and body, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<tierdex::Document>,
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
    /// Milliseconds from the request's arrival to its answer.
    pub took_ms: u64,
}

fn run_job(state: &AppState, thread: usize, job: &SearchJob, deadline: Instant) -> tierdex::Result<Answer> {
    let s = &state.searcher;
    let d = Some(deadline);
    let (r, outcome): (SearchResults, _) = match &state.cache {
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
    for h in &r.hits {
        hits.push(HitOut {
            id: s.doc_id(h.doc)?,
            score: h.score,
            source: if job.source { Some(s.doc(h.doc)?) } else { None },
            highlight: match (&plan, job.highlight) {
                (Some(p), Some(bytes)) => Some(s.highlight(p, h.doc, bytes)?),
                _ => None,
            },
        });
    }
    Ok(Answer {
        count: r.count,
        hits,
        cache: outcome,
        took_ms: 0,
    })
}

impl AppState {
    /// Runs `job` on a worker and waits for it (up to its timeout).
    pub async fn search(self: &Arc<Self>, job: SearchJob) -> Result<Answer, ApiError> {
        let started = Instant::now();
        let timeout = job.timeout;
        let deadline = started + timeout;
        let state = self.clone();
        let text = job.text.clone();
        let rx = self
            .pool
            .submit(move |thread| run_job(&state, thread, &job, deadline))
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
        let answer = match tokio::time::timeout(timeout + Duration::from_millis(250), rx).await {
            Err(_) | Ok(Ok(Err(tierdex::Error::TimedOut(_)))) => return Err(timed_out()),
            Ok(Err(_)) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "engine_error",
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

    /// The open index.
    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    /// The server's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}

/// Opens the index and starts the workers.
pub fn state(config: ServerConfig) -> tierdex::Result<Arc<AppState>> {
    let searcher = Arc::new(Searcher::open_with(&config.dir, config.open)?);
    let cache = config.cache.map(ResultCache::new).transpose()?.map(Arc::new);
    Ok(Arc::new(AppState {
        searcher,
        cache,
        pool: Pool::new(config.threads.max(1), config.queue.max(1)),
        metrics: Metrics::default(),
        config,
    }))
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
        .route("/{index}/_count", get(es::count).post(es::count))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Serves on `addr` until SIGTERM or SIGINT; returns the bound address
/// through `bound` as soon as it listens.
pub async fn serve(
    state: Arc<AppState>,
    addr: SocketAddr,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        tracing::warn!("listening on {addr}, which is not a loopback address");
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    bound(listener.local_addr()?);
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
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
async fn info(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "name": "tierdex",
        "cluster_name": state.config.index_name,
        "version": { "distribution": "tierdex", "number": env!("CARGO_PKG_VERSION") },
        "tagline": "tierdex: read as needed",
    }))
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn stats(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let index = state.searcher.index();
    let mut v = serde_json::json!({
        "index": {
            "name": state.config.index_name,
            "dir": state.config.dir,
            "docs": index.num_docs(),
            "segments": index.segments().len(),
            "layout": index.manifest().layout.to_string(),
            "codec": index.manifest().codec.to_string(),
            "bytes": index.manifest().segments.iter().map(|s| s.bytes()).sum::<u64>(),
        },
        "tier": format!("{:?}", index.storage().options()),
        "workers": state.config.threads,
        "requests": state.metrics.snapshot(),
    });
    if let Some(p) = index.storage().pool_stats() {
        v["pool"] = serde_json::json!({ "hits": p.hits, "misses": p.misses, "evictions": p.evictions, "resident_pages": p.resident_pages });
    }
    if let Some(c) = &state.cache {
        v["cache"] = serde_json::to_value(c.stats()).expect("serialisable");
    }
    Json(v)
}

async fn prometheus(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let cache = state.cache.as_ref().map(|c| c.stats());
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(cache.as_ref()),
    )
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

fn search_job(state: &AppState, p: &SearchParams) -> Result<SearchJob, ApiError> {
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
    let query = tierdex::query::parse(&p.q).map_err(|e| ApiError::from_engine(&p.q, e.into()))?;
    Ok(SearchJob {
        text: p.q.clone(),
        query,
        mode,
        k,
        source: false,
        highlight: p.highlight.unwrap_or(false).then_some(200),
        timeout: p
            .timeout
            .map(Duration::from_millis)
            .unwrap_or(state.config.default_timeout),
    })
}

async fn search_get(
    State(state): State<Arc<AppState>>,
    params: Result<UrlQuery<SearchParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Answer>, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let job = search_job(&state, &p)?;
    Ok(Json(state.search(job).await?))
}

async fn search_post(
    State(state): State<Arc<AppState>>,
    body: Result<Json<SearchParams>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Answer>, ApiError> {
    let Json(p) = body.map_err(json_rejection)?;
    let job = search_job(&state, &p)?;
    Ok(Json(state.search(job).await?))
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
