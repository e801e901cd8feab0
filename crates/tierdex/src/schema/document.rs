//! One document: an external id and its field values by name.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A document's field values by name, in name order: a sorted vector,
/// compact for the few fields a document holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fields(Vec<(String, Value)>);

impl Fields {
    /// No fields.
    pub fn new() -> Fields {
        Fields(Vec::new())
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }

    /// Whether the document has a value for field `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Sets field `name` to `value`; the value it replaces, if any.
    pub fn insert(&mut self, name: String, value: Value) -> Option<Value> {
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Removes field `name`; its value, if it had one.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.find(name).ok().map(|i| self.0.remove(i).1)
    }

    /// Number of fields with a value.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no field has a value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The values, in name order.
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().map(|(_, v)| v)
    }

    /// The fields as a JSON object.
    pub fn to_map(&self) -> Map<String, Value> {
        self.0.iter().cloned().collect()
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fields, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object of fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Fields::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    if fields.insert(key.clone(), value).is_some() {
                        return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                }
                Ok(fields)
            }
        }
        d.deserialize_map(V)
    }
}

/// One document as read from a corpus, sent to a writer and stored.
///
/// Serialised as one flat JSON object: `{"id": "...", "title": "...",
/// "body": "..."}`; the values of other keys are the fields. Field values
/// are JSON values; a [`crate::schema::Schema`] says which fields exist and
/// what they may hold ([`crate::schema::Schema::check`]). `null` is an
/// absent value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    /// External identifier (stored, not indexed).
    pub id: String,
    /// Field values by field name (in name order).
    pub fields: Fields,
}

impl Document {
    /// A document with no fields.
    pub fn new(id: impl Into<String>) -> Document {
        Document {
            id: id.into(),
            fields: Fields::new(),
        }
    }

    /// A document of the default schema: a title and a body.
    pub fn title_body(id: impl Into<String>, title: impl Into<String>, body: impl Into<String>) -> Document {
        Document::new(id).with_text("title", title).with_text("body", body)
    }

    /// The document with text field `name` set to `text`.
    pub fn with_text(mut self, name: impl Into<String>, text: impl Into<String>) -> Document {
        self.fields.insert(name.into(), Value::String(text.into()));
        self
    }

    /// The text of field `name`: `""` when the field is absent or not text.
    pub fn text(&self, name: &str) -> &str {
        match self.fields.get(name) {
            Some(Value::String(s)) => s,
            _ => "",
        }
    }

    /// The title (default schema).
    pub fn title(&self) -> &str {
        self.text("title")
    }

    /// The body (default schema).
    pub fn body(&self) -> &str {
        self.text("body")
    }

    /// Bytes of the id and of every value (text as it is, other values as
    /// JSON): what a writer's buffer budget and indexing statistics count.
    pub fn text_bytes(&self) -> usize {
        self.id.len()
            + self
                .fields
                .values()
                .map(|v| match v {
                    Value::String(s) => s.len(),
                    other => other.to_string().len(),
                })
                .sum::<usize>()
    }
}

impl Serialize for Document {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.fields.len() + 1))?;
        m.serialize_entry("id", &self.id)?;
        for (k, v) in self.fields.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Document, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Document;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object with an `id` and fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
                let mut id = None;
                let mut fields = Fields::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "id" {
                        if id.is_some() {
                            return Err(de::Error::custom("duplicate field `id`"));
                        }
                        id = Some(map.next_value::<String>()?);
                        continue;
                    }
                    let value: Value = map.next_value()?;
                    if value.is_null() {
                        continue;
                    }
                    if fields.insert(key.clone(), value).is_some() {
                        return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                }
                let id = id.ok_or_else(|| de::Error::missing_field("id"))?;
                Ok(Document { id, fields })
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_json_round_trip() {
        let d = Document::title_body("a", "T", "B");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, r#"{"id":"a","body":"B","title":"T"}"#);
        assert_eq!(serde_json::from_str::<Document>(&json).unwrap(), d);
        // Documents logged before schemas existed read back the same.
        let old: Document = serde_json::from_str(r#"{"id":"a","title":"T","body":"B"}"#).unwrap();
        assert_eq!(old, d);
        assert_eq!((old.title(), old.body(), old.text("x")), ("T", "B", ""));
        let nulls: Document = serde_json::from_str(r#"{"id":"a","title":null}"#).unwrap();
        assert!(nulls.fields.is_empty());
        assert!(serde_json::from_str::<Document>(r#"{"title":"T"}"#).is_err());
        assert!(serde_json::from_str::<Document>(r#"{"id":"a","id":"b"}"#).is_err());
    }
}
