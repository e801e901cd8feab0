//! The document model: a schema of named, typed fields, and documents as an
//! external id plus field values.
//!
//! A [`Schema`] lists an index's fields in id order; a [`Field`] is a
//! field's id (it is the first byte of every term key, so an index holds at
//! most 255 fields). Each field has a [`FieldType`]: text (analysed into
//! terms with positions and byte offsets, optionally with phrase Bloom
//! filters), or keyword, long, double, date and boolean (kept in columns,
//! see [`crate::column`]). A field reads the document values at its path
//! ([`value::values_at`]); a schema made from an Elasticsearch mapping, or
//! grown from documents by dynamic mapping, is described in [`mapping`].
//! The default
//! schema, [`Schema::title_body`], is the `title` and `body` fields every
//! index had before schemas existed (phrase filters on `body`), and what a
//! manifest without a schema means.
//!
//! Unqualified query terms search the schema's default fields
//! ([`Schema::default_fields`]), each term becoming a disjunction over them.

mod document;
mod field;
pub mod mapping;
pub mod value;

use serde::{Deserialize, Serialize};

use crate::analysis::{Analyzer, AnalyzerConfig};
pub use crate::common::{DocId, TERMINATED};
use crate::error::{Error, Result};
pub use document::{Document, Fields};
pub use field::{
    DateOptions, Dynamic, FieldEntry, FieldType, KeywordOptions, TextOptions, ValueOptions, DEFAULT_DATE_FORMAT,
};

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

/// The fields of an index, in id order, the fields unqualified query
/// terms search, and what happens to values no field is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SchemaSpec", into = "SchemaSpec")]
pub struct Schema {
    fields: Vec<FieldEntry>,
    default_fields: Vec<Field>,
    /// Whether `default_fields` was set, rather than every indexed text
    /// field (which then includes text fields added later).
    explicit_defaults: bool,
    dynamic: Dynamic,
}

/// The serialised form of a [`Schema`] (a schema file, the manifest).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaSpec {
    fields: Vec<FieldEntry>,
    /// Field names; absent: every indexed text field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_fields: Option<Vec<String>>,
    /// Absent: strict.
    #[serde(default, skip_serializing_if = "is_strict")]
    dynamic: Dynamic,
}

fn is_strict(d: &Dynamic) -> bool {
    *d == Dynamic::Strict
}

impl TryFrom<SchemaSpec> for Schema {
    type Error = Error;
    fn try_from(spec: SchemaSpec) -> Result<Schema> {
        if spec.fields.is_empty() && spec.dynamic != Dynamic::True {
            return Err(Error::InvalidArgument(
                "a schema needs at least one field (or `\"dynamic\": true` to take them from the documents)".into(),
            ));
        }
        let mut schema = Schema::new(spec.fields)?;
        schema.dynamic = spec.dynamic;
        if let Some(names) = spec.default_fields {
            schema.set_default_fields(&names)?;
        }
        Ok(schema)
    }
}

impl From<Schema> for SchemaSpec {
    fn from(s: Schema) -> SchemaSpec {
        let default_fields = s
            .explicit_defaults
            .then(|| s.default_fields.iter().map(|&f| s.name(f).to_string()).collect());
        SchemaSpec {
            fields: s.fields,
            default_fields,
            dynamic: s.dynamic,
        }
    }
}

/// Characters a field name may hold besides letters and digits.
const NAME_PUNCTUATION: &[char] = &['_', '-', '.', '@'];

/// Why `name` cannot be a field name, if it cannot.
fn invalid_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a field name is empty".into());
    }
    if name == "id" || name == "_id" {
        return Some(format!("`{name}` is the document's external id, not a field"));
    }
    if name.starts_with('_') {
        return Some(format!(
            "field name `{name}` starts with `_`, which is kept for metadata fields"
        ));
    }
    if name.len() > 255 {
        let cut = name.char_indices().nth(32).map_or(name.len(), |(i, _)| i);
        return Some(format!("field name `{}…` is longer than 255 bytes", &name[..cut]));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_alphanumeric() || NAME_PUNCTUATION.contains(&c)))
    {
        return Some(format!(
            "field name `{name}` holds `{c}`: use letters, digits, `_`, `-`, `.` and `@`"
        ));
    }
    if name.starts_with(['-', '.']) || name.ends_with('.') || name.contains("..") {
        return Some(format!(
            "field name `{name}` has an empty part or starts with `{}`",
            &name[..1]
        ));
    }
    None
}

/// Why `entry` cannot be a field, if it cannot.
fn invalid_entry(f: &FieldEntry) -> Option<String> {
    if let Some(why) = invalid_name(&f.name) {
        return Some(why);
    }
    match &f.ty {
        FieldType::Text(o) if !o.positions || !o.offsets || !o.stored => Some(format!(
            "field `{}`: text fields that are not stored, or without positions or offsets, \
             are not supported yet (every text field is stored, with positions and offsets: \
             deletes recompute statistics from the stored text)",
            f.name
        )),
        FieldType::Date(o) => value::unknown_date_format(&o.format).map(|bad| {
            format!(
                "field `{}`: unknown date format `{bad}` (supported: strict_date_optional_time, epoch_millis, epoch_second, yyyy/MM/dd HH:mm:ss, yyyy/MM/dd)",
                f.name
            )
        }),
        FieldType::Keyword(KeywordOptions { ignore_above: Some(0), .. }) => {
            Some(format!("field `{}`: ignore_above must be positive", f.name))
        }
        _ => None,
    }
}

impl Schema {
    /// A schema of `fields` (ids in this order), unqualified terms searching
    /// every indexed text field, strict (a document value no field is for
    /// is an error). Names must be unique, not `id`, and made of letters,
    /// digits and a few punctuation marks.
    pub fn new(fields: Vec<FieldEntry>) -> Result<Schema> {
        if fields.len() > Field::MAX {
            return Err(Error::InvalidArgument(format!(
                "a schema holds at most {} fields ({} given)",
                Field::MAX,
                fields.len()
            )));
        }
        for (i, f) in fields.iter().enumerate() {
            if let Some(why) = invalid_entry(f) {
                return Err(Error::InvalidArgument(why));
            }
            if fields[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::InvalidArgument(format!("field `{}` is listed twice", f.name)));
            }
        }
        let mut schema = Schema {
            fields,
            default_fields: Vec::new(),
            explicit_defaults: false,
            dynamic: Dynamic::Strict,
        };
        schema.default_fields = schema.all_text();
        Ok(schema)
    }

    /// Every indexed text field.
    fn all_text(&self) -> Vec<Field> {
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_text())
            .map(|(i, _)| Field(i as u8))
            .collect()
    }

    /// Text fields named `names`, stored, with phrase filters when
    /// `phrase_filters` (the `tierdex index --fields a,b` schema).
    pub fn text_fields<S: AsRef<str>>(names: &[S], phrase_filters: bool) -> Result<Schema> {
        if names.is_empty() {
            return Err(Error::InvalidArgument("a schema needs at least one field".into()));
        }
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
            explicit_defaults: false,
            dynamic: Dynamic::Strict,
        }
    }

    /// An empty schema whose fields come from the documents (dynamic
    /// mapping).
    pub fn dynamic() -> Schema {
        Schema {
            fields: Vec::new(),
            default_fields: Vec::new(),
            explicit_defaults: false,
            dynamic: Dynamic::True,
        }
    }

    /// Reads a schema file (JSON: `{"fields": [{"name": .., "type":
    /// "text", ..}], "default_fields": [..], "dynamic": ..}`) or an
    /// Elasticsearch mapping (`{"properties": {..}}`, optionally inside
    /// `{"mappings": ..}`).
    pub fn from_json(text: &str) -> Result<Schema> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("invalid schema: {e}")))?;
        if v.get("properties").is_some() || v.get("mappings").is_some() {
            return mapping::from_mapping(&v);
        }
        serde_json::from_value(v).map_err(|e| Error::InvalidArgument(format!("invalid schema: {e}")))
    }

    /// Sets the fields unqualified query terms search (indexed text fields).
    pub fn set_default_fields<S: AsRef<str>>(&mut self, names: &[S]) -> Result<()> {
        let fields = self.resolve(names)?;
        if let Some(&f) = fields.iter().find(|&&f| !self.fields[f.index()].is_text()) {
            return Err(Error::InvalidArgument(format!(
                "default field `{}` is not an indexed text field",
                self.name(f)
            )));
        }
        self.default_fields = fields;
        self.explicit_defaults = true;
        Ok(())
    }

    /// What happens to document values no field is for.
    pub fn dynamic_mode(&self) -> Dynamic {
        self.dynamic
    }

    /// Sets what happens to document values no field is for.
    pub fn set_dynamic(&mut self, dynamic: Dynamic) {
        self.dynamic = dynamic;
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

    /// Whether the schema has no field (yet: a dynamic one).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Every field, in id order.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = Field> + '_ {
        (0..self.fields.len() as u8).map(Field)
    }

    /// The indexed text fields, in id order.
    pub fn text_field_ids(&self) -> impl Iterator<Item = Field> + '_ {
        self.fields().filter(|f| self.fields[f.index()].is_text())
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
        self.entry(field)
            .and_then(FieldEntry::text_options)
            .is_some_and(|o| o.phrase_filters && o.index)
    }

    /// Whether `field` is indexed text kept in the document store (the
    /// fields highlighting shows).
    pub fn stored(&self, field: Field) -> bool {
        self.entry(field).is_some_and(FieldEntry::is_text)
    }

    /// True for the default schema (an index that records no schema).
    pub fn is_title_body(&self) -> bool {
        *self == Schema::title_body()
    }

    /// Whether every field is text (an index without columns).
    pub fn text_only(&self) -> bool {
        self.fields.iter().all(|f| matches!(f.ty, FieldType::Text(_)))
    }

    /// The analyzer of every field, in id order: a field's own, or
    /// `default` (the index's).
    pub fn analyzers(&self, default: AnalyzerConfig) -> Vec<Analyzer> {
        self.fields
            .iter()
            .map(|f| Analyzer::new(f.text_options().and_then(|o| o.analyzer).unwrap_or(default)))
            .collect()
    }

    /// Adds `entry` as a new field (dynamic mapping, or a mapping update);
    /// an indexed text field joins the default fields unless they were set.
    pub fn add_field(&mut self, entry: FieldEntry) -> Result<Field> {
        if self.fields.len() >= Field::MAX {
            return Err(Error::InvalidArgument(format!(
                "field `{}` would be field number {}: an index holds at most {} fields",
                entry.name,
                Field::MAX + 1,
                Field::MAX
            )));
        }
        if let Some(why) = invalid_entry(&entry) {
            return Err(Error::InvalidArgument(why));
        }
        if self.field(&entry.name).is_some() {
            return Err(Error::InvalidArgument(format!("field `{}` exists already", entry.name)));
        }
        let f = Field(self.fields.len() as u8);
        let text = entry.is_text();
        self.fields.push(entry);
        if text && !self.explicit_defaults {
            self.default_fields.push(f);
        }
        Ok(f)
    }

    /// Makes `doc` fit the schema: by [`Schema::dynamic_mode`], adds fields
    /// for the values no field is for (returning how many), ignores them,
    /// or refuses the document naming the first. Values of the wrong type
    /// are found by [`Schema::check`].
    pub fn map_dynamic(&mut self, doc: &Document) -> Result<usize> {
        let mut unknown: Vec<(String, &serde_json::Value)> = Vec::new();
        mapping::leaves(&doc.fields, &mut |path, v| {
            if !self.covers(path) && !unknown.iter().any(|(p, _)| p == path) {
                unknown.push((path.to_string(), v));
            }
        });
        if unknown.is_empty() {
            return Ok(0);
        }
        match self.dynamic {
            Dynamic::False => Ok(0),
            Dynamic::Strict => Err(Error::InvalidArgument(format!(
                "document {:?}: unknown field `{}`, and the mapping is strict (the index's fields: {})",
                doc.id,
                unknown[0].0,
                self.names().join(", ")
            ))),
            Dynamic::True => {
                let mut added = 0;
                for (path, v) in unknown {
                    for entry in mapping::infer(&path, v) {
                        self.add_field(entry).map_err(|e| match e {
                            Error::InvalidArgument(m) => Error::InvalidArgument(format!("document {:?}: {m}", doc.id)),
                            other => other,
                        })?;
                        added += 1;
                    }
                }
                Ok(added)
            }
        }
    }

    /// [`Schema::map_dynamic`] then [`Schema::check`]: the fields `doc`
    /// needs are added only if it fits then (a refused document leaves the
    /// schema as it was). Returns how many were added.
    pub fn admit(&mut self, doc: &Document) -> Result<usize> {
        let mut unknown = false;
        mapping::leaves(&doc.fields, &mut |path, _| unknown |= !self.covers(path));
        if !unknown || self.dynamic != Dynamic::True {
            self.check(doc)?;
            return Ok(0);
        }
        let mut grown = self.clone();
        let added = grown.map_dynamic(doc)?;
        grown.check(doc)?;
        *self = grown;
        Ok(added)
    }

    /// Whether some field reads the values at `path`.
    pub fn covers(&self, path: &str) -> bool {
        self.fields.iter().any(|f| f.path() == path)
    }

    /// Checks that `doc` fits the schema: it has an id, every value the
    /// schema has a field for converts to that field's type, and (unless
    /// the schema is dynamic) no value lies where no field is. Nothing a
    /// document holds is dropped silently.
    pub fn check(&self, doc: &Document) -> Result<()> {
        if doc.id.is_empty() {
            return Err(Error::InvalidArgument("a document has an empty id".into()));
        }
        if self.dynamic == Dynamic::Strict {
            let mut unknown = None;
            mapping::leaves(&doc.fields, &mut |path, _| {
                if unknown.is_none() && !self.covers(path) {
                    unknown = Some(path.to_string());
                }
            });
            if let Some(path) = unknown {
                return Err(Error::InvalidArgument(format!(
                    "document {:?}: unknown field `{path}` (the index's fields: {})",
                    doc.id,
                    self.names().join(", ")
                )));
            }
        }
        for entry in &self.fields {
            let mut err = None;
            value::values_at(&doc.fields, entry.path(), &mut |v| {
                if err.is_none() {
                    if let Err(e) = value::convert(entry, v) {
                        err = Some(e);
                    }
                }
            });
            if let Some(e) = err {
                return Err(Error::InvalidArgument(format!("document {:?}: {e}", doc.id)));
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
    default: Analyzer,
}

impl Analysis {
    /// `schema`'s analysis, `default` being the index's analyzer.
    pub fn new(schema: Schema, default: AnalyzerConfig) -> Analysis {
        let analyzers = schema.analyzers(default);
        Analysis {
            schema,
            analyzers,
            default: Analyzer::new(default),
        }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Calls `sink` with every token of `text` as `field` indexes it.
    #[inline]
    pub fn analyze(&self, field: Field, text: &str, sink: impl FnMut(crate::analysis::Token<'_>)) {
        self.analyzer(field).analyze(text, sink)
    }

    /// Calls `sink` with every token `field` indexes of `doc` (nothing for a
    /// field that is not indexed text): each of its values in turn, the
    /// positions of a value [`POSITION_GAP`] after the previous value's
    /// last, byte offsets into the values joined by [`VALUE_SEPARATOR`]
    /// (what [`field_text`] gives). Indexing, deletes and highlighting all
    /// analyse documents here.
    pub fn analyze_values(&self, field: Field, doc: &Document, mut sink: impl FnMut(crate::analysis::Token<'_>)) {
        let Some(entry) = self.schema.entry(field).filter(|e| e.is_text()) else {
            return;
        };
        let analyzer = self.analyzer(field);
        let (mut position_base, mut offset_base, mut next_position) = (0u32, 0u32, 0u32);
        let mut first = true;
        value::values_at(&doc.fields, entry.path(), &mut |v| {
            let Some(text) = value::scalar_text(v) else {
                return;
            };
            if !first {
                position_base = next_position.saturating_add(POSITION_GAP);
                offset_base = offset_base.saturating_add(VALUE_SEPARATOR.len() as u32);
            }
            first = false;
            analyzer.analyze(&text, |t| {
                let position = t.position.saturating_add(position_base);
                next_position = next_position.max(position.saturating_add(1));
                sink(crate::analysis::Token {
                    term: t.term,
                    position,
                    start: t.start.saturating_add(offset_base),
                    end: t.end.saturating_add(offset_base),
                })
            });
            offset_base = offset_base.saturating_add(text.len().min(u32::MAX as usize) as u32);
        });
    }

    /// The analyzer of `field` (the index's for an id the schema does not
    /// have).
    #[inline]
    pub fn analyzer(&self, field: Field) -> &Analyzer {
        self.analyzers.get(field.index()).unwrap_or(&self.default)
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

/// Positions between the last token of a value of a multi-valued text
/// field and the first of the next (Elasticsearch's
/// `position_increment_gap`): phrases do not match across values.
pub const POSITION_GAP: u32 = 100;

/// What joins the values of a multi-valued text field in its text (the
/// offsets of its tokens point into the joined text).
pub const VALUE_SEPARATOR: &str = "\n";

/// The text of `doc` that field `entry`'s offsets point into: its values
/// joined by [`VALUE_SEPARATOR`] (borrowed when it has one string value).
pub fn field_text<'a>(entry: &FieldEntry, doc: &'a Document) -> std::borrow::Cow<'a, str> {
    let mut out: Option<std::borrow::Cow<'a, str>> = None;
    value::values_at(&doc.fields, entry.path(), &mut |v| {
        if let Some(t) = value::scalar_text(v) {
            out = Some(match out.take() {
                None => t,
                Some(prev) => std::borrow::Cow::Owned(format!("{prev}{VALUE_SEPARATOR}{t}")),
            });
        }
    });
    out.unwrap_or_default()
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
        // Numbers are text as Elasticsearch coerces them; objects are not.
        let mut number = Document::new("a");
        number.fields.insert("name".into(), 5.into());
        s.check(&number).unwrap();
        let mut object = Document::new("a");
        object.fields.insert("name".into(), serde_json::json!({"first": "x"}));
        let e = s.check(&object).unwrap_err().to_string();
        assert!(e.contains("unknown field `name.first`"), "{e}");
        assert!(s.check(&Document::new("")).is_err());
    }
}
