//! The cursor contract every query node implements, and the term scorer.
//!
//! A [`Scorer`] iterates matching documents in increasing order (`doc`,
//! `advance`, `seek`, with [`TERMINATED`] at the end), scores the current
//! one, and offers block-max bounds: [`Scorer::shallow_advance`] picks a
//! window of documents starting at a target, [`Scorer::block_max_score`]
//! bounds every score in it. [`Scorer::set_min_competitive_score`] lets a
//! node skip documents that cannot beat the top-k threshold. Algorithms are
//! written once, generic over this trait; leaf types are concrete so the
//! hot loops are monomorphised.
//!
//! Thresholds given to `set_min_competitive_score` are already lowered by
//! the collector to absorb float rounding, so a node may drop a document
//! whenever its bound is strictly below the value.

use crate::common::BitSet;
use crate::error::Error;
use crate::schema::{DocId, TERMINATED};

/// A query node over one segment.
pub trait Scorer {
    /// Current document, or [`TERMINATED`].
    fn doc(&self) -> DocId;
    /// Moves to the next match.
    fn advance(&mut self) -> DocId;
    /// Moves to the first match `>= target` (no-op if already there).
    fn seek(&mut self, target: DocId) -> DocId;
    /// Estimated number of matches (for ordering conjunctions).
    fn cost(&self) -> u64;
    /// Score of the current document.
    fn score(&mut self) -> f32;
    /// Upper bound of every score.
    fn max_score(&self) -> f32;
    /// Selects a window `[target, returned]` of documents for which
    /// [`Scorer::block_max_score`] gives a bound; returns [`TERMINATED`] if
    /// no match `>= target` can exist. `target` must be `>= doc()`.
    fn shallow_advance(&mut self, target: DocId) -> DocId;
    /// Bound of the scores in the window chosen by the last `shallow_advance`.
    fn block_max_score(&mut self) -> f32;
    /// From now on, documents scoring below `min` may be skipped.
    fn set_min_competitive_score(&mut self, _min: f32) {}
    /// True for nodes whose matching is expensive to confirm (phrases):
    /// combinators should find candidates with the other clauses first and
    /// confirm them with [`Scorer::matches_at`] (two-phase iteration).
    fn two_phase(&self) -> bool {
        false
    }
    /// True for nodes that confirm any document in constant time (a bit
    /// set): a conjunction led by another clause tests them with
    /// [`Scorer::matches_at`] instead of leapfrogging through them.
    fn random_access(&self) -> bool {
        false
    }
    /// The score of every match, when all score exactly the same (filters,
    /// `constant_score`, `match_all`): a top-k full of such scores is final,
    /// as later documents lose the ties.
    fn constant_score(&self) -> Option<f32> {
        None
    }
    /// Whether `target` (`>=` every earlier target) matches; afterwards
    /// `score` is valid if it does. Unlike `seek`, never does work beyond
    /// `target`.
    fn matches_at(&mut self, target: DocId) -> bool {
        self.seek(target) == target
    }
    /// The node's matches as a bit set over the segment, when it holds
    /// them so (a dense filter): a window-at-a-time scorer then drops its
    /// candidates outside them 64 at a time.
    fn doc_bits(&self) -> Option<&BitSet> {
        None
    }
    /// Scores will not be asked for (counting): nodes may stop early.
    fn set_count_only(&mut self) {}
    /// The error that ended iteration early, if any.
    fn take_error(&mut self) -> Option<Error>;
}

impl<S: Scorer + ?Sized> Scorer for Box<S> {
    #[inline]
    fn doc(&self) -> DocId {
        (**self).doc()
    }
    #[inline]
    fn advance(&mut self) -> DocId {
        (**self).advance()
    }
    #[inline]
    fn seek(&mut self, target: DocId) -> DocId {
        (**self).seek(target)
    }
    fn cost(&self) -> u64 {
        (**self).cost()
    }
    #[inline]
    fn score(&mut self) -> f32 {
        (**self).score()
    }
    fn max_score(&self) -> f32 {
        (**self).max_score()
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        (**self).shallow_advance(target)
    }
    fn block_max_score(&mut self) -> f32 {
        (**self).block_max_score()
    }
    fn set_min_competitive_score(&mut self, min: f32) {
        (**self).set_min_competitive_score(min)
    }
    fn two_phase(&self) -> bool {
        (**self).two_phase()
    }
    fn random_access(&self) -> bool {
        (**self).random_access()
    }
    fn constant_score(&self) -> Option<f32> {
        (**self).constant_score()
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        (**self).matches_at(target)
    }
    fn doc_bits(&self) -> Option<&BitSet> {
        (**self).doc_bits()
    }
    fn set_count_only(&mut self) {
        (**self).set_count_only()
    }
    fn take_error(&mut self) -> Option<Error> {
        (**self).take_error()
    }
}

/// `advance` of a scorer positioned on `doc` that finds its first match
/// `>= target` with `find`: the match after `doc`.
#[inline]
pub(crate) fn advance_by(doc: DocId, find: impl FnOnce(DocId) -> DocId) -> DocId {
    if doc == TERMINATED {
        TERMINATED
    } else {
        find(doc + 1)
    }
}

/// `seek` of a scorer positioned on `doc` that finds its first match
/// `>= target` with `find` (no move when already there).
#[inline]
pub(crate) fn seek_by(doc: DocId, target: DocId, find: impl FnOnce(DocId) -> DocId) -> DocId {
    if target <= doc {
        doc
    } else {
        find(target)
    }
}

/// Sums `take_error` over children, keeping the first error.
pub(crate) fn first_error<S: Scorer>(subs: &mut [S]) -> Option<Error> {
    let mut first = None;
    for s in subs {
        if let Some(e) = s.take_error() {
            first.get_or_insert(e);
        }
    }
    first
}

/// A scorer that matches nothing.
pub struct EmptyScorer;

impl Scorer for EmptyScorer {
    fn doc(&self) -> DocId {
        TERMINATED
    }
    fn advance(&mut self) -> DocId {
        TERMINATED
    }
    fn seek(&mut self, _: DocId) -> DocId {
        TERMINATED
    }
    fn cost(&self) -> u64 {
        0
    }
    fn score(&mut self) -> f32 {
        0.0
    }
    fn max_score(&self) -> f32 {
        0.0
    }
    fn shallow_advance(&mut self, _: DocId) -> DocId {
        TERMINATED
    }
    fn block_max_score(&mut self) -> f32 {
        0.0
    }
    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

pub use crate::query::term::TermScorer;
