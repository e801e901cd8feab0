//! A real full disk (issue #20 item 9): a writer on a small ext4 file
//! system, loop-mounted in a temporary directory, is fed documents until a
//! write fails. The failure must be a clear I/O error (ENOSPC), nothing
//! acknowledged may be lost, deletions must still be accepted, and once
//! space is freed (a filler file made beforehand is removed) the same
//! process accepts writes, flushes and compacts again; a reopened index
//! holds every acknowledged change.
//!
//! Needs root (and `mkfs.ext4`, loop devices): skipped with the reason
//! printed otherwise. The mount is always undone, by a guard.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use tierdex::error::{Error, ErrorKind};
use tierdex::search::Searcher;
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

/// Unmounts the file system (and removes its image) when dropped.
struct Mount {
    point: PathBuf,
    image: PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.point)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.point).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

/// A fresh ext4 file system of `mb` MiB mounted under `tmp`.
fn mount(tmp: &Path, mb: u64) -> Result<Mount, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    let image = tmp.join("fs.img");
    let point = tmp.join("mnt");
    std::fs::create_dir(&point).map_err(|e| e.to_string())?;
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(mb << 20))
        .map_err(|e| e.to_string())?;
    run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(&image))?;
    run(Command::new("mount").args(["-o", "loop"]).arg(&image).arg(&point))?;
    Ok(Mount { point, image })
}

/// Words from a seeded generator, so that the store cannot compress them
/// away and the disk fills.
fn doc(i: u64) -> Document {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut body = String::with_capacity(2000);
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.push_str(&format!("w{:x} ", x % 100_000));
    }
    Document::title_body(format!("d{i}"), format!("title {i}"), body)
}

fn live_ids(s: &Searcher) -> BTreeSet<String> {
    let index = s.index();
    (0..index.num_docs() as u32)
        .filter(|&d| !index.is_deleted(d))
        .map(|d| s.doc_id(d).unwrap())
        .collect()
}

#[test]
fn a_full_disk_fails_writes_clearly_loses_nothing_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = match mount(tmp.path(), 48) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a small file system ({why})");
            return;
        }
    };
    // Room to give back later.
    let filler = fs.point.join("filler");
    std::fs::write(&filler, vec![7u8; 8 << 20]).unwrap();
    let dir = fs.point.join("idx");
    let w = IndexWriter::create(
        &dir,
        Default::default(),
        Default::default(),
        Strategy::Logarithmic,
        WriterOptions {
            buffer_docs: 300,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut acked: BTreeSet<String> = BTreeSet::new();
    let mut next = 0u64;
    let failure = loop {
        assert!(next < 200_000, "the disk never filled");
        let docs: Vec<Document> = (next..next + 50).map(doc).collect();
        match w.add(docs) {
            Ok(_) => {
                acked.extend((next..next + 50).map(|i| format!("d{i}")));
                next += 50;
            }
            Err(e) => break e,
        }
    };
    eprintln!("{} documents acknowledged before: {failure}", acked.len());
    assert_eq!(failure.kind(), ErrorKind::Io, "{failure}");
    match &failure {
        Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOSPC), "{failure}"),
        other => panic!("not an I/O error: {other}"),
    }
    // Nothing acknowledged is lost, and the same writer still answers.
    assert_eq!(live_ids(&w.refresh().unwrap()), acked);
    // Whatever room the writer left is taken too: the disk is full.
    let rest = fs.point.join("rest");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&rest).unwrap();
        let chunk = vec![1u8; 64 << 10];
        while f.write_all(&chunk).and_then(|_| f.sync_all()).is_ok() {}
    }
    let e = w.add(vec![doc(next)]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    // Deletions are accepted on the full disk (they are how space is
    // given back).
    let gone: Vec<String> = acked.iter().take(acked.len() / 2).cloned().collect();
    w.delete(gone.clone()).unwrap();
    for id in &gone {
        acked.remove(id);
    }
    assert_eq!(live_ids(&w.refresh().unwrap()), acked);
    // Space comes back: the same writer takes additions, flushes, compacts.
    std::fs::remove_file(&filler).unwrap();
    std::fs::remove_file(&rest).unwrap();
    let docs: Vec<Document> = (next..next + 50).map(doc).collect();
    w.add(docs)
        .unwrap_or_else(|e| panic!("an addition after space was freed: {e}"));
    acked.extend((next..next + 50).map(|i| format!("d{i}")));
    w.flush()
        .unwrap_or_else(|e| panic!("a flush after space was freed: {e}"));
    w.compact()
        .unwrap_or_else(|e| panic!("compaction after space was freed: {e}"));
    assert_eq!(live_ids(&w.searcher()), acked);
    drop(w);
    let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
    assert_eq!(live_ids(&w.searcher()), acked, "after reopening");
    drop(w);
    drop(fs);
}
