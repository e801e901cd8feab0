//! Storage-tier options shared by the commands that open an index.

use tierdex::bloom::FilterUse;
use tierdex::index::OpenOptions;
use tierdex::storage::{IoStats, Madvise, Tier, TierOptions};

/// Where and how the index is read.
#[derive(clap::Args, Clone, Debug)]
pub struct TierArgs {
    /// Storage tier: ram (read into memory), mmap (page cache), buffered
    /// (pread), direct (O_DIRECT + io_uring into a bounded buffer pool).
    #[arg(long, default_value = "mmap", value_parser = parse_tier)]
    pub tier: Tier,
    /// madvise policy on the mmap tier: adaptive (random + prefetch of large
    /// zones: reads what queries need), random, or os (kernel read-around:
    /// faster only when the whole index fits in memory).
    #[arg(long, default_value = "adaptive", value_parser = parse_madvise)]
    pub madvise: Madvise,
    /// Buffer pool of the direct tier (bytes; K, M, G suffixes accepted).
    #[arg(long, default_value = "128M", value_parser = parse_bytes)]
    pub pool_bytes: usize,
    /// Transparent huge pages on the ram tier.
    #[arg(long)]
    pub huge_pages: bool,
    /// Adaptive prefetch threshold: prefetch when every term's zone is at
    /// least this large (bytes; 0 disables).
    #[arg(long, default_value = "128K", value_parser = parse_bytes)]
    pub prefetch_threshold: usize,
    /// When phrase queries test the index's Bloom filters: auto (where
    /// cheaper than the positions they save), always, or never.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<FilterUse>().map_err(|e| e.to_string()))]
    pub phrase_filters: FilterUse,
}

impl TierArgs {
    /// Open options for these settings.
    pub fn open_options(&self) -> OpenOptions {
        OpenOptions {
            tier: TierOptions {
                tier: self.tier,
                madvise: self.madvise,
                pool_bytes: self.pool_bytes,
                huge_pages: self.huge_pages,
                prefetch_threshold: self.prefetch_threshold,
            },
            phrase_filters: self.phrase_filters,
            ..Default::default()
        }
    }
}

fn parse_tier(s: &str) -> Result<Tier, String> {
    s.parse().map_err(|e: tierdex::Error| e.to_string())
}

fn parse_madvise(s: &str) -> Result<Madvise, String> {
    s.parse().map_err(|e: tierdex::Error| e.to_string())
}

/// Parses `4096`, `64K`, `256M`, `2G` (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1usize << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("`{s}`: unknown unit `{c}` (use K, M or G)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 4096, 64K, 256M, 2G)"))
}

/// I/O figures of one query, for `--io-stats`.
#[derive(serde::Serialize, Debug, Clone, Copy)]
pub struct QueryIo {
    /// Bytes asked from the storage tier.
    pub bytes_requested: u64,
    /// Bytes of structures decoded.
    pub bytes_needed: u64,
    /// Read operations.
    pub ios: u64,
    /// Device bytes read by the process during the query (`/proc/self/io`),
    /// when queries run on one thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
}

/// Measures the I/O of what `f` does on this thread.
pub fn measure<T>(device: bool, f: impl FnOnce() -> T) -> (T, QueryIo) {
    let dev_before = device.then(tierdex::storage::io::process_device_read_bytes).flatten();
    let before = tierdex::storage::io::snapshot();
    let out = f();
    let d: IoStats = tierdex::storage::io::snapshot().since(&before);
    let dev_after = device.then(tierdex::storage::io::process_device_read_bytes).flatten();
    let io = QueryIo {
        bytes_requested: d.bytes_requested,
        bytes_needed: d.bytes_needed,
        ios: d.ios,
        device_bytes: dev_before.zip(dev_after).map(|(a, b)| b - a),
    };
    (out, io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("256m"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("").is_err());
    }
}
