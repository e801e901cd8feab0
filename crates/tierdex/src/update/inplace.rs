//! The in-place strategies' flush (DESIGN §0, §5): a flushed batch's
//! postings are appended to each term's chain in the chain file
//! ([`crate::layout::chain`]) instead of becoming a segment to merge.
//!
//! For every term of the batch the flush appends one chunk, the term's
//! region as the batch's segment wrote it:
//! * `in-place`: the chunk's first bytes go into the free end of the
//!   term's last 8 KiB block (read, patched and written back), the rest
//!   into new blocks taken from the free-space map or the end of the file.
//!   A term's data becomes a chain of non-contiguous pieces.
//! * `in-place-contiguous`: a term's data is one run with 25% spare room;
//!   a chunk that does not fit moves the whole run to a new place 1.25
//!   times its size (the old run is freed once the move is committed).
//!
//! All reads of a flush (last blocks, runs to move) go out in one batched
//! submission, then all writes in another ([`crate::storage::batch`]), at
//! most 1,024 in flight; then the file is synced and the flush's log record
//! appended and synced. The manifest commit that follows makes it visible
//! to a reopened index.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fst::Streamer;
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, Result};
use crate::index::manifest::{ChainMeta, SegmentMeta, CHAIN_EXT, CHAIN_LOG_EXT};
use crate::index::segment::SegmentReader;
use crate::layout::chain::{
    self, slot_class, Chain, Chunk, Piece, Space, TermDelta, BLOCK_BYTES, MAX_SLOT, OVER_ALLOCATION,
};
use crate::storage::batch::{self, BatchCounts};
use crate::termdict::TermRef;

/// What a flush wrote to the chain, to be committed.
#[derive(Debug)]
pub struct Absorbed {
    /// The term changes (already in the log, past the committed length).
    pub deltas: Vec<TermDelta>,
    /// Log length and chain file length once committed.
    pub log_len: u64,
    /// Bytes of the chain file in use.
    pub file_len: u64,
    /// Batched I/O of the flush.
    pub reads: BatchCounts,
    /// Batched writes of the flush.
    pub writes: BatchCounts,
}

/// The writer's side of a chain: its file, log and free-space map.
pub struct ChainWriter {
    chain: Arc<Chain>,
    log: File,
    log_path: PathBuf,
    committed: ChainMeta,
    space: Space,
    /// Space freed by the last flush: reusable once the next one commits
    /// (a search may still be reading it until then).
    freed: Vec<Piece>,
    /// Space freed by the flush being committed.
    freeing: Vec<Piece>,
}

impl ChainWriter {
    /// The writer of chained segment `meta` whose chain is `chain` (opened
    /// writable). Drops what a crashed flush left past the committed log.
    pub fn open(dir: &Path, meta: &SegmentMeta, chain: Arc<Chain>) -> Result<ChainWriter> {
        let committed = meta
            .chain
            .clone()
            .ok_or_else(|| Error::InvalidArgument(format!("segment {} is not chained", meta.name)))?;
        let log_path = dir.join(meta.file_name(CHAIN_LOG_EXT));
        let log = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, e))?;
        log.set_len(committed.log_len).map_err(|e| Error::io(&log_path, e))?;
        let space = {
            let dict = chain.dict.read().unwrap_or_else(|p| p.into_inner());
            Space::derive(committed.file_len, dict.pieces())
        };
        Ok(ChainWriter {
            chain,
            log,
            log_path,
            committed,
            space,
            freed: Vec::new(),
            freeing: Vec::new(),
        })
    }

    /// A new, empty chained segment `name` in `dir`.
    pub fn create(dir: &Path, name: &str, contiguous: bool) -> Result<(SegmentMeta, ChainWriter)> {
        let meta = SegmentMeta {
            name: name.to_string(),
            max_doc: 0,
            fields: Default::default(),
            num_terms: 0,
            files: Default::default(),
            deletes: None,
            chain: Some(ChainMeta {
                file_len: 0,
                log_len: 0,
                contiguous,
                parts: Vec::new(),
            }),
        };
        let path = dir.join(meta.file_name(CHAIN_EXT));
        let chain = Chain::open(&path, true, Default::default())?;
        chain.file.set_len(0).map_err(|e| Error::io(&path, e))?;
        let w = ChainWriter::open(dir, &meta, chain)?;
        Ok((meta, w))
    }

    /// The chain (shared with the segment's readers).
    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    /// Free blocks of the chain file.
    pub fn free_blocks(&self) -> u64 {
        self.space.blocks.free_blocks()
    }

    /// Appends every term of `part` (a freshly written grouped segment of
    /// the flushed documents, numbered from `base` in the chain) to the
    /// chain file, and the flush's record to the log; nothing is visible
    /// until [`ChainWriter::commit`].
    pub fn absorb(&mut self, part: &SegmentReader, base: u32) -> Result<Absorbed> {
        let files = part
            .postings()
            .ok_or_else(|| Error::InvalidArgument("a chain absorbs plain segments only".into()))?;
        let pst = files.doc_file();
        let mut buf = Vec::new();
        let regions = pst.read(0..pst.len(), &mut buf)?;
        let contiguous = self.committed.contiguous;
        let shared = self.chain.clone();
        let dict = shared.dict.read().unwrap_or_else(|p| p.into_inner());
        let mut deltas: Vec<TermDelta> = Vec::with_capacity(part.meta().num_terms as usize);
        // Data to write per delta, and the I/O plan.
        let mut payloads: Vec<(usize, usize)> = Vec::new();
        let mut plan = Plan::default();
        let mut stream = files.terms().fst().stream();
        while let Some((key, value)) = stream.next() {
            let TermRef::Region(start) = files.terms().term_ref(value) else {
                return Err(Error::InvalidArgument(
                    "the in-place strategies need the grouped layout".into(),
                ));
            };
            let info = files.resolve(TermRef::Region(start))?;
            let start = start as usize;
            let end = info.doc_offset as usize + info.region.len() as usize;
            let bytes = regions
                .get(start..end)
                .ok_or_else(|| Error::corrupt(pst.path(), "term region beyond the end of the file"))?;
            let mut c = part.cursor(&info)?;
            let last = c
                .last_doc()
                .and_then(|d| d.checked_add(base))
                .ok_or_else(|| Error::corrupt(pst.path(), "damaged skip table"))?;
            let old = dict.ord(key).and_then(|o| dict.chain(o));
            let mut pieces = old.map_or_else(Vec::new, |t| t.pieces.clone());
            let offset = pieces.iter().map(|p| p.len).sum();
            let chunk = Chunk {
                offset,
                len: bytes.len() as u32,
                base,
                last_doc: last,
                sum: xxh3_64(bytes),
                region: info.region,
                impacts: *c.term_impacts(),
            };
            let at = payloads.len();
            payloads.push((start, end));
            self.place(&mut pieces, contiguous, at, bytes.len() as u64, &mut plan);
            deltas.push(TermDelta {
                key: key.into(),
                pieces,
                chunks: vec![chunk],
            });
        }
        drop(dict);
        let (reads, writes) = plan.run(&self.chain, regions, &payloads)?;
        let file_len = self.space.blocks.end_block() * BLOCK_BYTES;
        let f = &self.chain.file;
        if f.metadata().map_err(|e| Error::io(&self.chain.path, e))?.len() < file_len {
            f.set_len(file_len).map_err(|e| Error::io(&self.chain.path, e))?;
        }
        f.sync_data().map_err(|e| Error::io(&self.chain.path, e))?;
        let record = chain::encode_record(&deltas);
        self.log
            .write_all_at(&record, self.committed.log_len)
            .and_then(|_| self.log.sync_data())
            .map_err(|e| Error::io(&self.log_path, e))?;
        Ok(Absorbed {
            deltas,
            log_len: self.committed.log_len + record.len() as u64,
            file_len,
            reads,
            writes,
        })
    }

    /// Appends `len` bytes (payload `at`) to a term whose data lies in
    /// `pieces`:
    /// * a term of at most [`MAX_SLOT`] bytes lives in a slot, moving to a
    ///   larger one as it grows;
    /// * a larger one lives in whole blocks: non-contiguous, the free end
    ///   of its last block first, then new blocks; contiguous, after its
    ///   data when it fits its run, else the run moves to a new one 1.25
    ///   times the size.
    fn place(&mut self, pieces: &mut Vec<Piece>, contiguous: bool, at: usize, len: u64, plan: &mut Plan) {
        let used: u64 = pieces.iter().map(|p| p.len).sum();
        let total = used + len;
        let in_slot = pieces.first().is_some_and(|p| p.capacity < BLOCK_BYTES);
        if pieces.is_empty() || in_slot || (contiguous && total > pieces[0].capacity) {
            if let Some(p) = pieces.first().filter(|p| total <= p.capacity) {
                // Fits its slot or run.
                plan.patch(p.at + p.len, at, 0, len);
                pieces[0].len = total;
                return;
            }
            // (Re)allocate: a slot, or a run of blocks.
            let (start, capacity) = if total <= MAX_SLOT {
                let class = slot_class(total);
                (self.space.allocate_slot(class), class)
            } else {
                let want = if contiguous {
                    (total as f64 * OVER_ALLOCATION).ceil() as u64
                } else {
                    total
                };
                let blocks = want.div_ceil(BLOCK_BYTES);
                (self.space.blocks.allocate(blocks) * BLOCK_BYTES, blocks * BLOCK_BYTES)
            };
            let mut off = 0;
            for p in pieces.iter() {
                plan.moves.push((p.at, start + off, p.len));
                off += p.len;
                self.freeing.push(*p);
            }
            plan.writes.push(Write::Payload {
                file_at: start + used,
                payload: at,
                from: 0,
                len,
            });
            *pieces = vec![Piece {
                at: start,
                len: total,
                capacity,
            }];
            return;
        }
        // Non-contiguous, in blocks (or contiguous and fitting).
        let mut done = 0;
        if let Some(p) = pieces.last_mut() {
            let n = (p.capacity - p.len).min(len);
            if n > 0 {
                plan.patch(p.at + p.len, at, 0, n);
                p.len += n;
                done = n;
            }
        }
        if done < len {
            let rest = len - done;
            let blocks = rest.div_ceil(BLOCK_BYTES);
            let start = self.space.blocks.allocate(blocks) * BLOCK_BYTES;
            plan.writes.push(Write::Payload {
                file_at: start,
                payload: at,
                from: done,
                len: rest,
            });
            pieces.push(Piece {
                at: start,
                len: rest,
                capacity: blocks * BLOCK_BYTES,
            });
        }
    }

    /// Records that the manifest now covers `absorbed` (and applies it to
    /// the shared dictionary); the runs freed by the previous flush become
    /// reusable.
    pub fn commit(&mut self, absorbed: &Absorbed, meta: &ChainMeta) {
        for p in self.freed.drain(..) {
            match p.capacity < BLOCK_BYTES {
                true => self.space.free_slot(p.at, p.capacity),
                false => self.space.blocks.free(p.at / BLOCK_BYTES, p.capacity / BLOCK_BYTES),
            }
        }
        self.freed = std::mem::take(&mut self.freeing);
        self.committed = meta.clone();
        self.committed.log_len = absorbed.log_len;
        self.committed.file_len = absorbed.file_len;
    }

    /// Applies a flush's changes to the shared dictionary (searches of
    /// older snapshots do not see the new chunks).
    pub fn publish(&self, absorbed: &Absorbed) {
        let mut dict = self.chain.dict.write().unwrap_or_else(|p| p.into_inner());
        chain::apply(&mut dict, &absorbed.deltas);
    }

    /// Terms in the dictionary.
    pub fn num_terms(&self) -> u64 {
        self.chain.dict.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// Forgets an absorbed flush that will not be committed: its blocks
    /// return to the free map only on the next open (they are past what is
    /// committed, so nothing refers to them).
    pub fn abandon(&mut self) {
        self.freeing.clear();
    }
}

/// A write of a flush.
enum Write {
    /// A block read, patched and written back: block at `block_at`; the
    /// patches are `(offset in block, payload, from, len)`.
    Block {
        block_at: u64,
        patches: Vec<(u64, usize, u64, u64)>,
    },
    /// Payload bytes `from..from + len` at `file_at`.
    Payload {
        file_at: u64,
        payload: usize,
        from: u64,
        len: u64,
    },
}

/// The reads and writes of one flush.
#[derive(Default)]
struct Plan {
    writes: Vec<Write>,
    /// Block start → index in `writes` (one read-modify-write per block).
    blocks: std::collections::HashMap<u64, usize>,
    /// Runs to move: (from, to, len).
    moves: Vec<(u64, u64, u64)>,
}

impl Plan {
    /// Patches payload bytes `from..from + len` in at file offset `file_at`,
    /// block by block (the first one read and written back whole).
    fn patch(&mut self, file_at: u64, payload: usize, from: u64, len: u64) {
        let mut off = 0;
        while off < len {
            let pos = file_at + off;
            let block_at = pos / BLOCK_BYTES * BLOCK_BYTES;
            let n = (block_at + BLOCK_BYTES - pos).min(len - off);
            let i = *self.blocks.entry(block_at).or_insert_with(|| {
                self.writes.push(Write::Block {
                    block_at,
                    patches: Vec::new(),
                });
                self.writes.len() - 1
            });
            if let Write::Block { patches, .. } = &mut self.writes[i] {
                patches.push((pos - block_at, payload, from + off, n));
            }
            off += n;
        }
    }

    /// Reads every block to patch and every run to move in one batch, then
    /// writes everything in another.
    fn run(&self, chain: &Chain, regions: &[u8], payloads: &[(usize, usize)]) -> Result<(BatchCounts, BatchCounts)> {
        let io = |e| Error::io(&chain.path, e);
        let len = chain.file.metadata().map_err(io)?.len();
        // Reads: blocks (those inside the file; a block past its end is new).
        let mut read_at = Vec::new();
        let mut read_len = Vec::new();
        for w in &self.writes {
            if let Write::Block { block_at, .. } = w {
                if *block_at < len {
                    read_at.push(*block_at);
                    read_len.push(BLOCK_BYTES.min(len - block_at) as usize);
                }
            }
        }
        for &(from, _, n) in &self.moves {
            read_at.push(from);
            read_len.push(n as usize);
        }
        let mut data = vec![0u8; read_len.iter().sum()];
        let mut targets: Vec<&mut [u8]> = Vec::with_capacity(read_len.len());
        let mut rest = data.as_mut_slice();
        for &n in &read_len {
            let (head, tail) = rest.split_at_mut(n);
            targets.push(head);
            rest = tail;
        }
        let reads = batch::read_many(&chain.file, &read_at, &mut targets).map_err(io)?;
        drop(targets);
        // Writes: the blocks read back (patched), then the other bytes; any
        // part of those that falls in a block read back goes into it, so no
        // two writes of the batch overlap.
        let payload = |p: usize, from: u64, n: u64| {
            let (s, _) = payloads[p];
            &regions[s + from as usize..s + (from + n) as usize]
        };
        let mut blocks: std::collections::HashMap<u64, Vec<u8>> = Default::default();
        let mut consumed = 0usize;
        let mut read_i = 0usize;
        for w in &self.writes {
            if let Write::Block { block_at, patches } = w {
                let mut block = vec![0u8; BLOCK_BYTES as usize];
                if *block_at < len {
                    let n = read_len[read_i];
                    block[..n].copy_from_slice(&data[consumed..consumed + n]);
                    consumed += n;
                    read_i += 1;
                }
                for &(at, p, from, n) in patches {
                    block[at as usize..(at + n) as usize].copy_from_slice(payload(p, from, n));
                }
                blocks.insert(*block_at, block);
            }
        }
        let mut direct: Vec<(u64, &[u8])> = Vec::new();
        for w in &self.writes {
            if let Write::Payload {
                file_at,
                payload: p,
                from,
                len: n,
            } = w
            {
                emit(&mut blocks, *file_at, payload(*p, *from, *n), &mut direct);
            }
        }
        for &(_, to, n) in &self.moves {
            emit(&mut blocks, to, &data[consumed..consumed + n as usize], &mut direct);
            consumed += n as usize;
        }
        let mut offsets: Vec<u64> = Vec::with_capacity(blocks.len() + direct.len());
        let mut refs: Vec<&[u8]> = Vec::with_capacity(blocks.len() + direct.len());
        for (at, b) in &blocks {
            offsets.push(*at);
            refs.push(b);
        }
        for (at, d) in direct {
            offsets.push(at);
            refs.push(d);
        }
        let writes = batch::write_many(&chain.file, &offsets, &refs).map_err(io)?;
        Ok((reads, writes))
    }
}

/// Writes `bytes` at `file_at`: the parts inside a block of `blocks` (read
/// back for patching) into it, the rest as direct writes (adjacent ones joined).
fn emit<'a>(
    blocks: &mut std::collections::HashMap<u64, Vec<u8>>,
    file_at: u64,
    bytes: &'a [u8],
    direct: &mut Vec<(u64, &'a [u8])>,
) {
    let mut off = 0usize;
    let mut run: Option<(u64, usize)> = None;
    let flush = |run: &mut Option<(u64, usize)>, end: usize, direct: &mut Vec<(u64, &'a [u8])>| {
        if let Some((at, from)) = run.take() {
            direct.push((at, &bytes[from..end]));
        }
    };
    while off < bytes.len() {
        let pos = file_at + off as u64;
        let block_at = pos / BLOCK_BYTES * BLOCK_BYTES;
        let n = ((block_at + BLOCK_BYTES - pos) as usize).min(bytes.len() - off);
        match blocks.get_mut(&block_at) {
            Some(b) => {
                flush(&mut run, off, direct);
                let at = (pos - block_at) as usize;
                b[at..at + n].copy_from_slice(&bytes[off..off + n]);
            }
            None => {
                run.get_or_insert((pos, off));
            }
        }
        off += n;
    }
    flush(&mut run, bytes.len(), direct);
}
