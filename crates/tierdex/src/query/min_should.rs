//! A minimum number of optional clauses (Elasticsearch's
//! `minimum_should_match` above 1): the weight, and the scorer that needs
//! at least `min` of its clauses to match a document.

use std::any::Any;

use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::SegmentReader;
use crate::query::boolean::{all_terms, conjunction, disjunction, term_scorers, BooleanWeight, Conjunction, ReqExcl};
use crate::query::collector::{self, Cutoff};
use crate::query::scorer::{advance_by, first_error, seek_by, Scorer};
use crate::query::term::TermWeight;
use crate::query::weight::{
    is_nothing, BoxedScorer, Build, Clauses, NothingWeight, Plan, QueryKey, SegmentJob, Weight,
};
use crate::schema::{DocId, Field, TERMINATED};

/// Above this minimum, counts iterate the scorer instead of keeping one bit
/// set per number of clauses matched.
const BITSET_LEVELS: usize = 8;

/// A boolean query whose documents must also match at least `min` of the
/// optional clauses (`2 <= min < should.len()`; other minimums normalise to
/// a [`BooleanWeight`]). The score is the sum of the matching required and
/// optional clauses.
#[derive(Debug)]
pub struct MinShouldMatchWeight {
    must: Vec<Plan>,
    should: Vec<Plan>,
    must_not: Vec<Plan>,
    min: usize,
    key: QueryKey,
}

impl MinShouldMatchWeight {
    /// The boolean of these clauses with at least `min` of `should`
    /// matching, normalised: optional clauses that match nothing dropped
    /// (they still count towards `min`, so fewer left than `min` matches
    /// nothing), a minimum of 0 the plain boolean, of 1 the disjunction of
    /// the optional clauses (required when there are required clauses), of
    /// every clause their conjunction, and operands in canonical order.
    pub fn build(must: Vec<Plan>, should: Vec<Plan>, must_not: Vec<Plan>, min: usize) -> Plan {
        let should: Vec<Plan> = should.into_iter().filter(|p| !is_nothing(&**p)).collect();
        if min > should.len() || must.iter().any(|p| is_nothing(&**p)) {
            return Box::new(NothingWeight);
        }
        let mut must = must;
        if min == 0 || (min == 1 && must.is_empty()) {
            return BooleanWeight::build(must, should, must_not);
        }
        if min == 1 {
            must.push(BooleanWeight::build(Vec::new(), should, Vec::new()));
            return BooleanWeight::build(must, Vec::new(), must_not);
        }
        if min == should.len() {
            must.extend(should);
            return BooleanWeight::build(must, Vec::new(), must_not);
        }
        let mut should = should;
        let mut must_not: Vec<Plan> = must_not.into_iter().filter(|p| !is_nothing(&**p)).collect();
        for list in [&mut must, &mut should, &mut must_not] {
            list.sort_by(|a, b| a.key().cmp(b.key()));
        }
        let keys = |l: &[Plan]| Clauses(l.iter().map(|p| p.key().clone()).collect());
        let key = QueryKey::Other(
            format!("min_should_match {min}"),
            vec![QueryKey::Bool {
                must: keys(&must),
                should: keys(&should),
                must_not: keys(&must_not),
            }],
        );
        Box::new(MinShouldMatchWeight {
            must,
            should,
            must_not,
            min,
            key,
        })
    }

    /// The scorer of the optional clauses; `None` when fewer than `min` of
    /// them have a match in the segment.
    fn optional<'a>(&self, mut b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        b.lead_cost = None;
        let mut subs = Vec::with_capacity(self.should.len());
        for p in &self.should {
            subs.extend(p.scorer(b)?);
        }
        Ok(match subs.len() {
            n if n < self.min => None,
            n if n == self.min => Some(Box::new(Conjunction::new(subs))),
            _ => Some(Box::new(MinShould::new(subs, self.min))),
        })
    }

    /// The documents of `seg` that at least `min` optional clauses match.
    fn at_least(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        // `levels[j]`: the documents matched by more than `j` of the
        // clauses seen so far.
        let mut levels = vec![BitSet::new(seg.max_doc()); self.min];
        for p in &self.should {
            collector::check(cutoff)?;
            let set = p.matches(seg, cutoff)?;
            for j in (1..self.min).rev() {
                let (below, at) = levels.split_at_mut(j);
                let below = below[j - 1].words();
                for ((a, &lower), &s) in at[0].words_mut().iter_mut().zip(below).zip(set.words()) {
                    *a |= lower & s;
                }
            }
            levels[0].union_with(&set);
        }
        Ok(levels.pop().expect("min is at least 2"))
    }
}

impl Weight for MinShouldMatchWeight {
    fn key(&self) -> &QueryKey {
        &self.key
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
        let Some(opt) = self.optional(b)? else {
            return Ok(None);
        };
        let req: BoxedScorer<'a> = if self.must.is_empty() {
            opt
        } else {
            let Some(req) = conjunction(&self.must, b)? else {
                return Ok(None);
            };
            Box::new(Conjunction::new(vec![req, opt]))
        };
        Ok(Some(match disjunction(&self.must_not, b)? {
            Some(excl) => Box::new(ReqExcl::new(req, excl)),
            None => req,
        }))
    }

    fn collect(&self, mut b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        if self.must.is_empty() && self.must_not.is_empty() {
            if let Some(terms) = all_terms(&self.should) {
                b.lead_cost = None;
                let subs = term_scorers(&terms, b)?;
                return match subs.len() {
                    n if n < self.min => Ok(true),
                    n if n == self.min => job.run(&mut Conjunction::new(subs)),
                    _ => job.run(&mut MinShould::new(subs, self.min)),
                };
            }
        }
        match self.scorer(b)? {
            Some(mut s) => job.run(&mut s),
            None => Ok(true),
        }
    }

    fn bitset_cost(&self) -> Option<f64> {
        if self.min > BITSET_LEVELS {
            return None;
        }
        let mut sum = 0.0;
        for c in self.must.iter().chain(&self.should).chain(&self.must_not) {
            sum += c.bitset_cost()?;
        }
        Some(sum)
    }

    /// Required clauses lead as in a boolean; otherwise every optional
    /// clause is merged, as in a disjunction.
    fn iteration_cost(&self) -> f64 {
        if self.must.is_empty() {
            2.0 * self.should.iter().map(|p| p.iteration_cost()).sum::<f64>()
        } else {
            let lead = self
                .must
                .iter()
                .map(|p| p.iteration_cost())
                .fold(f64::INFINITY, f64::min);
            lead * 3.0 * (self.must.len() + 1 + self.must_not.len()) as f64
        }
    }

    fn code_bounds(&self, field: Field) -> Option<(u64, u64)> {
        self.must
            .iter()
            .filter_map(|p| p.code_bounds(field))
            .reduce(|a, b| (a.0.max(b.0), a.1.min(b.1)))
    }

    /// As if clauses were independent: the chance that at least `min`
    /// optional clauses match, times that every required one does and no
    /// excluded one.
    fn estimated_matches(&self, num_docs: f64) -> f64 {
        if num_docs <= 0.0 {
            return 0.0;
        }
        let density = |p: &Plan| (p.estimated_matches(num_docs) / num_docs).clamp(0.0, 1.0);
        // `chance[j]`: exactly `j` matched so far; `chance[min]`: at least `min`.
        let mut chance = vec![0.0; self.min + 1];
        chance[0] = 1.0;
        for p in &self.should {
            let d = density(p);
            chance[self.min] += chance[self.min - 1] * d;
            for j in (1..self.min).rev() {
                chance[j] = chance[j] * (1.0 - d) + chance[j - 1] * d;
            }
            chance[0] *= 1.0 - d;
        }
        let mut d = chance[self.min];
        for p in &self.must {
            d *= density(p);
        }
        for p in &self.must_not {
            d *= 1.0 - density(p);
        }
        d * num_docs
    }

    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut acc = self.at_least(seg, cutoff)?;
        let mut order: Vec<&Plan> = self.must.iter().collect();
        order.sort_by(|a, b| {
            let cost = |p: &Plan| p.bitset_cost().unwrap_or(f64::INFINITY);
            cost(a).total_cmp(&cost(b))
        });
        for p in order {
            if acc.is_empty() {
                return Ok(acc);
            }
            collector::check(cutoff)?;
            if !p.narrow(seg, &mut acc)? {
                acc.intersect_with(&p.matches(seg, cutoff)?);
            }
        }
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

/// At least `min` children must match (`2 <= min < children`); the score
/// is the sum of the matching ones, added in child order as a
/// [`Disjunction`](crate::query::boolean::Disjunction) adds them.
///
/// A candidate is the `min`-th smallest position among the children: no
/// earlier document can have `min` children on it. Children behind it seek
/// to it until `min` of them agree. With a minimum competitive score it
/// runs windowed MaxScore as a disjunction does: in each window the
/// children whose summed block maxima stay below the threshold are
/// non-essential, candidates come from the others (and are never before
/// the `min`-th smallest position), and non-essential children are only
/// probed while the candidate can still reach both the threshold and
/// `min` matching children.
pub struct MinShould<S> {
    subs: Vec<S>,
    min: usize,
    doc: DocId,
    score: Option<f32>,
    /// The children's positions, to select the `min`-th smallest (reused).
    docs: Vec<DocId>,
    /// Which children `matches_at` found on its target (reused).
    matched: Vec<bool>,
    /// Which children have blocks left after the last `shallow_advance`.
    live: Vec<bool>,
    cost: u64,
    max_score: f32,
    min_comp: f32,
    /// The current window `[.., win_end]`: children by increasing block
    /// maximum, prefix sums of those maxima, and how many are non-essential.
    win_valid: bool,
    win_end: DocId,
    win_order: Vec<usize>,
    win_max: Vec<f32>,
    win_prefix: Vec<f32>,
    win_ne: usize,
}

impl<S: Scorer> MinShould<S> {
    /// The documents `min` of `subs` match, positioned on the first.
    pub fn new(subs: Vec<S>, min: usize) -> Self {
        assert!(
            min >= 1 && min <= subs.len(),
            "a minimum of {min} among {} clauses",
            subs.len()
        );
        let n = subs.len();
        // Every match is in the union of any `n - min + 1` children: the
        // cheapest such union bounds the matches.
        let mut costs: Vec<u64> = subs.iter().map(|s| s.cost()).collect();
        costs.sort_unstable();
        let cost = costs[..n - min + 1].iter().fold(0u64, |a, &c| a.saturating_add(c));
        let mut s = MinShould {
            max_score: subs.iter().map(|s| s.max_score()).sum(),
            subs,
            min,
            doc: 0,
            score: None,
            docs: Vec::with_capacity(n),
            matched: vec![false; n],
            live: vec![false; n],
            cost,
            min_comp: 0.0,
            win_valid: false,
            win_end: 0,
            win_order: (0..n).collect(),
            win_max: vec![0.0; n],
            win_prefix: vec![0.0; n + 1],
            win_ne: 0,
        };
        s.find(0);
        s
    }

    fn find(&mut self, target: DocId) -> DocId {
        self.score = None;
        if self.min_comp > 0.0 {
            return self.next_pruned(target);
        }
        let mut target = target;
        while target != TERMINATED {
            self.docs.clear();
            for s in &mut self.subs {
                let d = if s.doc() < target { s.seek(target) } else { s.doc() };
                self.docs.push(d);
            }
            let (_, &mut kth, _) = self.docs.select_nth_unstable(self.min - 1);
            if kth == target {
                self.doc = target;
                return target;
            }
            target = kth;
        }
        self.doc = TERMINATED;
        TERMINATED
    }

    /// Plans the window starting at `target`; false when fewer than `min`
    /// children can still match.
    fn plan_window(&mut self, target: DocId) -> bool {
        let (mut end, mut live) = (TERMINATED, 0);
        for (i, s) in self.subs.iter_mut().enumerate() {
            let e = shallow(s, target);
            if e == TERMINATED {
                self.win_max[i] = 0.0;
            } else {
                self.win_max[i] = s.block_max_score();
                end = end.min(e);
                live += 1;
            }
        }
        if live < self.min {
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
            // A child behind `target` has no match before it.
            self.docs.clear();
            self.docs.extend(self.subs.iter().map(|s| s.doc().max(target)));
            let (_, &mut kth, _) = self.docs.select_nth_unstable(self.min - 1);
            let cand = cand.max(kth);
            if cand > self.win_end {
                // Nothing competitive left in this window.
                target = self.win_end.saturating_add(1);
                self.win_valid = false;
                continue;
            }
            let (mut count, mut score) = (0, 0.0f32);
            for &i in &self.win_order[ne..] {
                let s = &mut self.subs[i];
                let d = if s.doc() < cand { s.seek(cand) } else { s.doc() };
                if d == cand {
                    count += 1;
                    score += s.score();
                }
            }
            let mut possible = true;
            for j in (0..ne).rev() {
                if score + self.win_prefix[j + 1] < self.min_comp || count + j + 1 < self.min {
                    possible = false;
                    break;
                }
                let s = &mut self.subs[self.win_order[j]];
                let d = if s.doc() < cand { s.seek(cand) } else { s.doc() };
                if d == cand {
                    count += 1;
                    score += s.score();
                }
            }
            if possible && count >= self.min {
                // Every child is now on `cand` or past it: the score in
                // child order, as without pruning.
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

/// `s.shallow_advance` from `target` or from where `s` is, if further (no
/// match of `s` lies between); an exhausted child is not asked.
#[inline]
fn shallow<S: Scorer>(s: &mut S, target: DocId) -> DocId {
    match s.doc() {
        TERMINATED => TERMINATED,
        d => s.shallow_advance(target.max(d)),
    }
}

impl<S: Scorer> Scorer for MinShould<S> {
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
        self.cost
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
        let (mut end, mut live) = (TERMINATED, 0);
        for (s, l) in self.subs.iter_mut().zip(self.live.iter_mut()) {
            let e = shallow(s, target);
            *l = e != TERMINATED;
            if *l {
                end = end.min(e);
                live += 1;
            }
        }
        if live < self.min {
            TERMINATED
        } else {
            end
        }
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
        self.doc = target;
        self.score = Some(0.0);
        let n = self.subs.len();
        let mut count = 0;
        for (i, s) in self.subs.iter_mut().enumerate() {
            if count + (n - i) < self.min {
                return false;
            }
            self.matched[i] = s.matches_at(target);
            count += usize::from(self.matched[i]);
        }
        if count < self.min {
            return false;
        }
        // A child that does not match may still sit on `target` (an
        // exclusion whose required part matched): only those that do add.
        let mut sum = 0.0;
        for (s, &m) in self.subs.iter_mut().zip(&self.matched) {
            if m {
                sum += s.score();
            }
        }
        self.score = Some(sum);
        true
    }
    fn set_count_only(&mut self) {
        self.subs.iter_mut().for_each(|s| s.set_count_only());
    }
    fn take_error(&mut self) -> Option<Error> {
        first_error(&mut self.subs)
    }
}
