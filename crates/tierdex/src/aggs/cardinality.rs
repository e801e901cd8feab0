//! Distinct-value counting for `cardinality`: an exact set of 64-bit value
//! hashes (xxh3) up to the precision threshold, then a HyperLogLog sketch of
//! 2^14 registers (relative standard error 1.04/√m ≈ 0.81%) with 64-bit
//! hashes and linear counting for small estimates, as HyperLogLog++ (without
//! its empirical bias table). Sketches merge by register maximum, sets by
//! union, so partial results merge associatively.

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

/// Bits of the hash that pick a register.
pub const PRECISION: u32 = 14;
/// Registers in a sketch.
pub const REGISTERS: usize = 1 << PRECISION;

/// The hash a keyword value is counted by.
#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(b)
}

/// The hash a number, date or boolean (its column code) is counted by.
#[inline]
pub fn hash_code(c: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&c.to_le_bytes())
}

/// The distinct hashes seen: exact, or a sketch once over the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Distinct {
    /// Every distinct hash.
    Exact(FxHashSet<u64>),
    /// HyperLogLog registers (`REGISTERS` of them).
    Sketch(Vec<u8>),
}

/// A `cardinality` partial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardinalityPartial {
    /// Exact up to this many distinct values.
    pub threshold: u64,
    /// What was seen.
    pub distinct: Distinct,
}

impl CardinalityPartial {
    /// Nothing seen yet.
    pub fn new(threshold: u64) -> Self {
        CardinalityPartial {
            threshold,
            distinct: Distinct::Exact(FxHashSet::default()),
        }
    }

    /// Counts a value by its hash.
    #[inline]
    pub fn insert(&mut self, hash: u64) {
        match &mut self.distinct {
            Distinct::Exact(set) => {
                if set.insert(hash) && set.len() as u64 > self.threshold {
                    self.make_sketch();
                }
            }
            Distinct::Sketch(regs) => add(regs, hash),
        }
    }

    fn make_sketch(&mut self) {
        if let Distinct::Exact(set) = &self.distinct {
            let mut regs = vec![0u8; REGISTERS];
            for &h in set {
                add(&mut regs, h);
            }
            self.distinct = Distinct::Sketch(regs);
        }
    }

    /// Adds what `other` saw.
    pub fn merge(&mut self, other: CardinalityPartial) {
        self.threshold = self.threshold.max(other.threshold);
        match other.distinct {
            Distinct::Exact(set) => {
                for h in set {
                    self.insert(h);
                }
            }
            Distinct::Sketch(theirs) => {
                self.make_sketch();
                if let Distinct::Sketch(mine) = &mut self.distinct {
                    for (a, b) in mine.iter_mut().zip(theirs) {
                        *a = (*a).max(b);
                    }
                }
            }
        }
    }

    /// The number of distinct values (exact below the threshold).
    pub fn estimate(&self) -> u64 {
        match &self.distinct {
            Distinct::Exact(set) => set.len() as u64,
            Distinct::Sketch(regs) => estimate(regs),
        }
    }
}

#[inline]
fn add(regs: &mut [u8], h: u64) {
    let idx = (h >> (64 - PRECISION)) as usize;
    let rest = h << PRECISION;
    let rank = (rest.leading_zeros().min(64 - PRECISION) + 1) as u8;
    if regs[idx] < rank {
        regs[idx] = rank;
    }
}

fn estimate(regs: &[u8]) -> u64 {
    let m = regs.len() as f64;
    let alpha = 0.7213 / (1.0 + 1.079 / m);
    let mut sum = 0.0;
    let mut zeros = 0usize;
    for &r in regs {
        sum += (-(r as f64)).exp2();
        zeros += usize::from(r == 0);
    }
    let raw = alpha * m * m / sum;
    let e = if raw <= 2.5 * m && zeros > 0 {
        m * (m / zeros as f64).ln()
    } else {
        raw
    };
    e.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_below_the_threshold_and_close_above() {
        let mut c = CardinalityPartial::new(100);
        for i in 0..100u64 {
            c.insert(hash_code(i));
            c.insert(hash_code(i));
        }
        assert_eq!(c.estimate(), 100);
        assert!(matches!(c.distinct, Distinct::Exact(_)));
        for n in [1_000u64, 30_000, 200_000] {
            let mut c = CardinalityPartial::new(100);
            for i in 0..n {
                c.insert(hash_code(i));
            }
            let err = (c.estimate() as f64 - n as f64).abs() / n as f64;
            assert!(err < 3.0 * 1.04 / (REGISTERS as f64).sqrt(), "{n}: {}", c.estimate());
        }
    }

    #[test]
    fn merging_is_order_free() {
        let parts: Vec<CardinalityPartial> = (0..4u64)
            .map(|p| {
                let mut c = CardinalityPartial::new(500);
                for i in 0..(p + 1) * 300 {
                    c.insert(hash_code(i * 7 + p));
                }
                c
            })
            .collect();
        let mut a = parts[0].clone();
        for p in &parts[1..] {
            a.merge(p.clone());
        }
        let mut b = parts[3].clone();
        let mut c = parts[1].clone();
        c.merge(parts[0].clone());
        b.merge(parts[2].clone());
        b.merge(c);
        assert_eq!(a.estimate(), b.estimate());
    }
}
