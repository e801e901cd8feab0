//! Elasticsearch's query DSL: a request body's `query`, `sort`,
//! `search_after` and `_source` as tierdex queries, sorts and filters.
//! The server's `_search` and `query-stream`'s JSON lines both read
//! requests here.
//!
//! Queries: `query_string` and `simple_query_string` (tierdex's query
//! language, with `default_field`/`fields` and `default_operator`),
//! `match` (`operator`, `minimum_should_match`), `match_phrase`,
//! `match_all`, `match_none`, `multi_match` (`best_fields` with
//! `tie_breaker`, `most_fields`; `operator`, `minimum_should_match`),
//! `dis_max` (`tie_breaker`), `ids` (`values`), `term`, `terms`, `range`
//! (`gt`, `gte`, `lt`, `lte`), `exists`, `bool` (`must`, `should`,
//! `filter`, `must_not`, `minimum_should_match`; a `bool` with only
//! `must_not` clauses, or none, matches every other document, as in
//! Elasticsearch) and `constant_score` (`filter`, `boost`).
//!
//! `minimum_should_match` is an integer (`3`; `-2`: all but 2 of the
//! optional clauses) or a percentage (`"75%"`, rounded down; `"-25%"`: all
//! but 25%, that part rounded down), as a number or a string. It counts a
//! `bool`'s `should` clauses, or a `match`'s analysed terms (`operator`
//! OR; in `multi_match`, each field's), as Elasticsearch does: a result
//! above their number matches nothing, 0 or below leaves the query as
//! without it (one `should` clause must match when there is no `must` or
//! `filter`), and a single term ignores it. Combinations (`"3<90%"`) are
//! an error, as is `minimum_should_match` in `query_string`.
//!
//! Any other key is an error naming it: nothing is ignored.

use std::ops::Bound;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::query::ast::{Clause, MinimumShouldMatch, Occur, Query};
use crate::query::limits::QueryLimits;
use crate::query::sort::{SortBy, SortField, SortValue};
use crate::schema::{Document, Field, Schema};

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// The field named `name` (`None` for `_all` and `*`: the default fields).
fn field(schema: &Schema, name: &str) -> Result<Option<Field>> {
    match name {
        "_all" | "*" => Ok(None),
        other => schema.field(other).map(Some).ok_or_else(|| {
            bad(format!(
                "unknown field `{other}` (fields: {})",
                schema.names().join(", ")
            ))
        }),
    }
}

fn must_field(schema: &Schema, kind: &str, name: &str) -> Result<Field> {
    field(schema, name)?.ok_or_else(|| bad(format!("[{kind}] needs a field, not `{name}`")))
}

/// A scalar as query text.
fn text(kind: &str, v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(bad(format!("[{kind}] takes a string, number or boolean, not {other}"))),
    }
}

/// The single `{"field": spec}` entry of a leaf query.
fn single<'a>(kind: &str, v: &'a Value) -> Result<(&'a String, &'a Value)> {
    v.as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
        .ok_or_else(|| bad(format!("[{kind}] takes one field: {{\"field\": ...}}")))
}

/// Checks that `o` holds only the keys in `allowed`.
fn only(kind: &str, o: &Map<String, Value>, allowed: &[&str]) -> Result<()> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(bad(format!(
            "[{kind}] does not support [{k}] (it takes: {})",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A `tie_breaker`: a number from 0 to 1 (0 when absent).
fn tie_breaker(kind: &str, v: Option<&Value>) -> Result<f32> {
    match v {
        None => Ok(0.0),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => Ok(t as f32),
            _ => Err(bad(format!("[{kind}] tie_breaker must be between 0 and 1, not {n}"))),
        },
        Some(other) => Err(bad(format!("[{kind}] tie_breaker must be a number, not {other}"))),
    }
}

fn boost(kind: &str, v: Option<&Value>) -> Result<Option<f32>> {
    match v {
        None => Ok(None),
        Some(b) => b
            .as_f64()
            .filter(|b| b.is_finite() && *b >= 0.0)
            .map(|b| Some(b as f32))
            .ok_or_else(|| bad(format!("[{kind}] boost must be a number ≥ 0, not {b}"))),
    }
}

/// A `minimum_should_match` value (`None` for `null`): an integer or a
/// percentage, as a number or a string.
fn minimum_should_match(kind: &str, v: &Value) -> Result<Option<MinimumShouldMatch>> {
    let parsed = match v {
        Value::Null => return Ok(None),
        Value::Number(n) => n
            .as_i64()
            .and_then(|i| i32::try_from(i).ok())
            .map(MinimumShouldMatch::Count),
        Value::String(text) => {
            let text = text.trim();
            match text.strip_suffix('%') {
                Some(p) => p.parse().ok().map(MinimumShouldMatch::Percent),
                None => text.parse().ok().map(MinimumShouldMatch::Count),
            }
        }
        _ => None,
    };
    match parsed {
        Some(min) => Ok(Some(min)),
        None => Err(bad(format!(
            "[{kind}] minimum_should_match {v} is not supported: it takes an integer (3, -2) or a percentage \
             (\"75%\", \"-25%\"){}",
            if v.as_str().is_some_and(|t| t.contains('<')) {
                ", not a combination"
            } else {
                ""
            }
        ))),
    }
}

/// `query` over `fields` instead of the default ones (clauses without a
/// field get each of them).
fn with_fields(query: Query, fields: &[Field]) -> Query {
    match query {
        Query::Term { field: None, text } if fields.len() == 1 => Query::Term {
            field: Some(fields[0]),
            text,
        },
        Query::Phrase { field: None, text } if fields.len() == 1 => Query::Phrase {
            field: Some(fields[0]),
            text,
        },
        q @ (Query::Term { field: None, .. } | Query::Phrase { field: None, .. }) => Query::Boolean(
            fields
                .iter()
                .map(|&f| Clause {
                    occur: Occur::Should,
                    query: with_fields(q.clone(), &[f]),
                })
                .collect(),
        ),
        Query::Boolean(clauses) => Query::Boolean(
            clauses
                .into_iter()
                .map(|c| Clause {
                    occur: c.occur,
                    query: with_fields(c.query, fields),
                })
                .collect(),
        ),
        other => other,
    }
}

/// `query` with its optional clauses required (`default_operator: AND`).
fn all_required(query: Query) -> Query {
    match query {
        Query::Boolean(clauses) => Query::Boolean(
            clauses
                .into_iter()
                .map(|c| Clause {
                    occur: if c.occur == Occur::Should { Occur::Must } else { c.occur },
                    query: all_required(c.query),
                })
                .collect(),
        ),
        other => other,
    }
}

fn clauses(
    schema: &Schema,
    limits: &QueryLimits,
    key: &str,
    v: &Value,
    occur: Occur,
    out: &mut Vec<Clause>,
) -> Result<()> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => vec![v],
        _ => return Err(bad(format!("[bool] `{key}` takes a query or a list of queries"))),
    };
    for q in items {
        out.push(Clause {
            occur,
            query: query(schema, limits, q)?,
        });
    }
    Ok(())
}

/// A query object (`{"match": {...}}`) over `schema`'s fields.
pub fn query(schema: &Schema, limits: &QueryLimits, v: &Value) -> Result<Query> {
    let (kind, body) = v
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
        .ok_or_else(|| bad("a query is an object with exactly one key, e.g. {\"match\": {...}}"))?;
    let obj = |what: &str| {
        body.as_object()
            .ok_or_else(|| bad(format!("[{kind}] takes an object{what}")))
    };
    match kind.as_str() {
        "query_string" | "simple_query_string" => {
            let o = obj("")?;
            only(kind, o, &["query", "default_field", "fields", "default_operator"])?;
            let text = o
                .get("query")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("[{kind}] needs a string `query`")))?;
            let mut q = crate::query::parser::parse_limited(text, schema, limits).map_err(Error::from)?;
            let mut names: Vec<&str> = Vec::new();
            if let Some(f) = o.get("default_field") {
                names.push(
                    f.as_str()
                        .ok_or_else(|| bad(format!("[{kind}] default_field must be a string")))?,
                );
            }
            if let Some(fs) = o.get("fields") {
                let list = fs
                    .as_array()
                    .ok_or_else(|| bad(format!("[{kind}] fields must be a list")))?;
                for f in list {
                    names.push(
                        f.as_str()
                            .ok_or_else(|| bad(format!("[{kind}] fields must be strings")))?,
                    );
                }
            }
            let mut fields = Vec::new();
            for n in names {
                if let Some(f) = field(schema, n)? {
                    fields.push(f);
                }
            }
            if !fields.is_empty() {
                q = with_fields(q, &fields);
            }
            match o.get("default_operator") {
                None => {}
                Some(Value::String(op)) if op.eq_ignore_ascii_case("or") => {}
                Some(Value::String(op)) if op.eq_ignore_ascii_case("and") => q = all_required(q),
                Some(other) => return Err(bad(format!("[{kind}] default_operator must be AND or OR, not {other}"))),
            }
            Ok(q)
        }
        "match" | "match_phrase" => {
            let (name, spec) = single(kind, body)?;
            let f = field(schema, name)?;
            let (raw, operator, min) = match spec {
                Value::Object(o) => {
                    let allowed: &[&str] = if kind == "match" {
                        &["query", "operator", "minimum_should_match"]
                    } else {
                        &["query"]
                    };
                    only(kind, o, allowed)?;
                    let q = o.get("query").ok_or_else(|| bad(format!("[{kind}] needs a `query`")))?;
                    (
                        text(kind, q)?,
                        o.get("operator")
                            .and_then(Value::as_str)
                            .unwrap_or("or")
                            .to_ascii_lowercase(),
                        match o.get("minimum_should_match") {
                            Some(v) => minimum_should_match(kind, v)?,
                            None => None,
                        },
                    )
                }
                other => (text(kind, other)?, "or".into(), None),
            };
            if kind == "match_phrase" {
                return Ok(Query::Boolean(vec![Clause {
                    occur: Occur::Should,
                    query: Query::Phrase { field: f, text: raw },
                }]));
            }
            let occur = match operator.as_str() {
                "or" => Occur::Should,
                "and" => Occur::Must,
                other => return Err(bad(format!("[match] unknown operator `{other}`"))),
            };
            // A typed field's match is its exact value.
            if f.is_some_and(|f| schema.entry(f).is_some_and(|e| e.ty.column_kind().is_some())) {
                return Ok(Query::Term { field: f, text: raw });
            }
            match min {
                // The minimum counts the analysed terms: the planner's.
                Some(min) if occur == Occur::Should => {
                    return Ok(Query::MinShouldMatch {
                        query: Box::new(Query::Term { field: f, text: raw }),
                        min,
                    })
                }
                // Elasticsearch counts no optional clause: only a positive
                // count has an effect, matching nothing.
                Some(min) if min.resolve(0) > 0 => {
                    return Err(bad(format!(
                        "[match] minimum_should_match {} needs operator OR (with AND no term is optional)",
                        match min {
                            MinimumShouldMatch::Count(c) => c.to_string(),
                            MinimumShouldMatch::Percent(p) => format!("{p}%"),
                        }
                    )))
                }
                _ => {}
            }
            Ok(Query::Boolean(
                raw.split_whitespace()
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
        "match_all" => {
            let o = obj("")?;
            only(kind, o, &["boost"])?;
            Ok(match boost(kind, o.get("boost"))? {
                Some(b) => Query::constant_score(Query::MatchAll, b),
                None => Query::MatchAll,
            })
        }
        "match_none" => {
            only(kind, obj("")?, &[])?;
            Ok(Query::Boolean(Vec::new()))
        }
        "dis_max" => {
            let o = obj("")?;
            only(kind, o, &["queries", "tie_breaker"])?;
            let qs = match o.get("queries") {
                Some(Value::Array(a)) if !a.is_empty() => a
                    .iter()
                    .map(|q| query(schema, limits, q))
                    .collect::<Result<Vec<Query>>>()?,
                _ => return Err(bad("[dis_max] needs `queries`, a non-empty list of queries")),
            };
            Ok(Query::DisMax {
                queries: qs,
                tie_bits: tie_breaker(kind, o.get("tie_breaker"))?.to_bits(),
            })
        }
        "multi_match" => {
            let o = obj("")?;
            only(
                kind,
                o,
                &[
                    "query",
                    "fields",
                    "type",
                    "operator",
                    "minimum_should_match",
                    "tie_breaker",
                ],
            )?;
            let text = match o.get("query") {
                Some(q) => q.clone(),
                None => return Err(bad("[multi_match] needs a `query`")),
            };
            let fields: Vec<&str> = match o.get("fields") {
                Some(Value::Array(a)) if !a.is_empty() => a
                    .iter()
                    .map(|f| {
                        f.as_str()
                            .ok_or_else(|| bad(format!("[multi_match] fields are names, not {f}")))
                    })
                    .collect::<Result<Vec<&str>>>()?,
                Some(Value::String(f)) => vec![f.as_str()],
                _ => return Err(bad("[multi_match] needs `fields`, a non-empty list of field names")),
            };
            if let Some(f) = fields.iter().find(|f| f.contains('^') || f.contains('*')) {
                return Err(bad(format!(
                    "[multi_match] field `{f}`: per-field boosts (`^`) and wildcards are not supported; name each field"
                )));
            }
            let mut per_field = Vec::with_capacity(fields.len());
            for f in &fields {
                let mut spec = Map::new();
                spec.insert("query".into(), text.clone());
                for key in ["operator", "minimum_should_match"] {
                    if let Some(v) = o.get(key) {
                        spec.insert(key.into(), v.clone());
                    }
                }
                let m = serde_json::json!({ "match": { *f: Value::Object(spec) } });
                per_field.push(query(schema, limits, &m)?);
            }
            let ty = match o.get("type") {
                None => "best_fields",
                Some(Value::String(t)) => t.as_str(),
                Some(other) => return Err(bad(format!("[multi_match] type must be a string, not {other}"))),
            };
            match ty {
                "best_fields" => Ok(Query::DisMax {
                    queries: per_field,
                    tie_bits: tie_breaker(kind, o.get("tie_breaker"))?.to_bits(),
                }),
                "most_fields" => {
                    if o.contains_key("tie_breaker") {
                        return Err(bad("[multi_match] tie_breaker applies to type best_fields only"));
                    }
                    Ok(Query::Boolean(
                        per_field
                            .into_iter()
                            .map(|q| Clause {
                                occur: Occur::Should,
                                query: q,
                            })
                            .collect(),
                    ))
                }
                other => Err(bad(format!(
                    "[multi_match] type `{other}` is not supported (best_fields, most_fields)"
                ))),
            }
        }
        "ids" => {
            let o = obj("{\"values\": [..]}")?;
            only(kind, o, &["values", "boost"])?;
            let values = match o.get("values") {
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s.clone()),
                        Value::Number(n) => Ok(n.to_string()),
                        other => Err(bad(format!("[ids] values are strings, not {other}"))),
                    })
                    .collect::<Result<Vec<String>>>()?,
                Some(other) => return Err(bad(format!("[ids] values must be a list, not {other}"))),
                None => return Err(bad("[ids] needs `values`")),
            };
            Ok(match boost(kind, o.get("boost"))? {
                Some(b) => Query::constant_score(Query::Ids(values), b),
                None => Query::Ids(values),
            })
        }
        "term" => {
            let (name, spec) = single(kind, body)?;
            let value = match spec {
                Value::Object(o) => {
                    only(kind, o, &["value"])?;
                    text(kind, o.get("value").ok_or_else(|| bad("[term] needs a `value`"))?)?
                }
                other => text(kind, other)?,
            };
            Ok(match field(schema, name)? {
                Some(f) => Query::Terms {
                    field: f,
                    values: vec![value],
                },
                // `_all`: the default fields.
                None => Query::Term {
                    field: None,
                    text: value,
                },
            })
        }
        "terms" => {
            let (name, spec) = single(kind, body)?;
            let f = must_field(schema, kind, name)?;
            let list = spec
                .as_array()
                .ok_or_else(|| bad("[terms] takes a list of values: {\"field\": [..]}"))?;
            Ok(Query::Terms {
                field: f,
                values: list.iter().map(|v| text(kind, v)).collect::<Result<_>>()?,
            })
        }
        "range" => {
            let (name, spec) = single(kind, body)?;
            let f = must_field(schema, kind, name)?;
            let o = spec
                .as_object()
                .ok_or_else(|| bad("[range] takes {\"field\": {\"gte\": .., \"lt\": ..}}"))?;
            only(kind, o, &["gt", "gte", "lt", "lte"])?;
            let (mut lower, mut upper) = (Bound::Unbounded, Bound::Unbounded);
            for (k, v) in o {
                let t = text(kind, v)?;
                match k.as_str() {
                    "gte" => lower = Bound::Included(t),
                    "gt" => lower = Bound::Excluded(t),
                    "lte" => upper = Bound::Included(t),
                    _ => upper = Bound::Excluded(t),
                }
            }
            Ok(Query::Range { field: f, lower, upper })
        }
        "exists" => {
            let o = obj("")?;
            only(kind, o, &["field"])?;
            let name = o
                .get("field")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("[exists] needs a string `field`"))?;
            Ok(Query::Exists {
                field: must_field(schema, kind, name)?,
            })
        }
        "constant_score" => {
            let o = obj("")?;
            only(kind, o, &["filter", "boost"])?;
            let inner = query(
                schema,
                limits,
                o.get("filter")
                    .ok_or_else(|| bad("[constant_score] needs a `filter`"))?,
            )?;
            Ok(Query::constant_score(
                inner,
                boost(kind, o.get("boost"))?.unwrap_or(1.0),
            ))
        }
        "bool" => {
            let o = obj("")?;
            let mut out = Vec::new();
            let mut min = None;
            for (k, v) in o {
                match k.as_str() {
                    "must" => clauses(schema, limits, k, v, Occur::Must, &mut out)?,
                    "should" => clauses(schema, limits, k, v, Occur::Should, &mut out)?,
                    "must_not" => clauses(schema, limits, k, v, Occur::MustNot, &mut out)?,
                    "filter" => clauses(schema, limits, k, v, Occur::Filter, &mut out)?,
                    "minimum_should_match" => min = minimum_should_match(kind, v)?,
                    other => {
                        return Err(bad(format!(
                            "[bool] `{other}` is not supported (must, should, filter, must_not, minimum_should_match)"
                        )))
                    }
                }
            }
            // Elasticsearch: without a required or optional clause, a bool
            // matches every document its `must_not` clauses leave (score 0),
            // whatever its minimum.
            if !out.iter().any(|c| c.occur != Occur::MustNot) {
                out.push(Clause {
                    occur: Occur::Filter,
                    query: Query::MatchAll,
                });
                return Ok(Query::Boolean(out));
            }
            Ok(match min {
                Some(min) => Query::MinShouldMatch {
                    query: Box::new(Query::Boolean(out)),
                    min,
                },
                None => Query::Boolean(out),
            })
        }
        other => Err(bad(format!(
            "query type [{other}] is not supported (query_string, simple_query_string, match, match_phrase, \
             multi_match, match_all, match_none, ids, term, terms, range, exists, bool, dis_max, constant_score)"
        ))),
    }
}

/// A `sort` value: a list (or one) of `"_score"`, `"_doc"`, `"field"`,
/// `{"field": "asc"|"desc"}` or `{"field": {"order", "missing": "_first"|
/// "_last", "mode": "min"|"max"}}`.
pub fn sort(schema: &Schema, v: &Value) -> Result<Vec<SortField>> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let (name, spec) = match item {
            Value::String(s) => (s.as_str(), None),
            Value::Object(o) if o.len() == 1 => {
                let (k, v) = o.iter().next().expect("one entry");
                (k.as_str(), Some(v))
            }
            other => {
                return Err(bad(format!(
                    "[sort] entries are a field name or {{\"field\": ..}}, not {other}"
                )))
            }
        };
        let by = match name {
            "_score" => SortBy::Score,
            // One shard per index: its document order is the index's.
            "_doc" | "_shard_doc" => SortBy::Doc,
            other => SortBy::Field(must_field(schema, "sort", other)?),
        };
        let mut f = match by {
            SortBy::Score => SortField::desc(by),
            _ => SortField::asc(by),
        };
        let set_order = |f: &mut SortField, o: &str| -> Result<()> {
            match o {
                "asc" => *f = SortField::asc(f.by),
                "desc" => *f = SortField::desc(f.by),
                other => return Err(bad(format!("[sort] order must be asc or desc, not `{other}`"))),
            }
            Ok(())
        };
        match spec {
            None => {}
            Some(Value::String(o)) => set_order(&mut f, o)?,
            Some(Value::Object(o)) => {
                only("sort", o, &["order", "missing", "mode"])?;
                if let Some(ord) = o.get("order") {
                    set_order(&mut f, ord.as_str().unwrap_or("?"))?;
                }
                match o.get("missing").map(|m| m.as_str()) {
                    None | Some(Some("_last")) => {}
                    Some(Some("_first")) => f.missing_first = true,
                    Some(_) => return Err(bad("[sort] missing must be _first or _last")),
                }
                match o.get("mode").map(|m| m.as_str()) {
                    None => {}
                    Some(Some("min")) => f.max = false,
                    Some(Some("max")) => f.max = true,
                    Some(_) => return Err(bad("[sort] mode must be min or max")),
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "[sort] `{name}` takes \"asc\", \"desc\" or an object, not {other}"
                )))
            }
        }
        out.push(f);
    }
    Ok(out)
}

/// A `search_after` value: a hit's sort values.
pub fn search_after(v: &Value) -> Result<Vec<SortValue>> {
    let list = v
        .as_array()
        .ok_or_else(|| bad("[search_after] takes the list of a hit's sort values"))?;
    list.iter()
        .map(|x| match x {
            Value::Null => Ok(SortValue::Missing),
            Value::String(s) => Ok(SortValue::Keyword(s.clone())),
            Value::Bool(b) => Ok(SortValue::Long(*b as i64)),
            Value::Number(n) => Ok(match n.as_i64() {
                Some(i) => SortValue::Long(i),
                None => SortValue::Double(n.as_f64().unwrap_or(f64::NAN)),
            }),
            other => Err(bad(format!(
                "[search_after] values are numbers, strings or null, not {other}"
            ))),
        })
        .collect()
}

/// Which parts of `_source` a hit shows (`_source`: a boolean, a pattern,
/// a list of them, or `{"includes": [..], "excludes": [..]}`; `*` matches
/// any characters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFilter {
    /// No source at all.
    pub disabled: bool,
    /// Paths kept (all when empty).
    pub includes: Vec<String>,
    /// Paths left out.
    pub excludes: Vec<String>,
}

impl SourceFilter {
    /// The filter a request's `_source` asks for.
    pub fn parse(v: &Value) -> Result<SourceFilter> {
        let list = |v: &Value| -> Result<Vec<String>> {
            match v {
                Value::String(s) => Ok(vec![s.clone()]),
                Value::Array(a) => a
                    .iter()
                    .map(|x| {
                        x.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| bad("[_source] patterns are strings"))
                    })
                    .collect(),
                other => Err(bad(format!(
                    "[_source] takes true, false, patterns or includes/excludes, not {other}"
                ))),
            }
        };
        match v {
            Value::Bool(b) => Ok(SourceFilter {
                disabled: !b,
                ..Default::default()
            }),
            Value::Object(o) => {
                only("_source", o, &["includes", "excludes"])?;
                Ok(SourceFilter {
                    disabled: false,
                    includes: o.get("includes").map(list).transpose()?.unwrap_or_default(),
                    excludes: o.get("excludes").map(list).transpose()?.unwrap_or_default(),
                })
            }
            other => Ok(SourceFilter {
                includes: list(other)?,
                ..Default::default()
            }),
        }
    }

    /// `doc`'s source as this filter shows it (`None`: disabled).
    pub fn apply(&self, doc: &Document) -> Option<Value> {
        if self.disabled {
            return None;
        }
        let mut out = Map::new();
        for (k, v) in doc.fields.iter() {
            if let Some(v) = self.keep(k, v) {
                out.insert(k.clone(), v);
            }
        }
        Some(Value::Object(out))
    }

    /// The part of `v` (at `path`) the filter keeps.
    fn keep(&self, path: &str, v: &Value) -> Option<Value> {
        if self.excludes.iter().any(|p| glob(p, path)) {
            return None;
        }
        let included = self.includes.is_empty() || self.includes.iter().any(|p| glob(p, path));
        match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    if let Some(x) = self.keep(&format!("{path}.{k}"), x) {
                        out.insert(k.clone(), x);
                    }
                }
                // An object is kept when it is included or holds included parts.
                (included || !out.is_empty()).then_some(Value::Object(out))
            }
            _ => included.then(|| v.clone()),
        }
    }
}

/// What a request's `highlight` asks for: which fields, the tags around
/// each match, and how much of each field a snippet shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighlightSpec {
    /// Field names or `*` patterns (empty: every stored text field).
    pub fields: Vec<String>,
    /// Put before each match.
    pub pre_tag: String,
    /// Put after each match.
    pub post_tag: String,
    /// Bytes of a snippet (`usize::MAX`: the whole field).
    pub max_bytes: usize,
}

impl Default for HighlightSpec {
    fn default() -> Self {
        HighlightSpec {
            fields: Vec::new(),
            pre_tag: "<em>".into(),
            post_tag: "</em>".into(),
            max_bytes: 150,
        }
    }
}

impl HighlightSpec {
    /// The spec of a `highlight` object: `fields` (an object or a list of
    /// one-entry objects, names or `*` patterns, each with `{}`),
    /// `pre_tags`/`post_tags` (one tag each), `fragment_size` (bytes),
    /// `number_of_fragments` (1, or 0 for the whole field) and
    /// `require_field_match` (true: a term marks only its own field).
    /// Anything else is an error naming it.
    pub fn parse(schema: &Schema, v: &Value) -> Result<HighlightSpec> {
        let o = v
            .as_object()
            .ok_or_else(|| bad(format!("[highlight] takes an object, not {v}")))?;
        const KEYS: &[&str] = &[
            "fields",
            "pre_tags",
            "post_tags",
            "fragment_size",
            "number_of_fragments",
            "require_field_match",
        ];
        only("highlight", o, KEYS)?;
        let mut spec = HighlightSpec::default();
        let mut named = |name: &str, opts: &Value| -> Result<()> {
            match opts {
                Value::Object(m) if m.is_empty() => {}
                other => {
                    return Err(bad(format!(
                        "[highlight] options per field are not supported (field `{name}` has {other}); \
                         give them once at the top of [highlight]"
                    )))
                }
            }
            if !name.contains('*') {
                let f = schema
                    .field(name)
                    .ok_or_else(|| bad(format!("[highlight] field `{name}` is not in the mapping")))?;
                if !schema.stored(f) {
                    return Err(bad(format!(
                        "[highlight] field `{name}` has no stored text to highlight"
                    )));
                }
            }
            spec.fields.push(name.to_string());
            Ok(())
        };
        match o.get("fields") {
            None => {}
            Some(Value::Object(m)) => {
                for (name, opts) in m {
                    named(name, opts)?;
                }
            }
            Some(Value::Array(a)) => {
                for item in a {
                    match item.as_object() {
                        Some(m) if m.len() == 1 => {
                            let (name, opts) = m.iter().next().expect("one entry");
                            named(name, opts)?;
                        }
                        _ => {
                            return Err(bad(format!(
                                "[highlight.fields] entries are {{\"field\": {{}}}}, not {item}"
                            )))
                        }
                    }
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "[highlight.fields] takes an object of field names, not {other}"
                )))
            }
        }
        let tag = |key: &str| -> Result<Option<String>> {
            match o.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => Ok(a[0].as_str().map(str::to_string)),
                Some(other) => Err(bad(format!(
                    "[highlight.{key}] takes one tag (a string or a list of one), not {other}"
                ))),
            }
        };
        if let Some(t) = tag("pre_tags")? {
            spec.pre_tag = t;
        }
        if let Some(t) = tag("post_tags")? {
            spec.post_tag = t;
        }
        if let Some(v) = o.get("fragment_size") {
            spec.max_bytes = v
                .as_u64()
                .filter(|&n| n >= 1)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .ok_or_else(|| bad(format!("[highlight.fragment_size] must be a whole number ≥ 1, not {v}")))?;
        }
        match o.get("number_of_fragments") {
            None => {}
            Some(v) if v.as_u64() == Some(1) => {}
            Some(v) if v.as_u64() == Some(0) => spec.max_bytes = usize::MAX,
            Some(v) => {
                return Err(bad(format!(
                    "[highlight.number_of_fragments] must be 1 (one snippet per field) or 0 (the whole field), not {v}"
                )))
            }
        }
        match o.get("require_field_match") {
            None | Some(Value::Bool(true)) => {}
            Some(v) => {
                return Err(bad(format!(
                    "[highlight.require_field_match] can only be true (a term marks its own field), not {v}"
                )))
            }
        }
        Ok(spec)
    }

    /// Whether field `name` is highlighted.
    pub fn wants(&self, name: &str) -> bool {
        self.fields.is_empty() || self.fields.iter().any(|p| glob(p, name))
    }

    /// A hit's `highlight` object: each wanted field with a match, its
    /// snippet with the tags around the matches.
    pub fn render(&self, h: &crate::query::highlight::Highlight) -> Value {
        let mut m = Map::new();
        for (f, s) in &h.fields {
            if !s.marks.is_empty() && self.wants(f) {
                m.insert(
                    f.clone(),
                    Value::Array(vec![Value::String(s.render(&self.pre_tag, &self.post_tag))]),
                );
            }
        }
        Value::Object(m)
    }
}

/// Whether `pattern` (with `*` for any characters; a pattern matching an
/// object's path matches everything under it) matches `path`.
fn glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), path.as_bytes())
        || path
            .char_indices()
            .filter(|&(_, c)| c == '.')
            .any(|(i, _)| go(pattern.as_bytes(), &path.as_bytes()[..i]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::from_json(
            &json!({"properties": {"title": {"type": "text"}, "body": {"type": "text"},
                "tag": {"type": "keyword"}, "n": {"type": "long"}}})
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn queries_translate_or_name_what_is_not_supported() {
        let s = schema();
        let l = QueryLimits::default();
        let q = |v: Value| query(&s, &l, &v);
        let tag = s.field("tag").unwrap();
        assert_eq!(
            q(json!({"term": {"tag": {"value": "x"}}})).unwrap(),
            Query::Terms {
                field: tag,
                values: vec!["x".into()]
            }
        );
        assert_eq!(
            q(json!({"range": {"n": {"gte": 3, "lt": "9"}}})).unwrap(),
            Query::Range {
                field: s.field("n").unwrap(),
                lower: Bound::Included("3".into()),
                upper: Bound::Excluded("9".into())
            }
        );
        assert_eq!(q(json!({"match_all": {}})).unwrap(), Query::MatchAll);
        assert_eq!(
            q(json!({"ids": {"values": ["a", 7]}})).unwrap(),
            Query::Ids(vec!["a".into(), "7".into()])
        );
        let mm = q(json!({"multi_match": {"query": "a b", "fields": ["body", "tag"], "tie_breaker": 0.3}})).unwrap();
        let Query::DisMax { queries, tie_bits } = mm else {
            panic!("{mm:?}")
        };
        assert_eq!((queries.len(), f32::from_bits(tie_bits)), (2, 0.3));
        assert_eq!(queries[0], q(json!({"match": {"body": "a b"}})).unwrap());
        let most = q(json!({"multi_match": {"query": "a", "fields": ["body"], "type": "most_fields"}})).unwrap();
        assert_eq!(
            most,
            Query::Boolean(vec![Clause {
                occur: Occur::Should,
                query: q(json!({"match": {"body": "a"}})).unwrap()
            }])
        );
        let dm = q(json!({"dis_max": {"queries": [{"match_all": {}}, {"match_none": {}}]}})).unwrap();
        assert!(matches!(dm, Query::DisMax { ref queries, tie_bits: 0 } if queries.len() == 2));
        for (body, says) in [
            (
                json!({"multi_match": {"query": "a", "fields": ["body^2"]}}),
                "per-field boosts",
            ),
            (
                json!({"multi_match": {"query": "a", "fields": ["body"], "type": "phrase"}}),
                "type `phrase`",
            ),
            (json!({"multi_match": {"query": "a", "fields": []}}), "needs `fields`"),
            (json!({"multi_match": {"fields": ["body"]}}), "needs a `query`"),
            (
                json!({"multi_match": {"query": "a", "fields": ["body"], "tie_breaker": 2}}),
                "between 0 and 1",
            ),
            (
                json!({"multi_match": {"query": "a", "fields": ["body"], "slop": 2}}),
                "does not support [slop]",
            ),
            (json!({"dis_max": {"queries": []}}), "non-empty list"),
            (json!({"ids": {"values": "a"}}), "must be a list"),
            (json!({"ids": {}}), "needs `values`"),
            (json!({"ids": {"values": [], "type": "x"}}), "does not support [type]"),
            (json!({"ids": {"values": [{"a": 1}]}}), "values are strings"),
        ] {
            let e = q(body.clone()).unwrap_err().to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
        let b =
            q(json!({"bool": {"filter": [{"exists": {"field": "tag"}}], "must": {"match": {"body": "a b"}}}})).unwrap();
        let Query::Boolean(c) = b else { panic!() };
        assert_eq!(c.len(), 2);
        assert!(c.iter().any(|c| c.occur == Occur::Filter));
        let qs =
            q(json!({"query_string": {"query": "a b", "default_field": "title", "default_operator": "AND"}})).unwrap();
        let t = Some(s.field("title").unwrap());
        assert_eq!(
            qs,
            Query::Boolean(vec![
                Clause {
                    occur: Occur::Must,
                    query: Query::Term {
                        field: t,
                        text: "a".into()
                    }
                },
                Clause {
                    occur: Occur::Must,
                    query: Query::Term {
                        field: t,
                        text: "b".into()
                    }
                },
            ])
        );
        for (bad, says) in [
            (json!({"fuzzy": {"a": "b"}}), "query type [fuzzy]"),
            (
                json!({"range": {"n": {"gte": 1, "format": "x"}}}),
                "does not support [format]",
            ),
            (
                json!({"match": {"body": {"query": "a", "fuzziness": 2}}}),
                "does not support [fuzziness]",
            ),
            (json!({"bool": {"must": [], "boost": 2}}), "`boost` is not supported"),
            (json!({"term": {"nope": "x"}}), "unknown field `nope`"),
            (
                json!({"bool": {"should": [{"match_all": {}}], "minimum_should_match": "3<90%"}}),
                "minimum_should_match \"3<90%\" is not supported",
            ),
        ] {
            let e = q(bad.clone()).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn minimum_should_match_in_every_form() {
        let s = schema();
        let l = QueryLimits::default();
        let q = |v: Value| query(&s, &l, &v);
        let body = Some(s.field("body").unwrap());
        let term = |t: &str| Query::Term {
            field: body,
            text: t.into(),
        };
        let clause = |occur, t: &str| Clause { occur, query: term(t) };
        let wrapped = |clauses: Vec<Clause>, min| Query::MinShouldMatch {
            query: Box::new(Query::Boolean(clauses)),
            min,
        };
        let bool_with = |min: Value| {
            q(
                json!({"bool": {"should": [{"term": {"_all": "x"}}, {"term": {"_all": "y"}}], "minimum_should_match": min}}),
            )
        };
        let xy = vec![
            Clause {
                occur: Occur::Should,
                query: Query::Term {
                    field: None,
                    text: "x".into(),
                },
            },
            Clause {
                occur: Occur::Should,
                query: Query::Term {
                    field: None,
                    text: "y".into(),
                },
            },
        ];
        use MinimumShouldMatch::{Count, Percent};
        for (min, want) in [
            (json!(2), Count(2)),
            (json!("2"), Count(2)),
            (json!(" +2 "), Count(2)),
            (json!(-1), Count(-1)),
            (json!("-1"), Count(-1)),
            (json!(0), Count(0)),
            (json!(7), Count(7)),
            (json!("75%"), Percent(75)),
            (json!(" 50%"), Percent(50)),
            (json!("-25%"), Percent(-25)),
            (json!("0%"), Percent(0)),
            (json!("150%"), Percent(150)),
        ] {
            assert_eq!(bool_with(min.clone()).unwrap(), wrapped(xy.clone(), want), "{min}");
        }
        assert_eq!(bool_with(Value::Null).unwrap(), Query::Boolean(xy.clone()));
        // Every clause kind is kept under the minimum.
        let mixed = q(json!({"bool": {
            "must": {"term": {"_all": "m"}}, "filter": [{"exists": {"field": "tag"}}],
            "must_not": {"term": {"_all": "n"}}, "should": [{"match_all": {}}, {"match_none": {}}],
            "minimum_should_match": "-50%"}}))
        .unwrap();
        let Query::MinShouldMatch { query: inner, min } = mixed else {
            panic!("{mixed:?}")
        };
        let Query::Boolean(c) = *inner else { panic!() };
        assert_eq!((c.len(), min), (5, Percent(-50)));
        // Without a `must`, `filter` or `should` clause the minimum has no
        // effect (Elasticsearch drops it): every document but the excluded.
        for body in [
            json!({"bool": {"must_not": {"term": {"_all": "n"}}, "minimum_should_match": 2}}),
            json!({"bool": {"minimum_should_match": "50%"}}),
        ] {
            let got = q(body.clone()).unwrap();
            let Query::Boolean(c) = &got else {
                panic!("{body}: {got:?}")
            };
            assert_eq!(
                c.last().map(|c| (&c.query, c.occur)),
                Some((&Query::MatchAll, Occur::Filter))
            );
        }
        // `match`: the analysed terms of an OR are the optional clauses.
        assert_eq!(
            q(json!({"match": {"body": {"query": "a b c", "minimum_should_match": "67%"}}})).unwrap(),
            Query::MinShouldMatch {
                query: Box::new(term("a b c")),
                min: Percent(67)
            }
        );
        let plain = q(json!({"match": {"body": {"query": "a b c", "operator": "and"}}})).unwrap();
        assert_eq!(
            plain,
            Query::Boolean(vec![
                clause(Occur::Must, "a"),
                clause(Occur::Must, "b"),
                clause(Occur::Must, "c")
            ])
        );
        for min in [json!("100%"), json!(0), json!(-1), Value::Null] {
            let v = json!({"match": {"body": {"query": "a b c", "operator": "AND", "minimum_should_match": min}}});
            assert_eq!(q(v).unwrap(), plain, "{min}");
        }
        let n = s.field("n").unwrap();
        assert_eq!(
            q(json!({"match": {"n": {"query": 5, "minimum_should_match": 2}}})).unwrap(),
            Query::Term {
                field: Some(n),
                text: "5".into()
            }
        );
        let mm = q(
            json!({"multi_match": {"query": "a b c", "fields": ["body", "title"], "type": "most_fields",
            "minimum_should_match": 2}}),
        )
        .unwrap();
        let Query::Boolean(per_field) = mm else {
            panic!("{mm:?}")
        };
        assert_eq!(per_field.len(), 2);
        assert!(per_field
            .iter()
            .all(|c| matches!(&c.query, Query::MinShouldMatch { min: Count(2), .. })));
        for (body, says) in [
            (
                json!({"bool": {"should": [], "minimum_should_match": "3<90%"}}),
                "not a combination",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "2<-25% 9<-3"}}),
                "not a combination",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "abc"}}),
                "\"abc\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": 2.5}}),
                "2.5 is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "2.5"}}),
                "\"2.5\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "75%%"}}),
                "\"75%%\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "75 %"}}),
                "\"75 %\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": "%"}}),
                "\"%\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": ""}}),
                "\"\" is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": true}}),
                "true is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": [1]}}),
                "[1] is not supported",
            ),
            (
                json!({"bool": {"should": [], "minimum_should_match": 3_000_000_000u64}}),
                "3000000000 is not supported",
            ),
            (
                json!({"match": {"body": {"query": "a b", "minimum_should_match": "1<2"}}}),
                "[match] minimum_should_match \"1<2\"",
            ),
            (
                json!({"match": {"body": {"query": "a b", "operator": "and", "minimum_should_match": 2}}}),
                "needs operator OR",
            ),
            (
                json!({"multi_match": {"query": "a", "fields": ["body"], "minimum_should_match": {}}}),
                "minimum_should_match {} is not supported",
            ),
            (
                json!({"query_string": {"query": "a b", "minimum_should_match": 1}}),
                "does not support [minimum_should_match]",
            ),
            (
                json!({"match_phrase": {"body": {"query": "a b", "minimum_should_match": 1}}}),
                "does not support [minimum_should_match]",
            ),
        ] {
            let e = q(body.clone()).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{body}: {e:?}");
            let e = e.to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    #[test]
    fn sorts_and_search_after() {
        let s = schema();
        let n = s.field("n").unwrap();
        let got = sort(
            &s,
            &json!(["_score", {"n": {"order": "desc", "missing": "_first", "mode": "min"}}, "tag"]),
        )
        .unwrap();
        assert_eq!(got[0], SortField::desc(SortBy::Score));
        assert_eq!(
            got[1],
            SortField {
                by: SortBy::Field(n),
                descending: true,
                missing_first: true,
                max: false
            }
        );
        assert_eq!(got[2], SortField::asc(SortBy::Field(s.field("tag").unwrap())));
        assert!(sort(&s, &json!([{"n": "up"}])).is_err());
        assert_eq!(
            search_after(&json!([1, 2.5, "x", null])).unwrap(),
            vec![
                SortValue::Long(1),
                SortValue::Double(2.5),
                SortValue::Keyword("x".into()),
                SortValue::Missing
            ]
        );
    }

    #[test]
    fn source_filters() {
        let d: Document =
            serde_json::from_value(json!({"id": "1", "a": 1, "user": {"name": "x", "age": 3}, "tags": ["p"]})).unwrap();
        let f = |v: Value| SourceFilter::parse(&v).unwrap().apply(&d);
        assert_eq!(f(json!(false)), None);
        assert_eq!(f(json!("user.name")), Some(json!({"user": {"name": "x"}})));
        assert_eq!(
            f(json!({"includes": ["user"], "excludes": ["*.age"]})),
            Some(json!({"user": {"name": "x"}}))
        );
        assert_eq!(f(json!(["a", "t*"])), Some(json!({"a": 1, "tags": ["p"]})));
        assert_eq!(
            f(json!(true)),
            Some(json!({"a": 1, "user": {"name": "x", "age": 3}, "tags": ["p"]}))
        );
    }

    #[test]
    fn highlight_specs_parse_or_name_what_is_wrong() {
        let s = schema();
        let p = |v: Value| HighlightSpec::parse(&s, &v);
        assert_eq!(p(json!({})).unwrap(), HighlightSpec::default());
        let h = p(
            json!({"fields": {"body": {}, "ti*": {}}, "pre_tags": ["<b>"], "post_tags": "</b>",
            "fragment_size": 40, "require_field_match": true}),
        )
        .unwrap();
        assert_eq!(h.fields, vec!["body".to_string(), "ti*".to_string()]);
        assert_eq!(
            (h.pre_tag.as_str(), h.post_tag.as_str(), h.max_bytes),
            ("<b>", "</b>", 40)
        );
        assert!(h.wants("body") && h.wants("title") && !h.wants("tag"));
        assert!(HighlightSpec::default().wants("anything"));
        let h = p(json!({"fields": [{"title": {}}], "number_of_fragments": 0})).unwrap();
        assert_eq!((h.fields.len(), h.max_bytes), (1, usize::MAX));
        for (bad, says) in [
            (json!([]), "takes an object"),
            (json!({"type": "fvh"}), "[type]"),
            (json!({"fields": {"nope": {}}}), "`nope` is not in the mapping"),
            (json!({"fields": {"tag": {}}}), "no stored text"),
            (json!({"fields": {"body": {"fragment_size": 5}}}), "per field"),
            (json!({"fields": "body"}), "object of field names"),
            (json!({"fields": [{"a": {}, "b": {}}]}), "entries are"),
            (json!({"pre_tags": ["<a>", "<b>"]}), "one tag"),
            (json!({"fragment_size": 0}), "≥ 1"),
            (json!({"number_of_fragments": 3}), "must be 1"),
            (json!({"require_field_match": false}), "only be true"),
        ] {
            let e = p(bad.clone()).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let hl = crate::query::highlight::Highlight {
            fields: vec![
                (
                    "title".into(),
                    crate::query::highlight::Snippet {
                        text: "a fig".into(),
                        marks: vec![(2, 5)],
                    },
                ),
                (
                    "body".into(),
                    crate::query::highlight::Snippet {
                        text: "no match".into(),
                        marks: vec![],
                    },
                ),
            ],
        };
        let spec = p(json!({"pre_tags": "[", "post_tags": "]"})).unwrap();
        assert_eq!(spec.render(&hl), json!({"title": ["a [fig]"]}));
        let spec = p(json!({"fields": {"body": {}}})).unwrap();
        assert_eq!(spec.render(&hl), json!({}));
    }
}
