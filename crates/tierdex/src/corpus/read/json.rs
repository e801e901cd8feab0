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

use crate::schema::Document;

/// Parses one line (already known to be valid UTF-8, without its newline)
/// into a document, or returns a message a person can act on.
pub(crate) fn parse_record(line: &str) -> Result<Document, String> {
    let field = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(line);
    let result = RecordSeed { field: &field }
        .deserialize(&mut de)
        .and_then(|doc| de.end().map(|()| doc));
    result.map_err(|e| describe(&e, field.get(), line))
}

/// Turns a serde_json error into a message without serde_json's
/// `at line 1 column N` suffix (a record is always one line), naming the
/// column and the field being read.
fn describe(e: &serde_json::Error, field: Option<&'static str>, line: &str) -> String {
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

/// The keys of a record we care about.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Id,
    Url,
    Title,
    Body,
    #[serde(other)]
    Other,
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
    field: &'a Cell<Option<&'static str>>,
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
        f.write_str("a JSON object with an `id` (or `url`), a `title` and a `body`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut id: Option<String> = None;
        let mut url: Option<String> = None;
        let mut title: Option<String> = None;
        let mut body: Option<String> = None;
        let mut seen = [false; 4];
        while let Some(key) = map.next_key::<Key>()? {
            let (name, slot) = match key {
                Key::Id => ("id", 0),
                Key::Url => ("url", 1),
                Key::Title => ("title", 2),
                Key::Body => ("body", 3),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if seen[slot] {
                return Err(de::Error::custom(format_args!("duplicate field `{name}`")));
            }
            seen[slot] = true;
            self.field.set(Some(name));
            match slot {
                0 => id = Some(map.next_value::<IdValue>()?.0),
                1 => url = Some(map.next_value::<IdValue>()?.0),
                // `null` title or body: treated as empty.
                2 => title = map.next_value::<Option<String>>()?,
                _ => body = map.next_value::<Option<String>>()?,
            }
            self.field.set(None);
        }
        let id = match id.or(url) {
            Some(id) if id.is_empty() => {
                return Err(de::Error::custom("empty `id` (or `url`)"));
            }
            Some(id) => id,
            None => return Err(de::Error::custom("missing `id` (or `url`) field")),
        };
        Ok(Document {
            id,
            title: title.unwrap_or_default(),
            body: body.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::parse_record;

    fn doc(id: &str, title: &str, body: &str) -> crate::schema::Document {
        crate::schema::Document {
            id: id.into(),
            title: title.into(),
            body: body.into(),
        }
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
        // id wins over url; extra fields ignored; null title is empty.
        assert_eq!(
            parse_record(r#"{"x":[1,{"a":2}],"url":"u","id":"i","title":null,"body":"\u00e9\n"}"#).unwrap(),
            doc("i", "", "é\n")
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
