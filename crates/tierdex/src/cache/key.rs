//! Canonical cache keys: what a query means, not how it was typed.
//!
//! A key is the canonical form of the query's plan ([`Weight::key`]): the
//! planner has analysed every leaf with its field's analyzer, dropped what
//! analyses to nothing, collapsed one-clause booleans, flattened nested
//! pure disjunctions and conjunctions and sorted every operand list. Two
//! queries with equal keys plan to equal weights, so they return identical
//! results: `b a`, `a b`, `(a) b` and `A  b` share one entry. Nothing here
//! analyses text itself.

use std::hash::{Hash, Hasher};
use std::time::Instant;

use crate::error::Result;
use crate::index::Index;
use crate::query::ast::{self, Occur};
use crate::query::collector::Cutoff;
use crate::query::planner::Planner;
pub use crate::query::weight::QueryKey;
use crate::search::{Mode, Searcher};

/// The full identity of a cached result: the query's meaning, mode and k.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The query.
    pub query: QueryKey,
    /// The mode.
    pub mode: Mode,
    /// Hits asked for (0 for [`Mode::Count`]).
    pub k: usize,
}

impl CacheKey {
    /// The key of `query` asked with `mode` and `k`.
    pub fn new(query: QueryKey, mode: Mode, k: usize) -> CacheKey {
        let k = if mode == Mode::Count { 0 } else { k };
        CacheKey { query, mode, k }
    }

    /// A well-mixed 64-bit hash (shard choice and policy identity).
    pub fn hash64(&self) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        self.hash(&mut h);
        mix(h.finish())
    }
}

/// SplitMix64's finaliser: spreads every input bit over the whole word.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A query's key, whether the query is a single word, and the word clauses
/// of a top-level disjunction, whose own results a cache entry may keep for
/// partial matching.
#[derive(Debug, Clone)]
pub struct Canonical {
    /// `None` when the query matches nothing (it analyses to nothing, or
    /// names terms the index lacks): there is nothing worth caching.
    pub key: Option<QueryKey>,
    /// The query is one word (a term clause, alone once what analyses to
    /// nothing is dropped): a cached disjunction holding that word's own
    /// results can answer it.
    pub is_word: bool,
    /// For a disjunction of two or more clauses: each word clause's key and
    /// its parsed form (to evaluate it on its own), in key order.
    pub words: Vec<(QueryKey, ast::Query)>,
}

impl Canonical {
    /// Canonicalises `query` by planning it as `searcher` would (within
    /// its query limits).
    pub fn new(searcher: &Searcher, query: &ast::Query) -> Result<Canonical> {
        Self::new_until(searcher, query, None)
    }

    /// [`Canonical::new`], stopping with
    /// [`Error::TimedOut`](crate::error::Error::TimedOut) once `deadline`
    /// has passed (checked before each term lookup).
    pub fn new_until(searcher: &Searcher, query: &ast::Query, deadline: Option<Instant>) -> Result<Canonical> {
        Self::from_planner(searcher.planner(Cutoff::new(deadline, Instant::now())), query)
    }

    /// Canonicalises `query` by planning it on `index`, unqualified clauses
    /// searching `default_fields` (with the default query limits).
    pub fn with_planner(
        index: &Index,
        default_fields: &[crate::schema::Field],
        query: &ast::Query,
    ) -> Result<Canonical> {
        Self::from_planner(Planner::with_default_fields(index, default_fields), query)
    }

    fn from_planner(mut planner: Planner<'_>, query: &ast::Query) -> Result<Canonical> {
        let plan = planner.plan(query)?;
        let key = plan.key().clone();
        let mut words = Vec::new();
        if let QueryKey::Bool { must, should, must_not } = &key {
            if must.0.is_empty() && must_not.0.is_empty() && should.0.len() >= 2 {
                collect_words(&mut planner, query, &mut words)?;
                words.sort_by(|a, b| a.0.cmp(&b.0));
                words.dedup_by(|a, b| a.0 == b.0);
            }
        }
        let is_word = key != QueryKey::Nothing && is_word(&mut planner, query)?;
        Ok(Canonical {
            key: (key != QueryKey::Nothing).then_some(key),
            is_word,
            words,
        })
    }
}

/// Whether `q` is one word once the clauses that analyse to nothing are
/// dropped (a group of one clause standing for that clause).
fn is_word(planner: &mut Planner<'_>, q: &ast::Query) -> Result<bool> {
    match q {
        ast::Query::Term { .. } => Ok(planner.plan_clause(q)?.is_some()),
        ast::Query::Boolean(clauses) => {
            let mut kept = Vec::new();
            for c in clauses {
                if planner.plan_clause(&c.query)?.is_some() {
                    kept.push(c);
                }
            }
            match kept[..] {
                [c] if c.occur != Occur::MustNot => is_word(planner, &c.query),
                _ => Ok(false),
            }
        }
        // Phrases and any other leaf: not a word.
        _ => Ok(false),
    }
}

/// The word clauses the top-level disjunction's plan was flattened from
/// (descending into the optional groups that are disjunctions themselves).
fn collect_words(planner: &mut Planner<'_>, q: &ast::Query, out: &mut Vec<(QueryKey, ast::Query)>) -> Result<()> {
    let ast::Query::Boolean(clauses) = q else {
        return Ok(());
    };
    for c in clauses {
        if c.occur != Occur::Should {
            continue;
        }
        let Some(plan) = planner.plan_clause(&c.query)? else {
            continue;
        };
        if is_word(planner, &c.query)? {
            if *plan.key() != QueryKey::Nothing {
                out.push((plan.key().clone(), c.query.clone()));
            }
        } else if let QueryKey::Bool { must, must_not, .. } = plan.key() {
            if must.0.is_empty() && must_not.0.is_empty() {
                collect_words(planner, &c.query, out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::AnalyzerConfig;
    use crate::indexing::{build_index, IndexOptions};
    use crate::query::parse;
    use crate::schema::Document;

    /// An index of the words the tests query, with stemming and stop words.
    fn index() -> (tempfile::TempDir, Searcher) {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            "apple banana cherry",
            "big apple pie",
            "banana pie apples",
            "cherry the pie",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| Ok(Document::title_body(format!("d{i}"), "apple title", *t)));
        let opts = IndexOptions {
            analyzer: AnalyzerConfig::english(),
            ..Default::default()
        };
        build_index(docs, dir.path(), &opts).unwrap();
        let s = Searcher::open(dir.path()).unwrap();
        (dir, s)
    }

    fn key(s: &Searcher, q: &str) -> Option<QueryKey> {
        Canonical::new(s, &parse(q).unwrap()).unwrap().key
    }

    #[test]
    fn reordered_and_respelled_queries_share_a_key() {
        let (_d, s) = index();
        let key = |q| key(&s, q);
        assert_eq!(key("apple banana"), key("banana apple"));
        assert_eq!(key("+apple +banana -cherry"), key("-cherry +banana +apple"));
        assert_eq!(key("(apple banana) cherry"), key("cherry banana apple"));
        assert_eq!(key("APPLE"), key("apple"));
        assert_eq!(key("apple the"), key("apple"));
        assert_eq!(key("\"big apple\" pie"), key("pie \"Big Apple\""));
        // A group of optional words inside a query with a MUST is scored as its words.
        assert_eq!(key("(apple banana) +cherry"), key("apple banana +cherry"));
        assert!(key("apple banana").is_some());
    }

    #[test]
    fn different_meanings_get_different_keys() {
        let (_d, s) = index();
        let key = |q| key(&s, q);
        assert_ne!(key("apple banana"), key("+apple +banana"));
        assert_ne!(key("apple apple"), key("apple"));
        assert_ne!(key("\"big apple\""), key("\"apple big\""));
        assert_ne!(key("title:apple"), key("apple"));
        assert_ne!(key("apple -banana"), key("apple banana"));
        assert_ne!(key("+(apple banana) +cherry"), key("+apple +banana +cherry"));
        assert_eq!(key("the"), None);
        // Terms the index lacks match nothing: nothing to cache.
        assert_eq!(key("zzz"), None);
    }

    #[test]
    fn disjunctions_expose_their_words() {
        let (_d, s) = index();
        let canon = |q: &str| Canonical::new(&s, &parse(q).unwrap()).unwrap();
        let key = |q| key(&s, q).unwrap();
        let c = canon("pie (Apple banana) \"big apple\"");
        let words: Vec<_> = c.words.iter().map(|(k, _)| k.clone()).collect();
        let mut expected = vec![key("apple"), key("banana"), key("pie")];
        expected.sort();
        assert_eq!(words, expected);
        assert!(canon("+pie +apple").words.is_empty());
        // Words of a group that is not itself a disjunction are not the query's words.
        let c = canon("pie (+apple banana)");
        let words: Vec<_> = c.words.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(words, vec![key("pie")]);
        assert!(canon("pie").words.is_empty());
        assert!(canon("pie").is_word && canon("(+Pie) the").is_word);
        assert!(!canon("pie apple").is_word && !canon("\"big apple\"").is_word);
        assert!(!canon("-pie").is_word);
    }
}
