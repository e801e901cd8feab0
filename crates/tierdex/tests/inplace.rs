//! The in-place strategies' chain file (DESIGN §5): terms grow into chains
//! of pieces (`in-place`) or move with spare room (`in-place-contiguous`),
//! moved-from space is reused, compaction shrinks the file, and a damaged
//! chunk is reported with the chain file's name. (Answers against a rebuild
//! are checked by `tests/maintenance.rs` for every strategy.)

use std::os::unix::fs::FileExt;
use std::path::Path;

use tierdex::index::manifest::{Manifest, CHAIN_EXT};
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn doc(i: usize) -> Document {
    // "common" in every document, with positions: its chunks are large.
    Document::title_body(
        format!("d{i}"),
        format!("title {i}"),
        format!(
            "common words about {} and common things {}",
            i % 17,
            "pad ".repeat(i % 5)
        ),
    )
}

/// [`doc`] with "long" 20 to 26 times: a term over
/// [`tierdex::layout::chain::PACK_MAX`] bytes after a few flushes, that
/// lives in whole blocks.
fn long_doc(i: usize) -> Document {
    let d = doc(i);
    let body = format!("{}{}", d.body(), " long".repeat(20 + i % 7));
    d.with_text("body", body)
}

/// A writer of `strategy` with 9-byte phrase filters on every term (the
/// defaults when these tests' sizes were chosen: which terms are packed
/// into runs, and how often terms outgrow their space, depend on them).
fn writer(dir: &Path, strategy: Strategy) -> IndexWriter {
    let format = tierdex::Format {
        bloom: Some(tierdex::BloomParams {
            expected: 5,
            fpr: 0.0009,
            max_doc_share: 1.0,
            ..Default::default()
        }),
        ..Default::default()
    };
    IndexWriter::create(
        dir,
        Default::default(),
        format,
        strategy,
        WriterOptions {
            buffer_docs: 100_000,
            ..WriterOptions::default()
        },
    )
    .unwrap()
}

fn chain_meta(dir: &Path) -> (String, tierdex::index::manifest::ChainMeta) {
    let m = Manifest::load(dir).unwrap();
    let seg = m
        .segments
        .iter()
        .find(|s| s.chain.is_some())
        .expect("a chained segment");
    (seg.file_name(CHAIN_EXT), seg.chain.clone().unwrap())
}

fn count(dir: &Path, q: &str) -> u64 {
    Searcher::open(dir)
        .unwrap()
        .search(q, Mode::Count, 0)
        .unwrap()
        .count
        .unwrap()
}

#[test]
fn chains_grow_in_pieces_and_contiguous_terms_move_into_reused_space() {
    for strategy in [Strategy::InPlace, Strategy::InPlaceContiguous] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        let mut n = 0;
        let mut max_free = 0;
        for flush in 0..40 {
            let batch: Vec<Document> = (n..n + 60).map(long_doc).collect();
            n += 60;
            w.add(batch).unwrap();
            w.flush().unwrap();
            let (_, cm) = chain_meta(&dir);
            // Each flush adds a part; the newest parts merge geometrically
            // (their files stay open), so that few remain.
            assert_eq!(cm.parts.iter().map(|p| p.max_doc as usize).sum::<usize>(), n);
            assert!(
                cm.parts.len() <= 2 + 2 * (flush as u32 + 1).ilog(3) as usize,
                "{flush}: {} parts",
                cm.parts.len()
            );
            max_free = max_free.max(cm.file_len);
        }
        drop(w);
        assert_eq!(count(&dir, "common"), n as u64, "{strategy}");
        assert_eq!(count(&dir, "\"common words\""), n as u64, "{strategy}");
        let (pieces, chunks) = term_pieces(&dir, tierdex::Field::BODY, "long");
        let pieces = pieces.len();
        assert_eq!(chunks, 40, "{strategy}: one chunk per flush");
        match strategy {
            // The term's data outgrew its first block many times over.
            Strategy::InPlace => assert!(pieces > 5, "{strategy}: {pieces} pieces"),
            _ => assert_eq!(pieces, 1, "{strategy}"),
        }
        // The index files hold no postings of the flushed parts any more.
        let stray: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".pst") || n.ends_with(".fst"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    }
}

/// Pieces of `word` in `field`, from a fresh searcher.
fn term_pieces(dir: &Path, field: tierdex::Field, word: &str) -> (Vec<tierdex::layout::chain::Piece>, usize) {
    let s = Searcher::open(dir).unwrap();
    let chain = s.index().segments()[0].chain().unwrap().clone();
    let mut key = Vec::new();
    tierdex::termdict::term_key(field, word, &mut key);
    let dict = chain.dict.read().unwrap();
    let t = dict.chain(dict.ord(&key).unwrap()).unwrap();
    (t.pieces.clone(), t.chunks.len())
}

#[test]
fn short_terms_are_packed_into_runs_that_merge_geometrically() {
    use tierdex::layout::chain::RUN_MERGE;
    for strategy in [Strategy::InPlace, Strategy::InPlaceContiguous] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        let mut n = 0;
        for flush in 1..=30usize {
            w.add((n..n + 20).map(long_doc).collect()).unwrap();
            n += 20;
            w.flush().unwrap();
            let (_, cm) = chain_meta(&dir);
            // Every flush packs a run (each has short terms): the runs'
            // levels are the flush count's digits in base RUN_MERGE.
            let mut digits = Vec::new();
            let (mut x, mut level) = (flush, 0u32);
            while x > 0 {
                digits.extend(std::iter::repeat_n(level, x % RUN_MERGE));
                x /= RUN_MERGE;
                level += 1;
            }
            digits.reverse();
            let levels: Vec<u32> = cm.runs.iter().map(|r| r.level).collect();
            assert_eq!(levels, digits, "{strategy}, flush {flush}");
            let mut spans: Vec<(u64, u64)> = cm.runs.iter().map(|r| (r.first_block, r.blocks)).collect();
            spans.sort_unstable();
            assert!(spans.windows(2).all(|s| s[0].0 + s[0].1 <= s[1].0), "{spans:?}");
            assert!(spans.iter().all(|s| (s.0 + s.1) * 8192 <= cm.file_len));
        }
        drop(w);
        let (_, cm) = chain_meta(&dir);
        // A document's own title number: one posting, packed, repacked by
        // every merge since, in one piece.
        let (pieces, chunks) = term_pieces(&dir, tierdex::Field::TITLE, "5");
        assert_eq!((pieces.len(), chunks), (1, 1), "{strategy}: {pieces:?}");
        assert!(pieces[0].is_packed());
        // A short word of every flush: one chunk per flush, at most a piece per run.
        let (pieces, chunks) = term_pieces(&dir, tierdex::Field::BODY, "3");
        assert_eq!(chunks, 30, "{strategy}");
        assert!(
            pieces.iter().all(|p| p.is_packed()) && pieces.len() <= cm.runs.len(),
            "{pieces:?}"
        );
        // A long term lives in blocks.
        let (pieces, _) = term_pieces(&dir, tierdex::Field::BODY, "long");
        assert!(pieces.iter().all(|p| !p.is_packed()), "{strategy}: {pieces:?}");
        // Reopened, the runs' space is still in use: new flushes do not
        // overwrite it, and every answer stays right.
        let w = IndexWriter::open(
            &dir,
            WriterOptions {
                buffer_docs: 100_000,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        for _ in 0..4 {
            w.add((n..n + 20).map(long_doc).collect()).unwrap();
            n += 20;
            w.flush().unwrap();
        }
        drop(w);
        assert_eq!(count(&dir, "common"), n as u64, "{strategy}");
        assert_eq!(
            count(&dir, "\"words about 3\""),
            (0..n).filter(|i| i % 17 == 3).count() as u64,
            "{strategy}"
        );
        for i in (0..n).step_by(7) {
            assert_eq!(count(&dir, &format!("title:{i}")), 1, "{strategy}: title {i}");
        }
    }
}

/// Every term's pieces, from a fresh searcher.
fn all_pieces(dir: &Path) -> std::collections::HashMap<Vec<u8>, Vec<tierdex::layout::chain::Piece>> {
    let s = Searcher::open(dir).unwrap();
    let chain = s.index().segments()[0].chain().unwrap().clone();
    let dict = chain.dict.read().unwrap();
    dict.keys_between(&[0], &[255])
        .into_iter()
        .map(|(k, o)| (k.to_vec(), dict.chain(o).unwrap().pieces.clone()))
        .collect()
}

#[test]
fn contiguous_moves_reuse_freed_space() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let w = writer(&dir, Strategy::InPlaceContiguous);
    let mut n = 0;
    let mut abandoned = 0u64;
    let mut before = std::collections::HashMap::new();
    for _ in 0..60 {
        w.add((n..n + 40).map(long_doc).collect()).unwrap();
        n += 40;
        w.flush().unwrap();
        let now = all_pieces(&dir);
        for (k, old) in &before {
            if now.get(k) != Some(old) && now[k][0].at != old[0].at {
                abandoned += old[0].capacity;
            }
        }
        before = now;
    }
    drop(w);
    let (_, cm) = chain_meta(&dir);
    let runs: u64 = cm.runs.iter().map(|r| r.blocks * 8192).sum();
    let live: u64 = before.values().flatten().map(|p| p.capacity).sum::<u64>() + runs;
    let free = cm.file_len - live;
    // Terms moved a lot; the space they left was reused, not appended to.
    assert!(
        abandoned > cm.file_len / 2,
        "abandoned {abandoned}, file {}",
        cm.file_len
    );
    // At least half of it was taken again (without reuse the file would
    // be `live + abandoned`); what stays free is spare slots and the runs
    // of the last flush, reusable after the next one.
    assert!(
        free < abandoned / 2,
        "free {free} of {} bytes, abandoned {abandoned}",
        cm.file_len
    );
    assert_eq!(count(&dir, "common"), n as u64);
}

#[test]
fn compaction_shrinks_the_chain_after_deletes() {
    for strategy in [Strategy::InPlace, Strategy::InPlaceContiguous] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        for f in 0..10 {
            w.add((f * 100..f * 100 + 100).map(doc).collect()).unwrap();
            w.flush().unwrap();
        }
        let (_, before) = chain_meta(&dir);
        w.delete((0..1000).filter(|i| i % 10 != 0).map(|i| format!("d{i}")).collect())
            .unwrap();
        w.compact().unwrap();
        let (_, after) = chain_meta(&dir);
        assert!(
            after.file_len * 4 < before.file_len,
            "{strategy}: {} -> {}",
            before.file_len,
            after.file_len
        );
        assert_eq!(after.parts.len(), 1);
        drop(w);
        assert_eq!(count(&dir, "common"), 100);
        let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
        assert_eq!(w.live_docs(), 100);
    }
}

#[test]
fn a_damaged_chunk_is_reported_with_the_chain_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let w = writer(&dir, Strategy::InPlace);
    for f in 0..3 {
        w.add((f * 50..f * 50 + 50).map(doc).collect()).unwrap();
        w.flush().unwrap();
    }
    drop(w);
    let (name, cm) = chain_meta(&dir);
    let path = dir.join(&name);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    // Flip one byte in every slot (the smallest is 64 bytes) and block.
    let mut b = [0u8; 1];
    let mut at = 10;
    while at < cm.file_len {
        f.read_exact_at(&mut b, at).unwrap();
        b[0] ^= 0x5a;
        f.write_all_at(&b, at).unwrap();
        at += 64;
    }
    drop(f);
    let s = Searcher::open(&dir).unwrap();
    let e = s.search("common", Mode::TopK, 10).unwrap_err();
    assert!(e.to_string().contains(&name), "{e}");
}

#[test]
fn split_layouts_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let format = tierdex::layout::Format {
        layout: tierdex::layout::Layout::Split,
        ..Default::default()
    };
    let e = IndexWriter::create(
        &tmp.path().join("idx"),
        Default::default(),
        format,
        Strategy::InPlace,
        WriterOptions::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("grouped layout"), "{e}");
}

/// What a flush interrupted by a crash leaves (bytes written past the
/// committed data: in the free room of terms' blocks and slots, at the end
/// of the chain file, at the end of the log, torn) is ignored on reopening,
/// and overwritten by the next flush.
#[test]
fn an_interrupted_flush_leaves_nothing_that_matters() {
    use tierdex::indexing::{build_index, IndexOptions};
    for strategy in [Strategy::InPlace, Strategy::InPlaceContiguous] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        let mut all = Vec::new();
        for f in 0..4 {
            let batch: Vec<Document> = (f * 70..f * 70 + 70).map(doc).collect();
            all.extend(batch.clone());
            w.add(batch).unwrap();
            w.flush().unwrap();
        }
        // Unflushed, only in the log.
        let pending: Vec<Document> = (280..330).map(doc).collect();
        all.extend(pending.clone());
        w.add(pending).unwrap();
        drop(w);
        // The debris of a flush that never committed.
        let (name, cm) = chain_meta(&dir);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(&name))
            .unwrap();
        let mut junk = 0x9bu8;
        for pieces in all_pieces(&dir).values() {
            for p in pieces {
                for at in p.at + p.len..p.at + p.capacity {
                    junk = junk.wrapping_mul(31).wrapping_add(7);
                    f.write_all_at(&[junk], at).unwrap();
                }
            }
        }
        f.write_all_at(&[0xee; 20_000], cm.file_len).unwrap();
        let log = dir.join(name.replace(".chn", ".chl"));
        let lf = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut &lf, &[0x42; 333]).unwrap();
        drop((f, lf));
        // Reopen: the log replays the unflushed batch; flush it over the debris.
        let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
        w.flush().unwrap();
        drop(w);
        let fresh = tmp.path().join("fresh");
        build_index(all.iter().cloned().map(Ok), &fresh, &IndexOptions::default()).unwrap();
        let (a, b) = (Searcher::open(&dir).unwrap(), Searcher::open(&fresh).unwrap());
        for q in ["common", "\"common words\"", "about 3", "pad things", "title 17"] {
            let (x, y) = (
                a.search(q, Mode::TopKAndCount, 10).unwrap(),
                b.search(q, Mode::TopKAndCount, 10).unwrap(),
            );
            assert_eq!(x.count, y.count, "{strategy} {q}");
            let ids = |s: &Searcher, r: &tierdex::search::SearchResults| {
                r.hits
                    .iter()
                    .map(|h| (s.doc_id(h.doc).unwrap(), h.score.to_bits()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(&a, &x), ids(&b, &y), "{strategy} {q}");
        }
    }
}

#[test]
fn flushes_share_the_first_trained_store_dictionary() {
    use tierdex::corpus::gen::{GenOptions, Generator};
    let gen = Generator::new(GenOptions {
        docs: 1200,
        seed: 5,
        vocab_size: 3000,
        ..GenOptions::default()
    });
    for strategy in [Strategy::Geometric, Strategy::NoMerge, Strategy::InPlace] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        for f in 0..4u64 {
            w.add((f * 300..f * 300 + 300).map(|i| gen.doc(i)).collect()).unwrap();
            w.flush().unwrap();
        }
        drop(w);
        let s = Searcher::open(&dir).unwrap();
        let mut dicts = Vec::new();
        for seg in s.index().segments() {
            for store in seg.stores() {
                dicts.push(store.dictionary().unwrap().map(<[u8]>::to_vec));
            }
        }
        // Geometric merges segments, in-place merges its chain's parts.
        assert!(
            dicts.len() >= 2 || strategy != Strategy::NoMerge,
            "{strategy}: {}",
            dicts.len()
        );
        assert!(dicts[0].is_some(), "{strategy}: the first flush trains a dictionary");
        assert!(
            dicts.iter().all(|d| d == &dicts[0]),
            "{strategy}: every store shares it"
        );
        assert_eq!(s.index().live_docs(), 1200);
    }
}

/// A chained segment's postings are read through the index's tier like
/// every other file: the same answers on every tier, the direct tier's
/// reads going through its buffer pool, and damage reported on each.
#[test]
fn chains_are_read_through_every_tier() {
    use tierdex::index::OpenOptions;
    use tierdex::storage::{Tier, TierOptions};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let w = writer(&dir, Strategy::InPlace);
    for f in 0..4 {
        w.add((f * 60..f * 60 + 60).map(long_doc).collect()).unwrap();
        w.flush().unwrap();
    }
    drop(w);
    let open = |tier: Tier| {
        let mut t = TierOptions::on(tier);
        t.pool_bytes = 64 << 10;
        Searcher::open_with(
            &dir,
            OpenOptions {
                tier: t,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let queries = ["common", "long common", "\"common words\"", "+long +pad"];
    let reference: Vec<_> = queries
        .iter()
        .map(|q| open(Tier::Mmap).search(q, Mode::TopKAndCount, 20).unwrap())
        .collect();
    for tier in [Tier::Ram, Tier::Buffered, Tier::Direct] {
        let s = open(tier);
        let before = s.index().storage().pool_stats();
        for (q, want) in queries.iter().zip(&reference) {
            // Twice: the second time from the term's kept walk.
            for _ in 0..2 {
                assert_eq!(&s.search(q, Mode::TopKAndCount, 20).unwrap(), want, "{tier:?}: {q}");
            }
        }
        if tier == Tier::Direct {
            // Searches read only the chain (no stored document): its pages
            // came through the pool.
            let (before, after) = (before.unwrap(), s.index().storage().pool_stats().unwrap());
            assert!(
                after.misses > before.misses,
                "chain reads go through the pool: {after:?}"
            );
            assert!(after.resident_pages <= 16, "the pool bounds them: {after:?}");
        }
    }
    // Damage in the chain is reported on every tier.
    let (name, cm) = chain_meta(&dir);
    let path = dir.join(&name);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut b = [0u8; 1];
    let mut at = 10;
    while at < cm.file_len {
        f.read_exact_at(&mut b, at).unwrap();
        b[0] ^= 0x5a;
        f.write_all_at(&b, at).unwrap();
        at += 64;
    }
    drop(f);
    for tier in [Tier::Mmap, Tier::Ram, Tier::Buffered, Tier::Direct] {
        let e = open(tier).search("common", Mode::TopK, 10).unwrap_err();
        assert!(e.to_string().contains(&name), "{tier:?}: {e}");
    }
}
