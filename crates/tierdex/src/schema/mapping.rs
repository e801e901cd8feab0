//! Elasticsearch mappings: explicit ones (`{"properties": {..}}`) read into
//! a [`Schema`] and written back, and dynamic mapping (a field added for a
//! value no field is for, its type inferred by Elasticsearch's rules).
//!
//! Objects become dotted paths (`{"user": {"properties": {"name": ..}}}` is
//! the field `user.name`); multi-fields (`"fields": {"keyword": ..}`) are
//! fields of their own reading their parent's values (`title.keyword`).
//! Elasticsearch's integer types (`integer`, `short`, `byte`) are kept as
//! `long` and `float`/`half_float` as `double`. Every option a mapping
//! holds is either honoured or an error naming it: nothing is ignored.

use serde_json::{json, Map, Value};

use super::document::Fields;
use super::field::*;
use super::{value, Schema};
use crate::analysis::AnalyzerConfig;
use crate::error::{Error, Result};

/// Calls `f` with the path of every scalar value of `fields` (objects
/// walked, arrays flattened, `null`s skipped) and the value.
pub fn leaves<'a>(fields: &'a Fields, f: &mut impl FnMut(&str, &'a Value)) {
    let mut path = String::new();
    for (k, v) in fields.iter() {
        path.clear();
        path.push_str(k);
        walk(&mut path, v, f);
    }
}

fn walk<'a>(path: &mut String, v: &'a Value, f: &mut impl FnMut(&str, &'a Value)) {
    match v {
        Value::Null => {}
        Value::Object(m) => {
            for (k, v) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                walk(path, v, f);
                path.truncate(len);
            }
        }
        Value::Array(a) => {
            for v in a {
                walk(path, v, f);
            }
        }
        v => f(path, v),
    }
}

/// The fields dynamic mapping adds for a value `v` at `path`, by
/// Elasticsearch's rules: a string that is a date becomes a `date`, any
/// other string `text` with a `keyword` sub-field of up to 256
/// characters; an integer a `long`, another number a `double`; a boolean
/// a `boolean`.
pub fn infer(path: &str, v: &Value) -> Vec<FieldEntry> {
    let ty = match v {
        Value::String(s) if value::looks_like_date(s) => FieldType::Date(DateOptions {
            format: "strict_date_optional_time||yyyy/MM/dd HH:mm:ss||yyyy/MM/dd".into(),
            ..Default::default()
        }),
        Value::String(_) => {
            return vec![
                FieldEntry::new(path, FieldType::Text(TextOptions::default())),
                FieldEntry {
                    name: format!("{path}.keyword"),
                    source: Some(path.to_string()),
                    ty: FieldType::Keyword(KeywordOptions {
                        ignore_above: Some(256),
                        ..Default::default()
                    }),
                },
            ];
        }
        Value::Number(n) if n.is_i64() || n.is_u64() => FieldType::Long(ValueOptions::default()),
        Value::Number(_) => FieldType::Double(ValueOptions::default()),
        Value::Bool(_) => FieldType::Boolean(ValueOptions::default()),
        _ => return Vec::new(),
    };
    vec![FieldEntry::new(path, ty)]
}

fn bad(path: &str, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("mapping of `{path}`: {why}"))
}

/// A schema from an Elasticsearch mapping: `{"dynamic": .., "properties":
/// {..}}`, or the same inside `{"mappings": ..}`. `dynamic` defaults to
/// `true`, as in Elasticsearch.
pub fn from_mapping(v: &Value) -> Result<Schema> {
    let root = v.get("mappings").unwrap_or(v);
    let obj = root
        .as_object()
        .ok_or_else(|| Error::InvalidArgument("a mapping is a JSON object with `properties`".into()))?;
    let mut dynamic = Dynamic::True;
    let mut entries = Vec::new();
    let mut defaults = None;
    for (k, x) in obj {
        match k.as_str() {
            "dynamic" => {
                dynamic =
                    serde_json::from_value(x.clone()).map_err(|e| Error::InvalidArgument(format!("mapping: {e}")))?
            }
            "properties" => properties(x, "", &mut entries)?,
            // tierdex's own: the fields unqualified query terms search.
            "_default_fields" => defaults = Some(x.clone()),
            other if v.get("mappings").is_some() && other == "settings" => {}
            other => {
                return Err(Error::InvalidArgument(format!(
                    "mapping: `{other}` is not supported (dynamic, properties, _default_fields)"
                )))
            }
        }
    }
    if let Some(top) = v.as_object().filter(|_| v.get("mappings").is_some()) {
        if let Some(other) = top.keys().find(|k| *k != "mappings" && *k != "settings") {
            return Err(Error::InvalidArgument(format!(
                "mapping: `{other}` is not supported beside `mappings`"
            )));
        }
    }
    let mut schema = Schema::new(entries)?;
    schema.set_dynamic(dynamic);
    if let Some(d) = defaults {
        let names: Vec<String> =
            serde_json::from_value(d).map_err(|e| Error::InvalidArgument(format!("mapping: _default_fields: {e}")))?;
        schema.set_default_fields(&names)?;
    }
    Ok(schema)
}

fn properties(v: &Value, prefix: &str, out: &mut Vec<FieldEntry>) -> Result<()> {
    let props = v
        .as_object()
        .ok_or_else(|| bad(prefix, "`properties` must be an object"))?;
    for (name, spec) in props {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let spec = spec
            .as_object()
            .ok_or_else(|| bad(&path, "a field's mapping is an object"))?;
        let ty = spec.get("type").and_then(Value::as_str);
        if ty.is_none() || ty == Some("object") {
            if let Some(k) = spec.keys().find(|k| !["type", "properties"].contains(&k.as_str())) {
                return Err(bad(&path, format!("`{k}` is not supported on an object")));
            }
            match spec.get("properties") {
                Some(p) => properties(p, &path, out)?,
                None if ty.is_none() => return Err(bad(&path, "no `type` and no `properties`")),
                None => {}
            }
            continue;
        }
        let (entry, subs) = field(&path, spec)?;
        out.push(entry);
        for (sub, sspec) in subs {
            let sspec = sspec
                .as_object()
                .ok_or_else(|| bad(&sub, "a field's mapping is an object"))?;
            let (mut e, more) = field(&sub, sspec)?;
            if !more.is_empty() {
                return Err(bad(&sub, "multi-fields cannot have multi-fields"));
            }
            e.source = Some(path.clone());
            out.push(e);
        }
    }
    Ok(())
}

/// One field's entry and its multi-fields (paths and specs).
fn field(path: &str, spec: &Map<String, Value>) -> Result<(FieldEntry, Vec<(String, Value)>)> {
    let ty = spec["type"].as_str().unwrap_or_default();
    let mut subs = Vec::new();
    let flag = |k: &str, v: &Value| {
        v.as_bool()
            .ok_or_else(|| bad(path, format!("`{k}` must be true or false")))
    };
    let mut index = true;
    let mut doc_values = true;
    let mut text = TextOptions::default();
    let mut kw = KeywordOptions::default();
    let mut format = None;
    for (k, v) in spec {
        match (k.as_str(), ty) {
            ("type", _) => {}
            ("fields", _) => {
                let m = v.as_object().ok_or_else(|| bad(path, "`fields` must be an object"))?;
                subs.extend(m.iter().map(|(n, s)| (format!("{path}.{n}"), s.clone())));
            }
            ("index", _) => index = flag(k, v)?,
            ("doc_values", t) if t != "text" => doc_values = flag(k, v)?,
            ("analyzer" | "search_analyzer", "text") => {
                let a = analyzer_value(path, v)?;
                if k == "search_analyzer" && text.analyzer.is_some_and(|x| x != a) {
                    return Err(bad(path, "a search_analyzer other than the analyzer is not supported"));
                }
                text.analyzer = Some(a);
            }
            ("phrase_filters", "text") => text.phrase_filters = flag(k, v)?,
            ("normalizer", "keyword") => match v.as_str() {
                Some("lowercase") => kw.lowercase = true,
                _ => return Err(bad(path, format!("normalizer {v} is not supported (lowercase)"))),
            },
            ("ignore_above", "keyword") => {
                kw.ignore_above = Some(
                    v.as_u64()
                        .filter(|&n| n > 0 && n <= u32::MAX as u64)
                        .ok_or_else(|| bad(path, "`ignore_above` must be a positive integer"))?
                        as u32,
                )
            }
            ("format", "date") => {
                format = Some(
                    v.as_str()
                        .ok_or_else(|| bad(path, "`format` must be a string"))?
                        .to_string(),
                )
            }
            (other, _) => {
                return Err(bad(path, format!("`{other}` is not supported on a {ty} field")));
            }
        }
    }
    let ty = match ty {
        "text" => {
            text.index = index;
            FieldType::Text(text)
        }
        "keyword" => {
            kw.index = index;
            kw.doc_values = doc_values;
            FieldType::Keyword(kw)
        }
        "long" | "integer" | "short" | "byte" | "unsigned_long" => FieldType::Long(ValueOptions { index, doc_values }),
        "double" | "float" | "half_float" => FieldType::Double(ValueOptions { index, doc_values }),
        "boolean" => FieldType::Boolean(ValueOptions { index, doc_values }),
        "date" => FieldType::Date(DateOptions {
            index,
            doc_values,
            format: format.unwrap_or_else(|| DEFAULT_DATE_FORMAT.to_string()),
        }),
        other => {
            return Err(bad(
                path,
                format!("type `{other}` is not supported (text, keyword, long, integer, short, byte, double, float, date, boolean, object)"),
            ))
        }
    };
    Ok((FieldEntry::new(path, ty), subs))
}

/// The analyzer configuration a mapping's analyzer name means (see
/// [`AnalyzerConfig::named`]).
pub fn analyzer(name: &str) -> Option<AnalyzerConfig> {
    AnalyzerConfig::named(name)
}

/// The analyzer name of a configuration, as a mapping writes it; `None`
/// for a combination no name stands for, which a mapping writes as the
/// configuration's JSON object instead (and reads back).
fn analyzer_name(a: &AnalyzerConfig) -> Option<&'static str> {
    a.name()
}

/// The analyzer a mapping's `analyzer` value means: a name, or tierdex's
/// own JSON object of options (what [`to_mapping`] writes for an analyzer
/// that has no name).
fn analyzer_value(path: &str, v: &Value) -> Result<AnalyzerConfig> {
    match v {
        Value::String(name) => analyzer(name).ok_or_else(|| {
            bad(
                path,
                format!(
                    "analyzer `{name}` is not supported ({})",
                    crate::analysis::ANALYZER_NAMES.join(", ")
                ),
            )
        }),
        Value::Object(_) => serde_json::from_value(v.clone()).map_err(|e| bad(path, format!("analyzer {v}: {e}"))),
        _ => Err(bad(path, "`analyzer` must be a name")),
    }
}

/// `schema` as an Elasticsearch mapping (`{"dynamic": .., "properties":
/// {..}}`), objects nested, sub-fields under `fields`.
pub fn to_mapping(schema: &Schema) -> Value {
    let mut props = Map::new();
    for e in schema.entries() {
        if e.source.is_some() {
            continue;
        }
        let spec = spec_of(e, schema);
        insert_path(&mut props, &e.name, spec);
    }
    let dynamic = match schema.dynamic_mode() {
        Dynamic::True => json!(true),
        Dynamic::False => json!(false),
        Dynamic::Strict => json!("strict"),
    };
    json!({ "dynamic": dynamic, "properties": props })
}

fn spec_of(e: &FieldEntry, schema: &Schema) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), e.ty.name().into());
    let (index, doc_values) = (e.ty.indexed(), e.ty.doc_values());
    if !index {
        m.insert("index".into(), false.into());
    }
    match &e.ty {
        FieldType::Text(o) => {
            if let Some(a) = &o.analyzer {
                match analyzer_name(a) {
                    Some(n) => m.insert("analyzer".into(), n.into()),
                    None => m.insert("analyzer".into(), serde_json::to_value(a).expect("serialisable")),
                };
            }
            if o.phrase_filters {
                m.insert("phrase_filters".into(), true.into());
            }
        }
        FieldType::Keyword(o) => {
            if o.lowercase {
                m.insert("normalizer".into(), "lowercase".into());
            }
            if let Some(n) = o.ignore_above {
                m.insert("ignore_above".into(), n.into());
            }
        }
        FieldType::Date(o) => {
            m.insert("format".into(), o.format.clone().into());
        }
        _ => {}
    }
    if !doc_values && !matches!(e.ty, FieldType::Text(_)) {
        m.insert("doc_values".into(), false.into());
    }
    let subs: Map<String, Value> = schema
        .entries()
        .iter()
        .filter(|s| s.source.as_deref() == Some(e.name.as_str()))
        .map(|s| {
            let short = s
                .name
                .strip_prefix(&format!("{}.", e.name))
                .unwrap_or(&s.name)
                .to_string();
            (short, spec_of(s, schema))
        })
        .collect();
    if !subs.is_empty() {
        m.insert("fields".into(), Value::Object(subs));
    }
    Value::Object(m)
}

/// Puts `spec` at dotted `path` in nested `properties`; a dotted name
/// whose prefix is a field of its own stays whole.
fn insert_path(props: &mut Map<String, Value>, path: &str, spec: Value) {
    if let Some((head, rest)) = path.split_once('.') {
        let slot = props
            .entry(head.to_string())
            .or_insert_with(|| json!({ "properties": {} }));
        if let Some(inner) = slot.get_mut("properties").and_then(Value::as_object_mut) {
            return insert_path(inner, rest, spec);
        }
    }
    props.insert(path.to_string(), spec);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Document, Field};

    #[test]
    fn mappings_read_and_write_back() {
        let m = json!({"mappings": {"dynamic": "strict", "properties": {
            "title": {"type": "text", "analyzer": "english", "fields": {"raw": {"type": "keyword"}}},
            "tags": {"type": "keyword", "normalizer": "lowercase", "ignore_above": 40},
            "views": {"type": "integer"},
            "price": {"type": "float", "doc_values": false},
            "when": {"type": "date", "format": "epoch_second"},
            "ok": {"type": "boolean", "index": false},
            "user": {"properties": {"name": {"type": "keyword"}}}
        }}});
        let s = from_mapping(&m).unwrap();
        assert_eq!(
            s.names(),
            [
                "ok",
                "price",
                "tags",
                "title",
                "title.raw",
                "user.name",
                "views",
                "when"
            ]
        );
        assert_eq!(s.dynamic_mode(), Dynamic::Strict);
        assert_eq!(s.entry(s.field("title.raw").unwrap()).unwrap().path(), "title");
        assert_eq!(s.default_fields(), [s.field("title").unwrap()]);
        let again = from_mapping(&to_mapping(&s)).unwrap();
        assert_eq!(again, s);
        // Through the schema file reader too.
        assert_eq!(Schema::from_json(&m.to_string()).unwrap(), s);
        for (bad, says) in [
            (
                json!({"properties": {"a": {"type": "geo_point"}}}),
                "type `geo_point` is not supported",
            ),
            (
                json!({"properties": {"a": {"type": "text", "norms": false}}}),
                "`norms` is not supported",
            ),
            (
                json!({"properties": {"a": {"type": "keyword", "normalizer": "ascii"}}}),
                "normalizer",
            ),
            (
                json!({"properties": {"a": {"type": "text", "analyzer": "klingon"}}}),
                "analyzer `klingon`",
            ),
            (
                json!({"properties": {"a": {"type": "date", "format": "yyyy"}}}),
                "unknown date format",
            ),
            (
                json!({"properties": {"a": {"type": "text"}}, "_source": {}}),
                "`_source` is not supported",
            ),
            (json!({"dynamic": "sometimes", "properties": {}}), "dynamic"),
        ] {
            let e = from_mapping(&bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn every_analyzer_name_round_trips_through_a_mapping() {
        use crate::analysis::{Language, TokenizerKind, ANALYZER_NAMES};
        let props: Map<String, Value> = ANALYZER_NAMES
            .iter()
            .map(|n| (format!("f_{n}"), json!({"type": "text", "analyzer": n})))
            .collect();
        let s = from_mapping(&json!({ "properties": props })).unwrap();
        let written = to_mapping(&s);
        for name in ANALYZER_NAMES {
            let f = s.field(&format!("f_{name}")).unwrap();
            let a = s.entry(f).unwrap().text_options().unwrap().analyzer.unwrap();
            assert_eq!(Some(a), AnalyzerConfig::named(name));
            assert_eq!(written["properties"][format!("f_{name}")]["analyzer"], json!(name));
        }
        assert_eq!(from_mapping(&written).unwrap(), s);
        let french = s
            .entry(s.field("f_french").unwrap())
            .unwrap()
            .text_options()
            .unwrap()
            .analyzer;
        assert_eq!(french, Some(AnalyzerConfig::language(Language::French)));
        let ws = s
            .entry(s.field("f_whitespace").unwrap())
            .unwrap()
            .text_options()
            .unwrap()
            .analyzer;
        assert_eq!(ws.map(|a| a.tokenizer), Some(TokenizerKind::Whitespace));
        // An analyzer without a name is written as its options and read back.
        let odd = AnalyzerConfig {
            stemming: true,
            language: Language::Swedish,
            ..Default::default()
        };
        let m = json!({"properties": {"a": {"type": "text", "analyzer": odd}}});
        let s = from_mapping(&m).unwrap();
        let written = to_mapping(&s);
        assert_eq!(
            written["properties"]["a"]["analyzer"],
            json!({"stemming": true, "stop_words": false, "language": "swedish"})
        );
        assert_eq!(from_mapping(&written).unwrap(), s);
        // Errors list the names.
        for (bad, says) in [
            (
                json!("klingon"),
                "analyzer `klingon` is not supported (standard, simple, whitespace, arabic,",
            ),
            (json!({"stemming": true, "typo": 1}), "unknown field `typo`"),
            (json!(3), "`analyzer` must be a name"),
        ] {
            let e = from_mapping(&json!({"properties": {"a": {"type": "text", "analyzer": bad}}}))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{e}");
        }
        // search_analyzer must be the same analyzer.
        let e = from_mapping(
            &json!({"properties": {"a": {"type": "text", "analyzer": "french", "search_analyzer": "german"}}}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("search_analyzer"), "{e}");
        from_mapping(
            &json!({"properties": {"a": {"type": "text", "analyzer": "french", "search_analyzer": "french"}}}),
        )
        .unwrap();
    }

    #[test]
    fn dynamic_mapping_follows_elasticsearch_rules() {
        let mut s = Schema::dynamic();
        let doc: Document = serde_json::from_value(json!({
            "id": "1", "title": "hello", "n": 3, "x": 1.5, "ok": true, "when": "2015-01-01",
            "user": {"name": "ann", "age": 40}, "tags": ["a", "b"], "empty": [], "nothing": null
        }))
        .unwrap();
        let added = s.map_dynamic(&doc).unwrap();
        let ty = |n: &str| s.entry(s.field(n).unwrap_or_else(|| panic!("{n}"))).unwrap().ty.name();
        assert_eq!(added, 11);
        assert_eq!(
            [
                ty("title"),
                ty("title.keyword"),
                ty("n"),
                ty("x"),
                ty("ok"),
                ty("when"),
                ty("user.name"),
                ty("user.age"),
                ty("tags")
            ],
            ["text", "keyword", "long", "double", "boolean", "date", "text", "long", "text"]
        );
        assert!(s.field("empty").is_none() && s.field("nothing").is_none());
        s.check(&doc).unwrap();
        assert_eq!(s.map_dynamic(&doc).unwrap(), 0, "nothing new the second time");
        // Text fields added later are searched by default.
        assert!(s.default_fields().contains(&s.field("user.name").unwrap()));
        assert!(!s.default_fields().contains(&s.field("tags.keyword").unwrap()));
        assert_eq!(
            s.entry(s.field("user.name.keyword").unwrap()).unwrap().path(),
            "user.name"
        );
        // A value of the wrong type for a mapped field is an error naming it.
        let bad: Document = serde_json::from_value(json!({"id": "2", "n": "many"})).unwrap();
        let e = s.check(&bad).unwrap_err().to_string();
        assert!(e.contains("\"2\"") && e.contains("field `n` is a long field"), "{e}");
        // Strict refuses, false keeps in _source only.
        let new: Document = serde_json::from_value(json!({"id": "3", "extra": {"deep": 1}})).unwrap();
        s.set_dynamic(Dynamic::Strict);
        let e = s.map_dynamic(&new).unwrap_err().to_string();
        assert!(e.contains("unknown field `extra.deep`") && e.contains("\"3\""), "{e}");
        assert!(s.check(&new).is_err());
        s.set_dynamic(Dynamic::False);
        assert_eq!(s.map_dynamic(&new).unwrap(), 0);
        s.check(&new).unwrap();
        assert!(s.field("extra.deep").is_none());
        assert_eq!(Field::MAX, 255);
    }
}
