//! An Elasticsearch-compatible subset.
//!
//! * Search: `/{index}/_search` and `/{index}/_count` with the query DSL of
//!   [`tierdex::query::dsl`] (`query_string`, `match`, `match_phrase`,
//!   `match_all`, `match_none`, `term`, `terms`, `range`, `exists`, `bool`
//!   with `filter`, `constant_score`), `size`, `from` (up to a 10,000-hit
//!   window), `sort`, `search_after`, `track_total_hits`, `highlight` and
//!   `_source` (true, false, patterns, includes/excludes), `aggs` (see
//!   [`tierdex::aggs`]; `size: 0` for the aggregations alone).
//! * Documents: `GET|HEAD /{index}/_doc/{id}` (real time: every
//!   acknowledged write, refreshed or not), `_mget`.
//! * Indices (see [`crate::indices`]): `PUT /{index}` with `mappings`,
//!   `settings` and `aliases` (serving one directory: `mappings` while the
//!   index is empty), `GET|HEAD|DELETE /{index}`, `GET /{index}/_settings`,
//!   `GET /{index}/_mapping`, `PUT /{index}/_mapping` (new fields); a path's
//!   index may be an alias or, where several fit, a comma-separated list or
//!   a `*` pattern. `_cat`, `_cluster/health` and the alias APIs are in
//!   [`crate::admin`].
//! * Writes: `POST /{index}/_doc`, `PUT|POST /{index}/_doc/{id}`, `DELETE
//!   /{index}/_doc/{id}`, `POST /_bulk` and `/{index}/_bulk` (NDJSON
//!   `index`, `create` and `delete` actions), `POST /{index}/_update/{id}`
//!   (`doc` merged into `_source`, `upsert`, `doc_as_upsert`,
//!   `detect_noop`), `POST /{index}/_delete_by_query`, `/{index}/_refresh`,
//!   `_forcemerge`, and `?refresh=true|wait_for` on writes. Documents are
//!   any JSON objects: the mapping (strict, or dynamic) decides what is
//!   indexed; a document that does not fit is a `mapper_parsing_exception`,
//!   never silently cut.
//!
//! Answers have Elasticsearch's shape. Anything else is a 400 naming what is
//! not supported, never a silently different request.

use std::sync::Arc;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tierdex::query::ast::Query;
use tierdex::schema::Schema;
use tierdex::search::Mode;

use tierdex::update::wal::Op;
use tierdex::Document;

use crate::indices::AliasAction;
use crate::{ApiError, AppState, IndexHandle, IndexSettings, SearchJob, WriteParams, Written, MAX_K};

/// URI parameters (`?q=...&size=...`); any other is a 400 naming it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UriParams {
    /// Keep a scroll open this long (`1m`): the answer carries a
    /// `_scroll_id` for `/_search/scroll`.
    pub scroll: Option<String>,
    /// `true`: `hits.total` as a number (Elasticsearch 6's shape, which
    /// some clients ask for).
    pub rest_total_hits_as_int: Option<bool>,
    /// Accepted: answers are JSON either way.
    pub pretty: Option<String>,
    /// Query string (Lucene syntax).
    pub q: Option<String>,
    /// Hits.
    pub size: Option<usize>,
    /// First hit (only 0 is supported).
    pub from: Option<u64>,
    /// Longest wait, Elasticsearch style (`500ms`, `2s`).
    pub timeout: Option<String>,
}

/// Translates an Elasticsearch query object into a query over `schema`'s
/// fields (see [`tierdex::query::dsl`]).
pub fn translate(ix: &IndexHandle, schema: &Schema, v: &Value) -> Result<Query, ApiError> {
    let limits = *ix.searcher().query_limits();
    tierdex::query::dsl::query(schema, &limits, v).map_err(|e| match &e {
        tierdex::Error::Query(_) => {
            let text = v
                .pointer("/query_string/query")
                .and_then(Value::as_str)
                .unwrap_or_default();
            ApiError::from_engine(text, e)
        }
        _ => ApiError::engine(e),
    })
}

/// The one index a request names (an index, an alias of one, or a
/// pattern matching one).
fn one_index(state: &AppState, index: &str) -> Result<Arc<IndexHandle>, ApiError> {
    state.indices().resolve_one(index)
}

/// The index a write to `index` goes to (created on the first write in a
/// data directory).
fn write_index(state: &AppState, index: &str) -> Result<Arc<IndexHandle>, ApiError> {
    state.indices().write_target(index, state.config(), true)
}

/// An Elasticsearch time value (`500ms`, `2s`, `1m`): a whole number and a
/// unit (`nanos`, `micros`, `ms`, `s`, `m`, `h`, `d`), checked against the
/// server's maximum.
fn parse_timeout(state: &AppState, s: &str) -> Result<std::time::Duration, ApiError> {
    let d = parse_time("timeout", s)?;
    state.config().check_timeout(d, &format!("`{s}`"))
}

/// An Elasticsearch time value (`500ms`, `2s`, `1m`) of the parameter
/// `what`.
pub fn parse_time(what: &str, s: &str) -> Result<std::time::Duration, ApiError> {
    use std::time::Duration;
    let bad = |why: &str| {
        ApiError::bad_request(format!(
            "bad [{what}] `{s}`: {why}; expected a whole number and a unit (nanos, micros, ms, s, m, h, d), e.g. \"500ms\" or \"2s\""
        ))
    };
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    if unit.is_empty() {
        return Err(bad("the unit is missing"));
    }
    let n: u64 = num.parse().map_err(|_| bad("not a whole number within range"))?;
    let secs = |per: u64| {
        n.checked_mul(per)
            .map(Duration::from_secs)
            .ok_or_else(|| bad("too long"))
    };
    let d = match unit {
        "nanos" => Duration::from_nanos(n),
        "micros" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => secs(1)?,
        "m" => secs(60)?,
        "h" => secs(3600)?,
        "d" => secs(86_400)?,
        _ => return Err(bad("unknown unit")),
    };
    Ok(d)
}

/// A whole number ≥ 0 from a body field, or a 400 naming the field.
fn body_count(body: &Value, key: &str) -> Result<Option<u64>, ApiError> {
    match body.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a whole number ≥ 0, not {v}"))),
    }
}

/// The query of a request: the body's `query`, or `?q=`, or (neither)
/// every document.
fn request_query(ix: &IndexHandle, body: &Value, uri: &UriParams) -> Result<(Query, String), ApiError> {
    let searcher = ix.searcher();
    match (body.get("query"), &uri.q) {
        (Some(q), _) => Ok((translate(ix, searcher.schema(), q)?, q.to_string())),
        (None, Some(q)) => Ok((searcher.parse(q).map_err(|e| ApiError::from_engine(q, e))?, q.clone())),
        (None, None) => Ok((Query::MatchAll, "*:*".into())),
    }
}

/// A request body as a JSON object (an empty body: `{}`).
pub fn body_value(body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    Ok(v)
}

/// `GET|POST /{index}/_search`.
pub async fn search(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(uri) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let body = body_value(&body)?;
    if body.get("pit").is_some() {
        return Err(ApiError::bad_request(
            "[pit] names its index already: search it with POST /_search",
        ));
    }
    search_in(&state, &index, uri, body).await
}

/// `GET|POST /_search`: every index, or the point in time of `pit`.
pub async fn search_all(
    State(state): State<Arc<AppState>>,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(uri) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let body = body_value(&body)?;
    let Some(pit) = body.get("pit") else {
        return search_in(&state, "_all", uri, body).await;
    };
    check_search_keys(&body)?;
    if uri.scroll.is_some() {
        return Err(ApiError::bad_request("[scroll] cannot be used with [pit]"));
    }
    let (id, ix, snapshot) = crate::scroll::pit_snapshot(&state, pit)?;
    let job = search_job(&state, &ix, &body, &uri)?;
    let highlight = job.highlight.clone();
    let answer = state.search_snapshot(snapshot, job).await?;
    let mut out = render(&answer, Some(ix.name()), 1, &uri, highlight.as_ref());
    out["pit_id"] = id.into();
    Ok(Json(out))
}

/// Refuses a search body key this server does not support.
fn check_search_keys(body: &Value) -> Result<(), ApiError> {
    for key in body.as_object().into_iter().flat_map(|o| o.keys()) {
        if ![
            "pit",
            "query",
            "size",
            "track_total_hits",
            "highlight",
            "_source",
            "timeout",
            "from",
            "sort",
            "search_after",
            "aggs",
            "aggregations",
        ]
        .contains(&key.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "[{key}] is not supported in a search request"
            )));
        }
    }
    Ok(())
}

async fn search_in(state: &Arc<AppState>, index: &str, uri: UriParams, body: Value) -> Result<Json<Value>, ApiError> {
    check_search_keys(&body)?;
    let targets = state.indices().resolve(index)?;
    if let Some(keep) = &uri.scroll {
        if targets.len() != 1 {
            return Err(ApiError::bad_request(format!(
                "[scroll] over several indices is not supported ([{index}] names {})",
                targets.len()
            )));
        }
        let job = search_job(state, &targets[0], &body, &uri)?;
        return crate::scroll::first_page(state, targets[0].clone(), job, keep, &uri).await;
    }
    if targets.len() > 1 {
        if let Some(k) = ["sort", "search_after", "highlight"]
            .iter()
            .find(|k| body.get(**k).is_some())
        {
            return Err(ApiError::bad_request(format!(
                "[{k}] is not supported in a search over several indices ([{index}] names {})",
                targets.len()
            )));
        }
    }
    let mut jobs = Vec::with_capacity(targets.len());
    for ix in &targets {
        jobs.push((ix.clone(), search_job(state, ix, &body, &uri)?));
    }
    // One index only when highlighting (refused above for several).
    let highlight = jobs.first().and_then(|(_, j)| j.highlight.clone());
    let answer = match jobs.len() {
        0 => crate::Answer {
            count: Some(0),
            hits: Vec::new(),
            cache: None,
            aggregations: None,
            took_ms: 0,
        },
        1 => {
            let (ix, job) = jobs.pop().expect("one");
            state.search(&ix, job).await?
        }
        _ => state.search_many(jobs).await?,
    };
    let only = (targets.len() == 1).then(|| targets[0].name().to_string());
    Ok(Json(render(
        &answer,
        only.as_deref(),
        targets.len(),
        &uri,
        highlight.as_ref(),
    )))
}

/// A search answer in Elasticsearch's shape; hits without their own index
/// name are `only`'s.
pub(crate) fn render(
    answer: &crate::Answer,
    only: Option<&str>,
    shards: usize,
    uri: &UriParams,
    highlight: Option<&tierdex::query::dsl::HighlightSpec>,
) -> Value {
    let hits: Vec<Value> = answer
        .hits
        .iter()
        .map(|h| {
            let name = h.index.as_deref().or(only).unwrap_or_default();
            let mut hit = json!({ "_index": name, "_id": h.id, "_score": h.score });
            if let Some(d) = &h.source {
                hit["_source"] = d.clone();
            }
            if let Some(v) = &h.sort {
                hit["sort"] = json!(v);
            }
            if let Some(hl) = &h.highlight {
                hit["highlight"] = highlight.cloned().unwrap_or_default().render(hl);
            }
            hit
        })
        .collect();
    let n = shards.max(1);
    let mut out = json!({
        "took": answer.took_ms,
        "timed_out": false,
        "_shards": { "total": n, "successful": n, "skipped": 0, "failed": 0 },
        "hits": {
            "max_score": answer.hits.first().map(|h| h.score),
            "hits": hits,
        }
    });
    if let Some(c) = answer.count {
        out["hits"]["total"] = match uri.rest_total_hits_as_int {
            Some(true) => json!(c),
            _ => json!({ "value": c, "relation": "eq" }),
        };
    }
    if let Some(a) = &answer.aggregations {
        out["aggregations"] = a.clone();
    }
    out
}

/// The search of a `_search` body over index `ix` (the query, sort and
/// aggregations read against its mapping).
fn search_job(state: &AppState, ix: &IndexHandle, body: &Value, uri: &UriParams) -> Result<SearchJob, ApiError> {
    let from = body_count(body, "from")?.or(uri.from).unwrap_or(0) as usize;
    let (query, text) = request_query(ix, body, uri)?;
    let size = match body_count(body, "size")? {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => uri.size.unwrap_or(10),
    };
    if size > MAX_K {
        return Err(ApiError::bad_request(format!(
            "[size] {size} is above the limit of {MAX_K}"
        )));
    }
    let schema = ix.searcher().schema().clone();
    let sort = match body.get("sort") {
        Some(v) => tierdex::query::dsl::sort(&schema, v).map_err(ApiError::engine)?,
        None => Vec::new(),
    };
    let search_after = match body.get("search_after") {
        Some(v) => Some(tierdex::query::dsl::search_after(v).map_err(ApiError::engine)?),
        None => None,
    };
    let aggs = match body.as_object() {
        Some(o) => {
            let limits = *ix.searcher().query_limits();
            tierdex::aggs::Aggregations::from_body(&schema, &limits, o).map_err(ApiError::engine)?
        }
        None => None,
    };
    // Counts are always exact: a number asks for at least that much.
    let track = match body.get("track_total_hits") {
        None | Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) => false,
        Some(v) if v.is_u64() => true,
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "[track_total_hits] must be true, false or a whole number ≥ 0, not {v}"
            )))
        }
    };
    let source = match body.get("_source") {
        None => Some(tierdex::query::dsl::SourceFilter::default()),
        Some(v) => Some(tierdex::query::dsl::SourceFilter::parse(v).map_err(ApiError::engine)?),
    };
    let mode = match (size, track) {
        (0, _) => Mode::Count,
        (_, true) => Mode::TopKAndCount,
        (_, false) => Mode::TopK,
    };
    let highlight = match body.get("highlight") {
        None => None,
        Some(v) => Some(tierdex::query::dsl::HighlightSpec::parse(&schema, v).map_err(ApiError::engine)?),
    };
    let timeout = match (body.get("timeout"), uri.timeout.as_deref()) {
        (Some(Value::String(t)), _) => parse_timeout(state, t)?,
        (None, Some(t)) => parse_timeout(state, t)?,
        (Some(v), _) => {
            return Err(ApiError::bad_request(format!(
                "[timeout] must be a string with a unit, e.g. \"500ms\" or \"2s\", not {v}"
            )))
        }
        (None, None) => state.config().default_timeout,
    };
    Ok(SearchJob {
        text,
        query,
        mode,
        k: size,
        source,
        from,
        sort,
        search_after,
        highlight,
        timeout,
        aggs,
    })
}

/// `GET|POST /{index}/_count`.
pub async fn count(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(uri) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let body = body_value(&body)?;
    if let Some(k) = body.as_object().and_then(|o| o.keys().find(|k| *k != "query")) {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in a count request"
        )));
    }
    // Over several indices, the counts add up.
    let targets = state.indices().resolve(&index)?;
    let mut total = 0;
    for ix in &targets {
        let (query, text) = request_query(ix, &body, &uri)?;
        let answer = state
            .search(
                ix,
                SearchJob {
                    text,
                    query,
                    mode: Mode::Count,
                    k: 0,
                    source: None,
                    from: 0,
                    sort: Vec::new(),
                    search_after: None,
                    highlight: None,
                    timeout: state.config().default_timeout,
                    aggs: None,
                },
            )
            .await?;
        total += answer.count.unwrap_or(0);
    }
    let n = targets.len().max(1);
    Ok(Json(json!({
        "count": total,
        "_shards": { "total": n, "successful": n, "skipped": 0, "failed": 0 },
    })))
}

type WriteQuery = Result<UrlQuery<WriteParams>, axum::extract::rejection::QueryRejection>;

fn write_params(p: WriteQuery) -> Result<WriteParams, ApiError> {
    let p = p
        .map(|UrlQuery(p)| p)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    p.check()?;
    Ok(p)
}

/// A document from an Elasticsearch `_source`: strings of the schema's
/// text fields.
fn source_doc(schema: &Schema, id: String, v: &Value) -> Result<Document, ApiError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the document must be a JSON object"))?;
    let mut d = Document::new(id);
    for (k, x) in obj {
        if !x.is_null() {
            d.fields.insert(k.clone(), x.clone());
        }
    }
    // The document must fit the mapping as it would grow for it (the
    // writer takes the new fields when it logs the document).
    schema.clone().admit(&d).map_err(|e| mapper_error(e.to_string()))?;
    Ok(d)
}

fn mapper_error(reason: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "mapper_parsing_exception", reason)
}

/// A fresh document id (time and a counter: unique within the process and
/// across restarts).
fn new_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{nanos:x}{n:04x}")
}

fn shards() -> Value {
    json!({ "total": 1, "successful": 1, "failed": 0 })
}

/// `PUT /{index}`: in a data directory, creates the index with its
/// `mappings` (none: dynamic) and `settings` (see [`IndexSettings`]).
/// Serving one directory, the index exists already: acknowledged when it
/// is the served one and still empty (a fresh index), else the
/// Elasticsearch error for an existing index.
pub async fn create_index(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let v = body_value(&body)?;
    let o = v.as_object().expect("an object");
    if let Some(k) = o
        .keys()
        .find(|k| !["mappings", "settings", "aliases"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in an index creation (mappings, settings, aliases)"
        )));
    }
    if state.indices().is_data_dir() {
        let settings = match o.get("settings") {
            Some(s) => IndexSettings::parse(s)?,
            None => IndexSettings::default(),
        };
        let schema = match o.get("mappings") {
            Some(m) => Schema::from_json(&m.to_string()).map_err(|e| mapper_error(format!("index [{index}]: {e}")))?,
            None => Schema::dynamic(),
        };
        let aliases: Vec<String> = match o.get("aliases") {
            None => Vec::new(),
            Some(Value::Object(a)) => {
                if let Some((name, spec)) = a
                    .iter()
                    .find(|(_, spec)| spec.as_object().is_none_or(|m| !m.is_empty()))
                {
                    return Err(ApiError::bad_request(format!(
                        "alias [{name}]: options {spec} are not supported (filter, routing, is_write_index)"
                    )));
                }
                a.keys().cloned().collect()
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "[aliases] must be an object, not {other}"
                )))
            }
        };
        let st = state.clone();
        let name = index.clone();
        blocking(move || {
            st.indices().create(&name, schema, settings, st.config())?;
            if !aliases.is_empty() {
                let actions: Vec<AliasAction> = aliases
                    .into_iter()
                    .map(|alias| AliasAction::Add {
                        index: name.clone(),
                        alias,
                    })
                    .collect();
                st.indices().update_aliases(&actions, st.config())?;
            }
            Ok(())
        })
        .await?;
        return Ok(Json(
            json!({ "acknowledged": true, "shards_acknowledged": true, "index": index }),
        ));
    }
    if o.contains_key("aliases") {
        return Err(ApiError::bad_request(
            "[aliases] need a data directory: start the server with `tierdex serve --data DIR`",
        ));
    }
    let Ok(ix) = one_index(&state, &index) else {
        // Says that this server holds one index, and how to hold many.
        return Err(
            match state
                .indices()
                .create(&index, Schema::dynamic(), IndexSettings::default(), state.config())
            {
                Err(e) => e,
                Ok(_) => ApiError::bad_request(format!("index [{index}] was not expected to be created")),
            },
        );
    };
    if let Some(settings) = o
        .get("settings")
        .filter(|s| s.as_object().is_none_or(|m| !m.is_empty()))
    {
        return Err(ApiError::bad_request(format!(
            "[settings] {settings} are not supported: the served index's settings are chosen when it is created"
        )));
    }
    let live = match ix.writer() {
        Some(w) => w.live_docs(),
        None => 1,
    };
    if live > 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "resource_already_exists_exception",
            format!("index [{index}] already exists"),
        ));
    }
    if let Some(m) = o.get("mappings") {
        put_mapping(&ix, m).await?;
    }
    Ok(Json(
        json!({ "acknowledged": true, "shards_acknowledged": true, "index": index }),
    ))
}

/// `PUT /{index}` with a body: `{"mappings": {..}}` (and no settings)
/// gives the served index its mapping while it holds no document, or adds
/// the mapping's new fields to it.
async fn put_mapping(ix: &IndexHandle, mapping: &Value) -> Result<(), ApiError> {
    let index = ix.name();
    let Some(w) = ix.writer().cloned() else {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "read_only",
            "this server was started read-only",
        ));
    };
    let schema = Schema::from_json(&mapping.to_string()).map_err(|e| mapper_error(format!("index [{index}]: {e}")))?;
    tokio::task::spawn_blocking(move || w.update_mapping(schema))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
        .map_err(|e| match e {
            tierdex::Error::Conflict(m) => ApiError::new(StatusCode::BAD_REQUEST, "illegal_argument_exception", m),
            other => ApiError::engine(other),
        })
}

/// `GET /{index}/_mapping`.
pub async fn get_mapping(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let mut out = Map::new();
    for ix in state.indices().resolve(&index)? {
        out.insert(
            ix.name().to_string(),
            json!({ "mappings": tierdex::schema::mapping::to_mapping(&ix.schema()) }),
        );
    }
    Ok(Json(Value::Object(out)))
}

/// Runs `f` (which blocks: file system, fsync) off the async executor.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
}

/// `DELETE /{index}`: deletes indices (comma-separated names) of a data
/// directory.
pub async fn delete_index(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let st = state.clone();
    blocking(move || st.indices().delete(&index, st.config())).await?;
    Ok(Json(json!({ "acknowledged": true })))
}

/// The aliases of `ix` as Elasticsearch lists them (`{"a": {}}`).
fn aliases_json(state: &AppState, ix: &IndexHandle) -> Value {
    Value::Object(
        state
            .indices()
            .aliases_of(ix.name())
            .into_iter()
            .map(|a| (a, json!({})))
            .collect(),
    )
}

/// `GET /{index}`: aliases, mappings and settings of each index named.
pub async fn get_index(State(state): State<Arc<AppState>>, Path(index): Path<String>) -> Result<Json<Value>, ApiError> {
    let mut out = Map::new();
    for ix in state.indices().resolve(&index)? {
        out.insert(
            ix.name().to_string(),
            json!({
                "aliases": aliases_json(&state, &ix),
                "mappings": tierdex::schema::mapping::to_mapping(&ix.schema()),
                "settings": ix.settings_json(),
            }),
        );
    }
    Ok(Json(Value::Object(out)))
}

/// `GET /{index}/_settings`.
pub async fn get_settings(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let mut out = Map::new();
    for ix in state.indices().resolve(&index)? {
        out.insert(ix.name().to_string(), json!({ "settings": ix.settings_json() }));
    }
    Ok(Json(Value::Object(out)))
}

/// `PUT|POST /{index}/_mapping`: adds fields to the mapping.
pub async fn update_mapping(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let v = body_value(&body)?;
    for ix in state.indices().resolve(&index)? {
        put_mapping(&ix, &v).await?;
    }
    Ok(Json(json!({ "acknowledged": true })))
}

/// `GET|HEAD /{index}/_doc/{id}`: the document with its `_source`, seeing
/// every acknowledged write (refreshed or not), as Elasticsearch's
/// real-time get.
pub async fn get_doc(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    uri: Result<UrlQuery<SourceParams>, axum::extract::rejection::QueryRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let ix = one_index(&state, &index)?;
    let UrlQuery(p) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let filter = p.filter()?;
    let (status, v) = fetch(&ix, &id, &filter).await?;
    Ok((status, Json(v)))
}

/// `_source` URI parameters of a get.
#[derive(Debug, Default, Deserialize)]
pub struct SourceParams {
    /// `true`, `false`, or comma-separated patterns.
    #[serde(rename = "_source")]
    pub source: Option<String>,
    /// Comma-separated patterns kept.
    #[serde(rename = "_source_includes")]
    pub includes: Option<String>,
    /// Comma-separated patterns left out.
    #[serde(rename = "_source_excludes")]
    pub excludes: Option<String>,
}

impl SourceParams {
    fn filter(&self) -> Result<tierdex::query::dsl::SourceFilter, ApiError> {
        let list = |s: &Option<String>| -> Vec<String> {
            s.iter()
                .flat_map(|x| x.split(','))
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        };
        let mut f = match self.source.as_deref() {
            None | Some("true") => tierdex::query::dsl::SourceFilter::default(),
            Some("false") => tierdex::query::dsl::SourceFilter {
                disabled: true,
                ..Default::default()
            },
            Some(_) => tierdex::query::dsl::SourceFilter {
                includes: list(&self.source),
                ..Default::default()
            },
        };
        f.includes.extend(list(&self.includes));
        f.excludes.extend(list(&self.excludes));
        Ok(f)
    }
}

/// The get answer for document `id`: 200 with it, or 404.
async fn fetch(
    ix: &Arc<IndexHandle>,
    id: &str,
    filter: &tierdex::query::dsl::SourceFilter,
) -> Result<(StatusCode, Value), ApiError> {
    let st = ix.clone();
    let key = id.to_string();
    let doc = tokio::task::spawn_blocking(move || match st.writer() {
        Some(w) => w.get(&key),
        None => st.searcher().get(&key),
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
    .map_err(ApiError::engine)?;
    let name = ix.name();
    Ok(match doc {
        Some(d) => {
            let mut v =
                json!({ "_index": name, "_id": id, "_version": 1, "_seq_no": 0, "_primary_term": 1, "found": true });
            if let Some(src) = filter.apply(&d) {
                v["_source"] = src;
            }
            (StatusCode::OK, v)
        }
        None => (
            StatusCode::NOT_FOUND,
            json!({ "_index": name, "_id": id, "found": false }),
        ),
    })
}

/// `GET|POST /_mget` and `/{index}/_mget`: `{"docs": [{"_id": .., "_index": ..,
/// "_source": ..}]}` or (with an index) `{"ids": [..]}`.
pub async fn mget(
    State(state): State<Arc<AppState>>,
    index: Option<Path<String>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let path_index = match &index {
        Some(Path(i)) => Some(one_index(&state, i)?),
        None => None,
    };
    let v = body_value(&body)?;
    let o = v.as_object().expect("an object");
    if let Some(k) = o.keys().find(|k| *k != "docs" && *k != "ids") {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in _mget (docs, ids)"
        )));
    }
    let mut wanted: Vec<(Arc<IndexHandle>, String, tierdex::query::dsl::SourceFilter)> = Vec::new();
    if let Some(ids) = o.get("ids") {
        let Some(ix) = &path_index else {
            return Err(ApiError::bad_request(
                "[ids] needs an index in the path: /{index}/_mget",
            ));
        };
        let list = ids
            .as_array()
            .ok_or_else(|| ApiError::bad_request("[ids] must be a list"))?;
        for id in list {
            let id = match id {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(ApiError::bad_request(format!("[ids] entries are ids, not {other}"))),
            };
            wanted.push((ix.clone(), id, Default::default()));
        }
    }
    if let Some(docs) = o.get("docs") {
        let list = docs
            .as_array()
            .ok_or_else(|| ApiError::bad_request("[docs] must be a list"))?;
        for d in list {
            let d = d
                .as_object()
                .ok_or_else(|| ApiError::bad_request("[docs] entries are objects"))?;
            if let Some(k) = d.keys().find(|k| !["_id", "_index", "_source"].contains(&k.as_str())) {
                return Err(ApiError::bad_request(format!(
                    "[docs] entry key [{k}] is not supported"
                )));
            }
            let id = match d.get("_id") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return Err(ApiError::bad_request("[docs] entries need an `_id`")),
            };
            let ix = match (d.get("_index"), &path_index) {
                (Some(Value::String(i)), _) => one_index(&state, i)?,
                (Some(other), _) => {
                    return Err(ApiError::bad_request(format!("[_index] must be a string, not {other}")))
                }
                (None, Some(ix)) => ix.clone(),
                (None, None) => return Err(ApiError::bad_request(format!("[docs] entry [{id}] names no `_index`"))),
            };
            let f = match d.get("_source") {
                Some(s) => tierdex::query::dsl::SourceFilter::parse(s).map_err(ApiError::engine)?,
                None => Default::default(),
            };
            wanted.push((ix, id, f));
        }
    }
    let mut out = Vec::with_capacity(wanted.len());
    for (ix, id, f) in &wanted {
        out.push(fetch(ix, id, f).await?.1);
    }
    Ok(Json(json!({ "docs": out })))
}

/// `POST /_forcemerge` and `/{index}/_forcemerge`: rewrites the segments
/// holding deleted documents without them.
pub async fn forcemerge(
    State(state): State<Arc<AppState>>,
    index: Option<Path<String>>,
) -> Result<Json<Value>, ApiError> {
    let targets = match &index {
        Some(Path(i)) => state.indices().resolve(i)?,
        None => state.indices().list(),
    };
    for ix in targets {
        let Some(w) = ix.writer().cloned() else {
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "read_only",
                "this server was started read-only",
            ));
        };
        blocking(move || w.compact().map_err(ApiError::engine)).await?;
    }
    Ok(Json(json!({ "_shards": shards() })))
}

/// `HEAD /{index}`: 200 when every name is an index or an alias (a
/// pattern must match one), 404 otherwise.
pub async fn index_exists(State(state): State<Arc<AppState>>, Path(index): Path<String>) -> StatusCode {
    match state.indices().resolve(&index) {
        Ok(found) if !found.is_empty() => StatusCode::OK,
        _ => StatusCode::NOT_FOUND,
    }
}

async fn put_doc(
    state: &Arc<AppState>,
    index: &str,
    id: String,
    p: WriteParams,
    body: &[u8],
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    let ix = match state.indices().write_target(index, state.config(), false) {
        Ok(ix) => ix,
        Err(_) => {
            // Perhaps created by this write: off the async executor.
            let st = state.clone();
            let index = index.to_string();
            blocking(move || write_index(&st, &index)).await?
        }
    };
    let doc = source_doc(ix.searcher().schema(), id.clone(), &v)?;
    // A create-only write checks and writes in turn with partial updates.
    let _turn = match p.create_only() {
        true => Some(ix.updates.lock().await),
        false => None,
    };
    if p.create_only() {
        if let Some(w) = ix.writer().cloned() {
            let key = id.clone();
            if blocking(move || Ok(w.contains(&key))).await? {
                let mut e = ApiError::new(
                    StatusCode::CONFLICT,
                    "version_conflict_engine_exception",
                    format!("[{id}]: version conflict, document already exists"),
                );
                e.body["error"]["index"] = ix.name().into();
                return Err(e);
            }
        }
    }
    let w = state.write(&ix, vec![Op::Add(doc)], p.wants_refresh()).await?;
    let (status, result) = if w.applied.replaced > 0 {
        (StatusCode::OK, "updated")
    } else {
        (StatusCode::CREATED, "created")
    };
    Ok(doc_answer(&ix, &id, status, result, &w))
}

/// The answer to a single-document write, in Elasticsearch's shape.
fn doc_answer(ix: &IndexHandle, id: &str, status: StatusCode, result: &str, w: &Written) -> (StatusCode, Json<Value>) {
    let mut v = json!({
        "_index": ix.name(), "_id": id, "_version": 1, "result": result,
        "_shards": shards(), "_seq_no": w.applied.seq, "_primary_term": 1,
    });
    w.annotate(&mut v);
    (status, Json(v))
}

/// `POST /{index}/_doc`: adds a document under a new id.
pub async fn index_doc(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    put_doc(&state, &index, new_id(), write_params(p)?, &body).await
}

/// `PUT|POST /{index}/_doc/{id}`: adds or replaces document `id`.
pub async fn index_doc_id(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if id.is_empty() {
        return Err(ApiError::bad_request("empty document id"));
    }
    put_doc(&state, &index, id, write_params(p)?, &body).await
}

/// `PUT|POST /{index}/_create/{id}`: adds document `id`; a 409 when it
/// exists.
pub async fn create_doc(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if id.is_empty() {
        return Err(ApiError::bad_request("empty document id"));
    }
    let mut p = write_params(p)?;
    p.op_type = Some("create".into());
    put_doc(&state, &index, id, p, &body).await
}

/// `DELETE /{index}/_doc/{id}`.
pub async fn delete_doc(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    p: WriteQuery,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let ix = one_index(&state, &index)?;
    let w = state
        .write(&ix, vec![Op::Delete(id.clone())], write_params(p)?.wants_refresh())
        .await?;
    let (status, result) = if w.applied.deleted > 0 {
        (StatusCode::OK, "deleted")
    } else {
        (StatusCode::NOT_FOUND, "not_found")
    };
    Ok(doc_answer(&ix, &id, status, result, &w))
}

/// Merges `patch` into `base` as Elasticsearch's partial update does:
/// objects key by key, recursively; anything else (arrays too) replaced.
pub fn merge_source(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge_source(existing, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// `POST /{index}/_update/{id}`: merges `doc` into the document's
/// `_source` (real time: the latest acknowledged write, refreshed or not),
/// or creates it from `upsert` (or from `doc` with `doc_as_upsert`) when it
/// does not exist. An unchanged document is a `noop` unless
/// `detect_noop: false`. Partial updates of one index run one at a time.
pub async fn update_doc(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let p = write_params(p)?;
    let v = body_value(&body)?;
    let o = v.as_object().expect("an object");
    if let Some(k) = o
        .keys()
        .find(|k| !["doc", "doc_as_upsert", "upsert", "detect_noop"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in an update (doc, doc_as_upsert, upsert, detect_noop)"
        )));
    }
    let flag = |k: &str, default: bool| -> Result<bool, ApiError> {
        match o.get(k) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(ApiError::bad_request(format!(
                "[{k}] must be true or false, not {other}"
            ))),
        }
    };
    let (as_upsert, detect_noop) = (flag("doc_as_upsert", false)?, flag("detect_noop", true)?);
    let patch = o.get("doc");
    let upsert = o.get("upsert");
    for (k, x) in [("doc", patch), ("upsert", upsert)] {
        if x.is_some_and(|x| !x.is_object()) {
            return Err(ApiError::bad_request(format!("[{k}] must be an object")));
        }
    }
    if patch.is_none() && upsert.is_none() {
        return Err(ApiError::bad_request("an update needs [doc] (or [upsert])"));
    }
    let ix = match state.indices().write_target(&index, state.config(), false) {
        Ok(ix) => ix,
        Err(_) => {
            let st = state.clone();
            blocking(move || write_index(&st, &index)).await?
        }
    };
    let Some(w) = ix.writer().cloned() else {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "read_only",
            "this server was started read-only",
        ));
    };
    let _turn = ix.updates.lock().await;
    let key = id.clone();
    let current = blocking(move || w.get(&key).map_err(ApiError::engine)).await?;
    let (next, result, status) = match (current, patch) {
        (Some(d), Some(patch)) => {
            let before = tierdex::query::dsl::SourceFilter::default()
                .apply(&d)
                .unwrap_or_else(|| json!({}));
            let mut after = before.clone();
            merge_source(&mut after, patch);
            if detect_noop && after == before {
                let v = json!({ "_index": ix.name(), "_id": id, "_version": 1, "result": "noop",
                    "_shards": { "total": 0, "successful": 0, "failed": 0 }, "_seq_no": 0, "_primary_term": 1 });
                return Ok((StatusCode::OK, Json(v)));
            }
            (after, "updated", StatusCode::OK)
        }
        (Some(_), None) => {
            // Only an upsert, and the document exists: nothing to change.
            let v = json!({ "_index": ix.name(), "_id": id, "_version": 1, "result": "noop",
                "_shards": { "total": 0, "successful": 0, "failed": 0 }, "_seq_no": 0, "_primary_term": 1 });
            return Ok((StatusCode::OK, Json(v)));
        }
        (None, _) => match (upsert, patch) {
            (Some(u), _) => (u.clone(), "created", StatusCode::CREATED),
            (None, Some(d)) if as_upsert => (d.clone(), "created", StatusCode::CREATED),
            _ => {
                let mut e = ApiError::new(
                    StatusCode::NOT_FOUND,
                    "document_missing_exception",
                    format!("[{id}]: document missing"),
                );
                e.body["error"]["index"] = ix.name().into();
                return Err(e);
            }
        },
    };
    let doc = source_doc(ix.searcher().schema(), id.clone(), &next)?;
    let written = state.write(&ix, vec![Op::Add(doc)], p.wants_refresh()).await?;
    Ok(doc_answer(&ix, &id, status, result, &written))
}

/// Documents deleted per batch by `_delete_by_query`.
const DELETE_BATCH: usize = 10_000;

/// `POST /{index}/_delete_by_query`: deletes every document the query
/// matches in the index's current snapshot (writes not yet refreshed are
/// not seen, as in Elasticsearch), in batches of 10,000.
pub async fn delete_by_query(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let started = std::time::Instant::now();
    let p = write_params(p)?;
    let v = body_value(&body)?;
    if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "query")) {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in a delete by query (query)"
        )));
    }
    let Some(q) = v.get("query") else {
        return Err(ApiError::bad_request("a delete by query needs a [query]"));
    };
    let mut total = 0usize;
    let mut batches = 0usize;
    for ix in state.indices().resolve(&index)? {
        let query = translate(&ix, ix.searcher().schema(), q)?;
        let timeout = state.config().max_timeout;
        let snapshot = ix.clone();
        let ids = blocking(move || {
            let s = snapshot.searcher();
            let deadline = std::time::Instant::now().checked_add(timeout);
            let docs = s.matching_docs(&query, deadline).map_err(ApiError::engine)?;
            docs.into_iter()
                .map(|d| s.doc_id(d).map_err(ApiError::engine))
                .collect::<Result<Vec<String>, ApiError>>()
        })
        .await?;
        total += ids.len();
        for chunk in ids.chunks(DELETE_BATCH) {
            let ops = chunk.iter().cloned().map(Op::Delete).collect();
            state.write(&ix, ops, false).await?;
            batches += 1;
        }
        if p.wants_refresh() {
            state.refresh(&ix).await?;
        }
    }
    Ok(Json(json!({
        "took": started.elapsed().as_millis() as u64, "timed_out": false, "total": total, "deleted": total,
        "batches": batches, "version_conflicts": 0, "noops": 0, "failures": [],
        "retries": { "bulk": 0, "search": 0 }, "throttled_millis": 0, "requests_per_second": -1.0,
        "throttled_until_millis": 0,
    })))
}

/// `GET|POST /{index}/_refresh`.
pub async fn refresh(State(state): State<Arc<AppState>>, Path(index): Path<String>) -> Result<Json<Value>, ApiError> {
    for ix in state.indices().resolve(&index)? {
        state.refresh(&ix).await?;
    }
    Ok(Json(json!({ "_shards": shards() })))
}

/// `POST /_bulk`.
pub async fn bulk_all(
    State(state): State<Arc<AppState>>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    run_bulk(&state, None, write_params(p)?, body).await
}

/// `POST /{index}/_bulk`.
pub async fn bulk(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    run_bulk(&state, Some(index), write_params(p)?, body).await
}

/// One parsed bulk action: its response key, the index it goes to and the
/// op, or its error.
struct BulkItem {
    action: &'static str,
    id: String,
    /// The index's name as answered (the one asked for when it failed).
    index: String,
    target: Option<Arc<IndexHandle>>,
    op: Result<Op, ApiError>,
}

/// The `_id` of a bulk action: a string, or an integer taken as its decimal
/// form (as Elasticsearch does); `None` when absent.
fn bulk_id(meta: &Value) -> Result<Option<String>, ApiError> {
    match meta.get("_id") {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Err(ApiError::bad_request("[_id] must not be empty")),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Ok(Some(n.to_string())),
        Some(v) => Err(ApiError::bad_request(format!(
            "[_id] must be a string or a whole number, not {v}"
        ))),
    }
}

/// The metadata keys a bulk action may hold; others (`if_seq_no`,
/// `routing`, `pipeline`...) would change what the action means.
const BULK_META: [&str; 2] = ["_index", "_id"];

/// Parses an NDJSON bulk body. Errors in the framing (a line that is not an
/// action) fail the whole request; errors in one action or its document
/// fail only its item. An `index` or `create` action to an index that does
/// not exist creates it (in a data directory, unless auto-creation is off),
/// so this blocks.
fn parse_bulk(state: &AppState, default_index: Option<&str>, body: &[u8]) -> Result<Vec<BulkItem>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("bulk body is not UTF-8"))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut items = Vec::new();
    let mut schemas: std::collections::HashMap<String, Schema> = std::collections::HashMap::new();
    while let Some((n, line)) = lines.next() {
        let at = |m: String| ApiError::bad_request(format!("bulk line {}: {m}", n + 1));
        let v: Value = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let obj = v
            .as_object()
            .filter(|o| o.len() == 1)
            .ok_or_else(|| at("expected one action object".into()))?;
        let (name, meta) = obj.iter().next().unwrap();
        let action: &'static str = match name.as_str() {
            "index" => "index",
            "create" => "create",
            "delete" => "delete",
            other => return Err(at(format!("action [{other}] is not supported (index, create, delete)"))),
        };
        let meta = meta
            .as_object()
            .ok_or_else(|| at(format!("the [{action}] action must hold an object")))?;
        let unknown = meta.keys().find(|k| !BULK_META.contains(&k.as_str()));
        let asked = match (meta.get("_index"), default_index) {
            (Some(Value::String(i)), _) => Ok(i.clone()),
            (Some(v), _) => Err(ApiError::bad_request(format!("[_index] must be a string, not {v}"))),
            (None, Some(i)) => Ok(i.to_string()),
            (None, None) => Err(ApiError::bad_request("no index named for this action")),
        };
        let index_name = asked.as_ref().cloned().unwrap_or_default();
        let target = match unknown {
            Some(k) => Err(ApiError::bad_request(format!(
                "[{k}] is not supported in a bulk action (only _index and _id)"
            ))),
            None => asked.and_then(|i| {
                if action == "delete" {
                    state.indices().write_target(&i, state.config(), false)
                } else {
                    state.indices().write_target(&i, state.config(), true)
                }
            }),
        };
        let index = target.as_ref().map_or(index_name, |t| t.name().to_string());
        let id = bulk_id(&Value::Object(meta.clone()));
        if action == "delete" {
            let (id, target, op) = match (id, target) {
                (Ok(Some(id)), Ok(t)) => (id.clone(), Some(t), Ok(Op::Delete(id))),
                (Ok(Some(id)), Err(e)) => (id, None, Err(e)),
                (Ok(None), _) => (String::new(), None, Err(ApiError::bad_request("delete needs an _id"))),
                (Err(e), _) => (String::new(), None, Err(e)),
            };
            items.push(BulkItem {
                action,
                id,
                index,
                target,
                op,
            });
            continue;
        }
        let (_, source) = lines
            .next()
            .ok_or_else(|| at(format!("{action} without a document line")))?;
        let (id, target) = match id {
            Ok(id) => (id.unwrap_or_else(new_id), target),
            Err(e) => (String::new(), Err(e)),
        };
        let (target, op) = match target {
            Err(e) => (None, Err(e)),
            Ok(t) => {
                let schema = schemas
                    .entry(t.name().to_string())
                    .or_insert_with(|| t.searcher().schema().clone());
                let op = serde_json::from_str::<Value>(source)
                    .map_err(|e| ApiError::bad_request(format!("document is not JSON: {e}")))
                    .and_then(|v| source_doc(schema, id.clone(), &v).map(Op::Add));
                (Some(t), op)
            }
        };
        items.push(BulkItem {
            action,
            id,
            index,
            target,
            op,
        });
    }
    if items.is_empty() {
        return Err(ApiError::bad_request("the bulk body holds no action"));
    }
    Ok(items)
}

async fn run_bulk(
    state: &Arc<AppState>,
    index: Option<String>,
    p: WriteParams,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let started = std::time::Instant::now();
    let st = state.clone();
    let items = blocking(move || parse_bulk(&st, index.as_deref(), &body)).await?;
    let mut results: Vec<Value> = Vec::with_capacity(items.len());
    for it in &items {
        results.push(match &it.op {
            Err(e) => {
                json!({ it.action: { "_index": it.index, "_id": it.id, "status": e.status.as_u16(), "error": e.body["error"] } })
            }
            Ok(_) => Value::Null,
        });
    }
    // One batch per index, in the order the indices first appear.
    let mut groups: Vec<(Arc<IndexHandle>, Vec<usize>)> = Vec::new();
    for (at, it) in items.iter().enumerate() {
        if let (Ok(_), Some(t)) = (&it.op, &it.target) {
            match groups.iter_mut().find(|(g, _)| Arc::ptr_eq(g, t)) {
                Some((_, v)) => v.push(at),
                None => groups.push((t.clone(), vec![at])),
            }
        }
    }
    let mut written_all: Vec<Written> = Vec::new();
    for (ix, members) in groups {
        // `create` must not replace: the ids already present fail with 409.
        // Looked up off the async executor: the writer's state stays locked
        // while a refresh analyses documents or a flush swaps its segment in.
        let present: std::collections::HashSet<String> = match ix.writer().cloned() {
            Some(w) => {
                let ids: Vec<String> = members.iter().map(|&at| items[at].id.clone()).collect();
                blocking(move || Ok(ids.into_iter().filter(|id| w.contains(id)).collect())).await?
            }
            None => Default::default(),
        };
        // Whether each id exists before its op, following the batch's own ops.
        let mut seen: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
        let mut ops = Vec::new();
        let mut pending: Vec<(usize, u16, &str)> = Vec::new();
        for &at in &members {
            let it = &items[at];
            let Ok(op) = &it.op else { continue };
            let existed = *seen.entry(&it.id).or_insert_with(|| present.contains(&it.id));
            if it.action == "create" && existed {
                results[at] = json!({ it.action: { "_index": it.index, "_id": it.id, "status": 409,
                    "error": { "type": "version_conflict_engine_exception", "reason": format!("[{}]: document already exists", it.id) } } });
                continue;
            }
            let (status, result, now) = match op {
                Op::Add(_) if existed => (200, "updated", true),
                Op::Add(_) => (201, "created", true),
                Op::Delete(_) if existed => (200, "deleted", false),
                Op::Delete(_) => (404, "not_found", false),
                Op::Mark(_) => continue,
            };
            seen.insert(&it.id, now);
            ops.push(op.clone());
            pending.push((at, status, result));
        }
        if ops.is_empty() {
            continue;
        }
        let written = state.write(&ix, ops, p.wants_refresh()).await?;
        let seq = written.applied.seq;
        for (at, status, result) in pending {
            let it = &items[at];
            results[at] = json!({ it.action: { "_index": it.index, "_id": it.id, "status": status, "result": result,
                "_shards": shards(), "_seq_no": seq, "_primary_term": 1, "_version": 1 } });
        }
        written_all.push(written);
    }
    let errors = results.iter().any(|r| {
        r.as_object()
            .and_then(|o| o.values().next())
            .is_some_and(|x| x.get("error").is_some())
    });
    let mut out = json!({ "took": started.elapsed().as_millis() as u64, "errors": errors, "items": results });
    // A refresh asked for is reported as the worst of the indices'.
    if let Some(w) = written_all
        .iter()
        .find(|w| matches!(w.refresh, Some(Err(_))))
        .or(written_all.first())
    {
        w.annotate(&mut out);
    }
    Ok(Json(out))
}
