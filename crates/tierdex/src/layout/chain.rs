//! Chained term postings: the on-storage layout of the in-place strategy
//! (DESIGN §0, §5).
//!
//! A chain file holds the postings of every flush in 8 KiB blocks. Each
//! flush appends, for every term it holds, one *chunk*: the term's grouped
//! region of that flush (see [`super::postings`]), whose document numbers
//! are relative to the flush's first document (the chunk's `base`). A
//! term's bytes are its chunks one after the other (its *logical* data);
//! they lie in the file as *pieces*, contiguous runs that need not be
//! adjacent. A query reads all pieces of a term in one batched submission
//! ([`crate::storage::batch`]) and walks the chunks in order.
//!
//! Long terms (over [`PACK_MAX`] bytes) live in whole blocks and a flush
//! appends to them in place. Short terms, most of a vocabulary and each
//! updated by few flushes, would cost a block rewrite each for a few bytes:
//! a flush packs them instead into one new [`PackedRun`] of contiguous
//! blocks, merging the newest runs into it geometrically ([`merge_plan`]),
//! so that a short term has at most a few pieces and its bytes are
//! rewritten once per level.
//!
//! The dictionary (term key → pieces and chunks) lives in memory and is
//! kept as a log (`.chl`): one checksummed record per flush, listing what
//! the flush appended or moved. The manifest names the log length and the
//! chain file length that a commit covers, so anything a crashed flush
//! wrote past them is ignored and overwritten. A flush writes only bytes
//! past a term's committed data (or into blocks no committed piece uses),
//! so a torn write never damages committed postings.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::codec;
use crate::error::{Error, Result};
use crate::layout::cursor::ChainWalk;
use crate::layout::impacts::Impacts;
use crate::schema::DocId;
use crate::termdict::RegionInfo;

/// A run of whole blocks of a chain file into which one flush packed the
/// data of the short terms it touched (DESIGN §5: short lists are merged,
/// long lists updated in place). Runs merge geometrically: a flush that
/// would leave [`RUN_MERGE`] runs of one level packs
/// them, with its own data, into one run of the next level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedRun {
    /// First block.
    pub first_block: u64,
    /// Blocks.
    pub blocks: u64,
    /// Merges behind it: a run of level `l` holds the data of up to
    /// `RUN_MERGE^l` flushes.
    pub level: u32,
}

/// Bytes of one block of a chain file.
pub const BLOCK_BYTES: u64 = 8192;
/// Over-allocation of `in-place-contiguous` when a term's space is (re)allocated.
pub const OVER_ALLOCATION: f64 = 1.25;

/// One flush's postings of a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Offset in the term's logical data.
    pub offset: u64,
    /// Bytes (the whole grouped region, metadata included).
    pub len: u32,
    /// Chain document number of the region's document 0.
    pub base: DocId,
    /// Chain document number of the region's last document.
    pub last_doc: DocId,
    /// Hash of the chunk's bytes.
    pub sum: u64,
    /// The region's sizes and statistics.
    pub region: RegionInfo,
}

/// A contiguous run of the chain file holding part of a term's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// File offset.
    pub at: u64,
    /// Bytes of the term's data in it.
    pub len: u64,
    /// Bytes reserved for it: whole blocks, a slot (less than a block), or
    /// 0 for a piece packed into a [`PackedRun`] (the run owns the space).
    pub capacity: u64,
}

impl Piece {
    /// True for a short term's piece packed into a run.
    pub fn is_packed(&self) -> bool {
        self.capacity == 0
    }
}

/// A term's pieces and chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermChain {
    /// Where the logical data lies, in order.
    pub pieces: Vec<Piece>,
    /// The chunks, in document order.
    pub chunks: Vec<Chunk>,
}

impl TermChain {
    /// Bytes of logical data.
    pub fn len(&self) -> u64 {
        self.pieces.iter().map(|p| p.len).sum()
    }

    /// True when the term holds nothing.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The chunks of documents below `max_doc` (what a snapshot sees).
    pub fn visible(&self, max_doc: DocId) -> &[Chunk] {
        let n = self.chunks.partition_point(|c| c.base < max_doc);
        &self.chunks[..n]
    }
}

/// Sums the sections and statistics of `chunks`.
pub fn region_totals(chunks: &[Chunk]) -> RegionInfo {
    let mut r = RegionInfo::default();
    for c in chunks {
        r.doc_freq += c.region.doc_freq;
        r.total_term_freq += c.region.total_term_freq;
        r.zone_len += c.region.zone_len;
        r.pos_len += c.region.pos_len;
        r.off_len += c.region.off_len;
        r.after_len += c.region.after_len;
        r.before_len += c.region.before_len;
    }
    r
}

/// The dictionary of a chain: every term's chain. Shared by the writer
/// (which only appends) and the readers of every snapshot (which see the
/// chunks below their document count).
#[derive(Debug, Default)]
pub struct ChainDict {
    ords: FxHashMap<Box<[u8]>, u32>,
    terms: Vec<(Box<[u8]>, TermChain)>,
    /// Per term, its walk once a mapped cursor built it (reset when the
    /// term changes).
    walks: Vec<OnceLock<Arc<ChainWalk>>>,
}

impl ChainDict {
    /// Number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Ordinal of a term key.
    pub fn ord(&self, key: &[u8]) -> Option<u32> {
        self.ords.get(key).copied()
    }

    /// The chain of ordinal `ord`.
    pub fn chain(&self, ord: u32) -> Option<&TermChain> {
        self.terms.get(ord as usize).map(|t| &t.1)
    }

    /// Every key in key order with its ordinal, from `lo` (inclusive) to `hi` (exclusive).
    pub fn keys_between(&self, lo: &[u8], hi: &[u8]) -> Vec<(&[u8], u32)> {
        let mut keys: Vec<(&[u8], u32)> = self
            .terms
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| &**k >= lo && &**k < hi)
            .map(|(i, (k, _))| (&**k, i as u32))
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Every term with its chain, in ordinal order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &TermChain)> {
        self.terms.iter().map(|(k, t)| (&**k, t))
    }

    /// Every term's pieces (for the free-space map).
    pub fn pieces(&self) -> impl Iterator<Item = &Piece> {
        self.terms.iter().flat_map(|t| t.1.pieces.iter())
    }
}

/// What one flush changed for one term: pieces replaced (a relocation) or
/// extended, and chunks appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermDelta {
    /// The term key.
    pub key: Box<[u8]>,
    /// Leading pieces the flush left as they were.
    pub keep: u32,
    /// The pieces after those, as the flush left them.
    pub pieces: Vec<Piece>,
    /// The chunks the flush appended.
    pub chunks: Vec<Chunk>,
}

/// Applies a flush's deltas to `dict` (a new term takes its delta's
/// vectors as they are).
pub fn apply(dict: &mut ChainDict, deltas: Vec<TermDelta>) {
    for d in deltas {
        match dict.ords.get(&d.key) {
            Some(&o) => {
                dict.walks[o as usize] = OnceLock::new();
                let t = &mut dict.terms[o as usize].1;
                t.pieces.truncate(d.keep as usize);
                t.pieces.extend_from_slice(&d.pieces);
                t.chunks.extend_from_slice(&d.chunks);
            }
            None => {
                dict.ords.insert(d.key.clone(), dict.terms.len() as u32);
                dict.walks.push(OnceLock::new());
                dict.terms.push((
                    d.key,
                    TermChain {
                        pieces: d.pieces,
                        chunks: d.chunks,
                    },
                ));
            }
        }
    }
}

fn encode_region(r: &RegionInfo, out: &mut Vec<u8>) {
    codec::write_u32(out, r.doc_freq);
    codec::write_u64(out, r.total_term_freq);
    for v in [r.zone_len, r.pos_len, r.off_len, r.after_len, r.before_len] {
        codec::write_u32(out, v);
    }
}

fn decode_region(data: &[u8], pos: &mut usize) -> Option<RegionInfo> {
    Some(RegionInfo {
        doc_freq: codec::read_u32(data, pos)?,
        total_term_freq: codec::read_u64(data, pos)?,
        zone_len: codec::read_u32(data, pos)?,
        pos_len: codec::read_u32(data, pos)?,
        off_len: codec::read_u32(data, pos)?,
        after_len: codec::read_u32(data, pos)?,
        before_len: codec::read_u32(data, pos)?,
    })
}

/// Encodes a flush's deltas as one log record: `len u32 | hash u64 | payload`.
pub fn encode_record(deltas: &[TermDelta]) -> Vec<u8> {
    let mut p = Vec::new();
    codec::write_u32(&mut p, deltas.len() as u32);
    for d in deltas {
        codec::write_u32(&mut p, d.key.len() as u32);
        p.extend_from_slice(&d.key);
        codec::write_u32(&mut p, d.keep);
        codec::write_u32(&mut p, d.pieces.len() as u32);
        for x in &d.pieces {
            codec::write_u64(&mut p, x.at);
            codec::write_u64(&mut p, x.len);
            codec::write_u64(&mut p, x.capacity);
        }
        codec::write_u32(&mut p, d.chunks.len() as u32);
        for c in &d.chunks {
            codec::write_u64(&mut p, c.offset);
            codec::write_u32(&mut p, c.len);
            codec::write_u32(&mut p, c.base);
            codec::write_u32(&mut p, c.last_doc);
            p.extend_from_slice(&c.sum.to_le_bytes());
            encode_region(&c.region, &mut p);
            // The chunk's score bound is in its header; records keep an
            // empty one where older ones held a copy.
            Impacts::default().write(&mut p);
        }
    }
    let mut out = Vec::with_capacity(p.len() + 12);
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&xxh3_64(&p).to_le_bytes());
    out.extend_from_slice(&p);
    out
}

fn decode_payload(p: &[u8]) -> Option<Vec<TermDelta>> {
    let pos = &mut 0;
    let n = codec::read_u32(p, pos)? as usize;
    let mut out = Vec::with_capacity(n.min(p.len()));
    for _ in 0..n {
        let klen = codec::read_u32(p, pos)? as usize;
        let key: Box<[u8]> = p.get(*pos..*pos + klen)?.into();
        *pos += klen;
        let keep = codec::read_u32(p, pos)?;
        let np = codec::read_u32(p, pos)? as usize;
        let mut pieces = Vec::with_capacity(np.min(p.len()));
        for _ in 0..np {
            pieces.push(Piece {
                at: codec::read_u64(p, pos)?,
                len: codec::read_u64(p, pos)?,
                capacity: codec::read_u64(p, pos)?,
            });
        }
        let nc = codec::read_u32(p, pos)? as usize;
        let mut chunks = Vec::with_capacity(nc.min(p.len()));
        for _ in 0..nc {
            let offset = codec::read_u64(p, pos)?;
            let len = codec::read_u32(p, pos)?;
            let base = codec::read_u32(p, pos)?;
            let last_doc = codec::read_u32(p, pos)?;
            let sum = u64::from_le_bytes(p.get(*pos..*pos + 8)?.try_into().ok()?);
            *pos += 8;
            let region = decode_region(p, pos)?;
            Impacts::read(p, pos)?;
            chunks.push(Chunk {
                offset,
                len,
                base,
                last_doc,
                sum,
                region,
            });
        }
        out.push(TermDelta {
            key,
            keep,
            pieces,
            chunks,
        });
    }
    (*pos == p.len()).then_some(out)
}

/// Replays the log `data` (the committed part of a `.chl` file) into a dictionary.
pub fn replay(path: &Path, data: &[u8]) -> Result<ChainDict> {
    let mut dict = ChainDict::default();
    let mut at = 0usize;
    while at < data.len() {
        let bad = |what: &str| Error::corrupt(path, format!("chain log record at byte {at}: {what}"));
        let head = data.get(at..at + 12).ok_or_else(|| bad("truncated header"))?;
        let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        let sum = u64::from_le_bytes(head[4..12].try_into().unwrap());
        let payload = data
            .get(at + 12..at + 12 + len)
            .ok_or_else(|| bad("truncated payload"))?;
        if xxh3_64(payload) != sum {
            return Err(bad("checksum mismatch"));
        }
        let deltas = decode_payload(payload).ok_or_else(|| bad("damaged payload"))?;
        apply(&mut dict, deltas);
        at += 12 + len;
    }
    Ok(dict)
}

/// A chain file and its dictionary, shared by a writer and its snapshots.
#[derive(Debug)]
pub struct Chain {
    /// Path of the chain file (`.chn`).
    pub path: PathBuf,
    /// The open chain file.
    pub file: File,
    /// The dictionary.
    pub dict: RwLock<ChainDict>,
    /// Chunks read from a mapping and found sound: (file offset, hash).
    verified: std::sync::Mutex<std::collections::HashSet<(u64, u64)>>,
}

impl Chain {
    /// Opens the chain file at `path` with the dictionary of its log.
    pub fn open(path: &Path, writable: bool, dict: ChainDict) -> Result<Arc<Chain>> {
        let file = crate::storage::mode::create_options()
            .read(true)
            .write(writable)
            .create(writable)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Arc::new(Chain {
            path: path.to_path_buf(),
            file,
            dict: RwLock::new(dict),
            verified: Default::default(),
        }))
    }

    /// The chunks of `ord` below `max_doc`, with the pieces holding them.
    pub fn view(&self, ord: u32, max_doc: DocId) -> Option<(Vec<Piece>, Vec<Chunk>)> {
        let dict = self.dict.read().unwrap_or_else(|p| p.into_inner());
        let t = dict.chain(ord)?;
        let chunks = t.visible(max_doc).to_vec();
        let end = chunks.last().map_or(0, |c| c.offset + c.len as u64);
        let mut pieces = Vec::with_capacity(t.pieces.len());
        let mut covered = 0;
        for p in &t.pieces {
            if covered >= end {
                break;
            }
            pieces.push(*p);
            covered += p.len;
        }
        Some((pieces, chunks))
    }

    /// The walk over the chunks of `ord` below `max_doc`: the one kept for
    /// the term when it covers exactly those chunks, else `build(pieces,
    /// chunks)`, kept when it covers all of the term as it still is.
    pub fn walk_cached(
        &self,
        ord: u32,
        max_doc: DocId,
        build: impl FnOnce(&[Piece], &[Chunk]) -> Result<ChainWalk>,
    ) -> Result<Option<Arc<ChainWalk>>> {
        {
            let dict = self.dict.read().unwrap_or_else(|p| p.into_inner());
            let Some(t) = dict.chain(ord) else {
                return Ok(None);
            };
            if let Some(w) = dict.walks[ord as usize].get() {
                if w.chunks.len() == t.visible(max_doc).len() {
                    return Ok(Some(w.clone()));
                }
            }
        }
        let Some((pieces, chunks)) = self.view(ord, max_doc) else {
            return Ok(None);
        };
        let walk = Arc::new(build(&pieces, &chunks)?);
        let dict = self.dict.read().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = dict.chain(ord) {
            if t.chunks.len() == chunks.len() && t.pieces == pieces {
                let _ = dict.walks[ord as usize].set(walk.clone());
            }
        }
        Ok(Some(walk))
    }

    /// The file offset of each chunk (a chunk lies within one piece).
    pub fn locate(&self, pieces: &[Piece], chunks: &[Chunk]) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(chunks.len());
        let (mut k, mut start) = (0usize, 0u64);
        for c in chunks {
            while k < pieces.len() && start + pieces[k].len <= c.offset {
                start += pieces[k].len;
                k += 1;
            }
            match pieces.get(k) {
                Some(p) if c.offset + c.len as u64 <= start + p.len => out.push(p.at + (c.offset - start)),
                _ => {
                    return Err(Error::corrupt(
                        &self.path,
                        "a chunk is not within one piece of its term",
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Checks `bytes`, the chunk at file offset `at`, against its hash
    /// `sum`; with `remember`, a chunk found sound is not checked again.
    pub fn check_chunk(&self, bytes: &[u8], at: u64, sum: u64, remember: bool) -> Result<()> {
        if remember
            && self
                .verified
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&(at, sum))
        {
            return Ok(());
        }
        if xxh3_64(bytes) != sum {
            return Err(Error::corrupt(
                &self.path,
                format!("chunk at byte {at} fails its checksum"),
            ));
        }
        if remember {
            self.verified
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert((at, sum));
        }
        Ok(())
    }
}

/// Terms of at most this many bytes are short: a flush packs their new
/// data, with that of the runs it merges, into one new [`PackedRun`]
/// instead of updating a block per term in place. Longer terms live in
/// whole blocks.
pub const PACK_MAX: u64 = 32 * 1024;
/// Runs of one level that merge into one of the next level.
pub const RUN_MERGE: usize = 3;

/// Which runs a flush merges into the run it writes: runs `from..` of
/// `runs` (the newest), and the new run's level. Runs of level `l` merge
/// once [`RUN_MERGE`] of them would exist, so at most `RUN_MERGE - 1` of
/// each level remain and every byte is rewritten once per level.
pub fn merge_plan(runs: &[PackedRun]) -> (usize, u32) {
    let (mut from, mut level) = (runs.len(), 0);
    loop {
        let n = runs[..from].iter().rev().take_while(|r| r.level == level).count();
        if n + 1 < RUN_MERGE {
            return (from, level);
        }
        from -= n;
        level += 1;
    }
}

/// Smallest slot (legacy: chains written before packed runs): terms whose data is at most [`MAX_SLOT`] bytes share
/// blocks, each in a slot of a power-of-two size, so that a rare term does
/// not take a whole block.
pub const MIN_SLOT: u64 = 64;
/// Largest slot; a term that outgrows it moves to whole blocks.
pub const MAX_SLOT: u64 = 4096;

/// The slot size holding `n` bytes.
pub fn slot_class(n: u64) -> u64 {
    n.max(MIN_SLOT).next_power_of_two()
}

/// The free space of a chain file: runs of whole blocks, and free slots of
/// blocks split into slots of one size. Derived from the pieces in use.
#[derive(Debug, Default, Clone)]
pub struct Space {
    /// Free runs of blocks.
    pub blocks: FreeMap,
    /// Free slot offsets by slot size.
    slots: BTreeMap<u64, Vec<u64>>,
}

impl Space {
    /// The free space of a file of `file_len` bytes whose pieces in use are
    /// `pieces` (a piece with less capacity than a block is a slot).
    pub fn derive<'a>(file_len: u64, pieces: impl Iterator<Item = &'a Piece>) -> Space {
        let mut slabs: BTreeMap<u64, (u64, std::collections::HashSet<u64>)> = BTreeMap::new();
        let mut whole = Vec::new();
        for p in pieces.filter(|p| p.capacity > 0) {
            if p.capacity < BLOCK_BYTES {
                let e = slabs
                    .entry(p.at / BLOCK_BYTES)
                    .or_insert((p.capacity, Default::default()));
                e.1.insert(p.at);
            } else {
                whole.push(*p);
            }
        }
        let slab_pieces: Vec<Piece> = slabs
            .keys()
            .map(|&b| Piece {
                at: b * BLOCK_BYTES,
                len: 0,
                capacity: BLOCK_BYTES,
            })
            .collect();
        let blocks = FreeMap::derive(file_len, whole.iter().chain(&slab_pieces));
        let mut slots: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (b, (class, used)) in slabs {
            let free = slots.entry(class).or_default();
            let start = b * BLOCK_BYTES;
            for k in (0..BLOCK_BYTES / class).rev() {
                let at = start + k * class;
                if !used.contains(&at) {
                    free.push(at);
                }
            }
        }
        Space { blocks, slots }
    }

    /// A free slot of size `class` (a power of two from [`MIN_SLOT`] to
    /// [`MAX_SLOT`]), splitting a new block when none is free.
    /// Returns the slot, and whether a new block was split for it.
    pub fn allocate_slot(&mut self, class: u64) -> (u64, bool) {
        let free = self.slots.entry(class).or_default();
        if let Some(at) = free.pop() {
            return (at, false);
        }
        let start = self.blocks.allocate(1) * BLOCK_BYTES;
        for k in (1..BLOCK_BYTES / class).rev() {
            free.push(start + k * class);
        }
        (start, true)
    }

    /// Returns a slot.
    pub fn free_slot(&mut self, at: u64, class: u64) {
        self.slots.entry(class).or_default().push(at);
    }

    /// Free slots of every size.
    pub fn free_slots(&self) -> usize {
        self.slots.values().map(Vec::len).sum()
    }

    /// The free space as pieces: runs of blocks, and slots (below the end
    /// of the file).
    pub fn free_pieces(&self) -> Vec<Piece> {
        let runs = self.blocks.runs.iter().map(|(&start, &n)| Piece {
            at: start * BLOCK_BYTES,
            len: 0,
            capacity: n * BLOCK_BYTES,
        });
        let slots = self.slots.iter().flat_map(|(&class, ats)| {
            ats.iter().map(move |&at| Piece {
                at,
                len: 0,
                capacity: class,
            })
        });
        runs.chain(slots).collect()
    }
}

/// Free runs of blocks of a chain file, derived from the pieces in use.
#[derive(Debug, Default, Clone)]
pub struct FreeMap {
    /// Start block → number of blocks.
    runs: BTreeMap<u64, u64>,
    /// Blocks in the file.
    end: u64,
}

impl FreeMap {
    /// The free runs of a file of `file_len` bytes whose used runs are `pieces`.
    pub fn derive<'a>(file_len: u64, pieces: impl Iterator<Item = &'a Piece>) -> FreeMap {
        let end = file_len.div_ceil(BLOCK_BYTES);
        let mut used: Vec<(u64, u64)> = pieces
            .filter(|p| p.capacity > 0)
            .map(|p| (p.at / BLOCK_BYTES, p.capacity.div_ceil(BLOCK_BYTES)))
            .collect();
        used.sort_unstable();
        let mut map = FreeMap {
            runs: BTreeMap::new(),
            end,
        };
        let mut next = 0;
        for (start, n) in used {
            if start > next {
                map.runs.insert(next, start - next);
            }
            next = next.max(start + n);
        }
        if end > next {
            map.runs.insert(next, end - next);
        }
        map
    }

    /// Blocks in the file (allocated or free).
    pub fn end_block(&self) -> u64 {
        self.end
    }

    /// Free blocks.
    pub fn free_blocks(&self) -> u64 {
        self.runs.values().sum()
    }

    /// Allocates `n` contiguous blocks (first fit, else at the end of the
    /// file); returns the first.
    pub fn allocate(&mut self, n: u64) -> u64 {
        let fit = self.runs.iter().find(|(_, &len)| len >= n).map(|(&s, &l)| (s, l));
        if let Some((start, len)) = fit {
            self.runs.remove(&start);
            if len > n {
                self.runs.insert(start + n, len - n);
            }
            return start;
        }
        // A free run at the very end grows into the new space.
        if let Some((&s, &l)) = self.runs.iter().next_back() {
            if s + l == self.end {
                self.runs.remove(&s);
                self.end = s + n;
                return s;
            }
        }
        let start = self.end;
        self.end += n;
        start
    }

    /// Returns `n` blocks from `start` to the map.
    pub fn free(&mut self, start: u64, n: u64) {
        if n == 0 {
            return;
        }
        let (mut s, mut len) = (start, n);
        if let Some((&ps, &pl)) = self.runs.range(..start).next_back() {
            if ps + pl == start {
                self.runs.remove(&ps);
                s = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.runs.get(&(start + n)) {
            self.runs.remove(&(start + n));
            len += nl;
        }
        self.runs.insert(s, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(offset: u64, len: u32, base: u32) -> Chunk {
        Chunk {
            offset,
            len,
            base,
            last_doc: base + 3,
            sum: offset * 31 + len as u64,
            region: RegionInfo {
                doc_freq: 2,
                total_term_freq: 5,
                zone_len: 7,
                pos_len: 3,
                off_len: 4,
                after_len: 0,
                before_len: 9,
            },
        }
    }

    #[test]
    fn log_records_round_trip_and_damage_is_caught() {
        let deltas = vec![
            TermDelta {
                key: b"\x01alpha".to_vec().into(),
                keep: 0,
                pieces: vec![Piece {
                    at: 8192,
                    len: 100,
                    capacity: 8192,
                }],
                chunks: vec![chunk(0, 100, 0)],
            },
            TermDelta {
                key: b"\x00beta".to_vec().into(),
                keep: 0,
                pieces: vec![
                    Piece {
                        at: 0,
                        len: 8192,
                        capacity: 8192,
                    },
                    Piece {
                        at: 16384,
                        len: 40,
                        capacity: 8192,
                    },
                ],
                chunks: vec![chunk(0, 8000, 0), chunk(8000, 232, 10)],
            },
        ];
        let mut log = encode_record(&deltas);
        let more = vec![TermDelta {
            key: b"\x01alpha".to_vec().into(),
            keep: 0,
            pieces: vec![Piece {
                at: 8192,
                len: 150,
                capacity: 8192,
            }],
            chunks: vec![chunk(100, 50, 20)],
        }];
        log.extend(encode_record(&more));
        let tail = Piece {
            at: 40960,
            len: 7,
            capacity: 8192,
        };
        log.extend(encode_record(&[TermDelta {
            key: b"\x00beta".to_vec().into(),
            keep: 1,
            pieces: vec![tail],
            chunks: vec![chunk(8232, 7, 30)],
        }]));
        let path = Path::new("x.chl");
        let dict = replay(path, &log).unwrap();
        assert_eq!(dict.len(), 2);
        let a = dict.chain(dict.ord(b"\x01alpha").unwrap()).unwrap();
        assert_eq!(a.chunks, vec![chunk(0, 100, 0), chunk(100, 50, 20)]);
        assert_eq!(a.len(), 150);
        assert_eq!(a.visible(20).len(), 1);
        assert_eq!(a.visible(21).len(), 2);
        let b = dict.chain(dict.ord(b"\x00beta").unwrap()).unwrap();
        assert_eq!(b.pieces.len(), 2);
        assert_eq!(b.pieces[1], tail);
        assert_eq!(b.chunks.len(), 3);
        let r = region_totals(&a.chunks);
        assert_eq!(r.doc_freq, 4);
        assert_eq!(r.before_len, 18);
        for i in 0..log.len() {
            let mut bad = log.clone();
            bad[i] ^= 0x40;
            assert!(replay(path, &bad).is_err(), "flipped byte {i}");
        }
        assert!(replay(path, &log[..log.len() - 1]).is_err());
    }

    #[test]
    fn slots_are_shared_reused_and_derived_again() {
        let mut sp = Space::derive(0, [].iter());
        let (a, carved) = sp.allocate_slot(64);
        assert!(carved);
        let (b, carved) = sp.allocate_slot(64);
        assert!(!carved);
        let (c, _) = sp.allocate_slot(256);
        assert_eq!(a / BLOCK_BYTES, b / BLOCK_BYTES);
        assert_ne!(a / BLOCK_BYTES, c / BLOCK_BYTES);
        assert_eq!(sp.blocks.end_block(), 2);
        sp.free_slot(a, 64);
        assert_eq!(sp.allocate_slot(64).0, a);
        // Derived from the pieces in use: the same free slots.
        let used = [
            Piece {
                at: a,
                len: 10,
                capacity: 64,
            },
            Piece {
                at: b,
                len: 64,
                capacity: 64,
            },
            Piece {
                at: c,
                len: 1,
                capacity: 256,
            },
        ];
        let mut d = Space::derive(2 * BLOCK_BYTES, used.iter());
        assert_eq!(d.free_slots(), (128 - 2) + (32 - 1));
        assert_eq!(d.blocks.free_blocks(), 0);
        let (e, _) = d.allocate_slot(64);
        assert!(e != a && e != b && e / BLOCK_BYTES == a / BLOCK_BYTES);
        assert_eq!(slot_class(1), 64);
        assert_eq!(slot_class(65), 128);
        assert_eq!(slot_class(4096), 4096);
    }

    #[test]
    fn runs_merge_like_counting_in_base_run_merge() {
        let mut runs: Vec<PackedRun> = Vec::new();
        for flush in 1..=200usize {
            let (from, level) = merge_plan(&runs);
            assert!(runs[from..].iter().all(|r| r.level < level), "only lower levels merge");
            runs.truncate(from);
            runs.push(PackedRun {
                first_block: flush as u64,
                blocks: 1,
                level,
            });
            let (mut x, mut digits) = (flush, Vec::new());
            let mut l = 0;
            while x > 0 {
                digits.extend(std::iter::repeat_n(l, x % RUN_MERGE));
                x /= RUN_MERGE;
                l += 1;
            }
            digits.reverse();
            assert_eq!(
                runs.iter().map(|r| r.level).collect::<Vec<_>>(),
                digits,
                "flush {flush}"
            );
        }
    }

    #[test]
    fn free_map_reuses_and_coalesces() {
        let pieces = [
            Piece {
                at: 0,
                len: 10,
                capacity: 8192,
            },
            Piece {
                at: 3 * 8192,
                len: 10,
                capacity: 2 * 8192,
            },
        ];
        let mut m = FreeMap::derive(6 * 8192, pieces.iter());
        assert_eq!(m.free_blocks(), 3); // 1, 2 and 5
        assert_eq!(m.allocate(2), 1);
        assert_eq!(m.allocate(1), 5);
        assert_eq!(m.allocate(2), 6);
        assert_eq!(m.end_block(), 8);
        m.free(1, 2);
        m.free(3, 2);
        assert_eq!(m.free_blocks(), 4);
        assert_eq!(m.allocate(4), 1);
        // A free tail grows instead of leaving a hole.
        m.free(6, 2);
        assert_eq!(m.allocate(3), 6);
        assert_eq!(m.end_block(), 9);
    }
}
