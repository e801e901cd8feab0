//! The query-language parser (stub; see the analysis+parser helper task).

use super::ast::Query;

/// A query that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Malformed syntax at a byte position of the query text.
    #[error("query syntax error at position {position}: {message}")]
    Syntax {
        /// Byte offset in the query text where the problem was found.
        position: usize,
        /// What is wrong.
        message: String,
    },
    /// A `field:` prefix naming a field that does not exist.
    #[error("unknown field `{field}` at position {position} (known fields: title, body)")]
    UnknownField {
        /// The unknown field name.
        field: String,
        /// Byte offset of the field name.
        position: usize,
    },
}

/// Parses `text` into a [`Query`].
pub fn parse(text: &str) -> Result<Query, QueryError> {
    let _ = text;
    Ok(Query::Boolean(Vec::new()))
}
