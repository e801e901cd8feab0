//! Queries: parsing, planning, scoring and the algorithms that evaluate them.
//!
//! * [`parser`] turns query text into the [`ast`].
//! * [`planner`] analyses and expands it into a [`planner::Plan`] with global
//!   statistics, and builds a scorer tree per segment.
//! * [`scorer`] defines the cursor contract; [`boolean`] and [`phrase`] hold
//!   the combinators; [`bm25`] the similarity.
//! * [`collector`] drives a tree: top-k with block-max pruning, counts;
//!   [`count`] counts boolean plans of terms with bitsets.
//! * [`highlight`] builds snippets from stored offsets.

pub mod ast;
pub mod bm25;
pub mod boolean;
pub mod collector;
pub mod count;
pub mod highlight;
pub mod parser;
pub mod phrase;
pub mod planner;
pub mod scorer;

pub use parser::{parse, QueryError};
