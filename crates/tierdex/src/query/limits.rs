//! Limits on the size of one query, so that no query costs time or memory
//! out of proportion: the parser refuses text over them before building
//! anything, and the planner checks every query again (queries built in
//! code with [`ast`](crate::query::ast) never meet the parser) before it
//! analyses any text.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::query::ast::Query;

/// Bounds on the size of one query ([`Searcher::set_query_limits`]
/// changes them for a searcher; [`parse`](crate::query::parse) applies the
/// defaults).
///
/// [`Searcher::set_query_limits`]: crate::search::Searcher::set_query_limits
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryLimits {
    /// Longest query text, in bytes; for a query built in code, the total
    /// bytes of the text of its terms and phrases. Default 65,536.
    pub max_bytes: usize,
    /// Most clauses (terms, phrases and groups, at any depth). Default
    /// 1,024, Lucene's `maxClauseCount`.
    pub max_clauses: usize,
    /// Most term lookups once the text is analysed: every token of every
    /// term and phrase, once per field it searches (a word searched in the
    /// two default fields counts twice). Default 4,096.
    pub max_terms: usize,
    /// Most tokens in one phrase. Default 128.
    pub max_phrase_terms: usize,
    /// Deepest nesting of groups: parentheses, or boolean queries inside
    /// boolean queries. Default 64; at most [`QueryLimits::DEPTH_CEILING`].
    pub max_depth: usize,
}

impl QueryLimits {
    /// The largest `max_depth` allowed: parsing and planning recurse once
    /// per level, and must not run out of stack.
    pub const DEPTH_CEILING: usize = 256;

    /// Refuses limits that cannot be honoured (a depth over
    /// [`QueryLimits::DEPTH_CEILING`]).
    pub fn validate(&self) -> Result<()> {
        if self.max_depth > Self::DEPTH_CEILING {
            return Err(Error::InvalidArgument(format!(
                "query limit max_depth = {} is above the ceiling of {}",
                self.max_depth,
                Self::DEPTH_CEILING
            )));
        }
        Ok(())
    }

    /// Checks the clause count, nesting and text bytes of `query` (in time
    /// proportional to at most `max_clauses`, without recursion).
    pub fn check(&self, query: &Query) -> Result<()> {
        let mut clauses = usize::from(!matches!(query, Query::Boolean(_)));
        if clauses > self.max_clauses {
            return Err(self.too_many_clauses());
        }
        let mut bytes = 0usize;
        let mut stack = vec![(query, 0usize)];
        while let Some((q, depth)) = stack.pop() {
            match q {
                Query::Term { text, .. } | Query::Phrase { text, .. } => {
                    bytes = bytes.saturating_add(text.len());
                    if bytes > self.max_bytes {
                        return Err(too_large(
                            format!("its terms and phrases hold more than {} bytes", self.max_bytes),
                            "max_bytes",
                        ));
                    }
                }
                Query::Boolean(children) => {
                    if depth > self.max_depth {
                        return Err(too_large(
                            format!("groups nested more than {} levels deep", self.max_depth),
                            "max_depth",
                        ));
                    }
                    for c in children {
                        clauses += 1;
                        if clauses > self.max_clauses {
                            return Err(self.too_many_clauses());
                        }
                        stack.push((&c.query, depth + 1));
                    }
                }
            }
        }
        Ok(())
    }

    fn too_many_clauses(&self) -> Error {
        too_large(format!("more than {} clauses", self.max_clauses), "max_clauses")
    }

    /// The error for more than `max_terms` term lookups.
    pub(crate) fn too_many_terms(&self) -> Error {
        too_large(
            format!(
                "more than {} terms once analysed (each field a term searches counts)",
                self.max_terms
            ),
            "max_terms",
        )
    }

    /// The error for a phrase of more than `max_phrase_terms` tokens.
    pub(crate) fn phrase_too_long(&self) -> Error {
        too_large(
            format!("a phrase of more than {} terms", self.max_phrase_terms),
            "max_phrase_terms",
        )
    }
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_bytes: 64 * 1024,
            max_clauses: 1024,
            max_terms: 4096,
            max_phrase_terms: 128,
            max_depth: crate::query::parser::MAX_DEPTH,
        }
    }
}

/// A query over the limit `name`: bad input.
fn too_large(what: String, name: &str) -> Error {
    Error::InvalidArgument(format!("query too large: {what} (query limit `{name}`)"))
}
