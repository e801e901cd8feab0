//! Index files are not world-readable (issue #20 item 2): every file and
//! directory an index build, a writer (every strategy) and its updates,
//! flushes and compactions create is 0600 / 0700, unless the process asks
//! for another mode. One test, since the mode is a process setting.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tierdex::indexing::{build_index, IndexOptions};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn doc(i: usize) -> Document {
    Document::title_body(
        format!("d{i}"),
        format!("title {i}"),
        format!("words {} more {}", i % 7, i % 3),
    )
}

/// Every file and directory under `dir` (and `dir`) with its mode bits.
fn modes(dir: &Path, out: &mut Vec<(String, u32, bool)>) {
    let meta = std::fs::metadata(dir).unwrap();
    out.push((dir.display().to_string(), meta.permissions().mode() & 0o7777, true));
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            modes(&p, out);
        } else {
            let m = e.metadata().unwrap().permissions().mode() & 0o7777;
            out.push((p.display().to_string(), m, false));
        }
    }
}

fn check(dir: &Path, file: u32, directory: u32) {
    let mut all = Vec::new();
    modes(dir, &mut all);
    assert!(all.len() > 5, "{all:?}");
    for (path, mode, is_dir) in all {
        let want = if is_dir { directory } else { file };
        assert_eq!(mode, want, "{path} has mode {mode:o}, not {want:o}");
    }
}

fn exercise(root: &Path) {
    let built = root.join("built");
    build_index((0..300).map(doc).map(Ok), &built, &IndexOptions::default()).unwrap();
    let w = IndexWriter::open(&built, WriterOptions::default()).unwrap();
    w.add((300..320).map(doc).collect()).unwrap();
    w.delete(vec!["d1".into()]).unwrap();
    w.flush().unwrap();
    drop(w);
    for strategy in [Strategy::Logarithmic, Strategy::InPlace] {
        let dir = root.join(strategy.name()).join("nested");
        let w = IndexWriter::create(
            &dir,
            Default::default(),
            Default::default(),
            strategy,
            WriterOptions {
                buffer_docs: 20,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        for round in 0..4 {
            w.add((round * 30..round * 30 + 30).map(doc).collect()).unwrap();
            w.delete(vec![format!("d{}", round * 30 + 3)]).unwrap();
            w.refresh().unwrap();
        }
        w.flush().unwrap();
        w.compact().unwrap();
        drop(w);
    }
}

#[test]
fn index_files_are_private_unless_configured() {
    // SAFETY: umask only changes this process's file creation mask.
    unsafe { libc::umask(0o022) };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("private");
    exercise(&root);
    check(&root.join("built"), 0o600, 0o700);
    for strategy in [Strategy::Logarithmic, Strategy::InPlace] {
        // The directories the writer created, the index's parent included.
        check(&root.join(strategy.name()), 0o600, 0o700);
    }

    tierdex::storage::set_file_mode(0o640).unwrap();
    let root = tmp.path().join("group");
    exercise(&root);
    check(&root.join("built"), 0o640, 0o750);
    check(&root.join(Strategy::InPlace.name()), 0o640, 0o750);
    assert!(tierdex::storage::set_file_mode(0o644 | 0o100).is_err());
}
