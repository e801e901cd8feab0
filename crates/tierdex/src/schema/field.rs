//! Field types and their options.

use serde::{Deserialize, Serialize};

use crate::analysis::AnalyzerConfig;
use crate::column::ColumnKind;

/// How a field is indexed and stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FieldType {
    /// Analysed text, searched by terms and phrases, scored with BM25.
    Text(TextOptions),
    /// A string kept whole: exact terms, ranges, sorting, aggregations.
    Keyword(KeywordOptions),
    /// A signed 64-bit integer.
    Long(ValueOptions),
    /// A 64-bit floating point number.
    Double(ValueOptions),
    /// A point in time, in milliseconds since the epoch (UTC).
    Date(DateOptions),
    /// `true` or `false`.
    Boolean(ValueOptions),
}

impl FieldType {
    /// The type's name, as mappings spell it.
    pub fn name(&self) -> &'static str {
        match self {
            FieldType::Text(_) => "text",
            FieldType::Keyword(_) => "keyword",
            FieldType::Long(_) => "long",
            FieldType::Double(_) => "double",
            FieldType::Date(_) => "date",
            FieldType::Boolean(_) => "boolean",
        }
    }

    /// The column kind of a field kept in columns (every type but text).
    pub fn column_kind(&self) -> Option<ColumnKind> {
        match self {
            FieldType::Text(_) => None,
            FieldType::Keyword(_) => Some(ColumnKind::Keyword),
            FieldType::Long(_) => Some(ColumnKind::Long),
            FieldType::Double(_) => Some(ColumnKind::Double),
            FieldType::Date(_) => Some(ColumnKind::Date),
            FieldType::Boolean(_) => Some(ColumnKind::Boolean),
        }
    }

    /// Whether queries can find documents by the field (postings for
    /// text, points for the others).
    pub fn indexed(&self) -> bool {
        match self {
            FieldType::Text(o) => o.index,
            FieldType::Keyword(o) => o.index,
            FieldType::Long(o) | FieldType::Double(o) | FieldType::Boolean(o) => o.index,
            FieldType::Date(o) => o.index,
        }
    }

    /// Whether the field has doc values (sorting, aggregations).
    pub fn doc_values(&self) -> bool {
        match self {
            FieldType::Text(_) => false,
            FieldType::Keyword(o) => o.doc_values,
            FieldType::Long(o) | FieldType::Double(o) | FieldType::Boolean(o) => o.doc_values,
            FieldType::Date(o) => o.doc_values,
        }
    }
}

/// Options of a text field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextOptions {
    /// Analysis of this field's text (and of query text searching it);
    /// absent: the index's analyzer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzer: Option<AnalyzerConfig>,
    /// Index the text (searchable); `false` keeps it in `_source` only.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub index: bool,
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

pub(crate) fn yes() -> bool {
    true
}

pub(crate) fn is_true(b: &bool) -> bool {
    *b
}

impl Default for TextOptions {
    /// Indexed and stored, with positions and offsets, without phrase
    /// filters, with the index's analyzer.
    fn default() -> Self {
        TextOptions {
            analyzer: None,
            index: true,
            stored: true,
            positions: true,
            offsets: true,
            phrase_filters: false,
        }
    }
}

/// Options of a keyword field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeywordOptions {
    /// Points for term and range queries.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub index: bool,
    /// A column for sorting and aggregations.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub doc_values: bool,
    /// Lowercase values (and the values queries look for): Elasticsearch's
    /// `normalizer: lowercase`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lowercase: bool,
    /// Values longer than this many characters are not indexed (they stay
    /// in `_source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_above: Option<u32>,
}

impl Default for KeywordOptions {
    fn default() -> Self {
        KeywordOptions {
            index: true,
            doc_values: true,
            lowercase: false,
            ignore_above: None,
        }
    }
}

/// Options of a long, double or boolean field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueOptions {
    /// Points for term and range queries.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub index: bool,
    /// A column for sorting and aggregations.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub doc_values: bool,
}

impl Default for ValueOptions {
    fn default() -> Self {
        ValueOptions {
            index: true,
            doc_values: true,
        }
    }
}

/// The date formats a date field accepts, Elasticsearch's default first.
pub const DEFAULT_DATE_FORMAT: &str = "strict_date_optional_time||epoch_millis";

/// Options of a date field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DateOptions {
    /// Points for term and range queries.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub index: bool,
    /// A column for sorting and aggregations.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub doc_values: bool,
    /// Accepted formats, `||`-separated: `strict_date_optional_time`,
    /// `epoch_millis`, `epoch_second`.
    #[serde(default = "default_date_format")]
    pub format: String,
}

fn default_date_format() -> String {
    DEFAULT_DATE_FORMAT.to_string()
}

impl Default for DateOptions {
    fn default() -> Self {
        DateOptions {
            index: true,
            doc_values: true,
            format: default_date_format(),
        }
    }
}

/// One field of a schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldEntry {
    /// The field's name, as queries spell it (a dotted path for fields of
    /// objects, `parent.sub` for a sub-field).
    pub name: String,
    /// Where in a document its values are, when not at `name`: the
    /// parent's path for a sub-field (`title.keyword` reads `title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// How it is indexed.
    #[serde(flatten)]
    pub ty: FieldType,
}

impl FieldEntry {
    /// A text field named `name` with `options`.
    pub fn text(name: impl Into<String>, options: TextOptions) -> FieldEntry {
        FieldEntry {
            name: name.into(),
            source: None,
            ty: FieldType::Text(options),
        }
    }

    /// A field named `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: FieldType) -> FieldEntry {
        FieldEntry {
            name: name.into(),
            source: None,
            ty,
        }
    }

    /// The path of the document values the field indexes.
    pub fn path(&self) -> &str {
        self.source.as_deref().unwrap_or(&self.name)
    }

    /// The options of a text field (`None` for other types).
    pub fn text_options(&self) -> Option<&TextOptions> {
        match &self.ty {
            FieldType::Text(o) => Some(o),
            _ => None,
        }
    }

    /// Whether the field is indexed text (has terms and positions).
    pub fn is_text(&self) -> bool {
        self.text_options().is_some_and(|o| o.index)
    }
}

/// What happens to a document value at a path the schema has no field for
/// (Elasticsearch's `dynamic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dynamic {
    /// A field is added for it, its type inferred from the value.
    True,
    /// It is kept in `_source` only: not searchable.
    False,
    /// The document is refused with an error naming the field.
    #[default]
    Strict,
}

impl Serialize for Dynamic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dynamic::True => s.serialize_bool(true),
            Dynamic::False => s.serialize_bool(false),
            Dynamic::Strict => s.serialize_str("strict"),
        }
    }
}

impl<'de> Deserialize<'de> for Dynamic {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dynamic, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(true) => Ok(Dynamic::True),
            serde_json::Value::Bool(false) => Ok(Dynamic::False),
            serde_json::Value::String(s) => s.parse().map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "dynamic must be true, false or \"strict\", not {other}"
            ))),
        }
    }
}

impl std::str::FromStr for Dynamic {
    type Err = String;
    fn from_str(s: &str) -> Result<Dynamic, String> {
        match s {
            "true" => Ok(Dynamic::True),
            "false" => Ok(Dynamic::False),
            "strict" => Ok(Dynamic::Strict),
            other => Err(format!("dynamic must be true, false or strict, not `{other}`")),
        }
    }
}
