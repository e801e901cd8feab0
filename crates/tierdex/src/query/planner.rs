//! From a parsed query to a plan: a tree of [`Weight`]s with global
//! statistics.
//!
//! Planning analyses query text with each field's analyzer, expands
//! unqualified clauses over the default fields, looks up global document
//! frequencies (so every segment scores with the same IDF), and simplifies:
//! clauses that analyse to nothing are dropped, terms absent from the index
//! match nothing, single-clause booleans collapse, nested pure
//! disjunctions/conjunctions flatten ([`BooleanWeight::build`]).
//!
//! Every query planned is first checked against the [`QueryLimits`]
//! (clauses, nesting, text bytes) before any text is analysed; analysis
//! then counts tokens and term lookups against them, and the deadline, when
//! there is one, is read before each term lookup.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::analysis::Analyzer;
use crate::error::Result;
use crate::index::{Index, SegmentReader};
use crate::query::ast::{self, Occur};
use crate::query::bm25;
use crate::query::boolean::BooleanWeight;
use crate::query::collector::{self, Cutoff};
use crate::query::limits::QueryLimits;
use crate::query::phrase::PhraseWeight;
use crate::query::term::TermWeight;
use crate::query::weight::{NothingWeight, Plan, Weight};
use crate::schema::Field;
use crate::termdict::term_key;

pub use crate::query::weight::{Build, ScoringContext};

/// Builds plans against an open index.
pub struct Planner<'i> {
    index: &'i Index,
    /// The fields an unqualified clause searches, grouped by analyzer.
    default_groups: Vec<(&'i Analyzer, Vec<Field>)>,
    /// A buffer for term keys.
    key: RefCell<Vec<u8>>,
    limits: QueryLimits,
    cutoff: Option<Cutoff>,
    /// Term lookups of the query being planned (against `max_terms`).
    lookups: Cell<usize>,
}

impl<'i> Planner<'i> {
    /// A planner for `index`, unqualified clauses searching the schema's
    /// default fields.
    pub fn new(index: &'i Index) -> Self {
        Self::with_default_fields(index, index.schema().default_fields())
    }

    /// A planner for `index`, unqualified clauses searching `fields`.
    pub fn with_default_fields(index: &'i Index, fields: &'i [Field]) -> Self {
        Planner {
            index,
            default_groups: groups(index, fields),
            key: RefCell::new(Vec::new()),
            limits: QueryLimits::default(),
            cutoff: None,
            lookups: Cell::new(0),
        }
    }

    /// Refuses queries over `limits` (the defaults otherwise).
    pub fn with_limits(mut self, limits: QueryLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Stops planning with [`Error::TimedOut`](crate::error::Error::TimedOut)
    /// once `cutoff` has passed.
    pub fn with_cutoff(mut self, cutoff: Option<Cutoff>) -> Self {
        self.cutoff = cutoff;
        self
    }

    /// Plans `query`.
    pub fn plan(&mut self, query: &ast::Query) -> Result<Plan> {
        self.start(query)?;
        Ok(self.node(query)?.unwrap_or_else(|| Box::new(NothingWeight)))
    }

    /// Checks `query` against the limits and the deadline before planning it.
    fn start(&self, query: &ast::Query) -> Result<()> {
        self.limits.check(query)?;
        self.lookups.set(0);
        collector::check(self.cutoff.as_ref())
    }

    /// Calls `f` with each group of the fields a clause searches (its own,
    /// or the default ones) and the analyzer of the group.
    fn each_group(&self, field: Option<Field>, mut f: impl FnMut(&'i Analyzer, &[Field]) -> Result<()>) -> Result<()> {
        match field {
            Some(field) => f(self.index.analyzer(field), std::slice::from_ref(&field)),
            None => {
                for (analyzer, fields) in &self.default_groups {
                    f(analyzer, fields)?;
                }
                Ok(())
            }
        }
    }

    /// Plans one clause: `None` when it analyses to nothing and is dropped.
    pub fn plan_clause(&mut self, query: &ast::Query) -> Result<Option<Plan>> {
        self.start(query)?;
        self.node(query)
    }

    /// `None`: the clause analysed to nothing and is dropped.
    fn node(&mut self, q: &ast::Query) -> Result<Option<Plan>> {
        match q {
            ast::Query::Term { field, text } => {
                let mut should = Vec::new();
                let mut any = false;
                self.each_group(*field, |analyzer, fields| {
                    any |= self.term_clauses(analyzer, fields, text, &mut should)?;
                    Ok(())
                })?;
                Ok(any.then(|| BooleanWeight::build(Vec::new(), should, Vec::new())))
            }
            ast::Query::Phrase { field, text } => {
                let mut should = Vec::new();
                let mut any = false;
                let limits = self.limits;
                self.each_group(*field, |analyzer, fields| {
                    let tokens = tokens(analyzer, text, limits.max_phrase_terms).ok_or_else(|| limits.phrase_too_long())?;
                    match tokens.len() {
                        0 => {}
                        // One token: the term query of that token.
                        1 => any |= self.term_clauses(analyzer, fields, &tokens[0].0, &mut should)?,
                        _ => {
                            any = true;
                            let first = tokens[0].1;
                            for &f in fields {
                                let mut terms = Vec::with_capacity(tokens.len());
                                for (t, _) in &tokens {
                                    terms.extend(self.term_weight(f, t)?);
                                }
                                if terms.len() < tokens.len() {
                                    should.push(Box::new(NothingWeight));
                                    continue;
                                }
                                let rel = tokens.iter().map(|(_, p)| p - first).collect();
                                should.push(Box::new(PhraseWeight::new(f, terms, rel)));
                            }
                        }
                    }
                    Ok(())
                })?;
                Ok(any.then(|| BooleanWeight::build(Vec::new(), should, Vec::new())))
            }
            ast::Query::Boolean(clauses) => {
                let (mut must, mut should, mut must_not) = (Vec::new(), Vec::new(), Vec::new());
                let mut any = false;
                for c in clauses {
                    let Some(p) = self.node(&c.query)? else {
                        continue;
                    };
                    any = true;
                    match c.occur {
                        Occur::Must => must.push(p),
                        Occur::Should => should.push(p),
                        Occur::MustNot => must_not.push(p),
                    }
                }
                Ok(any.then(|| BooleanWeight::build(must, should, must_not)))
            }
        }
    }

    /// Adds to `should` a term clause per token of `text` and field of
    /// `fields` (analysed alike by `analyzer`); false when `text` analyses
    /// to nothing.
    fn term_clauses(
        &self,
        analyzer: &Analyzer,
        fields: &[Field],
        text: &str,
        should: &mut Vec<Plan>,
    ) -> Result<bool> {
        let tokens = tokens(analyzer, text, self.limits.max_terms).ok_or_else(|| self.limits.too_many_terms())?;
        for (term, _) in &tokens {
            for &f in fields {
                should.push(self.term(f, term)?);
            }
        }
        Ok(!tokens.is_empty())
    }

    /// The plan of one term: matches nothing when the index lacks it.
    fn term(&self, field: Field, term: &str) -> Result<Plan> {
        Ok(match self.term_weight(field, term)? {
            Some(t) => Box::new(t),
            None => Box::new(NothingWeight),
        })
    }

    /// The weight of one term (global IDF), `None` when the index lacks it.
    fn term_weight(&self, field: Field, term: &str) -> Result<Option<TermWeight>> {
        let lookups = self.lookups.get() + 1;
        self.lookups.set(lookups);
        if lookups > self.limits.max_terms {
            return Err(self.limits.too_many_terms());
        }
        collector::check(self.cutoff.as_ref())?;
        let mut key = self.key.borrow_mut();
        term_key(field, term, &mut key);
        let df = self.index.doc_freq(&key)?;
        if df == 0 {
            return Ok(None);
        }
        let n = self.index.field_stats(field).doc_count;
        Ok(Some(TermWeight::new(
            field,
            term.to_string(),
            Arc::from(&key[..]),
            bm25::idf(df, n),
            df,
        )))
    }
}

/// `fields` grouped by analyzer (in field order): fields analysed alike see
/// the same tokens.
fn groups<'i>(index: &'i Index, fields: &[Field]) -> Vec<(&'i Analyzer, Vec<Field>)> {
    let mut groups: Vec<(&'i Analyzer, Vec<Field>)> = Vec::new();
    for &f in fields {
        let a = index.analyzer(f);
        match groups.iter_mut().find(|(g, _)| g.config() == a.config()) {
            Some((_, members)) => members.push(f),
            None => groups.push((a, vec![f])),
        }
    }
    groups
}

/// The terms of `text` and their positions; `None` when there are more
/// than `most` (only that many are kept meanwhile).
fn tokens(analyzer: &Analyzer, text: &str, most: usize) -> Option<Vec<(String, u32)>> {
    let mut out = Vec::new();
    let mut more = false;
    analyzer.analyze(text, |t| {
        if out.len() < most {
            out.push((t.term.to_string(), t.position));
        } else {
            more = true;
        }
    });
    (!more).then_some(out)
}

/// Segment size of adaptive prefetching.
pub const PREFETCH_SEGMENT: usize = 1 << 20;

/// Adaptive prefetch (DESIGN §0): when every term of `plan` has a prefetch
/// zone of at least `threshold` bytes in `seg`, prefetches the first
/// segment of every zone in one request and returns the segment size for the
/// cursors to continue with; otherwise does nothing.
pub fn prefetch_zones(plan: &dyn Weight, seg: &SegmentReader, threshold: usize) -> Result<Option<usize>> {
    let mut terms = Vec::new();
    plan.terms(false, &mut terms);
    let mut ranges = Vec::with_capacity(terms.len());
    for t in terms {
        let Some(info) = seg.term_info(&t.key)? else {
            continue;
        };
        let zone = info.region.zone_len as usize;
        if zone < threshold {
            return Ok(None);
        }
        let start = info.doc_offset as usize;
        ranges.push(start..start + zone.min(PREFETCH_SEGMENT));
    }
    if ranges.is_empty() {
        return Ok(None);
    }
    seg.prefetch(&ranges)?;
    Ok(Some(PREFETCH_SEGMENT))
}
