//! The result cache (DESIGN §6): query results kept in front of evaluation,
//! within a byte budget, so repeated queries do not pay the slower tier again.
//!
//! * Keys are canonical ([`key`]): reordered operands of AND/OR, respelled
//!   words and redundant groups hit the same entry (isomorphic matching).
//! * With [`Matching::Partial`], a disjunction's entry also keeps each of its
//!   word clauses' own results, and a word query is answered from it
//!   (partial type I). Nothing is ever answered that evaluation would not
//!   return bit for bit.
//! * Entries belong to an index snapshot ([`Searcher::snapshot`]). The first
//!   lookup with a newer snapshot (after a refresh made additions or
//!   deletions visible) empties the cache; lookups with an older snapshot
//!   bypass it. No stale result is ever served.
//! * The budget is split over shards, each with its own lock and replacement
//!   policy ([`policy`]): LRU or DLIRS. Shards are chosen by key hash, or one
//!   per worker thread.

pub mod key;
pub mod policy;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use key::{CacheKey, Canonical, QueryKey};
pub use policy::{AnyPolicy, Policy, PolicyKind};

use crate::error::{Error, Result};
use crate::query::ast;
use crate::search::{Hit, Mode, SearchResults, Searcher};

/// Bytes charged per entry for its map slot, policy node and bookkeeping.
const ENTRY_OVERHEAD: u64 = 160;
/// Bytes charged per word result kept in a disjunction's entry.
const WORD_OVERHEAD: u64 = 80;

/// How lookups match cached entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Matching {
    /// Equal canonical keys only.
    #[default]
    Isomorphic,
    /// Also answer a word query from a cached disjunction containing it.
    Partial,
}

impl std::str::FromStr for Matching {
    type Err = Error;

    fn from_str(s: &str) -> Result<Matching> {
        match s {
            "isomorphic" => Ok(Matching::Isomorphic),
            "partial" => Ok(Matching::Partial),
            _ => Err(Error::InvalidArgument(format!(
                "unknown cache matching `{s}` (expected isomorphic or partial)"
            ))),
        }
    }
}

/// How the byte budget is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharding {
    /// N shards chosen by key hash, shared by all threads (1: one shared cache).
    Hashed(usize),
    /// One private shard per worker thread (the thread number picks it).
    PerThread(usize),
}

impl Sharding {
    fn count(self) -> usize {
        match self {
            Sharding::Hashed(n) | Sharding::PerThread(n) => n.max(1),
        }
    }
}

/// Everything that configures a [`ResultCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheConfig {
    /// Replacement policy of every shard.
    pub policy: PolicyKind,
    /// Total budget in bytes (results, keys, bookkeeping and policy history).
    pub bytes: u64,
    /// Shards.
    pub sharding: Sharding,
    /// Lookup matching.
    pub matching: Matching,
    /// Results with fewer hits are not admitted (counts-only results always are).
    pub min_hits: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            policy: PolicyKind::Dlirs,
            bytes: 64 << 20,
            sharding: Sharding::Hashed(1),
            matching: Matching::Isomorphic,
            min_hits: 0,
        }
    }
}

/// How a query was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// From the entry of an equal key.
    Hit,
    /// From a word result kept in a cached disjunction's entry.
    PartialHit,
    /// Evaluated (and offered to the cache).
    Miss,
    /// Evaluated without the cache: the query analyses to nothing, or it ran
    /// on a snapshot older than the cache's.
    Bypass,
}

/// Counters and occupancy of one shard.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ShardStats {
    /// Lookups answered from an equal key.
    pub hits: u64,
    /// Lookups answered from a disjunction's word result.
    pub partial_hits: u64,
    /// Lookups evaluated.
    pub misses: u64,
    /// Results admitted.
    pub inserts: u64,
    /// Results not admitted (too few hits, or larger than the shard).
    pub rejected: u64,
    /// Entries evicted by the policy.
    pub evictions: u64,
    /// Entries dropped because a newer snapshot arrived.
    pub invalidations: u64,
    /// Entries resident now.
    pub entries: u64,
    /// Bytes of resident entries.
    pub resident_bytes: u64,
    /// Bytes of policy history (non-resident keys remembered by DLIRS).
    pub history_bytes: u64,
    /// The shard's budget.
    pub capacity: u64,
}

impl ShardStats {
    /// Resident plus history bytes: what the shard holds against its budget.
    pub fn bytes_used(&self) -> u64 {
        self.resident_bytes + self.history_bytes
    }

    /// (hits + partial hits) / lookups that went to the cache.
    pub fn hit_rate(&self) -> f64 {
        let answered = self.hits + self.partial_hits;
        let lookups = answered + self.misses;
        if lookups == 0 {
            0.0
        } else {
            answered as f64 / lookups as f64
        }
    }

    fn add(&mut self, o: &ShardStats) {
        self.hits += o.hits;
        self.partial_hits += o.partial_hits;
        self.misses += o.misses;
        self.inserts += o.inserts;
        self.rejected += o.rejected;
        self.evictions += o.evictions;
        self.invalidations += o.invalidations;
        self.entries += o.entries;
        self.resident_bytes += o.resident_bytes;
        self.history_bytes += o.history_bytes;
        self.capacity += o.capacity;
    }
}

/// The cache's metrics: every shard and their sum.
#[derive(Debug, Clone, Serialize)]
pub struct CacheStats {
    /// The configuration.
    pub config: CacheConfig,
    /// Sum over shards.
    pub total: ShardStats,
    /// Hit rate of the sum (partial hits included).
    pub hit_rate: f64,
    /// Bytes used by the sum.
    pub bytes_used: u64,
    /// Lookups that bypassed the cache.
    pub bypasses: u64,
    /// Each shard.
    pub shards: Vec<ShardStats>,
}

struct Entry {
    key: CacheKey,
    snapshot: u64,
    results: SearchResults,
    /// Word clauses' own results: (hash of the word's cache key, word, results).
    words: Vec<(u64, QueryKey, SearchResults)>,
}

struct Shard {
    policy: AnyPolicy,
    entries: FxHashMap<u64, Arc<Entry>>,
    /// Word cache-key hash → hashes of the entries holding that word's results.
    words: FxHashMap<u64, Vec<u64>>,
    stats: ShardStats,
    evicted: Vec<u64>,
}

impl Shard {
    fn remove(&mut self, h: u64) {
        let Some(e) = self.entries.remove(&h) else {
            return;
        };
        for (wh, _, _) in &e.words {
            if let Some(parents) = self.words.get_mut(wh) {
                parents.retain(|&p| p != h);
                if parents.is_empty() {
                    self.words.remove(wh);
                }
            }
        }
    }

    fn clear(&mut self) {
        self.stats.invalidations += self.entries.len() as u64;
        self.policy.clear();
        self.entries.clear();
        self.words.clear();
    }

    /// The word result for `key` (hash `h`) kept by a resident entry.
    fn word(&mut self, h: u64, key: &CacheKey, snapshot: u64) -> Option<SearchResults> {
        let parents = self.words.get(&h)?;
        for p in parents {
            let Some(e) = self.entries.get(p) else {
                continue;
            };
            if e.snapshot != snapshot || e.key.mode != key.mode || e.key.k != key.k {
                continue;
            }
            if let Some((_, _, r)) = e.words.iter().find(|(wh, w, _)| *wh == h && *w == key.query) {
                let (r, p) = (r.clone(), *p);
                self.policy.hit(p);
                self.stats.partial_hits += 1;
                return Some(r);
            }
        }
        None
    }
}

/// A sharded, byte-budgeted cache of query results.
pub struct ResultCache {
    config: CacheConfig,
    shards: Vec<Mutex<Shard>>,
    /// The newest index snapshot seen; entries all belong to it.
    snapshot: AtomicU64,
    bypasses: AtomicU64,
}

fn results_bytes(r: &SearchResults) -> u64 {
    (r.hits.len() * std::mem::size_of::<Hit>()) as u64
}

impl ResultCache {
    /// An empty cache.
    pub fn new(config: CacheConfig) -> Result<ResultCache> {
        let n = config.sharding.count();
        let per_shard = config.bytes / n as u64;
        if per_shard < 4096 {
            return Err(Error::InvalidArgument(format!(
                "cache budget of {} bytes over {n} shard(s) leaves {per_shard} bytes per shard (need at least 4096)",
                config.bytes
            )));
        }
        let shards = (0..n)
            .map(|_| {
                Mutex::new(Shard {
                    policy: AnyPolicy::new(config.policy, per_shard),
                    entries: FxHashMap::default(),
                    words: FxHashMap::default(),
                    stats: ShardStats {
                        capacity: per_shard,
                        ..Default::default()
                    },
                    evicted: Vec::new(),
                })
            })
            .collect();
        Ok(ResultCache {
            config,
            shards,
            snapshot: AtomicU64::new(0),
            bypasses: AtomicU64::new(0),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Answers `query` on `searcher` from the cache or by evaluating it.
    /// `thread` is the caller's worker number (it picks the shard with
    /// [`Sharding::PerThread`]).
    pub fn search(
        &self,
        searcher: &Searcher,
        thread: usize,
        query: &ast::Query,
        mode: Mode,
        k: usize,
    ) -> Result<(SearchResults, Outcome)> {
        self.search_until(searcher, thread, query, mode, k, None)
    }

    /// [`search`](Self::search), with evaluation stopped at `deadline`
    /// ([`Searcher::search_until`]); a stopped evaluation is not admitted.
    pub fn search_until(
        &self,
        searcher: &Searcher,
        thread: usize,
        query: &ast::Query,
        mode: Mode,
        k: usize,
        deadline: Option<std::time::Instant>,
    ) -> Result<(SearchResults, Outcome)> {
        let canon = Canonical::new_until(searcher, query, deadline)?;
        self.get_or_eval(searcher.snapshot(), thread, &canon, query, mode, k, |q| {
            searcher.search_until(q, mode, k, deadline)
        })
    }

    /// The general form of [`search`](Self::search): `eval` evaluates a
    /// parsed query (the whole query, or a word clause for partial matching)
    /// on the index snapshot `snapshot`, and `canon` is the query's
    /// canonical form under that index's analyzer.
    #[allow(clippy::too_many_arguments)]
    pub fn get_or_eval(
        &self,
        snapshot: u64,
        thread: usize,
        canon: &Canonical,
        query: &ast::Query,
        mode: Mode,
        k: usize,
        mut eval: impl FnMut(&ast::Query) -> Result<SearchResults>,
    ) -> Result<(SearchResults, Outcome)> {
        let Some(qkey) = canon.key.clone() else {
            return self.bypass(eval(query));
        };
        if !self.observe(snapshot) {
            return self.bypass(eval(query));
        }
        let key = CacheKey::new(qkey, mode, k);
        let h = key.hash64();
        let home = self.shard_of(h, thread);
        {
            let mut shard = self.lock(home);
            if let Some(e) = shard.entries.get(&h) {
                if e.key == key && e.snapshot == snapshot {
                    let r = e.results.clone();
                    shard.policy.hit(h);
                    shard.stats.hits += 1;
                    return Ok((r, Outcome::Hit));
                }
            }
            if self.config.matching == Matching::Partial && canon.is_word {
                if let Some(r) = shard.word(h, &key, snapshot) {
                    return Ok((r, Outcome::PartialHit));
                }
            }
        }
        if self.config.matching == Matching::Partial
            && canon.is_word
            && matches!(self.config.sharding, Sharding::Hashed(n) if n > 1)
        {
            for i in (0..self.shards.len()).filter(|&i| i != home) {
                if let Some(r) = self.lock(i).word(h, &key, snapshot) {
                    return Ok((r, Outcome::PartialHit));
                }
            }
        }
        self.lock(home).stats.misses += 1;
        let results = eval(query)?;
        let mut words = Vec::new();
        if self.config.matching == Matching::Partial {
            for (w, q) in &canon.words {
                let wkey = CacheKey::new(w.clone(), mode, k);
                words.push((wkey.hash64(), w.clone(), eval(q)?));
            }
        }
        self.admit(home, h, key, snapshot, &results, words);
        Ok((results, Outcome::Miss))
    }

    fn admit(
        &self,
        home: usize,
        h: u64,
        key: CacheKey,
        snapshot: u64,
        results: &SearchResults,
        words: Vec<(u64, QueryKey, SearchResults)>,
    ) {
        let mut shard = self.lock(home);
        // A refresh may have overtaken this evaluation.
        if self.snapshot.load(Ordering::Acquire) != snapshot {
            return;
        }
        let bytes = ENTRY_OVERHEAD
            + key.query.heap_bytes()
            + results_bytes(results)
            + words
                .iter()
                .map(|(_, w, r)| WORD_OVERHEAD + w.heap_bytes() + results_bytes(r))
                .sum::<u64>();
        let too_few = key.mode != Mode::Count && results.hits.len() < self.config.min_hits;
        if too_few || bytes > shard.policy.max_entry_bytes() {
            shard.stats.rejected += 1;
            return;
        }
        if shard.policy.contains(h) {
            // Another thread admitted it meanwhile (or a hash twin lives there).
            return;
        }
        let mut evicted = std::mem::take(&mut shard.evicted);
        shard.policy.insert(h, bytes, &mut evicted);
        shard.stats.evictions += evicted.len() as u64;
        for &e in &evicted {
            shard.remove(e);
        }
        evicted.clear();
        shard.evicted = evicted;
        for (wh, _, _) in &words {
            shard.words.entry(*wh).or_default().push(h);
        }
        shard.entries.insert(
            h,
            Arc::new(Entry {
                key,
                snapshot,
                results: results.clone(),
                words,
            }),
        );
        shard.stats.inserts += 1;
    }

    /// Registers a lookup on `snapshot`: a newer one empties the cache.
    /// Returns false when the snapshot is older than the cache's.
    fn observe(&self, snapshot: u64) -> bool {
        let seen = self.snapshot.load(Ordering::Acquire);
        if snapshot == seen {
            return true;
        }
        if snapshot < seen {
            return false;
        }
        if self.snapshot.fetch_max(snapshot, Ordering::AcqRel) < snapshot {
            for i in 0..self.shards.len() {
                self.lock(i).clear();
            }
        }
        self.snapshot.load(Ordering::Acquire) == snapshot
    }

    fn bypass(&self, r: Result<SearchResults>) -> Result<(SearchResults, Outcome)> {
        self.bypasses.fetch_add(1, Ordering::Relaxed);
        r.map(|r| (r, Outcome::Bypass))
    }

    fn shard_of(&self, h: u64, thread: usize) -> usize {
        match self.config.sharding {
            Sharding::PerThread(n) => thread % n.max(1),
            Sharding::Hashed(n) => ((h >> 32) % n.max(1) as u64) as usize,
        }
    }

    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        // A panic under the lock leaves maps and policy possibly out of step:
        // start that shard afresh rather than serve from it.
        self.shards[i].lock().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            g.clear();
            g
        })
    }

    /// Empties every shard.
    pub fn clear(&self) {
        for i in 0..self.shards.len() {
            self.lock(i).clear();
        }
    }

    /// Current metrics.
    pub fn stats(&self) -> CacheStats {
        let mut total = ShardStats::default();
        let shards: Vec<ShardStats> = (0..self.shards.len())
            .map(|i| {
                let s = self.lock(i);
                let mut st = s.stats.clone();
                st.entries = s.entries.len() as u64;
                st.resident_bytes = s.policy.resident_bytes();
                st.history_bytes = s.policy.history_bytes();
                st
            })
            .collect();
        for s in &shards {
            total.add(s);
        }
        CacheStats {
            config: self.config,
            hit_rate: total.hit_rate(),
            bytes_used: total.bytes_used(),
            bypasses: self.bypasses.load(Ordering::Relaxed),
            total,
            shards,
        }
    }
}

#[cfg(test)]
mod tests;
