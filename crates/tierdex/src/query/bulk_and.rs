//! Window-at-a-time (bulk) top-k over a conjunction of term disjunctions:
//! `+a +b` over several fields, where every required word is a group of
//! per-field terms (`(title:a | body:a) (title:b | body:b)`).
//!
//! The nested scorers (a block-max conjunction of MaxScore disjunctions)
//! can prune with each group's summed bound only: a group matching in a
//! short title bounds every block of its body postings too, so for two
//! common words every match is scored. Here the bound works on the terms
//! themselves. In each window, the terms whose block maxima sum below the
//! threshold are non-essential: a competitive match needs one of the
//! others. The window's candidates come from the cheaper of two *lead*
//! sets, the essential terms or the terms of the cheapest group (every
//! match has one of them), decoded a block at a time into per-term
//! buffers; each candidate must then find a match in every group, probing
//! the other terms by seeking, and is dropped as soon as its best possible
//! score falls below the threshold. A window no candidate can make
//! competitive is skipped unread; terms whose segment maxima together stay
//! below the threshold (*trailing*) neither start nor bound windows.
//!
//! Filter clauses (scored 0) restrict the candidates: one held as a bit set
//! drops a window's candidates 64 at a time (a sparse one drops the lead's
//! postings before they are scored), another confirms each
//! candidate that can still be competitive before its groups are probed;
//! the planner sends a filter much sparser than the words to the nested
//! scorers instead, where it leads.
//!
//! Scores are summed as the nested scorers sum them (each group's matching
//! terms in clause order, then the groups in order; a filter adds 0), so
//! both paths return the same hits with the same scores.

use crate::common::BitSet;
use crate::query::bulk::{self, Filters, WINDOW};
use crate::query::collector::{Deadline, TopK};
use crate::query::scorer::Scorer;
use crate::query::term::TermScorer;
use crate::query::weight::BoxedScorer;
use crate::schema::{DocId, TERMINATED};

/// Most terms over all groups (a candidate keeps a bit mask of them).
pub const MAX_TERMS: usize = 32;

/// Whether the bulk conjunction is expected to beat the nested scorers for
/// groups whose costs (summed document frequencies) are `costs`, in a
/// segment of `max_doc` documents: when even the cheapest group is dense
/// enough for windows to pay ([`bulk::pays`]). A sparse group leads the
/// nested conjunction straight to its few documents.
pub fn pays(costs: impl IntoIterator<Item = u64>, max_doc: DocId) -> bool {
    costs.into_iter().min().is_some_and(|c| bulk::pays(c, max_doc))
}

/// Collects into `top` the best matches of the conjunction of the groups
/// of `terms` (`group[i]` is term `i`'s group; terms come group by group,
/// groups numbered from 0 in order, at least one term each; at most
/// [`MAX_TERMS`] terms), documents numbered from `base`, that every one
/// of `filters` matches; documents in `deleted` are skipped. Returns false
/// when `deadline` stopped it.
#[allow(clippy::too_many_arguments)]
pub fn top_k_and<'s>(
    terms: &mut [TermScorer<'s>],
    group: &[usize],
    filters: &mut [BoxedScorer<'s>],
    base: DocId,
    top: &mut TopK,
    deleted: Option<&BitSet>,
    deadline: &mut Deadline,
) -> bool {
    let n = terms.len();
    assert!((1..=MAX_TERMS).contains(&n) && group.len() == n, "bulk conjunction of {n} terms");
    let filters = Filters::new(filters);
    bulk::with_window(n, |w| Conjunction::new(terms, group, filters).run(base, top, deleted, deadline, w))
}

/// The state of one segment's bulk conjunction.
struct Conjunction<'t, 's> {
    terms: &'t mut [TermScorer<'s>],
    group: &'t [usize],
    /// Unscored clauses every match must also match.
    filters: Filters<'t, 's>,
    groups: usize,
    /// Each group's terms as a bit mask.
    group_mask: Vec<u32>,
    costs: Vec<u64>,
    /// The terms' bounds: which trail, and those of the current window.
    bounds: bulk::Bounds,
    /// Scratch for the ordered sum of a candidate's scores per group.
    group_sums: Vec<f32>,
}

impl<'t, 's> Conjunction<'t, 's> {
    fn new(terms: &'t mut [TermScorer<'s>], group: &'t [usize], filters: Filters<'t, 's>) -> Self {
        let groups = group.last().map_or(0, |&g| g + 1);
        let mut group_mask = vec![0u32; groups];
        for (i, &g) in group.iter().enumerate() {
            group_mask[g] |= 1 << i;
        }
        let costs: Vec<u64> = terms.iter().map(|s| s.cost()).collect();
        let bounds = bulk::Bounds::new(terms);
        Conjunction {
            terms,
            group,
            filters,
            groups,
            group_mask,
            costs,
            bounds,
            group_sums: vec![0.0; groups],
        }
    }

    /// The summed costs (document frequencies) of the terms in `mask`.
    fn mask_cost(&self, mask: u32) -> u64 {
        (0..self.terms.len()).filter(|&i| mask & (1 << i) != 0).map(|i| self.costs[i]).sum()
    }

    /// The score of a candidate whose matching terms are `mask`, summed as
    /// the nested scorers sum it.
    #[inline]
    fn exact(&mut self, mask: u32, score: impl Fn(usize) -> f32) -> f32 {
        self.group_sums.fill(0.0);
        let mut m = mask;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.group_sums[self.group[i]] += score(i);
        }
        let mut sum = 0.0f32;
        for &g in &self.group_sums {
            sum += g;
        }
        sum
    }

    /// The first document at or after `target` that may be a competitive
    /// match: no group has a match before its terms' next documents, nor
    /// the terms that do not trail (a trailing term left behind counts as
    /// `target`).
    fn lower_bound(&mut self, target: DocId) -> DocId {
        // A competitive match has a term that does not trail (brought up
        // to `target` when only probed so far).
        let mut start = TERMINATED;
        for (s, &trailing) in self.terms.iter_mut().zip(&self.bounds.trailing) {
            if !trailing {
                start = start.min(if s.doc() < target { s.seek(target) } else { s.doc() });
            }
        }
        for g in 0..self.groups {
            let mut m = self.group_mask[g];
            let mut first = TERMINATED;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                first = first.min(self.terms[i].doc().max(target));
            }
            start = start.max(first);
        }
        start
    }

    fn run(
        &mut self,
        base: DocId,
        top: &mut TopK,
        deleted: Option<&BitSet>,
        deadline: &mut Deadline,
        w: &mut bulk::Window,
    ) -> bool {
        let n = self.terms.len();
        let mut target: DocId = 0;
        let group_costs: Vec<u64> = self.group_mask.iter().map(|&m| self.mask_cost(m)).collect();
        let cheapest = (0..self.groups).min_by_key(|&g| group_costs[g]).expect("a group");
        loop {
            if deadline.tick() {
                return false;
            }
            let min_comp = top.prune_below();
            self.bounds.mark_trailing(min_comp);
            let start = self.lower_bound(target);
            if start == TERMINATED {
                return true;
            }
            let end = self.bounds.window(self.terms, start, min_comp.is_some(), true);
            let ne = self.bounds.partition(min_comp);
            if ne == n {
                target = end.saturating_add(1);
                continue;
            }
            // The lead: the essential terms, or the cheapest group's terms
            // when they are fewer documents.
            let essential: u32 = self.bounds.order[ne..].iter().fold(0, |m, &i| m | 1 << i);
            let lead = match self.mask_cost(essential) <= group_costs[cheapest] {
                true => essential,
                false => self.group_mask[cheapest],
            };
            if !self.window(lead, start, end, base, top, deleted, deadline, w) {
                return false;
            }
            target = end.saturating_add(1);
        }
    }

    /// Scores the window `start..=end`: the `lead` terms' documents are
    /// the candidates; the others are probed. False when `deadline`
    /// stopped it.
    #[allow(clippy::too_many_arguments)]
    fn window(
        &mut self,
        lead: u32,
        start: DocId,
        end: DocId,
        base: DocId,
        top: &mut TopK,
        deleted: Option<&BitSet>,
        deadline: &mut Deadline,
        w: &mut bulk::Window,
    ) -> bool {
        let mut m = lead;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let s = &mut self.terms[i];
            if s.doc() < start {
                s.seek(start);
            }
            let scores = &mut w.scores[i * WINDOW as usize..(i + 1) * WINDOW as usize];
            let (masks, matched) = (&mut w.masks, &mut w.matched);
            let bit = 1u32 << i;
            let add = |doc: DocId, score: f32| {
                let slot = (doc - start) as usize;
                scores[slot] = score;
                masks[slot] |= bit;
                matched[slot >> 6] |= 1 << (slot & 63);
            };
            let filters = &self.filters;
            match filters.early() {
                true => s.for_each_scored_upto_if(end, |d| filters.holds(d), add),
                false => s.for_each_scored_upto(end, add),
            }
        }
        // The other terms, best bound first (probed in that order).
        let win_max = &self.bounds.win_max;
        let others: Vec<usize> = self.bounds.order.iter().rev().copied().filter(|&i| lead & (1 << i) == 0).collect();
        let others_bound: f32 = others.iter().map(|&i| win_max[i]).sum();
        let mut min_comp = top.prune_below();
        let words = ((end - start + 1) as usize).div_ceil(64);
        if !self.filters.early() {
            self.filters.restrict(start, words, w);
        }
        for word in 0..words {
            let mut bits = std::mem::take(&mut w.matched[word]);
            while bits != 0 {
                let slot = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if deadline.tick() {
                    return false;
                }
                let mut mask = std::mem::take(&mut w.masks[slot]);
                let doc = start + slot as DocId;
                if deleted.is_some_and(|d| d.contains(doc)) {
                    continue;
                }
                let score_of = |i: usize, w: &bulk::Window| w.scores[i * WINDOW as usize + slot];
                let mut partial = 0.0f32;
                let mut k = mask;
                while k != 0 {
                    let i = k.trailing_zeros() as usize;
                    k &= k - 1;
                    partial += score_of(i, w);
                }
                let mut left = others_bound;
                if min_comp.is_some_and(|t| partial + left < t) {
                    continue;
                }
                if !self.filters.confirm(doc) {
                    continue;
                }
                // Every group needs a match: first the groups without one
                // among the lead's terms are probed, then the other terms
                // for their scores, while the candidate can still make it.
                let mut probed = 0u32;
                let mut ok = true;
                for g in 0..self.groups {
                    if mask & self.group_mask[g] != 0 {
                        continue;
                    }
                    for &i in others.iter().filter(|&&i| self.group[i] == g) {
                        probed |= 1 << i;
                        left -= self.bounds.win_max[i];
                        if let Some(x) = probe(&mut self.terms[i], doc) {
                            w.scores[i * WINDOW as usize + slot] = x;
                            mask |= 1 << i;
                            partial += x;
                        }
                    }
                    if mask & self.group_mask[g] == 0 || min_comp.is_some_and(|t| partial + left < t) {
                        ok = false;
                        break;
                    }
                }
                if !ok {
                    continue;
                }
                for &i in &others {
                    if probed & (1 << i) != 0 {
                        continue;
                    }
                    if min_comp.is_some_and(|t| partial + left < t) {
                        ok = false;
                        break;
                    }
                    left -= self.bounds.win_max[i];
                    if let Some(x) = probe(&mut self.terms[i], doc) {
                        w.scores[i * WINDOW as usize + slot] = x;
                        mask |= 1 << i;
                        partial += x;
                    }
                }
                if !ok {
                    continue;
                }
                let exact = self.exact(mask, |i| w.scores[i * WINDOW as usize + slot]);
                if min_comp.is_some_and(|t| exact < t) {
                    continue;
                }
                if top.insert(base + doc, exact) {
                    min_comp = top.prune_below();
                }
            }
        }
        true
    }
}

/// `s`'s score at `doc` when it matches there (moving it to `doc` or past).
#[inline]
fn probe(s: &mut TermScorer<'_>, doc: DocId) -> Option<f32> {
    let d = if s.doc() < doc { s.seek(doc) } else { s.doc() };
    (d == doc).then(|| s.score())
}
