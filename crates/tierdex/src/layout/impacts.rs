//! Impacts: the (frequency, norm) pairs that bound a block's BM25 scores.
//!
//! A document with frequency `f` and norm `n` scores at most as much as any
//! pair `(f' >= f, n' <= n)`, whatever the collection statistics, because
//! BM25 grows with frequency and falls with length. A block keeps the Pareto
//! frontier of its documents' pairs (capped, merging neighbours into a
//! pair that still dominates both), so block-max scores stay exact bounds
//! when segments are added and statistics change.

use crate::codec;

/// Most pairs kept per block.
pub const MAX_BLOCK_IMPACTS: usize = 4;
/// Most pairs kept for a whole term.
pub const MAX_TERM_IMPACTS: usize = 8;

/// One (frequency, norm byte) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Impact {
    /// Term frequency.
    pub freq: u32,
    /// Encoded field length (see [`super::norms`]).
    pub norm: u8,
}

/// A small set of impacts dominating a group of postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Impacts {
    len: u8,
    pairs: [Impact; MAX_TERM_IMPACTS],
}

impl Impacts {
    /// The pairs.
    #[inline]
    pub fn as_slice(&self) -> &[Impact] {
        &self.pairs[..self.len as usize]
    }

    /// Builds the capped Pareto frontier of `(freq, norm)` pairs.
    pub fn frontier(pairs: impl IntoIterator<Item = (u32, u8)>, cap: usize) -> Impacts {
        // Best (max) frequency for each norm.
        let mut best = [0u32; 256];
        let mut any = false;
        for (f, n) in pairs {
            let slot = &mut best[n as usize];
            *slot = (*slot).max(f);
            any = true;
        }
        let mut frontier: Vec<Impact> = Vec::new();
        if any {
            // Scanning norms from short to long, keep pairs whose frequency
            // beats every shorter one.
            let mut top = 0;
            for (n, &f) in best.iter().enumerate() {
                if f > top {
                    frontier.push(Impact { freq: f, norm: n as u8 });
                    top = f;
                }
            }
        }
        // Frontier is sorted by norm and frequency, both increasing. Merge
        // the neighbours with the closest frequencies until under the cap.
        let cap = cap.clamp(1, MAX_TERM_IMPACTS);
        while frontier.len() > cap {
            let j = (0..frontier.len() - 1)
                .min_by_key(|&j| frontier[j + 1].freq - frontier[j].freq)
                .unwrap();
            let merged = Impact {
                freq: frontier[j + 1].freq,
                norm: frontier[j].norm,
            };
            frontier[j] = merged;
            frontier.remove(j + 1);
        }
        let mut out = Impacts::default();
        for (i, p) in frontier.iter().enumerate() {
            out.pairs[i] = *p;
        }
        out.len = frontier.len() as u8;
        out
    }

    /// Appends the encoded impacts.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.len);
        let mut prev = Impact::default();
        for p in self.as_slice() {
            codec::write_u32(out, p.freq - prev.freq);
            out.push(p.norm - prev.norm);
            prev = *p;
        }
    }

    /// Reads impacts written by [`Impacts::write`].
    pub fn read(data: &[u8], pos: &mut usize) -> Option<Impacts> {
        let len = *data.get(*pos)? as usize;
        *pos += 1;
        if len > MAX_TERM_IMPACTS {
            return None;
        }
        let mut out = Impacts {
            len: len as u8,
            ..Default::default()
        };
        let mut prev = Impact::default();
        for slot in out.pairs.iter_mut().take(len) {
            let freq = prev.freq.checked_add(codec::read_u32(data, pos)?)?;
            let norm = prev.norm.checked_add(*data.get(*pos)?)?;
            *pos += 1;
            prev = Impact { freq, norm };
            *slot = prev;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn frontier_dominates_every_input(pairs in proptest::collection::vec((1u32..50, 0u8..=255), 1..200), cap in 1usize..8) {
            let imp = Impacts::frontier(pairs.iter().copied(), cap);
            prop_assert!(imp.as_slice().len() <= cap);
            for (f, n) in &pairs {
                prop_assert!(imp.as_slice().iter().any(|p| p.freq >= *f && p.norm <= *n));
            }
            let mut buf = Vec::new();
            imp.write(&mut buf);
            let mut pos = 0;
            prop_assert_eq!(Impacts::read(&buf, &mut pos), Some(imp));
            prop_assert_eq!(pos, buf.len());
        }
    }
}
