//! The benchmark's schema: `id` (stored, not tokenised), `title` and `body`
//! (tokenised with tierdex's analyzer, frequencies and positions, stored).

use anyhow::{Context, Result};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, STORED, STRING};
use tantivy::Index;

use crate::tokenizer::{TierdexTokenizer, TOKENIZER_NAME};

/// The three fields of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub title: Field,
    pub body: Field,
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
    (builder.build(), Fields { id, title, body })
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
    Ok(Fields {
        id: field("id")?,
        title: field("title")?,
        body: field("body")?,
    })
}
