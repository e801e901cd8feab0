//! Parsing one JSON lines record into a [`Document`].
//!
//! A hand-written map visitor instead of a derived struct: it accepts both
//! the `{"id","title","body"}` and the search-benchmark-game
//! `{"url","title","body"}` forms, string or integer ids, and produces error
//! messages that name the offending field.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use serde_json::Value;

use crate::schema::{Document, Schema};

/// Parses one line (already known to be valid UTF-8, without its newline)
/// into a document of `schema`, or returns a message a person can act on.
#[cfg(test)]
pub(crate) fn parse_record(line: &str, schema: &Schema) -> Result<Document, String> {
    parse_record_with(line, schema, None)
}

/// [`parse_record`], the document's id read from key `id_field` (default:
/// `id`, or `url` when the schema has no field of that name). Records of a
/// schema with typed fields, or a dynamic one, may hold any JSON values:
/// the schema checks them after ([`Schema::admit`]).
pub(crate) fn parse_record_with(line: &str, schema: &Schema, id_field: Option<&str>) -> Result<Document, String> {
    let field = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(line);
    let result = RecordSeed {
        field: &field,
        schema,
        id_field,
    }
    .deserialize(&mut de)
    .and_then(|doc| de.end().map(|()| doc));
    result.map_err(|e| describe(&e, field.take(), line))
}

/// Turns a serde_json error into a message without serde_json's
/// `at line 1 column N` suffix (a record is always one line), naming the
/// column and the field being read.
fn describe(e: &serde_json::Error, field: Option<String>, line: &str) -> String {
    let mut msg = e.to_string();
    if let Some(pos) = msg.rfind(" at line ") {
        msg.truncate(pos);
    }
    let col = e.column();
    let mut out = match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("invalid JSON: {msg} at column {col}")
        }
        _ => match field {
            Some(f) => format!("bad value for field `{f}`: {msg} (column {col})"),
            None => msg,
        },
    };
    if line.trim_start().starts_with('[') {
        out.push_str(" (expected one JSON object per line; JSON arrays are not supported)");
    }
    out
}

/// An id given as a JSON string or integer, stringified.
struct IdValue(String);

impl<'de> Deserialize<'de> for IdValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IdValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IdValue, E> {
                Ok(IdValue(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<IdValue, E> {
                Ok(IdValue(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IdValue, E> {
                Ok(IdValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IdValue, E> {
                Ok(IdValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Deserializes a record, noting in `field` which field is being read so
/// that an error can name it.
struct RecordSeed<'a> {
    field: &'a Cell<Option<String>>,
    schema: &'a Schema,
    id_field: Option<&'a str>,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Document;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Document, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a JSON object with an `id` (or `url`) and the fields {}",
            self.schema.names().join(", ")
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut id: Option<String> = None;
        let mut url: Option<String> = None;
        let mut doc = Document::default();
        // `url` names the document (the search-benchmark-game's form)
        // unless the schema has a field of that name.
        let id_key = self.id_field.unwrap_or("id");
        let url_is_id = self.id_field.is_none() && self.schema.field("url").is_none();
        // Text-only strict schemas take strings only, and name the unknown
        // field here; others take any value, checked by the schema after.
        let text_only = self.schema.text_only() && self.schema.dynamic_mode() == crate::schema::Dynamic::Strict;
        while let Some(key) = map.next_key::<String>()? {
            let duplicate = match key.as_str() {
                k if k == id_key => id.is_some(),
                "url" if url_is_id => url.is_some(),
                _ => doc.fields.contains_key(&key),
            };
            if duplicate {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            self.field.set(Some(key.clone()));
            match key.as_str() {
                k if k == id_key => id = Some(map.next_value::<IdValue>()?.0),
                "url" if url_is_id => url = Some(map.next_value::<IdValue>()?.0),
                _ if !text_only => {
                    let v: Value = map.next_value()?;
                    if !v.is_null() {
                        doc.fields.insert(key, v);
                    }
                }
                _ if self.schema.field(&key).is_some() => {
                    // `null`: an absent value.
                    if let Some(text) = map.next_value::<Option<String>>()? {
                        doc.fields.insert(key, Value::String(text));
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    return Err(de::Error::custom(format_args!(
                        "unknown field `{key}` (the index's fields: {})",
                        self.schema.names().join(", ")
                    )));
                }
            }
            self.field.set(None);
        }
        doc.id = match id.or(url) {
            Some(id) if id.is_empty() => {
                return Err(de::Error::custom(match self.id_field {
                    Some(k) => format!("empty `{k}` (the id field)"),
                    None => "empty `id` (or `url`)".into(),
                }));
            }
            Some(id) => id,
            None => {
                return Err(de::Error::custom(match self.id_field {
                    Some(k) => format!("missing `{k}` field (the id field)"),
                    None => "missing `id` (or `url`) field".into(),
                }))
            }
        };
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use crate::schema::Schema;

    fn parse_record(line: &str) -> Result<crate::schema::Document, String> {
        super::parse_record(line, &Schema::default())
    }

    /// A document with the non-empty ones of `title` and `body`.
    fn doc(id: &str, title: &str, body: &str) -> crate::schema::Document {
        let mut d = crate::schema::Document::new(id);
        for (name, text) in [("title", title), ("body", body)] {
            if !text.is_empty() {
                d = d.with_text(name, text);
            }
        }
        d
    }

    #[test]
    fn both_forms_and_integer_ids() {
        assert_eq!(
            parse_record(r#"{"id":"a","title":"T","body":"B"}"#).unwrap(),
            doc("a", "T", "B")
        );
        assert_eq!(
            parse_record(r#"{"url":"http://x/y","title":"T","body":"B"}"#).unwrap(),
            doc("http://x/y", "T", "B")
        );
        assert_eq!(parse_record(r#"{"id":17}"#).unwrap(), doc("17", "", ""));
        assert_eq!(parse_record(r#"{"id":-3}"#).unwrap(), doc("-3", "", ""));
        // id wins over url; a null title is absent.
        assert_eq!(
            parse_record(r#"{"url":"u","id":"i","title":null,"body":"\u00e9\n"}"#).unwrap(),
            crate::schema::Document::new("i").with_text("body", "é\n")
        );
        // A field the schema does not have is an error, never dropped.
        let m = parse_record(r#"{"x":[1,{"a":2}],"id":"i"}"#).unwrap_err();
        assert!(m.contains("unknown field `x`") && m.contains("title, body"), "{m}");
        // With a schema of other fields.
        let s = Schema::text_fields(&["name", "url"], false).unwrap();
        let d = super::parse_record(r#"{"id":"a","name":"N","url":"U"}"#, &s).unwrap();
        assert_eq!(
            d,
            crate::schema::Document::new("a")
                .with_text("name", "N")
                .with_text("url", "U")
        );
    }

    #[test]
    fn messages() {
        let m = parse_record(r#"{"title":"T"}"#).unwrap_err();
        assert_eq!(m, "missing `id` (or `url`) field");
        let m = parse_record(r#"{"id":"a","title":5}"#).unwrap_err();
        assert!(
            m.starts_with("bad value for field `title`: invalid type: integer `5`"),
            "{m}"
        );
        assert!(m.contains("column"), "{m}");
        let m = parse_record(r#"{"id":1.5}"#).unwrap_err();
        assert!(m.contains("`id`") && m.contains("a string or an integer"), "{m}");
        let m = parse_record(r#"{"id":"a",}"#).unwrap_err();
        assert!(m.starts_with("invalid JSON: ") && m.contains("column 11"), "{m}");
        let m = parse_record(r#"{"id":"a"} x"#).unwrap_err();
        assert!(m.starts_with("invalid JSON: trailing characters"), "{m}");
        let m = parse_record(r#"[{"id":"a"}]"#).unwrap_err();
        assert!(m.contains("JSON arrays are not supported"), "{m}");
        let m = parse_record(r#""just a string""#).unwrap_err();
        assert!(m.contains("expected a JSON object"), "{m}");
        let m = parse_record(r#"{"id":"a","id":"b"}"#).unwrap_err();
        assert!(m.contains("duplicate field `id`"), "{m}");
        let m = parse_record(r#"{"id":""}"#).unwrap_err();
        assert!(m.contains("empty `id`"), "{m}");
        let m = parse_record(r#"{"id":"a","body":"x"#).unwrap_err();
        assert!(m.starts_with("invalid JSON: EOF while parsing"), "{m}");
    }
}
