use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::{Corpus, ReadOptions};
use crate::corpus::CorpusError;
use crate::schema::Document;

/// A document with the non-empty ones of `title` and `body` (a record
/// without a field, or with a null one, has no value for it).
fn doc(id: &str, title: &str, body: &str) -> Document {
    let mut d = Document::new(id);
    for (name, text) in [("title", title), ("body", body)] {
        if !text.is_empty() {
            d = d.with_text(name, text);
        }
    }
    d
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn zst(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Reads everything, returning the documents before the first error and
/// that error (if any); checks that the iterator ends after an error.
fn read_all(inputs: &[PathBuf], opts: ReadOptions) -> (Vec<Document>, Option<CorpusError>, u64) {
    let mut corpus = Corpus::open(inputs, opts).unwrap();
    let mut docs = Vec::new();
    let mut err = None;
    for item in corpus.by_ref() {
        match item {
            Ok(d) => docs.push(d),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert!(corpus.next().is_none(), "iteration continues after an error");
    assert!(corpus.next().is_none(), "iterator is not fused");
    (docs, err, corpus.skipped())
}

const SAMPLE: &str = concat!(
    r#"{"id":"a","title":"Alpha","body":"first body"}"#,
    "\n",
    "\n",
    "   \t \n",
    r#"{"url":"http://example.org/b","title":"Beta","body":"second"}"#,
    "\r\n",
    r#"{"id":42,"body":"only body","title":null}"#,
    "\n",
    r#"{"id":"d","title":"only title"}"#,
    "\n",
    r#"{"id":"e"}"#, // last line without newline
);

fn sample_docs() -> Vec<Document> {
    vec![
        doc("a", "Alpha", "first body"),
        doc("http://example.org/b", "Beta", "second"),
        doc("42", "", "only body"),
        doc("d", "only title", ""),
        doc("e", "", ""),
    ]
}

#[test]
fn json_lines_forms_fields_and_blank_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "docs.jsonl", SAMPLE.as_bytes());
    let (docs, err, skipped) = read_all(&[p], ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(docs, sample_docs());
    assert_eq!(skipped, 0);
}

#[test]
fn fields_outside_the_schema_are_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let text = "{\"id\":\"a\",\"body\":\"x\",\"extra\":{\"nested\":[1,2,3]}}\n{\"id\":\"b\",\"name\":\"n\"}\n";
    let p = write(dir.path(), "docs.jsonl", text.as_bytes());
    let (docs, err, _) = read_all(std::slice::from_ref(&p), ReadOptions::default());
    assert!(docs.is_empty());
    match err {
        Some(CorpusError::BadRecord { line: 1, message, .. }) => {
            assert!(message.contains("unknown field `extra`"), "{message}")
        }
        other => panic!("unexpected {other:?}"),
    }
    // With a schema that has the field, it is read.
    let schema = crate::schema::Schema::text_fields(&["name"], false).unwrap();
    let mut corpus = Corpus::open(
        &[p],
        ReadOptions {
            skip_bad: true,
            ..Default::default()
        },
    )
    .unwrap()
    .with_schema(std::sync::Arc::new(schema));
    let docs: Vec<Document> = corpus.by_ref().map(|d| d.unwrap()).collect();
    assert_eq!(docs, vec![Document::new("b").with_text("name", "n")]);
    assert_eq!(corpus.skipped(), 1);
}

#[test]
fn bom_and_long_lines() {
    let dir = tempfile::tempdir().unwrap();
    let long = "word ".repeat(60_000); // 300 KB
    let mut text = String::from("\u{FEFF}");
    text.push_str(&format!("{{\"id\":\"x\",\"title\":\"t\",\"body\":\"{long}\"}}\n"));
    text.push_str("{\"id\":\"y\",\"body\":\"short\"}\n");
    text.push_str(&format!("{{\"id\":\"z\",\"body\":\"{long}\"}}\n"));
    let p = write(dir.path(), "long.ndjson", text.as_bytes());
    let (docs, err, _) = read_all(&[p], ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0].id, "x");
    assert_eq!(docs[0].body(), long);
    assert_eq!(docs[1], doc("y", "", "short"));
    assert_eq!(docs[2].body().len(), long.len());
}

#[test]
fn bad_json_reports_line_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let text = concat!(
        r#"{"id":"1"}"#,
        "\n\n",
        r#"{"id":"2"}"#,
        "\n",
        r#"{"id":"3","title":}"#,
        "\n",
        r#"{"id":"4"}"#,
        "\n"
    );
    let p = write(dir.path(), "docs.jsonl", text.as_bytes());
    let (docs, err, _) = read_all(std::slice::from_ref(&p), ReadOptions::default());
    assert_eq!(docs.len(), 2);
    let err = err.unwrap();
    let shown = err.to_string();
    match err {
        CorpusError::BadRecord { path, line, message } => {
            assert_eq!(path, p);
            assert_eq!(line, 4);
            assert!(
                message.starts_with("invalid JSON: expected value at column 19"),
                "{message}"
            );
            assert!(
                shown.ends_with("docs.jsonl:4: invalid JSON: expected value at column 19"),
                "{shown}"
            );
        }
        e => panic!("unexpected error {e}"),
    }
}

#[test]
fn missing_id_and_wrong_types_are_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    for (line, expect) in [
        (r#"{"title":"t","body":"b"}"#, "missing `id` (or `url`) field"),
        (
            r#"{"id":"a","body":["x"]}"#,
            "bad value for field `body`: invalid type: sequence",
        ),
        (
            r#"{"id":true}"#,
            "bad value for field `id`: invalid type: boolean `true`",
        ),
        (r#"[1,2]"#, "JSON arrays are not supported"),
        (
            r#"{"id":"a"}{"id":"b"}"#,
            "invalid JSON: trailing characters at column 11",
        ),
    ] {
        let p = write(
            dir.path(),
            "bad.jsonl",
            format!("{{\"id\":\"ok\"}}\n{line}\n").as_bytes(),
        );
        let (docs, err, _) = read_all(&[p], ReadOptions::default());
        assert_eq!(docs.len(), 1);
        match err {
            Some(CorpusError::BadRecord { line: 2, message, .. }) => {
                assert!(message.contains(expect), "{line}: {message}")
            }
            other => panic!("{line}: unexpected {other:?}"),
        }
    }
}

#[test]
fn invalid_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"{\"id\":\"ok\"}\n{\"id\":\"a\",\"body\":\"ab".to_vec();
    bytes.extend_from_slice(&[0xFF, 0xFE]);
    bytes.extend_from_slice(b"\"}\n{\"id\":\"after\"}\n");
    let p = write(dir.path(), "utf.jsonl", &bytes);
    let (docs, err, _) = read_all(std::slice::from_ref(&p), ReadOptions::default());
    assert_eq!(docs.len(), 1);
    match err {
        Some(CorpusError::BadRecord { line, message, .. }) => {
            assert_eq!(line, 2);
            assert_eq!(message, "invalid UTF-8 at byte 20 of the line");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Skipped with skip_bad.
    let (docs, err, skipped) = read_all(
        &[p],
        ReadOptions {
            skip_bad: true,
            ..Default::default()
        },
    );
    assert!(err.is_none());
    assert_eq!(skipped, 1);
    assert_eq!(docs, vec![doc("ok", "", ""), doc("after", "", "")]);
}

#[test]
fn skip_bad_counts_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    let mut good = Vec::new();
    for i in 0..40 {
        if i % 3 == 1 {
            text.push_str("{not json\n");
        } else if i % 3 == 2 {
            text.push_str("{\"title\":\"no id\"}\n");
        } else {
            text.push_str(&format!("{{\"id\":{i}}}\n"));
            good.push(doc(&i.to_string(), "", ""));
        }
    }
    let p = write(dir.path(), "mixed.jsonl", text.as_bytes());
    let (docs, err, skipped) = read_all(
        &[p],
        ReadOptions {
            skip_bad: true,
            ..Default::default()
        },
    );
    assert!(err.is_none());
    assert_eq!(docs, good);
    assert_eq!(skipped, 26);
}

#[test]
fn compressed_inputs_are_transparent() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = vec![
        write(dir.path(), "a.jsonl.zst", &zst(SAMPLE.as_bytes())),
        write(dir.path(), "b.jsonl.gz", &gz(SAMPLE.as_bytes())),
        // Detected by magic bytes even without the extension.
        write(dir.path(), "c.jsonl", &zst(SAMPLE.as_bytes())),
        write(dir.path(), "d.json", &gz(SAMPLE.as_bytes())),
        // Concatenated frames / members, as `cat a.zst b.zst` gives.
        write(
            dir.path(),
            "e.jsonl.zst",
            &[zst(SAMPLE.as_bytes()), zst(b"\n{\"id\":\"tail\"}\n")].concat(),
        ),
        write(
            dir.path(),
            "f.jsonl.gz",
            &[gz(SAMPLE.as_bytes()), gz(b"\n{\"id\":\"tail\"}\n")].concat(),
        ),
        // An empty compressed file holds no documents.
        write(dir.path(), "g.jsonl.zst", b""),
    ];
    let (docs, err, _) = read_all(&inputs, ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    let mut expect = Vec::new();
    for _ in 0..4 {
        expect.extend(sample_docs());
    }
    for _ in 0..2 {
        expect.extend(sample_docs());
        expect.push(doc("tail", "", ""));
    }
    assert_eq!(docs, expect);
}

#[test]
fn truncated_and_corrupt_streams_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(&format!(
            "{{\"id\":\"{i}\",\"body\":\"some words number {i} and more {}\"}}\n",
            i * 7919 % 1013
        ));
    }
    let z = zst(text.as_bytes());
    let g = gz(text.as_bytes());
    let mut corrupt = z.clone();
    let mid = corrupt.len() / 2;
    for b in &mut corrupt[mid..mid + 16] {
        *b ^= 0x5A;
    }
    let cases = [
        ("trunc.jsonl.zst", z[..z.len() / 2].to_vec()),
        ("trunc-end.jsonl.zst", z[..z.len() - 3].to_vec()),
        ("trunc.jsonl.gz", g[..g.len() / 2].to_vec()),
        ("trunc-crc.jsonl.gz", g[..g.len() - 4].to_vec()),
        ("corrupt.jsonl.zst", corrupt),
        ("head-only.jsonl.zst", z[..6].to_vec()),
        ("magic-only.jsonl.gz", g[..2].to_vec()),
        ("not-zstd.jsonl.zst", b"{\"id\":\"plain\"}\n".to_vec()),
    ];
    for (name, bytes) in cases {
        let p = write(dir.path(), name, &bytes);
        for skip_bad in [false, true] {
            let (docs, err, _) = read_all(
                std::slice::from_ref(&p),
                ReadOptions {
                    skip_bad,
                    ..Default::default()
                },
            );
            // Truncating only the trailer may leave every line readable,
            // but the stream is still reported as broken.
            assert!(
                docs.len() < 2000 || name.starts_with("trunc-"),
                "{name}: all documents read"
            );
            let err = err.unwrap_or_else(|| panic!("{name}: no error"));
            assert_eq!(err.path(), p, "{name}");
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }
}

#[test]
fn directories_of_text_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("texts");
    write(&root, "b.txt", b"bee body");
    write(&root, "a/z.md", b"\xEF\xBB\xBFzed");
    write(&root, "a/y", b"why");
    write(&root, ".hidden", b"no");
    write(&root, ".git/config", b"no");
    write(&root, "c/.secret.txt", b"no");
    write(&root, "c/empty.txt", b"");
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    let (docs, err, _) = read_all(std::slice::from_ref(&root), ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        docs,
        vec![
            doc("a/y", "y", "why"),
            doc("a/z.md", "z", "zed"),
            doc("b.txt", "b", "bee body"),
            doc("c/empty.txt", "empty", ""),
        ]
    );
    let corpus = Corpus::open(std::slice::from_ref(&root), ReadOptions::default()).unwrap();
    assert_eq!(corpus.total_bytes(), 8 + 6 + 3);

    // Invalid UTF-8: a bad record with line 0, or skipped.
    let bad = write(&root, "b0.bin", &[b'o', b'k', 0xC3]);
    let (docs, err, _) = read_all(std::slice::from_ref(&root), ReadOptions::default());
    assert_eq!(docs.len(), 3); // a/y, a/z.md, b.txt sort before b0.bin
    match err {
        Some(CorpusError::BadRecord { path, line, message }) => {
            assert_eq!(path, bad);
            assert_eq!(line, 0);
            assert_eq!(message, "invalid UTF-8 at byte 2 of the file");
        }
        other => panic!("unexpected {other:?}"),
    }
    let (docs, err, skipped) = read_all(
        &[root],
        ReadOptions {
            skip_bad: true,
            ..Default::default()
        },
    );
    assert!(err.is_none());
    assert_eq!((docs.len(), skipped), (4, 1));
}

#[cfg(unix)]
#[test]
fn directory_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("texts");
    write(&root, "real.txt", b"real");
    std::os::unix::fs::symlink(root.join("real.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("loop")).unwrap();
    std::os::unix::fs::symlink(root.join("missing"), root.join("dangling")).unwrap();
    let (docs, err, _) = read_all(&[root], ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        docs,
        vec![doc("link.txt", "link", "real"), doc("real.txt", "real", "real")]
    );
}

#[test]
fn nonexistent_input_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ok = write(dir.path(), "ok.jsonl", b"{\"id\":\"1\"}\n");
    let missing = dir.path().join("missing.jsonl.zst");
    match Corpus::open(&[ok, missing.clone()], ReadOptions::default()) {
        Err(e @ CorpusError::Io { .. }) => {
            assert_eq!(e.path(), missing);
            assert!(e.to_string().contains("missing.jsonl.zst"), "{e}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn input_deleted_after_open_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.jsonl", b"{\"id\":\"1\"}\n");
    let b = write(dir.path(), "b.jsonl", b"{\"id\":\"2\"}\n");
    let mut corpus = Corpus::open(
        &[a, b.clone()],
        ReadOptions {
            skip_bad: true,
            ..Default::default()
        },
    )
    .unwrap();
    std::fs::remove_file(&b).unwrap();
    assert_eq!(corpus.next().unwrap().unwrap().id, "1");
    match corpus.next() {
        Some(Err(e @ CorpusError::Io { .. })) => assert_eq!(e.path(), b),
        other => panic!("unexpected {other:?}"),
    }
    assert!(corpus.next().is_none());
}

#[test]
fn multiple_inputs_in_order_with_progress() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dir");
    write(&root, "x.txt", b"text file");
    let inputs = vec![
        write(dir.path(), "1.jsonl.gz", &gz(b"{\"id\":\"one\"}\n")),
        root,
        write(dir.path(), "2.jsonl", b"{\"id\":\"two\"}\n{\"id\":\"three\"}\n"),
        write(dir.path(), "3.jsonl.zst", &zst(b"{\"id\":\"four\"}")),
        write(dir.path(), "empty.jsonl", b""),
    ];
    let expected_total: u64 = inputs
        .iter()
        .map(|p| {
            if p.is_dir() {
                9
            } else {
                std::fs::metadata(p).unwrap().len()
            }
        })
        .sum();
    let mut corpus = Corpus::open(&inputs, ReadOptions::default()).unwrap();
    assert_eq!(corpus.total_bytes(), expected_total);
    let progress = corpus.progress();
    assert_eq!(progress.load(Ordering::Relaxed), 0);
    let ids: Vec<String> = corpus.by_ref().map(|d| d.unwrap().id).collect();
    assert_eq!(ids, ["one", "x.txt", "two", "three", "four"]);
    assert_eq!(progress.load(Ordering::Relaxed), expected_total);
    assert_eq!(corpus.skipped(), 0);
}

#[test]
fn empty_inputs_are_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty_dir = dir.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    let inputs = vec![write(dir.path(), "e.jsonl", b"\n\n"), empty_dir];
    let (docs, err, _) = read_all(&inputs, ReadOptions::default());
    assert!(docs.is_empty() && err.is_none());
    let (docs, err, _) = read_all(&[], ReadOptions::default());
    assert!(docs.is_empty() && err.is_none());
}

#[test]
fn zstd_skippable_frame_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, b'x', b'y', b'z'];
    bytes.extend(zst(b"{\"id\":\"after-skippable\"}\n"));
    let p = write(dir.path(), "skip.jsonl", &bytes);
    let (docs, err, _) = read_all(&[p], ReadOptions::default());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(docs, vec![doc("after-skippable", "", "")]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Arbitrary bytes never panic the reader; with skip_bad only I/O
    /// errors (none here) end it, and every line is a document or skipped.
    #[test]
    fn arbitrary_bytes_never_panic(lines in proptest::collection::vec(
        proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 0..20),
        json_every in 1usize..4)
    {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        for (i, mut l) in lines.into_iter().enumerate() {
            if i % json_every == 0 {
                l = format!("{{\"id\":{i},\"body\":\"{}\"}}", l.len()).into_bytes();
            }
            l.retain(|&b| b != b'\n');
            bytes.extend_from_slice(&l);
            bytes.push(b'\n');
        }
        let p = write(dir.path(), "fuzz.jsonl", &bytes);
        let (_, err, _) = read_all(std::slice::from_ref(&p), ReadOptions::default());
        if let Some(e) = err {
            let is_bad_record = matches!(e, CorpusError::BadRecord { .. });
            proptest::prop_assert!(is_bad_record, "{}", e);
        }
        let (docs, err, skipped) = read_all(std::slice::from_ref(&p), ReadOptions { skip_bad: true, ..Default::default() });
        proptest::prop_assert!(err.is_none());
        let non_blank = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .count() as u64;
        proptest::prop_assert_eq!(docs.len() as u64 + skipped, non_blank);
    }
}

#[test]
fn corpus_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Corpus>();
}

/// Reading speed on the real corpus (skips when absent). Run with
/// `cargo test --release -p tierdex --lib read_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn read_speed() {
    // `shared/` sits next to the repository (or next to the worktrees'
    // parent directory).
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        std::env::var_os("TIERDEX_READ_BENCH").map(PathBuf::from),
        Some(root.join("../../../shared/corpora/enwiki-wikiextractor.jsonl.zst")),
        Some(root.join("../../../../shared/corpora/enwiki-wikiextractor.jsonl.zst")),
    ];
    let Some(path) = candidates.into_iter().flatten().find(|p| p.exists()) else {
        eprintln!("no corpus found (set TIERDEX_READ_BENCH): skipped");
        return;
    };
    let t = std::time::Instant::now();
    let corpus = Corpus::open(std::slice::from_ref(&path), ReadOptions::default()).unwrap();
    let total = corpus.total_bytes();
    let (mut docs, mut bytes) = (0u64, 0u64);
    for d in corpus {
        let d = d.unwrap();
        docs += 1;
        bytes += (d.id.len() + d.title().len() + d.body().len()) as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "{}: {docs} docs, {:.0} MB of text from {:.0} MB on disk in {secs:.2}s: {:.0} docs/s, {:.0} MB/s of text",
        path.display(),
        bytes as f64 / 1e6,
        total as f64 / 1e6,
        docs as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

/// Issue #20 item 13: a record over the limit is a bad record naming its
/// file and line, skipped with `skip_bad` like any other, and never read
/// whole (lines and directory files alike, compressed or not).
#[test]
fn records_over_the_limit_are_bad_records_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "x".repeat(50_000);
    let text = format!(
        "{{\"id\":\"a\",\"body\":\"small\"}}\n{{\"id\":\"big\",\"body\":\"{huge}\"}}\n{{\"id\":\"b\",\"body\":\"after\"}}\n"
    );
    let limit = 1_000u64;
    let plain = write(dir.path(), "big.jsonl", text.as_bytes());
    let zst = write(
        dir.path(),
        "big.jsonl.zst",
        &zstd::encode_all(text.as_bytes(), 3).unwrap(),
    );
    for p in [plain, zst] {
        let strict = ReadOptions {
            max_record_bytes: limit,
            ..Default::default()
        };
        let (docs, err, _) = read_all(std::slice::from_ref(&p), strict);
        assert_eq!(docs, vec![doc("a", "", "small")]);
        match err {
            Some(e @ CorpusError::BadRecord { line: 2, .. }) => {
                let m = e.to_string();
                assert!(m.contains(&format!("{}:2", p.display())), "{m}");
                assert!(m.contains("larger than the limit of 1000 bytes"), "{m}");
            }
            other => panic!("unexpected {other:?}"),
        }
        let skipping = ReadOptions {
            skip_bad: true,
            max_record_bytes: limit,
        };
        let mut corpus = Corpus::open(std::slice::from_ref(&p), skipping).unwrap();
        let docs: Vec<Document> = corpus.by_ref().map(|d| d.unwrap()).collect();
        assert_eq!(docs, vec![doc("a", "", "small"), doc("b", "", "after")]);
        assert_eq!(corpus.skipped(), 1);
        // The line buffer never held the record.
        assert!(
            corpus.line_buf.capacity() <= 64 * 1024,
            "{}",
            corpus.line_buf.capacity()
        );
    }
    // A line exactly at the limit is read.
    let exact = format!("{{\"id\":\"e\",\"body\":\"{}\"}}", "y".repeat(10));
    let p = write(dir.path(), "exact.jsonl", format!("{exact}\n").as_bytes());
    let opts = ReadOptions {
        max_record_bytes: exact.len() as u64,
        ..Default::default()
    };
    let (docs, err, _) = read_all(&[p], opts);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(docs.len(), 1);
    // Directory inputs: a file over the limit is skipped unread.
    let d = dir.path().join("texts");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("small.txt"), "tiny").unwrap();
    std::fs::write(d.join("large.txt"), "z".repeat(5_000)).unwrap();
    let skipping = ReadOptions {
        skip_bad: true,
        max_record_bytes: limit,
    };
    let (docs, err, skipped) = read_all(&[d], skipping);
    assert!(err.is_none());
    assert_eq!(skipped, 1);
    assert_eq!(
        docs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        vec!["small.txt"]
    );
}
