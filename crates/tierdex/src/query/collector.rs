//! Top-k selection and the loops that drive a scorer tree: top-k with
//! block-max window skipping, top-k plus exact count, and count.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::query::scorer::Scorer;
use crate::schema::{DocId, TERMINATED};
use serde::{Deserialize, Serialize};

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Document number in the whole index (segment base + local number).
    pub doc: DocId,
    /// BM25 score.
    pub score: f32,
}

/// Relative slack subtracted from thresholds before pruning, covering float
/// rounding differences between bounds and scores summed in another order.
const SLACK: f32 = 1e-5;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    score: f32,
    doc: DocId,
}

impl Eq for Entry {}

impl Ord for Entry {
    /// Greater is better: higher score, then lower document number.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.doc.cmp(&self.doc))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The k best (score, doc) pairs seen so far; ties go to the lower doc.
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Entry>>,
    /// The worst held score once k hits are held (`None` before): what a
    /// new hit must reach, checked before the heap is touched.
    threshold: Option<f32>,
}

impl TopK {
    /// An empty selection of at most `k` hits.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1),
            threshold: None,
        }
    }

    /// Offers a hit; returns true when the threshold changed.
    #[inline]
    pub fn insert(&mut self, doc: DocId, score: f32) -> bool {
        if self.k == 0 || self.threshold.is_some_and(|t| score < t) {
            return false;
        }
        self.offer(Entry { score, doc })
    }

    fn offer(&mut self, e: Entry) -> bool {
        if self.heap.len() < self.k {
            self.heap.push(Reverse(e));
            if self.heap.len() < self.k {
                return false;
            }
        } else {
            let mut worst = self.heap.peek_mut().expect("full heap");
            if e <= worst.0 {
                return false;
            }
            *worst = Reverse(e);
        }
        self.threshold = self.heap.peek().map(|w| w.0.score);
        true
    }

    /// Score a new hit must beat, once k hits are held.
    #[inline]
    pub fn threshold(&self) -> Option<f32> {
        self.threshold
    }

    /// The threshold lowered by the rounding slack (what scorers may prune
    /// strictly below).
    #[inline]
    pub(crate) fn prune_below(&self) -> Option<f32> {
        self.threshold().map(|t| t - t.abs() * SLACK)
    }

    /// The hits, best first.
    pub fn into_hits(self) -> Vec<Hit> {
        let mut v: Vec<Entry> = self.heap.into_iter().map(|r| r.0).collect();
        v.sort_by(|a, b| b.cmp(a));
        v.into_iter()
            .map(|e| Hit {
                doc: e.doc,
                score: e.score,
            })
            .collect()
    }
}

/// The deadline of the stages before the document loops (planning, opening
/// cursors, bitset counting), which read the clock at every check; with
/// when the query started, to report how long it ran.
#[derive(Debug, Clone, Copy)]
pub struct Cutoff {
    at: std::time::Instant,
    started: std::time::Instant,
}

impl Cutoff {
    /// Stops at `at` (none with `None`); the query started at `started`.
    pub fn new(at: Option<std::time::Instant>, started: std::time::Instant) -> Option<Cutoff> {
        at.map(|at| Cutoff { at, started })
    }

    /// [`Error::TimedOut`] once the deadline has passed.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if std::time::Instant::now() >= self.at {
            return Err(self.timed_out());
        }
        Ok(())
    }

    /// The error of a query stopped now.
    pub fn timed_out(&self) -> Error {
        Error::TimedOut(self.started.elapsed().as_millis() as u64)
    }
}

/// [`Cutoff::check`] of an optional cutoff.
#[inline]
pub fn check(cutoff: Option<&Cutoff>) -> Result<()> {
    cutoff.map_or(Ok(()), Cutoff::check)
}

/// A point in time after which evaluation stops. The clock is read once
/// every [`Deadline::STRIDE`] documents, so checking costs a decrement.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Option<std::time::Instant>,
    left: u32,
}

impl Deadline {
    /// Documents between two readings of the clock.
    pub const STRIDE: u32 = 1024;

    /// Stops at `at` (never with `None`).
    pub fn new(at: Option<std::time::Instant>) -> Deadline {
        Deadline { at, left: 1 }
    }

    /// Whether the deadline has passed; reads the clock now.
    pub fn passed(&self) -> bool {
        self.at.is_some_and(|at| std::time::Instant::now() >= at)
    }

    /// Counts one document; true once the deadline has passed.
    #[inline]
    pub fn tick(&mut self) -> bool {
        self.left -= 1;
        if self.left > 0 {
            return false;
        }
        self.left = Self::STRIDE;
        self.passed()
    }

    /// Counts `n` documents; true once the deadline has passed.
    #[inline]
    pub fn tick_by(&mut self, n: u32) -> bool {
        if self.left > n {
            self.left -= n;
            return false;
        }
        self.left = Self::STRIDE;
        self.passed()
    }
}

/// Collects the top hits of `s` (documents numbered from `base`), counting
/// every match into `count` when given. Without a count, windows whose
/// block-max bound cannot beat the threshold are skipped unread, and the
/// threshold is pushed down into the tree (MaxScore, block-max AND).
/// Documents in `deleted` are skipped. Returns false when `deadline`
/// stopped it before the end.
pub fn top_k<S: Scorer + ?Sized>(
    s: &mut S,
    base: DocId,
    top: &mut TopK,
    mut count: Option<&mut u64>,
    deleted: Option<&BitSet>,
    deadline: &mut Deadline,
) -> bool {
    let counting = count.is_some();
    let constant = s.constant_score();
    // Segments come in increasing document order: once the top-k is full
    // of scores no match here can beat, every match here loses the tie.
    let settled = |top: &TopK| constant.is_some_and(|c| top.threshold().is_some_and(|t| t >= c));
    if !counting && settled(top) {
        return true;
    }
    if let (false, Some(t)) = (counting, top.prune_below()) {
        s.set_min_competitive_score(t);
    }
    let mut window_end: DocId = 0;
    let mut window_bound = f32::INFINITY;
    let mut window_valid = false;
    let mut doc = s.doc();
    while doc != TERMINATED {
        if deadline.tick() {
            return false;
        }
        if deleted.is_some_and(|d| d.contains(doc)) {
            doc = s.advance();
            continue;
        }
        if let Some(t) = top.prune_below() {
            if !window_valid || doc > window_end {
                window_end = s.shallow_advance(doc);
                window_bound = s.block_max_score();
                window_valid = true;
            }
            if window_bound < t {
                if let Some(c) = count.as_deref_mut() {
                    *c += 1;
                    doc = s.advance();
                } else {
                    if window_end == TERMINATED {
                        break;
                    }
                    doc = s.seek(window_end + 1);
                }
                continue;
            }
        }
        if let Some(c) = count.as_deref_mut() {
            *c += 1;
        }
        let score = s.score();
        if top.insert(base + doc, score) && !counting {
            if settled(top) {
                break;
            }
            if let Some(t) = top.prune_below() {
                s.set_min_competitive_score(t);
            }
        }
        doc = s.advance();
    }
    true
}

/// Counts the matches of `s` not in `deleted`; `None` when `deadline`
/// stopped it.
pub fn count<S: Scorer + ?Sized>(s: &mut S, deleted: Option<&BitSet>, deadline: &mut Deadline) -> Option<u64> {
    let mut n = 0;
    let mut doc = s.doc();
    while doc != TERMINATED {
        if deadline.tick() {
            return None;
        }
        n += u64::from(!deleted.is_some_and(|d| d.contains(doc)));
        doc = s.advance();
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_with_ties_to_lower_docs() {
        let mut t = TopK::new(2);
        assert!(!t.insert(5, 1.0));
        assert!(t.insert(6, 1.0));
        assert_eq!(t.threshold(), Some(1.0));
        assert!(!t.insert(7, 1.0));
        assert!(t.insert(8, 2.0));
        let hits = t.into_hits();
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), vec![8, 5]);
        let mut z = TopK::new(0);
        assert!(!z.insert(1, 3.0));
        assert!(z.into_hits().is_empty());
    }

    #[test]
    fn top_k_is_the_k_best_of_a_sort_with_many_ties() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(9);
        for case in 0..300 {
            let k = rng.random_range(0..12);
            let n = rng.random_range(0..200);
            // Few distinct scores (ties everywhere), documents in any order
            // or ascending as the loops give them.
            let mut offered: Vec<(DocId, f32)> = (0..n)
                .map(|d| (d as DocId, f32::from(rng.random_range(0u8..4)) * 0.5))
                .collect();
            if case % 2 == 0 {
                for i in (1..offered.len()).rev() {
                    offered.swap(i, rng.random_range(0..=i));
                }
            }
            let mut t = TopK::new(k);
            for &(d, s) in &offered {
                t.insert(d, s);
            }
            let mut want = offered.clone();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(k);
            let got: Vec<(DocId, f32)> = t.into_hits().into_iter().map(|h| (h.doc, h.score)).collect();
            assert_eq!(got, want, "case {case}, k {k}");
        }
    }

    #[test]
    fn deadlines_read_the_clock_every_stride() {
        let mut none = Deadline::new(None);
        assert!((0..5 * Deadline::STRIDE).all(|_| !none.tick()));
        let mut past = Deadline::new(Some(std::time::Instant::now()));
        assert!(past.passed());
        // The first tick reads the clock, then once per stride.
        assert!(past.tick());
        assert!((1..Deadline::STRIDE).all(|_| !past.tick()));
        assert!(past.tick());
        let far = Deadline::new(Some(std::time::Instant::now() + std::time::Duration::from_secs(3600)));
        assert!(!far.passed());
    }
}
