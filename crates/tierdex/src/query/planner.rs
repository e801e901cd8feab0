//! From a parsed query to a plan with global statistics, and from a plan to
//! a scorer tree over one segment.
//!
//! Planning analyses query text, expands unqualified clauses over both
//! fields, looks up global document frequencies (so every segment scores
//! with the same IDF), and simplifies: clauses that analyse to nothing are
//! dropped, terms absent from the index match nothing, single-clause
//! booleans collapse, nested pure disjunctions/conjunctions flatten.

use crate::analysis::Analyzer;
use crate::bloom::{self, FilterShape, FilterUse, Probe, TermCost};
use crate::common::FieldSet;
use crate::error::Result;
use crate::index::{Index, SegmentReader};
use crate::layout::TermCursor;
use crate::query::ast::{self, Occur};
use crate::query::bm25::{self, Bm25, NormCache};
use crate::query::boolean::{Conjunction, Disjunction, ReqExcl, ReqOpt};
use crate::query::phrase::{PhraseFilter, PhraseScorer};
use crate::query::scorer::{Scorer, TermScorer};
use crate::schema::Field;
use crate::termdict::{term_key, TermInfo};

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
    /// Term plans of every clause, excluded ones included.
    pub fn all_terms<'p>(&'p self, out: &mut Vec<&'p TermPlan>) {
        match self {
            Plan::Term(t) => out.push(t),
            Plan::Phrase(p) => out.extend(p.terms.iter()),
            Plan::Bool(b) => {
                for c in b.must.iter().chain(&b.should).chain(&b.must_not) {
                    c.all_terms(out);
                }
            }
            Plan::Nothing => {}
        }
    }

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
    /// The fields an unqualified clause searches.
    default_fields: &'i [Field],
    key: Vec<u8>,
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
            default_fields: fields,
            key: Vec::new(),
        }
    }

    /// Plans `query`.
    pub fn plan(&mut self, query: &ast::Query) -> Result<Plan> {
        Ok(self.node(query)?.unwrap_or(Plan::Nothing))
    }

    /// The fields a clause searches, grouped by analyzer (in field order):
    /// fields analysed alike see the same tokens.
    fn groups(&self, field: Option<Field>) -> Vec<(&'i Analyzer, Vec<Field>)> {
        let fields = match field {
            Some(f) => vec![f],
            None => self.default_fields.to_vec(),
        };
        let mut groups: Vec<(&'i Analyzer, Vec<Field>)> = Vec::new();
        for f in fields {
            let a = self.index.analyzer(f);
            match groups.iter_mut().find(|(g, _)| g.config() == a.config()) {
                Some((_, members)) => members.push(f),
                None => groups.push((a, vec![f])),
            }
        }
        groups
    }

    /// `None`: the clause analysed to nothing and is dropped.
    fn node(&mut self, q: &ast::Query) -> Result<Option<Plan>> {
        match q {
            ast::Query::Term { field, text } => {
                let mut should = Vec::new();
                let mut any = false;
                for (analyzer, fields) in self.groups(*field) {
                    any |= self.term_clauses(analyzer, &fields, text, &mut should)?;
                }
                Ok(any.then(|| {
                    simplify(BoolPlan {
                        should,
                        ..Default::default()
                    })
                }))
            }
            ast::Query::Phrase { field, text } => {
                let mut should = Vec::new();
                let mut any = false;
                for (analyzer, fields) in self.groups(*field) {
                    let tokens = tokens(analyzer, text);
                    match tokens.len() {
                        0 => {}
                        // One token: the term query of that token.
                        1 => any |= self.term_clauses(analyzer, &fields, &tokens[0].0, &mut should)?,
                        _ => {
                            any = true;
                            let first = tokens[0].1;
                            for &f in &fields {
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
                        }
                    }
                }
                Ok(any.then(|| {
                    simplify(BoolPlan {
                        should,
                        ..Default::default()
                    })
                }))
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

    /// Adds to `should` a term clause per token of `text` and field of
    /// `fields` (analysed alike by `analyzer`); false when `text` analyses
    /// to nothing.
    fn term_clauses(
        &mut self,
        analyzer: &Analyzer,
        fields: &[Field],
        text: &str,
        should: &mut Vec<Plan>,
    ) -> Result<bool> {
        let tokens = tokens(analyzer, text);
        for (term, _) in &tokens {
            for &f in fields {
                should.push(self.term(f, term)?);
            }
        }
        Ok(!tokens.is_empty())
    }

    fn term(&mut self, field: Field, term: &str) -> Result<Plan> {
        term_key(field, term, &mut self.key);
        let df = self.index.doc_freq(&self.key)?;
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

/// The terms of `text` and their positions.
fn tokens(analyzer: &Analyzer, text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    analyzer.analyze(text, |t| out.push((t.term.to_string(), t.position)));
    out
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
    // Operands in one canonical order: a query and any reordering of its
    // clauses evaluate identically, to the last bit of every score (float
    // sums depend on the order of their terms), which lets a result cache
    // answer `a b` for `b a`.
    for list in [&mut out.must, &mut out.should, &mut out.must_not] {
        list.sort_by(canonical_cmp);
    }
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

/// A total order on plans that ignores how the query spelled them: by kind,
/// then field and dictionary key, then operands.
pub fn canonical_cmp(a: &Plan, b: &Plan) -> std::cmp::Ordering {
    fn rank(p: &Plan) -> u8 {
        match p {
            Plan::Nothing => 0,
            Plan::Term(_) => 1,
            Plan::Phrase(_) => 2,
            Plan::Bool(_) => 3,
        }
    }
    fn list(a: &[Plan], b: &[Plan]) -> std::cmp::Ordering {
        a.len().cmp(&b.len()).then_with(|| {
            a.iter()
                .zip(b)
                .map(|(x, y)| canonical_cmp(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    }
    match (a, b) {
        (Plan::Term(x), Plan::Term(y)) => x.key.cmp(&y.key),
        (Plan::Phrase(x), Plan::Phrase(y)) => x
            .field
            .id()
            .cmp(&y.field.id())
            .then_with(|| x.rel.cmp(&y.rel))
            .then_with(|| x.terms.iter().map(|t| &t.key).cmp(y.terms.iter().map(|t| &t.key))),
        (Plan::Bool(x), Plan::Bool(y)) => list(&x.must, &y.must)
            .then_with(|| list(&x.should, &y.should))
            .then_with(|| list(&x.must_not, &y.must_not)),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Per-index scoring context: one norm cache per field, and the fields
/// whose terms have phrase filters.
pub struct ScoringContext {
    caches: Vec<NormCache>,
    filter_fields: FieldSet,
}

impl ScoringContext {
    /// The context of `index` (global field statistics).
    pub fn new(index: &Index) -> Self {
        ScoringContext {
            caches: index
                .schema()
                .fields()
                .map(|f| NormCache::new(&index.field_stats(f)))
                .collect(),
            filter_fields: index.manifest().postings_format().filter_fields,
        }
    }

    fn bm25(&self, field: Field, weight: f32) -> Bm25<'_> {
        Bm25::new(weight, &self.caches[field.index()])
    }
}

/// What building a segment's scorer tree needs: the segment, the scoring
/// context, and whether cursors prefetch (and in what segment size).
#[derive(Clone, Copy)]
pub struct Build<'a> {
    /// The segment.
    pub seg: &'a SegmentReader,
    /// Norm caches.
    pub ctx: &'a ScoringContext,
    /// Adaptive prefetch segment size, when the query qualifies.
    pub prefetch: Option<usize>,
    /// When phrases test their Bloom filters.
    pub filters: FilterUse,
}

impl<'a> Build<'a> {
    /// A build over `seg` without prefetching.
    pub fn new(seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Self {
        Build {
            seg,
            ctx,
            prefetch: None,
            filters: FilterUse::Auto,
        }
    }

    fn cursor(&self, info: &TermInfo) -> Result<TermCursor<'a>> {
        match self.prefetch {
            Some(segment) => self.seg.prefetching_cursor(info, segment),
            None => self.seg.cursor(info),
        }
    }
}

/// Segment size of adaptive prefetching.
pub const PREFETCH_SEGMENT: usize = 1 << 20;

/// Adaptive prefetch (DESIGN §0): when every term of `plan` has a prefetch
/// zone of at least `threshold` bytes in `seg`, prefetches the first
/// segment of every zone in one request and returns the segment size for the
/// cursors to continue with; otherwise does nothing.
pub fn prefetch_zones(plan: &Plan, seg: &SegmentReader, threshold: usize) -> Result<Option<usize>> {
    let mut terms = Vec::new();
    plan.all_terms(&mut terms);
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

/// A scorer tree whose node types are erased.
pub type BoxedScorer<'a> = Box<dyn Scorer + 'a>;

/// Builds the scorer of `plan` over `seg`; `None` when nothing can match.
pub fn build_scorer<'a>(plan: &Plan, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    Ok(match plan {
        Plan::Nothing => None,
        Plan::Term(t) => term_scorer(t, b)?.map(|s| Box::new(s) as BoxedScorer<'a>),
        Plan::Phrase(p) => phrase_scorer(p, b)?.map(|s| Box::new(s) as BoxedScorer<'a>),
        Plan::Bool(bp) => bool_scorer(bp, b)?,
    })
}

fn term_scorer<'a>(t: &TermPlan, b: Build<'a>) -> Result<Option<TermScorer<'a>>> {
    let Some(info) = b.seg.term_info(&t.key)? else {
        return Ok(None);
    };
    let cursor = b.cursor(&info)?;
    Ok(Some(TermScorer::new(
        cursor,
        b.ctx.bm25(t.field, t.idf),
        b.seg.norms(t.field),
    )))
}

fn phrase_scorer<'a>(p: &PhrasePlan, b: Build<'a>) -> Result<Option<PhraseScorer<'a>>> {
    let mut cursors = Vec::with_capacity(p.terms.len());
    let mut costs = Vec::with_capacity(p.terms.len());
    for t in &p.terms {
        let Some(info) = b.seg.term_info(&t.key)? else {
            return Ok(None);
        };
        cursors.push(b.cursor(&info)?);
        let r = &info.region;
        costs.push(TermCost {
            doc_freq: r.doc_freq,
            zone_len: r.zone_len as u64,
            pos_len: r.pos_len as u64,
            after_len: r.after_len as u64,
            before_len: r.before_len as u64,
        });
    }
    let filters = match (b.seg.bloom(), b.filters) {
        (Some(shape), FilterUse::Auto | FilterUse::Always) => {
            phrase_filters(p, &costs, shape, b.filters, &b.ctx.filter_fields)
        }
        _ => Vec::new(),
    };
    Ok(Some(PhraseScorer::new(
        cursors,
        p.rel.clone(),
        b.ctx.bm25(p.field, p.idf),
        b.seg.norms(p.field),
        filters,
    )))
}

/// The filter tests of a phrase: for each pair of terms at adjacent
/// positions that both take part in filters, the cheaper filter when the
/// cost model finds one worth reading (see [`bloom::choose`]), or always
/// the cheaper one with [`FilterUse::Always`].
fn phrase_filters(
    p: &PhrasePlan,
    costs: &[TermCost],
    shape: FilterShape,
    using: FilterUse,
    fields: &FieldSet,
) -> Vec<PhraseFilter> {
    let candidates = costs.iter().map(|c| c.doc_freq as u64).min().unwrap_or(0);
    // The scorer's lead: the first of the rarest terms.
    let lead = costs.iter().position(|c| c.doc_freq as u64 == candidates);
    let always = using == FilterUse::Always;
    let max_share = if always { f64::INFINITY } else { bloom::MAX_FILTER_SHARE };
    let mut filters = Vec::new();
    for (l, left) in p.terms.iter().enumerate() {
        for (r, right) in p.terms.iter().enumerate() {
            if p.rel[r] != p.rel[l] + 1
                || !bloom::filtered_term(fields, &left.key)
                || !bloom::filtered_term(fields, &right.key)
            {
                continue;
            }
            let lead_side = match lead {
                Some(i) if i == l => Some(0),
                Some(i) if i == r => Some(1),
                _ => None,
            };
            let mut filter = match bloom::choose_with(&costs[l], &costs[r], candidates, lead_side, max_share) {
                Some((0, dir)) => PhraseFilter::new(l, dir, Probe::new(shape, &right.key)),
                Some((_, dir)) => PhraseFilter::new(r, dir, Probe::new(shape, &left.key)),
                None => continue,
            };
            filter.keep = always;
            filters.push(filter);
        }
    }
    filters
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
fn disjunction<'a>(plans: &[Plan], b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    if let Some(terms) = all_terms(plans) {
        let mut subs = Vec::with_capacity(terms.len());
        for t in terms {
            subs.extend(term_scorer(t, b)?);
        }
        return Ok(match subs.len() {
            0 => None,
            1 => Some(Box::new(subs.pop().unwrap())),
            _ => Some(Box::new(Disjunction::new(subs))),
        });
    }
    let mut subs = Vec::with_capacity(plans.len());
    for p in plans {
        subs.extend(build_scorer(p, b)?);
    }
    Ok(match subs.len() {
        0 => None,
        1 => subs.pop(),
        _ => Some(Box::new(Disjunction::new(subs))),
    })
}

/// The conjunction of `plans`; `None` if any cannot match.
fn conjunction<'a>(plans: &[Plan], b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    if let Some(terms) = all_terms(plans) {
        let mut subs = Vec::with_capacity(terms.len());
        for t in terms {
            match term_scorer(t, b)? {
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
        match build_scorer(p, b)? {
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

fn bool_scorer<'a>(bp: &BoolPlan, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    let req: BoxedScorer<'a> = if bp.must.is_empty() {
        match disjunction(&bp.should, b)? {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        let Some(req) = conjunction(&bp.must, b)? else {
            return Ok(None);
        };
        match disjunction(&bp.should, b)? {
            Some(opt) if !bp.should.is_empty() => Box::new(ReqOpt::new(req, opt)),
            _ => req,
        }
    };
    Ok(Some(match disjunction(&bp.must_not, b)? {
        Some(excl) => Box::new(ReqExcl::new(req, excl)),
        None => req,
    }))
}
