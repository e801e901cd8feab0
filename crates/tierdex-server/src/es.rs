//! The search side of an Elasticsearch-compatible API: `/{index}/_search`
//! and `/{index}/_count` with `query_string`, `match`, `match_phrase`,
//! `term` and `bool` (`must`, `should`, `must_not`), `size`,
//! `track_total_hits`, `highlight` and `_source`, answered in
//! Elasticsearch's response shape. Anything else is a 400 naming what is
//! not supported, never a silently different query.

use std::sync::Arc;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::search::Mode;
use tierdex::Field;

use crate::{ApiError, AppState, SearchJob, MAX_K};

/// URI parameters (`?q=...&size=...`).
#[derive(Debug, Default, Deserialize)]
pub struct UriParams {
    /// Query string (Lucene syntax).
    pub q: Option<String>,
    /// Hits.
    pub size: Option<usize>,
    /// Longest wait, Elasticsearch style (`500ms`, `2s`).
    pub timeout: Option<String>,
}

fn field(name: &str) -> Result<Option<Field>, ApiError> {
    match name {
        "title" => Ok(Some(Field::Title)),
        "body" => Ok(Some(Field::Body)),
        "_all" | "*" => Ok(None),
        other => Err(ApiError::bad_request(format!(
            "unknown field `{other}` (fields: title, body)"
        ))),
    }
}

/// A leaf query's field, text and other options.
type Leaf<'a> = (Option<Field>, String, Option<&'a Map<String, Value>>);

/// `{"field": "text"}` or `{"field": {"query": "text", ...}}`.
fn field_and_text<'a>(kind: &str, v: &'a Value) -> Result<Leaf<'a>, ApiError> {
    let obj = v
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| ApiError::bad_request(format!("[{kind}] takes one field: {{\"body\": \"text\"}}")))?;
    let (name, inner) = obj.iter().next().expect("one entry");
    let f = field(name)?;
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

fn clauses(kind: &str, v: &Value, occur: Occur, out: &mut Vec<Clause>) -> Result<(), ApiError> {
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
            query: translate(q)?,
        });
    }
    Ok(())
}

/// Translates an Elasticsearch query object into a tierdex query.
pub fn translate(v: &Value) -> Result<Query, ApiError> {
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
                field(f)?;
                if f != "*" && f != "_all" {
                    return Err(ApiError::bad_request(
                        "[query_string] default_field is not supported: prefix terms with title: or body:",
                    ));
                }
            }
            tierdex::query::parse(text).map_err(|e| ApiError::from_engine(text, e.into()))
        }
        "match" => {
            let (f, text, opts) = field_and_text(kind, body)?;
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
            let (f, text, _) = field_and_text(kind, body)?;
            Ok(Query::Boolean(vec![Clause {
                occur: Occur::Should,
                query: Query::Phrase { field: f, text },
            }]))
        }
        "term" => {
            let (f, text, _) = field_and_text(kind, body)?;
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
                    "must" => clauses(k, v, Occur::Must, &mut out)?,
                    "should" => clauses(k, v, Occur::Should, &mut out)?,
                    "must_not" => clauses(k, v, Occur::MustNot, &mut out)?,
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

fn parse_timeout(s: &str) -> Result<std::time::Duration, ApiError> {
    let (num, unit) = s
        .trim()
        .split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: u64 = num
        .parse()
        .map_err(|_| ApiError::bad_request(format!("bad timeout `{s}` (e.g. 500ms, 2s)")))?;
    match unit {
        "ms" => Ok(std::time::Duration::from_millis(n)),
        "s" | "" => Ok(std::time::Duration::from_secs(n)),
        "m" => Ok(std::time::Duration::from_secs(60 * n)),
        _ => Err(ApiError::bad_request(format!("bad timeout `{s}` (e.g. 500ms, 2s)"))),
    }
}

/// The query of a request: the body's `query`, or `?q=`.
fn request_query(body: &Value, uri: &UriParams) -> Result<(Query, String), ApiError> {
    match (body.get("query"), &uri.q) {
        (Some(q), _) => Ok((translate(q)?, q.to_string())),
        (None, Some(q)) => Ok((
            tierdex::query::parse(q).map_err(|e| ApiError::from_engine(q, e.into()))?,
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
    if body.get("from").and_then(Value::as_u64).unwrap_or(0) != 0 {
        return Err(ApiError::bad_request("[from] other than 0 is not supported"));
    }
    let (query, text) = request_query(&body, &uri)?;
    let size = match body.get("size") {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| ApiError::bad_request("[size] must be a number"))? as usize,
        None => uri.size.unwrap_or(10),
    };
    if size > MAX_K {
        return Err(ApiError::bad_request(format!(
            "[size] {size} is above the limit of {MAX_K}"
        )));
    }
    let track = !matches!(body.get("track_total_hits"), Some(Value::Bool(false)));
    let mode = match (size, track) {
        (0, _) => Mode::Count,
        (_, true) => Mode::TopKAndCount,
        (_, false) => Mode::TopK,
    };
    let source = !matches!(body.get("_source"), Some(Value::Bool(false)));
    let highlight = body.get("highlight").map(|_| 150);
    let timeout = match body.get("timeout").and_then(Value::as_str).or(uri.timeout.as_deref()) {
        Some(t) => parse_timeout(t)?,
        None => state.config().default_timeout,
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
                hit["_source"] = json!({ "title": d.title, "body": d.body });
            }
            if let Some(hl) = &h.highlight {
                let mut m = Map::new();
                for (f, s) in [("title", &hl.title), ("body", &hl.body)] {
                    if !s.marks.is_empty() {
                        m.insert(f.into(), json!([s.render("<em>", "</em>")]));
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
    let (query, text) = request_query(&body, &uri)?;
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
