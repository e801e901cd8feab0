//! An Elasticsearch-compatible subset.
//!
//! * Search: `/{index}/_search` and `/{index}/_count` with `query_string`,
//!   `match`, `match_phrase`, `term` and `bool` (`must`, `should`,
//!   `must_not`), `size`, `track_total_hits`, `highlight` and `_source`.
//! * Writes: `PUT /{index}`, `POST /{index}/_doc`, `PUT|POST
//!   /{index}/_doc/{id}`, `DELETE /{index}/_doc/{id}`, `POST /_bulk` and
//!   `/{index}/_bulk` (NDJSON `index`, `create` and `delete` actions),
//!   `/{index}/_refresh`, and `?refresh=true|wait_for` on writes. Documents
//!   hold the text fields of the index's schema (`title` and `body` by
//!   default); other fields are refused (tierdex has no dynamic mapping),
//!   never silently dropped.
//!
//! Answers have Elasticsearch's shape. Anything else is a 400 naming what is
//! not supported, never a silently different request.

use std::sync::Arc;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::schema::Schema;
use tierdex::search::Mode;
use tierdex::Field;

use tierdex::update::wal::Op;
use tierdex::Document;

use crate::{ApiError, AppState, SearchJob, WriteParams, Written, MAX_K};

/// URI parameters (`?q=...&size=...`).
#[derive(Debug, Default, Deserialize)]
pub struct UriParams {
    /// Query string (Lucene syntax).
    pub q: Option<String>,
    /// Hits.
    pub size: Option<usize>,
    /// First hit (only 0 is supported).
    pub from: Option<u64>,
    /// Longest wait, Elasticsearch style (`500ms`, `2s`).
    pub timeout: Option<String>,
}

fn field(schema: &Schema, name: &str) -> Result<Option<Field>, ApiError> {
    match name {
        "_all" | "*" => Ok(None),
        other => schema.field(other).map(Some).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown field `{other}` (fields: {})",
                schema.names().join(", ")
            ))
        }),
    }
}

/// A leaf query's field, text and other options.
type Leaf<'a> = (Option<Field>, String, Option<&'a Map<String, Value>>);

/// `{"field": "text"}` or `{"field": {"query": "text", ...}}`.
fn field_and_text<'a>(schema: &Schema, kind: &str, v: &'a Value) -> Result<Leaf<'a>, ApiError> {
    let obj = v
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| ApiError::bad_request(format!("[{kind}] takes one field: {{\"body\": \"text\"}}")))?;
    let (name, inner) = obj.iter().next().expect("one entry");
    let f = field(schema, name)?;
    match inner {
        Value::String(s) => Ok((f, s.clone(), None)),
        Value::Object(o) => {
            let text = o
                .get("query")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("[{kind}] needs a string `query`")))?;
            Ok((f, text.to_string(), Some(o)))
        }
        _ => Err(ApiError::bad_request(format!(
            "[{kind}] field `{name}` needs a string or an object"
        ))),
    }
}

fn clauses(schema: &Schema, kind: &str, v: &Value, occur: Occur, out: &mut Vec<Clause>) -> Result<(), ApiError> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => vec![v],
        _ => {
            return Err(ApiError::bad_request(format!(
                "[bool] `{kind}` takes a query or a list of queries"
            )))
        }
    };
    for q in items {
        out.push(Clause {
            occur,
            query: translate(schema, q)?,
        });
    }
    Ok(())
}

/// Translates an Elasticsearch query object into a query over `schema`'s fields.
pub fn translate(schema: &Schema, v: &Value) -> Result<Query, ApiError> {
    let obj = v
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| ApiError::bad_request("a query is an object with exactly one key, e.g. {\"match\": {...}}"))?;
    let (kind, body) = obj.iter().next().expect("one entry");
    match kind.as_str() {
        "query_string" | "simple_query_string" => {
            let text = body
                .get("query")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("[{kind}] needs a string `query`")))?;
            if let Some(f) = body.get("default_field").and_then(Value::as_str) {
                field(schema, f)?;
                if f != "*" && f != "_all" {
                    return Err(ApiError::bad_request(
                        "[query_string] default_field is not supported: prefix terms with their field (`name:term`)",
                    ));
                }
            }
            tierdex::query::parser::parse_with(text, schema).map_err(|e| ApiError::from_engine(text, e.into()))
        }
        "match" => {
            let (f, text, opts) = field_and_text(schema, kind, body)?;
            let operator = opts
                .and_then(|o| o.get("operator"))
                .and_then(Value::as_str)
                .unwrap_or("or")
                .to_ascii_lowercase();
            let occur = match operator.as_str() {
                "or" => Occur::Should,
                "and" => Occur::Must,
                other => return Err(ApiError::bad_request(format!("[match] unknown operator `{other}`"))),
            };
            Ok(Query::Boolean(
                text.split_whitespace()
                    .map(|w| Clause {
                        occur,
                        query: Query::Term {
                            field: f,
                            text: w.to_string(),
                        },
                    })
                    .collect(),
            ))
        }
        "match_phrase" => {
            let (f, text, _) = field_and_text(schema, kind, body)?;
            Ok(Query::Boolean(vec![Clause {
                occur: Occur::Should,
                query: Query::Phrase { field: f, text },
            }]))
        }
        "term" => {
            let (f, text, _) = field_and_text(schema, kind, body)?;
            Ok(Query::Boolean(vec![Clause {
                occur: Occur::Should,
                query: Query::Term { field: f, text },
            }]))
        }
        "bool" => {
            let o = body
                .as_object()
                .ok_or_else(|| ApiError::bad_request("[bool] takes an object"))?;
            let mut out = Vec::new();
            for (k, v) in o {
                match k.as_str() {
                    "must" => clauses(schema, k, v, Occur::Must, &mut out)?,
                    "should" => clauses(schema, k, v, Occur::Should, &mut out)?,
                    "must_not" => clauses(schema, k, v, Occur::MustNot, &mut out)?,
                    "minimum_should_match" if v == &json!(1) || v == &json!("1") => {}
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "[bool] `{other}` is not supported (must, should, must_not)"
                        )))
                    }
                }
            }
            Ok(Query::Boolean(out))
        }
        other => Err(ApiError::bad_request(format!(
            "query type [{other}] is not supported (query_string, match, match_phrase, term, bool)"
        ))),
    }
}

fn check_index(state: &AppState, index: &str) -> Result<(), ApiError> {
    if index == state.config().index_name || index == "_all" || index == "*" {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "index_not_found_exception",
            format!(
                "no such index [{index}] (this server holds [{}])",
                state.config().index_name
            ),
        ))
    }
}

/// An Elasticsearch time value (`500ms`, `2s`, `1m`): a whole number and a
/// unit (`nanos`, `micros`, `ms`, `s`, `m`, `h`, `d`), checked against the
/// server's maximum.
fn parse_timeout(state: &AppState, s: &str) -> Result<std::time::Duration, ApiError> {
    use std::time::Duration;
    let bad = |why: &str| {
        ApiError::bad_request(format!(
            "bad [timeout] `{s}`: {why}; expected a whole number and a unit (nanos, micros, ms, s, m, h, d), e.g. \"500ms\" or \"2s\""
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
    state.config().check_timeout(d, &format!("`{s}`"))
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

/// The query of a request: the body's `query`, or `?q=`.
fn request_query(schema: &Schema, body: &Value, uri: &UriParams) -> Result<(Query, String), ApiError> {
    match (body.get("query"), &uri.q) {
        (Some(q), _) => Ok((translate(schema, q)?, q.to_string())),
        (None, Some(q)) => Ok((
            tierdex::query::parser::parse_with(q, schema).map_err(|e| ApiError::from_engine(q, e.into()))?,
            q.clone(),
        )),
        (None, None) => Err(ApiError::bad_request(
            "no query: send {\"query\": {...}} or ?q= (match_all is not supported)",
        )),
    }
}

fn body_value(body: &axum::body::Bytes) -> Result<Value, ApiError> {
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

/// What every Elasticsearch-style request starts with: the index checked,
/// the URI parameters and the JSON body.
fn prelude(
    state: &AppState,
    index: &str,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: &axum::body::Bytes,
) -> Result<(UriParams, Value), ApiError> {
    check_index(state, index)?;
    let UrlQuery(uri) = uri.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok((uri, body_value(body)?))
}

/// `GET|POST /{index}/_search`.
pub async fn search(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let (uri, body) = prelude(&state, &index, uri, &body)?;
    for key in body.as_object().into_iter().flat_map(|o| o.keys()) {
        if ![
            "query",
            "size",
            "track_total_hits",
            "highlight",
            "_source",
            "timeout",
            "from",
        ]
        .contains(&key.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "[{key}] is not supported in a search request"
            )));
        }
    }
    if body_count(&body, "from")?.or(uri.from).unwrap_or(0) != 0 {
        return Err(ApiError::bad_request("[from] other than 0 is not supported"));
    }
    let (query, text) = request_query(state.searcher().schema(), &body, &uri)?;
    let size = match body_count(&body, "size")? {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => uri.size.unwrap_or(10),
    };
    if size > MAX_K {
        return Err(ApiError::bad_request(format!(
            "[size] {size} is above the limit of {MAX_K}"
        )));
    }
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
        None | Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) => false,
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "[_source] {v} is not supported: true or false (source filtering is not implemented)"
            )))
        }
    };
    let mode = match (size, track) {
        (0, _) => Mode::Count,
        (_, true) => Mode::TopKAndCount,
        (_, false) => Mode::TopK,
    };
    let highlight = body.get("highlight").map(|_| 150);
    let timeout = match (body.get("timeout"), uri.timeout.as_deref()) {
        (Some(Value::String(t)), _) => parse_timeout(&state, t)?,
        (None, Some(t)) => parse_timeout(&state, t)?,
        (Some(v), _) => {
            return Err(ApiError::bad_request(format!(
                "[timeout] must be a string with a unit, e.g. \"500ms\" or \"2s\", not {v}"
            )))
        }
        (None, None) => state.config().default_timeout,
    };
    let answer = state
        .search(SearchJob {
            text,
            query,
            mode,
            k: size,
            source,
            highlight,
            timeout,
        })
        .await?;
    let name = &state.config().index_name;
    let hits: Vec<Value> = answer
        .hits
        .iter()
        .map(|h| {
            let mut hit = json!({ "_index": name, "_id": h.id, "_score": h.score });
            if let Some(d) = &h.source {
                hit["_source"] = Value::Object(d.fields.to_map());
            }
            if let Some(hl) = &h.highlight {
                let mut m = Map::new();
                for (f, s) in &hl.fields {
                    if !s.marks.is_empty() {
                        m.insert(f.clone(), json!([s.render("<em>", "</em>")]));
                    }
                }
                hit["highlight"] = Value::Object(m);
            }
            hit
        })
        .collect();
    let mut out = json!({
        "took": answer.took_ms,
        "timed_out": false,
        "_shards": { "total": 1, "successful": 1, "skipped": 0, "failed": 0 },
        "hits": {
            "max_score": answer.hits.first().map(|h| h.score),
            "hits": hits,
        }
    });
    if let Some(c) = answer.count {
        out["hits"]["total"] = json!({ "value": c, "relation": "eq" });
    }
    Ok(Json(out))
}

/// `GET|POST /{index}/_count`.
pub async fn count(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    uri: Result<UrlQuery<UriParams>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let (uri, body) = prelude(&state, &index, uri, &body)?;
    let (query, text) = request_query(state.searcher().schema(), &body, &uri)?;
    let answer = state
        .search(SearchJob {
            text,
            query,
            mode: Mode::Count,
            k: 0,
            source: false,
            highlight: None,
            timeout: state.config().default_timeout,
        })
        .await?;
    Ok(Json(json!({
        "count": answer.count.unwrap_or(0),
        "_shards": { "total": 1, "successful": 1, "skipped": 0, "failed": 0 },
    })))
}

type WriteQuery = Result<UrlQuery<WriteParams>, axum::extract::rejection::QueryRejection>;

fn write_params(p: WriteQuery) -> Result<WriteParams, ApiError> {
    p.map(|UrlQuery(p)| p).map_err(|e| ApiError::bad_request(e.body_text()))
}

/// A document from an Elasticsearch `_source`: strings of the schema's
/// text fields.
fn source_doc(schema: &Schema, id: String, v: &Value) -> Result<Document, ApiError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the document must be a JSON object"))?;
    let mut d = Document::new(id);
    for (k, x) in obj {
        let text = match x {
            Value::String(t) => t.clone(),
            Value::Null => continue,
            _ => {
                return Err(mapper_error(format!("field [{k}] must be a string")));
            }
        };
        if schema.field(k).is_none() {
            return Err(mapper_error(format!(
                "field [{k}] is not in the mapping: tierdex indexes [{}]",
                schema.names().join("], [")
            )));
        }
        d.fields.insert(k.clone(), Value::String(text));
    }
    schema.check(&d).map_err(|e| mapper_error(e.to_string()))?;
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

/// `PUT /{index}`: the served index exists already; acknowledged when it is
/// the served one and still empty (a fresh index), else the Elasticsearch
/// error for an existing index.
pub async fn create_index(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
) -> Result<Json<Value>, ApiError> {
    check_index(&state, &index)?;
    if state.writer().is_none() || state.searcher().num_docs() > 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "resource_already_exists_exception",
            format!("index [{index}] already exists"),
        ));
    }
    Ok(Json(
        json!({ "acknowledged": true, "shards_acknowledged": true, "index": index }),
    ))
}

/// `HEAD /{index}`: 200 for the served index, 404 otherwise.
pub async fn index_exists(State(state): State<Arc<AppState>>, Path(index): Path<String>) -> StatusCode {
    match check_index(&state, &index) {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::NOT_FOUND,
    }
}

async fn put_doc(
    state: &Arc<AppState>,
    index: &str,
    id: String,
    p: WriteParams,
    body: &[u8],
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_index(state, index)?;
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    let doc = source_doc(state.searcher().schema(), id.clone(), &v)?;
    let w = state.write(vec![Op::Add(doc)], p.wants_refresh()).await?;
    let (status, result) = if w.applied.replaced > 0 {
        (StatusCode::OK, "updated")
    } else {
        (StatusCode::CREATED, "created")
    };
    Ok(doc_answer(state, &id, status, result, &w))
}

/// The answer to a single-document write, in Elasticsearch's shape.
fn doc_answer(state: &AppState, id: &str, status: StatusCode, result: &str, w: &Written) -> (StatusCode, Json<Value>) {
    let mut v = json!({
        "_index": state.config().index_name, "_id": id, "_version": 1, "result": result,
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

/// `DELETE /{index}/_doc/{id}`.
pub async fn delete_doc(
    State(state): State<Arc<AppState>>,
    Path((index, id)): Path<(String, String)>,
    p: WriteQuery,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_index(&state, &index)?;
    let w = state
        .write(vec![Op::Delete(id.clone())], write_params(p)?.wants_refresh())
        .await?;
    let (status, result) = if w.applied.deleted > 0 {
        (StatusCode::OK, "deleted")
    } else {
        (StatusCode::NOT_FOUND, "not_found")
    };
    Ok(doc_answer(&state, &id, status, result, &w))
}

/// `GET|POST /{index}/_refresh`.
pub async fn refresh(State(state): State<Arc<AppState>>, Path(index): Path<String>) -> Result<Json<Value>, ApiError> {
    check_index(&state, &index)?;
    state.refresh().await?;
    Ok(Json(json!({ "_shards": shards() })))
}

/// `POST /_bulk`.
pub async fn bulk_all(
    State(state): State<Arc<AppState>>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    run_bulk(&state, None, write_params(p)?, &body).await
}

/// `POST /{index}/_bulk`.
pub async fn bulk(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    p: WriteQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    check_index(&state, &index)?;
    run_bulk(&state, Some(index), write_params(p)?, &body).await
}

/// One parsed bulk action: its response key and the op, or its error.
struct BulkItem {
    action: &'static str,
    id: String,
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
/// fail only its item.
fn parse_bulk(state: &AppState, default_index: Option<&str>, body: &[u8]) -> Result<Vec<BulkItem>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("bulk body is not UTF-8"))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut items = Vec::new();
    let searcher = state.searcher();
    let schema = searcher.schema().clone();
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
        let target = match (meta.get("_index"), default_index) {
            (Some(Value::String(i)), _) => check_index(state, i),
            (Some(v), _) => Err(ApiError::bad_request(format!("[_index] must be a string, not {v}"))),
            (None, Some(i)) => check_index(state, i),
            (None, None) => Err(ApiError::bad_request("no index named for this action")),
        };
        let target = match unknown {
            Some(k) => Err(ApiError::bad_request(format!(
                "[{k}] is not supported in a bulk action (only _index and _id)"
            ))),
            None => target,
        };
        let id = bulk_id(&Value::Object(meta.clone()));
        if action == "delete" {
            let (id, op) = match id {
                Ok(Some(id)) => (id.clone(), target.map(|_| Op::Delete(id))),
                Ok(None) => (String::new(), Err(ApiError::bad_request("delete needs an _id"))),
                Err(e) => (String::new(), Err(e)),
            };
            items.push(BulkItem { action, op, id });
            continue;
        }
        let (_, source) = lines
            .next()
            .ok_or_else(|| at(format!("{action} without a document line")))?;
        let (id, target) = match id {
            Ok(id) => (id.unwrap_or_else(new_id), target),
            Err(e) => (String::new(), Err(e)),
        };
        let op = target.and_then(|_| {
            let v: Value = serde_json::from_str(source)
                .map_err(|e| ApiError::bad_request(format!("document is not JSON: {e}")))?;
            source_doc(&schema, id.clone(), &v).map(Op::Add)
        });
        items.push(BulkItem { action, id, op });
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
    body: &[u8],
) -> Result<Json<Value>, ApiError> {
    let started = std::time::Instant::now();
    let items = parse_bulk(state, index.as_deref(), body)?;
    // `create` must not replace: the ids already present fail with 409.
    // Looked up off the async executor: the writer's state stays locked
    // while a refresh analyses documents or a flush swaps its segment in.
    let present: std::collections::HashSet<String> = match state.writer().cloned() {
        Some(w) => {
            let ids: Vec<String> = items
                .iter()
                .filter(|it| it.op.is_ok())
                .map(|it| it.id.clone())
                .collect();
            tokio::task::spawn_blocking(move || ids.into_iter().filter(|id| w.contains(id)).collect())
                .await
                .map_err(|_| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal_error",
                        "the id lookup stopped",
                    )
                })?
        }
        None => Default::default(),
    };
    let exists = |id: &str| present.contains(id);
    let name = &state.config().index_name;
    // Whether each id exists before its op, following the batch's own ops.
    let mut seen: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    let mut ops = Vec::new();
    let mut results: Vec<Value> = Vec::with_capacity(items.len());
    let mut pending: Vec<(usize, u16, &str)> = Vec::new();
    for it in &items {
        let op = match &it.op {
            Err(e) => {
                results.push(json!({ it.action: { "_index": name, "_id": it.id, "status": e.status.as_u16(), "error": e.body["error"] } }));
                continue;
            }
            Ok(op) => op,
        };
        let existed = *seen.entry(&it.id).or_insert_with(|| exists(&it.id));
        if it.action == "create" && existed {
            results.push(json!({ it.action: { "_index": name, "_id": it.id, "status": 409,
                "error": { "type": "version_conflict_engine_exception", "reason": format!("[{}]: document already exists", it.id) } } }));
            continue;
        }
        let (status, result, now) = match op {
            Op::Add(_) if existed => (200, "updated", true),
            Op::Add(_) => (201, "created", true),
            Op::Delete(_) if existed => (200, "deleted", false),
            Op::Delete(_) => (404, "not_found", false),
        };
        seen.insert(&it.id, now);
        ops.push(op.clone());
        pending.push((results.len(), status, result));
        results.push(Value::Null);
    }
    let errors = results.iter().any(|r| !r.is_null());
    let written = if ops.is_empty() {
        None
    } else {
        Some(state.write(ops, p.wants_refresh()).await?)
    };
    let seq = written.as_ref().map_or(0, |w| w.applied.seq);
    for (at, status, result) in pending {
        let it = &items[at];
        results[at] = json!({ it.action: { "_index": name, "_id": it.id, "status": status, "result": result,
            "_shards": shards(), "_seq_no": seq, "_primary_term": 1, "_version": 1 } });
    }
    let mut out = json!({ "took": started.elapsed().as_millis() as u64, "errors": errors, "items": results });
    if let Some(w) = &written {
        w.annotate(&mut out);
    }
    Ok(Json(out))
}
