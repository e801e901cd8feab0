//! The protocol's structured queries (`bench/PROTOCOL.md`, "Structured (JSON)
//! queries"): an Elasticsearch request-body subset, `{"query": Q, "sort":
//! [...]}`, turned into a tantivy query and sort keys.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Bound;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, EmptyQuery, ExistsQuery, Occur, Query, QueryParser, RangeQuery, TermQuery,
    TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DateTime, Term};

use crate::schema::{Kind, TypedFields};

/// What a sort key sorts by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortBy {
    Score,
    /// A typed field's name.
    Field(String),
}

/// One sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub by: SortBy,
    pub desc: bool,
}

/// A parsed request.
pub struct Request {
    pub query: Box<dyn Query>,
    /// Empty: by score.
    pub sort: Vec<SortKey>,
    /// The `aggs` (or `aggregations`) object, if any (see `crate::aggs`).
    pub aggs: Option<Value>,
}

/// Whether a query is a structured (JSON) one: its first non-blank
/// character is `{`.
pub fn is_json(text: &str) -> bool {
    text.trim_start_matches([' ', '\t']).starts_with('{')
}

/// Parses a request; `parser` turns `query_string` text into a query.
pub fn parse(text: &str, parser: &QueryParser, typed: Option<&TypedFields>) -> Result<Request, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let tree = StrictValue
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| format!("invalid JSON: {e}"))?;
    let request = object(&tree, "the request")?;
    if let Some(k) = request
        .keys()
        .find(|k| !["query", "sort", "aggs", "aggregations"].contains(&k.as_str()))
    {
        return Err(format!("unknown key `{k}` in the request (expected query, sort, aggs)"));
    }
    if request.contains_key("aggs") && request.contains_key("aggregations") {
        return Err("both `aggs` and `aggregations` in the request".into());
    }
    let aggs = request.get("aggs").or_else(|| request.get("aggregations")).cloned();
    let q = request.get("query").ok_or("the request has no `query`")?;
    let builder = Builder { parser, typed };
    let query = builder.query(q)?;
    let keys: Vec<&Value> = match request.get("sort") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(other) => vec![other],
    };
    let mut sort = Vec::with_capacity(keys.len());
    for k in keys {
        let (name, order) = match k {
            Value::String(s) => (s.as_str(), None),
            other => {
                let (name, o) = single(other, "a sort key")?;
                let order = match o {
                    Value::String(s) => s.as_str(),
                    other => {
                        let opts = object(other, &format!("sort options of `{name}`"))?;
                        if let Some(k) = opts.keys().find(|k| *k != "order") {
                            return Err(format!("unknown sort option `{k}` (expected order)"));
                        }
                        string(opts.get("order"), "order")?
                    }
                };
                (name.as_str(), Some(order))
            }
        };
        let desc = match order {
            None => name == "_score",
            Some("asc") => false,
            Some("desc") => true,
            Some(o) => return Err(format!("sort order must be asc or desc, got `{o}`")),
        };
        let by = if name == "_score" {
            SortBy::Score
        } else {
            if name == "tags" || typed.and_then(|t| t.get(name)).is_none() {
                return Err(format!(
                    "cannot sort by `{name}` (sortable: _score, date, price, popularity, category)"
                ));
            }
            SortBy::Field(name.to_string())
        };
        sort.push(SortKey { by, desc });
    }
    if sort.len() > 3 {
        return Err("at most 3 sort keys".into());
    }
    Ok(Request { query, sort, aggs })
}

struct Builder<'a> {
    parser: &'a QueryParser,
    typed: Option<&'a TypedFields>,
}

fn constant(q: Box<dyn Query>, score: f32) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(q, score))
}

impl Builder<'_> {
    fn query(&self, tree: &Value) -> Result<Box<dyn Query>, String> {
        let (kind, body) = single(tree, "a query")?;
        match kind.as_str() {
            "query_string" => {
                let o = object(body, "query_string")?;
                if let Some(k) = o.keys().find(|k| *k != "query") {
                    return Err(format!("unknown query_string option `{k}`"));
                }
                let text = string(o.get("query"), "query_string.query")?;
                self.parser
                    .parse_query(text)
                    .map_err(|e| format!("cannot parse query_string: {e}"))
            }
            "match_all" => {
                if !object(body, "match_all")?.is_empty() {
                    return Err("match_all takes no options".into());
                }
                Ok(Box::new(AllQuery))
            }
            "term" => {
                let (field, v) = single(body, "term")?;
                Ok(constant(self.exact(field, v)?, 1.0))
            }
            "terms" => {
                let (field, v) = single(body, "terms")?;
                let Value::Array(values) = v else {
                    return Err(format!("terms of `{field}` must be an array"));
                };
                Ok(constant(self.set(field, values)?, 1.0))
            }
            "range" => {
                let (field, v) = single(body, "range")?;
                Ok(constant(self.range(field, object(v, "range bounds")?)?, 1.0))
            }
            "exists" => {
                let o = object(body, "exists")?;
                if o.len() != 1 || !o.contains_key("field") {
                    return Err("exists takes {\"field\": NAME}".into());
                }
                let field = string(o.get("field"), "exists.field")?;
                self.field(field)?;
                Ok(constant(Box::new(ExistsQuery::new(field.to_string(), false)), 1.0))
            }
            "bool" => self.bool(object(body, "bool")?),
            other => Err(format!("unknown query type `{other}`")),
        }
    }

    fn bool(&self, o: &Map<String, Value>) -> Result<Box<dyn Query>, String> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut positive = false;
        for (k, v) in o {
            let occur = match k.as_str() {
                "must" | "filter" => Occur::Must,
                "should" => Occur::Should,
                "must_not" => Occur::MustNot,
                other => return Err(format!("unknown bool clause `{other}`")),
            };
            let list: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for c in list {
                let q = self.query(c)?;
                // A filter is required and adds nothing to the score.
                let q = if k == "filter" { constant(q, 0.0) } else { q };
                clauses.push((occur, q));
                positive |= occur != Occur::MustNot;
            }
        }
        if !positive {
            // Only exclusions (or nothing): everything else matches, with score 0.
            clauses.push((Occur::Must, constant(Box::new(AllQuery), 0.0)));
        }
        Ok(Box::new(BooleanQuery::new(clauses)))
    }

    fn field(&self, name: &str) -> Result<(Field, Kind), String> {
        let typed = self
            .typed
            .ok_or("the index has no typed fields (built before they existed)")?;
        typed
            .get(name)
            .ok_or_else(|| format!("`{name}` is not a typed field (category, tags, date, price, popularity)"))
    }

    /// The term of value `v` of a keyword, long or double field.
    fn term(&self, name: &str, field: Field, kind: Kind, v: &Value) -> Result<Term, String> {
        Ok(match kind {
            Kind::Keyword => Term::from_field_text(field, keyword(name, v)?),
            Kind::Long => Term::from_field_i64(field, long(name, v)?),
            Kind::Double => Term::from_field_f64(field, double(name, v)?),
            Kind::Date => Term::from_field_date(field, DateTime::from_timestamp_millis(date(name, v)?)),
        })
    }

    fn exact(&self, name: &str, v: &Value) -> Result<Box<dyn Query>, String> {
        let (field, kind) = self.field(name)?;
        let term = self.term(name, field, kind, v)?;
        Ok(match kind {
            // Indexed dates hold seconds: match milliseconds on the fast field.
            Kind::Date => Box::new(RangeQuery::new(Bound::Included(term.clone()), Bound::Included(term))),
            _ => Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
        })
    }

    fn set(&self, name: &str, values: &[Value]) -> Result<Box<dyn Query>, String> {
        let (field, kind) = self.field(name)?;
        if values.is_empty() {
            return Ok(Box::new(EmptyQuery));
        }
        if kind == Kind::Date {
            let mut clauses = Vec::with_capacity(values.len());
            for v in values {
                clauses.push((Occur::Should, self.exact(name, v)?));
            }
            return Ok(Box::new(BooleanQuery::new(clauses)));
        }
        let terms = values
            .iter()
            .map(|v| self.term(name, field, kind, v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(TermSetQuery::new(terms)))
    }

    fn range(&self, name: &str, bounds: &Map<String, Value>) -> Result<Box<dyn Query>, String> {
        let (field, kind) = self.field(name)?;
        let (mut lower, mut upper) = (Bound::Unbounded, Bound::Unbounded);
        let mut seen = BTreeSet::new();
        for (k, v) in bounds {
            let term = self.term(name, field, kind, v)?;
            let (slot, b) = match k.as_str() {
                "gte" => (&mut lower, Bound::Included(term)),
                "gt" => (&mut lower, Bound::Excluded(term)),
                "lte" => (&mut upper, Bound::Included(term)),
                "lt" => (&mut upper, Bound::Excluded(term)),
                other => return Err(format!("unknown range bound `{other}`")),
            };
            if !seen.insert(matches!(k.as_str(), "gte" | "gt")) {
                return Err("a range has at most one lower and one upper bound".into());
            }
            *slot = b;
        }
        if matches!((&lower, &upper), (Bound::Unbounded, Bound::Unbounded)) {
            return Ok(Box::new(ExistsQuery::new(name.to_string(), false)));
        }
        Ok(Box::new(RangeQuery::new(lower, upper)))
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => other.to_string(),
    }
}

fn keyword<'v>(name: &str, v: &'v Value) -> Result<&'v str, String> {
    v.as_str()
        .ok_or_else(|| format!("`{name}` takes strings, got {}", describe(v)))
}

fn long(name: &str, v: &Value) -> Result<i64, String> {
    v.as_i64()
        .ok_or_else(|| format!("`{name}` takes integers, got {}", describe(v)))
}

fn double(name: &str, v: &Value) -> Result<f64, String> {
    v.as_f64()
        .ok_or_else(|| format!("`{name}` takes numbers, got {}", describe(v)))
}

fn date(name: &str, v: &Value) -> Result<i64, String> {
    match v {
        Value::String(s) => crate::date::parse(s),
        Value::Number(n) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        other => Err(format!(
            "`{name}` takes ISO-8601 strings or epoch milliseconds, got {}",
            describe(other)
        )),
    }
}

fn object<'v>(v: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be a JSON object, got {}", describe(v)))
}

fn single<'v>(v: &'v Value, what: &str) -> Result<(&'v String, &'v Value), String> {
    let o = object(v, what)?;
    if o.len() != 1 {
        return Err(format!(
            "{what} is an object with one key, got {:?}",
            o.keys().collect::<Vec<_>>()
        ));
    }
    Ok(o.iter().next().expect("one entry"))
}

fn string<'v>(v: Option<&'v Value>, what: &str) -> Result<&'v str, String> {
    match v {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("{what} must be a string, got {}", describe(other))),
        None => Err(format!("{what} must be a string, got nothing")),
    }
}

/// A JSON value whose objects may not repeat a key (serde_json's `Value`
/// keeps the last one silently).
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value_seed(StrictValue)?;
            if out.insert(k.clone(), v).is_some() {
                return Err(de::Error::custom(format_args!("duplicate key `{k}`")));
            }
        }
        Ok(Value::Object(out))
    }
}
