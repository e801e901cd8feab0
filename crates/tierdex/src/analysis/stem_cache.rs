//! A per-thread, direct-mapped cache of Snowball stems, so that stemming
//! does not allocate (nor run the stemmer) for every token of running text.

use rust_stemmers::Stemmer;
use std::cell::RefCell;

/// Number of slots (a power of two). About 100 KiB per thread once warm.
const SLOTS: usize = 2048;

/// Terms longer than this (in bytes) are stemmed without the cache, so that
/// the slots' buffers stay small.
const MAX_CACHED_LEN: usize = 24;

thread_local! {
    /// The calling thread's cache (borrowed for a whole `analyze` call).
    pub(super) static STEM_CACHE: RefCell<StemCache> = RefCell::new(StemCache::default());
}

/// Slots of (term, stem); a slot with an empty term is vacant (terms are
/// never empty).
#[derive(Debug, Default)]
pub(super) struct StemCache {
    slots: Vec<(String, String)>,
    /// Stem of the last term that bypassed the cache.
    spill: String,
}

impl StemCache {
    /// The stem of `term` (lowercase) by `stemmer`, which must always be the
    /// same algorithm (Snowball English).
    pub(super) fn stem(&mut self, stemmer: &Stemmer, term: &str) -> &str {
        if term.len() > MAX_CACHED_LEN || term.is_empty() {
            let stem = stemmer.stem(term);
            self.spill.clear();
            self.spill.push_str(&stem);
            return &self.spill;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, Default::default);
        }
        let slot = &mut self.slots[hash(term) & (SLOTS - 1)];
        if slot.0 != term {
            let stem = stemmer.stem(term);
            slot.0.clear();
            slot.0.push_str(term);
            slot.1.clear();
            slot.1.push_str(&stem);
        }
        &slot.1
    }
}

/// FNV-1a.
fn hash(s: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s.as_bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 29)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rust_stemmers::Algorithm;

    proptest! {
        #[test]
        fn cached_stems_equal_direct_stems(
            words in prop::collection::vec("[a-e]{1,6}|[a-z]{20,30}|[a-zé]{1,8}", 1..400),
        ) {
            let stemmer = Stemmer::create(Algorithm::English);
            let mut cache = StemCache::default();
            for _ in 0..2 {
                for w in &words {
                    let direct = stemmer.stem(w).into_owned();
                    prop_assert_eq!(cache.stem(&stemmer, w), direct.as_str());
                }
            }
        }
    }
}
