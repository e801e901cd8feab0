//! Exact phrase matching on positions, with phrase Bloom filters tested
//! first where the planner found them worth it (DESIGN §4).

use crate::bloom::{Direction, Probe};
use crate::error::Error;
use crate::layout::TermCursor;
use crate::query::bm25::Bm25;
use crate::query::scorer::Scorer;
use crate::schema::{DocId, TERMINATED};

/// Documents where the terms occur at their relative positions; scored by
/// BM25 with the phrase frequency and the summed IDF.
pub struct PhraseScorer<'a> {
    terms: Vec<TermCursor<'a>>,
    /// Position of each term relative to the phrase start.
    rel: Vec<u32>,
    /// Terms by increasing document frequency (conjunction order).
    order: Vec<usize>,
    bm25: Bm25<'a>,
    norms: &'a [u8],
    doc: DocId,
    freq: u32,
    positions: Vec<Vec<u32>>,
    ptrs: Vec<usize>,
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
        let max_score = terms
            .iter()
            .map(|t| bm25.bound(t.term_impacts()))
            .fold(f32::INFINITY, f32::min);
        let n = terms.len();
        let mut p = PhraseScorer {
            terms,
            rel,
            order,
            bm25,
            norms,
            doc: 0,
            freq: 0,
            positions: vec![Vec::new(); n],
            ptrs: vec![0; n],
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
            let d = self.terms[lead].seek(target);
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

    /// Counts the start positions where every term is at its offset.
    fn phrase_freq(&mut self) -> u32 {
        for (t, buf) in self.terms.iter_mut().zip(self.positions.iter_mut()) {
            t.positions(buf);
        }
        let lead = (0..self.terms.len())
            .min_by_key(|&i| self.positions[i].len())
            .unwrap_or(0);
        self.ptrs.iter_mut().for_each(|p| *p = 0);
        let mut count = 0;
        'starts: for &p in &self.positions[lead] {
            let Some(x) = p.checked_sub(self.rel[lead]) else {
                continue;
            };
            for j in 0..self.terms.len() {
                if j == lead {
                    continue;
                }
                let want = x + self.rel[j];
                let list = &self.positions[j];
                let ptr = &mut self.ptrs[j];
                while *ptr < list.len() && list[*ptr] < want {
                    *ptr += 1;
                }
                if *ptr == list.len() {
                    break 'starts;
                }
                if list[*ptr] != want {
                    continue 'starts;
                }
            }
            count += 1;
            if self.count_only {
                break;
            }
        }
        count
    }
}

impl Scorer for PhraseScorer<'_> {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        self.find(self.doc + 1)
    }
    fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.doc {
            return self.doc;
        }
        self.find(target)
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
