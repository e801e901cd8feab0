//! Points in time and scrolls through the broker. Opening one keeps each
//! shard's current snapshot open on the node of one of its replicas (the
//! node answering first, for `keep_alive`); the id handed out names those
//! nodes and snapshots, so the broker keeps nothing and any broker serves
//! the next page. Every page reads the same snapshots, so documents written
//! meanwhile neither appear nor shift the order, and hits with equal keys
//! keep their shard-document order: a scroll walks every match exactly
//! once. A node holding a snapshot that goes away fails its shard for the
//! rest of the scroll (as in Elasticsearch).
//!
//! * `POST /{index}/_pit?keep_alive=1m` → `{"id"}`; `POST /_search` with
//!   `{"pit": {"id", "keep_alive"}}` (pages by `sort` and `search_after`);
//!   `DELETE /_pit` with `{"id"}`.
//! * `POST /{index}/_search?scroll=1m` → `_scroll_id`; `POST
//!   /_search/scroll` with `{"scroll_id", "scroll"}`; `DELETE
//!   /_search/scroll` with `{"scroll_id"}` (one or a list). A scroll pages
//!   in its `sort`'s order (by score when none is given; `_doc` is the
//!   cheapest) with `search_after` from each page's last hit; its count is
//!   taken on the first page, aggregations come with the first page only.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::Json;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tierdex_server::es::body_value;
use tierdex_server::ApiError;

use super::{check_search_keys, run_search, total_json, unexpected, window, Broker, Res, SearchQuery};
use crate::map::IndexMeta;
use crate::wire::{Answer, Ask};

/// How a node's error for a context that expired or was closed begins.
pub(crate) const MISSING: &str = "no search context";

/// Where each shard of a point in time or scroll is read.
#[derive(Debug, Clone)]
pub(crate) struct Pinned {
    /// Per shard: the node holding its snapshot, and the snapshot's id there.
    pub(crate) shards: Vec<(String, String)>,
    /// Keep the snapshots this many milliseconds from each use (0: as they
    /// are).
    pub(crate) keep_ms: u64,
}

/// What a point-in-time id holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PitId {
    /// The index.
    index: String,
    /// Its creation ([`IndexMeta::uid`]): a deleted and re-created index
    /// is another one.
    uid: String,
    /// Per shard: node and snapshot id.
    shards: Vec<(String, String)>,
}

/// What a scroll id holds: its snapshots, its request, where it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ScrollId {
    pit: PitId,
    /// The search body (query, sort, size, `_source`, highlight).
    body: Value,
    /// The last hit's sort values (`None`: no page yet had a hit).
    after: Option<Value>,
    /// Matches, counted on the first page (`None`: not counted).
    total: Option<u64>,
}

fn encode<T: Serialize>(v: &T) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("serialises"))
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, id: &str) -> Res<T> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id.trim())
        .map_err(|e| ApiError::bad_request(format!("[{what}] is not an id this cluster handed out: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("[{what}] is not an id this cluster handed out: {e}")))
}

/// A keep-alive (`1m`, `30s`), at most a day.
fn keep_alive(what: &str, s: &str) -> Res<Duration> {
    let d = tierdex_server::es::parse_time(what, s)?;
    if d.is_zero() || d > tierdex_server::MAX_KEEP_ALIVE {
        return Err(ApiError::bad_request(format!(
            "[{what}] {s} must be above 0 and at most 24h"
        )));
    }
    Ok(d)
}

/// Opens a snapshot of every shard for `keep`; on any failure closes
/// those opened and fails (a point in time covers every shard or none).
async fn open(b: &Broker, meta: &IndexMeta, keep: Duration) -> Res<PitId> {
    let keep_ms = keep.as_millis() as u64;
    let mut shards = vec![None; meta.shards as usize];
    let mut why = None;
    for (shard, r) in b.ask_all(meta, |_| Ask::Open { keep_ms }).await {
        match r {
            Ok(Answer::Opened { node, context }) => shards[shard as usize] = Some((node, context)),
            Ok(other) => why = Some(unexpected(&other)),
            Err(e) => {
                why = Some(ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    format!("shard {shard} of [{}] could not keep a snapshot open: {e}", meta.name),
                ))
            }
        }
    }
    let pit = PitId {
        index: meta.name.clone(),
        uid: meta.uid.clone(),
        shards: shards.iter().flatten().cloned().collect(),
    };
    if let Some(e) = why {
        let opened: Vec<(u32, (String, String))> = shards
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i as u32, s)))
            .collect();
        close(b, meta, &opened).await;
        return Err(e);
    }
    Ok(pit)
}

/// Closes snapshots; how many were open.
async fn close(b: &Broker, meta: &IndexMeta, shards: &[(u32, (String, String))]) -> usize {
    let mut freed = 0;
    for (shard, (node, id)) in shards {
        let one = Pinned {
            shards: (0..meta.shards)
                .map(|s| {
                    if s == *shard {
                        (node.clone(), id.clone())
                    } else {
                        Default::default()
                    }
                })
                .collect(),
            keep_ms: 0,
        };
        if let Ok(Answer::Closed(true)) = b.ask_at(meta, *shard, Some(&one), &Ask::Close).await {
            freed += 1;
        }
    }
    freed
}

/// The index a point in time was opened on, if it still exists as it was.
async fn index_of(b: &Broker, pit: &PitId) -> Res<IndexMeta> {
    let meta = b.index(&pit.index).await?;
    if meta.uid != pit.uid || meta.shards as usize != pit.shards.len() {
        return Err(ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "search_context_missing_exception",
            format!("{MISSING}: index [{}] was deleted since it was opened", pit.index),
        ));
    }
    Ok(meta)
}

fn pinned(pit: &PitId, keep: Option<Duration>) -> Pinned {
    Pinned {
        shards: pit.shards.clone(),
        keep_ms: keep.map_or(0, |d| d.as_millis() as u64),
    }
}

/// `POST /{index}/_pit?keep_alive=..`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PitQuery {
    keep_alive: Option<String>,
}

/// `POST /{index}/_pit`: keeps every shard's snapshot open.
pub(super) async fn open_pit(
    State(b): State<Arc<Broker>>,
    Path(index): Path<String>,
    q: Result<UrlQuery<PitQuery>, axum::extract::rejection::QueryRejection>,
) -> Res<Json<Value>> {
    let UrlQuery(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let keep = keep_alive(
        "keep_alive",
        q.keep_alive
            .as_deref()
            .ok_or_else(|| ApiError::bad_request("[keep_alive] is missing"))?,
    )?;
    let meta = b.index(&index).await?;
    let pit = open(&b, &meta, keep).await?;
    Ok(Json(json!({ "id": encode(&pit) })))
}

/// The ids of a close request: one, or a list.
fn ids(v: &Value, key: &str) -> Res<Vec<String>> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            Ok(a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "[{key}] is an id or a list of ids, not {other}"
        ))),
        None => Err(ApiError::bad_request(format!("[{key}] is missing"))),
    }
}

/// Closes the snapshots of point-in-time ids; how many were open.
async fn close_pits(b: &Broker, pits: Vec<PitId>) -> Res<usize> {
    let mut freed = 0;
    for pit in pits {
        let Ok(meta) = index_of(b, &pit).await else {
            continue;
        };
        let shards: Vec<(u32, (String, String))> =
            pit.shards.into_iter().enumerate().map(|(i, s)| (i as u32, s)).collect();
        freed += close(b, &meta, &shards).await;
    }
    Ok(freed)
}

/// `DELETE /_pit` with `{"id": ..}`.
pub(super) async fn close_pit(State(b): State<Arc<Broker>>, body: axum::body::Bytes) -> Res<Json<Value>> {
    let v = body_value(&body)?;
    if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "id")) {
        return Err(ApiError::bad_request(format!("[{k}] is not supported (id)")));
    }
    let pits = ids(&v, "id")?
        .iter()
        .map(|id| decode::<PitId>("id", id))
        .collect::<Res<Vec<_>>>()?;
    let freed = close_pits(&b, pits).await?;
    Ok(Json(json!({ "succeeded": true, "num_freed": freed })))
}

/// `GET|POST /_search`: a search in a point in time (`pit` in the body).
pub(super) async fn search_pit(
    State(b): State<Arc<Broker>>,
    q: Result<UrlQuery<SearchQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    let UrlQuery(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut body = body_value(&body)?;
    check_search_keys(&body, true)?;
    if q.scroll.is_some() {
        return Err(ApiError::bad_request("[scroll] cannot be used with [pit]"));
    }
    let Some(pit) = body.as_object_mut().and_then(|o| o.remove("pit")) else {
        return Err(ApiError::bad_request(
            "a search without an index in the path needs a [pit] (the broker has no search over every index)",
        ));
    };
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
        None => None,
        Some(Value::String(k)) => Some(keep_alive("pit.keep_alive", k)?),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "[pit.keep_alive] is a time such as \"1m\", not {other}"
            )))
        }
    };
    let p: PitId = decode("pit.id", id)?;
    let meta = index_of(&b, &p).await?;
    let (from, size) = window(&body, &q)?;
    let count = !matches!(body.get("track_total_hits"), Some(Value::Bool(false)));
    let (mut out, _) = run_search(&b, &meta, &body, (from, size, count), Some(&pinned(&p, keep)), &q).await?;
    out["pit_id"] = json!(id);
    Ok(Json(out))
}

/// `POST /{index}/_search?scroll=..`: opens the snapshots and answers the
/// first page.
pub(super) async fn first_page(
    b: &Broker,
    meta: &IndexMeta,
    mut body: Value,
    keep: &str,
    q: &SearchQuery,
) -> Res<Json<Value>> {
    let keep = keep_alive("scroll", keep)?;
    if body.get("search_after").is_some() || body_from(&body, q)? > 0 {
        return Err(ApiError::bad_request(
            "[from] and [search_after] cannot be used with [scroll]: a scroll pages by itself",
        ));
    }
    if body.get("sort").is_none() {
        body["sort"] = json!(["_score"]);
    }
    let (_, size) = window(&body, q)?;
    let count = !matches!(body.get("track_total_hits"), Some(Value::Bool(false)));
    // Checked before any snapshot is opened.
    crate::order::Order::parse(&meta.schema().map_err(super::cluster_error)?, &body, meta.shards)
        .map_err(ApiError::engine)?;
    let pit = open(b, meta, keep).await?;
    let pins = pinned(&pit, Some(keep));
    let answer = run_search(b, meta, &body, (0, size, count), Some(&pins), q).await;
    let (mut out, _) = match answer {
        Ok(a) => a,
        Err(e) => {
            let shards: Vec<(u32, (String, String))> = pit
                .shards
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, s)| (i as u32, s))
                .collect();
            close(b, meta, &shards).await;
            return Err(e);
        }
    };
    if let Some(o) = body.as_object_mut() {
        o.remove("aggs");
        o.remove("aggregations");
        o.insert("size".into(), json!(size));
    }
    let id = ScrollId {
        pit,
        body,
        after: last_sort(&out),
        total: count.then(|| {
            out["hits"]["total"]["value"]
                .as_u64()
                .or(out["hits"]["total"].as_u64())
                .unwrap_or(0)
        }),
    };
    out["_scroll_id"] = json!(encode(&id));
    Ok(Json(out))
}

fn body_from(body: &Value, q: &SearchQuery) -> Res<usize> {
    Ok(super::body_usize(body, "from")?.or(q.from).unwrap_or(0))
}

/// The sort values of an answer's last hit.
fn last_sort(out: &Value) -> Option<Value> {
    out["hits"]["hits"]
        .as_array()
        .and_then(|h| h.last())
        .map(|h| h["sort"].clone())
}

/// Body or URI parameters of `/_search/scroll`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScrollParams {
    scroll: Option<String>,
    scroll_id: Option<String>,
    rest_total_hits_as_int: Option<bool>,
}

async fn next(b: &Broker, id_in_path: Option<String>, mut p: ScrollParams, body: &[u8]) -> Res<Json<Value>> {
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: ScrollParams =
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("bad scroll request: {e}")))?;
        p.scroll = v.scroll.or(p.scroll);
        p.scroll_id = v.scroll_id.or(p.scroll_id);
        p.rest_total_hits_as_int = v.rest_total_hits_as_int.or(p.rest_total_hits_as_int);
    }
    let id = id_in_path
        .or(p.scroll_id)
        .ok_or_else(|| ApiError::bad_request("[scroll_id] is missing"))?;
    let keep = p.scroll.as_deref().map(|k| keep_alive("scroll", k)).transpose()?;
    let mut st: ScrollId = decode("scroll_id", &id)?;
    let meta = index_of(b, &st.pit).await?;
    let mut body = st.body.clone();
    if let Some(a) = &st.after {
        body["search_after"] = a.clone();
    }
    let size = super::body_usize(&body, "size")?.unwrap_or(10);
    let q = SearchQuery {
        rest_total_hits_as_int: p.rest_total_hits_as_int,
        ..Default::default()
    };
    let (mut out, _) = run_search(b, &meta, &body, (0, size, false), Some(&pinned(&st.pit, keep)), &q).await?;
    if let Some(t) = st.total {
        out["hits"]["total"] = total_json(t, &q);
    }
    if let Some(a) = last_sort(&out) {
        st.after = Some(a);
    }
    out["_scroll_id"] = json!(encode(&st));
    Ok(Json(out))
}

/// `GET|POST /_search/scroll`: the next page (an empty one once every
/// match was returned).
pub(super) async fn next_page(
    State(b): State<Arc<Broker>>,
    q: Result<UrlQuery<ScrollParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    let UrlQuery(p) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    next(&b, None, p, &body).await
}

/// `GET|POST /_search/scroll/{id}`.
pub(super) async fn next_page_in_path(
    State(b): State<Arc<Broker>>,
    Path(id): Path<String>,
    q: Result<UrlQuery<ScrollParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    let UrlQuery(p) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    next(&b, Some(id), p, &body).await
}

async fn clear(b: &Broker, ids: Vec<String>) -> Res<Json<Value>> {
    let pits = ids
        .iter()
        .map(|id| decode::<ScrollId>("scroll_id", id).map(|s| s.pit))
        .collect::<Res<Vec<_>>>()?;
    let freed = close_pits(b, pits).await?;
    Ok(Json(json!({ "succeeded": true, "num_freed": freed })))
}

/// `DELETE /_search/scroll` with `{"scroll_id": ..}`.
pub(super) async fn clear_scroll(State(b): State<Arc<Broker>>, body: axum::body::Bytes) -> Res<Json<Value>> {
    let v = body_value(&body)?;
    if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "scroll_id")) {
        return Err(ApiError::bad_request(format!("[{k}] is not supported (scroll_id)")));
    }
    clear(&b, ids(&v, "scroll_id")?).await
}

/// `DELETE /_search/scroll/{id}`.
pub(super) async fn clear_scroll_in_path(State(b): State<Arc<Broker>>, Path(id): Path<String>) -> Res<Json<Value>> {
    clear(&b, id.split(',').map(str::to_string).collect()).await
}
