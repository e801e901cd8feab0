//! `tierdex index --memory-mb` (issue #24): the build's peak resident
//! memory stays under the budget plus 10%, at one and two threads. In its
//! own test binary, so that the peak of this process's children
//! (`RUSAGE_CHILDREN`) is the indexer's alone.

use std::process::Command;

fn tierdex(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(args)
        .output()
        .expect("run tierdex");
    assert!(
        out.status.success(),
        "tierdex {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The largest peak resident memory of the children waited for so far, in
/// MiB.
fn children_peak_mib() -> u64 {
    // SAFETY: rusage is plain integers and timevals, for which all zero
    // bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    usage.ru_maxrss as u64 / 1024
}

#[test]
fn a_build_stays_under_its_memory_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c.jsonl");
    tierdex(&[
        "gen",
        "--docs",
        "20000",
        "--seed",
        "3",
        "--out",
        corpus.to_str().unwrap(),
    ]);
    let gen_peak = children_peak_mib();
    let budget = 256;
    assert!(gen_peak < budget, "the generator alone peaked at {gen_peak} MiB");
    for threads in ["1", "2"] {
        for bloom in ["off", "on"] {
            let out = tierdex(&[
                "index",
                corpus.to_str().unwrap(),
                "--out",
                tmp.path().join("idx").to_str().unwrap(),
                "--force",
                "--threads",
                threads,
                "--bloom",
                bloom,
                "--memory-mb",
                &budget.to_string(),
            ]);
            let peak = children_peak_mib();
            assert!(
                peak <= budget + budget / 10,
                "{threads} thread(s), filters {bloom}: peak {peak} MiB over a {budget} MiB budget\n{out}"
            );
            assert!(out.contains("segments of at most"), "{out}");
        }
    }
    // A budget too small to work with is refused, naming what would do.
    let out = Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(["index", corpus.to_str().unwrap(), "--out"])
        .arg(tmp.path().join("small"))
        .args(["--threads", "2", "--memory-mb", "100"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("too small") && err.contains("at least"), "{err}");
}
