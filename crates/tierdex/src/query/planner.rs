//! From a parsed query to a plan with global statistics, and from a plan to
//! a scorer tree over one segment.
//!
//! Planning analyses query text, expands unqualified clauses over both
//! fields, looks up global document frequencies (so every segment scores
//! with the same IDF), and simplifies: clauses that analyse to nothing are
//! dropped, terms absent from the index match nothing, single-clause
//! booleans collapse, nested pure disjunctions/conjunctions flatten.

use crate::analysis::Analyzer;
use crate::error::Result;
use crate::index::{Index, SegmentReader};
use crate::query::ast::{self, Occur};
use crate::query::bm25::{self, Bm25, NormCache};
use crate::query::boolean::{Conjunction, Disjunction, ReqExcl, ReqOpt};
use crate::query::phrase::PhraseScorer;
use crate::query::scorer::{Scorer, TermScorer};
use crate::schema::Field;
use crate::termdict::term_key;

/// A term in one field, with its global IDF.
#[derive(Debug, Clone, PartialEq)]
pub struct TermPlan {
    /// The field.
    pub field: Field,
    /// The analysed term.
    pub term: String,
    /// Its dictionary key.
    pub key: Vec<u8>,
    /// Global IDF.
    pub idf: f32,
    /// Global document frequency.
    pub doc_freq: u64,
}

/// A phrase in one field.
#[derive(Debug, Clone, PartialEq)]
pub struct PhrasePlan {
    /// The field.
    pub field: Field,
    /// Terms in phrase order (repeats allowed).
    pub terms: Vec<TermPlan>,
    /// Position of each term relative to the first.
    pub rel: Vec<u32>,
    /// Sum of the terms' IDFs.
    pub idf: f32,
}

/// A boolean combination.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BoolPlan {
    /// All required.
    pub must: Vec<Plan>,
    /// Optional (at least one when `must` is empty).
    pub should: Vec<Plan>,
    /// Excluded.
    pub must_not: Vec<Plan>,
}

/// An executable query plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// One term.
    Term(TermPlan),
    /// An exact phrase.
    Phrase(PhrasePlan),
    /// A boolean query.
    Bool(BoolPlan),
    /// Matches no document.
    Nothing,
}

impl Plan {
    /// Term plans of every positive (non-excluded) clause, for highlighting.
    pub fn positive_terms<'p>(&'p self, out: &mut Vec<&'p TermPlan>) {
        match self {
            Plan::Term(t) => out.push(t),
            Plan::Phrase(p) => out.extend(p.terms.iter()),
            Plan::Bool(b) => {
                for c in b.must.iter().chain(&b.should) {
                    c.positive_terms(out);
                }
            }
            Plan::Nothing => {}
        }
    }
}

/// Builds plans against an open index.
pub struct Planner<'i> {
    index: &'i Index,
    analyzer: &'i Analyzer,
    key: Vec<u8>,
}

impl<'i> Planner<'i> {
    /// A planner for `index`.
    pub fn new(index: &'i Index) -> Self {
        Planner {
            index,
            analyzer: index.analyzer(),
            key: Vec::new(),
        }
    }

    /// Plans `query`.
    pub fn plan(&mut self, query: &ast::Query) -> Result<Plan> {
        Ok(self.node(query)?.unwrap_or(Plan::Nothing))
    }

    /// `None`: the clause analysed to nothing and is dropped.
    fn node(&mut self, q: &ast::Query) -> Result<Option<Plan>> {
        match q {
            ast::Query::Term { field, text } => {
                let tokens = self.tokens(text);
                if tokens.is_empty() {
                    return Ok(None);
                }
                let mut should = Vec::new();
                for (term, _) in &tokens {
                    for f in fields(*field) {
                        should.push(self.term(f, term)?);
                    }
                }
                Ok(Some(simplify(BoolPlan {
                    should,
                    ..Default::default()
                })))
            }
            ast::Query::Phrase { field, text } => {
                let tokens = self.tokens(text);
                match tokens.len() {
                    0 => Ok(None),
                    1 => self.node(&ast::Query::Term {
                        field: *field,
                        text: tokens[0].0.clone(),
                    }),
                    _ => {
                        let first = tokens[0].1;
                        let mut should = Vec::new();
                        for f in fields(*field) {
                            let mut terms = Vec::with_capacity(tokens.len());
                            let mut absent = false;
                            for (t, _) in &tokens {
                                match self.term(f, t)? {
                                    Plan::Term(tp) => terms.push(tp),
                                    _ => absent = true,
                                }
                            }
                            if absent {
                                should.push(Plan::Nothing);
                                continue;
                            }
                            let idf = terms.iter().map(|t| t.idf).sum();
                            let rel = tokens.iter().map(|(_, p)| p - first).collect();
                            should.push(Plan::Phrase(PhrasePlan {
                                field: f,
                                terms,
                                rel,
                                idf,
                            }));
                        }
                        Ok(Some(simplify(BoolPlan {
                            should,
                            ..Default::default()
                        })))
                    }
                }
            }
            ast::Query::Boolean(clauses) => {
                let mut b = BoolPlan::default();
                let mut any = false;
                for c in clauses {
                    let Some(p) = self.node(&c.query)? else {
                        continue;
                    };
                    any = true;
                    match c.occur {
                        Occur::Must => b.must.push(p),
                        Occur::Should => b.should.push(p),
                        Occur::MustNot => b.must_not.push(p),
                    }
                }
                Ok(any.then(|| simplify(b)))
            }
        }
    }

    fn tokens(&self, text: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        self.analyzer
            .analyze(text, |t| out.push((t.term.to_string(), t.position)));
        out
    }

    fn term(&mut self, field: Field, term: &str) -> Result<Plan> {
        term_key(field, term, &mut self.key);
        let (df, _) = self.index.term_stats(&self.key)?;
        if df == 0 {
            return Ok(Plan::Nothing);
        }
        let n = self.index.field_stats(field).doc_count;
        Ok(Plan::Term(TermPlan {
            field,
            term: term.to_string(),
            key: self.key.clone(),
            idf: bm25::idf(df, n),
            doc_freq: df,
        }))
    }
}

fn fields(field: Option<Field>) -> Vec<Field> {
    match field {
        Some(f) => vec![f],
        None => Field::ALL.to_vec(),
    }
}

/// Normalises a boolean plan (see the module doc).
fn simplify(b: BoolPlan) -> Plan {
    if b.must.contains(&Plan::Nothing) {
        return Plan::Nothing;
    }
    let mut out = BoolPlan::default();
    for p in b.must {
        match p {
            Plan::Bool(inner) if inner.should.is_empty() && inner.must_not.is_empty() => out.must.extend(inner.must),
            p => out.must.push(p),
        }
    }
    for p in b.should {
        match p {
            Plan::Nothing => {}
            Plan::Bool(inner) if inner.must.is_empty() && inner.must_not.is_empty() => out.should.extend(inner.should),
            p => out.should.push(p),
        }
    }
    out.must_not = b.must_not.into_iter().filter(|p| *p != Plan::Nothing).collect();
    if out.must.is_empty() && out.should.is_empty() {
        return Plan::Nothing;
    }
    if out.must_not.is_empty() {
        if out.must.len() == 1 && out.should.is_empty() {
            return out.must.pop().unwrap();
        }
        if out.must.is_empty() && out.should.len() == 1 {
            return out.should.pop().unwrap();
        }
    }
    Plan::Bool(out)
}

/// Per-index scoring context: one norm cache per field.
pub struct ScoringContext {
    caches: Vec<NormCache>,
}

impl ScoringContext {
    /// The context of `index` (global field statistics).
    pub fn new(index: &Index) -> Self {
        ScoringContext {
            caches: Field::ALL
                .iter()
                .map(|&f| NormCache::new(&index.field_stats(f)))
                .collect(),
        }
    }

    fn bm25(&self, field: Field, weight: f32) -> Bm25<'_> {
        Bm25::new(weight, &self.caches[field.id() as usize])
    }
}

/// A scorer tree whose node types are erased.
pub type BoxedScorer<'a> = Box<dyn Scorer + 'a>;

/// Builds the scorer of `plan` over `seg`; `None` when nothing can match.
pub fn build_scorer<'a>(
    plan: &Plan,
    seg: &'a SegmentReader,
    ctx: &'a ScoringContext,
) -> Result<Option<BoxedScorer<'a>>> {
    Ok(match plan {
        Plan::Nothing => None,
        Plan::Term(t) => term_scorer(t, seg, ctx)?.map(|s| Box::new(s) as BoxedScorer<'a>),
        Plan::Phrase(p) => phrase_scorer(p, seg, ctx)?.map(|s| Box::new(s) as BoxedScorer<'a>),
        Plan::Bool(b) => bool_scorer(b, seg, ctx)?,
    })
}

fn term_scorer<'a>(t: &TermPlan, seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Result<Option<TermScorer<'a>>> {
    let Some(info) = seg.term_info(&t.key)? else {
        return Ok(None);
    };
    let cursor = seg.cursor(&info)?;
    Ok(Some(TermScorer::new(
        cursor,
        ctx.bm25(t.field, t.idf),
        seg.norms(t.field),
    )))
}

fn phrase_scorer<'a>(
    p: &PhrasePlan,
    seg: &'a SegmentReader,
    ctx: &'a ScoringContext,
) -> Result<Option<PhraseScorer<'a>>> {
    let mut cursors = Vec::with_capacity(p.terms.len());
    for t in &p.terms {
        let Some(info) = seg.term_info(&t.key)? else {
            return Ok(None);
        };
        cursors.push(seg.cursor(&info)?);
    }
    Ok(Some(PhraseScorer::new(
        cursors,
        p.rel.clone(),
        ctx.bm25(p.field, p.idf),
        seg.norms(p.field),
    )))
}

fn all_terms(plans: &[Plan]) -> Option<Vec<&TermPlan>> {
    plans
        .iter()
        .map(|p| match p {
            Plan::Term(t) => Some(t),
            _ => None,
        })
        .collect()
}

/// The disjunction of `plans` (matching children only); `None` if none match.
fn disjunction<'a>(plans: &[Plan], seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Result<Option<BoxedScorer<'a>>> {
    if let Some(terms) = all_terms(plans) {
        let mut subs = Vec::with_capacity(terms.len());
        for t in terms {
            subs.extend(term_scorer(t, seg, ctx)?);
        }
        return Ok(match subs.len() {
            0 => None,
            1 => Some(Box::new(subs.pop().unwrap())),
            _ => Some(Box::new(Disjunction::new(subs))),
        });
    }
    let mut subs = Vec::with_capacity(plans.len());
    for p in plans {
        subs.extend(build_scorer(p, seg, ctx)?);
    }
    Ok(match subs.len() {
        0 => None,
        1 => subs.pop(),
        _ => Some(Box::new(Disjunction::new(subs))),
    })
}

/// The conjunction of `plans`; `None` if any cannot match.
fn conjunction<'a>(plans: &[Plan], seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Result<Option<BoxedScorer<'a>>> {
    if let Some(terms) = all_terms(plans) {
        let mut subs = Vec::with_capacity(terms.len());
        for t in terms {
            match term_scorer(t, seg, ctx)? {
                Some(s) => subs.push(s),
                None => return Ok(None),
            }
        }
        return Ok(Some(if subs.len() == 1 {
            Box::new(subs.pop().unwrap())
        } else {
            Box::new(Conjunction::new(subs))
        }));
    }
    let mut subs = Vec::with_capacity(plans.len());
    for p in plans {
        match build_scorer(p, seg, ctx)? {
            Some(s) => subs.push(s),
            None => return Ok(None),
        }
    }
    Ok(Some(if subs.len() == 1 {
        subs.pop().unwrap()
    } else {
        Box::new(Conjunction::new(subs))
    }))
}

fn bool_scorer<'a>(b: &BoolPlan, seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Result<Option<BoxedScorer<'a>>> {
    let req: BoxedScorer<'a> = if b.must.is_empty() {
        match disjunction(&b.should, seg, ctx)? {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        let Some(req) = conjunction(&b.must, seg, ctx)? else {
            return Ok(None);
        };
        match disjunction(&b.should, seg, ctx)? {
            Some(opt) if !b.should.is_empty() => Box::new(ReqOpt::new(req, opt)),
            _ => req,
        }
    };
    Ok(Some(match disjunction(&b.must_not, seg, ctx)? {
        Some(excl) => Box::new(ReqExcl::new(req, excl)),
        None => req,
    }))
}
