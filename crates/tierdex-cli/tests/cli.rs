//! The `tierdex` binary end to end: gen, index, search, inspect, errors.

use std::path::Path;
use std::process::{Command, Output};

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

fn build(dir: &Path) -> String {
    let corpus = dir.join("c.jsonl.zst");
    let idx = dir.join("idx");
    ok(&[
        "gen",
        "--docs",
        "3000",
        "--seed",
        "7",
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
    ]);
    idx.to_str().unwrap().to_string()
}

#[test]
fn index_search_inspect() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());

    let out = ok(&[
        "search",
        &idx,
        "the",
        "+of +and",
        "\"of the\"",
        "--json",
        "--mode",
        "top_k_and_count",
        "--highlight",
    ]);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    for v in &lines {
        let hits = v["hits"].as_array().unwrap();
        assert_eq!(hits.len(), 10, "{v}");
        assert!(v["count"].as_u64().unwrap() >= 10);
        assert!(v["elapsed_us"].is_u64());
        let h = &hits[0];
        assert!(h["id"].as_str().unwrap().starts_with('g'));
        assert!(h["score"].as_f64().unwrap() > 0.0);
        assert!(h["snippet"].as_str().unwrap().contains("<b>"), "{h}");
        // Scores never increase down the list.
        let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]));
    }

    let count = ok(&["search", &idx, "the", "--mode", "count", "--json"]);
    let v: serde_json::Value = serde_json::from_str(count.trim()).unwrap();
    assert!(v["hits"].as_array().unwrap().is_empty());

    let human = ok(&["search", &idx, "the", "-k", "3"]);
    assert!(human.contains("3 shown"), "{human}");

    let info = ok(&["inspect", &idx, "--verify", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["docs"], 3000);
    assert_eq!(v["segments"].as_array().unwrap().len(), 1, "merged by default");
    assert_eq!(v["top_terms"]["body"][0]["term"], "the");
}

#[test]
fn errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());

    let out = tierdex(&["search", &idx, "(unbalanced"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains('^') && err.contains("(unbalanced"), "{err}");

    let out = tierdex(&["search", &idx, "author:x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `author`"));

    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\":\"1\",\"body\":\"x\"}\n{oops\n").unwrap();
    let out = tierdex(&[
        "index",
        bad.to_str().unwrap(),
        "--out",
        tmp.path().join("i2").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.jsonl:2"));
    let out = ok(&[
        "index",
        bad.to_str().unwrap(),
        "--out",
        tmp.path().join("i3").to_str().unwrap(),
        "--skip-bad",
    ]);
    assert!(out.contains("skipped 1"), "{out}");

    let out = tierdex(&["index", bad.to_str().unwrap(), "--out", &idx]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));

    // Reordering is the final merge's: asked for without one, refused.
    let i4 = tmp.path().join("i4");
    for reorder in ["on", "auto"] {
        let out = tierdex(&[
            "index",
            bad.to_str().unwrap(),
            "--skip-bad",
            "--no-merge",
            "--reorder",
            reorder,
            "--out",
            i4.to_str().unwrap(),
        ]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot go with --no-merge"));
        assert!(!i4.exists(), "nothing written");
    }
    let out = tierdex(&[
        "index",
        bad.to_str().unwrap(),
        "--reorder",
        "maybe",
        "--out",
        i4.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'maybe'"));

    let out = tierdex(&["search", tmp.path().to_str().unwrap(), "x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a tierdex index"));

    // Phrase filter shares outside (0, 1] are refused before anything is
    // written, naming the option.
    let good = tmp.path().join("good.jsonl");
    std::fs::write(&good, "{\"id\":\"1\",\"body\":\"x y\"}\n").unwrap();
    for share in ["0", "1.5", "NaN"] {
        let out_dir = tmp.path().join(format!("share-{share}"));
        let out = tierdex(&[
            "index",
            good.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--bloom-max-doc-share",
            share,
        ]);
        assert!(!out.status.success(), "{share}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--bloom-max-doc-share") && err.contains("max document share"),
            "{err}"
        );
        assert!(!out_dir.join("manifest.json").exists(), "{share}");
    }
    let out = tierdex(&[
        "index",
        good.to_str().unwrap(),
        "--out",
        &idx,
        "--bloom-min-doc-ceiling=-3",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--bloom-min-doc-ceiling"), "{err}");
    let out_dir = tmp.path().join("fan-in");
    let out = tierdex(&[
        "index",
        good.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--merge-fan-in",
        "1",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fan-in of 1"), "{err}");
    assert!(!out_dir.join("manifest.json").exists());
}

/// `query-stream` answers each query while stdin stays open, on one thread
/// and on several (a driver that waits for each answer must not hang).
#[test]
fn query_stream_answers_before_stdin_closes() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    for threads in ["1", "2"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tierdex"))
            .args([
                "query-stream",
                &idx,
                "--threads",
                threads,
                "--tier",
                "direct",
                "--io-stats",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        let mut stdin = child.stdin.take().unwrap();
        for q in ["TOP_10\tthe", "COUNT\tthe", "TOP_10_COUNT\t\"of the\""] {
            writeln!(stdin, "{q}").unwrap();
            stdin.flush().unwrap();
            let answer = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no answer to {q:?} with {threads} threads while stdin is open"));
            let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
            assert!(v.get("error").is_none() && v["bytes_requested"].is_u64(), "{answer}");
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        // The workload's totals: three queries, bytes needed and requested, the pool's counters.
        let stderr = String::from_utf8(out.stderr).unwrap();
        let totals = stderr
            .lines()
            .find_map(|l| l.strip_prefix("io totals: "))
            .unwrap_or_else(|| panic!("no io totals in {stderr}"));
        let v: serde_json::Value = serde_json::from_str(totals).unwrap();
        assert_eq!(v["queries"], 3, "{totals}");
        assert!(v["bytes_needed"].as_u64().unwrap() > 0, "{totals}");
        // Bytes decoded twice from one read (a page the pool holds) count
        // twice as needed, once as requested: the ratio can fall below 1.
        assert!(v["bytes_requested"].as_u64().unwrap() > 0, "{totals}");
        assert!(v["read_amplification"].as_f64().unwrap() > 0.0, "{totals}");
        assert!(v["pool"]["misses"].as_u64().unwrap() > 0, "{totals}");
    }
}

#[test]
fn add_delete_compact_are_durable_and_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let json = |s: &str| -> serde_json::Value { serde_json::from_str(s.trim()).unwrap() };
    let count = |q: &str| -> u64 {
        let out = ok(&["search", &idx, q, "--json", "--mode", "count"]);
        json(out.lines().next().unwrap())["count"].as_u64().unwrap()
    };
    let new = tmp.path().join("new.jsonl");
    std::fs::write(
        &new,
        "{\"id\":\"x1\",\"title\":\"zebracorn arrives\",\"body\":\"a zebracorn and a unicorn\"}\n\
         {\"id\":\"x2\",\"title\":\"another\",\"body\":\"zebracorn twice zebracorn\"}\n",
    )
    .unwrap();
    let out = json(&ok(&["add", &idx, new.to_str().unwrap(), "--json"]));
    assert_eq!(out["added"], 2);
    assert_eq!(out["live_docs"], 3002);
    assert_eq!(count("zebracorn"), 2);
    // Re-adding replaces by id.
    let out = json(&ok(&["add", &idx, new.to_str().unwrap(), "--json"]));
    assert_eq!(out["replaced"], 2);
    assert_eq!(count("zebracorn"), 2);
    let out = json(&ok(&["delete", &idx, "x1", "nope", "--json"]));
    assert_eq!((out["deleted"].as_u64(), out["not_found"].as_u64()), (Some(1), Some(1)));
    assert_eq!(count("zebracorn"), 1);
    let inspect = json(&ok(&["inspect", &idx, "--json"]));
    assert_eq!(inspect["docs"], 3001);
    assert_eq!(inspect["deleted_docs"], 1);
    let out = json(&ok(&["compact", &idx, "--json"]));
    assert!(out["flush"]["segments_compacted"].as_u64().unwrap() >= 1);
    let inspect = json(&ok(&["inspect", &idx, "--json"]));
    assert_eq!(
        (inspect["docs"].as_u64(), inspect["deleted_docs"].as_u64()),
        (Some(3001), Some(0))
    );
    assert_eq!(count("zebracorn"), 1);
    // Clear errors.
    let missing = tmp.path().join("none");
    let out = tierdex(&["add", missing.to_str().unwrap(), new.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--create"));
    let out = tierdex(&["index", "x", "--out", "y", "--strategy", "sometimes"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown strategy"));
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; '{}' inspect '{idx}' --terms 100000 | head -c 10 >/dev/null",
            env!("CARGO_BIN_EXE_tierdex")
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `tierdex index --fields` and `--schema`: any text fields, searched with
/// prefixes and default fields; records with other fields are refused with
/// their line, never indexed partly.
#[test]
fn any_text_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("products.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"id":"p1","name":"red kettle","description":"boils water fast"}"#,
            "\n",
            r#"{"id":"p2","name":"blue teapot","description":"a kettle for tea, red inside"}"#,
            "\n",
            r#"{"id":"p3","name":"water filter"}"#,
            "\n",
        ),
    )
    .unwrap();
    let idx = tmp.path().join("idx");
    let idx_s = idx.to_str().unwrap();
    ok(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        idx_s,
        "--fields",
        "name,description",
    ]);
    let ids = |out: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        let mut ids: Vec<String> = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&ok(&["search", idx_s, "kettle", "--json"])), ["p1", "p2"]);
    assert_eq!(ids(&ok(&["search", idx_s, "name:kettle", "--json"])), ["p1"]);
    assert_eq!(ids(&ok(&["search", idx_s, "description:water", "--json"])), ["p1"]);
    assert_eq!(
        ids(&ok(&["search", idx_s, "water", "--json", "--default-fields", "name"])),
        ["p3"]
    );
    // The first field heads a hit.
    let out = ok(&["search", idx_s, "teapot", "--json", "--highlight"]);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["hits"][0]["title"], "blue teapot");
    let bad = tierdex(&["search", idx_s, "title:kettle"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown field `title`") && err.contains("name, description"),
        "{err}"
    );
    let inspect = ok(&["inspect", idx_s]);
    assert!(
        inspect.contains("field name") && inspect.contains("field description"),
        "{inspect}"
    );

    // A record with a field the schema lacks names its line.
    let other = tmp.path().join("other.jsonl");
    std::fs::write(&other, "{\"id\":\"x\",\"name\":\"n\",\"price\":\"3\"}\n").unwrap();
    let out = tierdex(&[
        "index",
        other.to_str().unwrap(),
        "--out",
        tmp.path().join("i2").to_str().unwrap(),
        "--fields",
        "name",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("other.jsonl:1") && err.contains("unknown field `price`"),
        "{err}"
    );
    let add = tierdex(&["add", idx_s, other.to_str().unwrap()]);
    assert!(!add.status.success());
    assert!(String::from_utf8_lossy(&add.stderr).contains("unknown field `price`"));

    // A schema file: default fields and per-field phrase filters.
    let schema = tmp.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"fields": [{"name": "name", "type": "text"}, {"name": "description", "type": "text", "phrase_filters": true}], "default_fields": ["name"]}"#,
    )
    .unwrap();
    let idx3 = tmp.path().join("idx3");
    ok(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        idx3.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
    ]);
    assert_eq!(ids(&ok(&["search", idx3.to_str().unwrap(), "water", "--json"])), ["p3"]);
    assert_eq!(
        ids(&ok(&[
            "search",
            idx3.to_str().unwrap(),
            "description:\"red inside\"",
            "--json"
        ])),
        ["p2"]
    );
    let bad_schema = tmp.path().join("bad.json");
    std::fs::write(&bad_schema, r#"{"fields": [{"name": "a", "type": "txt"}]}"#).unwrap();
    let out = tierdex(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        tmp.path().join("i4").to_str().unwrap(),
        "--schema",
        bad_schema.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown variant `txt`"));
}

/// Issue #20 items 3, 12 and 13: duplicate ids in one input, a line of
/// stdin that is not UTF-8, and a record over the size limit.
#[test]
fn hard_inputs_get_clear_answers() {
    use std::io::Write;
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("dups.jsonl");
    let big = "y".repeat(4096);
    std::fs::write(
        &input,
        format!(
            "{{\"id\":\"a\",\"body\":\"first version\"}}\n\
             {{\"id\":\"b\",\"body\":\"bee\"}}\n\
             {{\"id\":\"huge\",\"body\":\"{big}\"}}\n\
             {{\"id\":\"a\",\"body\":\"second version\"}}\n"
        ),
    )
    .unwrap();
    let idx = tmp.path().join("idx");
    let idx_s = idx.to_str().unwrap();
    // Over the limit: named by file and line, and skipped with --skip-bad.
    let out = tierdex(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        idx_s,
        "--max-record-bytes",
        "1K",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dups.jsonl:3") && err.contains("larger than the limit"),
        "{err}"
    );
    assert!(!idx.exists(), "a failed build leaves nothing");
    let summary = ok(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        idx_s,
        "--max-record-bytes",
        "1K",
        "--skip-bad",
    ]);
    assert!(summary.contains("indexed 2 documents"), "{summary}");
    assert!(summary.contains("skipped 1 malformed"), "{summary}");
    assert!(
        summary.contains("1 records replaced by a later record with the same id"),
        "{summary}"
    );
    let out = tierdex(&[
        "index",
        input.to_str().unwrap(),
        "--out",
        "x",
        "--max-record-bytes",
        "1G",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-record-bytes must be between"));
    // The later record replaced the earlier; deleting the id leaves none.
    let json = |s: &str| -> serde_json::Value { serde_json::from_str(s.trim()).unwrap() };
    let count = |q: &str| {
        json(&ok(&["search", idx_s, q, "--json", "--mode", "count"]))["count"]
            .as_u64()
            .unwrap()
    };
    assert_eq!((count("first"), count("second")), (0, 1));
    ok(&["delete", idx_s, "a"]);
    assert_eq!(count("version"), 0);
    assert_eq!(json(&ok(&["inspect", idx_s, "--json"]))["docs"], 1);
    // A line that is not UTF-8 is answered with an error; the others are answered.
    let run = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tierdex"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    for threads in ["1", "2"] {
        let out = run(
            &["query-stream", idx_s, "--threads", threads],
            b"COUNT\tbee\nCOUNT\tb\xff\xfe\nCOUNT\tbee\n",
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout).unwrap().lines().map(json).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            (lines[0]["count"].as_u64(), lines[2]["count"].as_u64()),
            (Some(1), Some(1))
        );
        assert!(
            lines[1]["error"]
                .as_str()
                .unwrap()
                .contains("line 2 is not valid UTF-8"),
            "{lines:?}"
        );
    }
    // A third tab-separated column (a workload's category) is refused on
    // its line, not searched as part of the query.
    let out = run(&["query-stream", idx_s], b"COUNT\tbee\tand\nCOUNT\tbee\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout).unwrap().lines().map(json).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0]["error"].as_str().is_some_and(|e| e.contains("a third column")),
        "{lines:?}"
    );
    assert_eq!(lines[1]["count"], 1);
    let out = run(
        &["search", idx_s, "-", "--json", "--mode", "count"],
        b"bee\n\xc3(\nbee\n",
    );
    assert!(!out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout).unwrap().lines().map(json).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["count"], 1);
    assert!(lines[1]["error"].as_str().unwrap().contains("not valid UTF-8"));
    assert_eq!(lines[2]["count"], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 3 queries failed"));
}

/// `tierdex gen --typed`: every document carries the typed fields, with
/// the same text as without them.
#[test]
fn gen_typed_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let (typed, plain) = (tmp.path().join("t.jsonl"), tmp.path().join("p.jsonl"));
    for (out, flag) in [(&typed, Some("--typed")), (&plain, None)] {
        let mut args = vec!["gen", "--docs", "50", "--vocab", "2000", "--out", out.to_str().unwrap()];
        args.extend(flag);
        ok(&args);
    }
    let lines = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (typed, plain) = (lines(&typed), lines(&plain));
    assert_eq!(typed.len(), 50);
    for (t, p) in typed.iter().zip(&plain) {
        assert_eq!((&t["id"], &t["title"], &t["body"]), (&p["id"], &p["title"], &p["body"]));
        assert_eq!(p.as_object().unwrap().len(), 3);
        assert!(t["date"].as_str().unwrap().ends_with('Z'), "{t}");
        assert!(
            t["category"].is_string() && t["tags"].is_array() && t["popularity"].is_u64(),
            "{t}"
        );
        assert!(t["price"].is_null() || t["price"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn demo_reports_text_filtered_sorted_and_range_queries() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("demo");
    let out = ok(&[
        "demo",
        "--docs",
        "4000",
        "--queries",
        "3",
        "--threads",
        "2",
        "--dir",
        idx.to_str().unwrap(),
    ]);
    for category in [
        "term-100",
        "and",
        "filter-10%-or",
        "sort-price-asc",
        "text-sort-date-desc",
        "range-date",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(&format!("{category} "))),
            "no {category} row in:\n{out}"
        );
    }
    assert!(out.contains("typed fields: ran"), "{out}");
    // The index holds the typed fields' columns.
    let inspect = ok(&["inspect", idx.to_str().unwrap()]);
    assert!(inspect.contains("price"), "{inspect}");
    let text_only = ok(&["demo", "--docs", "2000", "--queries", "2", "--text-only"]);
    assert!(!text_only.contains("typed fields"), "{text_only}");
}

/// `tierdex search --agg` and `--aggs-json` (issue #22): facets of a typed
/// generated corpus as a table and as JSON, equal to a count of the file;
/// `query-stream` answers a JSON line's `aggs`; a bad spec is named.
#[test]
fn search_aggregations() {
    use std::collections::BTreeMap;
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, idx) = (tmp.path().join("t.jsonl"), tmp.path().join("idx"));
    let (corpus, idx) = (corpus.to_str().unwrap(), idx.to_str().unwrap());
    ok(&["gen", "--docs", "400", "--vocab", "2000", "--typed", "--out", corpus]);
    let mapping = tmp.path().join("mapping.json");
    std::fs::write(
        &mapping,
        serde_json::json!({"properties": {
            "title": {"type": "text"}, "body": {"type": "text"}, "date": {"type": "date"},
            "category": {"type": "keyword"}, "tags": {"type": "keyword"},
            "price": {"type": "double"}, "popularity": {"type": "long"}
        }})
        .to_string(),
    )
    .unwrap();
    ok(&[
        "index",
        corpus,
        "--out",
        idx,
        "--schema",
        mapping.to_str().unwrap(),
        "--segment-docs",
        "150",
    ]);
    let docs: Vec<serde_json::Value> = std::fs::read_to_string(corpus)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut tags: BTreeMap<String, u64> = BTreeMap::new();
    for d in &docs {
        let mut t: Vec<&str> = d["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        t.sort();
        t.dedup();
        for x in t {
            *tags.entry(x.to_string()).or_default() += 1;
        }
    }
    let priced = docs.iter().filter(|d| d["price"].is_number()).count();
    let out = ok(&[
        "search",
        idx,
        "*:*",
        "--mode",
        "count",
        "--json",
        "--agg",
        "tags:terms:1000",
        "--agg",
        "price:stats",
        "--aggs-json",
        r#"{"years": {"date_histogram": {"field": "date", "calendar_interval": "year"}}}"#,
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let a = &v["aggregations"];
    let got: BTreeMap<String, u64> = a["tags:terms:1000"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key"].as_str().unwrap().to_string(), b["doc_count"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, tags);
    assert_eq!(a["price:stats"]["count"], priced);
    let years: u64 = a["years"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["doc_count"].as_u64().unwrap())
        .sum();
    assert_eq!(years, 400);
    // The table: a heading per aggregation, a line per bucket.
    let table = ok(&[
        "search",
        idx,
        "*:*",
        "-k",
        "1",
        "--agg",
        "category:terms:3",
        "--agg",
        "popularity:max",
    ]);
    assert!(
        table.contains("category:terms:3:") && table.contains("popularity:max: "),
        "{table}"
    );
    assert!(table.contains("(other)"), "{table}");
    // query-stream: a JSON line with aggs.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tierdex"))
        .args(["query-stream", idx])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(
        child.stdin.take().unwrap(),
        "COUNT\t{}",
        serde_json::json!({"query": {"match_all": {}}, "aggs": {"n": {"value_count": {"field": "price"}}}})
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["aggregations"]["n"]["value"], priced, "{line}");
    // Errors name what is wrong.
    let bad = tierdex(&["search", idx, "*:*", "--agg", "tags:median"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("[median]"));
    let bad = tierdex(&[
        "search",
        idx,
        "*:*",
        "--aggs-json",
        r#"{"x": {"terms": {"field": "body"}}}"#,
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("text field"));
}
