//! The benchmark's schema: `id` (stored, not tokenised), `title` and `body`
//! (tokenised with tierdex's analyzer, frequencies and positions, stored),
//! and the protocol's typed fields, indexed and fast, not stored: `category`
//! and `tags` (raw keywords), `date` (milliseconds), `price` (f64),
//! `popularity` (i64).

use anyhow::{Context, Result};
use tantivy::schema::{
    DateOptions, DateTimePrecision, Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
    FAST, STORED, STRING,
};
use tantivy::Index;

use crate::tokenizer::{TierdexTokenizer, TOKENIZER_NAME};

/// The fields of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub title: Field,
    pub body: Field,
    /// The typed fields (absent from indexes built before they existed).
    pub typed: Option<TypedFields>,
}

/// The protocol's typed fields.
#[derive(Debug, Clone, Copy)]
pub struct TypedFields {
    pub category: Field,
    pub tags: Field,
    pub date: Field,
    pub price: Field,
    pub popularity: Field,
}

/// What a typed field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Keyword,
    Long,
    Double,
    Date,
}

impl TypedFields {
    /// The field and kind of typed field `name`.
    pub fn get(&self, name: &str) -> Option<(Field, Kind)> {
        Some(match name {
            "category" => (self.category, Kind::Keyword),
            "tags" => (self.tags, Kind::Keyword),
            "date" => (self.date, Kind::Date),
            "price" => (self.price, Kind::Double),
            "popularity" => (self.popularity, Kind::Long),
            _ => return None,
        })
    }
}

/// Builds the schema.
pub fn build() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER_NAME)
                // tantivy's postings cannot hold offsets: this is its most.
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let id = builder.add_text_field("id", STRING | STORED);
    let title = builder.add_text_field("title", text.clone());
    let body = builder.add_text_field("body", text);
    // Keywords: exact terms without norms (as Lucene's KeywordField), and a
    // fast (columnar) copy for sorting and exists.
    let keyword = TextOptions::from(FAST).set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_fieldnorms(false)
            .set_index_option(IndexRecordOption::Basic),
    );
    // Numbers and dates: indexed and fast, without norms (tantivy's INDEXED
    // flag would add a norm byte per document and field).
    let number = NumericOptions::default().set_indexed().set_fast();
    let typed = TypedFields {
        category: builder.add_text_field("category", keyword.clone()),
        tags: builder.add_text_field("tags", keyword),
        date: builder.add_date_field(
            "date",
            DateOptions::default()
                .set_indexed()
                .set_fast()
                .set_precision(DateTimePrecision::Milliseconds),
        ),
        price: builder.add_f64_field("price", number.clone()),
        popularity: builder.add_i64_field("popularity", number),
    };
    (
        builder.build(),
        Fields {
            id,
            title,
            body,
            typed: Some(typed),
        },
    )
}

/// Registers tierdex's tokenizer with the index (needed whenever an index
/// is created or opened: tantivy does not persist custom tokenizers).
pub fn register_tokenizer(index: &Index) {
    index.tokenizers().register(TOKENIZER_NAME, TierdexTokenizer::new());
}

/// The fields of an opened index, checking it has this schema.
pub fn fields_of(index: &Index) -> Result<Fields> {
    let schema = index.schema();
    let field = |name: &str| {
        schema
            .get_field(name)
            .with_context(|| format!("the index has no `{name}` field: not built by this engine"))
    };
    let typed = |name: &str| schema.get_field(name).ok();
    let typed = match (
        typed("category"),
        typed("tags"),
        typed("date"),
        typed("price"),
        typed("popularity"),
    ) {
        (Some(category), Some(tags), Some(date), Some(price), Some(popularity)) => Some(TypedFields {
            category,
            tags,
            date,
            price,
            popularity,
        }),
        _ => None,
    };
    Ok(Fields {
        id: field("id")?,
        title: field("title")?,
        body: field("body")?,
        typed,
    })
}
