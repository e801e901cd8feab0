//! The postings of a chained segment (the in-place strategies, DESIGN §5):
//! each term a chain of chunks in the chain file, read through the index's
//! storage tier like every other file.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use crate::bloom::FilterShape;
use crate::error::{Error, Result};
use crate::layout::chain::{self, Chain};
use crate::layout::cursor::{ChainChunk, ChainWalk};
use crate::layout::impacts::Impacts;
use crate::layout::source::PostingsSource;
use crate::layout::{Codec, TermCursor};
use crate::schema::DocId;
use crate::storage::{IndexFile, Storage};
use crate::termdict::{decode_meta, TermInfo};

/// The postings of a chained segment (the in-place strategies).
pub struct ChainPostings {
    chain: Arc<Chain>,
    codec: Codec,
    bloom: Option<FilterShape>,
    /// The chain file up to the committed length, read through the index's
    /// tier like every other file (the direct tier's pool bounds it too).
    file: IndexFile,
    /// The segment's documents: chunks beyond are not visible.
    max_doc: DocId,
}

impl ChainPostings {
    /// The postings of a chained segment of `max_doc` documents over
    /// `chain`, its file opened up to its committed `len` on `storage`.
    pub fn open(
        chain: Arc<Chain>,
        len: u64,
        max_doc: DocId,
        codec: Codec,
        bloom: Option<FilterShape>,
        storage: &Storage,
    ) -> Result<ChainPostings> {
        let len = usize::try_from(len).map_err(|_| Error::corrupt(&chain.path, "chain file too large"))?;
        let file = storage.open_growing(&chain.path, len)?;
        Ok(ChainPostings {
            chain,
            codec,
            bloom,
            file,
            max_doc,
        })
    }

    /// The chain.
    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    /// Whether chunks are read in place from memory (`ram`, `mmap`): their
    /// hashes are then checked once; on other tiers at every read.
    fn resident(&self) -> bool {
        self.file.resident().is_some()
    }

    /// On tiers that are not resident, brings a term's chunks in with one
    /// batched request, and checks each chunk's hash.
    fn load_chunks(&self, chunks: &[ChainChunk]) -> Result<()> {
        if self.resident() {
            return Ok(());
        }
        let ranges: Vec<std::ops::Range<usize>> = chunks
            .iter()
            .map(|c| c.start as usize..c.start as usize + c.len as usize)
            .collect();
        self.file.prefetch(&ranges)?;
        let mut buf = Vec::new();
        for c in chunks {
            let bytes = self
                .file
                .read(c.start as usize..c.start as usize + c.len as usize, &mut buf)?;
            self.chain.check_chunk(bytes, c.start, c.sum, false)?;
        }
        Ok(())
    }

    /// The walk over the chunks lying at `at` in the chain file: each read
    /// through the tier (one batched request where not resident), its hash
    /// checked, its metadata and score bound decoded.
    fn walk(&self, at: &[u64], chunks: &[chain::Chunk]) -> Result<ChainWalk> {
        if !self.resident() {
            let ranges: Vec<std::ops::Range<usize>> = chunks
                .iter()
                .zip(at)
                .map(|(c, &a)| a as usize..a as usize + c.len as usize)
                .collect();
            self.file.prefetch(&ranges)?;
        }
        let mut walk = Vec::with_capacity(chunks.len());
        let mut buf = Vec::new();
        for (ch, &a) in chunks.iter().zip(at) {
            let bytes = self.file.read(a as usize..a as usize + ch.len as usize, &mut buf)?;
            self.chain.check_chunk(bytes, a, ch.sum, self.resident())?;
            // The chunk's metadata, then its score bound at the head of its zone.
            let (info, impacts) = decode_meta(bytes, a, self.bloom.is_some())
                .filter(|(i, used)| *used as u64 + i.region.len() == ch.len as u64)
                .and_then(|(info, _)| {
                    let head = bytes.get((info.doc_offset - a) as usize..)?;
                    Some((info, Impacts::read(head, &mut 0)?))
                })
                .ok_or_else(|| Error::corrupt(&self.chain.path, "damaged chunk metadata"))?;
            walk.push(ChainChunk {
                info,
                base: ch.base,
                last_doc: ch.last_doc,
                impacts,
                start: a,
                len: ch.len,
                sum: ch.sum,
            });
        }
        Ok(ChainWalk::new(walk))
    }
}

impl PostingsSource for ChainPostings {
    /// The info sums the term's chunks, and `doc_offset` holds its ordinal
    /// in the chain's dictionary.
    fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        let dict = self.chain.dict.read().unwrap_or_else(|p| p.into_inner());
        let Some(ord) = dict.ord(key) else {
            return Ok(None);
        };
        let visible = dict.chain(ord).map_or(&[][..], |t| t.visible(self.max_doc));
        if visible.is_empty() {
            return Ok(None);
        }
        let region = chain::region_totals(visible);
        Ok(Some(TermInfo {
            doc_offset: ord as u64,
            region,
            ..TermInfo::default()
        }))
    }

    fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        Ok(self.term_info(key)?.map_or(0, |i| i.region.doc_freq as u64))
    }

    /// The walk over the term's chunks is kept for the next cursors until
    /// the term changes.
    fn cursor<'a>(&'a self, info: &TermInfo) -> Result<TermCursor<'a>> {
        let beyond = || Error::corrupt(&self.chain.path, "term ordinal beyond the chain's dictionary");
        let ord = info.doc_offset as u32;
        let mut built = false;
        let walk = self
            .chain
            .walk_cached(ord, self.max_doc, |pieces, chunks| {
                built = true;
                let at = self.chain.locate(pieces, chunks)?;
                self.walk(&at, chunks)
            })?
            .ok_or_else(beyond)?;
        if !built {
            self.load_chunks(&walk.chunks)?;
        }
        TermCursor::open_chain_in(&self.file, self.codec, self.bloom, walk)
    }

    fn prefetches_zones(&self) -> bool {
        false
    }

    fn terms_between(&self, lo: &[u8], hi: &[u8], f: &mut dyn FnMut(&[u8], u64, u64)) -> Result<()> {
        let keys: Vec<Vec<u8>> = {
            let dict = self.chain.dict.read().unwrap_or_else(|p| p.into_inner());
            dict.keys_between(lo, hi).into_iter().map(|(k, _)| k.to_vec()).collect()
        };
        for key in keys {
            if let Some(info) = self.term_info(&key)? {
                f(&key, info.region.doc_freq as u64, info.region.total_term_freq);
            }
        }
        Ok(())
    }

    fn bloom(&self) -> Option<FilterShape> {
        self.bloom
    }

    fn prefetch(&self, _ranges: &[Range<usize>]) -> Result<()> {
        Ok(())
    }

    fn verify_all(&self) -> Result<()> {
        let n = self.chain.dict.read().unwrap_or_else(|p| p.into_inner()).len();
        let mut buf = Vec::new();
        for ord in 0..n as u32 {
            if let Some((pieces, chunks)) = self.chain.view(ord, self.max_doc) {
                let at = self.chain.locate(&pieces, &chunks)?;
                for (ch, &a) in chunks.iter().zip(&at) {
                    let bytes = self.file.read(a as usize..a as usize + ch.len as usize, &mut buf)?;
                    self.chain.check_chunk(bytes, a, ch.sum, false)?;
                }
            }
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
