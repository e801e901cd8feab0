//! A dense set of document numbers.

/// A set of document numbers of one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// An empty set over documents `0..len`.
    pub fn new(len: u32) -> Self {
        BitSet {
            words: vec![0; (len as usize).div_ceil(64)],
        }
    }

    /// Adds `doc` (ignored if out of range).
    #[inline]
    pub fn insert(&mut self, doc: u32) {
        if let Some(w) = self.words.get_mut(doc as usize / 64) {
            *w |= 1 << (doc % 64);
        }
    }

    /// True if `doc` is in the set.
    pub fn contains(&self, doc: u32) -> bool {
        self.words
            .get(doc as usize / 64)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    /// The first document `>= from` in the set, or `u32::MAX` (TERMINATED).
    #[inline]
    pub fn next(&self, from: u32) -> u32 {
        let mut i = from as usize / 64;
        let Some(&w) = self.words.get(i) else {
            return u32::MAX;
        };
        let w = w & (u64::MAX << (from % 64));
        if w != 0 {
            return (i * 64) as u32 + w.trailing_zeros();
        }
        i += 1;
        while let Some(&w) = self.words.get(i) {
            if w != 0 {
                return (i * 64) as u32 + w.trailing_zeros();
            }
            i += 1;
        }
        u32::MAX
    }

    /// The 64 members `from..from + 64` as bits (bit `i` for `from + i`;
    /// documents past the set's end are absent).
    #[inline]
    pub fn word_at(&self, from: u32) -> u64 {
        let (i, shift) = (from as usize / 64, from % 64);
        let lo = self.words.get(i).copied().unwrap_or(0);
        if shift == 0 {
            return lo;
        }
        let hi = self.words.get(i + 1).copied().unwrap_or(0);
        (lo >> shift) | (hi << (64 - shift))
    }

    /// Number of documents in the set.
    pub fn len(&self) -> u64 {
        count_ones(&self.words)
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The set's words (bit `d % 64` of word `d / 64` is document `d`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The set's words (bit `d % 64` of word `d / 64` is document `d`),
    /// for loops that fill it a block at a time.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// `self |= other`.
    pub fn union_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// `self &= other`.
    pub fn intersect_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    /// `self &= !other`.
    pub fn subtract(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
    }
}

/// The number of set bits in `words`: with the POPCNT instruction where the
/// CPU has it (the portable baseline counts with shifts and masks, about
/// 5x slower over a segment's set).
pub fn count_ones(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked just above), the one feature
        // `count_ones_popcnt` is compiled for.
        return unsafe { count_ones_popcnt(words) };
    }
    count_ones_portable(words)
}

/// [`count_ones`] in four independent sums.
#[inline(always)]
fn count_ones_portable(words: &[u64]) -> u64 {
    let mut sums = [0u64; 4];
    let mut quads = words.chunks_exact(4);
    for q in &mut quads {
        for (s, w) in sums.iter_mut().zip(q) {
            *s += w.count_ones() as u64;
        }
    }
    let rest: u64 = quads.remainder().iter().map(|w| w.count_ones() as u64).sum();
    sums.iter().sum::<u64>() + rest
}

/// [`count_ones_portable`] compiled with POPCNT.
///
/// # Safety
/// The CPU must have POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn count_ones_popcnt(words: &[u64]) -> u64 {
    count_ones_portable(words)
}

/// A set of field ids (0..=255): the fields that have some property, such
/// as phrase filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct FieldSet([u64; 4]);

impl FieldSet {
    /// The empty set.
    pub const EMPTY: FieldSet = FieldSet([0; 4]);

    /// The set of `ids`.
    pub fn of(ids: impl IntoIterator<Item = u8>) -> FieldSet {
        let mut s = FieldSet::EMPTY;
        for id in ids {
            s.insert(id);
        }
        s
    }

    /// Adds field id `id`.
    pub fn insert(&mut self, id: u8) {
        self.0[id as usize / 64] |= 1 << (id % 64);
    }

    /// True if field id `id` is in the set.
    #[inline]
    pub fn contains(&self, id: u8) -> bool {
        self.0[id as usize / 64] & (1 << (id % 64)) != 0
    }

    /// True when no field is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable, dispatched and POPCNT counts equal the bits' count
    /// over every length (remainders of the four sums included).
    #[test]
    fn both_counts_agree_at_every_length() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let words: Vec<u64> = (0..300).map(|i| if i % 7 == 0 { u64::MAX } else { rng.random() }).collect();
        for n in 0..words.len() {
            let w = &words[..n];
            let expected: u64 = w.iter().map(|x| x.count_ones() as u64).sum();
            assert_eq!(count_ones_portable(w), expected, "{n} words");
            assert_eq!(count_ones(w), expected, "{n} words");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("popcnt") {
                // SAFETY: POPCNT is present (checked).
                assert_eq!(unsafe { count_ones_popcnt(w) }, expected, "{n} words");
            }
        }
    }

    /// `word_at` at every offset, aligned or not, equals the members read
    /// one by one, and the set's end reads as absent.
    #[test]
    fn word_at_reads_64_members_from_any_offset() {
        let mut s = BitSet::new(300);
        for d in [0, 1, 63, 64, 65, 127, 128, 200, 255, 256, 299] {
            s.insert(d);
        }
        for from in 0..320 {
            let want = (0..64).fold(0u64, |w, i| w | (u64::from(s.contains(from + i)) << i));
            assert_eq!(s.word_at(from), want, "from {from}");
        }
    }
}
