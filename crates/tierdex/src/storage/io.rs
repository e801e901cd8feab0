//! Per-thread I/O accounting: what queries ask storage for, and what they
//! actually decode. A query runs on one thread, so reading the counters
//! before and after it gives its own figures, whatever other threads do.
//!
//! * `bytes_requested`: bytes of the page windows loaded: 4 KiB pages
//!   touched on the `ram` and `mmap` tiers, bytes read with `pread` on the
//!   `buffered` tier, bytes read from the device (buffer-pool misses) on the
//!   `direct` tier.
//! * `ios`: window loads on `ram`/`mmap`, `pread` calls on `buffered`,
//!   device read operations on `direct`.
//! * `bytes_needed`: bytes of the structures decoded (skip entries, doc and
//!   frequency blocks, position and offset blocks, term infos, stored
//!   records). Read amplification is `bytes_requested / bytes_needed`.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

/// I/O counters (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoStats {
    /// Bytes asked from the storage tier.
    pub bytes_requested: u64,
    /// Read operations.
    pub ios: u64,
    /// Bytes of structures actually decoded.
    pub bytes_needed: u64,
}

impl IoStats {
    /// `bytes_requested / bytes_needed` (1 when nothing was needed).
    pub fn read_amplification(&self) -> f64 {
        if self.bytes_needed == 0 {
            1.0
        } else {
            self.bytes_requested as f64 / self.bytes_needed as f64
        }
    }

    /// The counters accumulated since `earlier`.
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        IoStats {
            bytes_requested: self.bytes_requested - earlier.bytes_requested,
            ios: self.ios - earlier.ios,
            bytes_needed: self.bytes_needed - earlier.bytes_needed,
        }
    }
}

thread_local! {
    static STATS: Cell<IoStats> = const { Cell::new(IoStats { bytes_requested: 0, ios: 0, bytes_needed: 0 }) };
}

/// Counts a read of `bytes` in `ios` operations.
#[inline]
pub fn record_request(bytes: u64, ios: u64) {
    STATS.with(|s| {
        let mut v = s.get();
        v.bytes_requested += bytes;
        v.ios += ios;
        s.set(v);
    });
}

/// Counts `bytes` of decoded structures.
#[inline]
pub fn record_needed(bytes: u64) {
    STATS.with(|s| {
        let mut v = s.get();
        v.bytes_needed += bytes;
        s.set(v);
    });
}

/// This thread's counters so far.
pub fn snapshot() -> IoStats {
    STATS.with(|s| s.get())
}

/// Device bytes read by this process so far (`read_bytes` of
/// `/proc/self/io`: block-layer reads, page-cache misses of mmap faults
/// included); `None` where the kernel does not provide it.
pub fn process_device_read_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_thread() {
        let before = snapshot();
        record_request(4096, 1);
        record_needed(100);
        let d = snapshot().since(&before);
        assert_eq!(
            d,
            IoStats {
                bytes_requested: 4096,
                ios: 1,
                bytes_needed: 100
            }
        );
        assert!((d.read_amplification() - 40.96).abs() < 1e-9);
        std::thread::spawn(|| assert_eq!(snapshot(), IoStats::default()))
            .join()
            .unwrap();
    }
}
