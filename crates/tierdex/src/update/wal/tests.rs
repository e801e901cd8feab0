//! The log's durability contract: everything appended replays, a torn tail
//! is dropped (and only a tail), corruption elsewhere is reported.

use super::*;
use crate::index::log::{file_name, list, record, RECORD_HEADER};

fn doc(i: u64) -> Document {
    Document::title_body(format!("d{i}"), format!("title {i}"), "body ".repeat(i as usize % 7))
}

fn batch(i: u64) -> Vec<Op> {
    if i % 3 == 2 {
        vec![Op::Delete(format!("d{}", i - 1))]
    } else {
        vec![Op::Add(doc(i)), Op::Add(doc(i + 1000))]
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    list(dir).unwrap().into_iter().map(|(_, p)| p).collect()
}

#[test]
fn appended_batches_replay_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, replay) = Wal::open(dir.path(), 0, false).unwrap();
    assert!(replay.batches.is_empty());
    for i in 0..20 {
        assert_eq!(wal.append(&batch(i)).unwrap(), i + 1);
    }
    drop(wal);
    let (wal, replay) = Wal::open(dir.path(), 0, false).unwrap();
    assert_eq!(replay.torn_bytes, 0);
    let want: Vec<(u64, Vec<Op>)> = (0..20).map(|i| (i + 1, batch(i))).collect();
    assert_eq!(replay.batches, want);
    assert_eq!(wal.append(&batch(20)).unwrap(), 21);
}

#[test]
fn a_torn_tail_is_dropped_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
        for i in 0..3 {
            wal.append(&batch(i)).unwrap();
        }
    }
    let path = files(dir.path()).pop().unwrap();
    let full = std::fs::read(&path).unwrap();
    let third = {
        let mut at = HEADER;
        for _ in 0..2 {
            at = record(&full, at).unwrap().2;
        }
        at
    };
    for cut in third..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let (wal, replay) = Wal::open(dir.path(), 0, false).unwrap();
        assert_eq!(replay.batches.len(), 2, "cut at {cut}");
        assert_eq!(replay.torn_bytes, (cut - third) as u64);
        // The log goes on cleanly after the dropped tail.
        assert_eq!(wal.append(&batch(9)).unwrap(), 3);
        drop(wal);
        let (_, replay) = Wal::open(dir.path(), 0, false).unwrap();
        assert_eq!(replay.batches.last().unwrap(), &(3, batch(9)));
        assert_eq!(replay.torn_bytes, 0);
    }
}

#[test]
fn damage_to_any_record_is_reported_and_cut_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
        for i in 0..4 {
            wal.append(&batch(i)).unwrap();
        }
    }
    let path = files(dir.path()).pop().unwrap();
    let full = std::fs::read(&path).unwrap();
    let mut starts = vec![HEADER];
    while let Some((_, _, end)) = record(&full, *starts.last().unwrap()) {
        starts.push(end);
    }
    assert_eq!(starts.len(), 5);
    // A flipped payload byte, then a flipped length byte, of each record
    // in turn, the last one included: an acknowledged batch is damaged.
    for (r, &at) in starts[..4].iter().enumerate() {
        for pos in [at + RECORD_HEADER + 2, at] {
            let mut bad = full.clone();
            bad[pos] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let e = Wal::open(dir.path(), 0, false)
                .err()
                .unwrap_or_else(|| panic!("damage in record {r} at {pos} went unreported"));
            assert_eq!(e.kind(), crate::error::ErrorKind::Corrupt);
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string())
                    && msg.contains(&format!("offset {at}"))
                    && msg.contains("--truncate-corrupt-log"),
                "{msg}"
            );
            // Refusing to open changed nothing.
            assert_eq!(std::fs::read(&path).unwrap(), bad);
        }
    }
    // Told to, the open cuts the log before the damaged record.
    let mut bad = full.clone();
    bad[starts[3] + RECORD_HEADER + 2] ^= 0x10;
    std::fs::write(&path, &bad).unwrap();
    let (wal, replay) = Wal::open(dir.path(), 0, true).unwrap();
    assert_eq!(replay.batches.len(), 3);
    assert!(
        replay.truncated.as_deref().unwrap().contains("record 4"),
        "{:?}",
        replay.truncated
    );
    assert_eq!(wal.append(&batch(9)).unwrap(), 4);
    drop(wal);
    let (_, replay) = Wal::open(dir.path(), 0, false).unwrap();
    assert_eq!(replay.batches.len(), 4);
    assert!(replay.truncated.is_none());
    // A foreign file is not a log.
    std::fs::write(&path, b"hello, this is not a log at all").unwrap();
    assert!(Wal::open(dir.path(), 0, false)
        .err()
        .unwrap()
        .to_string()
        .contains("bad header"));
}

#[test]
fn a_failed_append_is_cut_off_and_the_log_goes_on() {
    use crate::storage::faults::{self, FaultOp};
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
    wal.append(&batch(0)).unwrap();
    faults::inject(dir.path(), FaultOp::Write, libc::ENOSPC, 0, 1);
    let e = wal.append(&batch(1)).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Io);
    match &e {
        Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("{other}"),
    }
    // The next batch takes the failed one's number; nothing is lost.
    assert_eq!(wal.append(&batch(2)).unwrap(), 2);
    faults::clear(dir.path());
    drop(wal);
    let (_, replay) = Wal::open(dir.path(), 0, false).unwrap();
    assert_eq!(replay.batches, vec![(1, batch(0)), (2, batch(2))]);
    assert_eq!(replay.torn_bytes, 0);
}

#[test]
fn a_failed_sync_discards_what_it_did_not_cover_and_the_log_goes_on() {
    use crate::storage::faults::{self, FaultOp};
    for failures in 1..=3u64 {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
        let durable = wal.write(&batch(0)).unwrap();
        wal.sync(durable).unwrap();
        let a = wal.write(&batch(1)).unwrap();
        let b = wal.write(&batch(2)).unwrap();
        // The sync fails, and so do `failures - 1` attempts to cut the
        // file back (each also syncs).
        faults::inject(dir.path(), FaultOp::Sync, libc::EIO, 0, failures);
        let e = wal.sync(b).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Io);
        assert!(
            wal.sync(a).is_err(),
            "a batch the failed sync did not cover was acknowledged"
        );
        assert_eq!(wal.status(a), Status::Discarded);
        assert_eq!(wal.status(durable), Status::Durable);
        // Appends are refused while the file cannot be cut back.
        let mut refused = 0;
        let seq = loop {
            match wal.append(&batch(3)) {
                Ok(seq) => break seq,
                Err(e) => {
                    assert_eq!(e.kind(), crate::error::ErrorKind::Io);
                    refused += 1;
                    assert!(refused < 5, "the log never recovered");
                }
            }
        };
        assert_eq!(refused, failures.saturating_sub(2), "{failures} failures");
        assert_eq!(seq, 2, "numbers go on from the last durable record");
        // A discarded ticket stays discarded though its number was reused.
        assert_eq!(wal.status(a), Status::Discarded);
        faults::clear(dir.path());
        drop(wal);
        let (_, replay) = Wal::open(dir.path(), 0, false).unwrap();
        assert_eq!(
            replay.batches,
            vec![(1, batch(0)), (2, batch(3))],
            "{failures} failures"
        );
    }
}

#[test]
fn concurrent_appenders_share_syncs_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
    let seqs: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let wal = &wal;
                s.spawn(move || (0..50u64).map(|i| wal.append(&batch(t * 100 + i)).unwrap()).collect())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = seqs.concat();
    all.sort_unstable();
    assert_eq!(all, (1..=200).collect::<Vec<_>>());
    let st = wal.stats();
    assert_eq!(st.appends, 200);
    assert!(st.syncs < 200, "group commit shares syncs: {st:?}");
    drop(wal);
    let (_, replay) = Wal::open(dir.path(), 0, false).unwrap();
    assert_eq!(replay.batches.len(), 200);
}

#[test]
fn checkpoints_drop_applied_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
    for i in 0..5 {
        wal.append(&batch(i)).unwrap();
    }
    wal.checkpoint(3).unwrap();
    // Records 4 and 5 are not applied: their file stays.
    assert_eq!(files(dir.path()).len(), 2);
    for i in 5..8 {
        wal.append(&batch(i)).unwrap();
    }
    wal.checkpoint(5).unwrap();
    assert_eq!(files(dir.path()).len(), 2);
    drop(wal);
    let (wal, replay) = Wal::open(dir.path(), 5, false).unwrap();
    let seqs: Vec<u64> = replay.batches.iter().map(|b| b.0).collect();
    assert_eq!(seqs, vec![6, 7, 8]);
    wal.checkpoint(8).unwrap();
    assert_eq!(files(dir.path()).len(), 1);
    let (_, replay) = Wal::open(dir.path(), 8, false).unwrap();
    assert!(replay.batches.is_empty());
    assert_eq!(Wal::open(dir.path(), 8, false).unwrap().0.next_seq(), 9);
}

#[test]
fn a_missing_file_in_the_middle_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), 0, false).unwrap();
    for i in 0..6 {
        wal.append(&batch(i)).unwrap();
        if i % 2 == 1 {
            wal.checkpoint(0).unwrap();
        }
    }
    drop(wal);
    let f = files(dir.path());
    assert_eq!(f.len(), 4);
    std::fs::remove_file(&f[1]).unwrap();
    let e = Wal::open(dir.path(), 0, false).err().unwrap().to_string();
    assert!(e.contains("records are missing"), "{e}");
}

#[test]
fn a_new_log_continues_after_what_the_index_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), 41, false).unwrap();
    assert_eq!(wal.append(&batch(0)).unwrap(), 42);
    drop(wal);
    // The index holds less than the log assumes: records would be missing.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(&files(dir.path())[0], other.path().join(file_name(42))).unwrap();
    let e = Wal::open(other.path(), 10, false).err().unwrap().to_string();
    assert!(e.contains("records are missing"), "{e}");
    let (_, replay) = Wal::open(dir.path(), 41, false).unwrap();
    assert_eq!(replay.batches, vec![(42, batch(0))]);
}
