//! BM25 statistics over several indices: what one query searching many
//! indices scores with (Elasticsearch's DFS query-then-fetch), so that its
//! hits compare across them and equal those of one index holding every
//! document.
//!
//! Each index contributes its part (`Searcher::global_stats`: the document
//! frequency of every term the query plans, and each field's document and
//! token counts), the parts are summed ([`GlobalStats::merge`], or
//! `search::global_stats` over several searchers), and each index is
//! searched through `Searcher::with_global_stats`. Fields and terms are
//! keyed by name, as indices number their fields differently.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::index::FieldStats;

/// Field and term statistics summed over several indices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GlobalStats {
    /// Documents and tokens of each field, by name.
    fields: HashMap<String, (u64, u64)>,
    /// Document frequency of each term, by field name then term.
    terms: HashMap<String, HashMap<String, u64>>,
}

impl GlobalStats {
    /// Records a field's document and token counts in one index.
    pub(crate) fn add_field(&mut self, name: &str, stats: FieldStats) {
        let e = self.fields.entry(name.to_string()).or_default();
        e.0 += stats.doc_count;
        e.1 += stats.sum_total_term_freq;
    }

    /// Records a term's document frequency in one index (once per index).
    pub(crate) fn set_term(&mut self, field: &str, term: String, doc_freq: u64) {
        self.terms.entry(field.to_string()).or_default().insert(term, doc_freq);
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
