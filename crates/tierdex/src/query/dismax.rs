//! Disjunction by maximum (`dis_max`, and `multi_match`'s `best_fields`):
//! a document matches when any clause does, and scores its best clause's
//! score plus `tie_breaker` times the others'.

use std::any::Any;

use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::SegmentReader;
use crate::query::collector::Cutoff;
use crate::query::scorer::Scorer;
use crate::query::term::TermWeight;
use crate::query::weight::{BoxedScorer, Build, Plan, QueryKey, Weight};
use crate::schema::{DocId, TERMINATED};

/// The planned `dis_max` of `subs`.
#[derive(Debug)]
pub struct DisMaxWeight {
    subs: Vec<Plan>,
    tie: f32,
    key: QueryKey,
}

impl DisMaxWeight {
    /// The best of `subs`, plus `tie` (0 to 1) times the rest.
    pub fn new(subs: Vec<Plan>, tie: f32) -> DisMaxWeight {
        let mut keys: Vec<QueryKey> = subs.iter().map(|p| p.key().clone()).collect();
        keys.sort();
        DisMaxWeight {
            subs,
            tie,
            key: QueryKey::Other(format!("dis_max {}", tie.to_bits()), keys),
        }
    }
}

impl Weight for DisMaxWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn terms<'a>(&'a self, positive: bool, out: &mut Vec<&'a TermWeight>) {
        for p in &self.subs {
            p.terms(positive, out);
        }
    }
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        let mut subs = Vec::with_capacity(self.subs.len());
        for p in &self.subs {
            let mut bi = b;
            bi.lead_cost = None;
            subs.extend(p.scorer(bi)?);
        }
        Ok(match subs.len() {
            0 => None,
            1 => subs.pop(),
            _ => Some(Box::new(DisMax::new(subs, self.tie))),
        })
    }
    fn bitset_cost(&self) -> Option<f64> {
        let mut sum = 0.0;
        for p in &self.subs {
            sum += p.bitset_cost()?;
        }
        Some(sum)
    }
    fn iteration_cost(&self) -> f64 {
        2.0 * self.subs.iter().map(|p| p.iteration_cost()).sum::<f64>()
    }
    fn estimated_matches(&self, num_docs: f64) -> f64 {
        if num_docs <= 0.0 {
            return 0.0;
        }
        let none: f64 = self
            .subs
            .iter()
            .map(|p| 1.0 - (p.estimated_matches(num_docs) / num_docs).clamp(0.0, 1.0))
            .product();
        (1.0 - none) * num_docs
    }
    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut acc = BitSet::new(seg.max_doc());
        for p in &self.subs {
            acc.union_with(&p.matches(seg, cutoff)?);
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

/// The scorer of [`DisMaxWeight`]: the union of its clauses, scored by the
/// best one plus `tie` times the others. Its bounds combine the clauses'
/// the same way, so block-max skipping stays exact.
pub struct DisMax<S> {
    subs: Vec<S>,
    tie: f32,
    doc: DocId,
}

impl<S: Scorer> DisMax<S> {
    /// The union of `subs` (at least one), on its first document.
    pub fn new(subs: Vec<S>, tie: f32) -> Self {
        assert!(!subs.is_empty(), "dis_max of nothing");
        let doc = subs.iter().map(|s| s.doc()).min().unwrap_or(TERMINATED);
        DisMax { subs, tie, doc }
    }

    /// `best + tie * (sum - best)` of `scores`.
    fn combine(&self, scores: impl Iterator<Item = f32>) -> f32 {
        let (mut best, mut sum) = (0.0f32, 0.0f32);
        for s in scores {
            best = best.max(s);
            sum += s;
        }
        best + self.tie * (sum - best)
    }
}

impl<S: Scorer> Scorer for DisMax<S> {
    fn doc(&self) -> DocId {
        self.doc
    }
    fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        let at = self.doc;
        let mut next = TERMINATED;
        for s in &mut self.subs {
            let d = if s.doc() == at { s.advance() } else { s.doc() };
            next = next.min(d);
        }
        self.doc = next;
        next
    }
    fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.doc {
            return self.doc;
        }
        let mut next = TERMINATED;
        for s in &mut self.subs {
            let d = if s.doc() < target { s.seek(target) } else { s.doc() };
            next = next.min(d);
        }
        self.doc = next;
        next
    }
    fn cost(&self) -> u64 {
        self.subs.iter().map(|s| s.cost()).sum()
    }
    fn score(&mut self) -> f32 {
        let at = self.doc;
        let (mut best, mut sum) = (0.0f32, 0.0f32);
        for s in &mut self.subs {
            if s.doc() == at {
                let x = s.score();
                best = best.max(x);
                sum += x;
            }
        }
        best + self.tie * (sum - best)
    }
    fn max_score(&self) -> f32 {
        self.combine(self.subs.iter().map(|s| s.max_score()))
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        let mut end = TERMINATED;
        for s in &mut self.subs {
            end = end.min(s.shallow_advance(target.max(s.doc())));
        }
        end
    }
    fn block_max_score(&mut self) -> f32 {
        let (mut best, mut sum) = (0.0f32, 0.0f32);
        for s in &mut self.subs {
            let x = s.block_max_score();
            best = best.max(x);
            sum += x;
        }
        best + self.tie * (sum - best)
    }
    fn set_count_only(&mut self) {
        for s in &mut self.subs {
            s.set_count_only();
        }
    }
    fn take_error(&mut self) -> Option<Error> {
        self.subs.iter_mut().find_map(|s| s.take_error())
    }
}
