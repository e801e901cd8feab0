//! Scrolls and points in time: a snapshot of one index kept open for a
//! while, so that a client pages through every match of a query (scroll,
//! as `helpers.scan` of the Python clients does) or runs several searches
//! with `search_after` over one unchanging view (point in time), while
//! writes go on.
//!
//! A context lives `keep_alive` after its last use (each use renews it; at
//! most [`MAX_KEEP_ALIVE`]); at most [`MAX_CONTEXTS`] are open at once
//! (beyond, a 429 until some expire or are cleared). A scroll walks its
//! query's matches in its sort order (by score when none is given; `_doc`
//! is index order) with `search_after` from the last hit of each page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tierdex::search::{Mode, Searcher, SortBy, SortField, SortValue};

use crate::es::{parse_time, render, UriParams};
use crate::{ApiError, AppState, IndexHandle, SearchJob};

/// Open contexts at most (Elasticsearch's `search.max_open_scroll_context`).
pub const MAX_CONTEXTS: usize = 500;

/// The longest keep-alive a request may ask for (Elasticsearch's
/// `search.max_keep_alive`).
pub const MAX_KEEP_ALIVE: Duration = Duration::from_secs(24 * 3600);

/// Where a scroll is.
#[derive(Clone)]
struct ScrollState {
    job: SearchJob,
    after: Option<Vec<SortValue>>,
    total: Option<u64>,
}

/// What a context keeps: its index, snapshot and scroll position.
type Kept = (Arc<IndexHandle>, Arc<Searcher>, Option<ScrollState>);

/// A kept snapshot.
struct Context {
    ix: Arc<IndexHandle>,
    snapshot: Arc<Searcher>,
    expires: Instant,
    scroll: Option<ScrollState>,
}

/// The open scrolls and points in time of a server.
#[derive(Default)]
pub struct Contexts {
    map: Mutex<HashMap<String, Context>>,
}

impl Contexts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Context>> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, c| c.expires > now);
        map
    }

    /// Contexts open now (expired ones dropped first).
    pub fn open_count(&self) -> usize {
        self.lock().len()
    }

    fn open(&self, ctx: Context) -> Result<String, ApiError> {
        let mut map = self.lock();
        if map.len() >= MAX_CONTEXTS {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_scroll_contexts",
                format!("{MAX_CONTEXTS} scrolls and points in time are open; clear some or wait for them to expire"),
            ));
        }
        let id = new_id();
        map.insert(id.clone(), ctx);
        Ok(id)
    }

    /// The context `id`, renewed for `keep_alive` (when given).
    fn get(&self, id: &str, keep_alive: Option<Duration>, what: &str) -> Result<Kept, ApiError> {
        let mut map = self.lock();
        let c = map.get_mut(id).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "search_context_missing_exception",
                format!("no {what} [{id}]: it expired, was cleared, or never existed"),
            )
        })?;
        if let Some(k) = keep_alive {
            c.expires = Instant::now() + k;
        }
        Ok((c.ix.clone(), c.snapshot.clone(), c.scroll.clone()))
    }

    fn set_scroll(&self, id: &str, s: ScrollState) {
        if let Some(c) = self.lock().get_mut(id) {
            c.scroll = Some(s);
        }
    }

    /// Closes the contexts `ids` (all with `None`); returns how many were open.
    fn close(&self, ids: Option<&[String]>) -> usize {
        let mut map = self.lock();
        match ids {
            None => {
                let n = map.len();
                map.clear();
                n
            }
            Some(ids) => ids.iter().filter(|id| map.remove(id.as_str()).is_some()).count(),
        }
    }
}

/// A context id: unguessable enough that a client reaches only its own.
fn new_id() -> String {
    use sha2::Digest;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{nanos}-{n}-{}-{:p}", std::process::id(), &n);
    let d = sha2::Sha256::digest(seed.as_bytes());
    d[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// A keep-alive value, checked against [`MAX_KEEP_ALIVE`].
fn keep_alive(what: &str, s: &str) -> Result<Duration, ApiError> {
    let d = parse_time(what, s)?;
    if d > MAX_KEEP_ALIVE || d.is_zero() {
        return Err(ApiError::bad_request(format!(
            "[{what}] {s} must be above 0 and at most 24h"
        )));
    }
    Ok(d)
}

/// Runs one page of a scroll and moves it on.
async fn page(
    state: &Arc<AppState>,
    snapshot: Arc<Searcher>,
    mut st: ScrollState,
) -> Result<(crate::Answer, ScrollState), ApiError> {
    st.job.search_after = st.after.clone();
    st.job.mode = if st.total.is_none() {
        Mode::TopKAndCount
    } else {
        Mode::TopK
    };
    let mut answer = state.search_snapshot(snapshot, st.job.clone()).await?;
    if let Some(c) = answer.count {
        st.total = Some(c);
    }
    answer.count = st.total;
    if let Some(last) = answer.hits.last() {
        st.after = last.sort.clone();
    }
    // Aggregations come with the first page only.
    st.job.aggs = None;
    Ok((answer, st))
}

/// The first page of `job` over `ix` with a new scroll kept `keep` (from
/// `/{index}/_search?scroll=`).
pub async fn first_page(
    state: &Arc<AppState>,
    ix: Arc<IndexHandle>,
    mut job: SearchJob,
    keep: &str,
    uri: &UriParams,
) -> Result<Json<Value>, ApiError> {
    let keep = keep_alive("scroll", keep)?;
    if job.from > 0 || job.search_after.is_some() {
        return Err(ApiError::bad_request(
            "[from] and [search_after] cannot be used with [scroll]: a scroll pages by itself",
        ));
    }
    if job.sort.is_empty() {
        job.sort = vec![SortField::desc(SortBy::Score)];
    }
    let highlight = job.highlight.clone();
    let snapshot = ix.searcher();
    let st = ScrollState {
        job,
        after: None,
        total: None,
    };
    let (answer, st) = page(state, snapshot.clone(), st).await?;
    let name = ix.name().to_string();
    let id = state.contexts.open(Context {
        ix,
        snapshot,
        expires: Instant::now() + keep,
        scroll: Some(st),
    })?;
    let mut out = render(&answer, Some(&name), 1, uri, highlight.as_ref());
    out["_scroll_id"] = id.into();
    Ok(Json(out))
}

/// Body or URI parameters of `/_search/scroll`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrollParams {
    /// Renew the scroll for this long.
    pub scroll: Option<String>,
    /// Which scroll.
    pub scroll_id: Option<String>,
    /// `true`: `hits.total` as a number.
    pub rest_total_hits_as_int: Option<bool>,
}

/// `GET|POST /_search/scroll`: the next page of a scroll (an empty page
/// once every match was returned).
pub async fn next_page(
    State(state): State<Arc<AppState>>,
    id_in_path: Option<Path<String>>,
    uri: Result<UrlQuery<ScrollParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(mut p) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let b: ScrollParams =
            serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("bad scroll request: {e}")))?;
        p.scroll = b.scroll.or(p.scroll);
        p.scroll_id = b.scroll_id.or(p.scroll_id);
        p.rest_total_hits_as_int = b.rest_total_hits_as_int.or(p.rest_total_hits_as_int);
    }
    let id = match (id_in_path, p.scroll_id) {
        (Some(Path(id)), _) | (None, Some(id)) => id,
        (None, None) => return Err(ApiError::bad_request("[scroll_id] is missing")),
    };
    let keep = p.scroll.as_deref().map(|k| keep_alive("scroll", k)).transpose()?;
    let (ix, snapshot, st) = state.contexts.get(&id, keep, "scroll")?;
    let st = st.ok_or_else(|| ApiError::bad_request(format!("[{id}] is a point in time, not a scroll")))?;
    let (answer, st) = page(&state, snapshot, st).await?;
    let highlight = st.job.highlight.clone();
    state.contexts.set_scroll(&id, st);
    let uri = UriParams {
        rest_total_hits_as_int: p.rest_total_hits_as_int,
        ..Default::default()
    };
    let mut out = render(&answer, Some(ix.name()), 1, &uri, highlight.as_ref());
    out["_scroll_id"] = id.into();
    Ok(Json(out))
}

/// The ids of a clear request: one, or a list.
fn ids(v: &Value, key: &str) -> Result<Vec<String>, ApiError> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::bad_request(format!("[{key}] entries are strings, not {x}")))
            })
            .collect(),
        Some(other) => Err(ApiError::bad_request(format!(
            "[{key}] must be a string or a list, not {other}"
        ))),
        None => Err(ApiError::bad_request(format!("[{key}] is missing"))),
    }
}

/// `DELETE /_search/scroll` (`{"scroll_id": ..}`), `/_search/scroll/{id}`
/// (`_all` for every one).
pub async fn clear(
    State(state): State<Arc<AppState>>,
    id_in_path: Option<Path<String>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let freed = match id_in_path {
        Some(Path(id)) if id == "_all" => state.contexts.close(None),
        Some(Path(id)) => state
            .contexts
            .close(Some(&id.split(',').map(str::to_string).collect::<Vec<_>>())),
        None => {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
            if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "scroll_id")) {
                return Err(ApiError::bad_request(format!("[{k}] is not supported (scroll_id)")));
            }
            state.contexts.close(Some(&ids(&v, "scroll_id")?))
        }
    };
    Ok(Json(json!({ "succeeded": true, "num_freed": freed })))
}

/// URI parameters of `/{index}/_pit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PitParams {
    /// How long the point in time stays open after each use.
    pub keep_alive: Option<String>,
}

/// `POST /{index}/_pit?keep_alive=1m`: keeps the index's current snapshot
/// open; searches name it with `"pit": {"id": ..}` in `/_search`.
pub async fn open_pit(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    uri: Result<UrlQuery<PitParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(p) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let keep = keep_alive(
        "keep_alive",
        p.keep_alive
            .as_deref()
            .ok_or_else(|| ApiError::bad_request("[keep_alive] is missing"))?,
    )?;
    let ix = state.indices().resolve_one(&index)?;
    let snapshot = ix.searcher();
    let id = state.contexts.open(Context {
        ix,
        snapshot,
        expires: Instant::now() + keep,
        scroll: None,
    })?;
    Ok(Json(
        json!({ "id": id, "_shards": { "total": 1, "successful": 1, "skipped": 0, "failed": 0 } }),
    ))
}

/// `DELETE /_pit` (`{"id": ..}`).
pub async fn close_pit(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let v: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "id")) {
        return Err(ApiError::bad_request(format!("[{k}] is not supported (id)")));
    }
    let freed = state.contexts.close(Some(&ids(&v, "id")?));
    Ok(Json(json!({ "succeeded": true, "num_freed": freed })))
}

/// The index and snapshot of a search's `pit` (`{"id", "keep_alive"}`),
/// renewed.
pub fn pit_snapshot(state: &AppState, pit: &Value) -> Result<(String, Arc<IndexHandle>, Arc<Searcher>), ApiError> {
    let o = pit
        .as_object()
        .ok_or_else(|| ApiError::bad_request(format!("[pit] must be an object, not {pit}")))?;
    if let Some(k) = o.keys().find(|k| *k != "id" && *k != "keep_alive") {
        return Err(ApiError::bad_request(format!(
            "[pit] [{k}] is not supported (id, keep_alive)"
        )));
    }
    let id = o
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("[pit] needs an [id]"))?;
    let keep = match o.get("keep_alive") {
        Some(Value::String(k)) => Some(keep_alive("keep_alive", k)?),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "[pit] [keep_alive] must be a string, not {other}"
            )))
        }
        None => None,
    };
    let (ix, snapshot, scroll) = state.contexts.get(id, keep, "point in time")?;
    if scroll.is_some() {
        return Err(ApiError::bad_request(format!(
            "[{id}] is a scroll, not a point in time"
        )));
    }
    Ok((id.to_string(), ix, snapshot))
}
