//! The posting cursor over one term's grouped region.
//!
//! It reads as needed: the header and skip table when opened, a doc block
//! when the cursor enters it, frequencies only when asked, and position or
//! offset blocks only for the documents whose positions are asked for. Skip
//! entries are parsed lazily and kept, so a *shallow* position (used for
//! block-max bounds) can run ahead of the decoded block.
//!
//! Errors (I/O, corruption) do not interrupt iteration loops: the cursor
//! records the error, reports itself exhausted, and hands the error over via
//! [`TermCursor::take_error`].
//!
//! A [`TermCursor`] walks one region with a [`leaf::LeafCursor`]; over a
//! chained term (the in-place strategies) it concatenates the leaf cursors
//! of the term's chunks, entering the next chunk where one ends: the leaf
//! knows nothing of chains. The leaf's parts are split by concern: the
//! skip table ([`skip`]), position and offset streams ([`stream`]), phrase
//! filters ([`filters`]).

mod filters;
mod leaf;
mod skip;
mod stream;

use std::sync::Arc;

use crate::bloom::{Direction, FilterShape, Probe};
use crate::error::Error;
use crate::layout::impacts::{Impacts, MAX_TERM_IMPACTS};
use crate::layout::postings::PostingsFiles;
use crate::layout::Codec;
use crate::schema::{DocId, TERMINATED};
use crate::storage::IndexFile;
use crate::termdict::TermInfo;

use leaf::{LeafCursor, Source};

/// One chunk of a chained term, as a cursor walks it.
#[derive(Debug, Clone, Copy)]
pub struct ChainChunk {
    /// The chunk's region in the cursor's file.
    pub info: TermInfo,
    /// Document number of the region's document 0.
    pub base: DocId,
    /// The chunk's last document (with `base` added).
    pub last_doc: DocId,
    /// Bound of the chunk's scores.
    pub impacts: Impacts,
    /// File offset and length of the whole chunk, and its hash.
    pub start: u64,
    /// See `start`.
    pub len: u32,
    /// See `start`.
    pub sum: u64,
}

/// A chained term's chunks as cursors walk them, with the term's document
/// frequency and score bound: built once per term and state of the chain
/// and shared by the cursors that open it ([`crate::layout::chain::Chain`]
/// keeps it until the term changes).
#[derive(Debug)]
pub struct ChainWalk {
    /// The chunks, in document order.
    pub chunks: Vec<ChainChunk>,
    df: u32,
    impacts: Impacts,
}

impl ChainWalk {
    /// The walk over `chunks`.
    pub fn new(chunks: Vec<ChainChunk>) -> ChainWalk {
        let df = chunks.iter().map(|c| c.info.region.doc_freq).sum();
        let impacts = Impacts::frontier(
            chunks
                .iter()
                .flat_map(|c| c.impacts.as_slice().iter().map(|i| (i.freq, i.norm))),
            MAX_TERM_IMPACTS,
        );
        ChainWalk { chunks, df, impacts }
    }
}

/// The chunks of a chained term and which one the cursor is in.
struct ChainState {
    bloom: Option<FilterShape>,
    walk: Arc<ChainWalk>,
    at: usize,
    /// The chunk a shallow advance went to, past the current one.
    ahead: Option<usize>,
}

/// A cursor over one term's postings in one segment: one region, or the
/// chunks of a chained term one after the other.
pub struct TermCursor<'a> {
    leaf: LeafCursor<'a>,
    /// The chunks of a chained term (`None`: one region).
    chain: Option<Box<ChainState>>,
}

impl<'a> TermCursor<'a> {
    /// Opens the term described by `info` in the postings `files`,
    /// positioned on its first document.
    pub fn open(files: &'a PostingsFiles, info: &TermInfo) -> Result<TermCursor<'a>, Error> {
        Ok(TermCursor {
            leaf: LeafCursor::open(files, info)?,
            chain: None,
        })
    }

    /// Opens a chained term in the chain `file` (see
    /// [`crate::layout::chain`]): `walk` says where each of its chunks'
    /// regions is and what it holds. Positioned on the first document.
    pub fn open_chain_in(
        file: &'a IndexFile,
        codec: Codec,
        bloom: Option<FilterShape>,
        walk: Arc<ChainWalk>,
    ) -> Result<TermCursor<'a>, Error> {
        let first = *walk
            .chunks
            .first()
            .ok_or_else(|| Error::corrupt(file.path(), "chained term with no chunks"))?;
        let leaf = LeafCursor::open_in(Source::of(file, codec, bloom), &first.info, first.base)?;
        Ok(TermCursor {
            leaf,
            chain: Some(Box::new(ChainState {
                bloom,
                walk,
                at: 0,
                ahead: None,
            })),
        })
    }

    /// Keeps prefetching the term's zone in segments of `segment` bytes
    /// ahead of the blocks being decoded, the zone having been prefetched up
    /// to `prefetched_to` already (see [`crate::storage::TierOptions::prefetches`]).
    pub fn enable_prefetch(&mut self, segment: usize, prefetched_to: usize) {
        self.leaf.enable_prefetch(segment, prefetched_to);
    }

    /// Number of documents containing the term.
    pub fn doc_freq(&self) -> u32 {
        self.chain.as_ref().map_or(self.leaf.doc_freq(), |c| c.walk.df)
    }

    /// The term's last document (parsing the whole skip table); `None` on damage.
    pub fn last_doc(&mut self) -> Option<DocId> {
        match &self.chain {
            Some(c) => c.walk.chunks.last().map(|c| c.last_doc),
            None => self.leaf.last_doc(),
        }
    }

    /// Impacts bounding every posting of the term.
    pub fn term_impacts(&self) -> &Impacts {
        self.chain
            .as_ref()
            .map_or(self.leaf.term_impacts(), |c| &c.walk.impacts)
    }

    /// The current document, or [`TERMINATED`].
    #[inline]
    pub fn doc(&self) -> DocId {
        self.leaf.doc
    }

    /// Moves to the next document.
    #[inline]
    pub fn advance(&mut self) -> DocId {
        if self.leaf.doc == TERMINATED {
            return TERMINATED;
        }
        let d = self.leaf.advance();
        if d == TERMINATED && self.chain.is_some() && self.leaf.error.is_none() {
            return self.next_chunk();
        }
        d
    }

    /// Moves to the first document `>= target`.
    #[inline]
    pub fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.leaf.doc {
            return self.leaf.doc;
        }
        if target > self.chunk_last() {
            let entered = match self.chunk_for(target) {
                Some(j) => self.enter_chunk(j),
                None => false,
            };
            if !entered {
                self.leaf.doc = TERMINATED;
                return TERMINATED;
            }
            if target <= self.leaf.doc {
                return self.leaf.doc;
            }
        }
        self.leaf.seek(target)
    }

    /// Moves this cursor and `other` to the first document both hold at or
    /// after their current ones, and returns it ([`TERMINATED`] when none).
    /// Inside two decoded blocks the ids are merged, without a search per
    /// document (for terms of similar frequencies); across blocks the
    /// cursor behind seeks. Chained terms seek each other.
    pub fn intersect(&mut self, other: &mut TermCursor<'_>) -> DocId {
        loop {
            let (a, b) = (self.doc(), other.doc());
            if a == TERMINATED || b == TERMINATED {
                return TERMINATED;
            }
            if a == b {
                return a;
            }
            if self.chain.is_some() || other.chain.is_some() {
                match a < b {
                    true => self.seek(b),
                    false => other.seek(a),
                };
                continue;
            }
            let (x, y) = (self.leaf.block_rest(), other.leaf.block_rest());
            let (i, j) = first_common(x, y);
            match (i < x.len(), j < y.len()) {
                (true, true) => {
                    self.leaf.step_in_block(i);
                    other.leaf.step_in_block(j);
                    return self.doc();
                }
                // Every id left in this block is below `y[j]`.
                (false, _) => {
                    let t = y[j];
                    other.leaf.step_in_block(j);
                    self.seek(t);
                }
                (true, false) => {
                    let t = x[i];
                    self.leaf.step_in_block(i);
                    other.seek(t);
                }
            }
        }
    }

    /// The first block whose skip entry is held: above 0 once a seek
    /// jumped through the skip table's second level.
    #[cfg(test)]
    pub(crate) fn skip_entries_from(&self) -> usize {
        self.leaf.entries_from
    }

    /// Moves the skip position (not the cursor) to the block holding the
    /// first document `>= target` and returns that block's last document, or
    /// [`TERMINATED`] when no document `>= target` exists.
    pub fn shallow_advance(&mut self, target: DocId) -> DocId {
        let ahead = match target > self.chunk_last() {
            true => Some(self.chunk_for(target)),
            false => None,
        };
        if let Some(chain) = self.chain.as_mut() {
            chain.ahead = ahead.flatten();
            if let Some(j) = ahead {
                // Ahead of the current chunk: the bound is the whole chunk's.
                return j.map_or(TERMINATED, |j| chain.walk.chunks[j].last_doc);
            }
        }
        self.leaf.shallow_advance(target)
    }

    /// Number of the block at the skip position, or `None` past the end
    /// (identifies what [`TermCursor::block_impacts`] would return).
    #[inline]
    pub fn shallow_block(&self) -> Option<usize> {
        match &self.chain {
            // Unique over the chunks: (chunk, block), a chunk ahead as a whole.
            Some(c) => match c.ahead {
                Some(j) => Some(j << 32 | 0xFFFF_FFFF),
                None => self.leaf.shallow_block().map(|b| c.at << 32 | b),
            },
            None => self.leaf.shallow_block(),
        }
    }

    /// Impacts of the block at the skip position (`None` past the end).
    #[inline]
    pub fn block_impacts(&mut self) -> Option<Impacts> {
        if let Some(c) = &self.chain {
            if let Some(j) = c.ahead {
                return Some(c.walk.chunks[j].impacts);
            }
        }
        self.leaf.block_impacts()
    }

    /// Sets the bit of every remaining document (from the current one on)
    /// in `words` (a bitset over the segment's documents); leaves the cursor
    /// exhausted.
    pub fn union_into(&mut self, words: &mut [u64]) {
        loop {
            self.leaf.union_into(words);
            if self.chain.is_none() || self.leaf.error.is_some() || self.next_chunk() == TERMINATED {
                break;
            }
        }
    }

    /// Calls `f` with every document `<= upto` (below [`TERMINATED`]) from
    /// the current one on, and its frequency, a decoded block at a time
    /// (window-at-a-time scoring); leaves the cursor on the first document
    /// past `upto` (or exhausted).
    #[inline]
    pub fn for_each_upto(&mut self, upto: DocId, mut f: impl FnMut(DocId, u32)) {
        self.for_each_run_upto(upto, |docs, freqs| {
            docs.iter().zip(freqs).for_each(|(&d, &q)| f(d, q));
        })
    }

    /// Calls `f` with the runs of documents `<= upto` (below
    /// [`TERMINATED`]) from the current one on and their frequencies, each
    /// run part of one decoded block (work a block at a time: gathering
    /// norms, scoring in bulk); leaves the cursor on the first document past
    /// `upto` (or exhausted).
    #[inline]
    pub fn for_each_run_upto(&mut self, upto: DocId, mut f: impl FnMut(&[DocId], &[u32])) {
        if self.chain.is_none() {
            return self.leaf.for_each_run_upto(upto, f);
        }
        while self.doc() <= upto {
            let freq = self.freq();
            f(&[self.doc()], &[freq]);
            self.advance();
        }
    }

    /// The document `ahead` postings past the current one, when it is
    /// already decoded as an id (in the current block, not a dense one;
    /// `None` otherwise, and for chained terms): for fetching what a later
    /// posting needs into the cache before it is reached.
    #[inline]
    pub fn upcoming(&self, ahead: usize) -> Option<DocId> {
        match self.chain {
            Some(_) => None,
            None => self.leaf.upcoming(ahead),
        }
    }

    /// Frequency of the term in the current document.
    #[inline]
    pub fn freq(&mut self) -> u32 {
        self.leaf.freq()
    }

    /// Positions of the term in the current document, into `out` (cleared).
    pub fn positions(&mut self, out: &mut Vec<u32>) {
        self.leaf.positions(out)
    }

    /// Calls `f` with each position of the term in the current document,
    /// in order, until it returns false (the later ones are not decoded).
    #[inline]
    pub fn positions_while(&mut self, f: impl FnMut(u32) -> bool) {
        self.leaf.positions_while(f)
    }

    /// Byte offsets `(start, end)` of the term's occurrences in the current
    /// document, into `out` (cleared).
    pub fn offsets(&mut self, out: &mut Vec<(u32, u32)>) {
        self.leaf.offsets(out)
    }

    /// Whether the term has phrase filters (in the current chunk of a
    /// chained term).
    pub fn has_filters(&self) -> bool {
        self.leaf.has_filters()
    }

    /// Whether the current document's `dir` filter may hold the term of
    /// `probe` (false: the term certainly is not a neighbour there). True
    /// when the term has no filters.
    #[inline]
    pub fn filter_may_contain(&mut self, dir: Direction, probe: &Probe) -> bool {
        self.leaf.filter_may_contain(dir, probe)
    }

    /// Appends the current document's `dir` filter to `out` (zeros when
    /// empty); false, appending nothing, when the term has no filters.
    pub fn copy_filter(&mut self, dir: Direction, out: &mut Vec<u8>) -> bool {
        self.leaf.copy_filter(dir, out)
    }

    /// The error that stopped the cursor, if any.
    pub fn take_error(&mut self) -> Option<Error> {
        self.leaf.take_error()
    }

    /// Enters the chunk after the current one; its first document, or
    /// [`TERMINATED`] past the last chunk.
    #[cold]
    fn next_chunk(&mut self) -> DocId {
        let j = self.chain.as_ref().map_or(0, |c| c.at + 1);
        self.enter_chunk(j);
        self.leaf.doc
    }

    /// Moves a chained cursor to chunk `j` (its first document); false, the
    /// cursor exhausted, past the last chunk or on error.
    #[cold]
    fn enter_chunk(&mut self, j: usize) -> bool {
        let Some(mut chain) = self.chain.take() else {
            return false;
        };
        let Some(&next) = chain.walk.chunks.get(j) else {
            self.chain = Some(chain);
            self.leaf.doc = TERMINATED;
            self.leaf.shallow_done = true;
            return false;
        };
        chain.at = j;
        chain.ahead = None;
        let error = self.leaf.error.take();
        let loaded = self.leaf.load(chain.bloom, &next.info, next.base);
        self.leaf.error = error;
        self.chain = Some(chain);
        match loaded {
            Ok(()) => true,
            Err(e) => {
                self.leaf.fail(e);
                false
            }
        }
    }

    /// The first chunk after the current one whose last document is
    /// `>= target` (chained cursors only).
    fn chunk_for(&self, target: DocId) -> Option<usize> {
        let chain = self.chain.as_ref()?;
        let rest = &chain.walk.chunks[chain.at + 1..];
        let k = rest.partition_point(|c| c.last_doc < target);
        (k < rest.len()).then_some(chain.at + 1 + k)
    }

    /// Last document of the current chunk (`TERMINATED` when not chained).
    #[inline]
    fn chunk_last(&self) -> DocId {
        match &self.chain {
            Some(c) => c.walk.chunks[c.at].last_doc,
            None => TERMINATED,
        }
    }
}

/// The positions `(i, j)` of the first id `x` and `y` (increasing) share,
/// or, when they share none, where the merge stopped: `i == x.len()` with
/// every id of `x` below `y[j]`, or `j == y.len()` with every id of `y`
/// below `x[i]`. One comparison per step, without a branch on its outcome.
#[inline]
fn first_common(x: &[DocId], y: &[DocId]) -> (usize, usize) {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        let (a, b) = (x[i], y[j]);
        if a == b {
            break;
        }
        i += (a < b) as usize;
        j += (b < a) as usize;
    }
    (i, j)
}
