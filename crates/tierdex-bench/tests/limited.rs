//! A tiny memory-limited run end to end: 3,000 generated documents, tierdex
//! only, 64 MiB. Needs root and cgroup v1 (skips otherwise) and builds the
//! release `tierdex` binary, hence `#[ignore]`:
//! `cargo test -p tierdex-bench --test limited -- --ignored`.

use std::path::Path;
use std::process::Command;

use tierdex::corpus::gen::{write_corpus, GenOptions};

/// Groups left under the memory root by process `pid`.
fn groups_of(pid: u32) -> Vec<String> {
    let prefix = format!("{}{pid}-", tierdex_bench::limits::PREFIX);
    std::fs::read_dir(tierdex_bench::limits::MEMORY_ROOT)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "builds release tierdex, needs root and cgroup v1; about a minute"]
fn tiny_limited_run() {
    if let Some(why) = tierdex_bench::limits::unavailable(Path::new(tierdex_bench::limits::MEMORY_ROOT)) {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("tiny.jsonl");
    let opts = GenOptions {
        docs: 3000,
        ..Default::default()
    };
    write_corpus(&opts, &corpus, &|_| {}).unwrap();
    let out = dir.path().join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_tierdex-bench"))
        .args(["limited", "--corpus"])
        .arg(&corpus)
        .args([
            "--engines",
            "tierdex,tierdex:mmap-random",
            "--memory-mb",
            "64",
            "--generated",
            "5",
            "--warmup-queries",
            "20",
            "--work",
        ])
        .arg(dir.path().join("work"))
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(groups_of(pid), Vec::<String>::new(), "cgroups left behind");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("limited.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    let plain = runs.iter().find(|r| r["engine"] == "tierdex").expect("a tierdex run");
    assert_eq!(plain["outcome"], "ok", "{plain}");
    assert_eq!(plain["memory_mb"], 64);
    let measured = plain["measured_queries"].as_u64().unwrap();
    assert!(measured >= 30, "{measured}");
    assert_eq!(plain["answered"].as_u64(), Some(measured));
    assert!(plain["qps"].as_f64().unwrap() > 0.0);
    // The index was read from the device after the cache was dropped.
    assert!(plain["setup_io"]["read_bytes"].as_u64().unwrap() > 0, "{plain}");
    assert!(plain["memory"]["max_usage_bytes"].as_u64().unwrap() > 0);
    assert!(plain["memory"]["max_usage_bytes"].as_u64().unwrap() <= 64 << 20);
    // The variant runs once the CLI has tiers, or is reported as left out.
    let variant_ran = runs.iter().any(|r| r["engine"] == "tierdex:mmap-random");
    let left_out = json["left_out"].to_string().contains("tierdex:mmap-random");
    assert!(variant_ran != left_out, "{json}");
    let md = std::fs::read_to_string(out.join("limited.md")).unwrap();
    assert!(md.contains("### Memory limit: 64 MiB"), "{md}");
    assert!(out.join("bytes-per-query-vs-memory.svg").exists());
    assert!(out.join("qps-vs-memory.svg").exists());
}
