//! A per-thread, direct-mapped cache of Snowball stems, so that stemming
//! does not allocate (nor run the stemmer) for every token of running text.
//! Entries are keyed by language and term, so fields of different languages
//! analysed on one thread share it safely.

use rust_stemmers::Stemmer;
use std::cell::RefCell;

use super::Language;

/// Number of slots (a power of two). About 100 KiB per thread once warm.
const SLOTS: usize = 2048;

/// Terms longer than this (in bytes) are stemmed without the cache, so that
/// the slots' buffers stay small.
const MAX_CACHED_LEN: usize = 24;

thread_local! {
    /// The calling thread's cache (borrowed for a whole `analyze` call).
    pub(super) static STEM_CACHE: RefCell<StemCache> = RefCell::new(StemCache::default());
}

/// Slots of (language, term, stem); a slot with an empty term is vacant
/// (terms are never empty).
#[derive(Debug, Default)]
pub(super) struct StemCache {
    slots: Vec<(Language, String, String)>,
    /// Stem of the last term that bypassed the cache.
    spill: String,
}

impl StemCache {
    /// The stem of `term` (lowercase) by `stemmer`, which must be the
    /// Snowball algorithm of `language`.
    pub(super) fn stem(&mut self, stemmer: &Stemmer, language: Language, term: &str) -> &str {
        if term.len() > MAX_CACHED_LEN || term.is_empty() {
            let stem = stemmer.stem(term);
            self.spill.clear();
            self.spill.push_str(&stem);
            return &self.spill;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, Default::default);
        }
        let index = hash(term).wrapping_add(language.index().wrapping_mul(0x9E37_79B9)) & (SLOTS - 1);
        let slot = &mut self.slots[index];
        if slot.1 != term || slot.0 != language {
            let stem = stemmer.stem(term);
            slot.0 = language;
            slot.1.clear();
            slot.1.push_str(term);
            slot.2.clear();
            slot.2.push_str(&stem);
        }
        &slot.2
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
                    prop_assert_eq!(cache.stem(&stemmer, Language::English, w), direct.as_str());
                }
            }
        }

        #[test]
        fn languages_sharing_the_cache_get_their_own_stems(
            words in prop::collection::vec("[a-eéx]{1,8}|chevaux|running|nationales", 1..200),
        ) {
            let languages = [Language::English, Language::French, Language::German, Language::Spanish];
            let stemmers = languages.map(|l| Stemmer::create(l.algorithm()));
            let mut cache = StemCache::default();
            for (i, w) in words.iter().enumerate() {
                for k in [i % 4, (i + 1) % 4] {
                    let direct = stemmers[k].stem(w).into_owned();
                    prop_assert_eq!(cache.stem(&stemmers[k], languages[k], w), direct.as_str());
                }
            }
        }
    }

    #[test]
    fn one_term_in_two_languages() {
        let (en, fr) = (Stemmer::create(Algorithm::English), Stemmer::create(Algorithm::French));
        let mut cache = StemCache::default();
        assert_eq!(cache.stem(&en, Language::English, "chevaux"), "chevaux");
        assert_eq!(cache.stem(&fr, Language::French, "chevaux"), "cheval");
        assert_eq!(cache.stem(&en, Language::English, "chevaux"), "chevaux");
    }
}
