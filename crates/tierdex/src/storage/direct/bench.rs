//! A small benchmark of the direct tier against plain reads through the page cache:
//!
//! ```text
//! cargo test -p tierdex --release --lib storage::direct::bench -- --ignored --nocapture
//! ```
//!
//! It needs root (to drop the page cache) and writes a 256 MiB file under /var/tmp.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tests::{disk_tempdir, random_bytes, Rng};
use super::*;

const FILE_BYTES: usize = 256 << 20;
const PAGES: u64 = (FILE_BYTES / PAGE) as u64;
const TIME: Duration = Duration::from_secs(3);

fn drop_caches() -> bool {
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Runs `step` (which returns the bytes or pages it handled) until `TIME` passes
/// or `limit` is reached; returns (units, seconds).
fn timed(limit: u64, mut step: impl FnMut() -> u64) -> (u64, f64) {
    let start = Instant::now();
    let mut units = 0;
    while units < limit && start.elapsed() < TIME {
        units += step();
    }
    (units, start.elapsed().as_secs_f64())
}

fn page_range(page: u64) -> Range<u64> {
    page * PAGE as u64..(page + 1) * PAGE as u64
}

fn report(what: &str, units: u64, secs: f64, unit: &str, extra: &str) {
    eprintln!("{what:<58} {:>12.0} {unit}/s {extra}", units as f64 / secs);
}

fn random_single(file: &DirectFile, seed: u64) -> (u64, f64) {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    timed(u64::MAX, || {
        file.read_into(page_range(rng.below(PAGES)), &mut out).unwrap();
        1
    })
}

fn random_batched(file: &DirectFile, seed: u64) -> (u64, f64) {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    timed(u64::MAX, || {
        let ranges: Vec<Range<u64>> = (0..32).map(|_| page_range(rng.below(PAGES))).collect();
        file.prefetch(&ranges).unwrap();
        for r in ranges {
            file.read_into(r, &mut out).unwrap();
        }
        32
    })
}

fn sequential(file: &DirectFile, chunk: u64) -> (u64, f64) {
    let mut offset = 0;
    let mut out = Vec::new();
    timed(FILE_BYTES as u64, || {
        let end = (offset + chunk).min(FILE_BYTES as u64);
        file.read_into(offset..end, &mut out).unwrap();
        let n = end - offset;
        offset = end;
        n
    })
}

fn hit_ratio(pool: &BufferPool, before: PoolStats) -> String {
    let s = pool.stats();
    let (hits, misses) = (s.hits - before.hits, s.misses - before.misses);
    format!("(hits {:.1}%)", 100.0 * hits as f64 / (hits + misses).max(1) as f64)
}

fn threads(n: usize, f: impl Fn(u64) -> (u64, f64) + Sync) -> (u64, f64) {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n).map(|t| s.spawn(move || f(1000 + t as u64))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0f64), |(u, t), (u2, t2)| (u + u2, t.max(t2)))
    })
}

fn write_bench_file(path: &Path) {
    let mut f = File::create(path).unwrap();
    for i in 0..(FILE_BYTES >> 23) {
        std::io::Write::write_all(&mut f, &random_bytes(8 << 20, i as u64)).unwrap();
    }
    f.sync_all().unwrap();
}

#[test]
#[ignore]
fn bench_direct_vs_page_cache() {
    let dir = disk_tempdir();
    let path = dir.path().join("bench-256m");
    write_bench_file(&path);
    if !drop_caches() {
        eprintln!("SKIPPED: cannot drop the page cache (needs root)");
        return;
    }
    eprintln!(
        "256 MiB file in {}, io_uring {}, {} s per figure",
        dir.path().display(),
        if io_uring_available() {
            "available"
        } else {
            "UNAVAILABLE"
        },
        TIME.as_secs()
    );

    // Random 4 KiB reads through a 16 MiB pool (1/16 of the file).
    for engine in [IoEngine::IoUring, IoEngine::Pread] {
        let pool = BufferPool::new(16 << 20).unwrap();
        let file = DirectFile::open_with(&path, pool.clone(), engine).unwrap();
        assert!(file.is_direct(), "O_DIRECT refused on {}", dir.path().display());
        let before = pool.stats();
        let (n, secs) = random_single(&file, 1);
        report(
            &format!("O_DIRECT {engine:?}: random 4 KiB read_into"),
            n,
            secs,
            "reads",
            &hit_ratio(&pool, before),
        );
        let before = pool.stats();
        let (n, secs) = random_batched(&file, 2);
        report(
            &format!("O_DIRECT {engine:?}: random 4 KiB, 32 per prefetch"),
            n,
            secs,
            "pages",
            &hit_ratio(&pool, before),
        );
    }
    assert!(drop_caches());
    {
        let file = File::open(&path).unwrap();
        let mut rng = Rng(3);
        let mut buf = vec![0u8; PAGE];
        let (n, secs) = timed(u64::MAX, || {
            file.read_exact_at(&mut buf, rng.below(PAGES) * PAGE as u64).unwrap();
            1
        });
        report("page cache pread (cold): random 4 KiB", n, secs, "reads", "");
    }

    // Sequential.
    for chunk in [1u64 << 20, 8 << 20] {
        let pool = BufferPool::new(16 << 20).unwrap();
        let file = DirectFile::open(&path, pool).unwrap();
        let (bytes, secs) = sequential(&file, chunk);
        report(
            &format!("O_DIRECT IoUring: sequential, {} MiB per read_into", chunk >> 20),
            bytes >> 20,
            secs,
            "MiB",
            "",
        );
    }
    for chunk in [1usize << 20, 8 << 20] {
        assert!(drop_caches());
        let file = File::open(&path).unwrap();
        let mut buf = vec![0u8; chunk];
        let mut offset = 0;
        let (bytes, secs) = timed(FILE_BYTES as u64, || {
            file.read_exact_at(&mut buf, offset).unwrap();
            offset += chunk as u64;
            chunk as u64
        });
        report(
            &format!("page cache pread (cold): sequential, {} MiB reads", chunk >> 20),
            bytes >> 20,
            secs,
            "MiB",
            "",
        );
    }

    // Two threads: cold random reads (device-bound), and hot reads (pool-bound: lock and copy).
    let pool = BufferPool::new(16 << 20).unwrap();
    let file = Arc::new(DirectFile::open(&path, pool.clone()).unwrap());
    for n in [1, 2] {
        let (reads, secs) = threads(n, |seed| random_single(&file, seed));
        report(
            &format!("O_DIRECT IoUring: random 4 KiB, {n} thread(s)"),
            reads,
            secs,
            "reads",
            "",
        );
    }
    let hot_pool = BufferPool::new(64 << 20).unwrap();
    let hot = Arc::new(DirectFile::open(&path, hot_pool.clone()).unwrap());
    let hot_pages = 8192u64; // 32 MiB, all resident
    hot.read_into(0..hot_pages * PAGE as u64, &mut Vec::new()).unwrap();
    for n in [1, 2] {
        let (reads, secs) = threads(n, |seed| {
            let mut rng = Rng(seed);
            let mut out = Vec::new();
            timed(u64::MAX, || {
                hot.read_into(page_range(rng.below(hot_pages)), &mut out).unwrap();
                1
            })
        });
        report(
            &format!("pool hits: random 4 KiB read_into, {n} thread(s)"),
            reads,
            secs,
            "reads",
            "",
        );
    }
    for n in [1, 2] {
        let (reads, secs) = threads(n, |seed| {
            let mut rng = Rng(seed);
            let mut out = Vec::new();
            timed(u64::MAX, || {
                let start = rng.below(hot_pages - 16) * PAGE as u64;
                hot.read_into(start..start + 16 * PAGE as u64, &mut out).unwrap();
                16
            })
        });
        report(
            &format!("pool hits: random 64 KiB read_into, {n} thread(s)"),
            reads,
            secs,
            "pages",
            "",
        );
    }
}
