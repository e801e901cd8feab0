//! Boolean queries: the weight (required, optional and excluded clauses,
//! normalised) and the scorers that combine clause scorers: conjunction
//! (block-max AND), disjunction (MaxScore when a threshold is known),
//! required + optional, required minus excluded.

use std::any::Any;

use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::{Index, SegmentReader};
use crate::query::collector::{self, Cutoff};
use crate::query::column::ConstantWeight;
use crate::query::scorer::{advance_by, first_error, seek_by, Scorer};
use crate::query::term::{TermScorer, TermWeight};
use crate::query::weight::{
    is_nothing, BoxedScorer, Build, Clauses, NothingWeight, Plan, QueryKey, SegmentJob, Weight,
};
use crate::schema::{DocId, Field, TERMINATED};

/// A boolean query: with at least one required clause a document must match
/// all of them and optional clauses only add to its score; without, at least
/// one optional clause must match. Excluded clauses remove documents. The
/// score is the sum of the matching required and optional clauses, added
/// in canonical clause order.
#[derive(Debug)]
pub struct BooleanWeight {
    /// All required.
    pub must: Vec<Plan>,
    /// Optional (at least one when `must` is empty).
    pub should: Vec<Plan>,
    /// Excluded.
    pub must_not: Vec<Plan>,
    canonical: QueryKey,
}

/// Shapes whose scorer types are known, so their loops are monomorphised.
enum Shape<'w> {
    /// Optional terms only.
    TermOr(Vec<&'w TermWeight>),
    /// Required terms only.
    TermAnd(Vec<&'w TermWeight>),
    /// Required disjunctions of terms (`+a +b` over several fields), and
    /// filter clauses when the flag says so.
    AndOfTermOrs(Vec<Vec<&'w TermWeight>>, bool),
    /// Anything else: boxed scorers.
    Other,
}

/// The clauses of `plans` as terms, if every one is a term.
pub(crate) fn all_terms(plans: &[Plan]) -> Option<Vec<&TermWeight>> {
    plans.iter().map(|p| p.as_any().downcast_ref::<TermWeight>()).collect()
}

impl BooleanWeight {
    /// The normalised boolean of these clauses: clauses that match nothing
    /// dropped (a required one makes the whole match nothing), nested pure
    /// disjunctions (in optional clauses) and pure conjunctions (in required
    /// ones) flattened, operands in canonical order, and a lone clause
    /// standing for itself.
    pub fn build(must: Vec<Plan>, should: Vec<Plan>, must_not: Vec<Plan>) -> Plan {
        if must.iter().any(|p| is_nothing(&**p)) {
            return Box::new(NothingWeight);
        }
        let (mut out_must, mut out_should) = (Vec::new(), Vec::new());
        for p in must {
            match Self::take(p, |b| b.should.is_empty() && b.must_not.is_empty()) {
                Ok(inner) => out_must.extend(inner.must),
                Err(p) => out_must.push(p),
            }
        }
        for p in should {
            if is_nothing(&*p) {
                continue;
            }
            match Self::take(p, |b| b.must.is_empty() && b.must_not.is_empty()) {
                Ok(inner) => out_should.extend(inner.should),
                Err(p) => out_should.push(p),
            }
        }
        let mut out_must_not: Vec<Plan> = must_not.into_iter().filter(|p| !is_nothing(&**p)).collect();
        // Operands in one canonical order: a query and any reordering of its
        // clauses evaluate identically, to the last bit of every score (float
        // sums depend on the order of their terms), which lets a result cache
        // answer `a b` for `b a`.
        for list in [&mut out_must, &mut out_should, &mut out_must_not] {
            list.sort_by(|a, b| a.key().cmp(b.key()));
        }
        if out_must.is_empty() && out_should.is_empty() {
            return Box::new(NothingWeight);
        }
        if out_must_not.is_empty() {
            if out_must.len() == 1 && out_should.is_empty() {
                return out_must.pop().unwrap();
            }
            if out_must.is_empty() && out_should.len() == 1 {
                return out_should.pop().unwrap();
            }
        }
        let keys = |l: &[Plan]| Clauses(l.iter().map(|p| p.key().clone()).collect());
        let canonical = QueryKey::Bool {
            must: keys(&out_must),
            should: keys(&out_should),
            must_not: keys(&out_must_not),
        };
        Box::new(BooleanWeight {
            must: out_must,
            should: out_should,
            must_not: out_must_not,
            canonical,
        })
    }

    /// `p` as a boolean when it is one and `flat(p)` holds, else `p` back.
    fn take(p: Plan, flat: impl Fn(&BooleanWeight) -> bool) -> std::result::Result<BooleanWeight, Plan> {
        match p.as_any().downcast_ref::<BooleanWeight>() {
            Some(b) if flat(b) => Ok(*p.into_any().downcast::<BooleanWeight>().expect("checked above")),
            _ => Err(p),
        }
    }

    fn shape(&self) -> Shape<'_> {
        if !self.must_not.is_empty() {
            return Shape::Other;
        }
        if self.must.is_empty() {
            return all_terms(&self.should).map_or(Shape::Other, Shape::TermOr);
        }
        if !self.should.is_empty() {
            return Shape::Other;
        }
        if let Some(terms) = all_terms(&self.must) {
            return Shape::TermAnd(terms);
        }
        let (mut ors, mut filtered) = (Vec::new(), false);
        for p in &self.must {
            match p.as_any().downcast_ref::<BooleanWeight>().map(BooleanWeight::shape) {
                Some(Shape::TermOr(t)) => ors.push(t),
                _ if is_filter(&**p) => filtered = true,
                _ => match p.as_any().downcast_ref::<TermWeight>() {
                    Some(t) if self.must.iter().any(|p| is_filter(&**p)) => ors.push(vec![t]),
                    _ => return Shape::Other,
                },
            }
        }
        // A single word (or disjunction) without filters is not a boolean.
        match ors.len() {
            0 => Shape::Other,
            1 if !filtered => Shape::Other,
            _ => Shape::AndOfTermOrs(ors, filtered),
        }
    }
}

/// Whether `p` is a filter clause (matches scored 0).
fn is_filter(p: &dyn Weight) -> bool {
    p.as_any()
        .downcast_ref::<ConstantWeight>()
        .is_some_and(|c| c.boost().to_bits() == 0)
}

/// The cost of the cheapest clause other than clause `i` (what leads the
/// conjunction `i` is part of, as far as it can tell).
fn other_min(costs: &[f64], i: usize) -> Option<f64> {
    costs
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != i)
        .map(|(_, &c)| c)
        .reduce(f64::min)
}

/// The scorers of the terms present in the segment.
pub(crate) fn term_scorers<'a>(terms: &[&TermWeight], b: Build<'a>) -> Result<Vec<TermScorer<'a>>> {
    let mut subs = Vec::with_capacity(terms.len());
    for t in terms {
        subs.extend(t.term_scorer(b)?);
    }
    Ok(subs)
}

/// The scorers of `terms`, or `None` as soon as one is absent from the segment.
fn required_term_scorers<'a>(terms: &[&TermWeight], b: Build<'a>) -> Result<Option<Vec<TermScorer<'a>>>> {
    let mut subs = Vec::with_capacity(terms.len());
    for t in terms {
        match t.term_scorer(b)? {
            Some(s) => subs.push(s),
            None => return Ok(None),
        }
    }
    Ok(Some(subs))
}

/// The disjunction of `plans` (matching children only); `None` if none match.
pub(crate) fn disjunction<'a>(plans: &[Plan], mut b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    // Optional and excluded clauses iterate on their own.
    b.lead_cost = None;
    if let Some(terms) = all_terms(plans) {
        let mut subs = term_scorers(&terms, b)?;
        return Ok(match subs.len() {
            0 => None,
            1 => Some(Box::new(subs.pop().unwrap())),
            _ => Some(Box::new(Disjunction::new(subs))),
        });
    }
    let mut subs = Vec::with_capacity(plans.len());
    for p in plans {
        subs.extend(p.scorer(b)?);
    }
    Ok(match subs.len() {
        0 => None,
        1 => subs.pop(),
        _ => Some(Box::new(Disjunction::new(subs))),
    })
}

/// The conjunction of `plans`; `None` if any cannot match.
pub(crate) fn conjunction<'a>(plans: &[Plan], b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
    if let Some(terms) = all_terms(plans) {
        let Some(mut subs) = required_term_scorers(&terms, b)? else {
            return Ok(None);
        };
        return Ok(Some(if subs.len() == 1 {
            Box::new(subs.pop().unwrap())
        } else {
            Box::new(Conjunction::new(subs))
        }));
    }
    let mut subs = Vec::with_capacity(plans.len());
    let costs: Vec<f64> = plans.iter().map(|p| p.iteration_cost()).collect();
    for (i, p) in plans.iter().enumerate() {
        let mut bi = b;
        bi.lead_cost = other_min(&costs, i);
        match p.scorer(bi)? {
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

impl Weight for BooleanWeight {
    fn key(&self) -> &QueryKey {
        &self.canonical
    }

    fn terms<'a>(&'a self, positive: bool, out: &mut Vec<&'a TermWeight>) {
        for c in self.must.iter().chain(&self.should) {
            c.terms(positive, out);
        }
        if !positive {
            for c in &self.must_not {
                c.terms(positive, out);
            }
        }
    }

    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        let req: BoxedScorer<'a> = if self.must.is_empty() {
            match disjunction(&self.should, b)? {
                Some(s) => s,
                None => return Ok(None),
            }
        } else {
            let Some(req) = conjunction(&self.must, b)? else {
                return Ok(None);
            };
            match disjunction(&self.should, b)? {
                Some(opt) if !self.should.is_empty() => Box::new(ReqOpt::new(req, opt)),
                _ => req,
            }
        };
        Ok(Some(match disjunction(&self.must_not, b)? {
            Some(excl) => Box::new(ReqExcl::new(req, excl)),
            None => req,
        }))
    }

    fn scorer_led<'a>(&self, b: Build<'a>, lead: BoxedScorer<'a>) -> Result<Option<BoxedScorer<'a>>> {
        if self.must.is_empty() {
            return Ok(self
                .scorer(b)?
                .map(|s| Box::new(Conjunction::new(vec![lead, s])) as BoxedScorer<'a>));
        }
        let lead_cost = lead.cost() as f64;
        let costs: Vec<f64> = self.must.iter().map(|p| p.iteration_cost()).collect();
        let mut subs: Vec<BoxedScorer<'a>> = Vec::with_capacity(self.must.len() + 1);
        subs.push(lead);
        for (i, p) in self.must.iter().enumerate() {
            let mut bi = b;
            bi.lead_cost = costs
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &c)| c)
                .fold(lead_cost, f64::min)
                .into();
            match p.scorer(bi)? {
                Some(s) => subs.push(s),
                None => return Ok(None),
            }
        }
        let req: BoxedScorer<'a> = Box::new(Conjunction::new(subs));
        let req: BoxedScorer<'a> = match disjunction(&self.should, b)? {
            Some(opt) if !self.should.is_empty() => Box::new(ReqOpt::new(req, opt)),
            _ => req,
        };
        Ok(Some(match disjunction(&self.must_not, b)? {
            Some(excl) => Box::new(ReqExcl::new(req, excl)),
            None => req,
        }))
    }

    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        match self.shape() {
            Shape::TermOr(terms) => {
                let subs = term_scorers(&terms, b)?;
                match subs.len() {
                    0 => Ok(true),
                    _ => job.run_or(subs, b.seg.max_doc()),
                }
            }
            Shape::TermAnd(terms) => match required_term_scorers(&terms, b)? {
                None => Ok(true),
                Some(mut subs) if subs.len() == 1 => job.run(&mut subs[0]),
                Some(subs) => job.run(&mut Conjunction::new(subs)),
            },
            Shape::AndOfTermOrs(ors, filtered) => {
                let max_doc = b.seg.max_doc();
                // With filters, the nested scorers count, and a filter much
                // sparser than the cheapest word leads them to its few
                // documents; otherwise the words' windows lead and the
                // filters confirm (judged from the plans' estimates, before
                // any scorer is built).
                if filtered {
                    let estimate = |p: &Plan| p.estimated_matches(f64::from(max_doc));
                    let sparse = || {
                        let words = self.must.iter().filter(|p| !is_filter(&***p));
                        let cheapest = words.map(estimate).fold(f64::INFINITY, f64::min);
                        let mut filters = self.must.iter().filter(|p| is_filter(&***p));
                        filters.any(|p| estimate(p) * (SPARSE_LEAD as f64) < cheapest)
                    };
                    if job.top.is_none() || job.count.is_some() || sparse() {
                        return match self.scorer(b)? {
                            Some(mut s) => job.run(&mut s),
                            None => Ok(true),
                        };
                    }
                }
                let mut groups = Vec::with_capacity(ors.len());
                for terms in &ors {
                    let present = term_scorers(terms, b)?;
                    if present.is_empty() {
                        return Ok(true);
                    }
                    groups.push(present);
                }
                if !filtered {
                    return job.run_and_of_ors(groups, Vec::new(), max_doc);
                }
                let single = groups.len() == 1;
                if !single && !job.takes_bulk_and(&groups, max_doc) {
                    return match self.scorer(b)? {
                        Some(mut s) => job.run(&mut s),
                        None => Ok(true),
                    };
                }
                // Built as the nested conjunction builds them.
                let costs: Vec<f64> = self.must.iter().map(|p| p.iteration_cost()).collect();
                let mut filters = Vec::new();
                for (i, p) in self.must.iter().enumerate().filter(|(_, p)| is_filter(&***p)) {
                    let mut bi = b;
                    bi.lead_cost = other_min(&costs, i);
                    match p.scorer(bi)? {
                        Some(s) => filters.push(s),
                        None => return Ok(true),
                    }
                }
                match single {
                    true => job.run_or_filtered(groups.pop().expect("one group"), filters, max_doc),
                    false => job.run_and_of_ors(groups, filters, max_doc),
                }
            }
            Shape::Other => match self.scorer(b)? {
                Some(mut s) => job.run(&mut s),
                None => Ok(true),
            },
        }
    }

    /// Two optional terms of very different frequencies (a word over
    /// `title` and `body`): the union's count is the two live document
    /// frequencies less the live documents holding both, counted by the
    /// rarer term's postings seeking the other's, without reading the
    /// common term's postings through.
    fn known_count(&self, index: &Index) -> Result<Option<u64>> {
        if !self.must.is_empty() || !self.must_not.is_empty() || self.should.len() != 2 {
            return Ok(None);
        }
        let Some(mut terms) = all_terms(&self.should) else {
            return Ok(None);
        };
        terms.sort_by_key(|t| t.doc_freq);
        let (rare, common) = (terms[0], terms[1]);
        if rare.doc_freq.saturating_mul(UNION_COUNT_RATIO) > common.doc_freq
            || common.doc_freq < UNION_COUNT_MIN_DF
            || common.doc_freq.saturating_mul(UNION_COUNT_MAX_SHARE) >= index.num_docs()
        {
            return Ok(None);
        }
        let both = live_intersection(index, &rare.key, &common.key)?;
        // More shared than either holds: the delete counts disagree with
        // the postings, so the matches are counted instead.
        Ok((index.doc_freq(&rare.key)? + index.doc_freq(&common.key)?).checked_sub(both))
    }

    fn bitset_cost(&self) -> Option<f64> {
        let mut sum = 0.0;
        for c in self.must.iter().chain(&self.should).chain(&self.must_not) {
            sum += c.bitset_cost()?;
        }
        Some(sum)
    }

    /// A conjunction of words (every required clause holds terms, none is
    /// a filter) counts with bit sets sooner than [`Self::iteration_cost`]
    /// says: each of its candidates seeks every term of the other words
    /// (see [`TEXT_SEEK_UNITS`]). Only for the query as a whole: a
    /// conjunction inside a filtered one keeps its estimate, so that a
    /// sparse filter still leads by seeking.
    fn count_iteration_cost(&self) -> f64 {
        let words = |p: &Plan| {
            let mut terms = Vec::new();
            p.terms(true, &mut terms);
            !terms.is_empty() && !is_filter(&**p)
        };
        if self.must.is_empty() || !self.must.iter().all(words) {
            return self.iteration_cost();
        }
        let lead = self.must.iter().map(|p| p.iteration_cost()).fold(f64::INFINITY, f64::min);
        lead * TEXT_SEEK_UNITS * (self.must.len() + self.must_not.len()) as f64
    }

    /// A conjunction is led by its cheapest clause and seeks the others (a
    /// few units per candidate), a disjunction merges all its clauses (two
    /// units per posting). A filter leading words costs more per
    /// candidate: each one seeks every term of the words, about
    /// [`SEEK_UNITS`] postings' decoding each (measured on 1M documents:
    /// a 20% filter with two common words counted 7x faster with bit sets,
    /// 1% filters faster by seeking; 4 units measured better than 12 on
    /// 1%, 10% and 50% filters).
    fn iteration_cost(&self) -> f64 {
        if !self.must.is_empty() {
            let lead = self
                .must
                .iter()
                .map(|p| p.iteration_cost())
                .fold(f64::INFINITY, f64::min);
            let base = lead * 3.0 * (self.must.len() + self.must_not.len()) as f64;
            // The clause the scorer leads with: the fewest documents.
            let docs = |p: &Plan| p.bitset_cost().unwrap_or_else(|| p.iteration_cost());
            let first = self.must.iter().min_by(|a, b| docs(a).total_cmp(&docs(b)));
            if !first.is_some_and(|p| is_filter(&**p)) {
                return base;
            }
            let mut terms = Vec::new();
            for p in self.must.iter().filter(|p| !is_filter(&***p)) {
                p.terms(true, &mut terms);
            }
            base + lead * SEEK_UNITS * terms.len() as f64
        } else {
            2.0 * self.should.iter().map(|p| p.iteration_cost()).sum::<f64>()
        }
    }

    fn code_bounds(&self, field: Field) -> Option<(u64, u64)> {
        self.must
            .iter()
            .filter_map(|p| p.code_bounds(field))
            .reduce(|a, b| (a.0.max(b.0), a.1.min(b.1)))
    }

    fn estimated_matches(&self, num_docs: f64) -> f64 {
        if num_docs <= 0.0 {
            return 0.0;
        }
        let density = |p: &Plan| (p.estimated_matches(num_docs) / num_docs).clamp(0.0, 1.0);
        let mut d = if self.must.is_empty() {
            1.0 - self.should.iter().map(|p| 1.0 - density(p)).product::<f64>()
        } else {
            self.must.iter().map(density).product()
        };
        for p in &self.must_not {
            d *= 1.0 - density(p);
        }
        d * num_docs
    }

    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut acc = if self.must.is_empty() {
            let mut acc = BitSet::new(seg.max_doc());
            for p in &self.should {
                p.union_into(seg, cutoff, &mut acc)?;
            }
            acc
        } else {
            // The cheapest clause first; a broad filter then confirms the
            // few candidates left instead of collecting its own documents.
            let mut order: Vec<&Plan> = self.must.iter().collect();
            order.sort_by(|a, b| {
                let cost = |p: &Plan| p.bitset_cost().unwrap_or(f64::INFINITY);
                cost(a).total_cmp(&cost(b))
            });
            let mut acc = order[0].matches(seg, cutoff)?;
            for p in &order[1..] {
                if acc.is_empty() {
                    break;
                }
                collector::check(cutoff)?;
                if !p.narrow(seg, &mut acc)? {
                    acc.intersect_with(&p.matches(seg, cutoff)?);
                }
            }
            acc
        };
        for p in &self.must_not {
            if acc.is_empty() {
                break;
            }
            acc.subtract(&p.matches(seg, cutoff)?);
        }
        Ok(acc)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// What a filter-led conjunction's seek into one term costs, in postings
/// decoded (the unit of [`Weight::bitset_cost`]).
const SEEK_UNITS: f64 = 4.0;

/// Units per candidate and clause of a conjunction of words, without
/// filters, in [`Weight::count_iteration_cost`] (3 in
/// [`Weight::iteration_cost`]). Counting with bit sets pays sooner than
/// the postings' sizes suggest: dense blocks are ORed in whole, while each
/// candidate seeks every term of the other words (a rarer word beside a
/// very common one took milliseconds of seeks). Measured against 3: COUNT
/// of two words 0.69-0.77x the time on 1M generated documents (with a
/// count and the top 10: 0.71x), 0.73x on Wikipedia's command file; the
/// typed corpus' filtered conjunctions unchanged.
const TEXT_SEEK_UNITS: f64 = 30.0;

/// Least ratio of the common term's document frequency to the rare one's
/// at which a two-term union is counted from the document frequencies and
/// the terms' intersection ([`Weight::known_count`]) rather than from its
/// postings: each of the rare term's postings costs a seek, many times a
/// posting decoded into a bit set ([`TEXT_SEEK_UNITS`] through the
/// scorers; the cursors' own loop is cheaper). A choice, not tuned.
const UNION_COUNT_RATIO: u64 = 16;

/// Least document frequency of the common term for that count: a union of
/// fewer documents is counted with a bit set, which then also leads the
/// top-k pass of a count with hits to its few matches (measured on 1M
/// generated documents: TOP_10_COUNT of a word in 100 documents took 1.3x
/// longer from the known count).
const UNION_COUNT_MIN_DF: u64 = 1024;

/// The common term of that count is in fewer than one document in this
/// many: a denser one's blocks are mostly bit sets, ORed whole into the
/// count's set far faster than the rare term can seek them (Wikipedia's
/// `the`, in 95% of the articles: COUNT 1.6x slower from the known count).
const UNION_COUNT_MAX_SHARE: u64 = 4;

/// The number of live documents holding both term keys `a` (the rarer) and
/// `b`: `a`'s postings and `b`'s seek each other, segment by segment. It
/// does not watch the query's deadline: the rules above bound it to under
/// 1/64 of the index's documents.
fn live_intersection(index: &Index, a: &[u8], b: &[u8]) -> Result<u64> {
    let mut both = 0u64;
    for (i, seg) in index.segments().iter().enumerate() {
        let (Some(ia), Some(ib)) = (seg.term_info(a)?, seg.term_info(b)?) else {
            continue;
        };
        let deleted = index.deletes(i).map(|d| d.bits());
        let (mut x, mut y) = (seg.cursor(&ia)?, seg.cursor(&ib)?);
        let mut d = x.doc();
        while d != TERMINATED {
            let e = y.seek(d);
            if e == d {
                both += u64::from(!deleted.is_some_and(|del| del.contains(d)));
                d = x.advance();
            } else if e == TERMINATED {
                break;
            } else {
                d = x.seek(e);
            }
        }
        if let Some(e) = x.take_error().or_else(|| y.take_error()) {
            return Err(e);
        }
    }
    Ok(both)
}

/// How much sparser than the next clause a conjunction's unscored lead (a
/// filter) must be for the conjunction to score its candidates without
/// block-max windows.
const SPARSE_LEAD: u64 = 8;

/// All children must match; the score is their sum. With a minimum
/// competitive score it skips whole windows whose summed block maxima
/// cannot reach it (block-max AND).
pub struct Conjunction<S> {
    /// Clauses iterated to find candidates (leapfrog), cheapest first, then
    /// the two-phase clauses that only confirm candidates.
    subs: Vec<S>,
    /// Indices into `subs` in the order the clauses were given: scores are
    /// summed in this order, so a document's score does not depend on the
    /// segment's statistics (float addition is not associative).
    given: Vec<usize>,
    /// `subs[1..checks]` confirm the lead's candidates in constant time;
    /// `subs[checks..approx]` leapfrog; the rest are two-phase.
    checks: usize,
    approx: usize,
    doc: DocId,
    min_comp: f32,
    window_end: DocId,
    window_bound: f32,
    window_valid: bool,
    /// Whether block-max windows are worth their bookkeeping: not when an
    /// unscored lead far sparser than the next clause (a selective filter)
    /// lands each candidate in a new window of the dense clauses' blocks.
    windows: bool,
    max_score: f32,
}

impl<S: Scorer> Conjunction<S> {
    /// The conjunction of `subs` (at least one), positioned on its first match.
    pub fn new(mut subs: Vec<S>) -> Self {
        assert!(!subs.is_empty(), "conjunction of nothing");
        // Cheap clauses first (by cost), expensive-to-confirm ones last; at
        // least one clause iterates. Right behind the lead come the clauses
        // that confirm a document in constant time (bit sets): a lead's
        // candidate is tested against them before any other clause seeks.
        let mut order: Vec<usize> = (0..subs.len()).collect();
        order.sort_by_key(|&i| (subs[i].two_phase(), subs[i].cost()));
        order[1..].sort_by_key(|&i| match (subs[i].two_phase(), subs[i].random_access()) {
            (false, true) => 0,
            (false, false) => 1,
            (true, _) => 2,
        });
        let mut given = vec![0; subs.len()];
        for (at, &i) in order.iter().enumerate() {
            given[i] = at;
        }
        let mut slots: Vec<Option<S>> = subs.drain(..).map(Some).collect();
        let subs: Vec<S> = order.iter().map(|&i| slots[i].take().unwrap()).collect();
        let checks = 1 + subs[1..]
            .iter()
            .take_while(|s| !s.two_phase() && s.random_access())
            .count();
        let approx = checks + subs[checks..].iter().filter(|s| !s.two_phase()).count();
        let max_score = subs.iter().map(|s| s.max_score()).sum();
        let windows = approx < 2
            || subs[0].max_score() > 0.0
            || subs[0].cost().saturating_mul(SPARSE_LEAD) >= subs[1].cost();
        let mut c = Conjunction {
            subs,
            given,
            checks,
            approx,
            doc: 0,
            min_comp: 0.0,
            window_end: 0,
            window_bound: 0.0,
            window_valid: false,
            windows,
            max_score,
        };
        let first = c.subs[0].doc();
        c.find(first);
        c
    }

    fn window(&mut self, target: DocId) -> DocId {
        let mut end = TERMINATED;
        let mut bound = 0.0;
        for s in &mut self.subs {
            let e = s.shallow_advance(target);
            if e == TERMINATED {
                return TERMINATED;
            }
            end = end.min(e);
            bound += s.block_max_score();
        }
        self.window_end = end;
        self.window_bound = bound;
        self.window_valid = true;
        end
    }

    fn find(&mut self, mut target: DocId) -> DocId {
        'outer: loop {
            if target == TERMINATED {
                break;
            }
            if self.min_comp > 0.0 {
                if (!self.window_valid || target > self.window_end) && self.window(target) == TERMINATED {
                    break;
                }
                if self.window_bound < self.min_comp {
                    target = self.window_end.saturating_add(1);
                    self.window_valid = false;
                    continue;
                }
            }
            let lead = self.subs[0].seek(target);
            if lead == TERMINATED {
                break;
            }
            if lead > target && self.min_comp > 0.0 && lead > self.window_end {
                target = lead;
                continue;
            }
            target = lead;
            for i in 1..self.checks {
                if !self.subs[i].matches_at(target) {
                    target += 1;
                    continue 'outer;
                }
            }
            for i in self.checks..self.approx {
                let d = self.subs[i].seek(target);
                if d > target {
                    target = d;
                    continue 'outer;
                }
            }
            for i in self.approx..self.subs.len() {
                if !self.subs[i].matches_at(target) {
                    target += 1;
                    continue 'outer;
                }
            }
            self.doc = target;
            return target;
        }
        self.doc = TERMINATED;
        TERMINATED
    }
}

impl<S: Scorer> Scorer for Conjunction<S> {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    fn advance(&mut self) -> DocId {
        let doc = self.doc;
        advance_by(doc, |t| self.find(t))
    }
    fn seek(&mut self, target: DocId) -> DocId {
        let doc = self.doc;
        seek_by(doc, target, |t| self.find(t))
    }
    fn cost(&self) -> u64 {
        self.subs[0].cost()
    }
    fn score(&mut self) -> f32 {
        let mut sum = 0.0;
        for &i in &self.given {
            sum += self.subs[i].score();
        }
        sum
    }
    fn max_score(&self) -> f32 {
        self.max_score
    }
    /// Without windows (a sparse lead), one window spans everything left,
    /// bounded by the clauses' maxima: a caller's block-max checks would
    /// cost a skip-table step per clause at nearly every match.
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        self.window_valid = false;
        if !self.windows {
            return match self.doc {
                TERMINATED => TERMINATED,
                _ => TERMINATED - 1,
            };
        }
        let mut end = TERMINATED;
        for s in &mut self.subs {
            let e = s.shallow_advance(target);
            if e == TERMINATED {
                return TERMINATED;
            }
            end = end.min(e);
        }
        end
    }
    fn block_max_score(&mut self) -> f32 {
        if !self.windows {
            return self.max_score;
        }
        self.subs.iter_mut().map(|s| s.block_max_score()).sum()
    }
    fn set_min_competitive_score(&mut self, min: f32) {
        if self.windows {
            self.min_comp = min;
        }
    }
    fn two_phase(&self) -> bool {
        self.subs[0].two_phase()
    }
    /// Summed as [`Scorer::score`] sums, so it equals every match's score.
    fn constant_score(&self) -> Option<f32> {
        let mut sum = 0.0;
        for &i in &self.given {
            sum += self.subs[i].constant_score()?;
        }
        Some(sum)
    }
    fn set_count_only(&mut self) {
        self.subs.iter_mut().for_each(|s| s.set_count_only());
    }
    fn take_error(&mut self) -> Option<Error> {
        first_error(&mut self.subs)
    }
}

/// At least one child must match; the score is the sum of the matching ones.
/// With a minimum competitive score it runs windowed MaxScore (as Lucene's
/// `MaxScoreBulkScorer`): documents are taken in windows that end at the
/// nearest block boundary of any child; in each window the children are
/// ordered by their block maxima there, and those whose summed maxima stay
/// below the threshold are *non-essential*: they are only probed for
/// documents the others produce, and a candidate is dropped as soon as its
/// best possible score falls short. A window where every child is
/// non-essential is skipped unread.
pub struct Disjunction<S> {
    subs: Vec<S>,
    doc: DocId,
    score: Option<f32>,
    min_comp: f32,
    live: Vec<bool>,
    max_score: f32,
    /// The current window `[.., win_end]`: children by increasing block
    /// maximum, prefix sums of those maxima, and how many are non-essential.
    win_valid: bool,
    win_end: DocId,
    win_order: Vec<usize>,
    win_max: Vec<f32>,
    win_prefix: Vec<f32>,
    win_ne: usize,
}

impl<S: Scorer> Disjunction<S> {
    /// The disjunction of `subs` (at least one), positioned on its first match.
    pub fn new(subs: Vec<S>) -> Self {
        assert!(!subs.is_empty(), "disjunction of nothing");
        let n = subs.len();
        let doc = subs.iter().map(|s| s.doc()).min().unwrap_or(TERMINATED);
        Disjunction {
            live: vec![false; n],
            max_score: subs.iter().map(|s| s.max_score()).sum(),
            subs,
            doc,
            score: None,
            min_comp: 0.0,
            win_valid: false,
            win_end: 0,
            win_order: (0..n).collect(),
            win_max: vec![0.0; n],
            win_prefix: vec![0.0; n + 1],
            win_ne: 0,
        }
    }

    fn next_from(&mut self, target: DocId) -> DocId {
        self.score = None;
        if self.min_comp <= 0.0 {
            let mut doc = TERMINATED;
            for s in &mut self.subs {
                let d = if s.doc() < target { s.seek(target) } else { s.doc() };
                doc = doc.min(d);
            }
            self.doc = doc;
            return doc;
        }
        self.next_pruned(target)
    }

    /// Plans the window starting at `target`; false when every child is
    /// exhausted.
    fn plan_window(&mut self, target: DocId) -> bool {
        let mut end = TERMINATED;
        for (i, s) in self.subs.iter_mut().enumerate() {
            let e = s.shallow_advance(target);
            if e == TERMINATED {
                self.win_max[i] = 0.0;
            } else {
                self.win_max[i] = s.block_max_score();
                end = end.min(e);
            }
        }
        if end == TERMINATED {
            return false;
        }
        let max = &self.win_max;
        self.win_order.sort_by(|&a, &b| max[a].total_cmp(&max[b]));
        let mut ne = 0;
        for (j, &i) in self.win_order.iter().enumerate() {
            self.win_prefix[j + 1] = self.win_prefix[j] + max[i];
            if self.win_prefix[j + 1] < self.min_comp {
                ne = j + 1;
            }
        }
        self.win_ne = ne;
        self.win_end = end;
        self.win_valid = true;
        true
    }

    fn next_pruned(&mut self, mut target: DocId) -> DocId {
        loop {
            if target == TERMINATED || ((!self.win_valid || target > self.win_end) && !self.plan_window(target)) {
                self.doc = TERMINATED;
                return TERMINATED;
            }
            let ne = self.win_ne;
            let mut cand = TERMINATED;
            for &i in &self.win_order[ne..] {
                let s = &mut self.subs[i];
                let d = if s.doc() < target { s.seek(target) } else { s.doc() };
                cand = cand.min(d);
            }
            if cand > self.win_end {
                // Nothing competitive left in this window.
                if self.win_end == TERMINATED {
                    self.doc = TERMINATED;
                    return TERMINATED;
                }
                target = self.win_end + 1;
                self.win_valid = false;
                continue;
            }
            let mut score = 0.0f32;
            for &i in &self.win_order[ne..] {
                if self.subs[i].doc() == cand {
                    score += self.subs[i].score();
                }
            }
            let mut competitive = true;
            for j in (0..ne).rev() {
                if score + self.win_prefix[j + 1] < self.min_comp {
                    competitive = false;
                    break;
                }
                let s = &mut self.subs[self.win_order[j]];
                let d = if s.doc() < cand { s.seek(cand) } else { s.doc() };
                if d == cand {
                    score += s.score();
                }
            }
            if competitive {
                // Every clause is now on `cand` or past it: the score in
                // clause order, as without pruning.
                let mut exact = 0.0f32;
                for s in &mut self.subs {
                    if s.doc() == cand {
                        exact += s.score();
                    }
                }
                if exact >= self.min_comp {
                    self.doc = cand;
                    self.score = Some(exact);
                    return cand;
                }
            }
            target = cand + 1;
        }
    }
}

impl<S: Scorer> Scorer for Disjunction<S> {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    fn advance(&mut self) -> DocId {
        let doc = self.doc;
        advance_by(doc, |t| self.next_from(t))
    }
    fn seek(&mut self, target: DocId) -> DocId {
        let doc = self.doc;
        seek_by(doc, target, |t| self.next_from(t))
    }
    fn cost(&self) -> u64 {
        self.subs.iter().map(|s| s.cost()).sum()
    }
    fn score(&mut self) -> f32 {
        if let Some(s) = self.score {
            return s;
        }
        let doc = self.doc;
        let mut sum = 0.0;
        for s in &mut self.subs {
            if s.doc() == doc {
                sum += s.score();
            }
        }
        self.score = Some(sum);
        sum
    }
    fn max_score(&self) -> f32 {
        self.max_score
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        let mut end = TERMINATED;
        for (s, live) in self.subs.iter_mut().zip(self.live.iter_mut()) {
            let e = s.shallow_advance(target);
            *live = e != TERMINATED;
            end = end.min(e);
        }
        end
    }
    fn block_max_score(&mut self) -> f32 {
        let mut sum = 0.0;
        for (s, &live) in self.subs.iter_mut().zip(&self.live) {
            if live {
                sum += s.block_max_score();
            }
        }
        sum
    }
    fn set_min_competitive_score(&mut self, min: f32) {
        self.min_comp = min;
        // The partition depends on the threshold: plan the window anew.
        self.win_valid = false;
    }
    fn two_phase(&self) -> bool {
        self.subs.iter().any(|s| s.two_phase())
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        if target < self.doc {
            return false;
        }
        // A child that does not match may still sit on `target` (an
        // exclusion whose required part matched), so the score is summed
        // here over the children that do.
        let mut any = false;
        let mut sum = 0.0;
        for s in &mut self.subs {
            if s.matches_at(target) {
                any = true;
                sum += s.score();
            }
        }
        self.doc = target;
        self.score = Some(sum);
        any
    }
    fn set_count_only(&mut self) {
        self.subs.iter_mut().for_each(|s| s.set_count_only());
    }
    fn take_error(&mut self) -> Option<Error> {
        first_error(&mut self.subs)
    }
}

/// A required scorer plus an optional one that only adds to the score.
pub struct ReqOpt<R, O> {
    req: R,
    opt: O,
    opt_live: bool,
}

impl<R: Scorer, O: Scorer> ReqOpt<R, O> {
    /// `req` matches; `opt` adds its score where it matches too.
    pub fn new(req: R, opt: O) -> Self {
        ReqOpt {
            req,
            opt,
            opt_live: false,
        }
    }
}

impl<R: Scorer, O: Scorer> Scorer for ReqOpt<R, O> {
    #[inline]
    fn doc(&self) -> DocId {
        self.req.doc()
    }
    fn advance(&mut self) -> DocId {
        self.req.advance()
    }
    fn seek(&mut self, target: DocId) -> DocId {
        self.req.seek(target)
    }
    fn cost(&self) -> u64 {
        self.req.cost()
    }
    fn score(&mut self) -> f32 {
        let doc = self.req.doc();
        let mut s = self.req.score();
        if self.opt.matches_at(doc) {
            s += self.opt.score();
        }
        s
    }
    fn max_score(&self) -> f32 {
        self.req.max_score() + self.opt.max_score()
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        let a = self.req.shallow_advance(target);
        if a == TERMINATED {
            return TERMINATED;
        }
        let b = self.opt.shallow_advance(target);
        self.opt_live = b != TERMINATED;
        a.min(b)
    }
    fn block_max_score(&mut self) -> f32 {
        let r = self.req.block_max_score();
        if self.opt_live {
            r + self.opt.block_max_score()
        } else {
            r
        }
    }
    fn set_min_competitive_score(&mut self, min: f32) {
        let rest = min - self.opt.max_score();
        if rest > 0.0 {
            self.req.set_min_competitive_score(rest);
        }
    }
    fn two_phase(&self) -> bool {
        self.req.two_phase()
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        self.req.matches_at(target)
    }
    fn set_count_only(&mut self) {
        self.req.set_count_only();
        self.opt.set_count_only();
    }
    fn take_error(&mut self) -> Option<Error> {
        let a = self.req.take_error();
        let b = self.opt.take_error();
        a.or(b)
    }
}

/// A required scorer minus the documents an excluded one matches.
pub struct ReqExcl<R, E> {
    req: R,
    excl: E,
}

impl<R: Scorer, E: Scorer> ReqExcl<R, E> {
    /// Matches of `req` that `excl` does not match, positioned on the first.
    pub fn new(req: R, excl: E) -> Self {
        let mut r = ReqExcl { req, excl };
        let d = r.req.doc();
        r.skip_excluded(d);
        r
    }

    fn skip_excluded(&mut self, mut doc: DocId) -> DocId {
        while doc != TERMINATED {
            if !self.excl.matches_at(doc) {
                return doc;
            }
            doc = self.req.advance();
        }
        TERMINATED
    }
}

impl<R: Scorer, E: Scorer> Scorer for ReqExcl<R, E> {
    #[inline]
    fn doc(&self) -> DocId {
        self.req.doc()
    }
    fn advance(&mut self) -> DocId {
        let d = self.req.advance();
        self.skip_excluded(d)
    }
    fn seek(&mut self, target: DocId) -> DocId {
        let d = self.req.seek(target);
        self.skip_excluded(d)
    }
    fn cost(&self) -> u64 {
        self.req.cost()
    }
    fn score(&mut self) -> f32 {
        self.req.score()
    }
    fn max_score(&self) -> f32 {
        self.req.max_score()
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        self.req.shallow_advance(target)
    }
    fn block_max_score(&mut self) -> f32 {
        self.req.block_max_score()
    }
    fn set_min_competitive_score(&mut self, min: f32) {
        self.req.set_min_competitive_score(min)
    }
    fn two_phase(&self) -> bool {
        self.req.two_phase()
    }
    fn constant_score(&self) -> Option<f32> {
        self.req.constant_score()
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        self.req.matches_at(target) && !self.excl.matches_at(target)
    }
    fn set_count_only(&mut self) {
        self.req.set_count_only();
        self.excl.set_count_only();
    }
    fn take_error(&mut self) -> Option<Error> {
        let a = self.req.take_error();
        let b = self.excl.take_error();
        a.or(b)
    }
}
