//! Queries: parsing, planning, scoring and the algorithms that evaluate them.

pub mod ast;
pub mod parser;

pub use parser::{parse, QueryError};
