//! Weights: planned query nodes, with global statistics, that know how to
//! evaluate themselves over a segment.
//!
//! The planner turns a parsed query into a tree of [`Weight`]s. A weight
//! has a canonical [`QueryKey`] (equal keys answer identically: operands are
//! ordered by key, the result cache is keyed by it), lists the terms it
//! reads, builds its segment [`Scorer`], and runs the top-k and count loops
//! over a segment itself ([`Weight::collect`]): a node whose scorer type is
//! known (a term, a phrase, a disjunction or conjunction of terms) runs the
//! generic loops of [`collector`](crate::query::collector) monomorphised for
//! that type, so no call per candidate goes through a virtual table. Other
//! trees fall back to a boxed scorer (one virtual call per candidate at the
//! root).
//!
//! A new query operator is a new weight type (its own file), its syntax
//! (`ast.rs`, `parser.rs`) and one arm in the planner.

use std::any::Any;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::bloom::FilterUse;
use crate::common::{BitSet, FieldSet};
use crate::error::Result;
use crate::index::{Index, SegmentReader};
use crate::layout::TermCursor;
use crate::query::bm25::{Bm25, NormCache};
use crate::query::boolean::{Conjunction, Disjunction};
use crate::query::{bulk, bulk_and};
use crate::query::collector::{self, Cutoff, Deadline, TopK};
use crate::query::scorer::Scorer;
use crate::query::term::TermScorer;
use crate::schema::{DocId, Field};
use crate::termdict::TermInfo;

/// A planned query node.
pub trait Weight: fmt::Debug + Send + Sync + 'static {
    /// The node's canonical identity: two nodes with equal keys match the
    /// same documents with the same scores.
    fn key(&self) -> &QueryKey;

    /// The terms the node reads; with `positive`, only those whose matches
    /// make a document match (excluded clauses left out).
    fn terms<'a>(&'a self, positive: bool, out: &mut Vec<&'a TermWeight>);

    /// The node's scorer over one segment; `None` when nothing can match.
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>>;

    /// The node's scorer over one segment restricted to `lead`'s documents
    /// (a set of candidates, scoring 0), `lead` joining the node's own
    /// conjunction where it has one: each clause is then tested only where
    /// the lead and the cheaper clauses agree, not at every candidate.
    fn scorer_led<'a>(&self, mut b: Build<'a>, lead: BoxedScorer<'a>) -> Result<Option<BoxedScorer<'a>>> {
        b.lead_cost = Some(lead.cost() as f64);
        Ok(self
            .scorer(b)?
            .map(|s| Box::new(crate::query::boolean::Conjunction::new(vec![lead, s])) as BoxedScorer<'a>))
    }

    /// Runs `job` over one segment: the top-k and/or count loops. Returns
    /// false when the deadline stopped it. The default runs the loops over
    /// the boxed [`Weight::scorer`]; nodes with a concrete scorer override
    /// it so the loops are compiled for that scorer.
    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        match self.scorer(b)? {
            Some(mut s) => job.run(&mut s),
            None => Ok(true),
        }
    }

    /// The exact number of live matches, when the index knows it without
    /// evaluating (a single term's document frequency).
    fn known_count(&self, _index: &Index) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Whether [`Weight::matches`] can evaluate the node (no positions
    /// needed), and what it costs in postings decoded.
    fn bitset_cost(&self) -> Option<f64> {
        None
    }

    /// Rough work of counting by iterating the node's scorer.
    fn iteration_cost(&self) -> f64;

    /// [`Self::iteration_cost`] as the whole query's count weighs it
    /// against [`Self::bitset_cost`] (a node may know better than the
    /// estimate its parents combine).
    fn count_iteration_cost(&self) -> f64 {
        self.iteration_cost()
    }

    /// Codes of `field` (a number, date or boolean field) that every match
    /// has a value within, when the node restricts them (a range or terms
    /// on the field, or a conjunction with one): a sort by that field then
    /// walks only those values' points.
    fn code_bounds(&self, _field: Field) -> Option<(u64, u64)> {
        None
    }

    /// When the node matches exactly the documents with a value of `field`
    /// in `lo..=hi` (a range on it): those bounds.
    fn exact_code_range(&self, _field: Field) -> Option<(u64, u64)> {
        None
    }

    /// About how many of `num_docs` documents the node matches (terms by
    /// their frequency, conjunctions as if their clauses were
    /// independent); an upper bound where nothing better is known.
    fn estimated_matches(&self, num_docs: f64) -> f64 {
        self.iteration_cost().min(num_docs)
    }

    /// The documents of `seg` the node matches, as a bit set (only when
    /// [`Weight::bitset_cost`] says it can); stops with
    /// [`Error::TimedOut`](crate::error::Error::TimedOut) at `cutoff`,
    /// checked before each term.
    fn matches(&self, seg: &SegmentReader, _cutoff: Option<&Cutoff>) -> Result<BitSet> {
        Ok(BitSet::new(seg.max_doc()))
    }

    /// Adds the node's documents of `seg` to `acc` (a disjunction's matches
    /// so far), as [`Weight::matches`] would collect them; a term sets its
    /// bits in place.
    fn union_into(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>, acc: &mut BitSet) -> Result<()> {
        acc.union_with(&self.matches(seg, cutoff)?);
        Ok(())
    }

    /// Removes from `acc` (a conjunction's matches so far in `seg`) the
    /// documents the node does not match, when the node can confirm
    /// documents one by one more cheaply than [`Weight::matches`] collects
    /// its own (a broad column filter over few candidates). Returns false,
    /// with `acc` untouched, when it cannot or would not.
    fn narrow(&self, _seg: &SegmentReader, _acc: &mut BitSet) -> Result<bool> {
        Ok(false)
    }

    /// The node as [`Any`], for the planner's normalisation.
    fn as_any(&self) -> &dyn Any;

    /// The node as a boxed [`Any`], for the planner to take a boolean's
    /// clauses apart.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// A planned query: the root of a weight tree.
pub type Plan = Box<dyn Weight>;

/// A scorer tree whose node types are erased.
pub type BoxedScorer<'a> = Box<dyn Scorer + 'a>;

/// The canonical form of a planned query (see [`Weight::key`]). Ordered by
/// kind, then field and dictionary key, then operands; a boolean's clause
/// lists compare by length first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueryKey {
    /// Matches nothing.
    Nothing,
    /// One term: its dictionary key (field byte, then the term).
    Term(Arc<[u8]>),
    /// A phrase in one field: relative positions and term keys.
    Phrase {
        /// The field's id.
        field: u8,
        /// Position of each term relative to the first.
        rel: Vec<u32>,
        /// The terms' dictionary keys, in phrase order.
        keys: Vec<Arc<[u8]>>,
    },
    /// A boolean query: its clauses, each list in canonical order.
    Bool {
        /// Required.
        must: Clauses,
        /// Optional.
        should: Clauses,
        /// Excluded.
        must_not: Clauses,
    },
    /// A node of another kind: its name and canonical description.
    Other(String, Vec<QueryKey>),
}

/// The clause keys of one occurrence of a boolean, compared by count first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Clauses(pub Vec<QueryKey>);

impl Ord for Clauses {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Clauses {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl QueryKey {
    /// Approximate heap bytes of the key (charged to the cache entry
    /// holding it).
    pub fn heap_bytes(&self) -> u64 {
        const SELF: u64 = std::mem::size_of::<QueryKey>() as u64;
        match self {
            QueryKey::Nothing => 0,
            QueryKey::Term(k) => k.len() as u64,
            QueryKey::Phrase { rel, keys, .. } => {
                rel.len() as u64 * 4 + keys.iter().map(|k| 24 + k.len() as u64).sum::<u64>()
            }
            QueryKey::Bool { must, should, must_not } => [must, should, must_not]
                .iter()
                .flat_map(|c| c.0.iter())
                .map(|k| SELF + k.heap_bytes())
                .sum(),
            QueryKey::Other(name, parts) => {
                name.len() as u64 + parts.iter().map(|k| SELF + k.heap_bytes()).sum::<u64>()
            }
        }
    }
}

/// Per-index scoring context: one norm cache per field, the fields whose
/// terms have phrase filters, and how much of the positions' cost a phrase
/// filter may cost ([`filter_share`]).
pub struct ScoringContext {
    caches: Vec<NormCache>,
    pub(crate) filter_fields: FieldSet,
    pub(crate) filter_share: f64,
}

/// The share of the positions' read cost a phrase filter may cost in
/// `index` ([`bloom::choose_with`]): [`bloom::RESIDENT_FILTER_SHARE`] when
/// the index stays in memory (the `ram` tier, or the page cache tiers with
/// the whole index within half the memory the process may use, see
/// [`crate::storage::memory`]), where a filter costs a few cache misses
/// rather than device reads; [`bloom::MAX_FILTER_SHARE`] otherwise.
///
/// [`bloom::choose_with`]: crate::bloom::choose_with
/// [`bloom::RESIDENT_FILTER_SHARE`]: crate::bloom::RESIDENT_FILTER_SHARE
/// [`bloom::MAX_FILTER_SHARE`]: crate::bloom::MAX_FILTER_SHARE
pub fn filter_share(index: &Index) -> f64 {
    use crate::storage::{memory, Tier};
    let bytes: u64 = index.manifest().segments.iter().map(|s| s.bytes()).sum();
    let available = memory::available();
    let resident = match index.storage().options().tier {
        Tier::Ram => true,
        Tier::Mmap | Tier::Buffered => memory::fits(bytes, available),
        Tier::Direct => false,
    };
    tracing::debug!(
        index_bytes = bytes,
        available,
        resident,
        "phrase filters chosen for an index {}",
        if resident { "in memory" } else { "read from the device" }
    );
    match resident {
        true => crate::bloom::RESIDENT_FILTER_SHARE,
        false => crate::bloom::MAX_FILTER_SHARE,
    }
}

impl ScoringContext {
    /// The context of `index` (global field statistics).
    pub fn new(index: &Index) -> Self {
        ScoringContext {
            caches: index
                .schema()
                .fields()
                .map(|f| NormCache::new(&index.field_stats(f)))
                .collect(),
            filter_fields: index.manifest().postings_format().filter_fields,
            filter_share: filter_share(index),
        }
    }

    /// This context of `index` with field statistics taken from `global`
    /// (statistics over several indices) where it has them; the filter
    /// fields and share are this context's (made per query, it reads no
    /// memory figures again).
    pub fn with_global(&self, index: &Index, global: &crate::query::global::GlobalStats) -> Self {
        let schema = index.schema();
        ScoringContext {
            caches: schema
                .fields()
                .map(|f| NormCache::new(&global.field(schema.name(f)).unwrap_or_else(|| index.field_stats(f))))
                .collect(),
            filter_fields: self.filter_fields,
            filter_share: self.filter_share,
        }
    }

    /// BM25 of `field` with weight (IDF) `weight`.
    pub(crate) fn bm25(&self, field: Field, weight: f32) -> Bm25<'_> {
        Bm25::new(weight, &self.caches[field.index()])
    }
}

/// What building a segment's scorer tree needs: the segment, the scoring
/// context, and whether cursors prefetch (and in what segment size).
#[derive(Clone, Copy)]
pub struct Build<'a> {
    /// The segment.
    pub seg: &'a SegmentReader,
    /// Norm caches.
    pub ctx: &'a ScoringContext,
    /// Adaptive prefetch segment size, when the query qualifies.
    pub prefetch: Option<usize>,
    /// When phrases test their Bloom filters.
    pub filters: FilterUse,
    /// When opening cursors stops (checked before each one).
    pub cutoff: Option<Cutoff>,
    /// In a conjunction: what iterating its cheapest other required clause
    /// costs ([`Weight::iteration_cost`]). A filter much broader than that
    /// confirms the lead's candidates from doc values instead of listing
    /// its own matches.
    pub lead_cost: Option<f64>,
}

impl<'a> Build<'a> {
    /// A build over `seg` without prefetching.
    pub fn new(seg: &'a SegmentReader, ctx: &'a ScoringContext) -> Self {
        Build {
            seg,
            ctx,
            prefetch: None,
            filters: FilterUse::Auto,
            cutoff: None,
            lead_cost: None,
        }
    }

    /// A cursor over the term `info` describes;
    /// [`Error::TimedOut`](crate::error::Error::TimedOut) once the cutoff
    /// has passed.
    pub(crate) fn cursor(&self, info: &TermInfo) -> Result<TermCursor<'a>> {
        collector::check(self.cutoff.as_ref())?;
        match self.prefetch {
            Some(segment) => self.seg.prefetching_cursor(info, segment),
            None => self.seg.cursor(info),
        }
    }
}

/// What to do with one segment's matches: count them, collect the best,
/// or both; and the state that carries over from segment to segment.
pub struct SegmentJob<'j> {
    /// Global number of the segment's first document.
    pub base: DocId,
    /// The best hits so far (`None`: count only).
    pub top: Option<&'j mut TopK>,
    /// The running count of matches (`None`: no count wanted).
    pub count: Option<&'j mut u64>,
    /// The segment's deleted documents.
    pub deleted: Option<&'j BitSet>,
    /// When to stop.
    pub deadline: &'j mut Deadline,
}

impl SegmentJob<'_> {
    /// Runs the loops over `s`: compiled for `S` when it is a concrete
    /// scorer type. Returns false when the deadline stopped it; an error a
    /// cursor met is returned.
    pub fn run<S: Scorer + ?Sized>(&mut self, s: &mut S) -> Result<bool> {
        let finished = match self.top.as_deref_mut() {
            None => {
                s.set_count_only();
                match collector::count(s, self.deleted, self.deadline) {
                    Some(n) => {
                        if let Some(c) = self.count.as_deref_mut() {
                            *c += n;
                        }
                        true
                    }
                    None => false,
                }
            }
            Some(top) => collector::top_k(
                s,
                self.base,
                top,
                self.count.as_deref_mut(),
                self.deleted,
                self.deadline,
            ),
        };
        match s.take_error() {
            Some(e) => Err(e),
            None => Ok(finished),
        }
    }
}

impl SegmentJob<'_> {
    /// Runs the disjunction of the term scorers `subs` (at least 1) over a
    /// segment of `max_doc` documents: a window at a time when collecting
    /// hits without a count over postings dense enough
    /// ([`crate::query::bulk`]), else through the term or disjunction
    /// scorer.
    pub fn run_or(&mut self, subs: Vec<TermScorer<'_>>, max_doc: DocId) -> Result<bool> {
        self.run_or_filtered(subs, Vec::new(), max_doc)
    }

    /// [`Self::run_or`] of the matches that every one of the unscored
    /// `filters` also matches (through the nested conjunction when not a
    /// window at a time).
    pub fn run_or_filtered<'s>(
        &mut self,
        mut subs: Vec<TermScorer<'s>>,
        mut filters: Vec<BoxedScorer<'s>>,
        max_doc: DocId,
    ) -> Result<bool> {
        let cost = subs.iter().map(|s| s.cost()).sum();
        // With a filter that confirms candidates one by one (doc values,
        // phrases), windows pay over sparser postings too: the filter then
        // tests only the candidates that can still be competitive.
        let checked = filters.iter().any(|f| f.two_phase());
        let dense = bulk::pays(cost, max_doc) || (checked && bulk::pays_checked(cost, max_doc));
        let bulk = subs.len() <= bulk::MAX_CLAUSES && dense && self.count.is_none();
        let Some(top) = self.top.as_deref_mut().filter(|_| bulk) else {
            if !filters.is_empty() {
                let or: BoxedScorer<'s> = match subs.len() {
                    1 => Box::new(subs.pop().expect("one")),
                    _ => Box::new(Disjunction::new(subs)),
                };
                filters.insert(0, or);
                return self.run(&mut Conjunction::new(filters));
            }
            return match subs.len() {
                1 => self.run(&mut subs[0]),
                _ => self.run(&mut Disjunction::new(subs)),
            };
        };
        let finished = bulk::top_k_or(&mut subs, &mut filters, self.base, top, self.deleted, self.deadline);
        let error = subs.iter_mut().find_map(|s| s.take_error());
        match error.or_else(|| filters.iter_mut().find_map(|f| f.take_error())) {
            Some(e) => Err(e),
            None => Ok(finished),
        }
    }

    /// Whether [`Self::run_and_of_ors`] takes `groups` a window at a time:
    /// hits without a count, at most [`bulk_and::MAX_TERMS`] terms, and
    /// even the cheapest group dense enough ([`bulk_and::pays`]).
    pub fn takes_bulk_and(&self, groups: &[Vec<TermScorer<'_>>], max_doc: DocId) -> bool {
        let terms = groups.iter().map(Vec::len).sum::<usize>();
        let costs = groups.iter().map(|g| g.iter().map(|s| s.cost()).sum::<u64>());
        self.top.is_some() && self.count.is_none() && terms <= bulk_and::MAX_TERMS && bulk_and::pays(costs, max_doc)
    }

    /// Runs the conjunction of the disjunctions of term scorers `groups`
    /// (each at least one) and of the unscored `filters` over a segment of
    /// `max_doc` documents: a window at a time when
    /// [`Self::takes_bulk_and`] ([`crate::query::bulk_and`]), else through
    /// the nested conjunction and disjunction scorers.
    pub fn run_and_of_ors<'s>(
        &mut self,
        groups: Vec<Vec<TermScorer<'s>>>,
        mut filters: Vec<BoxedScorer<'s>>,
        max_doc: DocId,
    ) -> Result<bool> {
        let bulk = self.takes_bulk_and(&groups, max_doc);
        let Some(top) = self.top.as_deref_mut().filter(|_| bulk) else {
            if filters.is_empty() {
                let subs: Vec<_> = groups.into_iter().map(Disjunction::new).collect();
                return self.run(&mut Conjunction::new(subs));
            }
            let mut subs: Vec<BoxedScorer<'s>> = groups
                .into_iter()
                .map(|g| Box::new(Disjunction::new(g)) as BoxedScorer<'s>)
                .collect();
            subs.extend(filters);
            return self.run(&mut Conjunction::new(subs));
        };
        let group: Vec<usize> = groups.iter().enumerate().flat_map(|(g, t)| std::iter::repeat_n(g, t.len())).collect();
        let mut flat: Vec<TermScorer<'s>> = groups.into_iter().flatten().collect();
        let finished = bulk_and::top_k_and(
            &mut flat,
            &group,
            &mut filters,
            self.base,
            top,
            self.deleted,
            self.deadline,
        );
        let error = flat.iter_mut().find_map(|s| s.take_error());
        match error.or_else(|| filters.iter_mut().find_map(|f| f.take_error())) {
            Some(e) => Err(e),
            None => Ok(finished),
        }
    }
}

/// Matches nothing.
#[derive(Debug)]
pub struct NothingWeight;

static NOTHING_KEY: QueryKey = QueryKey::Nothing;

impl Weight for NothingWeight {
    fn key(&self) -> &QueryKey {
        &NOTHING_KEY
    }
    fn terms<'a>(&'a self, _positive: bool, _out: &mut Vec<&'a TermWeight>) {}
    fn scorer<'a>(&self, _b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(None)
    }
    fn known_count(&self, _index: &Index) -> Result<Option<u64>> {
        Ok(Some(0))
    }
    fn bitset_cost(&self) -> Option<f64> {
        Some(0.0)
    }
    fn iteration_cost(&self) -> f64 {
        0.0
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// True for a node that matches nothing.
pub fn is_nothing(w: &dyn Weight) -> bool {
    matches!(w.key(), QueryKey::Nothing)
}

pub use crate::query::term::TermWeight;
