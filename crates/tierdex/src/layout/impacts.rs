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
        let mut best = BestPerNorm::default();
        for (f, n) in pairs {
            best.add(f, n);
        }
        best.frontier(cap)
    }

    /// The capped frontier of the pairs `frontier` holds, sorted by norm
    /// and frequency, both increasing: the neighbours with the closest
    /// frequencies are merged until under the cap.
    fn capped(frontier: &mut [Impact], cap: usize) -> Impacts {
        let mut len = frontier.len();
        let cap = cap.clamp(1, MAX_TERM_IMPACTS);
        while len > cap {
            let j = (0..len - 1)
                .min_by_key(|&j| frontier[j + 1].freq - frontier[j].freq)
                .unwrap();
            frontier[j] = Impact {
                freq: frontier[j + 1].freq,
                norm: frontier[j].norm,
            };
            frontier.copy_within(j + 2..len, j + 1);
            len -= 1;
        }
        let frontier = &frontier[..len];
        let mut out = Impacts::default();
        out.pairs[..len].copy_from_slice(frontier);
        out.len = len as u8;
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

/// The best (highest) frequency seen for each norm, and which norms were
/// seen: gathered posting by posting, turned into a frontier, and cleared
/// in time proportional to the norms seen (a term in a few documents costs
/// a few entries, not the 256 norms).
#[derive(Debug, Clone)]
pub struct BestPerNorm {
    best: [u32; 256],
    seen: [u64; 4],
}

impl Default for BestPerNorm {
    fn default() -> Self {
        BestPerNorm {
            best: [0; 256],
            seen: [0; 4],
        }
    }
}

impl BestPerNorm {
    /// Notes a posting of frequency `freq` and norm `norm`.
    #[inline]
    pub fn add(&mut self, freq: u32, norm: u8) {
        let slot = &mut self.best[norm as usize];
        *slot = (*slot).max(freq);
        self.seen[norm as usize / 64] |= 1 << (norm % 64);
    }

    /// The capped Pareto frontier of what was noted: scanning the norms
    /// from short to long, the pairs whose frequency beats every shorter
    /// one's, merged down to `cap`.
    pub fn frontier(&self, cap: usize) -> Impacts {
        // The frontier holds at most a pair per norm seen: most terms are
        // in few documents, and a smaller table is cheaper to set up.
        let seen: u32 = self.seen.iter().map(|b| b.count_ones()).sum();
        match seen <= 32 {
            true => self.frontier_in(&mut [Impact::default(); 32], cap),
            false => self.frontier_in(&mut [Impact::default(); 256], cap),
        }
    }

    /// [`Self::frontier`] gathered in `frontier`, which has room for a
    /// pair per norm seen.
    fn frontier_in(&self, frontier: &mut [Impact], cap: usize) -> Impacts {
        let mut len = 0;
        let mut top = 0;
        for (w, &bits) in self.seen.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let n = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let f = self.best[n];
                if f > top {
                    frontier[len] = Impact { freq: f, norm: n as u8 };
                    len += 1;
                    top = f;
                }
            }
        }
        Impacts::capped(&mut frontier[..len], cap)
    }

    /// Forgets every posting noted.
    #[inline]
    pub fn clear(&mut self) {
        for (w, bits) in self.seen.iter_mut().enumerate() {
            while *bits != 0 {
                self.best[w * 64 + bits.trailing_zeros() as usize] = 0;
                *bits &= *bits - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The frontier as first written: best frequency per norm in an array
    /// of 256, the pairs kept scanning it, neighbours merged in a vector.
    fn reference(pairs: &[(u32, u8)], cap: usize) -> Vec<Impact> {
        let mut best = [0u32; 256];
        for &(f, n) in pairs {
            best[n as usize] = best[n as usize].max(f);
        }
        let mut frontier = Vec::new();
        let mut top = 0;
        for (n, &f) in best.iter().enumerate() {
            if f > top {
                frontier.push(Impact { freq: f, norm: n as u8 });
                top = f;
            }
        }
        while frontier.len() > cap.clamp(1, MAX_TERM_IMPACTS) {
            let j = (0..frontier.len() - 1)
                .min_by_key(|&j| frontier[j + 1].freq - frontier[j].freq)
                .unwrap();
            frontier[j].freq = frontier[j + 1].freq;
            frontier.remove(j + 1);
        }
        frontier
    }

    proptest! {
        /// The same pairs as the first algorithm's (the index files do not
        /// change), whether gathered at once or posting by posting into a
        /// reused, cleared [`BestPerNorm`].
        #[test]
        fn frontier_is_the_reference_one(groups in proptest::collection::vec(proptest::collection::vec((0u32..60, any::<u8>()), 0..300), 1..5), cap in 1usize..10) {
            let mut reused = BestPerNorm::default();
            for pairs in &groups {
                let want = reference(pairs, cap);
                let at_once = Impacts::frontier(pairs.iter().copied(), cap);
                prop_assert_eq!(at_once.as_slice(), &want[..]);
                pairs.iter().for_each(|&(f, n)| reused.add(f, n));
                let streamed = reused.frontier(cap);
                prop_assert_eq!(streamed.as_slice(), &want[..]);
                reused.clear();
                prop_assert!(reused.best.iter().all(|&f| f == 0) && reused.seen == [0; 4]);
            }
        }

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
