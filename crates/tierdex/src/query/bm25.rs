//! BM25 as Lucene computes it (`BM25Similarity`, k1 = 1.2, b = 0.75).
//!
//! `score = idf * f / (f + k1 * (1 - b + b * dl / avgdl))`, with `dl` the
//! quantised field length (see [`crate::layout::norms`]), computed in `f32`
//! in the same order as Lucene (`w - w / (1 + f * normInverse)`).

use crate::index::FieldStats;
use crate::layout::{norms, Impacts};

/// Term-frequency saturation.
pub const K1: f32 = 1.2;
/// Length normalisation.
pub const B: f32 = 0.75;

/// `1 / (k1 * (1 - b + b * dl / avgdl))` for each of the 256 norm bytes of a field.
#[derive(Debug, Clone)]
pub struct NormCache(pub [f32; 256]);

impl NormCache {
    /// The cache for a field with these statistics.
    pub fn new(stats: &FieldStats) -> NormCache {
        let avgdl = if stats.doc_count == 0 {
            1.0
        } else {
            (stats.sum_total_term_freq as f64 / stats.doc_count as f64) as f32
        };
        let mut c = [0f32; 256];
        for (i, slot) in c.iter_mut().enumerate() {
            let dl = norms::decode(i as u8) as f32;
            *slot = 1.0 / (K1 * ((1.0 - B) + B * dl / avgdl));
        }
        NormCache(c)
    }
}

/// Lucene's IDF: `ln(1 + (N - df + 0.5) / (df + 0.5))`, N = documents with the field.
pub fn idf(doc_freq: u64, doc_count: u64) -> f32 {
    let (df, n) = (doc_freq as f64, doc_count as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
}

/// Scores one term (or phrase) in one field.
#[derive(Debug, Clone, Copy)]
pub struct Bm25<'a> {
    weight: f32,
    cache: &'a NormCache,
}

impl<'a> Bm25<'a> {
    /// A scorer with weight `weight` (the IDF, or the sum of IDFs for a phrase).
    pub fn new(weight: f32, cache: &'a NormCache) -> Self {
        Bm25 { weight, cache }
    }

    /// Score of a document with frequency `freq` and norm byte `norm`.
    #[inline]
    pub fn score(&self, freq: u32, norm: u8) -> f32 {
        let inv = self.cache.0[norm as usize];
        self.weight - self.weight / (1.0 + freq as f32 * inv)
    }

    /// Largest score any posting bounded by `impacts` can have.
    #[inline]
    pub fn bound(&self, impacts: &Impacts) -> f32 {
        impacts
            .as_slice()
            .iter()
            .map(|i| self.score(i.freq, i.norm))
            .fold(0.0, f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_formula() {
        let stats = FieldStats {
            doc_count: 10,
            sum_total_term_freq: 100,
        };
        let cache = NormCache::new(&stats);
        let w = idf(3, 10);
        let expected = (1.0f64 + (10.0 - 3.0 + 0.5) / 3.5).ln();
        assert!((w as f64 - expected).abs() < 1e-6);
        let s = Bm25::new(w, &cache).score(2, norms::encode(5));
        let want = expected * 2.0 / (2.0 + 1.2 * (0.25 + 0.75 * 5.0 / 10.0));
        assert!((s as f64 - want).abs() < 1e-5, "{s} vs {want}");
    }

    #[test]
    fn monotone_in_freq_and_norm() {
        let cache = NormCache::new(&FieldStats {
            doc_count: 7,
            sum_total_term_freq: 3000,
        });
        let b = Bm25::new(3.3, &cache);
        for n in 0..255u8 {
            for f in 1..50 {
                assert!(b.score(f + 1, n) >= b.score(f, n));
                assert!(b.score(f, n) >= b.score(f, n + 1));
            }
        }
    }
}
