//! BM25 statistics over several indices: what one query searching many
//! indices scores with (Elasticsearch's DFS query-then-fetch), so that its
//! hits compare across them and equal those of one index holding every
//! document.
//!
//! Each index contributes its part ([`GlobalStats::of`]: the document
//! frequency of every term the query plans, and each field's document and
//! token counts), the parts are summed ([`GlobalStats::merge`]), and each
//! index is searched through [`Searcher::with_global_stats`]. Fields and
//! terms are keyed by name, as indices number their fields differently.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::index::FieldStats;
use crate::query::ast;
use crate::search::Searcher;

/// Field and term statistics summed over several indices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GlobalStats {
    /// Documents and tokens of each field, by name.
    fields: HashMap<String, (u64, u64)>,
    /// Document frequency of each term, by field name then term.
    terms: HashMap<String, HashMap<String, u64>>,
}

impl GlobalStats {
    /// The part of `searcher`'s index for `query`.
    pub fn of(searcher: &Searcher, query: &ast::Query) -> Result<GlobalStats> {
        let index = searcher.index();
        let schema = index.schema();
        let mut g = GlobalStats::default();
        for f in schema.fields() {
            let s = index.field_stats(f);
            g.fields
                .insert(schema.name(f).to_string(), (s.doc_count, s.sum_total_term_freq));
        }
        // Every term the query looks up, also in clauses that match
        // nothing here (a required term this index lacks makes its plan
        // empty, but the other indices still score the other terms).
        let seen = std::cell::RefCell::new(Vec::new());
        searcher.planner(None).recording(&seen).plan(query)?;
        for (field, term, df) in seen.into_inner() {
            g.terms
                .entry(schema.name(field).to_string())
                .or_default()
                .insert(term, df);
        }
        Ok(g)
    }

    /// The statistics of `query` over every index of `searchers`.
    pub fn gather(searchers: &[&Searcher], query: &ast::Query) -> Result<GlobalStats> {
        let mut g = GlobalStats::default();
        for s in searchers {
            g.merge(&GlobalStats::of(s, query)?);
        }
        Ok(g)
    }

    /// Adds another index's part.
    pub fn merge(&mut self, other: &GlobalStats) {
        for (name, (docs, tokens)) in &other.fields {
            let e = self.fields.entry(name.clone()).or_default();
            e.0 += docs;
            e.1 += tokens;
        }
        for (field, terms) in &other.terms {
            let mine = self.terms.entry(field.clone()).or_default();
            for (term, df) in terms {
                *mine.entry(term.clone()).or_default() += df;
            }
        }
    }

    /// The summed statistics of a field.
    pub fn field(&self, name: &str) -> Option<FieldStats> {
        self.fields
            .get(name)
            .map(|&(doc_count, sum_total_term_freq)| FieldStats {
                doc_count,
                sum_total_term_freq,
            })
    }

    /// The summed document frequency of a term.
    pub fn doc_freq(&self, field: &str, term: &str) -> Option<u64> {
        self.terms.get(field)?.get(term).copied()
    }
}
