//! Tests of the document store.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::format::{INDEX_ENTRY_LEN, INDEX_TRAILER_LEN};
use super::*;
use crate::error::{Error, Result};
use crate::schema::Document;
use crate::storage::{FileInfo, FileWriter, IndexFile, Tier, PAGE_SIZE};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "in",
    "to",
    "a",
    "was",
    "is",
    "for",
    "on",
    "as",
    "by",
    "with",
    "he",
    "that",
    "at",
    "from",
    "his",
    "it",
    "an",
    "were",
    "are",
    "which",
    "this",
    "also",
    "be",
    "first",
    "or",
    "has",
    "had",
    "one",
    "their",
    "its",
    "new",
    "after",
    "who",
    "they",
    "two",
    "her",
    "she",
    "been",
    "other",
    "when",
    "there",
    "all",
    "during",
    "into",
    "school",
    "time",
    "may",
    "years",
    "more",
    "most",
    "only",
    "over",
    "city",
    "some",
    "world",
    "would",
    "where",
    "later",
    "up",
    "such",
    "used",
    "many",
    "can",
    "state",
    "about",
    "national",
    "out",
    "known",
    "university",
    "united",
    "then",
    "made",
    "born",
    "team",
    "american",
    "played",
    "season",
    "population",
    "river",
    "album",
    "film",
    "village",
    "district",
    "church",
    "county",
    "music",
    "Ünïcödé",
    "東京",
    "Москва",
    "café",
    "naïve",
    "🚀",
];

/// Text of `words` words drawn with a skew towards the first ones.
fn text(rng: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        }
        let a = rng.below(WORDS.len() as u64);
        let b = rng.below(WORDS.len() as u64);
        s.push_str(WORDS[a.min(b) as usize]);
        if rng.below(40) == 0 {
            s.push_str(&rng.below(100_000).to_string());
        }
    }
    s
}

fn doc(rng: &mut Rng, n: usize, body_words: usize) -> Document {
    let title_words = 1 + rng.below(6) as usize;
    Document::title_body(
        (1_000_000 + n).to_string(),
        text(rng, title_words),
        text(rng, body_words),
    )
}

/// A mixed corpus: many short documents, some long ones, and edge cases.
fn corpus(n: usize, seed: u64) -> Vec<Document> {
    let mut rng = Rng(seed | 1);
    let mut docs: Vec<Document> = (0..n)
        .map(|i| {
            let words = match rng.below(10) {
                0 => 2_000 + rng.below(3_000) as usize,
                1 | 2 => 300 + rng.below(700) as usize,
                _ => rng.below(250) as usize,
            };
            doc(&mut rng, i, words)
        })
        .collect();
    docs.insert(n / 3, Document::default());
    docs.insert(
        n / 2,
        Document::title_body("ünï/€", "日本語のタイトル 🚀", "Ωμέγα — ½ ∑ ∞ \u{0} \u{10FFFF} end"),
    );
    docs
}

/// 1 MiB bodies: one compressible, one that compresses poorly.
fn huge_docs() -> Vec<Document> {
    let mut rng = Rng(7);
    let mut compressible = text(&mut rng, 200_000);
    compressible.truncate(1 << 20);
    while !compressible.is_char_boundary(compressible.len()) {
        compressible.pop();
    }
    let noisy: String = (0..(1 << 20)).map(|_| char::from(b'!' + rng.below(94) as u8)).collect();
    vec![
        Document::title_body("huge-text", "huge", compressible),
        Document::title_body("huge-noise", String::new(), noisy),
    ]
}

struct Paths {
    _dir: tempfile::TempDir,
    data: PathBuf,
    index: PathBuf,
}

fn paths() -> Paths {
    let dir = tempfile::tempdir().unwrap();
    Paths {
        data: dir.path().join("store.data"),
        index: dir.path().join("store.index"),
        _dir: dir,
    }
}

fn write_at(p: &Paths, docs: &[Document], options: StoreOptions) -> StoreFiles {
    let mut w = StoreWriter::create(&p.data, &p.index, options).unwrap();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(w.add(d).unwrap(), i as u32);
        assert_eq!(w.num_docs(), i as u32 + 1);
    }
    w.finish().unwrap()
}

fn write(docs: &[Document], options: StoreOptions) -> (Paths, StoreFiles) {
    let p = paths();
    let files = write_at(&p, docs, options);
    (p, files)
}

fn open(p: &Paths) -> Result<StoreReader> {
    StoreReader::open(&p.data, &p.index, Tier::Mmap)
}

fn small_sample() -> StoreOptions {
    StoreOptions {
        dictionary_sample_docs: 200,
        dictionary_sample_bytes: 1 << 20,
        ..StoreOptions::default()
    }
}

fn all_options() -> Vec<StoreOptions> {
    let mut out = Vec::new();
    for dictionary in [false, true] {
        for align in [false, true] {
            out.push(StoreOptions {
                dictionary,
                align,
                ..small_sample()
            });
        }
    }
    out
}

/// The content of a checksummed file.
fn content(path: &Path) -> Vec<u8> {
    IndexFile::open(path, Tier::Ram).unwrap().all().unwrap().to_vec()
}

/// Rewrites a checksummed file with new content (valid checksums).
fn rewrite(path: &Path, content: &[u8]) -> FileInfo {
    let mut w = FileWriter::create(path).unwrap();
    w.write_all(content).unwrap();
    w.finish().unwrap()
}

/// Rewrites the data file with `data` and points the index trailer at it,
/// so only the store's own checks can catch what is wrong.
fn rewrite_data(p: &Paths, data: &[u8]) {
    let info = rewrite(&p.data, data);
    let mut index = content(&p.index);
    let t = index.len() - INDEX_TRAILER_LEN;
    index[t + 16..t + 24].copy_from_slice(&info.content_len.to_le_bytes());
    index[t + 24..t + 32].copy_from_slice(&info.checksum.to_le_bytes());
    rewrite(&p.index, &index);
}

fn expect_corrupt(result: Result<impl std::fmt::Debug>, path: &Path, needle: &str) -> String {
    match result {
        Err(e @ Error::Corrupt { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(msg.contains(needle), "{msg} lacks {needle:?}");
            msg
        }
        other => panic!("expected a corruption error about {needle:?}, got {other:?}"),
    }
}

fn serialised_total(docs: &[Document]) -> u64 {
    docs.iter().map(|d| format::serialised_len(d) as u64).sum()
}

fn check_layout(reader: &StoreReader, files: &StoreFiles, align: bool) {
    // Records start right after the header and the dictionary.
    let mut prev_end = 32 + reader.dictionary_len() as u64;
    let mut gaps = 0;
    for d in 0..reader.num_docs() {
        let (offset, len) = reader.data_bytes_read_for(d).unwrap();
        assert_eq!(reader.raw(d).unwrap().len() as u64, len);
        gaps += offset - prev_end;
        prev_end = offset + len;
        let first = offset / PAGE_SIZE as u64;
        let last = (offset + len - 1) / PAGE_SIZE as u64;
        if align && len <= PAGE_SIZE as u64 {
            assert_eq!(first, last, "record {d} ({offset}+{len}) straddles a page");
        }
    }
    assert_eq!(gaps, files.padding_bytes);
    if !align {
        assert_eq!(files.padding_bytes, 0);
    }
}

#[test]
fn roundtrip_many_documents() {
    let mut docs = corpus(1_500, 1);
    let huge = huge_docs();
    docs.insert(700, huge[0].clone());
    docs.insert(20, huge[1].clone());
    for options in all_options() {
        let (p, files) = write(&docs, options);
        assert_eq!(files.docs as usize, docs.len());
        assert_eq!(files.raw_bytes, serialised_total(&docs));
        assert_eq!(files.dictionary_bytes > 0, options.dictionary, "{options:?}");
        for tier in [Tier::Ram, Tier::Mmap] {
            let reader = StoreReader::open(&p.data, &p.index, tier).unwrap();
            assert_eq!(reader.num_docs() as usize, docs.len());
            assert_eq!(reader.dictionary_len() as u64, files.dictionary_bytes);
            for (i, d) in docs.iter().enumerate() {
                assert_eq!(&reader.get(i as u32).unwrap(), d, "doc {i} {options:?}");
            }
            check_layout(&reader, &files, options.align);
        }
    }
}

#[test]
fn empty_store() {
    for options in all_options() {
        let (p, files) = write(&[], options);
        assert_eq!(files.docs, 0);
        assert_eq!(files.raw_bytes, 0);
        assert_eq!(files.dictionary_bytes, 0);
        let reader = open(&p).unwrap();
        assert_eq!(reader.num_docs(), 0);
        assert!(matches!(reader.get(0), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn few_documents_get_no_dictionary() {
    let docs = corpus(5, 3);
    let (p, files) = write(&docs, StoreOptions::default());
    assert_eq!(files.dictionary_bytes, 0);
    let reader = open(&p).unwrap();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(&reader.get(i as u32).unwrap(), d);
    }
}

#[test]
fn dictionary_shrinks_short_documents() {
    let mut rng = Rng(11);
    let docs: Vec<Document> = (0..3_000).map(|i| doc(&mut rng, i, 30)).collect();
    let (_p1, plain) = write(
        &docs,
        StoreOptions {
            dictionary: false,
            ..StoreOptions::default()
        },
    );
    let (p2, with_dict) = write(&docs, StoreOptions::default());
    assert!(with_dict.dictionary_bytes > 0);
    assert!(
        with_dict.data.content_len * 10 < plain.data.content_len * 8,
        "dictionary {} vs plain {}",
        with_dict.data.content_len,
        plain.data.content_len
    );
    let reader = open(&p2).unwrap();
    for (i, d) in docs.iter().enumerate().step_by(97) {
        assert_eq!(&reader.get(i as u32).unwrap(), d);
    }
}

#[test]
fn records_that_fit_a_page_never_straddle_one() {
    // Sizes chosen so many records would cross page boundaries unaligned.
    let mut rng = Rng(5);
    let noisy =
        |rng: &mut Rng, n: usize| -> String { (0..n).map(|_| char::from(b'a' + rng.below(26) as u8)).collect() };
    let docs: Vec<Document> = (0..400)
        .map(|i| Document::title_body(i.to_string(), String::new(), noisy(&mut rng, 500 + (i * 37) % 7_000)))
        .collect();
    let (p, files) = write(
        &docs,
        StoreOptions {
            dictionary: false,
            ..StoreOptions::default()
        },
    );
    let reader = open(&p).unwrap();
    check_layout(&reader, &files, true);
    assert!(files.padding_bytes > 0);
    let (p2, unaligned) = write(
        &docs,
        StoreOptions {
            dictionary: false,
            align: false,
            ..StoreOptions::default()
        },
    );
    let reader2 = open(&p2).unwrap();
    let straddling = (0..reader2.num_docs())
        .filter(|&d| {
            let (o, l) = reader2.data_bytes_read_for(d).unwrap();
            l <= PAGE_SIZE as u64 && o / 4096 != (o + l - 1) / 4096
        })
        .count();
    assert!(straddling > 10, "{straddling}");
    assert_eq!(unaligned.data.content_len + files.padding_bytes, files.data.content_len);
}

#[test]
fn copy_between_stores() {
    let docs_a = corpus(800, 21);
    let docs_b = corpus(300, 22);
    let no_dict = StoreOptions {
        dictionary: false,
        ..small_sample()
    };
    let (pa, _) = write(&docs_a, small_sample());
    let (pb, _) = write(&docs_b, small_sample());
    let (pc, _) = write(&docs_b, no_dict);
    let a = open(&pa).unwrap();
    let b = open(&pb).unwrap();
    let c = open(&pc).unwrap();
    assert!(a.dictionary_len() > 0 && b.dictionary_len() > 0);
    assert_eq!(c.dictionary_len(), 0);

    // A merge: a's records move untouched, b's and c's are recompressed.
    for options in [small_sample(), no_dict] {
        let p = paths();
        let mut w = StoreWriter::create_for_merge(&p.data, &p.index, options, &[&b, &a, &c]).unwrap();
        let mut expected = Vec::new();
        for (source, docs) in [(&b, &docs_b), (&a, &docs_a), (&c, &docs_b)] {
            for i in 0..source.num_docs() {
                assert_eq!(w.copy_from(source, i).unwrap() as usize, expected.len());
                expected.push((source, i, docs[i as usize].clone()));
            }
        }
        let files = w.finish().unwrap();
        assert_eq!(
            files.raw_bytes,
            serialised_total(&docs_b) * 2 + serialised_total(&docs_a)
        );
        let merged = open(&p).unwrap();
        assert_eq!(merged.num_docs() as usize, expected.len());
        let mut recompressed_differ = 0;
        for (n, (source, i, d)) in expected.iter().enumerate() {
            let n = n as u32;
            assert_eq!(&merged.get(n).unwrap(), d);
            let same_bytes = merged.raw(n).unwrap() == source.raw(*i).unwrap();
            let raw_copy = if options.dictionary {
                std::ptr::eq(*source, &a)
            } else {
                std::ptr::eq(*source, &c)
            };
            if raw_copy {
                assert!(same_bytes, "doc {n} {options:?}");
            } else if !same_bytes {
                recompressed_differ += 1;
            }
        }
        // Tiny documents may come out the same whatever the dictionary.
        assert!(recompressed_differ > 300, "{recompressed_differ}");
        check_layout(&merged, &files, true);
    }

    // A plain writer adopts the first source's dictionary.
    let p = paths();
    let mut w = StoreWriter::create(&p.data, &p.index, small_sample()).unwrap();
    for i in 0..b.num_docs() {
        w.copy_from(&b, i).unwrap();
    }
    w.finish().unwrap();
    let copy = open(&p).unwrap();
    assert_eq!(copy.dictionary_len(), b.dictionary_len());
    for i in 0..b.num_docs() {
        assert_eq!(copy.raw(i).unwrap(), b.raw(i).unwrap());
    }

    // A sampling writer fed from a dictionary-less store trains its own.
    let p = paths();
    let mut w = StoreWriter::create(&p.data, &p.index, small_sample()).unwrap();
    for i in 0..c.num_docs() {
        w.copy_from(&c, i).unwrap();
    }
    let files = w.finish().unwrap();
    assert!(files.dictionary_bytes > 0);
    let copy = open(&p).unwrap();
    for i in 0..c.num_docs() {
        assert_eq!(copy.get(i).unwrap(), docs_b[i as usize]);
    }
}

#[test]
fn add_raw_roundtrip_and_misuse() {
    let docs = corpus(300, 31);
    let no_dict = StoreOptions {
        dictionary: false,
        ..StoreOptions::default()
    };
    let (ps, _) = write(&docs, no_dict);
    let source = open(&ps).unwrap();
    let p = paths();
    let mut w = StoreWriter::create(&p.data, &p.index, no_dict).unwrap();
    for i in 0..source.num_docs() {
        assert_eq!(w.add_raw(source.raw(i).unwrap()).unwrap(), i);
    }
    // Not a record.
    assert!(matches!(w.add_raw(b"garbage"), Err(Error::InvalidArgument(_))));
    assert!(matches!(w.add_raw(&[]), Err(Error::InvalidArgument(_))));
    let mut two = source.raw(0).unwrap().to_vec();
    two.extend_from_slice(source.raw(1).unwrap());
    assert!(matches!(w.add_raw(&two), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        w.add_raw(&source.raw(1).unwrap()[..10]),
        Err(Error::InvalidArgument(_))
    ));
    let files = w.finish().unwrap();
    assert_eq!(files.raw_bytes, serialised_total(&docs));
    let copy = open(&p).unwrap();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(&copy.get(i as u32).unwrap(), d);
        assert_eq!(copy.raw(i as u32).unwrap(), source.raw(i as u32).unwrap());
    }

    // A writer still sampling for its dictionary refuses raw records.
    let p2 = paths();
    let mut w = StoreWriter::create(&p2.data, &p2.index, StoreOptions::default()).unwrap();
    assert!(matches!(
        w.add_raw(source.raw(0).unwrap()),
        Err(Error::InvalidArgument(_))
    ));

    // A record compressed with another dictionary is caught when read.
    let (pd, _) = write(&corpus(400, 32), small_sample());
    let with_dict = open(&pd).unwrap();
    assert!(with_dict.dictionary_len() > 0);
    let p3 = paths();
    let mut w = StoreWriter::create(&p3.data, &p3.index, no_dict).unwrap();
    for i in 0..50 {
        w.add_raw(with_dict.raw(i).unwrap()).unwrap();
    }
    w.finish().unwrap();
    let wrong = open(&p3).unwrap();
    let failures = (0..50)
        .filter(|&i| match wrong.get(i) {
            Ok(d) => {
                assert_eq!(d, with_dict.get(i).unwrap());
                false
            }
            Err(e) => {
                expect_corrupt(Err::<(), _>(e), &p3.data, &format!("document {i}:"));
                true
            }
        })
        .count();
    assert!(failures > 25, "{failures}");
}

#[test]
fn out_of_range_documents() {
    let (p, _) = write(&corpus(10, 41), StoreOptions::default());
    let reader = open(&p).unwrap();
    let n = reader.num_docs();
    for doc in [n, n + 1, u32::MAX] {
        assert!(matches!(reader.get(doc), Err(Error::InvalidArgument(_))));
        assert!(matches!(reader.raw(doc), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            reader.data_bytes_read_for(doc),
            Err(Error::InvalidArgument(_))
        ));
        let p2 = paths();
        let mut w = StoreWriter::create(&p2.data, &p2.index, StoreOptions::default()).unwrap();
        assert!(matches!(w.copy_from(&reader, doc), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn a_store_reopened_to_copy_reads_a_record_in_one_read() {
    let docs = corpus(600, 43);
    let (p, _) = write(&docs, small_sample());
    let mapped = open(&p).unwrap();
    let storage = crate::storage::Storage::new(crate::storage::TierOptions::on(Tier::Buffered)).unwrap();
    let plain = StoreReader::open_on(&p.data, &p.index, &storage).unwrap();
    let copying = mapped.reopen_to_copy(&storage).unwrap();
    assert_eq!(copying.num_docs(), mapped.num_docs());
    // In a scrambled order, as a reordering merge reads them.
    let n = mapped.num_docs();
    let order: Vec<u32> = (0..n).map(|i| (i * 7919) % n).collect();
    let want: Vec<Vec<u8>> = order.iter().map(|&d| mapped.raw(d).unwrap().to_vec()).collect();
    let mut a = Vec::new();
    for (reader, reads_per_record) in [(&plain, 2), (&copying, 1)] {
        let before = crate::storage::io::snapshot();
        for (&d, want) in order.iter().zip(&want) {
            assert_eq!(reader.raw_into(d, &mut a).unwrap(), want.as_slice());
        }
        let ios = crate::storage::io::snapshot().since(&before).ios;
        assert_eq!(ios, u64::from(n) * reads_per_record);
        assert_eq!(reader.get(order[3]).unwrap(), docs[order[3] as usize]);
    }
    for doc in [n, u32::MAX] {
        assert!(matches!(copying.raw_into(doc, &mut a), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn bad_options_and_oversized_documents() {
    let p = paths();
    for level in [100, i32::MIN] {
        let options = StoreOptions {
            level,
            ..StoreOptions::default()
        };
        assert!(matches!(
            StoreWriter::create(&p.data, &p.index, options),
            Err(Error::InvalidArgument(_))
        ));
    }
    let mut w = StoreWriter::create(&p.data, &p.index, StoreOptions::default()).unwrap();
    let huge = Document::title_body("big", String::new(), " ".repeat(MAX_DOCUMENT_BYTES));
    assert!(matches!(w.add(&huge), Err(Error::InvalidArgument(_))));
    assert_eq!(w.num_docs(), 0);
    w.add(&Document::default()).unwrap();
    assert_eq!(w.finish().unwrap().docs, 1);
}

#[test]
fn bit_flip_in_a_record_is_reported_with_file_and_document() {
    let docs = corpus(600, 51);
    for options in [
        small_sample(),
        StoreOptions {
            dictionary: false,
            ..small_sample()
        },
    ] {
        let (p, _) = write(&docs, options);
        let reader = open(&p).unwrap();
        // A document whose record starts past the header and dictionary pages.
        let header_end = 32 + reader.dictionary_len() as u64;
        let target = (0..reader.num_docs())
            .find(|&d| {
                let (o, l) = reader.data_bytes_read_for(d).unwrap();
                o / 4096 > header_end / 4096 + 1 && l > 100 && l < 4096
            })
            .unwrap();
        let (offset, len) = reader.data_bytes_read_for(target).unwrap();
        drop(reader);

        // Caught by the page checksums.
        let clean = std::fs::read(&p.data).unwrap();
        let mut bad = clean.clone();
        bad[(offset + len / 2) as usize] ^= 0x04;
        std::fs::write(&p.data, &bad).unwrap();
        let reader = open(&p).unwrap();
        expect_corrupt(reader.get(target), &p.data, &format!("document {target}:"));
        expect_corrupt(reader.raw(target), &p.data, "checksum mismatch");
        // Documents on other pages are still served.
        let far = (0..reader.num_docs())
            .find(|&d| reader.data_bytes_read_for(d).unwrap().0 / 4096 > offset / 4096 + 2)
            .unwrap();
        assert_eq!(reader.get(far).unwrap(), docs[far as usize]);
        drop(reader);
        std::fs::write(&p.data, &clean).unwrap();

        // Page checksums made valid again: zstd's own checks must catch it.
        let data = content(&p.data);
        let mut errors = 0;
        for pos in [0, 3, 5, len / 3, len / 2, len - 6, len - 2] {
            let mut bad = data.clone();
            bad[(offset + pos) as usize] ^= 0x21;
            rewrite_data(&p, &bad);
            let reader = open(&p).unwrap();
            match reader.get(target) {
                Ok(d) => assert_eq!(d, docs[target as usize], "flip at {pos} changed the document"),
                Err(e) => {
                    expect_corrupt(Err::<(), _>(e), &p.data, &format!("document {target}:"));
                    errors += 1;
                }
            }
            // Recompressing it into a store with another dictionary fails too.
            if options.dictionary && reader.get(target).is_err() {
                let p2 = paths();
                let no_dict = StoreOptions {
                    dictionary: false,
                    ..options
                };
                let mut w = StoreWriter::create(&p2.data, &p2.index, no_dict).unwrap();
                expect_corrupt(w.copy_from(&reader, target), &p.data, "document");
            }
        }
        assert!(errors >= 5, "{errors}");
        rewrite_data(&p, &data);
        assert_eq!(open(&p).unwrap().get(target).unwrap(), docs[target as usize]);
    }
}

#[test]
fn truncated_files_are_reported() {
    let (p, _) = write(&corpus(200, 61), small_sample());
    for path in [&p.data, &p.index] {
        let full = std::fs::read(path).unwrap();
        for cut in [1, 40, full.len() / 2, full.len()] {
            std::fs::write(path, &full[..full.len() - cut]).unwrap();
            expect_corrupt(open(&p), path, "");
        }
        std::fs::write(path, &full).unwrap();
    }
    open(&p).unwrap();

    // Content cut with valid checksums: the store's own checks catch it.
    let data = content(&p.data);
    let index = content(&p.index);
    rewrite_data(&p, &data[..data.len() - 100]);
    expect_corrupt(open(&p), &p.index, "runs past the end");
    rewrite_data(&p, &data[..20]);
    expect_corrupt(open(&p), &p.data, "header");
    rewrite_data(&p, &data[..100]);
    expect_corrupt(open(&p), &p.data, "dictionary");
    rewrite_data(&p, &data);
    rewrite(&p.index, &index[index.len() - 20..]);
    expect_corrupt(open(&p), &p.index, "trailer");
    rewrite(&p.index, &index[..index.len() - INDEX_TRAILER_LEN]);
    expect_corrupt(open(&p), &p.index, "magic");
    // An index that lost its last entry (trailer kept).
    let mut short = index[..index.len() - INDEX_TRAILER_LEN - INDEX_ENTRY_LEN].to_vec();
    short.extend_from_slice(&index[index.len() - INDEX_TRAILER_LEN..]);
    rewrite(&p.index, &short);
    expect_corrupt(open(&p), &p.index, "claims 202 documents");
}

#[test]
fn bad_index_entries_are_reported() {
    let (p, _) = write(&corpus(100, 71), StoreOptions::default());
    let index = content(&p.index);
    let entry = |i: usize| i * INDEX_ENTRY_LEN;
    let set = |index: &mut Vec<u8>, i: usize, offset: Option<u64>, len: Option<u32>| {
        if let Some(o) = offset {
            index[entry(i)..entry(i) + 8].copy_from_slice(&o.to_le_bytes());
        }
        if let Some(l) = len {
            index[entry(i) + 8..entry(i) + 12].copy_from_slice(&l.to_le_bytes());
        }
    };
    let get = |i: usize| format::decode_entry(&index[entry(i)..entry(i) + 12]);
    let (o5, l5) = get(5);
    let (o6, _) = get(6);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            {
                let mut x = index.clone();
                set(&mut x, 6, Some(o5 + 1), None);
                x
            },
            "before the end",
        ),
        (
            {
                let mut x = index.clone();
                set(&mut x, 5, None, Some(l5 + (o6 - o5) as u32 + 1));
                x
            },
            "before the end",
        ),
        (
            {
                let mut x = index.clone();
                set(&mut x, 5, None, Some(0));
                x
            },
            "empty record",
        ),
        (
            {
                let mut x = index.clone();
                set(&mut x, 0, Some(3), None);
                x
            },
            "before the end",
        ),
        (
            {
                let mut x = index.clone();
                set(&mut x, 50, Some(u64::MAX - 5), None);
                x
            },
            "runs past the end",
        ),
        (
            {
                let mut x = index.clone();
                set(&mut x, 101, None, Some(u32::MAX));
                x
            },
            "runs past the end",
        ),
        (
            {
                let mut x = index.clone();
                let t = x.len() - INDEX_TRAILER_LEN;
                x[t + 12] ^= 1;
                x
            },
            "claims",
        ),
        (
            {
                let mut x = index.clone();
                let t = x.len() - INDEX_TRAILER_LEN;
                x[t + 24] ^= 1;
                x
            },
            "another data file",
        ),
        (
            {
                let mut x = index.clone();
                let t = x.len() - INDEX_TRAILER_LEN;
                x[t + 8] = 9;
                x
            },
            "version",
        ),
    ];
    for (bad, needle) in cases {
        rewrite(&p.index, &bad);
        expect_corrupt(open(&p), &p.index, needle);
    }
    // Records that stop before the end of the data file.
    let mut x = index.clone();
    let (o101, l101) = get(101);
    set(&mut x, 101, None, Some(l101 - 1));
    rewrite(&p.index, &x);
    expect_corrupt(open(&p), &p.index, "records end at");
    let _ = o101;
    rewrite(&p.index, &index);
    open(&p).unwrap();
}

#[test]
fn bad_data_headers_are_reported() {
    let (p, files) = write(&corpus(300, 81), small_sample());
    assert!(files.dictionary_bytes > 0);
    let data = content(&p.data);
    let cases: Vec<(usize, u8, &str)> = vec![
        (0, b'X', "magic"),
        (8, 2, "version"),
        (13, 1, "flags"),
        (12, 0, "disagree"),
        (40, 0x55, "dictionary does not match"),
        (19, 0x10, "runs past the end"),
    ];
    for (pos, value, needle) in cases {
        let mut bad = data.clone();
        bad[pos] = if pos == 40 { bad[pos] ^ value } else { value };
        rewrite_data(&p, &bad);
        expect_corrupt(open(&p), &p.data, needle);
    }
    rewrite_data(&p, &data);
    open(&p).unwrap();
}

#[test]
fn mismatched_index_and_data_are_reported() {
    let (p1, _) = write(&corpus(50, 91), StoreOptions::default());
    let (p2, _) = write(&corpus(50, 92), StoreOptions::default());
    let err = StoreReader::open(&p1.data, &p2.index, Tier::Mmap);
    expect_corrupt(err, &p2.index, "another data file");
}

#[test]
fn reader_is_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<StoreReader>();
    let docs = corpus(400, 101);
    let (p, _) = write(&docs, small_sample());
    let reader = open(&p).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (reader, docs) = (&reader, &docs);
            s.spawn(move || {
                for i in (t..reader.num_docs()).step_by(3) {
                    assert_eq!(reader.get(i).unwrap(), docs[i as usize]);
                }
            });
        }
    });
}

fn arb_doc() -> impl Strategy<Value = Document> {
    let field = prop_oneof![
        3 => "[a-z ]{0,40}",
        2 => "\\PC{0,200}",
        1 => "[a-zA-Z0-9 .,\n]{0,6000}",
    ];
    (field.clone(), field.clone(), field).prop_map(|(id, title, body)| Document::title_body(id, title, body))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_documents_roundtrip(
        docs in proptest::collection::vec(arb_doc(), 0..120),
        align in any::<bool>(),
        dictionary in any::<bool>(),
        sample_docs in 1usize..80,
        level in 1i32..6,
    ) {
        let options = StoreOptions {
            level,
            align,
            dictionary,
            dictionary_sample_docs: sample_docs,
            dictionary_sample_bytes: 1 << 20,
        };
        let (p, files) = write(&docs, options);
        prop_assert_eq!(files.raw_bytes, serialised_total(&docs));
        let reader = open(&p).unwrap();
        prop_assert_eq!(reader.num_docs() as usize, docs.len());
        for (i, d) in docs.iter().enumerate() {
            prop_assert_eq!(&reader.get(i as u32).unwrap(), d);
        }
        check_layout(&reader, &files, align);
    }
}

/// Compression and padding figures on real text. Not run by default:
///
/// ```text
/// TIERDEX_STORE_CORPUS=/work/shared/corpora/enwiki-wikiextractor.jsonl.zst \
/// TIERDEX_STORE_SKIP=0 TIERDEX_STORE_DOCS=5000 \
/// cargo test -p tierdex --lib store::tests::measure -- --ignored --nocapture
/// ```
///
/// The corpus is JSON lines (`id`, `title`, `body`), zstd-compressed or not.
#[test]
#[ignore]
fn measure() {
    use std::io::BufRead;
    let path = std::env::var("TIERDEX_STORE_CORPUS")
        .unwrap_or_else(|_| "/work/shared/corpora/enwiki-wikiextractor.jsonl.zst".into());
    let skip: usize = std::env::var("TIERDEX_STORE_SKIP").map_or(0, |s| s.parse().unwrap());
    let count: usize = std::env::var("TIERDEX_STORE_DOCS").map_or(5_000, |s| s.parse().unwrap());
    let file = std::fs::File::open(&path).unwrap();
    let input: Box<dyn std::io::Read> = if path.ends_with(".zst") {
        Box::new(zstd::stream::read::Decoder::new(file).unwrap())
    } else {
        Box::new(file)
    };
    let docs: Vec<Document> = std::io::BufReader::new(input)
        .lines()
        .skip(skip)
        .take(count)
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let raw = serialised_total(&docs);
    println!(
        "{path}: docs {skip}..{}, {} serialised bytes, {:.0} bytes/doc",
        skip + docs.len(),
        raw,
        raw as f64 / docs.len() as f64
    );
    for dictionary in [false, true] {
        for align in [false, true] {
            let options = StoreOptions {
                dictionary,
                align,
                ..StoreOptions::default()
            };
            let started = std::time::Instant::now();
            let (p, files) = write(&docs, options);
            let write_time = started.elapsed();
            let reader = open(&p).unwrap();
            let started = std::time::Instant::now();
            let mut pages = 0u64;
            for d in 0..reader.num_docs() {
                let (o, l) = reader.data_bytes_read_for(d).unwrap();
                pages += (o + l - 1) / 4096 - o / 4096 + 1;
                std::hint::black_box(reader.get(d).unwrap());
            }
            let read_time = started.elapsed();
            let records = files.data.content_len - files.padding_bytes - files.dictionary_bytes - 32;
            println!(
                "dictionary {dictionary:5} align {align:5}: data {:>10} B, ratio {:.3} (records {:.3}), dict {:>6} B, padding {:>8} B ({:.1}% of data), pages/doc {:.3}, index {} B, write {:?}, read all {:?}",
                files.data.content_len,
                raw as f64 / files.data.content_len as f64,
                raw as f64 / records as f64,
                files.dictionary_bytes,
                files.padding_bytes,
                100.0 * files.padding_bytes as f64 / files.data.content_len as f64,
                pages as f64 / docs.len() as f64,
                files.index.content_len,
                write_time,
                read_time,
            );
        }
    }
}
