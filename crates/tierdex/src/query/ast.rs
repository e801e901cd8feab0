//! The parsed form of a query, before analysis and planning.
//!
//! Semantics (shared by the planner and the test oracle; Lucene's classic
//! query parser with `MultiFieldQueryParser` over `title` and `body`):
//!
//! * A [`Query::Term`]'s text is analysed like document text. Each resulting
//!   token becomes a term query; several tokens become a SHOULD disjunction
//!   of them; no tokens (punctuation, a stop word) drops the clause.
//! * A [`Query::Phrase`]'s text is analysed; the tokens must appear at the
//!   same relative positions (gaps left by removed stop words kept). One
//!   token is a plain term query; none drops the clause. Phrase frequency is
//!   the number of start positions that match; its BM25 weight uses the sum
//!   of the tokens' IDFs.
//! * `field: None` means both fields: `t` becomes `title:t OR body:t`, scored
//!   as the sum; a phrase matches within one field.
//! * [`Query::Boolean`]: with at least one MUST clause a document must match
//!   all MUST clauses and SHOULD clauses only add to the score; without MUST
//!   clauses at least one SHOULD clause must match. MUST_NOT clauses exclude.
//!   A boolean query with only MUST_NOT clauses (or no clauses) matches
//!   nothing. The score is the sum of the scores of the matching MUST and
//!   SHOULD clauses. FILTER clauses are required like MUST but add nothing
//!   to the score.
//! * [`Query::MinShouldMatch`] (Elasticsearch's `minimum_should_match`)
//!   sets how many optional clauses must match: a [`Query::Boolean`]'s
//!   SHOULD clauses as written (`n` of them, those that analyse to nothing
//!   or name absent terms included: they never match), or the tokens of a
//!   [`Query::Term`] (each token over the term's fields is one clause; with
//!   several default-field analyzers, each analyzer's tokens separately and
//!   the results OR-ed). With `m` = [`MinimumShouldMatch::resolve`]`(n)`: `m`
//!   = 0 leaves the query as it is (so without MUST or FILTER clauses one
//!   SHOULD clause must still match); `m > n` matches nothing; otherwise a
//!   document must also match at least `m` SHOULD clauses, scored as a
//!   boolean is. A term with fewer than two tokens, a term on a typed field
//!   and any other query ignore the minimum, as Elasticsearch's `match`
//!   ignores it for a single term.
//! * On a keyword, number, date or boolean field, a [`Query::Term`] or
//!   [`Query::Phrase`] is an exact value (a keyword normalised as the field
//!   is; a number, date or boolean parsed as the field's type) and
//!   [`Query::Terms`] any of several; [`Query::Range`] bounds values (its
//!   bounds parsed alike; keywords compare by bytes); [`Query::Exists`]
//!   matches documents with a value (a token, for text). These, and
//!   [`Query::MatchAll`], score a constant 1.

use std::ops::Bound;

use crate::schema::Field;

/// How a clause takes part in its boolean query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Occur {
    /// Optional: adds to the score; at least one must match when there is no MUST.
    Should,
    /// Required (`+a`).
    Must,
    /// Excluded (`-a`).
    MustNot,
    /// Required, not scored (Elasticsearch's `filter`).
    Filter,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Query {
    /// One word as typed (analysed at planning time).
    Term {
        /// `Some` when prefixed with `title:` or `body:`.
        field: Option<Field>,
        /// The raw word.
        text: String,
    },
    /// A quoted phrase as typed (analysed at planning time).
    Phrase {
        /// `Some` when prefixed with `title:` or `body:`.
        field: Option<Field>,
        /// The raw text between the quotes.
        text: String,
    },
    /// A list of clauses (the top level, or a parenthesised group).
    Boolean(Vec<Clause>),
    /// Every document (`*:*`, `match_all`).
    MatchAll,
    /// Any of these exact values of a field (`terms`).
    Terms {
        /// The field.
        field: Field,
        /// The values as typed.
        values: Vec<String>,
    },
    /// Values of a field between two bounds (`field:[a TO b]`, `range`).
    Range {
        /// The field.
        field: Field,
        /// Lower bound, as typed.
        lower: Bound<String>,
        /// Upper bound, as typed.
        upper: Bound<String>,
    },
    /// Documents with a value in a field (`_exists_:field`, `exists`).
    Exists {
        /// The field.
        field: Field,
    },
    /// The documents with these external ids (`ids`), scored 1.
    Ids(Vec<String>),
    /// The union of `queries`, each document scored by its best query plus
    /// the tie breaker times the others (`dis_max`, and `multi_match`'s
    /// `best_fields`).
    DisMax {
        /// The queries.
        queries: Vec<Query>,
        /// The tie breaker (0 to 1), as IEEE bits.
        tie_bits: u32,
    },
    /// A boolean's SHOULD clauses, or a term's tokens, of which at least a
    /// minimum must match (`minimum_should_match`; see the module
    /// documentation).
    MinShouldMatch {
        /// A [`Query::Boolean`] or a [`Query::Term`].
        query: Box<Query>,
        /// How many of its optional clauses must match.
        min: MinimumShouldMatch,
    },
    /// Another query's matches, scored a constant (`constant_score`).
    ConstantScore {
        /// The query.
        query: Box<Query>,
        /// The score, as IEEE bits (so that queries compare and hash).
        boost_bits: u32,
    },
}

impl Query {
    /// `query` with constant score `boost`.
    pub fn constant_score(query: Query, boost: f32) -> Query {
        Query::ConstantScore {
            query: Box::new(query),
            boost_bits: boost.to_bits(),
        }
    }
}

/// How many of `n` optional clauses must match, as Elasticsearch's
/// `minimum_should_match` says it (its combinations, `3<90%`, excepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MinimumShouldMatch {
    /// This many (`3`); `-k`: all but `k`.
    Count(i32),
    /// This percentage of `n`, rounded down (`75%`); `-p%`: all but `p`
    /// percent of `n`, that part rounded down.
    Percent(i32),
}

impl MinimumShouldMatch {
    /// How many of `n` optional clauses must match: never negative, and
    /// more than `n` when no document can satisfy it (`5` of 3 clauses).
    pub fn resolve(self, n: usize) -> usize {
        let n = n as i64;
        let m = match self {
            MinimumShouldMatch::Count(c) if c < 0 => n + i64::from(c),
            MinimumShouldMatch::Count(c) => i64::from(c),
            MinimumShouldMatch::Percent(p) => {
                let part = n * i64::from(p);
                // Division truncates toward zero: the missing part of a
                // negative percentage rounds down too.
                if part < 0 {
                    n + part / 100
                } else {
                    part / 100
                }
            }
        };
        usize::try_from(m.max(0)).unwrap_or(usize::MAX)
    }
}

/// One clause of a boolean query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Clause {
    /// SHOULD, MUST or MUST_NOT.
    pub occur: Occur,
    /// The clause's query.
    pub query: Query,
}

#[cfg(test)]
mod tests {
    use super::MinimumShouldMatch::{Count, Percent};

    #[test]
    fn minimums_resolve_as_elasticsearch_computes_them() {
        for (min, n, want) in [
            (Count(3), 4, 3),
            (Count(5), 3, 5),
            (Count(0), 3, 0),
            (Count(-2), 4, 2),
            (Count(-5), 3, 0),
            (Count(i32::MIN), 3, 0),
            (Count(i32::MAX), 3, i32::MAX as usize),
            (Percent(75), 4, 3),
            (Percent(75), 3, 2),
            (Percent(50), 5, 2),
            (Percent(100), 6, 6),
            (Percent(150), 3, 4),
            (Percent(-25), 4, 3),
            (Percent(-25), 3, 3),
            (Percent(-50), 5, 3),
            (Percent(-100), 4, 0),
            (Percent(-300), 4, 0),
            (Percent(i32::MAX), 2, 42_949_672),
            (Percent(i32::MIN), 2, 0),
            (Percent(75), 0, 0),
            (Count(2), 0, 2),
        ] {
            assert_eq!(min.resolve(n), want, "{min:?} of {n}");
        }
    }
}
