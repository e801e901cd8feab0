//! The write-ahead log under `kill -9`: a child process appends batches from
//! two threads and prints each acknowledged sequence number; the parent kills
//! it at a random moment, reopens the log, and checks that every acknowledged
//! batch is there, intact, and that the log always opens. Repeated on one
//! log, so later rounds also replay what earlier kills left behind.
//!
//! `TIERDEX_WAL_CRASH_ROUNDS` sets the number of kills (default 12).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tierdex::update::wal::{Op, Wal};
use tierdex::Document;

const CHILD_DIR: &str = "TIERDEX_WAL_CRASH_CHILD_DIR";

fn batch(thread: u64, i: u64) -> Vec<Op> {
    let id = format!("t{thread}-{i}");
    vec![
        Op::Add(Document::title_body(
            id.clone(),
            format!("title of {id}"),
            "some words ".repeat((i % 50) as usize),
        )),
        Op::Delete(format!("old-{id}")),
    ]
}

/// The child: appends until killed. Does nothing in a normal test run.
#[test]
fn child_appender() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let (wal, replay) = Wal::open(std::path::Path::new(&dir), 0, false).unwrap();
    let start = replay.batches.len() as u64;
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let wal = &wal;
            s.spawn(move || {
                for i in 0.. {
                    let seq = wal.append(&batch(t, start + i)).unwrap();
                    println!("acked {seq} t{t}-{}", start + i);
                }
            });
        }
    });
}

#[test]
fn acknowledged_batches_survive_kill_9() {
    let rounds: u64 = std::env::var("TIERDEX_WAL_CRASH_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total = 0;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "child_appender", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("acked ") {
                    let (seq, id) = rest.split_once(' ').unwrap();
                    acked.push((seq.parse::<u64>().unwrap(), id.to_string()));
                }
            }
            acked
        });
        std::thread::sleep(Duration::from_millis(30 + (round * 37) % 170));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = reader.join().unwrap();
        let (_, replay) =
            Wal::open(dir.path(), 0, false).unwrap_or_else(|e| panic!("round {round}: the log does not open: {e}"));
        for (seq, id) in &acked {
            let Some((_, ops)) = replay.batches.iter().find(|(s, _)| s == seq) else {
                panic!("round {round}: acknowledged batch {seq} ({id}) is lost");
            };
            assert!(
                matches!(&ops[0], Op::Add(d) if &d.id == id),
                "round {round}: batch {seq} holds {ops:?}, acknowledged as {id}"
            );
        }
        let seqs: Vec<u64> = replay.batches.iter().map(|b| b.0).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "round {round}: gaps");
        eprintln!(
            "round {round}: {} acknowledged, {} batches in the log",
            acked.len(),
            replay.batches.len()
        );
        acked_total += acked.len();
    }
    assert!(acked_total > 0, "the child never acknowledged anything");
}
