//! Window-at-a-time (bulk) top-k over a disjunction of terms, the shape of
//! Lucene's MaxScore bulk scorer. The documents are taken a window at a
//! time (at most [`WINDOW`] documents, and within one block of every
//! clause): each clause whose block maximum can matter (an *essential*
//! one) scores its postings of the window in a tight loop, a decoded block
//! at a time, into a per-clause buffer; then the window's matches are
//! visited in document order, the other clauses (*non-essential*: their
//! summed maxima cannot reach the threshold) are probed only for those that
//! can still make it, and the survivors go to the top-k. A window that no
//! match can make competitive is skipped unread; a window with a single
//! essential clause (a single term, or a rare clause absent from the
//! window) tests its documents as they are decoded, without buffers.
//!
//! Filter clauses (scored 0) restrict the candidates: one held as a bit set
//! is ANDed into a window's matches 64 documents at a time (a sparse one is
//! tested at each posting before it is scored), another confirms each
//! candidate that can still be competitive before the non-essential
//! clauses are probed.
//!
//! Scores are summed in clause order, exactly as [`super::boolean::Disjunction`]
//! sums them (a filter adds 0), so both paths return the same hits with the
//! same scores.

use crate::common::BitSet;
use crate::query::collector::{Deadline, TopK};
use crate::query::scorer::Scorer;
use crate::query::term::TermScorer;
use crate::query::weight::BoxedScorer;
use crate::schema::{DocId, TERMINATED};

/// Most documents in one window.
pub const WINDOW: u32 = 2048;
/// Most clauses the bulk path takes (a window's matches keep a bit mask of
/// the clauses they matched).
pub const MAX_CLAUSES: usize = 32;

/// Whether postings of `cost` documents in all, in a segment of `max_doc`,
/// are dense enough for windows to pay: about 16 matches per window or
/// more. Sparser ones would pay a window's set-up for every few documents
/// (measured on 1M generated documents against 32 per window: TOP_10
/// conjunctions 0.80x and words of about 10k documents 0.87x the time, no
/// category slower beyond the noise).
pub fn pays(cost: u64, max_doc: DocId) -> bool {
    cost * (WINDOW as u64 / 16) >= max_doc as u64
}

/// Whether postings of `cost` documents are dense enough for windows to pay
/// when a filter that confirms candidates one by one (from doc values)
/// would otherwise test every match: about 8 matches per window or more
/// (measured on 1M documents: a word of 7-12k matches with a 50% filter
/// 5-25x faster a window at a time, two words of 240 matches 1.3x slower).
pub fn pays_checked(cost: u64, max_doc: DocId) -> bool {
    cost * (WINDOW as u64 / 8) >= max_doc as u64
}

/// The buffers of one window, reused across windows, segments and queries
/// (one per thread); every mask and matched bit is clear between uses.
#[derive(Default)]
pub(crate) struct Window {
    /// Scores by clause then slot (`clause * WINDOW + doc - start`).
    pub(crate) scores: Vec<f32>,
    /// Per slot, the clauses that matched it.
    pub(crate) masks: Vec<u32>,
    /// Slots with a match.
    pub(crate) matched: Vec<u64>,
}

impl Window {
    /// Room for `clauses` clauses.
    fn reserve(&mut self, clauses: usize) {
        if self.scores.len() < clauses * WINDOW as usize {
            self.scores.resize(clauses * WINDOW as usize, 0.0);
        }
        self.masks.resize(WINDOW as usize, 0);
        self.matched.resize(WINDOW as usize / 64, 0);
    }

    /// Clears what a window stopped midway left set.
    fn clear(&mut self) {
        self.masks.fill(0);
        self.matched.fill(0);
    }
}

thread_local! {
    static WINDOWS: std::cell::RefCell<Window> = std::cell::RefCell::default();
}

/// Collects the top hits of the disjunction of `subs` (1 to
/// [`MAX_CLAUSES`] clauses, documents numbered from `base`) that every one
/// of `filters` matches into `top`; documents in `deleted` are skipped.
/// Returns false when `deadline` stopped it before the end. (Counts take
/// bit sets or the scorers.)
pub fn top_k_or<'s>(
    subs: &mut [TermScorer<'s>],
    filters: &mut [BoxedScorer<'s>],
    base: DocId,
    top: &mut TopK,
    deleted: Option<&BitSet>,
    deadline: &mut Deadline,
) -> bool {
    let n = subs.len();
    assert!((1..=MAX_CLAUSES).contains(&n), "bulk disjunction of {n} clauses");
    let mut filters = Filters::new(filters);
    with_window(n, |w| windows(subs, &mut filters, base, top, deleted, deadline, w))
}

/// Unscored clauses every match must also match: those holding their
/// matches as bit sets, tested a word at a time, and the others, which
/// confirm one candidate at a time.
pub(crate) struct Filters<'f, 's> {
    bits: Vec<&'f BitSet>,
    checks: Vec<&'f mut BoxedScorer<'s>>,
    /// Whether the bit sets are sparse enough (see [`SPARSE_BITS`]) to be
    /// tested posting by posting before scoring, rather than ANDed into a
    /// window's scored matches a word at a time.
    early: bool,
}

/// A bit-set filter holding fewer than one document in `SPARSE_BITS` is
/// tested at each posting before it is scored: most postings then skip
/// their norm lookup, and the test's branch is mostly predicted. Denser
/// ones are ANDed afterwards, branch-free (measured on 1M documents: a 1%
/// filter 1.3x and a 10% filter 1.2x faster tested first, a 50% filter
/// 1.3x slower).
const SPARSE_BITS: u64 = 4;

impl<'f, 's> Filters<'f, 's> {
    /// `filters`, split by how they test.
    pub(crate) fn new(filters: &'f mut [BoxedScorer<'s>]) -> Self {
        let (bits, checks): (Vec<_>, Vec<_>) = filters.iter_mut().partition(|f| f.doc_bits().is_some());
        let early = bits.iter().any(|f| {
            let universe = f.doc_bits().map_or(0, |b| b.words().len() as u64 * 64);
            f.cost().saturating_mul(SPARSE_BITS) < universe
        });
        let bits = bits
            .into_iter()
            .map(|f| {
                let f: &'f BoxedScorer<'s> = f;
                f.doc_bits().expect("partitioned on it")
            })
            .collect();
        Filters { bits, checks, early }
    }

    /// The documents `from..from + 64` every bit-set filter holds (bit `i`
    /// for `from + i`).
    #[inline]
    pub(crate) fn word(&self, from: DocId) -> u64 {
        self.bits.iter().fold(u64::MAX, |w, b| w & b.word_at(from))
    }

    /// Whether the bit-set filters hold `doc`.
    #[inline]
    pub(crate) fn holds(&self, doc: DocId) -> bool {
        holds_all(&self.bits, doc)
    }

    /// Whether a clause's postings are tested against [`Self::holds`] before
    /// they are scored (else [`Self::restrict`] drops a window's matches).
    #[inline]
    pub(crate) fn early(&self) -> bool {
        self.early
    }

    /// Whether the filters that confirm one document at a time match `doc`
    /// (documents in increasing order).
    #[inline]
    pub(crate) fn confirm(&mut self, doc: DocId) -> bool {
        confirm_all(&mut self.checks, doc)
    }

    /// Drops from the window at `start` the matched slots the bit-set
    /// filters do not hold (their masks cleared), `words` words of
    /// [`Window::matched`].
    #[inline]
    pub(crate) fn restrict(&self, start: DocId, words: usize, w: &mut Window) {
        if self.bits.is_empty() {
            return;
        }
        for word in 0..words {
            let m = w.matched[word];
            if m == 0 {
                continue;
            }
            let keep = self.word(start + (word * 64) as DocId);
            let mut drop = m & !keep;
            w.matched[word] = m & keep;
            while drop != 0 {
                w.masks[word * 64 + drop.trailing_zeros() as usize] = 0;
                drop &= drop - 1;
            }
        }
    }
}

/// Whether every one of `bits` holds `doc` ([`Filters::holds`], usable
/// while the checks are borrowed apart).
#[inline]
fn holds_all(bits: &[&BitSet], doc: DocId) -> bool {
    bits.iter().all(|b| b.contains(doc))
}

/// Whether every one of `checks` matches `doc` ([`Filters::confirm`]).
#[inline]
fn confirm_all(checks: &mut [&mut BoxedScorer<'_>], doc: DocId) -> bool {
    checks.iter_mut().all(|f| f.matches_at(doc))
}

/// Runs `f` with this thread's window buffers, room for `clauses` clauses;
/// `f` returns false when it stopped midway (what it left set is cleared).
pub(crate) fn with_window(clauses: usize, f: impl FnOnce(&mut Window) -> bool) -> bool {
    let mut w = WINDOWS.with(|w| w.take());
    w.reserve(clauses);
    let finished = f(&mut w);
    if !finished {
        w.clear();
    }
    WINDOWS.with(|cell| *cell.borrow_mut() = w);
    finished
}

/// The per-clause score bounds of window-at-a-time MaxScore, shared by the
/// bulk disjunction and [`crate::query::bulk_and`]: clauses whose summed
/// segment maxima stay below the threshold *trail* (no window needs them
/// essential, so they neither start nor bound windows and are only probed,
/// as Lucene's MaxScore bulk scorer does; a very common term beside a rarer
/// one would otherwise cut every window at its blocks); in each window the
/// clauses are ordered by their bound there, and the prefix whose summed
/// bounds stay below the threshold is non-essential.
pub(crate) struct Bounds {
    /// Each clause's maximum over the segment.
    pub(crate) maxima: Vec<f32>,
    /// Clauses by increasing segment maximum.
    by_max: Vec<usize>,
    /// Clauses that trail (once set, for the rest of the segment).
    pub(crate) trailing: Vec<bool>,
    /// Each clause's bound over the current window.
    pub(crate) win_max: Vec<f32>,
    /// Clauses by increasing window bound, and the prefix sums of those bounds.
    pub(crate) order: Vec<usize>,
    pub(crate) prefix: Vec<f32>,
}

impl Bounds {
    /// The bounds of `subs`, none trailing yet.
    pub(crate) fn new(subs: &[TermScorer<'_>]) -> Self {
        let n = subs.len();
        let maxima: Vec<f32> = subs.iter().map(|s| s.max_score()).collect();
        let mut by_max: Vec<usize> = (0..n).collect();
        by_max.sort_by(|&a, &b| maxima[a].total_cmp(&maxima[b]));
        Bounds {
            maxima,
            by_max,
            trailing: vec![false; n],
            win_max: vec![0.0; n],
            order: (0..n).collect(),
            prefix: vec![0.0; n + 1],
        }
    }

    /// Marks the clauses that trail under the threshold `min_comp`.
    pub(crate) fn mark_trailing(&mut self, min_comp: Option<f32>) {
        let Some(t) = min_comp else {
            return;
        };
        let mut sum = 0.0f32;
        for &i in &self.by_max {
            sum += self.maxima[i];
            if sum >= t {
                break;
            }
            self.trailing[i] = true;
        }
    }

    /// Bounds each clause over the window from `start` (ending with the
    /// first block of a clause that does not trail to end; with `capped`
    /// or without `pruning`, after [`WINDOW`] documents at most) and
    /// returns the window's end. With a threshold (`pruning`), a clause
    /// counts with its block maximum, a trailing one with its segment
    /// maximum; without, every one with its segment maximum. A clause with
    /// no document in the window adds nothing. Each bound also holds over
    /// any shorter window from `start`.
    pub(crate) fn window(&mut self, subs: &mut [TermScorer<'_>], start: DocId, pruning: bool, capped: bool) -> DocId {
        let mut end = match capped || !pruning {
            true => start.saturating_add(WINDOW - 1).min(TERMINATED - 1),
            false => TERMINATED - 1,
        };
        if pruning {
            for (i, s) in subs.iter_mut().enumerate() {
                if self.trailing[i] {
                    self.win_max[i] = self.maxima[i];
                    continue;
                }
                let e = s.shallow_advance(start);
                if e == TERMINATED {
                    self.win_max[i] = 0.0;
                } else {
                    self.win_max[i] = s.block_max_score();
                    end = end.min(e);
                }
            }
        } else {
            self.win_max.copy_from_slice(&self.maxima);
        }
        for (m, s) in self.win_max.iter_mut().zip(subs.iter()) {
            if s.doc() > end {
                *m = 0.0;
            }
        }
        end
    }

    /// Orders the clauses by their window bound and returns how many lead
    /// the order as non-essential under `min_comp` (none without one).
    pub(crate) fn partition(&mut self, min_comp: Option<f32>) -> usize {
        let win_max = &self.win_max;
        self.order.sort_by(|&a, &b| win_max[a].total_cmp(&win_max[b]));
        let mut ne = 0;
        for (j, &i) in self.order.iter().enumerate() {
            self.prefix[j + 1] = self.prefix[j] + win_max[i];
            if min_comp.is_some_and(|t| self.prefix[j + 1] < t) {
                ne = j + 1;
            }
        }
        ne
    }
}

fn windows(
    subs: &mut [TermScorer<'_>],
    filters: &mut Filters<'_, '_>,
    base: DocId,
    top: &mut TopK,
    deleted: Option<&BitSet>,
    deadline: &mut Deadline,
    w: &mut Window,
) -> bool {
    let n = subs.len();
    let mut bounds = Bounds::new(subs);
    loop {
        if deadline.tick() {
            return false;
        }
        let min_comp = top.prune_below();
        bounds.mark_trailing(min_comp);
        let trailing = &bounds.trailing;
        let start = (0..n).filter(|&i| !trailing[i]).map(|i| subs[i].doc()).min().unwrap_or(TERMINATED);
        if start == TERMINATED {
            return true;
        }
        // Uncapped: a window skipped whole or with one essential clause
        // needs no buffers, and spans the clauses' blocks (a sparse word's
        // block covers many times WINDOW documents, each window costing
        // its bounds and their ordering).
        let end = bounds.window(subs, start, min_comp.is_some(), false);
        let ne = bounds.partition(min_comp);
        let (order, prefix, trailing) = (&bounds.order, &bounds.prefix, &bounds.trailing);
        if ne == n {
            // Nothing in the window can make the top-k.
            pass_window(subs, order, trailing, end);
            continue;
        }
        // A trailing clause essential here (others' block maxima are
        // lower) starts at the window.
        for &i in &order[ne..] {
            if subs[i].doc() < start {
                subs[i].seek(start);
            }
        }
        if n - ne == 1 {
            let prefix = &prefix[..=ne];
            if !one_essential(subs, filters, base, top, deleted, deadline, end, order, prefix, trailing) {
                return false;
            }
            continue;
        }
        // Buffered: at most WINDOW documents (the bounds hold over them).
        let end = end.min(start.saturating_add(WINDOW - 1));
        let slots = (end - start + 1) as usize;
        let words = slots.div_ceil(64);
        for &i in &order[ne..] {
            let scores = &mut w.scores[i * WINDOW as usize..(i + 1) * WINDOW as usize];
            let (masks, matched) = (&mut w.masks, &mut w.matched);
            let bit = 1u32 << i;
            let add = |doc: DocId, score: f32| {
                let slot = (doc - start) as usize;
                scores[slot] = score;
                masks[slot] |= bit;
                matched[slot >> 6] |= 1 << (slot & 63);
            };
            match filters.early() {
                true => subs[i].for_each_scored_upto_if(end, |d| filters.holds(d), add),
                false => subs[i].for_each_scored_upto(end, add),
            }
        }
        if !filters.early() {
            filters.restrict(start, words, w);
        }
        let mut min_comp = min_comp;
        for word in 0..words {
            let mut bits = std::mem::take(&mut w.matched[word]);
            while bits != 0 {
                let slot = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if deadline.tick() {
                    return false;
                }
                let doc = start + slot as DocId;
                if deleted.is_some_and(|d| d.contains(doc)) {
                    w.masks[slot] = 0;
                    continue;
                }
                let mut mask = w.masks[slot];
                w.masks[slot] = 0;
                if let Some(t) = min_comp {
                    let mut partial = clause_sum(mask, |i| w.scores[i * WINDOW as usize + slot]);
                    if partial + prefix[ne] < t || !filters.confirm(doc) {
                        continue;
                    }
                    // The non-essential clauses, best first, while the
                    // document can still make it.
                    let mut competitive = true;
                    for j in (0..ne).rev() {
                        if partial + prefix[j + 1] < t {
                            competitive = false;
                            break;
                        }
                        let i = order[j];
                        let s = &mut subs[i];
                        let d = if s.doc() < doc { s.seek(doc) } else { s.doc() };
                        if d == doc {
                            let score = s.score();
                            w.scores[i * WINDOW as usize + slot] = score;
                            mask |= 1 << i;
                            partial += score;
                        }
                    }
                    if !competitive {
                        continue;
                    }
                } else if !filters.confirm(doc) {
                    continue;
                }
                // The score in clause order, as the disjunction sums it.
                let exact = clause_sum(mask, |i| w.scores[i * WINDOW as usize + slot]);
                if min_comp.is_some_and(|t| exact < t) {
                    continue;
                }
                if top.insert(base + doc, exact) {
                    min_comp = top.prune_below();
                }
            }
        }
        // The non-essential clauses move past the window too.
        pass_window(subs, &order[..ne], trailing, end);
    }
}

/// A window with one essential clause, `order[prefix.len() - 1]`: its
/// documents are scored and tested one by one as they are decoded (no
/// buffers); the non-essential clauses `order[..prefix.len() - 1]`, whose
/// summed maxima are `prefix`, are probed while a document can still make
/// it, then moved past the window (but for the `trailing` ones). False
/// when `deadline` stopped it.
#[allow(clippy::too_many_arguments)]
fn one_essential(
    subs: &mut [TermScorer<'_>],
    filters: &mut Filters<'_, '_>,
    base: DocId,
    top: &mut TopK,
    deleted: Option<&BitSet>,
    deadline: &mut Deadline,
    end: DocId,
    order: &[usize],
    prefix: &[f32],
    trailing: &[bool],
) -> bool {
    let ne = prefix.len() - 1;
    let e = order[ne];
    let (head, tail) = subs.split_at_mut(e);
    let (essential, tail) = tail.split_first_mut().expect("the essential clause");
    let mut min_comp = top.prune_below();
    let mut stopped = false;
    let mut scores = [0.0f32; MAX_CLAUSES];
    let Filters { bits, checks, early } = filters;
    let holds = |d: DocId| holds_all(bits, d);
    let early = *early;
    let visit = |doc: DocId, score: f32| {
        if stopped {
            return;
        }
        if deadline.tick() {
            stopped = true;
            return;
        }
        if min_comp.is_some_and(|t| score + prefix[ne] < t)
            || deleted.is_some_and(|d| d.contains(doc))
            || (!early && !holds(doc))
            || !confirm_all(checks, doc)
        {
            return;
        }
        scores[e] = score;
        let mut mask = 1u32 << e;
        if let Some(t) = min_comp {
            let mut partial = score;
            for j in (0..ne).rev() {
                if partial + prefix[j + 1] < t {
                    return;
                }
                let i = order[j];
                let s = match i < e {
                    true => &mut head[i],
                    false => &mut tail[i - e - 1],
                };
                let d = if s.doc() < doc { s.seek(doc) } else { s.doc() };
                if d == doc {
                    let x = s.score();
                    scores[i] = x;
                    mask |= 1 << i;
                    partial += x;
                }
            }
        }
        // The score in clause order, as the disjunction sums it.
        let exact = clause_sum(mask, |i| scores[i]);
        if min_comp.is_some_and(|t| exact < t) {
            return;
        }
        if top.insert(base + doc, exact) {
            min_comp = top.prune_below();
        }
    };
    // A sparse filter is tested before a posting is scored; otherwise a
    // block's postings are scored together.
    match early {
        true => essential.for_each_scored_upto_if(end, holds, visit),
        false => essential.for_each_scored_upto(end, visit),
    }
    if stopped {
        return false;
    }
    pass_window(subs, &order[..ne], trailing, end);
    true
}

/// The sum, in clause order from 0, of `score(i)` over the clauses `i` set
/// in `mask` (the order the disjunction sums in).
#[inline]
fn clause_sum(mut mask: u32, score: impl Fn(usize) -> f32) -> f32 {
    let mut sum = 0.0f32;
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        sum += score(i);
    }
    sum
}

/// Moves the clauses `clauses` of `subs` still in the window past `end`,
/// but for the trailing ones (probed by seeking when needed).
fn pass_window(subs: &mut [TermScorer<'_>], clauses: &[usize], trailing: &[bool], end: DocId) {
    for &i in clauses {
        if !trailing[i] && subs[i].doc() <= end {
            subs[i].seek(end + 1);
        }
    }
}
