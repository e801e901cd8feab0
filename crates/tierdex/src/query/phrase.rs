//! Exact phrases: the weight (terms, relative positions, summed IDF) and
//! the scorer that matches on positions, with phrase Bloom filters tested
//! first where the cost model finds them worth it (DESIGN §4).

use std::any::Any;

use crate::bloom::{self, Direction, FilterShape, FilterUse, Probe, TermCost};
use crate::common::FieldSet;
use crate::error::{Error, Result};
use crate::layout::TermCursor;
use crate::query::bm25::Bm25;
use crate::query::scorer::{advance_by, seek_by, Scorer};
use crate::query::term::TermWeight;
use crate::query::weight::{BoxedScorer, Build, QueryKey, SegmentJob, Weight};
use crate::schema::{DocId, Field, TERMINATED};

/// A phrase in one field.
#[derive(Debug, Clone, PartialEq)]
pub struct PhraseWeight {
    /// The field.
    pub field: Field,
    /// Terms in phrase order (repeats allowed).
    pub terms: Vec<TermWeight>,
    /// Position of each term relative to the first.
    pub rel: Vec<u32>,
    /// Sum of the terms' IDFs.
    pub idf: f32,
    canonical: QueryKey,
}

impl PhraseWeight {
    /// The phrase of `terms` (two or more) at relative positions `rel` in `field`.
    pub fn new(field: Field, terms: Vec<TermWeight>, rel: Vec<u32>) -> PhraseWeight {
        let idf = terms.iter().map(|t| t.idf).sum();
        let canonical = QueryKey::Phrase {
            field: field.id(),
            rel: rel.clone(),
            keys: terms.iter().map(|t| t.key.clone()).collect(),
        };
        PhraseWeight {
            field,
            terms,
            rel,
            idf,
            canonical,
        }
    }

    /// The phrase's scorer over one segment (`None`: a term is missing there).
    pub fn phrase_scorer<'a>(&self, b: Build<'a>) -> Result<Option<PhraseScorer<'a>>> {
        let mut cursors = Vec::with_capacity(self.terms.len());
        let mut costs = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
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
                self.filters(&costs, shape, b.filters, &b.ctx.filter_fields, b.ctx.filter_share)
            }
            _ => Vec::new(),
        };
        Ok(Some(PhraseScorer::new(
            cursors,
            self.rel.clone(),
            b.ctx.bm25(self.field, self.idf),
            b.seg.norms(self.field),
            filters,
        )))
    }

    /// The filter tests of the phrase: for each pair of terms at adjacent
    /// positions that both take part in filters, the cheaper filter when
    /// the cost model finds one worth reading at most `share` of what it
    /// saves (see [`bloom::choose_with`] and
    /// [`crate::query::weight::filter_share`]), or always the cheaper one
    /// with [`FilterUse::Always`].
    fn filters(
        &self,
        costs: &[TermCost],
        shape: FilterShape,
        using: FilterUse,
        fields: &FieldSet,
        share: f64,
    ) -> Vec<PhraseFilter> {
        let candidates = costs.iter().map(|c| c.doc_freq as u64).min().unwrap_or(0);
        // The scorer's lead: the first of the rarest terms.
        let lead = costs.iter().position(|c| c.doc_freq as u64 == candidates);
        let always = using == FilterUse::Always;
        let max_share = if always { f64::INFINITY } else { share };
        let mut filters = Vec::new();
        for (l, left) in self.terms.iter().enumerate() {
            for (r, right) in self.terms.iter().enumerate() {
                if self.rel[r] != self.rel[l] + 1
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
}

impl Weight for PhraseWeight {
    fn key(&self) -> &QueryKey {
        &self.canonical
    }

    fn terms<'a>(&'a self, _positive: bool, out: &mut Vec<&'a TermWeight>) {
        out.extend(self.terms.iter());
    }

    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(self.phrase_scorer(b)?.map(|s| Box::new(s) as BoxedScorer<'a>))
    }

    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        match self.phrase_scorer(b)? {
            Some(mut s) => job.run(&mut s),
            None => Ok(true),
        }
    }

    fn iteration_cost(&self) -> f64 {
        self.terms.iter().map(|t| t.doc_freq as f64).sum::<f64>() * 8.0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Documents where the terms occur at their relative positions; scored by
/// BM25 with the phrase frequency and the summed IDF.
pub struct PhraseScorer<'a> {
    terms: Vec<TermCursor<'a>>,
    /// Position of each term relative to the phrase start.
    rel: Vec<u32>,
    /// Terms by increasing document frequency (conjunction order).
    order: Vec<usize>,
    /// The two rarest terms are intersected by merging their blocks (their
    /// frequencies are close), not by the second seeking the first's
    /// documents.
    merge: bool,
    bm25: Bm25<'a>,
    norms: &'a [u8],
    doc: DocId,
    freq: u32,
    positions: Vec<Vec<u32>>,
    /// The candidate starts of the current document.
    starts: Vec<u32>,
    /// (frequency in the current document, term), by increasing frequency.
    by_freq: Vec<(u32, usize)>,
    max_score: f32,
    /// Counting: the first matching position is enough.
    count_only: bool,
    filters: Vec<PhraseFilter>,
    error: Option<Error>,
}

/// One phrase filter test: `term`'s `dir` filter must hold the neighbour
/// whose probe is `probe`, or the document cannot match. A test of the
/// lead (rarest) term runs as soon as the lead reaches a document, before
/// the other terms are sought there; the others once all are on it.
#[derive(Debug, Clone, Copy)]
pub struct PhraseFilter {
    /// Index of the tested term in the phrase.
    pub term: usize,
    /// Which of its filters.
    pub dir: Direction,
    /// The neighbour's probe.
    pub probe: Probe,
    /// Never dropped, however little it rejects.
    pub keep: bool,
    tested: u32,
    rejected: u32,
}

impl PhraseFilter {
    /// A test of `term`'s `dir` filter for the neighbour of `probe`.
    pub fn new(term: usize, dir: Direction, probe: Probe) -> Self {
        PhraseFilter {
            term,
            dir,
            probe,
            keep: false,
            tested: 0,
            rejected: 0,
        }
    }
}

/// Largest ratio of the second rarest term's document frequency to the
/// rarest's at which their blocks are merged rather than the rarer's
/// documents sought: a merge step takes a posting of either term, a seek
/// only the rarer's at several times the cost (a choice: a rare word beside
/// a common one, as in `pair-1k`, keeps seeking, measured unchanged).
const MERGE_RATIO: u64 = 8;

/// Tests after which a filter that rejected fewer than one candidate in
/// [`USELESS_REJECT_RATIO`] is dropped: the pair co-occurs so often that
/// reading the filters costs more than the positions they save.
const USEFUL_AFTER_TESTS: u32 = 512;
const USELESS_REJECT_RATIO: u32 = 20;

impl<'a> PhraseScorer<'a> {
    /// A phrase of `terms` at relative positions `rel` (same length, >= 2),
    /// testing `filters` on each candidate before reading positions.
    pub fn new(
        terms: Vec<TermCursor<'a>>,
        rel: Vec<u32>,
        bm25: Bm25<'a>,
        norms: &'a [u8],
        filters: Vec<PhraseFilter>,
    ) -> Self {
        assert!(
            terms.len() >= 2 && terms.len() == rel.len(),
            "phrase needs two or more terms"
        );
        let mut order: Vec<usize> = (0..terms.len()).collect();
        order.sort_by_key(|&i| terms[i].doc_freq());
        let merge = terms[order[1]].doc_freq() as u64 <= MERGE_RATIO * terms[order[0]].doc_freq() as u64;
        let max_score = terms
            .iter()
            .map(|t| bm25.bound(t.term_impacts()))
            .fold(f32::INFINITY, f32::min);
        let n = terms.len();
        let mut p = PhraseScorer {
            terms,
            rel,
            order,
            merge,
            bm25,
            norms,
            doc: 0,
            freq: 0,
            positions: vec![Vec::new(); n],
            starts: Vec::new(),
            by_freq: Vec::with_capacity(n),
            max_score,
            count_only: false,
            filters,
            error: None,
        };
        let first = p.terms[p.order[0]].doc();
        p.find(first);
        p
    }

    /// Phrase frequency in the current document.
    pub fn freq(&self) -> u32 {
        self.freq
    }

    fn find(&mut self, mut target: DocId) -> DocId {
        'outer: loop {
            let lead = self.order[0];
            let d = match self.merge {
                true => {
                    let (a, b) = pair_mut(&mut self.terms, lead, self.order[1]);
                    a.seek(target);
                    b.seek(target);
                    a.intersect(b)
                }
                false => self.terms[lead].seek(target),
            };
            if d == TERMINATED {
                break;
            }
            target = d;
            // The lead's own filters decide before the other terms are sought.
            if !self.filters_pass(true) {
                target += 1;
                continue;
            }
            for k in 1..self.order.len() {
                let i = self.order[k];
                let di = self.terms[i].seek(target);
                if di > target {
                    if di == TERMINATED {
                        break 'outer;
                    }
                    target = di;
                    continue 'outer;
                }
            }
            if !self.filters_pass(false) {
                target += 1;
                continue;
            }
            let f = self.phrase_freq();
            if f > 0 {
                self.doc = target;
                self.freq = f;
                return target;
            }
            target += 1;
        }
        self.doc = TERMINATED;
        self.freq = 0;
        TERMINATED
    }

    /// Whether the current candidate passes the filter tests of the lead
    /// term (`lead`: only the lead is on it yet) or of the other terms (all
    /// are on it); a test that keeps failing to reject is dropped.
    #[inline]
    fn filters_pass(&mut self, lead: bool) -> bool {
        let lead_term = self.order[0];
        let mut i = 0;
        while i < self.filters.len() {
            let f = &mut self.filters[i];
            if (f.term == lead_term) != lead {
                i += 1;
                continue;
            }
            f.tested += 1;
            if !self.terms[f.term].filter_may_contain(f.dir, &f.probe) {
                f.rejected += 1;
                return false;
            }
            if !f.keep && f.tested >= USEFUL_AFTER_TESTS && f.rejected * USELESS_REJECT_RATIO < f.tested {
                self.filters.swap_remove(i);
                continue;
            }
            i += 1;
        }
        true
    }

    /// Counts the start positions where every term is at its offset. The
    /// term least frequent in the document gives the candidate starts; each
    /// other one, by increasing frequency, keeps those it continues, and
    /// positions are decoded only while candidates remain.
    fn phrase_freq(&mut self) -> u32 {
        let n = self.terms.len();
        if n == 2 {
            return self.pair_freq();
        }
        self.by_freq.clear();
        for (i, t) in self.terms.iter_mut().enumerate() {
            self.by_freq.push((t.freq(), i));
        }
        self.by_freq.sort_unstable();
        let lead = self.by_freq[0].1;
        self.terms[lead].positions(&mut self.positions[lead]);
        let r = self.rel[lead];
        self.starts.clear();
        self.starts
            .extend(self.positions[lead].iter().filter_map(|&p| p.checked_sub(r)));
        for k in 1..n {
            if self.starts.is_empty() {
                return 0;
            }
            let j = self.by_freq[k].1;
            keep_continued(&mut self.terms[j], &mut self.starts, self.rel[j]);
        }
        let count = self.starts.len() as u32;
        match self.count_only {
            true => count.min(1),
            false => count,
        }
    }
}

impl PhraseScorer<'_> {
    /// [`PhraseScorer::phrase_freq`] of two terms: the term less frequent
    /// in the document leads; the other's positions are decoded only as far
    /// as the lead's last one reaches, and the lists are merged.
    fn pair_freq(&mut self) -> u32 {
        let (lead, other) = match self.terms[0].freq() <= self.terms[1].freq() {
            true => (0, 1),
            false => (1, 0),
        };
        self.terms[lead].positions(&mut self.positions[lead]);
        let (rl, ro) = (self.rel[lead] as u64, self.rel[other] as u64);
        let targets = &self.positions[lead];
        if targets.is_empty() {
            return 0;
        }
        // The other term's positions are matched as they are decoded: a
        // lead position p (a phrase start at p - rl, when p >= rl) needs
        // the other at p - rl + ro; decoding stops past the last one.
        let count_only = self.count_only;
        let (mut t, mut count) = (0, 0);
        self.terms[other].positions_while(|q| {
            let q = q as u64;
            // The lead position that would pair with q.
            let Some(want) = (q + rl).checked_sub(ro) else {
                return true;
            };
            while t < targets.len() && (targets[t] as u64) < want {
                t += 1;
            }
            if t == targets.len() {
                return false;
            }
            if targets[t] as u64 == want && want >= rl {
                count += 1;
                t += 1;
                return !count_only;
            }
            true
        });
        count
    }
}

/// Two distinct elements of `v`, mutably.
fn pair_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b, "two distinct elements");
    match a < b {
        true => {
            let (l, r) = v.split_at_mut(b);
            (&mut l[a], &mut r[0])
        }
        false => {
            let (l, r) = v.split_at_mut(a);
            (&mut r[0], &mut l[b])
        }
    }
}

/// Keeps the `starts` (increasing) whose position `start + rel` holds the
/// term of `cursor` in its current document, matching its positions as
/// they are decoded (none past the last start's).
fn keep_continued(cursor: &mut TermCursor<'_>, starts: &mut Vec<u32>, rel: u32) {
    let mut c = Continued::new(starts, rel);
    cursor.positions_while(|q| c.offer(q));
    c.finish();
}

/// Candidate phrase starts filtered by a term's positions, offered in
/// increasing order: a start stays when the term is at `start + rel`.
struct Continued<'s> {
    starts: &'s mut Vec<u32>,
    rel: u32,
    /// The first start not yet passed, and how many are kept.
    at: usize,
    kept: usize,
}

impl<'s> Continued<'s> {
    fn new(starts: &'s mut Vec<u32>, rel: u32) -> Self {
        Continued {
            starts,
            rel,
            at: 0,
            kept: 0,
        }
    }

    /// Takes the next position; false once no later one can keep a start.
    #[inline]
    fn offer(&mut self, q: u32) -> bool {
        let Some(s) = q.checked_sub(self.rel) else {
            return true;
        };
        while self.at < self.starts.len() && self.starts[self.at] < s {
            self.at += 1;
        }
        if self.at == self.starts.len() {
            return false;
        }
        if self.starts[self.at] == s {
            self.starts[self.kept] = s;
            self.kept += 1;
            self.at += 1;
        }
        true
    }

    /// Drops the starts not kept.
    fn finish(self) {
        self.starts.truncate(self.kept);
    }
}

impl Scorer for PhraseScorer<'_> {
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
        self.terms[self.order[0]].doc_freq() as u64
    }
    fn score(&mut self) -> f32 {
        let norm = self.norms.get(self.doc as usize).copied().unwrap_or(0);
        self.bm25.score(self.freq, norm)
    }
    fn max_score(&self) -> f32 {
        self.max_score
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        let mut end = TERMINATED;
        for t in &mut self.terms {
            let e = t.shallow_advance(target);
            if e == TERMINATED {
                return TERMINATED;
            }
            end = end.min(e);
        }
        end
    }
    fn block_max_score(&mut self) -> f32 {
        // The phrase frequency is at most each term's frequency.
        let mut bound = f32::INFINITY;
        for t in &mut self.terms {
            match t.block_impacts() {
                Some(i) => bound = bound.min(self.bm25.bound(&i)),
                None => return 0.0,
            }
        }
        bound
    }
    fn two_phase(&self) -> bool {
        true
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        if target < self.doc {
            return false;
        }
        if target == self.doc {
            return self.freq > 0;
        }
        // Positioned on `target` whether it matches or not; the next
        // advance continues after it.
        self.doc = target;
        self.freq = 0;
        if self.terms[self.order[0]].seek(target) != target || !self.filters_pass(true) {
            return false;
        }
        for t in &mut self.terms {
            if t.seek(target) != target {
                return false;
            }
        }
        if !self.filters_pass(false) {
            return false;
        }
        self.freq = self.phrase_freq();
        self.freq > 0
    }
    fn set_count_only(&mut self) {
        self.count_only = true;
    }
    fn take_error(&mut self) -> Option<Error> {
        let mut first = self.error.take();
        for t in &mut self.terms {
            if let Some(e) = t.take_error() {
                first.get_or_insert(e);
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::Continued;

    /// [`super::keep_continued`] over positions in a slice.
    fn keep_continued(starts: &mut Vec<u32>, positions: &[u32], rel: u32) {
        let mut c = Continued::new(starts, rel);
        for &q in positions {
            if !c.offer(q) {
                break;
            }
        }
        c.finish();
    }
    use proptest::prelude::*;

    proptest! {
        /// The merge keeps exactly the starts a membership test keeps.
        #[test]
        fn keeps_the_continued_starts(
            starts in proptest::collection::btree_set(0u32..400, 0..60),
            positions in proptest::collection::btree_set(0u32..400, 0..60),
            rel in 0u32..5,
        ) {
            let want: Vec<u32> = starts.iter().copied().filter(|s| positions.contains(&(s + rel))).collect();
            let mut got: Vec<u32> = starts.into_iter().collect();
            keep_continued(&mut got, &positions.into_iter().collect::<Vec<_>>(), rel);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn starts_near_the_top_of_the_range_do_not_overflow() {
        let mut starts = vec![u32::MAX - 3, u32::MAX - 1];
        keep_continued(&mut starts, &[u32::MAX - 1], 2);
        assert_eq!(starts, [u32::MAX - 3]);
    }
}
