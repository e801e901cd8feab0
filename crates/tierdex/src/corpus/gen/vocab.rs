//! The synthetic vocabulary: English function words for the top ranks, then
//! seeded syllable-built words whose length grows with rank (Zipf's law of
//! abbreviation: frequent words are short).

use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_64;

use super::sample::{below, ln, rng_for, unit, GenRng};

/// The most frequent words: real English function words, so that generated
/// text exercises stop-word handling like real text does. Order = rank.
#[rustfmt::skip]
pub(crate) const FUNCTION_WORDS: [&str; 100] = [
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", //
    "as", "was", "with", "be", "by", "on", "not", "he", "i", "this", //
    "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", //
    "you", "were", "her", "she", "there", "one", "all", "we", "their", "been", //
    "has", "would", "will", "more", "if", "no", "when", "can", "who", "so", //
    "my", "what", "its", "also", "them", "into", "some", "than", "out", "other", //
    "up", "only", "about", "him", "these", "then", "do", "could", "may", "two", //
    "like", "over", "new", "first", "after", "most", "many", "such", "how", "did", //
    "any", "where", "those", "our", "upon", "very", "each", "through", "while", "between", //
    "both", "under", "before", "during", "should", "because", "same", "against", "without", "within",
];

/// Weighted syllable parts.
#[rustfmt::skip]
const ONSETS: &[(&str, u32)] = &[
    ("", 10), ("b", 4), ("c", 4), ("d", 5), ("f", 3), ("g", 3), ("h", 4), ("j", 1),
    ("k", 2), ("l", 5), ("m", 5), ("n", 5), ("p", 4), ("r", 5), ("s", 7), ("t", 7),
    ("v", 2), ("w", 3), ("y", 1), ("z", 1), ("bl", 1), ("br", 2), ("ch", 2), ("cl", 1),
    ("cr", 1), ("dr", 1), ("fl", 1), ("fr", 1), ("gr", 1), ("pl", 1), ("pr", 2), ("sh", 2),
    ("sk", 1), ("sl", 1), ("sp", 1), ("st", 3), ("str", 1), ("th", 3), ("tr", 2), ("wh", 1),
    ("qu", 1), ("ph", 1), ("gl", 1), ("sc", 1),
];
/// Onsets after a closed syllable (no clusters: avoids `dstr` pile-ups).
#[rustfmt::skip]
const SIMPLE_ONSETS: &[(&str, u32)] = &[
    ("", 6), ("b", 3), ("c", 3), ("d", 4), ("f", 2), ("g", 2), ("h", 1), ("k", 1),
    ("l", 5), ("m", 4), ("n", 5), ("p", 3), ("r", 5), ("s", 4), ("t", 6), ("v", 2),
    ("th", 1), ("ch", 1), ("sh", 1),
];
#[rustfmt::skip]
const NUCLEI: &[(&str, u32)] = &[
    ("a", 12), ("e", 14), ("i", 9), ("o", 9), ("u", 4), ("ai", 1), ("au", 1), ("ea", 2),
    ("ee", 1), ("ie", 1), ("io", 1), ("oa", 1), ("oo", 1), ("ou", 2), ("y", 1),
];
#[rustfmt::skip]
const CODAS: &[(&str, u32)] = &[
    ("", 22), ("n", 6), ("r", 6), ("s", 5), ("t", 5), ("l", 4), ("m", 3), ("d", 3),
    ("nd", 2), ("nt", 2), ("st", 2), ("ng", 2), ("ck", 1), ("rt", 1), ("rn", 1), ("ld", 1),
    ("x", 1), ("sh", 1), ("th", 1), ("ct", 1), ("mp", 1), ("ll", 1), ("ss", 1), ("k", 1),
    ("p", 1), ("g", 1),
];
#[rustfmt::skip]
const SUFFIXES: &[(&str, u32)] = &[
    ("s", 6), ("ing", 3), ("ed", 3), ("er", 3), ("ly", 2), ("tion", 2), ("al", 2),
    ("ment", 1), ("ness", 1), ("ic", 1), ("ous", 1), ("ity", 1), ("ist", 1), ("ism", 1),
    ("able", 1), ("ers", 1),
];

/// A weighted table of string parts, sampled by cumulative weight.
struct Parts {
    parts: &'static [(&'static str, u32)],
    total: u32,
}

impl Parts {
    fn new(parts: &'static [(&'static str, u32)]) -> Parts {
        Parts {
            parts,
            total: parts.iter().map(|p| p.1).sum(),
        }
    }

    fn pick(&self, rng: &mut GenRng) -> &'static str {
        let mut x = below(rng, self.total);
        for &(s, w) in self.parts {
            if x < w {
                return s;
            }
            x -= w;
        }
        self.parts[self.parts.len() - 1].0
    }
}

/// Stream id of the vocabulary RNG.
const STREAM_VOCAB: u64 = 1;

/// Builds `size` distinct lowercase ASCII words, by rank. The first
/// `n_function` are function words (a prefix of [`FUNCTION_WORDS`]).
pub(crate) fn build(seed: u64, size: usize, n_function: usize) -> Vec<String> {
    let onsets = Parts::new(ONSETS);
    let simple_onsets = Parts::new(SIMPLE_ONSETS);
    let nuclei = Parts::new(NUCLEI);
    let codas = Parts::new(CODAS);
    let suffixes = Parts::new(SUFFIXES);
    let mut rng = rng_for(seed, STREAM_VOCAB, 0);
    let mut words = Vec::with_capacity(size);
    let mut seen = FxHashSet::default();
    seen.reserve(size);
    for w in FUNCTION_WORDS.iter().take(n_function.min(size)) {
        if seen.insert(xxh3_64(w.as_bytes())) {
            words.push((*w).to_string());
        }
    }
    let nf = words.len().max(1) as f64;
    let mut word = String::with_capacity(32);
    while words.len() < size {
        let rank = words.len() as f64 + 1.0;
        // Mean syllable count grows with log rank: ~1 at the end of the
        // function words, ~2.2 at rank 10,000, ~3.1 at rank 250,000.
        let mean = 1.0 + 0.22 * ln(rank / nf).max(0.0);
        let noise = (unit(&mut rng) + unit(&mut rng) - 1.0) * 1.2;
        let mut syllables = (mean + noise + 0.5).floor().max(1.0) as u32;
        let suffix_p = (0.05 + 0.03 * ln(rank / nf).max(0.0)).min(0.3);
        let mut tries = 0u32;
        loop {
            word.clear();
            for s in 0..syllables {
                let last = s + 1 == syllables;
                let onset = if s == 0 {
                    onsets.pick(&mut rng)
                } else if ends_with_vowel(&word) {
                    // A consonant between two vowels.
                    loop {
                        let o = onsets.pick(&mut rng);
                        if !o.is_empty() {
                            break o;
                        }
                    }
                } else {
                    simple_onsets.pick(&mut rng)
                };
                word.push_str(onset);
                let nucleus = loop {
                    let n = nuclei.pick(&mut rng);
                    // No `quu` or `yy`.
                    if word.as_bytes().last() != Some(&n.as_bytes()[0]) {
                        break n;
                    }
                };
                word.push_str(nucleus);
                // Inner syllables are mostly open.
                if last || unit(&mut rng) < 0.3 {
                    word.push_str(codas.pick(&mut rng));
                }
            }
            if unit(&mut rng) < suffix_p {
                word.push_str(suffixes.pick(&mut rng));
            }
            if word.len() >= 2 && seen.insert(xxh3_64(word.as_bytes())) {
                break;
            }
            tries += 1;
            if tries.is_multiple_of(8) {
                // This length is crowded: go one syllable longer.
                syllables += 1;
            }
        }
        words.push(word.clone());
    }
    words
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

fn ends_with_vowel(w: &str) -> bool {
    w.as_bytes().last().is_some_and(|&b| is_vowel(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_words_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for w in FUNCTION_WORDS {
            assert!(seen.insert(w), "duplicate function word {w}");
        }
    }

    #[test]
    fn words_are_distinct_lowercase_and_grow_with_rank() {
        let words = build(9, 30_000, 100);
        assert_eq!(words.len(), 30_000);
        assert_eq!(words[0], "the");
        let distinct: std::collections::HashSet<&String> = words.iter().collect();
        assert_eq!(distinct.len(), words.len());
        assert!(words
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())));
        let avg = |r: std::ops::Range<usize>| {
            let n = r.len() as f64;
            words[r].iter().map(|w| w.len()).sum::<usize>() as f64 / n
        };
        let (a, b, c) = (avg(100..1000), avg(1000..10_000), avg(10_000..30_000));
        assert!(a < b && b < c, "{a} {b} {c}");
        assert!((3.0..7.0).contains(&a) && (7.0..13.0).contains(&c), "{a} {c}");
        assert_eq!(build(9, 1000, 100), words[..1000]);
        assert_ne!(build(10, 1000, 100)[100..], words[100..1000]);
    }
}
