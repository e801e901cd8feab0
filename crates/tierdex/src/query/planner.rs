//! From a parsed query to a plan: a tree of [`Weight`]s with global
//! statistics.
//!
//! Planning analyses query text with each field's analyzer, expands
//! unqualified clauses over the default fields, looks up global document
//! frequencies (so every segment scores with the same IDF), and simplifies:
//! clauses that analyse to nothing are dropped, terms absent from the index
//! match nothing, single-clause booleans collapse, nested pure
//! disjunctions/conjunctions flatten ([`BooleanWeight::build`]). A minimum
//! of optional clauses counts them as written, dropped ones included
//! ([`MinShouldMatchWeight::build`]).
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
use crate::query::ast::{self, MinimumShouldMatch, Occur};
use crate::query::bm25;
use std::ops::Bound;

use crate::column::ColumnKind;
use crate::error::Error;
use crate::query::boolean::BooleanWeight;
use crate::query::dismax::DisMaxWeight;
use crate::query::column::{ColumnMatch, ColumnWeight, ConstantWeight, IdsWeight, MatchAllWeight, NormsExistWeight};
use crate::schema::value::{convert, Indexed};
use crate::schema::{FieldEntry, FieldType};
use crate::query::collector::{self, Cutoff};
use crate::query::limits::QueryLimits;
use crate::query::min_should::MinShouldMatchWeight;
use crate::query::phrase::PhraseWeight;
use crate::query::term::TermWeight;
use crate::query::weight::{NothingWeight, Plan, Weight};
use crate::schema::Field;
use crate::termdict::term_key;

pub use crate::query::weight::{Build, ScoringContext};
use crate::query::global::GlobalStats;

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
    /// Statistics over several indices that IDFs come from, if any.
    global: Option<&'i GlobalStats>,
    /// Every term looked up, with its document frequency here (also those
    /// of clauses that end up matching nothing in this index).
    seen: Option<&'i SeenTerms>,
}

/// Terms a planner looked up: field, term, document frequency.
pub(crate) type SeenTerms = RefCell<Vec<(Field, String, u64)>>;

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
            global: None,
            seen: None,
        }
    }

    /// Records every term looked up, with its document frequency, in
    /// `seen`.
    pub(crate) fn recording(mut self, seen: &'i SeenTerms) -> Self {
        self.seen = Some(seen);
        self
    }

    /// Takes IDFs from `global` (statistics over several indices) rather
    /// than from this index alone.
    pub fn with_global(mut self, global: Option<&'i GlobalStats>) -> Self {
        self.global = global;
        self
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
        // A term or phrase on a keyword, number, date or boolean field is
        // an exact value.
        if let ast::Query::Term { field: Some(f), text } | ast::Query::Phrase { field: Some(f), text } = q {
            if self.typed(*f).is_some() {
                return self.values(*f, std::slice::from_ref(text)).map(Some);
            }
        }
        match q {
            ast::Query::MatchAll => Ok(Some(Box::new(MatchAllWeight::new(self.index, 1.0)))),
            ast::Query::Exists { field } => Ok(Some(match self.typed(*field) {
                Some(_) => Box::new(ColumnWeight::new(self.index, *field, ColumnMatch::Exists, 1.0)?),
                None => Box::new(NormsExistWeight::new(self.index, *field, 1.0)),
            })),
            ast::Query::Terms { field, values } => match self.typed(*field) {
                Some(_) => self.values(*field, values).map(Some),
                // Exact terms, not analysed (Elasticsearch's `terms` on text).
                None => {
                    let mut should = Vec::with_capacity(values.len());
                    for v in values {
                        should.push(self.term(*field, v)?);
                    }
                    Ok(Some(BooleanWeight::build(Vec::new(), should, Vec::new())))
                }
            },
            ast::Query::Range { field, lower, upper } => self.range(*field, lower, upper).map(Some),
            ast::Query::Ids(ids) => Ok(Some(Box::new(IdsWeight::new(self.index, ids, 1.0)?))),
            ast::Query::DisMax { queries, tie_bits } => {
                let mut subs = Vec::with_capacity(queries.len());
                for q in queries {
                    subs.extend(self.node(q)?);
                }
                Ok(match subs.len() {
                    0 => None,
                    1 => subs.pop(),
                    _ => Some(Box::new(DisMaxWeight::new(subs, f32::from_bits(*tie_bits))) as Plan),
                })
            }
            ast::Query::ConstantScore { query, boost_bits } => Ok(self
                .node(query)?
                .map(|p| Box::new(ConstantWeight::new(p, f32::from_bits(*boost_bits))) as Plan)),
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
            ast::Query::Boolean(clauses) => self.boolean(clauses, None),
            ast::Query::MinShouldMatch { query, min } => match &**query {
                ast::Query::Boolean(clauses) => {
                    let n = clauses.iter().filter(|c| c.occur == Occur::Should).count();
                    self.boolean(clauses, Some(min.resolve(n)))
                }
                ast::Query::Term { field, text } if field.is_none_or(|f| self.typed(f).is_none()) => {
                    self.min_of_tokens(*field, text, *min)
                }
                other => self.node(other),
            },
        }
    }

    /// A boolean of `clauses`, with at least `min` of its SHOULD clauses
    /// matching when given.
    fn boolean(&mut self, clauses: &[ast::Clause], min: Option<usize>) -> Result<Option<Plan>> {
        let (mut must, mut should, mut must_not) = (Vec::new(), Vec::new(), Vec::new());
        let mut any = false;
        for c in clauses {
            let Some(p) = self.node(&c.query)? else {
                continue;
            };
            any = true;
            match c.occur {
                Occur::Must => must.push(p),
                Occur::Filter => must.push(Box::new(ConstantWeight::new(p, 0.0))),
                Occur::Should => should.push(p),
                Occur::MustNot => must_not.push(p),
            }
        }
        Ok(any.then(|| match min {
            Some(min) => MinShouldMatchWeight::build(must, should, must_not, min),
            None => BooleanWeight::build(must, should, must_not),
        }))
    }

    /// A term whose tokens (each over the term's fields) are optional
    /// clauses of which `min` must match; a term of fewer than two tokens
    /// is planned as without the minimum. Each group of fields analysed
    /// alike counts its own tokens; the groups' results are OR-ed.
    fn min_of_tokens(&self, field: Option<Field>, text: &str, min: MinimumShouldMatch) -> Result<Option<Plan>> {
        let mut groups = Vec::new();
        let mut any = false;
        let limits = self.limits;
        self.each_group(field, |analyzer, fields| {
            let tokens = tokens(analyzer, text, limits.max_terms).ok_or_else(|| limits.too_many_terms())?;
            any |= !tokens.is_empty();
            if tokens.len() < 2 {
                for (t, _) in &tokens {
                    for &f in fields {
                        groups.push(self.term(f, t)?);
                    }
                }
                return Ok(());
            }
            let mut clauses = Vec::with_capacity(tokens.len());
            for (t, _) in &tokens {
                let mut each_field = Vec::with_capacity(fields.len());
                for &f in fields {
                    each_field.push(self.term(f, t)?);
                }
                clauses.push(BooleanWeight::build(Vec::new(), each_field, Vec::new()));
            }
            let m = min.resolve(tokens.len());
            groups.push(MinShouldMatchWeight::build(Vec::new(), clauses, Vec::new(), m));
            Ok(())
        })?;
        Ok(any.then(|| BooleanWeight::build(Vec::new(), groups, Vec::new())))
    }

    /// The entry of `field` when it is a keyword, number, date or boolean
    /// field.
    fn typed(&self, field: Field) -> Option<&'i FieldEntry> {
        self.index.schema().entry(field).filter(|e| e.ty.column_kind().is_some())
    }

    /// `text` as a value of typed field `entry` (a code, or a normalised
    /// keyword; `None`: a keyword no document can hold, over `ignore_above`).
    fn value(entry: &FieldEntry, text: &str) -> Result<Option<Value>> {
        match convert(entry, &serde_json::Value::String(text.to_string())) {
            Ok(Indexed::Code(c)) => Ok(Some(Value::Code(c))),
            Ok(Indexed::Keyword(k)) => Ok(Some(Value::Keyword(k.into_owned()))),
            Ok(_) => Ok(None),
            Err(e) => Err(Error::InvalidArgument(format!("query on {e}"))),
        }
    }

    /// Any of the exact `values` of typed field `field`.
    fn values(&self, field: Field, values: &[String]) -> Result<Plan> {
        let entry = self.typed(field).expect("a typed field");
        let (mut codes, mut keywords) = (Vec::new(), Vec::new());
        for v in values {
            match Self::value(entry, v)? {
                Some(Value::Code(c)) => codes.push(c),
                Some(Value::Keyword(k)) => keywords.push(k),
                None => {}
            }
        }
        codes.sort_unstable();
        codes.dedup();
        keywords.sort_unstable();
        keywords.dedup();
        let what = match entry.ty.column_kind() {
            Some(ColumnKind::Keyword) => ColumnMatch::Terms(keywords),
            _ => ColumnMatch::CodeSet(codes),
        };
        Ok(Box::new(ColumnWeight::new(self.index, field, what, 1.0)?))
    }

    /// The values of `field` between two bounds.
    fn range(&self, field: Field, lower: &Bound<String>, upper: &Bound<String>) -> Result<Plan> {
        let Some(entry) = self.typed(field) else {
            return Err(Error::InvalidArgument(format!(
                "a range on `{}`, a text field: ranges need a keyword, long, double, date or boolean field",
                self.index.schema().name(field)
            )));
        };
        let what = match &entry.ty {
            FieldType::Keyword(o) => {
                let norm = |s: &String| match crate::schema::value::keyword(o, std::borrow::Cow::Borrowed(s.as_str())) {
                    Indexed::Keyword(k) => k.into_owned(),
                    _ => s.clone(),
                };
                let map = |b: &Bound<String>| match b {
                    Bound::Included(s) => Bound::Included(norm(s)),
                    Bound::Excluded(s) => Bound::Excluded(norm(s)),
                    Bound::Unbounded => Bound::Unbounded,
                };
                ColumnMatch::Strings {
                    lower: map(lower),
                    upper: map(upper),
                }
            }
            ty => {
                let integral = matches!(ty, FieldType::Long(_));
                let bound = |b: &Bound<String>, low: bool| -> Result<Option<u64>> {
                    let (text, inclusive) = match b {
                        Bound::Unbounded => return Ok(Some(if low { 0 } else { u64::MAX })),
                        Bound::Included(t) => (t, true),
                        Bound::Excluded(t) => (t, false),
                    };
                    // A fractional bound of a long field rounds inward.
                    if integral {
                        if let Ok(x) = text.trim().parse::<f64>() {
                            if x.fract() != 0.0 && x.is_finite() {
                                let r = if low { x.ceil() } else { x.floor() };
                                let clamped = r.clamp(i64::MIN as f64, i64::MAX as f64) as i64;
                                return Ok(Some(crate::column::long_code(clamped)));
                            }
                        }
                    }
                    let c = match Self::value(entry, text)? {
                        Some(Value::Code(c)) => c,
                        _ => return Ok(None),
                    };
                    Ok(match (inclusive, low) {
                        (true, _) => Some(c),
                        (false, true) => c.checked_add(1),
                        (false, false) => c.checked_sub(1),
                    })
                };
                match (bound(lower, true)?, bound(upper, false)?) {
                    (Some(lo), Some(hi)) if lo <= hi => ColumnMatch::Codes { lo, hi },
                    _ => return Ok(Box::new(NothingWeight)),
                }
            }
        };
        Ok(Box::new(ColumnWeight::new(self.index, field, what, 1.0)?))
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
        if let Some(seen) = self.seen {
            seen.borrow_mut().push((field, term.to_string(), df));
        }
        // With statistics over several indices (shards), a term only other
        // indices hold is planned here too, matching nothing: every index
        // then builds the same plan, whose canonical clause order is the
        // order scores are summed in (float addition is not associative:
        // a clause collapsed here but not there summed 3-term conjunctions
        // one unit in the last place apart from one index's).
        let elsewhere = self
            .global
            .and_then(|g| g.doc_freq(self.index.schema().name(field), term))
            .is_some_and(|g| g > 0);
        if df == 0 && !elsewhere {
            return Ok(None);
        }
        let mut n = self.index.field_stats(field).doc_count;
        let mut global_df = df;
        if let Some(g) = self.global {
            let name = self.index.schema().name(field);
            global_df = g.doc_freq(name, term).unwrap_or(df).max(df);
            n = g.field(name).map_or(n, |s| s.doc_count.max(n));
        }
        Ok(Some(TermWeight::new(
            field,
            term.to_string(),
            Arc::from(&key[..]),
            bm25::idf(global_df, n),
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

/// A typed field's value as a query looks for it.
enum Value {
    Code(u64),
    Keyword(String),
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
