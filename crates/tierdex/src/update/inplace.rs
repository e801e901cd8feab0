//! The in-place strategies' flush (DESIGN §0, §5): a flushed batch's
//! postings are appended to each term's chain in the chain file
//! ([`crate::layout::chain`]) instead of becoming a segment to merge.
//!
//! For every term of the batch the flush appends one chunk, the term's
//! region as the batch's segment wrote it:
//! * a short term (its data at most [`PACK_MAX`] bytes, or as configured): the chunk goes
//!   into the flush's packed run, a contiguous run of new blocks written in
//!   one go, with the term's pieces from the runs the flush merges
//!   ([`chain::merge_plan`]); a short term has at most a piece per run;
//! * a long term, `in-place`: the chunk's first bytes go into the free end
//!   of the term's last 8 KiB block (read, patched and written back), the
//!   rest into new blocks taken from the free-space map or the end of the
//!   file. A term's data becomes a chain of non-contiguous pieces.
//! * a long term, `in-place-contiguous`: a term's data is one run with 25%
//!   spare room; a chunk that does not fit moves the whole run to a new
//!   place 1.25 times its size (the old run is freed once the move is
//!   committed).
//!
//! A term that outgrows [`PACK_MAX`] moves out of the runs into blocks.
//! Why short terms are packed: a flush of a few thousand documents touches
//! over a hundred thousand terms, nearly all of them rare, so updating each
//! in place rewrote most of the file's small-term blocks at every flush
//! (490 MB written for 18 MB of postings, 30 flushes of 2,000 generated
//! documents in); packed, the same flush writes about 8 MB for them.
//!
//! All reads of a flush (last blocks, runs to move or merge) go out in
//! batched submissions, then all writes ([`crate::storage::batch`]), at
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
use crate::index::lease;
use crate::index::manifest::{ChainMeta, PackedRun, SegmentMeta, CHAIN_EXT, CHAIN_LOG_EXT};
use crate::index::segment::SegmentReader;
use crate::layout::chain::{
    self, slot_class, Chain, Chunk, Piece, Space, TermDelta, BLOCK_BYTES, MAX_SLOT, OVER_ALLOCATION, PACK_MAX,
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
    /// The packed runs once committed.
    pub runs: Vec<PackedRun>,
    /// Batched I/O of the flush.
    pub reads: BatchCounts,
    /// Batched writes of the flush.
    pub writes: BatchCounts,
}

/// The writer's side of a chain: its file, log and free-space map.
///
/// Space a flush frees (moved data, merged runs) is held back, tagged with
/// the generation of the manifest that committed the flush, until it is
/// safe to reuse: once a later commit is made (a search of this process
/// may still be reading it until then), and once no reader of another
/// process holds a lease on an older generation ([`lease`]). A writer
/// opened while such readers live holds back all the free space it finds.
pub struct ChainWriter {
    chain: Arc<Chain>,
    dir: PathBuf,
    log: File,
    log_path: PathBuf,
    committed: ChainMeta,
    space: Space,
    /// Space freed by committed flushes, not reusable yet, with the
    /// generation that freed it.
    held: Vec<(u64, Piece)>,
    /// Space freed by the flush being committed.
    freeing: Vec<Piece>,
    /// Terms of at most this many bytes are packed.
    pack_max: u64,
}

impl ChainWriter {
    /// The writer of chained segment `meta` whose chain is `chain` (opened
    /// writable), as committed by manifest generation `generation`. Drops
    /// what a crashed flush left past the committed log.
    pub fn open(dir: &Path, meta: &SegmentMeta, chain: Arc<Chain>, generation: u64) -> Result<ChainWriter> {
        let committed = meta
            .chain
            .clone()
            .ok_or_else(|| Error::Internal(format!("segment {} is not chained", meta.name)))?;
        let log_path = dir.join(meta.file_name(CHAIN_LOG_EXT));
        let log = crate::storage::mode::create_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, e))?;
        log.set_len(committed.log_len).map_err(|e| Error::io(&log_path, e))?;
        let space = {
            let dict = chain.dict.read().unwrap_or_else(|p| p.into_inner());
            let runs: Vec<Piece> = committed
                .runs
                .iter()
                .map(|r| Piece {
                    at: r.first_block * BLOCK_BYTES,
                    len: 0,
                    capacity: r.blocks * BLOCK_BYTES,
                })
                .collect();
            Space::derive(committed.file_len, dict.pieces().chain(&runs))
        };
        let mut w = ChainWriter {
            chain,
            dir: dir.to_path_buf(),
            log,
            log_path,
            committed,
            space,
            held: Vec::new(),
            freeing: Vec::new(),
            pack_max: PACK_MAX,
        };
        // Readers of older generations may read what is free now (space
        // freed by the flushes before this open, which left no record).
        if lease::oldest(dir)?.is_some_and(|g| g < generation) {
            let free = w.space.free_pieces();
            tracing::info!(
                "readers of older commits of {} are open: its {} free pieces are held until they close",
                meta.name,
                free.len()
            );
            w.space = Space::derive(
                w.committed.file_len,
                w.space_in_use().iter().chain(&free),
            );
            w.held = free.into_iter().map(|p| (generation, p)).collect();
        }
        Ok(w)
    }

    /// The pieces in use: every term's, and the packed runs.
    fn space_in_use(&self) -> Vec<Piece> {
        let dict = self.chain.dict.read().unwrap_or_else(|p| p.into_inner());
        let runs = self.committed.runs.iter().map(|r| Piece {
            at: r.first_block * BLOCK_BYTES,
            len: 0,
            capacity: r.blocks * BLOCK_BYTES,
        });
        dict.pieces().copied().chain(runs).collect()
    }

    /// Packs terms of at most `pack_max` bytes (default [`PACK_MAX`]; 0
    /// packs none, and every term is updated in place).
    pub fn packing(mut self, pack_max: u64) -> ChainWriter {
        self.pack_max = pack_max;
        self
    }

    /// A new, empty chained segment `name` in `dir`.
    pub fn create(dir: &Path, name: &str, contiguous: bool) -> Result<(SegmentMeta, ChainWriter)> {
        let meta = SegmentMeta::empty_chain(name.to_string(), contiguous);
        let path = dir.join(meta.file_name(CHAIN_EXT));
        let chain = Chain::open(&path, true, Default::default())?;
        chain.file.set_len(0).map_err(|e| Error::io(&path, e))?;
        let w = ChainWriter::open(dir, &meta, chain, 0)?;
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
            .ok_or_else(|| Error::Internal("a chain absorbs plain segments only".into()))?;
        let t_loop = std::time::Instant::now();
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
        let mut pack = Pack::start(&self.chain, &self.committed.runs)?;
        let mut touched = vec![false; dict.len()];
        let mut stream = files.terms().fst().stream();
        while let Some((key, value)) = stream.next() {
            let TermRef::Region(start) = files.terms().term_ref(value) else {
                return Err(Error::Internal(
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
            let ord = dict.ord(key);
            if let Some(o) = ord {
                touched[o as usize] = true;
            }
            let old = ord.and_then(|o| dict.chain(o));
            let mut pieces = old.map_or_else(Vec::new, |t| t.pieces.clone());
            let offset = pieces.iter().map(|p| p.len).sum();
            let len = u32::try_from(bytes.len()).map_err(|_| {
                Error::InvalidArgument("a term's postings in one flush exceed 4 GiB: flush more often".into())
            })?;
            let chunk = Chunk {
                offset,
                len,
                base,
                last_doc: last,
                sum: xxh3_64(bytes),
                region: info.region,
            };
            let keep = if offset + bytes.len() as u64 <= self.pack_max {
                let keep = pack.repack(&self.chain, &mut pieces, bytes)?;
                pack.patch.push(deltas.len());
                keep
            } else {
                let at = payloads.len();
                payloads.push((start, end));
                self.place(&mut pieces, contiguous, at, bytes.len() as u64, &mut plan);
                // Only the pieces the flush changed are logged.
                let before = old.map_or(&[][..], |t| &t.pieces[..]);
                before.iter().zip(&pieces).take_while(|(a, b)| a == b).count()
            };
            deltas.push(TermDelta {
                key: key.into(),
                keep: keep as u32,
                pieces: pieces[keep..].to_vec(),
                chunks: vec![chunk],
            });
        }
        // The short terms the flush did not touch, in the runs it merges.
        if !pack.merged.is_empty() {
            for (o, (key, t)) in dict.iter().enumerate() {
                if touched[o] || !t.pieces.last().is_some_and(|p| pack.holds(p)) {
                    continue;
                }
                let mut pieces = t.pieces.clone();
                let keep = pack.repack(&self.chain, &mut pieces, &[])?;
                pack.patch.push(deltas.len());
                deltas.push(TermDelta {
                    key: key.into(),
                    keep: keep as u32,
                    pieces: pieces[keep..].to_vec(),
                    chunks: Vec::new(),
                });
            }
        }
        drop(dict);
        let t_plan = std::time::Instant::now();
        let (mut reads, mut writes) = plan.run(&self.chain, regions, &payloads)?;
        reads.add(pack.reads);
        let runs = pack.finish(
            &self.chain,
            &mut self.space,
            &mut deltas,
            &mut self.freeing,
            &mut writes,
        )?;
        let mut runs_after = self.committed.runs[..self.committed.runs.len() - pack.merged.len()].to_vec();
        runs_after.extend(runs);
        let t_run = t_plan.elapsed();
        let file_len = self.space.blocks.end_block() * BLOCK_BYTES;
        let f = &self.chain.file;
        if f.metadata().map_err(|e| Error::io(&self.chain.path, e))?.len() < file_len {
            f.set_len(file_len).map_err(|e| Error::io(&self.chain.path, e))?;
        }
        let t_sync = std::time::Instant::now();
        f.sync_data().map_err(|e| Error::io(&self.chain.path, e))?;
        tracing::debug!(
            terms = deltas.len(),
            payload_bytes = regions.len(),
            moves = plan.moves.len(),
            packed_bytes = pack.data.len(),
            runs_merged = pack.merged.len(),
            runs = runs_after.len(),
            read_ops = reads.ops,
            write_ops = writes.ops,
            written = writes.bytes,
            place_secs = t_plan.duration_since(t_loop).as_secs_f64(),
            io_secs = t_run.as_secs_f64(),
            sync_secs = t_sync.elapsed().as_secs_f64(),
            "in-place flush appended to the chain"
        );
        let record = chain::encode_record(&deltas);
        self.log
            .write_all_at(&record, self.committed.log_len)
            .and_then(|_| self.log.sync_data())
            .map_err(|e| Error::io(&self.log_path, e))?;
        Ok(Absorbed {
            deltas,
            log_len: self.committed.log_len + record.len() as u64,
            file_len,
            runs: runs_after,
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
        let packed = pieces.iter().any(Piece::is_packed);
        if pieces.is_empty() || in_slot || packed || (contiguous && total > pieces[0].capacity) {
            if let Some(p) = pieces.first().filter(|p| !packed && total <= p.capacity) {
                // Fits its slot or run.
                plan.write(p.at + p.len, at, 0, len);
                pieces[0].len = total;
                return;
            }
            // (Re)allocate: a slot, or a run of blocks.
            let (start, capacity) = if total <= MAX_SLOT {
                let class = slot_class(total);
                let (at, carved) = self.space.allocate_slot(class);
                if carved {
                    plan.allocated(at / BLOCK_BYTES, 1);
                }
                (at, class)
            } else {
                let want = if contiguous {
                    (total as f64 * OVER_ALLOCATION).ceil() as u64
                } else {
                    total
                };
                let blocks = want.div_ceil(BLOCK_BYTES);
                let first = self.space.blocks.allocate(blocks);
                plan.allocated(first, blocks);
                (first * BLOCK_BYTES, blocks * BLOCK_BYTES)
            };
            let mut off = 0;
            for p in pieces.iter() {
                plan.moves.push((p.at, start + off, p.len));
                off += p.len;
                // A packed piece's space is freed with its run.
                if !p.is_packed() {
                    self.freeing.push(*p);
                }
            }
            plan.write(start + used, at, 0, len);
            *pieces = vec![Piece {
                at: start,
                len: total,
                capacity,
            }];
            return;
        }
        // Non-contiguous, in blocks: into the free end of the last block
        // when the chunk fits there (a chunk stays within one piece, so
        // that a query reads it in place), else into new blocks.
        if let Some(p) = pieces.last_mut().filter(|p| p.capacity - p.len >= len) {
            plan.write(p.at + p.len, at, 0, len);
            p.len += len;
            return;
        }
        let rest = len;
        let blocks = rest.div_ceil(BLOCK_BYTES);
        let first = self.space.blocks.allocate(blocks);
        plan.allocated(first, blocks);
        let start = first * BLOCK_BYTES;
        plan.write(start, at, 0, rest);
        pieces.push(Piece {
            at: start,
            len: rest,
            capacity: blocks * BLOCK_BYTES,
        });
    }

    /// Records that manifest generation `generation` now covers `absorbed`
    /// (published with [`ChainWriter::publish`]); the space freed by earlier
    /// commits becomes reusable when no reader may still read it (see the
    /// type's doc).
    pub fn commit(&mut self, absorbed: &Absorbed, meta: &ChainMeta, generation: u64) {
        self.held
            .extend(self.freeing.drain(..).filter(|p| !p.is_packed()).map(|p| (generation, p)));
        if self.held.iter().any(|&(g, _)| g < generation) {
            // Unreadable leases protect everything.
            let oldest = lease::oldest(&self.dir).unwrap_or(Some(0));
            let space = &mut self.space;
            self.held.retain(|&(g, p)| {
                let free = g < generation && oldest.is_none_or(|o| o >= g);
                if free {
                    match p.capacity < BLOCK_BYTES {
                        true => space.free_slot(p.at, p.capacity),
                        false => space.blocks.free(p.at / BLOCK_BYTES, p.capacity / BLOCK_BYTES),
                    }
                }
                !free
            });
        }
        self.committed = meta.clone();
        self.committed.log_len = absorbed.log_len;
        self.committed.file_len = absorbed.file_len;
        self.committed.runs = absorbed.runs.clone();
    }

    /// Applies a flush's changes to the shared dictionary (searches of
    /// older snapshots do not see the new chunks).
    pub fn publish(&self, absorbed: &mut Absorbed) {
        let mut dict = self.chain.dict.write().unwrap_or_else(|p| p.into_inner());
        chain::apply(&mut dict, std::mem::take(&mut absorbed.deltas));
    }

    /// Terms in the dictionary.
    pub fn num_terms(&self) -> u64 {
        self.chain.dict.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// Terms in the dictionary once `absorbed` is published.
    pub fn num_terms_after(&self, absorbed: &Absorbed) -> u64 {
        let dict = self.chain.dict.read().unwrap_or_else(|p| p.into_inner());
        let new = absorbed.deltas.iter().filter(|d| dict.ord(&d.key).is_none()).count();
        (dict.len() + new) as u64
    }

    /// Whether this writer's chain is that of chained segment `meta` in
    /// `dir` as committed by `cm` (nothing absorbed since but abandoned).
    pub fn is_committed(&self, dir: &Path, meta: &SegmentMeta, cm: &ChainMeta) -> bool {
        self.chain.path == dir.join(meta.file_name(CHAIN_EXT))
            && self.committed.log_len == cm.log_len
            && self.committed.file_len == cm.file_len
            && self.committed.runs == cm.runs
    }

    /// Forgets an absorbed flush that will not be committed: its blocks
    /// return to the free map only on the next open (they are past what is
    /// committed, so nothing refers to them).
    pub fn abandon(&mut self) {
        self.freeing.clear();
    }
}

/// The packed run a flush writes: the new data of the short terms it
/// touches, and all the data of the runs it merges.
struct Pack {
    /// The runs merged into the new one (the newest committed ones).
    merged: Vec<PackedRun>,
    /// Their bytes.
    old: Vec<Vec<u8>>,
    /// The new run's bytes.
    data: Vec<u8>,
    /// Level of the new run.
    level: u32,
    /// Deltas whose last piece is in the new run (at an offset relative to
    /// the run until [`Pack::finish`] places it).
    patch: Vec<usize>,
    /// Reading the merged runs.
    reads: BatchCounts,
}

impl Pack {
    /// Plans the flush's run over the committed `runs`, and reads the runs
    /// it merges (one batched submission).
    fn start(chain: &Chain, runs: &[PackedRun]) -> Result<Pack> {
        let (from, level) = chain::merge_plan(runs);
        let merged = runs[from..].to_vec();
        let mut old: Vec<Vec<u8>> = merged
            .iter()
            .map(|r| vec![0u8; (r.blocks * BLOCK_BYTES) as usize])
            .collect();
        let offsets: Vec<u64> = merged.iter().map(|r| r.first_block * BLOCK_BYTES).collect();
        let mut targets: Vec<&mut [u8]> = old.iter_mut().map(Vec::as_mut_slice).collect();
        let reads = batch::read_many(&chain.file, &offsets, &mut targets).map_err(|e| Error::io(&chain.path, e))?;
        Ok(Pack {
            merged,
            old,
            data: Vec::new(),
            level,
            patch: Vec::new(),
            reads,
        })
    }

    /// The merged run holding packed piece `p`, and `p`'s offset in it.
    fn find(&self, p: &Piece) -> Option<(usize, usize)> {
        if !p.is_packed() {
            return None;
        }
        self.merged
            .iter()
            .position(|r| {
                let start = r.first_block * BLOCK_BYTES;
                p.at >= start && p.at + p.len <= start + r.blocks * BLOCK_BYTES
            })
            .map(|k| (k, (p.at - self.merged[k].first_block * BLOCK_BYTES) as usize))
    }

    /// True when `p` lies in a run this flush merges.
    fn holds(&self, p: &Piece) -> bool {
        self.find(p).is_some()
    }

    /// Packs a short term's pieces that lie in merged runs (its last ones:
    /// runs are in flush order) and then `bytes` into the new run, as one
    /// piece replacing them. Returns the pieces kept before it.
    fn repack(&mut self, chain: &Chain, pieces: &mut Vec<Piece>, bytes: &[u8]) -> Result<usize> {
        let keep = pieces.iter().position(|p| self.holds(p)).unwrap_or(pieces.len());
        let start = self.data.len();
        for p in &pieces[keep..] {
            let (k, off) = self
                .find(p)
                .ok_or_else(|| Error::corrupt(&chain.path, "a short term's pieces are not in run order"))?;
            self.data.extend_from_slice(&self.old[k][off..off + p.len as usize]);
        }
        self.data.extend_from_slice(bytes);
        pieces.truncate(keep);
        pieces.push(Piece {
            at: start as u64,
            len: (self.data.len() - start) as u64,
            capacity: 0,
        });
        Ok(keep)
    }

    /// Places and writes the new run (whole blocks, one batched
    /// submission), points the packed pieces of `deltas` at it, and frees
    /// the merged runs (reusable after the next commit, like moved data).
    /// Returns the new run, unless it would be empty.
    fn finish(
        &mut self,
        chain: &Chain,
        space: &mut Space,
        deltas: &mut [TermDelta],
        freeing: &mut Vec<Piece>,
        writes: &mut BatchCounts,
    ) -> Result<Option<PackedRun>> {
        for r in &self.merged {
            freeing.push(Piece {
                at: r.first_block * BLOCK_BYTES,
                len: 0,
                capacity: r.blocks * BLOCK_BYTES,
            });
        }
        self.old.clear();
        if self.data.is_empty() {
            return Ok(None);
        }
        let blocks = (self.data.len() as u64).div_ceil(BLOCK_BYTES);
        let first = space.blocks.allocate(blocks);
        let at = first * BLOCK_BYTES;
        for &i in &self.patch {
            if let Some(p) = deltas[i].pieces.last_mut() {
                p.at += at;
            }
        }
        self.data.resize((blocks * BLOCK_BYTES) as usize, 0);
        const STEP: usize = 1 << 20;
        let offsets: Vec<u64> = (0..self.data.len()).step_by(STEP).map(|o| at + o as u64).collect();
        let bufs: Vec<&[u8]> = self.data.chunks(STEP).collect();
        writes.add(batch::write_many(&chain.file, &offsets, &bufs).map_err(|e| Error::io(&chain.path, e))?);
        Ok(Some(PackedRun {
            first_block: first,
            blocks,
            level: self.level,
        }))
    }
}

/// Where the bytes of a write come from.
#[derive(Clone, Copy)]
enum Src {
    /// Bytes `from..from + len` of payload (term region) `p`.
    Payload { p: usize, from: u64 },
    /// Bytes of moved data at this offset of the moves buffer.
    Moved { at: u64 },
}

/// The writes of one flush, and the runs its moves read.
#[derive(Default)]
struct Plan {
    /// `(file offset, source, length)`.
    writes: Vec<(u64, Src, u64)>,
    /// Runs to move: (from, to, len).
    moves: Vec<(u64, u64, u64)>,
    /// Blocks allocated by this flush: nothing committed is in them, so
    /// they are written without being read first.
    fresh: std::collections::HashSet<u64>,
}

impl Plan {
    /// Writes payload bytes `from..from + len` at file offset `file_at`.
    fn write(&mut self, file_at: u64, payload: usize, from: u64, len: u64) {
        if len > 0 {
            self.writes.push((file_at, Src::Payload { p: payload, from }, len));
        }
    }

    /// Notes that blocks `start..start + n` were allocated by this flush.
    fn allocated(&mut self, start_block: u64, n: u64) {
        self.fresh.extend(start_block..start_block + n);
    }

    /// Performs the flush's I/O: the runs to move are read in one batch;
    /// then the blocks written, in order, in batches of at most
    /// [`batch::MAX_IN_FLIGHT`] blocks: those holding committed data are
    /// read (one batched submission), patched, and every block of the
    /// batch written back (one batched submission, adjacent blocks joined).
    fn run(&self, chain: &Chain, regions: &[u8], payloads: &[(usize, usize)]) -> Result<(BatchCounts, BatchCounts)> {
        let io = |e| Error::io(&chain.path, e);
        let file_len = chain.file.metadata().map_err(io)?.len();
        let mut reads = BatchCounts::default();
        let mut writes = BatchCounts::default();
        // The data to move.
        let mut moved = vec![0u8; self.moves.iter().map(|m| m.2 as usize).sum()];
        {
            let mut offsets = Vec::with_capacity(self.moves.len());
            let mut targets: Vec<&mut [u8]> = Vec::with_capacity(self.moves.len());
            let mut rest = moved.as_mut_slice();
            for &(from, _, n) in &self.moves {
                let (head, tail) = rest.split_at_mut(n as usize);
                offsets.push(from);
                targets.push(head);
                rest = tail;
            }
            reads.add(batch::read_many(&chain.file, &offsets, &mut targets).map_err(io)?);
        }
        let mut all = self.writes.clone();
        let mut at = 0u64;
        for &(_, to, n) in &self.moves {
            all.push((to, Src::Moved { at }, n));
            at += n;
        }
        let bytes = |src: Src, off: u64, n: u64| -> &[u8] {
            match src {
                Src::Payload { p, from } => {
                    let s = payloads[p].0 + (from + off) as usize;
                    &regions[s..s + n as usize]
                }
                Src::Moved { at } => &moved[(at + off) as usize..(at + off + n) as usize],
            }
        };
        // Every write cut at block boundaries: (block, offset in block, source, offset in source, len).
        let mut cuts: Vec<(u64, u32, Src, u64, u32)> = Vec::with_capacity(all.len() * 2);
        for &(file_at, src, len) in &all {
            let mut off = 0;
            while off < len {
                let pos = file_at + off;
                let block = pos / BLOCK_BYTES;
                let n = (BLOCK_BYTES - pos % BLOCK_BYTES).min(len - off);
                cuts.push((block, (pos % BLOCK_BYTES) as u32, src, off, n as u32));
                off += n;
            }
        }
        cuts.sort_unstable_by_key(|c| (c.0, c.1));
        let bs = BLOCK_BYTES as usize;
        let mut images: Vec<u8> = Vec::new();
        let mut i = 0;
        while i < cuts.len() {
            // The next batch of distinct blocks.
            let mut blocks: Vec<u64> = Vec::with_capacity(batch::MAX_IN_FLIGHT);
            let mut j = i;
            while j < cuts.len() {
                let b = cuts[j].0;
                if blocks.last() != Some(&b) {
                    if blocks.len() == batch::MAX_IN_FLIGHT {
                        break;
                    }
                    blocks.push(b);
                }
                j += 1;
            }
            images.clear();
            images.resize(blocks.len() * bs, 0);
            // Read the blocks that hold committed data.
            let mut offsets = Vec::new();
            let mut targets: Vec<&mut [u8]> = Vec::new();
            for (k, img) in images.chunks_exact_mut(bs).enumerate() {
                let b = blocks[k];
                let start = b * BLOCK_BYTES;
                if !self.fresh.contains(&b) && start < file_len {
                    let n = (file_len - start).min(BLOCK_BYTES) as usize;
                    offsets.push(start);
                    targets.push(&mut img[..n]);
                }
            }
            reads.add(batch::read_many(&chain.file, &offsets, &mut targets).map_err(io)?);
            drop(targets);
            // Patch.
            let mut k = 0;
            for c in &cuts[i..j] {
                while blocks[k] != c.0 {
                    k += 1;
                }
                let dst = k * bs + c.1 as usize;
                images[dst..dst + c.4 as usize].copy_from_slice(bytes(c.2, c.3, c.4 as u64));
            }
            // Write back, adjacent blocks as one write.
            let mut offsets = Vec::new();
            let mut bufs: Vec<&[u8]> = Vec::new();
            let mut k = 0;
            while k < blocks.len() {
                let mut e = k + 1;
                while e < blocks.len() && blocks[e] == blocks[e - 1] + 1 {
                    e += 1;
                }
                offsets.push(blocks[k] * BLOCK_BYTES);
                bufs.push(&images[k * bs..e * bs]);
                k = e;
            }
            writes.add(batch::write_many(&chain.file, &offsets, &bufs).map_err(io)?);
            i = j;
        }
        Ok((reads, writes))
    }
}
