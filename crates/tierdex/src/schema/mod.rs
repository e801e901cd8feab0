//! The document model: a schema of named, typed fields, and documents as an
//! external id plus field values.
//!
//! A [`Schema`] lists an index's fields in id order; a [`Field`] is a
//! field's id (it is the first byte of every term key, so an index holds at
//! most 255 fields). Each field has a [`FieldType`]; for now every field is
//! [`FieldType::Text`]: analysed into terms with positions and byte
//! offsets, optionally stored and given phrase Bloom filters. The default
//! schema, [`Schema::title_body`], is the `title` and `body` fields every
//! index had before schemas existed (phrase filters on `body`), and what a
//! manifest without a schema means.
//!
//! Unqualified query terms search the schema's default fields
//! ([`Schema::default_fields`]), each term becoming a disjunction over them.

mod document;

use serde::{Deserialize, Serialize};

use crate::analysis::{Analyzer, AnalyzerConfig};
pub use crate::common::{DocId, TERMINATED};
use crate::error::{Error, Result};
pub use document::{Document, Fields};

/// A field of a schema, by id (its position in [`Schema::fields`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Field(u8);

impl Field {
    /// `title` in the default schema.
    pub const TITLE: Field = Field(0);
    /// `body` in the default schema.
    pub const BODY: Field = Field(1);
    /// Most fields a schema holds (ids are one byte).
    pub const MAX: usize = 255;

    /// The field with id `id`.
    pub const fn from_id(id: u8) -> Field {
        Field(id)
    }

    /// The field's id: the first byte of its term keys.
    pub const fn id(self) -> u8 {
        self.0
    }

    /// The field's id as an index into per-field arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// How a field is indexed and stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FieldType {
    /// Analysed text, searched by terms and phrases, scored with BM25.
    Text(TextOptions),
}

/// Options of a text field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextOptions {
    /// Analysis of this field's text (and of query text searching it);
    /// absent: the index's analyzer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzer: Option<AnalyzerConfig>,
    /// Keep the text in the document store (returned with hits,
    /// highlighted). Only `true` is supported.
    #[serde(default = "yes")]
    pub stored: bool,
    /// Index token positions (phrase queries). Only `true` is supported.
    #[serde(default = "yes")]
    pub positions: bool,
    /// Index byte offsets (highlighting). Only `true` is supported.
    #[serde(default = "yes")]
    pub offsets: bool,
    /// Build phrase Bloom filters for this field's terms (when the index
    /// has phrase filters at all).
    #[serde(default)]
    pub phrase_filters: bool,
}

fn yes() -> bool {
    true
}

impl Default for TextOptions {
    /// Stored, with positions and offsets, without phrase filters, with the
    /// index's analyzer.
    fn default() -> Self {
        TextOptions {
            analyzer: None,
            stored: true,
            positions: true,
            offsets: true,
            phrase_filters: false,
        }
    }
}

/// One field of a schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldEntry {
    /// The field's name, as documents and queries spell it.
    pub name: String,
    /// How it is indexed.
    #[serde(flatten)]
    pub ty: FieldType,
}

impl FieldEntry {
    /// A text field named `name` with `options`.
    pub fn text(name: impl Into<String>, options: TextOptions) -> FieldEntry {
        FieldEntry {
            name: name.into(),
            ty: FieldType::Text(options),
        }
    }

    /// The options of a text field.
    pub fn text_options(&self) -> &TextOptions {
        match &self.ty {
            FieldType::Text(o) => o,
        }
    }
}

/// The fields of an index, in id order, and the fields unqualified query
/// terms search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SchemaSpec", into = "SchemaSpec")]
pub struct Schema {
    fields: Vec<FieldEntry>,
    default_fields: Vec<Field>,
}

/// The serialised form of a [`Schema`] (a schema file, the manifest).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaSpec {
    fields: Vec<FieldEntry>,
    /// Field names; absent: every field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_fields: Option<Vec<String>>,
}

impl TryFrom<SchemaSpec> for Schema {
    type Error = Error;
    fn try_from(spec: SchemaSpec) -> Result<Schema> {
        let mut schema = Schema::new(spec.fields)?;
        if let Some(names) = spec.default_fields {
            schema.set_default_fields(&names)?;
        }
        Ok(schema)
    }
}

impl From<Schema> for SchemaSpec {
    fn from(s: Schema) -> SchemaSpec {
        let all: Vec<Field> = s.fields().collect();
        let default_fields =
            (s.default_fields != all).then(|| s.default_fields.iter().map(|&f| s.name(f).to_string()).collect());
        SchemaSpec {
            fields: s.fields,
            default_fields,
        }
    }
}

/// Characters a field name may hold besides ASCII letters and digits.
const NAME_PUNCTUATION: &[char] = &['_', '-', '.', '@'];

/// Why `name` cannot be a field name, if it cannot.
fn invalid_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a field name is empty".into());
    }
    if name == "id" {
        return Some("`id` is the document's external id, not a field".into());
    }
    if name.len() > 255 {
        return Some(format!("field name `{}…` is longer than 255 bytes", &name[..32]));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_alphanumeric() || NAME_PUNCTUATION.contains(&c)))
    {
        return Some(format!(
            "field name `{name}` holds `{c}`: use letters, digits, `_`, `-`, `.` and `@`"
        ));
    }
    if name.starts_with(['-', '.']) {
        return Some(format!("field name `{name}` starts with `{}`", &name[..1]));
    }
    None
}

impl Schema {
    /// A schema of `fields` (ids in this order), searching all of them by
    /// default. Names must be unique, non-empty, not `id`, and made of
    /// letters, digits, `_`, `-`, `.` and `@`.
    pub fn new(fields: Vec<FieldEntry>) -> Result<Schema> {
        if fields.is_empty() {
            return Err(Error::InvalidArgument("a schema needs at least one field".into()));
        }
        if fields.len() > Field::MAX {
            return Err(Error::InvalidArgument(format!(
                "a schema holds at most {} fields ({} given)",
                Field::MAX,
                fields.len()
            )));
        }
        for (i, f) in fields.iter().enumerate() {
            if let Some(why) = invalid_name(&f.name) {
                return Err(Error::InvalidArgument(why));
            }
            if fields[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::InvalidArgument(format!("field `{}` is listed twice", f.name)));
            }
            let o = f.text_options();
            if !o.positions || !o.offsets || !o.stored {
                return Err(Error::InvalidArgument(format!(
                    "field `{}`: text fields that are not stored, or without positions or offsets, \
                     are not supported yet (every text field is stored, with positions and offsets: \
                     deletes recompute statistics from the stored text)",
                    f.name
                )));
            }
        }
        let default_fields = (0..fields.len() as u8).map(Field).collect();
        Ok(Schema { fields, default_fields })
    }

    /// Text fields named `names`, stored, with phrase filters when
    /// `phrase_filters` (the `tierdex index --fields a,b` schema).
    pub fn text_fields<S: AsRef<str>>(names: &[S], phrase_filters: bool) -> Result<Schema> {
        Schema::new(
            names
                .iter()
                .map(|n| {
                    FieldEntry::text(
                        n.as_ref().trim(),
                        TextOptions {
                            phrase_filters,
                            ..TextOptions::default()
                        },
                    )
                })
                .collect(),
        )
    }

    /// The default schema: `title` and `body`, stored text with positions
    /// and offsets, phrase filters on `body`.
    pub fn title_body() -> Schema {
        Schema {
            fields: vec![
                FieldEntry::text("title", TextOptions::default()),
                FieldEntry::text(
                    "body",
                    TextOptions {
                        phrase_filters: true,
                        ..TextOptions::default()
                    },
                ),
            ],
            default_fields: vec![Field::TITLE, Field::BODY],
        }
    }

    /// Reads a schema file (JSON: `{"fields": [{"name": .., "type":
    /// "text", ..}], "default_fields": [..]}`).
    pub fn from_json(text: &str) -> Result<Schema> {
        serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("invalid schema: {e}")))
    }

    /// Sets the fields unqualified query terms search.
    pub fn set_default_fields<S: AsRef<str>>(&mut self, names: &[S]) -> Result<()> {
        self.default_fields = self.resolve(names)?;
        Ok(())
    }

    /// The fields named `names` (at least one; an unknown name is an error
    /// listing the known ones).
    pub fn resolve<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<Field>> {
        if names.is_empty() {
            return Err(Error::InvalidArgument("no field named".into()));
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let f = self.field(n.as_ref().trim()).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown field `{}` (fields: {})",
                    n.as_ref(),
                    self.names().join(", ")
                ))
            })?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
        Ok(out)
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Always false: a schema has at least one field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Every field, in id order.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = Field> + '_ {
        (0..self.fields.len() as u8).map(Field)
    }

    /// The field entries, in id order.
    pub fn entries(&self) -> &[FieldEntry] {
        &self.fields
    }

    /// The entry of `field`.
    pub fn entry(&self, field: Field) -> Option<&FieldEntry> {
        self.fields.get(field.index())
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields.iter().position(|f| f.name == name).map(|i| Field(i as u8))
    }

    /// The name of `field` (`"?"` for an id the schema does not have).
    pub fn name(&self, field: Field) -> &str {
        self.entry(field).map_or("?", |e| e.name.as_str())
    }

    /// Every field name, in id order.
    pub fn names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    /// The fields unqualified query terms search.
    pub fn default_fields(&self) -> &[Field] {
        &self.default_fields
    }

    /// Whether `field`'s terms get phrase Bloom filters (when the index
    /// builds them).
    pub fn phrase_filters(&self, field: Field) -> bool {
        self.entry(field).is_some_and(|e| e.text_options().phrase_filters)
    }

    /// Whether `field`'s text is kept in the document store.
    pub fn stored(&self, field: Field) -> bool {
        self.entry(field).is_some_and(|e| e.text_options().stored)
    }

    /// True for the default schema (an index that records no schema).
    pub fn is_title_body(&self) -> bool {
        *self == Schema::title_body()
    }

    /// The analyzer of every field, in id order: a field's own, or
    /// `default` (the index's).
    pub fn analyzers(&self, default: AnalyzerConfig) -> Vec<Analyzer> {
        self.fields
            .iter()
            .map(|f| Analyzer::new(f.text_options().analyzer.unwrap_or(default)))
            .collect()
    }

    /// Checks that `doc` fits the schema: every field it holds is one of
    /// the schema's, holding text (a string; `null` counts as absent).
    /// Nothing a document holds is dropped silently.
    pub fn check(&self, doc: &Document) -> Result<()> {
        if doc.id.is_empty() {
            return Err(Error::InvalidArgument("a document has an empty id".into()));
        }
        for (name, value) in doc.fields.iter() {
            if self.field(name).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "document {:?}: unknown field `{name}` (the index's fields: {})",
                    doc.id,
                    self.names().join(", ")
                )));
            }
            match value {
                serde_json::Value::String(_) | serde_json::Value::Null => {}
                serde_json::Value::Array(_) => {
                    return Err(Error::InvalidArgument(format!(
                        "document {:?}: field `{name}` holds an array; text fields hold one string \
                         (multi-valued fields are not supported yet)",
                        doc.id
                    )))
                }
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "document {:?}: field `{name}` is a text field but holds {}",
                        doc.id,
                        json_kind(other)
                    )))
                }
            }
        }
        Ok(())
    }
}

/// A schema with every field's analyzer resolved (a field's own, else the
/// index's): what indexing, deletes and queries analyse text with.
#[derive(Debug, Clone)]
pub struct Analysis {
    schema: Schema,
    analyzers: Vec<Analyzer>,
}

impl Analysis {
    /// `schema`'s analysis, `default` being the index's analyzer.
    pub fn new(schema: Schema, default: AnalyzerConfig) -> Analysis {
        let analyzers = schema.analyzers(default);
        Analysis { schema, analyzers }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Calls `sink` with every token of `text` as `field` indexes it (what a
    /// field's type makes of its value is decided here, for indexing and
    /// deletes alike).
    #[inline]
    pub fn analyze(&self, field: Field, text: &str, sink: impl FnMut(crate::analysis::Token<'_>)) {
        self.analyzer(field).analyze(text, sink)
    }

    /// The analyzer of `field` (the first field's for an id the schema does
    /// not have).
    #[inline]
    pub fn analyzer(&self, field: Field) -> &Analyzer {
        self.analyzers.get(field.index()).unwrap_or(&self.analyzers[0])
    }
}

impl Default for Analysis {
    /// The default schema with the default analyzer.
    fn default() -> Self {
        Analysis::new(Schema::default(), AnalyzerConfig::default())
    }
}

impl Default for Schema {
    /// [`Schema::title_body`].
    fn default() -> Self {
        Schema::title_body()
    }
}

/// A JSON value's kind, for messages.
pub(crate) fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schema_is_title_and_body() {
        let s = Schema::default();
        assert_eq!(s.names(), ["title", "body"]);
        assert_eq!(s.field("body"), Some(Field::BODY));
        assert_eq!(s.default_fields(), [Field::TITLE, Field::BODY]);
        assert!(s.phrase_filters(Field::BODY) && !s.phrase_filters(Field::TITLE));
        assert!(s.is_title_body());
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Schema>(&json).unwrap(), s);
    }

    #[test]
    fn schema_files_round_trip_and_bad_ones_are_refused() {
        let s = Schema::from_json(
            r#"{"fields": [{"name": "name", "type": "text"},
                           {"name": "description", "type": "text", "phrase_filters": true,
                            "analyzer": {"stemming": true}}],
                "default_fields": ["description"]}"#,
        )
        .unwrap();
        assert_eq!(s.names(), ["name", "description"]);
        assert_eq!(s.default_fields(), [Field::from_id(1)]);
        assert!(s.phrase_filters(Field::from_id(1)));
        let again = Schema::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again, s);
        for (bad, says) in [
            (r#"{"fields": []}"#, "at least one field"),
            (
                r#"{"fields": [{"name": "a", "type": "text"}, {"name": "a", "type": "text"}]}"#,
                "twice",
            ),
            (r#"{"fields": [{"name": "id", "type": "text"}]}"#, "external id"),
            (r#"{"fields": [{"name": "a b", "type": "text"}]}"#, "holds ` `"),
            (r#"{"fields": [{"name": "a", "type": "integer"}]}"#, "unknown variant"),
            (
                r#"{"fields": [{"name": "a", "type": "text", "stord": false}]}"#,
                "unknown field",
            ),
            (
                r#"{"fields": [{"name": "a", "type": "text", "positions": false}]}"#,
                "not supported",
            ),
            (
                r#"{"fields": [{"name": "a", "type": "text"}], "default_fields": ["b"]}"#,
                "unknown field `b`",
            ),
            (
                r#"{"fields": [{"name": "a", "type": "text"}], "extra": 1}"#,
                "unknown field",
            ),
        ] {
            let e = Schema::from_json(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn documents_are_checked_against_the_schema() {
        let s = Schema::text_fields(&["name", "notes"], false).unwrap();
        let ok = Document::new("a").with_text("name", "x");
        s.check(&ok).unwrap();
        let unknown = Document::new("a").with_text("title", "x");
        let e = s.check(&unknown).unwrap_err().to_string();
        assert!(e.contains("unknown field `title`") && e.contains("name, notes"), "{e}");
        let mut number = Document::new("a");
        number.fields.insert("name".into(), 5.into());
        assert!(s.check(&number).unwrap_err().to_string().contains("holds a number"));
        assert!(s.check(&Document::new("")).is_err());
    }
}
