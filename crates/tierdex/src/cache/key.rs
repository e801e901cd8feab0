//! Canonical cache keys: what a query means, not how it was typed.
//!
//! A key holds the analysed tokens of every leaf and the clauses of every
//! boolean in sorted order, with the simplifications the planner makes
//! anyway (clauses that analyse to nothing dropped, one-clause booleans
//! collapsed, nested pure disjunctions and conjunctions flattened). Two
//! queries with equal keys plan to the same [`Plan`](crate::query::planner::Plan)
//! (the planner sorts operands canonically), so they return identical
//! results: `b a`, `a b`, `(a) b` and `A  b` share one entry.

use std::hash::{Hash, Hasher};

use crate::analysis::Analyzer;
use crate::query::ast::{self, Occur};
use crate::schema::{Analysis, Field};
use crate::search::Mode;

/// How a key analyses query text: the index's analysis and the fields an
/// unqualified clause searches.
#[derive(Clone, Copy)]
pub struct KeyContext<'a> {
    /// Each field's analyzer.
    pub analysis: &'a Analysis,
    /// The fields of unqualified clauses.
    pub default_fields: &'a [Field],
}

impl<'a> KeyContext<'a> {
    /// The context of `searcher`'s queries.
    pub fn of(searcher: &'a crate::search::Searcher) -> KeyContext<'a> {
        KeyContext {
            analysis: searcher.index().analysis(),
            default_fields: searcher.default_fields(),
        }
    }

    /// The analyzers a clause's text goes through: its field's, or each
    /// distinct one of the default fields (in field order).
    fn analyzers(&self, field: Option<Field>) -> Vec<&'a Analyzer> {
        match field {
            Some(f) => vec![self.analysis.analyzer(f)],
            None => {
                let mut out: Vec<&Analyzer> = Vec::new();
                for &f in self.default_fields {
                    let a = self.analysis.analyzer(f);
                    if !out.iter().any(|b| b.config() == a.config()) {
                        out.push(a);
                    }
                }
                out
            }
        }
    }
}

/// Separates the tokens of default fields analysed differently in a key.
const GROUP_SEPARATOR: &str = "\u{0}";

/// The meaning of a parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueryKey {
    /// A word: its tokens, over one field (`Some(field id)`) or both.
    Term {
        /// Field id, `None` for both fields.
        field: Option<u8>,
        /// Analysed tokens, in text order.
        tokens: Vec<String>,
    },
    /// A phrase of two or more tokens with their positions relative to the first.
    Phrase {
        /// Field id, `None` for both fields.
        field: Option<u8>,
        /// Analysed tokens and relative positions.
        tokens: Vec<(String, u32)>,
    },
    /// Clauses sorted by occurrence (MUST, SHOULD, MUST_NOT) and key.
    Bool(Vec<(u8, QueryKey)>),
}

impl QueryKey {
    /// Approximate heap bytes of the key, charged to the cache entry holding it.
    pub fn heap_bytes(&self) -> u64 {
        const STRING: u64 = std::mem::size_of::<String>() as u64;
        match self {
            QueryKey::Term { tokens, .. } => tokens.iter().map(|t| STRING + t.len() as u64).sum(),
            QueryKey::Phrase { tokens, .. } => tokens.iter().map(|(t, _)| STRING + 8 + t.len() as u64).sum(),
            QueryKey::Bool(clauses) => clauses
                .iter()
                .map(|(_, k)| std::mem::size_of::<(u8, QueryKey)>() as u64 + k.heap_bytes())
                .sum(),
        }
    }

    /// Whether this is a word query, which partial matching can answer from
    /// a cached disjunction that contains it.
    pub fn is_term(&self) -> bool {
        matches!(self, QueryKey::Term { .. })
    }
}

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

/// A query's key together with the word clauses of a top-level disjunction,
/// whose own results a cache entry may keep for partial matching.
#[derive(Debug, Clone)]
pub struct Canonical {
    /// `None` when the whole query analyses to nothing.
    pub key: Option<QueryKey>,
    /// For a disjunction of two or more clauses: each word clause's key and
    /// its parsed form (to evaluate it on its own).
    pub words: Vec<(QueryKey, ast::Query)>,
}

impl Canonical {
    /// Canonicalises `query` with the index's analysis.
    pub fn new(ctx: KeyContext<'_>, query: &ast::Query) -> Canonical {
        let key = node(ctx, query);
        let mut words = Vec::new();
        if let Some(QueryKey::Bool(clauses)) = &key {
            if clauses.len() >= 2 && clauses.iter().all(|(o, _)| *o == occur_rank(Occur::Should)) {
                collect_words(ctx, query, &mut words);
                words.sort_by(|a, b| a.0.cmp(&b.0));
                words.dedup_by(|a, b| a.0 == b.0);
            }
        }
        Canonical { key, words }
    }
}

/// The word clauses that the top-level disjunction's key was built from
/// (descending into the groups the key flattened).
fn collect_words(ctx: KeyContext<'_>, q: &ast::Query, out: &mut Vec<(QueryKey, ast::Query)>) {
    let ast::Query::Boolean(clauses) = q else {
        return;
    };
    for c in clauses {
        if c.occur != Occur::Should {
            continue;
        }
        match node(ctx, &c.query) {
            Some(k @ QueryKey::Term { .. }) => out.push((k, c.query.clone())),
            // Only a group the key flattened into the disjunction.
            Some(QueryKey::Bool(inner)) if inner.iter().all(|(o, _)| *o == occur_rank(Occur::Should)) => {
                collect_words(ctx, &c.query, out)
            }
            _ => {}
        }
    }
}

fn occur_rank(o: Occur) -> u8 {
    match o {
        Occur::Must => 0,
        Occur::Should => 1,
        Occur::MustNot => 2,
    }
}

/// `None`: the clause analyses to nothing and is dropped (as by the planner).
fn node(ctx: KeyContext<'_>, q: &ast::Query) -> Option<QueryKey> {
    match q {
        ast::Query::Term { field, text } => {
            let mut tokens = Vec::new();
            for (i, analyzer) in ctx.analyzers(*field).into_iter().enumerate() {
                if i > 0 {
                    tokens.push(GROUP_SEPARATOR.to_string());
                }
                analyzer.analyze(text, |t| tokens.push(t.term.to_string()));
            }
            (tokens.iter().any(|t| t != GROUP_SEPARATOR)).then(|| QueryKey::Term {
                field: field.map(|f| f.id()),
                tokens,
            })
        }
        ast::Query::Phrase { field, text } => {
            let mut tokens: Vec<(String, u32)> = Vec::new();
            for (i, analyzer) in ctx.analyzers(*field).into_iter().enumerate() {
                if i > 0 {
                    tokens.push((GROUP_SEPARATOR.to_string(), 0));
                }
                let at = tokens.len();
                analyzer.analyze(text, |t| tokens.push((t.term.to_string(), t.position)));
                if let Some(first) = tokens.get(at).map(|t| t.1) {
                    for t in &mut tokens[at..] {
                        t.1 -= first;
                    }
                }
            }
            if tokens.iter().all(|t| t.0 == GROUP_SEPARATOR) {
                return None;
            }
            Some(QueryKey::Phrase {
                field: field.map(|f| f.id()),
                tokens,
            })
        }
        ast::Query::Boolean(clauses) => {
            let mut out: Vec<(u8, QueryKey)> = Vec::with_capacity(clauses.len());
            for c in clauses {
                let Some(k) = node(ctx, &c.query) else {
                    continue;
                };
                let occur = occur_rank(c.occur);
                match k {
                    // A pure disjunction inside SHOULD, or a pure conjunction
                    // inside MUST, is flattened by the planner too.
                    QueryKey::Bool(inner) if occur != 2 && inner.iter().all(|(o, _)| *o == occur) => {
                        out.extend(inner);
                    }
                    k => out.push((occur, k)),
                }
            }
            if out.is_empty() {
                return None;
            }
            if out.len() == 1 && out[0].0 != occur_rank(Occur::MustNot) {
                return out.pop().map(|(_, k)| k);
            }
            out.sort();
            Some(QueryKey::Bool(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::AnalyzerConfig;
    use crate::query::parse;

    fn analysis() -> Analysis {
        Analysis::new(
            crate::schema::Schema::default(),
            AnalyzerConfig {
                stemming: true,
                stop_words: true,
            },
        )
    }

    fn ctx(a: &Analysis) -> KeyContext<'_> {
        KeyContext {
            analysis: a,
            default_fields: a.schema().default_fields(),
        }
    }

    fn key(q: &str) -> Option<QueryKey> {
        Canonical::new(ctx(&analysis()), &parse(q).unwrap()).key
    }

    #[test]
    fn reordered_and_respelled_queries_share_a_key() {
        assert_eq!(key("apple banana"), key("banana apple"));
        assert_eq!(key("+apple +banana -cherry"), key("-cherry +banana +apple"));
        assert_eq!(key("(apple banana) cherry"), key("cherry banana apple"));
        assert_eq!(key("APPLE"), key("apple"));
        assert_eq!(key("apple the"), key("apple"));
        assert_eq!(key("\"big apple\" pie"), key("pie \"Big Apple\""));
        // A group of optional words inside a query with a MUST is scored as its words.
        assert_eq!(key("(apple banana) +cherry"), key("apple banana +cherry"));
    }

    #[test]
    fn different_meanings_get_different_keys() {
        assert_ne!(key("apple banana"), key("+apple +banana"));
        assert_ne!(key("apple apple"), key("apple"));
        assert_ne!(key("\"big apple\""), key("\"apple big\""));
        assert_ne!(key("title:apple"), key("apple"));
        assert_ne!(key("apple -banana"), key("apple banana"));
        assert_ne!(key("+(apple banana) +cherry"), key("+apple +banana +cherry"));
        assert_eq!(key("the"), None);
    }

    #[test]
    fn disjunctions_expose_their_words() {
        let a = analysis();
        let a = ctx(&a);
        let c = Canonical::new(a, &parse("pie (Apple banana) \"big apple\"").unwrap());
        let words: Vec<_> = c.words.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            words,
            vec![key("apple").unwrap(), key("banana").unwrap(), key("pie").unwrap()]
        );
        assert!(Canonical::new(a, &parse("+pie +apple").unwrap()).words.is_empty());
        // Words of a group that is not itself a disjunction are not the query's words.
        let c = Canonical::new(a, &parse("pie (+apple banana)").unwrap());
        let words: Vec<_> = c.words.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(words, vec![key("pie").unwrap()]);
        assert!(Canonical::new(a, &parse("pie").unwrap()).words.is_empty());
    }
}
