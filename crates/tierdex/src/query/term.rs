//! One term in one field: its weight (global IDF and document frequency)
//! and its scorer (BM25 over the term's postings, with block-max bounds).

use std::any::Any;
use std::sync::Arc;

use crate::codec::BLOCK;
use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::{Index, SegmentReader};
use crate::layout::TermCursor;
use crate::query::bm25::Bm25;
use crate::query::bulk;
use crate::query::collector::{self, Cutoff};
use crate::query::scorer::Scorer;
use crate::query::weight::{BoxedScorer, Build, QueryKey, SegmentJob, Weight};
use crate::schema::{DocId, Field};

/// A term in one field, with its global statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct TermWeight {
    /// The field.
    pub field: Field,
    /// The analysed term.
    pub term: String,
    /// Its dictionary key (shared with the canonical key).
    pub key: Arc<[u8]>,
    /// Global IDF.
    pub idf: f32,
    /// Global document frequency.
    pub doc_freq: u64,
    canonical: QueryKey,
}

impl TermWeight {
    /// The weight of `term` (dictionary key `key`) in `field`.
    pub fn new(field: Field, term: String, key: Arc<[u8]>, idf: f32, doc_freq: u64) -> TermWeight {
        TermWeight {
            canonical: QueryKey::Term(key.clone()),
            field,
            term,
            key,
            idf,
            doc_freq,
        }
    }

    /// The term's scorer over one segment (`None`: the segment lacks it).
    pub fn term_scorer<'a>(&self, b: Build<'a>) -> Result<Option<TermScorer<'a>>> {
        let Some(info) = b.seg.term_info(&self.key)? else {
            return Ok(None);
        };
        let cursor = b.cursor(&info)?;
        Ok(Some(TermScorer::new(
            cursor,
            b.ctx.bm25(self.field, self.idf),
            b.seg.norms(self.field),
        )))
    }
}

impl Weight for TermWeight {
    fn key(&self) -> &QueryKey {
        &self.canonical
    }

    fn terms<'a>(&'a self, _positive: bool, out: &mut Vec<&'a TermWeight>) {
        out.push(self);
    }

    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(self.term_scorer(b)?.map(|s| Box::new(s) as BoxedScorer<'a>))
    }

    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        match self.term_scorer(b)? {
            Some(s) if bulk::pays(s.cost(), b.seg.max_doc()) => job.run_or(vec![s], b.seg.max_doc()),
            Some(mut s) => job.run(&mut s),
            None => Ok(true),
        }
    }

    fn known_count(&self, index: &Index) -> Result<Option<u64>> {
        index.doc_freq(&self.key).map(Some)
    }

    fn bitset_cost(&self) -> Option<f64> {
        Some(self.doc_freq as f64)
    }

    fn iteration_cost(&self) -> f64 {
        self.doc_freq as f64
    }

    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut set = BitSet::new(seg.max_doc());
        self.union_into(seg, cutoff, &mut set)?;
        Ok(set)
    }

    fn union_into(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>, acc: &mut BitSet) -> Result<()> {
        collector::check(cutoff)?;
        if let Some(info) = seg.term_info(&self.key)? {
            let mut c = seg.cursor(&info)?;
            c.union_into(acc.words_mut());
            if let Some(e) = c.take_error() {
                return Err(e);
            }
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// BM25 over one term's postings in one field.
pub struct TermScorer<'a> {
    cursor: TermCursor<'a>,
    bm25: Bm25<'a>,
    norms: &'a [u8],
    max_score: f32,
    /// Block whose bound was computed last, and that bound.
    bound_block: usize,
    bound: f32,
}

impl<'a> TermScorer<'a> {
    /// A scorer over `cursor`, with the field's `norms`.
    pub fn new(cursor: TermCursor<'a>, bm25: Bm25<'a>, norms: &'a [u8]) -> Self {
        let max_score = bm25.bound(cursor.term_impacts());
        TermScorer {
            cursor,
            bm25,
            norms,
            max_score,
            bound_block: usize::MAX,
            bound: 0.0,
        }
    }

    /// The underlying cursor (positions, offsets).
    pub fn cursor(&mut self) -> &mut TermCursor<'a> {
        &mut self.cursor
    }

    /// Calls `f` with every document `<= upto` from the current one on and
    /// its score, a block at a time; leaves the scorer on the first
    /// document past `upto` (or exhausted).
    ///
    /// A block's scores are computed before any is handed on: its norm
    /// lookups (a cache miss each over sparse postings) do not wait on one
    /// another or on `f`'s branches.
    #[inline]
    pub fn for_each_scored_upto(&mut self, upto: DocId, mut f: impl FnMut(DocId, f32)) {
        let (bm25, norms) = (&self.bm25, self.norms);
        let mut scores = [0f32; BLOCK];
        self.cursor.for_each_run_upto(upto, |docs, freqs| {
            let scores = &mut scores[..docs.len()];
            for ((s, &doc), &freq) in scores.iter_mut().zip(docs).zip(freqs) {
                *s = bm25.score(freq, norms.get(doc as usize).copied().unwrap_or(0));
            }
            for (&doc, &s) in docs.iter().zip(scores.iter()) {
                f(doc, s);
            }
        });
    }

    /// As [`Self::for_each_scored_upto`], scoring only the documents `keep`
    /// accepts (a filter's bit set: the others cost no norm lookup).
    #[inline]
    pub fn for_each_scored_upto_if(&mut self, upto: DocId, keep: impl Fn(DocId) -> bool, mut f: impl FnMut(DocId, f32)) {
        let (bm25, norms) = (&self.bm25, self.norms);
        self.cursor.for_each_upto(upto, |doc, freq| {
            if keep(doc) {
                f(doc, bm25.score(freq, norms.get(doc as usize).copied().unwrap_or(0)))
            }
        });
    }

    #[inline]
    fn norm(&self, doc: DocId) -> u8 {
        // A doc beyond the norms means a damaged index; its score is then
        // computed with norm 0 and the cursor's checks report the damage.
        self.norms.get(doc as usize).copied().unwrap_or(0)
    }
}

/// How many postings ahead [`TermScorer::score`] fetches a norm.
const NORM_AHEAD: usize = 8;

impl Scorer for TermScorer<'_> {
    #[inline]
    fn doc(&self) -> DocId {
        self.cursor.doc()
    }
    #[inline]
    fn advance(&mut self) -> DocId {
        self.cursor.advance()
    }
    #[inline]
    fn seek(&mut self, target: DocId) -> DocId {
        self.cursor.seek(target)
    }
    fn cost(&self) -> u64 {
        self.cursor.doc_freq() as u64
    }
    #[inline]
    fn score(&mut self) -> f32 {
        let doc = self.cursor.doc();
        // The norm a later posting of the block will want: sparse postings
        // miss the cache at each norm, and one at a time those misses
        // would wait on each other.
        if let Some(next) = self.cursor.upcoming(NORM_AHEAD) {
            crate::common::prefetch(self.norms.as_ptr().wrapping_add(next as usize));
        }
        let f = self.cursor.freq();
        self.bm25.score(f, self.norm(doc))
    }
    fn max_score(&self) -> f32 {
        self.max_score
    }
    #[inline]
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        self.cursor.shallow_advance(target)
    }
    #[inline]
    fn block_max_score(&mut self) -> f32 {
        let Some(block) = self.cursor.shallow_block() else {
            return 0.0;
        };
        if block != self.bound_block {
            self.bound = self.cursor.block_impacts().map_or(0.0, |i| self.bm25.bound(&i));
            self.bound_block = block;
        }
        self.bound
    }
    fn take_error(&mut self) -> Option<Error> {
        self.cursor.take_error()
    }
}
