//! Cluster and index administration in Elasticsearch's shape, for one
//! node: `_cat/indices`, `_cat/health`, `_cat/aliases`, `_cluster/health`,
//! and aliases (`_aliases`, `_alias`).

use std::sync::Arc;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::indices::AliasAction;
use crate::{ApiError, AppState, IndexHandle};

/// URI parameters of the `_cat` APIs.
#[derive(Debug, Default, Deserialize)]
pub struct CatParams {
    /// `json` for a JSON array; otherwise aligned text columns.
    pub format: Option<String>,
    /// Present: a header line in the text form.
    pub v: Option<String>,
    /// Comma-separated column names to show, in this order.
    pub h: Option<String>,
}

type CatQuery = Result<UrlQuery<CatParams>, axum::extract::rejection::QueryRejection>;

/// A `_cat` answer: `rows` of (column, value) as JSON or aligned text.
fn cat(params: CatQuery, columns: &[&str], rows: Vec<Vec<String>>) -> Result<Response, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let picked: Vec<usize> = match &p.h {
        None => (0..columns.len()).collect(),
        Some(h) => h
            .split(',')
            .map(|name| {
                columns.iter().position(|c| *c == name.trim()).ok_or_else(|| {
                    ApiError::bad_request(format!("[h] unknown column [{name}] (columns: {})", columns.join(", ")))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    match p.format.as_deref() {
        Some("json") => {
            let out: Vec<Value> = rows
                .iter()
                .map(|r| {
                    Value::Object(
                        picked
                            .iter()
                            .map(|&i| (columns[i].to_string(), Value::String(r[i].clone())))
                            .collect::<Map<_, _>>(),
                    )
                })
                .collect();
            Ok(Json(out).into_response())
        }
        None | Some("txt") | Some("text") => {
            let header = p.v.is_some();
            let mut lines: Vec<Vec<&str>> = Vec::new();
            if header {
                lines.push(picked.iter().map(|&i| columns[i]).collect());
            }
            for r in &rows {
                lines.push(picked.iter().map(|&i| r[i].as_str()).collect());
            }
            let widths: Vec<usize> = (0..picked.len())
                .map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0))
                .collect();
            let mut text = String::new();
            for l in &lines {
                let cells: Vec<String> = l
                    .iter()
                    .enumerate()
                    .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
                    .collect();
                text.push_str(cells.join(" ").trim_end());
                text.push('\n');
            }
            Ok(([(axum::http::header::CONTENT_TYPE, "text/plain; charset=UTF-8")], text).into_response())
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "[format] {other} is not supported (json, txt)"
        ))),
    }
}

/// Bytes in Elasticsearch's `_cat` units (`b`, `kb`, `mb`, `gb`).
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kb", "mb", "gb", "tb"];
    if bytes < 1024 {
        return format!("{bytes}b");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1}{}", UNITS[u])
}

/// Documents, deleted documents and bytes of an index now.
fn counts(ix: &IndexHandle) -> (u64, u64, u64) {
    let s = ix.searcher();
    let index = s.index();
    let bytes = index.manifest().segments.iter().map(|s| s.bytes()).sum::<u64>();
    (index.live_docs(), index.num_docs() - index.live_docs(), bytes)
}

const INDEX_COLUMNS: [&str; 10] = [
    "health",
    "status",
    "index",
    "uuid",
    "pri",
    "rep",
    "docs.count",
    "docs.deleted",
    "store.size",
    "pri.store.size",
];

fn index_rows(list: &[Arc<IndexHandle>]) -> Vec<Vec<String>> {
    list.iter()
        .map(|ix| {
            let (docs, deleted, bytes) = counts(ix);
            vec![
                ix.health().into(),
                "open".into(),
                ix.name().into(),
                ix.meta().uuid.clone(),
                "1".into(),
                ix.meta().replicas.to_string(),
                docs.to_string(),
                deleted.to_string(),
                size(bytes),
                size(bytes),
            ]
        })
        .collect()
}

/// `GET /_cat/indices`.
pub async fn cat_indices(State(state): State<Arc<AppState>>, params: CatQuery) -> Result<Response, ApiError> {
    cat(params, &INDEX_COLUMNS, index_rows(&state.indices().list()))
}

/// `GET /_cat/indices/{index}`.
pub async fn cat_indices_of(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    params: CatQuery,
) -> Result<Response, ApiError> {
    cat(params, &INDEX_COLUMNS, index_rows(&state.indices().resolve(&index)?))
}

/// The cluster's health over `list`: status and shard counts.
struct Health {
    status: &'static str,
    active: usize,
    unassigned: u64,
}

fn health_of(list: &[Arc<IndexHandle>]) -> Health {
    let unassigned: u64 = list.iter().map(|ix| ix.meta().replicas as u64).sum();
    Health {
        status: if unassigned > 0 { "yellow" } else { "green" },
        active: list.len(),
        unassigned,
    }
}

fn cluster_name(state: &AppState) -> String {
    state.config().index_name.clone()
}

/// `GET /_cat/health`.
pub async fn cat_health(State(state): State<Arc<AppState>>, params: CatQuery) -> Result<Response, ApiError> {
    let h = health_of(&state.indices().list());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let total = h.active as u64 + h.unassigned;
    let percent = if total == 0 {
        100.0
    } else {
        100.0 * h.active as f64 / total as f64
    };
    let columns = [
        "epoch",
        "timestamp",
        "cluster",
        "status",
        "node.total",
        "node.data",
        "shards",
        "pri",
        "relo",
        "init",
        "unassign",
        "pending_tasks",
        "max_task_wait_time",
        "active_shards_percent",
    ];
    let row = vec![
        now.to_string(),
        format!("{:02}:{:02}:{:02}", now / 3600 % 24, now / 60 % 60, now % 60),
        cluster_name(&state),
        h.status.into(),
        "1".into(),
        "1".into(),
        h.active.to_string(),
        h.active.to_string(),
        "0".into(),
        "0".into(),
        h.unassigned.to_string(),
        "0".into(),
        "-".into(),
        format!("{percent:.1}%"),
    ];
    cat(params, &columns, vec![row])
}

/// URI parameters of `_cluster/health`.
#[derive(Debug, Default, Deserialize)]
pub struct HealthParams {
    /// Answer once the status is at least this good (`green`, `yellow`,
    /// `red`); it is reported as `timed_out` when it is not (a single
    /// node's status does not change by waiting).
    pub wait_for_status: Option<String>,
    /// How long the client is willing to wait (accepted; see above).
    pub timeout: Option<String>,
    /// `cluster` (default) or `indices`.
    pub level: Option<String>,
}

fn rank(status: &str) -> Option<u8> {
    match status {
        "green" => Some(2),
        "yellow" => Some(1),
        "red" => Some(0),
        _ => None,
    }
}

async fn health_answer(
    state: &AppState,
    list: Vec<Arc<IndexHandle>>,
    params: Result<UrlQuery<HealthParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let UrlQuery(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let h = health_of(&list);
    let timed_out = match &p.wait_for_status {
        None => false,
        Some(w) => {
            let want = rank(w)
                .ok_or_else(|| ApiError::bad_request(format!("[wait_for_status] {w} is not green, yellow or red")))?;
            rank(h.status).unwrap_or(0) < want
        }
    };
    let total = h.active as u64 + h.unassigned;
    let mut out = json!({
        "cluster_name": cluster_name(state),
        "status": h.status,
        "timed_out": timed_out,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        "active_primary_shards": h.active,
        "active_shards": h.active,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": h.unassigned,
        "unassigned_primary_shards": 0,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": if total == 0 { 100.0 } else { 100.0 * h.active as f64 / total as f64 },
    });
    match p.level.as_deref() {
        None | Some("cluster") => {}
        Some("indices") => {
            let mut m = Map::new();
            for ix in &list {
                m.insert(
                    ix.name().to_string(),
                    json!({ "status": ix.health(), "number_of_shards": 1, "number_of_replicas": ix.meta().replicas,
                        "active_primary_shards": 1, "active_shards": 1, "relocating_shards": 0,
                        "initializing_shards": 0, "unassigned_shards": ix.meta().replicas }),
                );
            }
            out["indices"] = Value::Object(m);
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "[level] {other} is not supported (cluster, indices)"
            )))
        }
    }
    let _ = &p.timeout;
    if timed_out {
        return Err(ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            body: out,
        });
    }
    Ok(Json(out))
}

/// `GET /_cluster/health`.
pub async fn cluster_health(
    State(state): State<Arc<AppState>>,
    params: Result<UrlQuery<HealthParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let list = state.indices().list();
    health_answer(&state, list, params).await
}

/// `GET /_cluster/health/{index}`.
pub async fn cluster_health_of(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    params: Result<UrlQuery<HealthParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let list = state.indices().resolve(&index)?;
    health_answer(&state, list, params).await
}

/// `GET /_cat/aliases`.
pub async fn cat_aliases(State(state): State<Arc<AppState>>, params: CatQuery) -> Result<Response, ApiError> {
    let mut rows = Vec::new();
    for (alias, targets) in state.indices().aliases() {
        for index in targets {
            rows.push(vec![
                alias.clone(),
                index,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
    }
    cat(
        params,
        &[
            "alias",
            "index",
            "filter",
            "routing.index",
            "routing.search",
            "is_write_index",
        ],
        rows,
    )
}

/// The names in one field of an alias action: a string or a list.
fn names(action: &Map<String, Value>, one: &str, many: &str) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    if let Some(v) = action.get(one) {
        out.push(
            v.as_str()
                .ok_or_else(|| ApiError::bad_request(format!("[{one}] must be a string, not {v}")))?
                .to_string(),
        );
    }
    if let Some(v) = action.get(many) {
        let list = v
            .as_array()
            .ok_or_else(|| ApiError::bad_request(format!("[{many}] must be a list, not {v}")))?;
        for x in list {
            out.push(
                x.as_str()
                    .ok_or_else(|| ApiError::bad_request(format!("[{many}] entries are strings, not {x}")))?
                    .to_string(),
            );
        }
    }
    if out.is_empty() {
        return Err(ApiError::bad_request(format!(
            "an alias action needs [{one}] or [{many}]"
        )));
    }
    Ok(out)
}

/// Applies alias actions off the async executor (the catalog is synced).
async fn apply(state: &Arc<AppState>, actions: Vec<AliasAction>) -> Result<Json<Value>, ApiError> {
    let st = state.clone();
    tokio::task::spawn_blocking(move || st.indices().update_aliases(&actions, st.config()))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))??;
    Ok(Json(json!({ "acknowledged": true, "errors": false })))
}

/// `POST /_aliases`: `{"actions": [{"add": {"index", "alias"}}, {"remove":
/// {...}}]}` (with `indices`/`aliases` lists too), applied all at once.
pub async fn update_aliases(
    State(state): State<Arc<AppState>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let v: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    let o = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("request body must be a JSON object"))?;
    if let Some(k) = o.keys().find(|k| *k != "actions") {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in _aliases (actions)"
        )));
    }
    let list = o
        .get("actions")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::bad_request("[actions] must be a list"))?;
    let mut actions = Vec::new();
    for a in list {
        let a = a
            .as_object()
            .filter(|a| a.len() == 1)
            .ok_or_else(|| ApiError::bad_request(format!("an alias action is one object, not {a}")))?;
        let (kind, spec) = a.iter().next().expect("one");
        let spec = spec
            .as_object()
            .ok_or_else(|| ApiError::bad_request(format!("[{kind}] must hold an object")))?;
        if let Some(k) = spec
            .keys()
            .find(|k| !["index", "indices", "alias", "aliases"].contains(&k.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "[{kind}] option [{k}] is not supported (index, indices, alias, aliases)"
            )));
        }
        let indices = names(spec, "index", "indices")?;
        let aliases = names(spec, "alias", "aliases")?;
        for index in &indices {
            for alias in &aliases {
                let (index, alias) = (index.clone(), alias.clone());
                actions.push(match kind.as_str() {
                    "add" => AliasAction::Add { index, alias },
                    "remove" => AliasAction::Remove { index, alias },
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "alias action [{other}] is not supported (add, remove)"
                        )))
                    }
                });
            }
        }
    }
    apply(&state, actions).await
}

/// `PUT|POST /{index}/_alias/{name}`.
pub async fn put_alias(
    State(state): State<Arc<AppState>>,
    Path((index, alias)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    if !body.iter().all(u8::is_ascii_whitespace) && &body[..] != b"{}" {
        return Err(ApiError::bad_request(
            "alias options (filter, routing, is_write_index) are not supported",
        ));
    }
    let actions = index
        .split(',')
        .map(|i| AliasAction::Add {
            index: i.to_string(),
            alias: alias.clone(),
        })
        .collect();
    apply(&state, actions).await
}

/// `DELETE /{index}/_alias/{name}`.
pub async fn delete_alias(
    State(state): State<Arc<AppState>>,
    Path((index, alias)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let actions = index
        .split(',')
        .map(|i| AliasAction::Remove {
            index: i.to_string(),
            alias: alias.clone(),
        })
        .collect();
    apply(&state, actions).await
}

/// The aliases of `indices` matching `pattern` (all with `None`), in
/// Elasticsearch's `{index: {"aliases": {alias: {}}}}` shape.
fn alias_map(state: &AppState, indices: &[Arc<IndexHandle>], pattern: Option<&str>, all: bool) -> Map<String, Value> {
    let mut out = Map::new();
    for ix in indices {
        let mut m = Map::new();
        for a in state.indices().aliases_of(ix.name()) {
            if pattern.is_none_or(|p| p.split(',').any(|p| crate::indices::matches(p, &a))) {
                m.insert(a, json!({}));
            }
        }
        if all || !m.is_empty() {
            out.insert(ix.name().to_string(), json!({ "aliases": m }));
        }
    }
    out
}

/// `GET /_aliases` and `GET /_alias`: every index with its aliases.
pub async fn get_aliases(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(Value::Object(alias_map(&state, &state.indices().list(), None, true)))
}

/// `GET /{index}/_alias` (and `/{index}/_aliases`).
pub async fn get_index_aliases(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let list = state.indices().resolve(&index)?;
    Ok(Json(Value::Object(alias_map(&state, &list, None, true))))
}

/// `GET|HEAD /_alias/{name}`: the indices holding these aliases; 404 when
/// none does.
pub async fn get_alias(State(state): State<Arc<AppState>>, Path(alias): Path<String>) -> Result<Json<Value>, ApiError> {
    let out = alias_map(&state, &state.indices().list(), Some(&alias), false);
    if out.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "aliases_not_found_exception",
            format!("alias [{alias}] missing"),
        ));
    }
    Ok(Json(Value::Object(out)))
}

/// `GET|HEAD /{index}/_alias/{name}`.
pub async fn get_alias_of(
    State(state): State<Arc<AppState>>,
    Path((index, alias)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let list = state.indices().resolve(&index)?;
    let out = alias_map(&state, &list, Some(&alias), false);
    if out.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "aliases_not_found_exception",
            format!("alias [{alias}] missing on [{index}]"),
        ));
    }
    Ok(Json(Value::Object(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_elasticsearch_prints_them() {
        assert_eq!(size(0), "0b");
        assert_eq!(size(1023), "1023b");
        assert_eq!(size(1536), "1.5kb");
        assert_eq!(size(5 << 20), "5.0mb");
        assert_eq!(size(3 << 30), "3.0gb");
    }
}
