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

    /// Checks the clause count, nesting and text bytes of `query`, in time
    /// proportional to at most `max_clauses` and without allocating (the
    /// recursion stops below `max_depth`).
    pub fn check(&self, query: &Query) -> Result<()> {
        let mut seen = Seen {
            clauses: usize::from(!matches!(query, Query::Boolean(_))),
            bytes: 0,
        };
        if seen.clauses > self.max_clauses {
            return Err(self.too_many_clauses());
        }
        self.check_node(query, 0, &mut seen)
    }

    fn check_node(&self, query: &Query, depth: usize, seen: &mut Seen) -> Result<()> {
        match query {
            Query::Term { text, .. } | Query::Phrase { text, .. } => {
                seen.bytes = seen.bytes.saturating_add(text.len());
                if seen.bytes > self.max_bytes {
                    return Err(too_large(
                        format!("its terms and phrases hold more than {} bytes", self.max_bytes),
                        "max_bytes",
                    ));
                }
            }
            Query::MatchAll | Query::Exists { .. } => {}
            Query::Terms { values, .. } => {
                seen.clauses = seen.clauses.saturating_add(values.len().saturating_sub(1));
                if seen.clauses > self.max_clauses {
                    return Err(self.too_many_clauses());
                }
                for v in values {
                    self.add_bytes(v.len(), seen)?;
                }
            }
            Query::Range { lower, upper, .. } => {
                for b in [lower, upper] {
                    if let std::ops::Bound::Included(v) | std::ops::Bound::Excluded(v) = b {
                        self.add_bytes(v.len(), seen)?;
                    }
                }
            }
            Query::ConstantScore { query, .. } => self.check_node(query, depth + 1, seen)?,
            Query::MinShouldMatch { query, .. } => self.check_group(std::iter::once(&**query), depth, seen)?,
            Query::DisMax { queries, .. } => self.check_group(queries.iter(), depth, seen)?,
            Query::Ids(ids) => {
                for id in ids {
                    self.add_bytes(id.len(), seen)?;
                }
            }
            Query::Boolean(children) => self.check_group(children.iter().map(|c| &c.query), depth, seen)?,
        }
        Ok(())
    }

    /// A group of `children` at `depth` (a boolean's clauses, a `dis_max`'s
    /// queries, the query a minimum of optional clauses wraps): its nesting, its clauses against the total, then each child.
    fn check_group<'q>(
        &self,
        children: impl ExactSizeIterator<Item = &'q Query>,
        depth: usize,
        seen: &mut Seen,
    ) -> Result<()> {
        if depth > self.max_depth.min(Self::DEPTH_CEILING) {
            return Err(too_large(
                format!("groups nested more than {} levels deep", self.max_depth),
                "max_depth",
            ));
        }
        seen.clauses = seen.clauses.saturating_add(children.len());
        if seen.clauses > self.max_clauses {
            return Err(self.too_many_clauses());
        }
        for q in children {
            self.check_node(q, depth + 1, seen)?;
        }
        Ok(())
    }

    fn add_bytes(&self, n: usize, seen: &mut Seen) -> Result<()> {
        seen.bytes = seen.bytes.saturating_add(n);
        if seen.bytes > self.max_bytes {
            return Err(too_large(
                format!("its terms and phrases hold more than {} bytes", self.max_bytes),
                "max_bytes",
            ));
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

/// What [`QueryLimits::check`] has counted so far.
struct Seen {
    clauses: usize,
    bytes: usize,
}

/// A query over the limit `name`: bad input.
fn too_large(what: String, name: &str) -> Error {
    Error::InvalidArgument(format!("query too large: {what} (query limit `{name}`)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::ast::{Clause, Occur};

    fn term(text: &str) -> Query {
        Query::Term {
            field: None,
            text: text.to_string(),
        }
    }

    fn group(queries: Vec<Query>) -> Query {
        Query::Boolean(
            queries
                .into_iter()
                .map(|query| Clause {
                    occur: Occur::Should,
                    query,
                })
                .collect(),
        )
    }

    /// The limit named in the error of `query`, if any.
    fn over(limits: &QueryLimits, query: &Query) -> Option<String> {
        limits.check(query).err().map(|e| {
            let message = e.to_string();
            let start = message.find("limit `").unwrap() + 7;
            message[start..message.len() - 2].to_string()
        })
    }

    #[test]
    fn limits_hold_exactly_at_their_values() {
        let limits = QueryLimits {
            max_bytes: 6,
            max_clauses: 3,
            max_depth: 2,
            ..QueryLimits::default()
        };
        assert_eq!(over(&limits, &group(vec![term("ab"), term("cd"), term("ef")])), None);
        let four = group(vec![term("a"), term("b"), term("c"), term("d")]);
        assert_eq!(over(&limits, &four).as_deref(), Some("max_clauses"));
        let bytes = group(vec![term("abc"), term("defg")]);
        assert_eq!(over(&limits, &bytes).as_deref(), Some("max_bytes"));
        // A group counts as a clause; the top-level boolean does not, a
        // lone leaf does.
        assert_eq!(over(&limits, &group(vec![group(vec![term("a"), term("b")])])), None);
        assert_eq!(over(&limits, &term("a")), None);
        // Two groups inside the top level, as `((a))` parses.
        let deep = group(vec![group(vec![group(vec![term("a")])])]);
        assert_eq!(over(&limits, &deep), None);
        let deeper = group(vec![group(vec![group(vec![group(vec![])])])]);
        assert_eq!(over(&limits, &deeper).as_deref(), Some("max_depth"));
        assert!(QueryLimits::default().validate().is_ok());
    }
}
