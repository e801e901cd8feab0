//! Result-cache options shared by the commands that answer query streams.

use tierdex::cache::{CacheConfig, Matching, PolicyKind, ResultCache, Sharding};

use crate::tier::parse_bytes;

/// Result-cache options (`--cache-policy none` turns the cache off).
#[derive(clap::Args, Debug, Clone)]
pub struct CacheArgs {
    /// Result cache replacement policy: `none`, `lru` or `dlirs`.
    #[arg(long, value_enum, default_value = "none")]
    pub cache_policy: CachePolicy,
    /// Result cache budget in bytes (suffixes K, M, G), all shards together.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub cache_bytes: usize,
    /// Result cache shards: a number (chosen by key hash, shared by all
    /// threads; 1 is one shared cache) or `per-thread` (one private shard per
    /// worker thread).
    #[arg(long, default_value = "1", value_parser = parse_shards)]
    pub cache_shards: Shards,
    /// How lookups match: `isomorphic` (equal canonical queries) or
    /// `partial` (also a word query from a cached disjunction containing it).
    #[arg(long, default_value = "isomorphic")]
    pub cache_match: Matching,
    /// Do not admit results with fewer hits than this (counts always admitted).
    #[arg(long, default_value_t = 0)]
    pub cache_min_hits: usize,
}

/// `--cache-shards` as given.
#[derive(Debug, Clone, Copy)]
pub enum Shards {
    /// N hashed shards.
    Count(usize),
    /// One per worker thread.
    PerThread,
}

/// `--cache-policy`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// No result cache.
    None,
    /// Least recently used.
    Lru,
    /// DLIRS: reuse distance with an adaptive LIR/HIR split.
    Dlirs,
}

fn parse_shards(s: &str) -> Result<Shards, String> {
    match s {
        "per-thread" => Ok(Shards::PerThread),
        s => match s.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(Shards::Count(n)),
            _ => Err(format!("`{s}` is not a shard count from 1 to 1024 or `per-thread`")),
        },
    }
}

impl CacheArgs {
    /// The cache these options describe for `threads` workers, if any.
    pub fn build(&self, threads: usize) -> anyhow::Result<Option<ResultCache>> {
        let policy = match self.cache_policy {
            CachePolicy::None => return Ok(None),
            CachePolicy::Lru => PolicyKind::Lru,
            CachePolicy::Dlirs => PolicyKind::Dlirs,
        };
        let sharding = match self.cache_shards {
            Shards::Count(n) => Sharding::Hashed(n),
            Shards::PerThread => Sharding::PerThread(threads.max(1)),
        };
        Ok(Some(ResultCache::new(CacheConfig {
            policy,
            bytes: self.cache_bytes as u64,
            sharding,
            matching: self.cache_match,
            min_hits: self.cache_min_hits,
        })?))
    }
}
