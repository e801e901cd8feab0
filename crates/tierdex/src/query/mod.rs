//! Queries: parsing, planning, scoring and the algorithms that evaluate them.
//!
//! * [`parser`] turns query text into the [`ast`], within the size
//!   [`limits`] (which the planner enforces again).
//! * [`planner`] analyses and expands it into a tree of [`weight::Weight`]s
//!   with global statistics (a [`weight::Plan`]).
//! * A weight per kind of node: [`term`], [`phrase`], [`boolean`],
//!   [`column`] (terms, ranges and existence on typed fields, match-all,
//!   constant scores, ids), [`dismax`] (the best of several),
//!   [`min_should`] (a minimum of optional clauses); each
//!   builds its segment scorer and runs the collection loops compiled for
//!   it. [`scorer`] defines the cursor contract; [`bm25`] the similarity.
//! * [`collector`] holds the loops: top-k with block-max pruning, counts;
//!   [`bulk`] the window-at-a-time top-k of disjunctions of terms,
//!   [`bulk_and`] that of conjunctions of term disjunctions;
//!   [`count`] decides when bitsets count faster.
//! * [`highlight`] builds snippets from stored offsets.

pub mod ast;
internal!(bm25);
internal!(boolean);
internal!(bulk);
internal!(bulk_and);
internal!(collector);
internal!(column);
internal!(count);
internal!(dismax);
pub mod dsl;
pub mod global;
pub mod highlight;
pub mod limits;
internal!(min_should);
pub mod parser;
internal!(phrase);
internal!(planner);
internal!(scorer);
pub mod sort;
internal!(term);
internal!(weight);

pub use limits::QueryLimits;
pub use parser::{parse, QueryError};
