//! `tierdex snapshot` and `tierdex restore` end to end (issue #23): a
//! restored snapshot answers exactly as the source did at the snapshot's
//! point; a snapshot killed (`kill -9`) at any moment is either complete
//! or absent, and the repository stays usable and tidy.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn tierdex(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(args)
        .output()
        .expect("run tierdex")
}

fn ok(args: &[&str]) -> String {
    let out = tierdex(args);
    assert!(
        out.status.success(),
        "tierdex {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = tierdex(args);
    assert!(!out.status.success(), "tierdex {args:?} should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn build(dir: &Path, docs: &str) -> String {
    let corpus = dir.join("c.jsonl.zst");
    let idx = dir.join("idx");
    ok(&[
        "gen",
        "--docs",
        docs,
        "--seed",
        "11",
        "--vocab",
        "5000",
        "--out",
        corpus.to_str().unwrap(),
    ]);
    ok(&[
        "index",
        corpus.to_str().unwrap(),
        "--out",
        idx.to_str().unwrap(),
        "--segment-docs",
        "700",
        "--no-merge",
        "--strategy",
        "no-merge",
    ]);
    idx.to_str().unwrap().to_string()
}

const QUERIES: &[&str] = &["the", "+of +and", "\"of the\"", "title:a -the", "zzzz"];

/// The answers of `dir` to the test queries: ids, scores and counts.
fn answers(dir: &str) -> String {
    let mut args = vec!["search", dir];
    args.extend(QUERIES);
    args.extend(["--json", "--mode", "top_k_and_count", "-k", "20"]);
    let out = ok(&args);
    // Drop the timings, keep everything else.
    out.lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.retain(|k, _| k != "elapsed_us" && k != "took");
            }
            v.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn snapshots_restore_to_what_the_source_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path(), "3000");
    let repo = tmp.path().join("repo");
    let repo = repo.to_str().unwrap();
    ok(&["delete", &idx, "g5", "g17", "g400"]);
    let at_one = answers(&idx);
    let out = ok(&["snapshot", "create", "--repo", repo, "--name", "one", &idx, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["snapshot"], "one");
    assert_eq!(v["indices"]["idx"]["documents"], 2997);
    // More writes, a second snapshot under a default name: it shares the
    // unchanged segments with the first.
    let more = tmp.path().join("more.jsonl");
    std::fs::write(
        &more,
        "{\"id\": \"new-1\", \"title\": \"the new one\", \"body\": \"of the and\"}\n",
    )
    .unwrap();
    ok(&["add", &idx, more.to_str().unwrap()]);
    let at_two = answers(&idx);
    assert_ne!(at_one, at_two);
    let out = ok(&["snapshot", "create", "--repo", repo, &idx, "--json"]);
    let two: serde_json::Value = serde_json::from_str(&out).unwrap();
    let two_name = two["snapshot"].as_str().unwrap().to_string();
    assert!(two_name.starts_with("snap-"), "{two_name}");
    assert!(
        two["bytes_added"].as_u64().unwrap() < two["bytes"].as_u64().unwrap() / 2,
        "{two}"
    );

    let list: serde_json::Value = serde_json::from_str(&ok(&["snapshot", "list", "--repo", repo, "--json"])).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["one", two_name.as_str()]);
    let text = ok(&["snapshot", "list", "--repo", repo]);
    assert!(text.contains("one") && text.contains("2997"), "{text}");

    let r1 = tmp.path().join("r1");
    let out = ok(&["restore", "--repo", repo, "one", "--out", r1.to_str().unwrap()]);
    assert!(out.contains("2997 documents"), "{out}");
    assert_eq!(
        answers(r1.to_str().unwrap()),
        at_one,
        "the restored index answers as the source did then"
    );
    ok(&["inspect", r1.to_str().unwrap(), "--verify"]);
    let r2 = tmp.path().join("r2");
    ok(&[
        "restore",
        "--repo",
        repo,
        &two_name,
        "--index",
        "idx",
        "--out",
        r2.to_str().unwrap(),
    ]);
    assert_eq!(answers(r2.to_str().unwrap()), at_two);
    // A restored index takes writes.
    ok(&["add", r1.to_str().unwrap(), more.to_str().unwrap()]);
    assert_eq!(answers(r1.to_str().unwrap()), at_two);

    // Errors name what is wrong.
    let e = fails(&["restore", "--repo", repo, "one", "--out", r2.to_str().unwrap()]);
    assert!(e.contains("not empty"), "{e}");
    let e = fails(&[
        "restore",
        "--repo",
        repo,
        "nope",
        "--out",
        tmp.path().join("r3").to_str().unwrap(),
    ]);
    assert!(e.contains("no snapshot [nope]"), "{e}");
    let e = fails(&["snapshot", "create", "--repo", repo, "--name", "one", &idx]);
    assert!(e.contains("already exists"), "{e}");
    let e = fails(&["snapshot", "create", "--repo", repo, "--name", "Bad Name", &idx]);
    assert!(e.contains("invalid snapshot name"), "{e}");
    let e = fails(&["snapshot", "list", "--repo", tmp.path().to_str().unwrap()]);
    assert!(e.contains("not a tierdex snapshot repository"), "{e}");
    {
        // An index another writer holds open: the message points at the
        // server's API.
        let _w = tierdex::update::IndexWriter::open(Path::new(&idx), Default::default()).unwrap();
        let e = fails(&["snapshot", "create", "--repo", repo, "--name", "locked", &idx]);
        assert!(e.contains("_snapshot"), "{e}");
    }

    ok(&["snapshot", "delete", "--repo", repo, "one"]);
    let list: serde_json::Value = serde_json::from_str(&ok(&["snapshot", "list", "--repo", repo, "--json"])).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let e = fails(&["snapshot", "delete", "--repo", repo, "one"]);
    assert!(e.contains("no snapshot [one]"), "{e}");
}

#[test]
fn a_snapshot_killed_at_any_moment_is_complete_or_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path(), "3000");
    let expected = answers(&idx);
    let repo_dir = tmp.path().join("repo");
    let repo = repo_dir.to_str().unwrap();
    // How big a snapshot is, and a rate that makes it last about 1.5 s.
    ok(&["snapshot", "create", "--repo", repo, "--name", "sizing", &idx]);
    let list: serde_json::Value = serde_json::from_str(&ok(&["snapshot", "list", "--repo", repo, "--json"])).unwrap();
    let bytes = list[0]["bytes"].as_u64().unwrap();
    ok(&["snapshot", "delete", "--repo", repo, "sizing"]);
    let rate = (bytes * 2 / 3).max(1).to_string();
    let mut complete = 0;
    let mut absent = 0;
    for (i, delay_ms) in [20u64, 150, 400, 700, 1000, 1300, 1700, 2500].into_iter().enumerate() {
        let name = format!("k{i}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tierdex"))
            .args([
                "snapshot",
                "create",
                "--repo",
                repo,
                "--name",
                &name,
                "--max-bytes-per-sec",
                &rate,
                &idx,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let list: serde_json::Value =
            serde_json::from_str(&ok(&["snapshot", "list", "--repo", repo, "--json"])).unwrap();
        let listed = list.as_array().unwrap().iter().any(|s| s["snapshot"] == name.as_str());
        if listed {
            complete += 1;
            let dest = tmp.path().join(format!("restored-{name}"));
            ok(&["restore", "--repo", repo, &name, "--out", dest.to_str().unwrap()]);
            assert_eq!(answers(dest.to_str().unwrap()), expected, "{name}");
            ok(&["snapshot", "delete", "--repo", repo, &name]);
        } else {
            absent += 1;
            let e = fails(&[
                "restore",
                "--repo",
                repo,
                &name,
                "--out",
                tmp.path().join("x").to_str().unwrap(),
            ]);
            assert!(e.contains("no snapshot"), "{e}");
        }
    }
    assert!(
        absent >= 2,
        "most kills should land during the copy ({complete} complete, {absent} absent)"
    );
    // The repository stays usable; what the kills left is removed by the
    // next snapshot, and the index's staging directories by its next writer.
    ok(&["snapshot", "create", "--repo", repo, "--name", "after", &idx]);
    let blobs: Vec<String> = std::fs::read_dir(repo_dir.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo_dir.join("snapshots/after.json")).unwrap()).unwrap();
    let named: std::collections::BTreeSet<String> = info["indices"]["idx"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["blob"].as_str().unwrap().to_string())
        .collect();
    assert!(blobs.iter().all(|b| named.contains(b)), "left over: {blobs:?}");
    ok(&["compact", &idx]);
    let staging: Vec<String> = std::fs::read_dir(&idx)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snapshot-staging-"))
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
    let dest = tmp.path().join("restored-after");
    ok(&["restore", "--repo", repo, "after", "--out", dest.to_str().unwrap()]);
    assert_eq!(answers(dest.to_str().unwrap()), expected);
}
