//! Bad input of every kind gives a clear error and never a panic.

use std::path::{Path, PathBuf};

use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::layout::{Codec, Layout};
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Error};

fn docs(n: usize) -> Vec<Document> {
    (0..n)
        .map(|i| {
            Document::title_body(
                format!("d{i}"),
                format!("title number {i}"),
                format!("body text {} with words {} and more words", i % 7, i % 3).repeat(1 + i % 5),
            )
        })
        .collect()
}

fn build(dir: &Path, n: usize) {
    build_with(dir, n, Layout::Grouped, Codec::Compressed)
}

fn build_with(dir: &Path, n: usize, layout: Layout, codec: Codec) {
    let opts = IndexOptions {
        segment_docs: 150,
        layout,
        codec,
        ..Default::default()
    };
    build_index(docs(n).into_iter().map(Ok), dir, &opts).unwrap();
}

fn index_from_file(content: &[u8], skip_bad: bool) -> (tempfile::TempDir, Result<u64, Error>) {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    std::fs::write(&input, content).unwrap();
    let out = tmp.path().join("idx");
    let r = Corpus::open(
        &[input],
        ReadOptions {
            skip_bad,
            ..Default::default()
        },
    )
    .map_err(Error::from)
    .and_then(|corpus| build_index(corpus, &out, &IndexOptions::default()))
    .map(|s| s.docs);
    (tmp, r)
}

#[test]
fn malformed_json_names_file_and_line() {
    let (_t, r) = index_from_file(
        b"{\"id\":\"1\",\"title\":\"a\",\"body\":\"b\"}\n{\"id\": 2, \"title\": \n",
        false,
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("in.jsonl:2"), "{msg}");
}

#[test]
fn malformed_lines_can_be_skipped() {
    let (_t, r) = index_from_file(
        b"{\"id\":\"1\",\"body\":\"b\"}\nnot json\n{\"id\":\"3\",\"body\":\"c\"}\n",
        true,
    );
    assert_eq!(r.unwrap(), 2);
}

#[test]
fn invalid_utf8_is_reported() {
    let (_t, r) = index_from_file(
        b"{\"id\":\"1\",\"body\":\"ok\"}\n{\"id\":\"2\",\"body\":\"\xff\xfe\"}\n",
        false,
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(":2") && msg.to_lowercase().contains("utf-8"), "{msg}");
}

#[test]
fn empty_corpus_is_an_error() {
    let (_t, r) = index_from_file(b"\n\n", false);
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("empty"), "{msg}");
}

#[test]
fn missing_input_is_an_error() {
    let r = Corpus::open(&[PathBuf::from("/nonexistent/corpus.jsonl")], ReadOptions::default());
    let msg = r.expect_err("error").to_string();
    assert!(msg.contains("/nonexistent/corpus.jsonl"), "{msg}");
}

#[test]
fn bad_queries_are_reported_with_positions() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), 20);
    let s = Searcher::open(tmp.path()).unwrap();
    for (q, expect) in [
        ("(body text", "position"),
        ("body text)", "position"),
        ("\"unterminated phrase", "position"),
        ("author:smith", "unknown field `author`"),
        ("+", "position"),
    ] {
        let msg = s.search(q, Mode::TopK, 10).unwrap_err().to_string();
        assert!(msg.contains(expect), "{q}: {msg}");
    }
}

#[test]
fn not_an_index_and_existing_index_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let msg = Searcher::open(tmp.path()).err().unwrap().to_string();
    assert!(msg.contains("not a tierdex index"), "{msg}");
    build(tmp.path(), 5);
    let again = build_index(docs(3).into_iter().map(Ok), tmp.path(), &IndexOptions::default());
    assert!(again.unwrap_err().to_string().contains("already holds an index"));
    let forced = IndexOptions {
        overwrite: true,
        ..Default::default()
    };
    build_index(docs(3).into_iter().map(Ok), tmp.path(), &forced).unwrap();
    assert_eq!(Searcher::open(tmp.path()).unwrap().num_docs(), 3);
}

fn index_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e != "json"))
        // The write lock holds nothing (a build takes it, as writers do).
        .filter(|p| !p.ends_with(tierdex::update::writer::LOCK_FILE))
        .collect();
    v.sort();
    v
}

/// Opens the index, runs queries that touch every file and reads every
/// stored document; then, since pages are verified when first read, opens it
/// again verifying every page (damage in a region no query touched shows
/// only there).
fn use_index(dir: &Path) -> Result<(), Error> {
    query_index(dir)?;
    let verify = tierdex::index::OpenOptions {
        verify: true,
        ..Default::default()
    };
    tierdex::index::Index::open(dir, verify).map(|_| ())
}

fn query_index(dir: &Path) -> Result<(), Error> {
    let s = Searcher::open(dir)?;
    for q in [
        "body",
        "text words",
        "+body +words",
        "\"more words\"",
        "title:number -text",
    ] {
        for mode in [Mode::TopK, Mode::TopKAndCount, Mode::Count] {
            let r = s.search(q, mode, 1000)?;
            for h in &r.hits {
                s.doc_id(h.doc)?;
            }
        }
    }
    for d in 0..s.num_docs() as u32 {
        assert_eq!(s.doc_id(d)?, s.doc(d)?.id);
    }
    Ok(())
}

#[test]
fn id_column_matches_the_stored_ids_across_segments_and_merges() {
    // Integer ids use the integer column, anything else the string column; a
    // merge of both kinds writes the string column.
    let integer = |i: usize| i.to_string();
    let mixed = |i: usize| {
        if i.is_multiple_of(3) {
            format!("{i}")
        } else {
            format!("0{i}/é")
        }
    };
    for (name, id) in [("integer", &integer as &dyn Fn(usize) -> String), ("mixed", &mixed)] {
        for merge in [true, false] {
            for threads in [1, 2] {
                let tmp = tempfile::tempdir().unwrap();
                let opts = IndexOptions {
                    segment_docs: 70,
                    merge,
                    threads,
                    ..Default::default()
                };
                let input = docs(300)
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| Ok(Document { id: id(i), ..d }));
                build_index(input, tmp.path(), &opts).unwrap();
                let s = Searcher::open(tmp.path()).unwrap();
                let mut seen: Vec<String> = (0..s.num_docs() as u32).map(|d| s.doc_id(d).unwrap()).collect();
                for d in 0..s.num_docs() as u32 {
                    assert_eq!(s.doc_id(d).unwrap(), s.doc(d).unwrap().id, "{name} merge={merge}");
                }
                assert!(s.doc_id(s.num_docs() as u32).is_err());
                seen.sort();
                let mut want: Vec<String> = (0..300).map(id).collect();
                want.sort();
                assert_eq!(seen, want, "{name} merge={merge} threads={threads}");
            }
        }
    }
}

/// The index kinds the corruption tests run on.
const KINDS: [(Layout, Codec); 2] = [(Layout::Grouped, Codec::Compressed), (Layout::Split, Codec::Direct)];

#[test]
fn truncated_files_are_detected() {
    for (layout, codec) in KINDS {
        truncated_files_are_detected_in(layout, codec);
    }
}

fn truncated_files_are_detected_in(layout: Layout, codec: Codec) {
    let tmp = tempfile::tempdir().unwrap();
    build_with(tmp.path(), 400, layout, codec);
    for file in index_files(tmp.path()) {
        let clean = std::fs::read(&file).unwrap();
        for cut in [1, clean.len() / 2] {
            std::fs::write(&file, &clean[..clean.len() - cut]).unwrap();
            let err = use_index(tmp.path()).expect_err(&format!("{} truncated by {cut}", file.display()));
            assert!(matches!(err, Error::Corrupt { .. }), "{}: {err}", file.display());
            assert!(
                err.to_string().contains(file.file_name().unwrap().to_str().unwrap()),
                "{err}"
            );
        }
        std::fs::write(&file, &clean).unwrap();
    }
    use_index(tmp.path()).unwrap();
}

#[test]
fn bit_flips_are_detected() {
    for (layout, codec) in KINDS {
        bit_flips_are_detected_in(layout, codec);
    }
}

fn bit_flips_are_detected_in(layout: Layout, codec: Codec) {
    let tmp = tempfile::tempdir().unwrap();
    build_with(tmp.path(), 400, layout, codec);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for file in index_files(tmp.path()) {
        let clean = std::fs::read(&file).unwrap();
        for _ in 0..40 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let at = (rng % clean.len() as u64) as usize;
            let mut bad = clean.clone();
            bad[at] ^= 1 << (rng % 8);
            std::fs::write(&file, &bad).unwrap();
            let err = use_index(tmp.path()).expect_err(&format!("flip at {at} of {}", file.display()));
            assert!(matches!(err, Error::Corrupt { .. }), "{}: {err}", file.display());
        }
        std::fs::write(&file, &clean).unwrap();
    }
    // The manifest too.
    let manifest = tmp.path().join("manifest.json");
    let clean = std::fs::read_to_string(&manifest).unwrap();
    let bad = clean.replacen("\"max_doc\": ", "\"max_doc\": 1", 1);
    std::fs::write(&manifest, bad).unwrap();
    assert!(matches!(use_index(tmp.path()), Err(Error::Corrupt { .. })));
    std::fs::write(&manifest, clean).unwrap();
    use_index(tmp.path()).unwrap();
}

/// Opening with verification alone (no query) catches damage in every file,
/// the id column included: what `tierdex inspect --verify` relies on.
#[test]
fn verification_alone_catches_a_flip_in_every_file() {
    let tmp = tempfile::tempdir().unwrap();
    // One merged segment, large enough that every file has pages no
    // open-time read touches.
    let opts = IndexOptions {
        merge: true,
        ..Default::default()
    };
    build_index(docs(3000).into_iter().map(Ok), tmp.path(), &opts).unwrap();
    let verify = tierdex::index::OpenOptions {
        verify: true,
        ..Default::default()
    };
    for file in index_files(tmp.path()) {
        let clean = std::fs::read(&file).unwrap();
        // One flip in every page, each on its own.
        for at in (100..clean.len()).step_by(4096) {
            let mut bad = clean.clone();
            bad[at] ^= 0x10;
            std::fs::write(&file, &bad).unwrap();
            let err = tierdex::index::Index::open(tmp.path(), verify)
                .err()
                .unwrap_or_else(|| panic!("a flip at {at} of {} went unnoticed", file.display()));
            assert!(matches!(err, Error::Corrupt { .. }), "{}: {err}", file.display());
        }
        std::fs::write(&file, &clean).unwrap();
    }
    tierdex::index::Index::open(tmp.path(), verify).unwrap();
}

#[test]
fn errors_say_whose_fault_they_are() {
    use tierdex::ErrorKind;
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(Searcher::open(tmp.path()).err().unwrap().kind(), ErrorKind::NotFound);
    build(tmp.path(), 5);
    let again = build_index(docs(3).into_iter().map(Ok), tmp.path(), &IndexOptions::default());
    assert_eq!(again.unwrap_err().kind(), ErrorKind::Conflict);
    let s = Searcher::open(tmp.path()).unwrap();
    assert_eq!(s.search("a (", Mode::TopK, 10).unwrap_err().kind(), ErrorKind::BadInput);
    assert_eq!(s.doc(1_000).unwrap_err().kind(), ErrorKind::NotFound);
    let w = tierdex::update::IndexWriter::open(tmp.path(), Default::default()).unwrap();
    let busy = tierdex::update::IndexWriter::open(tmp.path(), Default::default())
        .err()
        .unwrap();
    assert_eq!(busy.kind(), ErrorKind::Conflict);
    drop(w);
    std::fs::write(tmp.path().join("manifest.json"), b"{}").unwrap();
    assert_eq!(Searcher::open(tmp.path()).err().unwrap().kind(), ErrorKind::Corrupt);
}
