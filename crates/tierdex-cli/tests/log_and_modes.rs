//! The command line and the write-ahead log (issue #20 items 4 and 17) and
//! file permissions (item 2): `search` and `inspect` say when acknowledged
//! batches are only in the log; a damaged log record stops every writer
//! with a message saying what to run, and `--truncate-corrupt-log` runs it;
//! `--file-mode` sets the permissions of what a command creates.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn tierdex(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(args)
        .output()
        .expect("run tierdex")
}

fn ok(args: &[&str]) -> (String, String) {
    let out = tierdex(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "tierdex {args:?} failed:\n{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

fn doc(i: usize) -> Document {
    Document::title_body(format!("d{i}"), format!("title {i}"), format!("zebracorn words {i}"))
}

fn wal_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("wal-"))
        .collect();
    v.sort();
    v
}

#[test]
fn unapplied_and_damaged_log_records_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let idx = dir.to_str().unwrap();
    {
        let w = IndexWriter::create(
            &dir,
            Default::default(),
            Default::default(),
            Strategy::Logarithmic,
            WriterOptions::default(),
        )
        .unwrap();
        w.add((0..3).map(doc).collect()).unwrap();
        w.flush().unwrap();
        // Acknowledged, never flushed: the writer stops here.
        w.add(vec![doc(3)]).unwrap();
        w.add(vec![doc(4)]).unwrap();
    }
    let (out, err) = ok(&["search", idx, "zebracorn", "--json", "--mode", "count"]);
    assert!(out.contains("\"count\":3"), "{out}");
    assert!(
        err.contains("2 acknowledged batches are only in the write-ahead log"),
        "{err}"
    );
    let (out, _) = ok(&["inspect", idx, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["unapplied_log_records"], 2);

    // Damage the last record: an acknowledged batch.
    let log = wal_files(&dir).pop().unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0x01;
    std::fs::write(&log, &bytes).unwrap();
    let out = tierdex(&["delete", idx, "d0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a damaged log was dropped silently");
    assert!(
        err.contains("corrupt") && err.contains(&log.display().to_string()) && err.contains("--truncate-corrupt-log"),
        "{err}"
    );
    assert_eq!(std::fs::read(&log).unwrap(), bytes, "refusing changed the log");
    let (_, err) = ok(&["compact", idx, "--truncate-corrupt-log"]);
    assert!(err.contains("cut"), "{err}");
    // The batch before the damaged one was kept and applied.
    let (out, err) = ok(&["search", idx, "zebracorn", "--json", "--mode", "count"]);
    assert!(out.contains("\"count\":4"), "{out}");
    assert!(!err.contains("write-ahead log"), "{err}");
}

#[test]
fn file_mode_sets_the_permissions_of_new_files() {
    // SAFETY: umask only changes this process's (and its children's) file
    // creation mask.
    unsafe { libc::umask(0o022) };
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c.jsonl");
    std::fs::write(&corpus, "{\"id\":\"a\",\"title\":\"t\",\"body\":\"b c\"}\n").unwrap();
    for (flag, file, dir) in [(None, 0o600, 0o700), (Some("640"), 0o640, 0o750)] {
        let idx = tmp.path().join(format!("idx-{file:o}"));
        let mut args = vec!["index", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap()];
        if let Some(m) = flag {
            args.extend(["--file-mode", m]);
        }
        ok(&args);
        ok(&[
            "add",
            idx.to_str().unwrap(),
            corpus.to_str().unwrap(),
            "--file-mode",
            &format!("{file:o}"),
        ]);
        assert_eq!(std::fs::metadata(&idx).unwrap().permissions().mode() & 0o777, dir);
        for e in std::fs::read_dir(&idx).unwrap().flatten() {
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, file, "{}", e.path().display());
        }
    }
    let out = tierdex(&["--file-mode", "755", "inspect", tmp.path().to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("execute"));
}
