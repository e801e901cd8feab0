#![allow(clippy::single_range_in_vec_init)] // one-range prefetches are what these tests mean

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use proptest::prelude::*;

use super::io::{hooks, RING_ENTRIES};
use super::*;

/// A temporary directory on the real disk (so O_DIRECT is really used), else the default one.
pub(super) fn disk_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// Deterministic pseudo-random bytes (splitmix64).
pub(super) fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

pub(super) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// A random range inside `0..len`, at most `max` long.
    fn range(&mut self, len: u64, max: u64) -> Range<u64> {
        let start = self.below(len + 1);
        let end = start + self.below((len - start).min(max) + 1);
        start..end
    }
}

fn write_file(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path
}

/// Opens `path`, telling in the test output when O_DIRECT was refused.
fn open(path: &Path, pool: &Arc<BufferPool>, engine: IoEngine) -> DirectFile {
    let file = DirectFile::open_with(path, pool.clone(), engine).unwrap();
    if !file.is_direct() {
        eprintln!(
            "NOTE: O_DIRECT was refused for {}: the page-cache fallback is what this test exercised",
            path.display()
        );
    }
    file
}

fn read(file: &DirectFile, range: Range<u64>) -> Vec<u8> {
    let mut out = vec![1, 2, 3];
    file.read_into(range, &mut out).unwrap();
    out
}

fn slice(data: &[u8], range: &Range<u64>) -> Vec<u8> {
    data[range.start as usize..range.end as usize].to_vec()
}

fn batches() -> u64 {
    hooks::BATCHES.with(|b| b.get())
}

const ENGINES: [IoEngine; 2] = [IoEngine::IoUring, IoEngine::Pread];

#[test]
fn types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<BufferPool>();
    check::<DirectFile>();
}

#[test]
fn o_direct_and_io_uring_are_used_on_disk() {
    let dir = disk_tempdir();
    let path = write_file(dir.path(), "f", &random_bytes(10_000, 1));
    let pool = BufferPool::new(64 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    eprintln!(
        "{}: O_DIRECT {}, io_uring {}",
        dir.path().display(),
        if file.is_direct() { "used" } else { "REFUSED" },
        if io_uring_available() {
            "used"
        } else {
            "UNAVAILABLE (pread fallback)"
        }
    );
    assert_eq!(read(&file, 0..10_000), random_bytes(10_000, 1));
}

#[test]
fn pool_needs_a_few_frames() {
    for bytes in [0, 100, 3 * PAGE, 4 * PAGE - 1] {
        match BufferPool::new(bytes) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("at least"), "{msg}"),
            other => panic!("{bytes} bytes: {other:?}"),
        }
    }
    let pool = BufferPool::new(4 * PAGE + 100).unwrap();
    assert_eq!(pool.capacity_bytes(), 4 * PAGE);
    assert_eq!(pool.capacity_pages(), MIN_POOL_PAGES);
    let s = pool.stats();
    assert_eq!((s.hits, s.misses, s.evictions, s.resident_pages), (0, 0, 0, 0));
}

#[test]
fn odd_lengths_read_like_std() {
    let dir = disk_tempdir();
    for engine in ENGINES {
        for len in [1usize, 100, 4095, 4096, 4097, 8191, 8192, 3 * 4096 + 5, 100_003] {
            let data = random_bytes(len, len as u64);
            let path = write_file(dir.path(), &format!("f{len}"), &data);
            assert_eq!(std::fs::read(&path).unwrap(), data);
            let pool = BufferPool::new(8 * PAGE).unwrap();
            let file = open(&path, &pool, engine);
            assert_eq!(file.len(), len as u64);
            assert!(!file.is_empty());
            let len = len as u64;
            let mut ranges = vec![0..len, len - 1..len, 0..1, len / 2..len, len..len];
            for boundary in [4096u64, 8192] {
                if boundary < len {
                    ranges.push(boundary - 1..boundary + 1);
                    ranges.push(boundary..len);
                }
            }
            for r in ranges {
                assert_eq!(
                    read(&file, r.clone()),
                    slice(&data, &r),
                    "{engine:?} len {len} range {r:?}"
                );
            }
            pool.check_invariants();
            assert_eq!(pool.pinned_frames(), 0);
        }
    }
}

#[test]
fn empty_file() {
    let dir = disk_tempdir();
    let path = write_file(dir.path(), "empty", b"");
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    assert_eq!(file.len(), 0);
    assert!(file.is_empty());
    let mut out = vec![9];
    assert_eq!(file.read_into(0..0, &mut out).unwrap(), IoCounts::default());
    assert!(out.is_empty());
    assert!(matches!(file.read_into(0..1, &mut out), Err(Error::InvalidArgument(_))));
    assert_eq!(file.prefetch(&[0..0]).unwrap(), IoCounts::default());
    assert_eq!(file.prefetch(&[]).unwrap(), IoCounts::default());
    assert!(matches!(file.prefetch(&[0..1]), Err(Error::InvalidArgument(_))));
    assert_eq!(pool.stats().misses, 0);
}

#[test]
fn ranges_beyond_the_end_are_invalid() {
    let dir = disk_tempdir();
    let data = random_bytes(10_000, 2);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    #[allow(clippy::reversed_empty_ranges)]
    let bad = [0..10_001, 10_000..10_001, 20_000..20_000, 5..3, u64::MAX - 1..u64::MAX];
    for r in bad {
        let mut out = vec![7u8; 5];
        match file.read_into(r.clone(), &mut out) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("10000 bytes long"), "{msg}"),
            other => panic!("{r:?}: {other:?}"),
        }
        assert!(out.is_empty());
        assert!(matches!(file.prefetch(&[0..10, r]), Err(Error::InvalidArgument(_))));
    }
    // Nothing was read for the bad requests (the good range of the prefetches was not read either).
    assert_eq!(pool.stats().misses, 0);
    assert_eq!(read(&file, 9_990..10_000), slice(&data, &(9_990..10_000)));
}

#[test]
fn opening_a_directory_or_a_missing_file_fails() {
    let dir = disk_tempdir();
    let pool = BufferPool::new(4 * PAGE).unwrap();
    assert!(DirectFile::open(dir.path(), pool.clone()).is_err());
    assert!(matches!(
        DirectFile::open(&dir.path().join("missing"), pool),
        Err(Error::Io { .. })
    ));
}

#[test]
fn small_pool_evicts_and_stays_correct() {
    let dir = disk_tempdir();
    let data = random_bytes((1 << 20) + 123, 3);
    let path = write_file(dir.path(), "f", &data);
    let len = data.len() as u64;
    for engine in ENGINES {
        let pool = BufferPool::new(4 * PAGE).unwrap();
        let file = open(&path, &pool, engine);
        let mut rng = Rng(4);
        for _ in 0..300 {
            let r = rng.range(len, 20_000);
            assert_eq!(read(&file, r.clone()), slice(&data, &r), "{engine:?} {r:?}");
        }
        // Far larger than the pool: read in pool-sized windows.
        assert_eq!(read(&file, 0..len), data);
        assert_eq!(read(&file, 5..len - 5), slice(&data, &(5..len - 5)));
        let s = pool.stats();
        assert!(s.evictions > 0, "{s:?}");
        assert!(s.resident_pages <= 4);
        pool.check_invariants();
        assert_eq!(pool.pinned_frames(), 0);
    }
}

#[test]
fn pages_are_read_into_scratch_when_every_frame_is_pinned() {
    let dir = disk_tempdir();
    let data = random_bytes(20 * PAGE + 10, 5);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    // Another reader (a file id no file has) holds every frame.
    let slots = pool.acquire_read(u64::MAX, 0..4);
    let frames: Vec<u32> = slots
        .iter()
        .map(|s| match *s {
            Slot::Load(f) => f,
            other => panic!("{other:?}"),
        })
        .collect();
    let before = pool.stats();
    let r = 100..(10 * PAGE as u64 + 7);
    let mut out = Vec::new();
    let counts = file.read_into(r.clone(), &mut out).unwrap();
    assert_eq!(out, slice(&data, &r));
    // 11 missing pages, all bypassing the pool, in pool-sized windows of 4 pages: one read each.
    assert_eq!(counts.ios, 3);
    assert_eq!(counts.bytes_read, 11 * PAGE as u64);
    let after = pool.stats();
    assert_eq!(after.misses - before.misses, 11);
    assert_eq!(after.resident_pages, 0);
    pool.finish(&frames, None, &frames, &[]).unwrap();
    pool.check_invariants();
    assert_eq!(pool.stats().resident_pages, 4);
    // Now the pool has room again (by eviction).
    assert_eq!(read(&file, r.clone()), slice(&data, &r));
    assert_eq!(pool.stats().resident_pages, 4);
}

#[test]
fn contiguous_missing_pages_are_one_read_and_one_batch() {
    let dir = disk_tempdir();
    let data = random_bytes(2000 * PAGE, 6);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4096 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    let b0 = batches();
    let mut out = Vec::new();
    let counts = file.read_into(0..10 * PAGE as u64, &mut out).unwrap();
    assert_eq!(
        counts,
        IoCounts {
            bytes_read: 10 * PAGE as u64,
            ios: 1
        }
    );
    assert_eq!(batches() - b0, 1);
    // 2000 pages, 10 of them resident: one run of 1990 pages, split in reads of at most 256 pages.
    let b0 = batches();
    let counts = file.read_into(0..2000 * PAGE as u64, &mut out).unwrap();
    assert_eq!(out, data);
    assert_eq!(counts.ios, 1990u64.div_ceil(io::MAX_PAGES_PER_OP as u64));
    assert_eq!(counts.bytes_read, 1990 * PAGE as u64);
    assert_eq!(batches() - b0, 1);
}

#[test]
fn all_reads_of_a_call_go_in_one_batch_split_only_by_the_ring_size() {
    let dir = disk_tempdir();
    let pages = 600u64;
    let data = random_bytes(pages as usize * PAGE, 7);
    let path = write_file(dir.path(), "f", &data);
    let p = PAGE as u64;
    for (span, expect_batches) in [(64u64, 1u64), (520, 3)] {
        let pool = BufferPool::new(1024 * PAGE).unwrap();
        let file = open(&path, &pool, IoEngine::IoUring);
        // Even pages resident, odd pages missing: span/2 separate runs.
        let even: Vec<Range<u64>> = (0..span).step_by(2).map(|i| i * p..i * p + 1).collect();
        let counts = file.prefetch(&even).unwrap();
        assert_eq!(counts.ios, span / 2);
        let b0 = batches();
        let mut out = Vec::new();
        let counts = file.read_into(0..span * p, &mut out).unwrap();
        assert_eq!(out, slice(&data, &(0..span * p)));
        assert_eq!(counts.ios, span / 2);
        assert_eq!(counts.bytes_read, span / 2 * p);
        if io_uring_available() {
            assert_eq!(batches() - b0, expect_batches, "{span} pages, ring of {RING_ENTRIES}");
        }
        pool.check_invariants();
    }
}

#[test]
fn prefetch_then_read_is_served_from_the_pool() {
    let dir = disk_tempdir();
    let data = random_bytes(200_000, 8);
    let path = write_file(dir.path(), "f", &data);
    for engine in ENGINES {
        let pool = BufferPool::new(64 * PAGE).unwrap();
        let file = open(&path, &pool, engine);
        // Pages 0-2, 10 (twice), 12-14 (overlapping the next range), 14-16.
        let ranges = [
            0..3 * 4096,
            40_960..40_970,
            41_000..41_100,
            50_000..60_000,
            58_000..66_000,
        ];
        let counts = file.prefetch(&ranges).unwrap();
        assert_eq!(counts.ios, 3, "runs 0-2, 10, 12-16");
        assert_eq!(counts.bytes_read, 9 * PAGE as u64);
        let s = pool.stats();
        assert_eq!((s.misses, s.hits, s.resident_pages), (9, 0, 9));
        // Prefetching again costs nothing.
        assert_eq!(file.prefetch(&ranges).unwrap(), IoCounts::default());
        let mut pages_read = 0;
        for r in &ranges {
            let mut out = Vec::new();
            assert_eq!(file.read_into(r.clone(), &mut out).unwrap(), IoCounts::default());
            assert_eq!(out, slice(&data, r));
            pages_read += r.end.div_ceil(4096) - r.start / 4096;
        }
        let s = pool.stats();
        assert_eq!(s.misses, 9, "no further device reads");
        assert_eq!(s.hits, pages_read);
        pool.check_invariants();
    }
}

#[test]
fn prefetch_beyond_the_pool_stops_early() {
    let dir = disk_tempdir();
    let data = random_bytes(100 * PAGE, 9);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(8 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    let counts = file.prefetch(&[0..data.len() as u64, 0..10]).unwrap();
    assert_eq!(counts.bytes_read, 8 * PAGE as u64);
    assert_eq!(pool.stats().resident_pages, 8);
    // The first pages named are the ones made resident.
    assert_eq!(
        file.read_into(0..8 * PAGE as u64, &mut Vec::new()).unwrap(),
        IoCounts::default()
    );
    pool.check_invariants();
    assert_eq!(pool.pinned_frames(), 0);
}

#[test]
fn concurrent_readers_see_the_right_bytes() {
    let dir = disk_tempdir();
    let data = Arc::new(random_bytes(512 * 1024 + 77, 10));
    let path = write_file(dir.path(), "f", &data);
    let len = data.len() as u64;
    for threads in [2u64, 4] {
        // A pool of 6 frames keeps every frame contended (and forces bypasses); 64 lets pages be shared.
        for frames in [6usize, 64] {
            let pool = BufferPool::new(frames * PAGE).unwrap();
            let file = Arc::new(open(&path, &pool, IoEngine::IoUring));
            let start = Arc::new(Barrier::new(threads as usize));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (file, data, start) = (file.clone(), data.clone(), start.clone());
                    std::thread::spawn(move || {
                        let mut rng = Rng(100 + t);
                        let mut out = Vec::new();
                        start.wait();
                        for i in 0..400 {
                            // Mostly a hot 64 KiB region shared by all threads, sometimes anywhere.
                            let r = if i % 4 == 0 {
                                rng.range(len, 30_000)
                            } else {
                                rng.range(65_536, 9_000)
                            };
                            if i % 10 == 0 {
                                file.prefetch(&[r.clone(), rng.range(len, 10_000)]).unwrap();
                            }
                            file.read_into(r.clone(), &mut out).unwrap();
                            assert_eq!(out[..], data[r.start as usize..r.end as usize], "thread {t} {r:?}");
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            pool.check_invariants();
            assert_eq!(pool.pinned_frames(), 0);
            eprintln!("{threads} threads, {frames} frames: {:?}", pool.stats());
        }
    }
}

#[test]
fn a_page_missed_by_many_readers_at_once_is_read_once() {
    let dir = disk_tempdir();
    let data = Arc::new(random_bytes(8 * PAGE, 11));
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(16 * PAGE).unwrap();
    let file = Arc::new(open(&path, &pool, IoEngine::IoUring));
    let threads = 4;
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (file, start) = (file.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut out = Vec::new();
                let counts = file.read_into(4096 + 10..4096 + 20, &mut out).unwrap();
                (counts, out)
            })
        })
        .collect();
    let mut device_bytes = 0;
    for h in handles {
        let (counts, out) = h.join().unwrap();
        assert_eq!(out, data[4096 + 10..4096 + 20]);
        device_bytes += counts.bytes_read;
    }
    assert_eq!(device_bytes, PAGE as u64);
    let s = pool.stats();
    assert_eq!((s.misses, s.hits, s.resident_pages), (1, threads as u64 - 1, 1));
    pool.check_invariants();
}

#[test]
fn a_waiter_wakes_when_the_loader_publishes() {
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let [Slot::Load(f)] = pool.acquire_read(1, 5..6)[..] else {
        panic!("expected a load")
    };
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let slots = pool.acquire_read(1, 5..6);
            assert_eq!(slots, [Slot::Wait(f)]);
            let result = pool.finish(&[], None, &[], &[f]);
            pool.release(&[f]);
            result
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(30));
    pool.finish(&[f], None, &[f], &[]).unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(()));
    pool.check_invariants();
    assert_eq!(pool.stats().resident_pages, 1);
}

#[test]
fn waiters_see_a_failed_load_and_the_frame_is_freed() {
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let [Slot::Load(f)] = pool.acquire_read(1, 7..8)[..] else {
        panic!("expected a load")
    };
    assert_eq!(pool.acquire_read(1, 7..8), [Slot::Wait(f)]);
    let failure = Failure::of(&std::io::Error::from_raw_os_error(libc::EIO));
    pool.finish(&[f], Some(failure), &[f], &[]).unwrap();
    let err = pool.finish(&[], None, &[], &[f]).unwrap_err();
    assert_eq!(err.to_io_error().raw_os_error(), Some(libc::EIO));
    pool.release(&[f]);
    pool.check_invariants();
    assert_eq!(pool.stats().resident_pages, 0);
    // The page is missing again, loaded afresh.
    assert!(matches!(pool.acquire_read(1, 7..8)[..], [Slot::Load(_)]));
}

#[test]
fn pread_engine_and_ring_setup_failure_fall_back_to_pread() {
    let dir = disk_tempdir();
    let data = Arc::new(random_bytes(300_001, 12));
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(16 * PAGE).unwrap();
    let file = Arc::new(open(&path, &pool, IoEngine::Pread));
    assert_eq!(file.engine(), IoEngine::Pread);
    let mut rng = Rng(13);
    for _ in 0..100 {
        let r = rng.range(data.len() as u64, 40_000);
        assert_eq!(read(&file, r.clone()), slice(&data, &r));
    }
    // A thread whose ring cannot be set up (as under a seccomp filter) reads with pread.
    let io_uring_file = Arc::new(open(&path, &pool, IoEngine::IoUring));
    let data2 = data.clone();
    std::thread::spawn(move || {
        hooks::FAIL_RING_SETUP.with(|f| f.set(true));
        assert!(!io_uring_available());
        let mut rng = Rng(14);
        for _ in 0..100 {
            let r = rng.range(data2.len() as u64, 40_000);
            let mut out = Vec::new();
            io_uring_file.read_into(r.clone(), &mut out).unwrap();
            assert_eq!(out, slice(&data2, &r));
        }
    })
    .join()
    .unwrap();
    pool.check_invariants();
}

#[test]
fn short_reads_are_resumed() {
    let dir = disk_tempdir();
    let data = random_bytes(40 * PAGE + 1000, 15);
    let path = write_file(dir.path(), "f", &data);
    for engine in ENGINES {
        let pool = BufferPool::new(64 * PAGE).unwrap();
        let file = open(&path, &pool, engine);
        hooks::SHORT_READS.with(|s| s.set(3));
        let r = 10..(20 * PAGE as u64);
        let mut out = Vec::new();
        let counts = file.read_into(r.clone(), &mut out).unwrap();
        assert_eq!(out, slice(&data, &r));
        assert_eq!(hooks::SHORT_READS.with(|s| s.get()), 0);
        assert_eq!(counts.ios, 4, "{engine:?}: one read, resubmitted three times");
        // A short read of the partial last page.
        hooks::SHORT_READS.with(|s| s.set(2));
        let len = data.len() as u64;
        let r = len - 2000..len;
        assert_eq!(read(&file, r.clone()), slice(&data, &r));
        assert_eq!(hooks::SHORT_READS.with(|s| s.get()), 0);
        pool.check_invariants();
    }
}

#[test]
fn reads_that_never_finish_fail_cleanly() {
    let dir = disk_tempdir();
    let data = random_bytes(3 * PAGE, 16);
    let path = write_file(dir.path(), "f", &data);
    for engine in ENGINES {
        let pool = BufferPool::new(8 * PAGE).unwrap();
        let file = open(&path, &pool, engine);
        hooks::SHORT_READS.with(|s| s.set(100));
        let err = file.read_into(0..100, &mut Vec::new()).unwrap_err();
        hooks::SHORT_READS.with(|s| s.set(0));
        assert!(matches!(err, Error::Io { .. }), "{err}");
        pool.check_invariants();
        assert_eq!(pool.pinned_frames(), 0);
        assert_eq!(pool.stats().resident_pages, 0);
        assert_eq!(read(&file, 0..100), data[..100]);
    }
}

#[test]
fn read_errors_are_reported_and_the_pool_recovers() {
    let dir = disk_tempdir();
    let data = random_bytes(10 * PAGE, 17);
    let path = write_file(dir.path(), "f", &data);
    for engine in ENGINES {
        let pool = BufferPool::new(8 * PAGE).unwrap();
        let file = open(&path, &pool, engine);
        // Two runs (page 1 resident): the second read fails.
        file.prefetch(&[PAGE as u64..PAGE as u64 + 1]).unwrap();
        hooks::FAIL_READS.with(|s| s.set(1));
        let err = file.read_into(0..3 * PAGE as u64, &mut Vec::new()).unwrap_err();
        match &err {
            Error::Io { source, path: p } => {
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
                assert_eq!(p, &path);
            }
            other => panic!("{other}"),
        }
        pool.check_invariants();
        assert_eq!(pool.pinned_frames(), 0);
        assert_eq!(pool.stats().resident_pages, 1);
        // A failing prefetch is an error too, and leaves nothing behind.
        hooks::FAIL_READS.with(|s| s.set(1));
        assert!(file.prefetch(&[5 * PAGE as u64..6 * PAGE as u64]).is_err());
        pool.check_invariants();
        assert_eq!(pool.stats().resident_pages, 1);
        assert_eq!(read(&file, 0..3 * PAGE as u64), data[..3 * PAGE]);
    }
}

#[test]
fn refused_o_direct_falls_back_to_the_page_cache() {
    let dir = disk_tempdir();
    let data = random_bytes(50_000, 18);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4 * PAGE).unwrap();
    hooks::REFUSE_O_DIRECT.with(|r| r.set(true));
    let file = DirectFile::open(&path, pool.clone());
    hooks::REFUSE_O_DIRECT.with(|r| r.set(false));
    let file = file.unwrap();
    assert!(!file.is_direct());
    let mut rng = Rng(19);
    for _ in 0..50 {
        let r = rng.range(data.len() as u64, 20_000);
        assert_eq!(read(&file, r.clone()), slice(&data, &r));
    }
    file.prefetch(&[0..50_000]).unwrap();
}

#[test]
fn tmpfs_files_can_be_read() {
    let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
        return;
    };
    let data = random_bytes(30_000, 20);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let file = DirectFile::open(&path, pool).unwrap();
    eprintln!(
        "tmpfs: O_DIRECT {}",
        if file.is_direct() {
            "accepted"
        } else {
            "refused (fallback used)"
        }
    );
    assert_eq!(read(&file, 0..30_000), data);
}

#[test]
fn closing_a_file_frees_its_frames() {
    let dir = disk_tempdir();
    let data = random_bytes(10 * PAGE, 21);
    let a = write_file(dir.path(), "a", &data);
    let b = write_file(dir.path(), "b", &data[..5 * PAGE]);
    let pool = BufferPool::new(16 * PAGE).unwrap();
    let fa = open(&a, &pool, IoEngine::IoUring);
    let fb = open(&b, &pool, IoEngine::IoUring);
    read(&fa, 0..10 * PAGE as u64);
    read(&fb, 0..5 * PAGE as u64);
    assert_eq!(pool.stats().resident_pages, 15);
    drop(fa);
    assert_eq!(pool.stats().resident_pages, 5);
    pool.check_invariants();
    // Same bytes, different file: the pool keeps files apart.
    assert_eq!(read(&fb, 0..5 * PAGE as u64), data[..5 * PAGE]);
    assert_eq!(pool.stats().misses, 15);
}

#[test]
fn clock_gives_recently_used_pages_a_second_chance() {
    let dir = disk_tempdir();
    let data = random_bytes(12 * PAGE, 22);
    let path = write_file(dir.path(), "f", &data);
    let pool = BufferPool::new(4 * PAGE).unwrap();
    let file = open(&path, &pool, IoEngine::IoUring);
    let page = |i: u64| i * PAGE as u64..i * PAGE as u64 + 1;
    for i in 0..4 {
        read(&file, page(i));
    }
    // Page 0 is used again after each newcomer; the others are not.
    for i in 4..10 {
        read(&file, page(i));
        read(&file, page(0));
    }
    // 10 distinct pages, and page 0 missed once more: the first sweep finds every
    // frame referenced and clears them all, so the oldest (page 0) goes; after that
    // its reference bit saves it each time.
    assert_eq!(pool.stats().misses, 11);
    assert_eq!(file.read_into(page(0), &mut Vec::new()).unwrap(), IoCounts::default());
    pool.check_invariants();
}

fn case() -> impl Strategy<Value = (usize, u64, usize, bool, Vec<(usize, usize)>)> {
    (0usize..60_000).prop_flat_map(|len| {
        (
            Just(len),
            any::<u64>(),
            4usize..24,
            any::<bool>(),
            proptest::collection::vec((0..=len, 0..=len), 1..16),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_ranges_read_like_std((len, seed, frames, pread, ranges) in case()) {
        let dir = disk_tempdir();
        let path = write_file(dir.path(), "f", &random_bytes(len, seed));
        let expected = std::fs::read(&path).unwrap();
        let pool = BufferPool::new(frames * PAGE).unwrap();
        let engine = if pread { IoEngine::Pread } else { IoEngine::IoUring };
        let file = DirectFile::open_with(&path, pool.clone(), engine).unwrap();
        let mut out = Vec::new();
        for (i, (a, b)) in ranges.into_iter().enumerate() {
            let r = a.min(b) as u64..a.max(b) as u64;
            if i % 3 == 2 {
                file.prefetch(std::slice::from_ref(&r)).unwrap();
            }
            file.read_into(r.clone(), &mut out).unwrap();
            prop_assert_eq!(&out[..], &expected[r.start as usize..r.end as usize]);
        }
        pool.check_invariants();
        prop_assert_eq!(pool.pinned_frames(), 0);
    }
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A large pool costs memory only for the frames that held a page: creating
/// one of 1 GiB must not touch it all (other tests run alongside, hence the margin).
#[test]
fn a_large_pool_is_committed_lazily() {
    let before = rss_kb();
    let pool = BufferPool::new(1 << 30).unwrap();
    let grown = rss_kb().saturating_sub(before);
    assert!(grown < 256 * 1024, "creating a 1 GiB pool grew RSS by {grown} KiB");
    assert_eq!(pool.capacity_bytes(), 1 << 30);
}
