//! Term interning for the in-memory segment: an open-addressing hash table
//! whose 32-byte slots hold the hash and, for keys up to 22 bytes (nearly
//! all words), the key itself, so a lookup touches one cache line and never
//! chases a pointer. Longer keys live in an arena.

use xxhash_rust::xxh3::xxh3_64;

const INLINE: usize = 22;
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    hash: u32,
    id: u32,
    len: u16,
    /// The key if `len <= INLINE`, else its arena offset (first 8 bytes).
    bytes: [u8; INLINE],
}

const VACANT: Slot = Slot {
    hash: 0,
    id: EMPTY,
    len: 0,
    bytes: [0; INLINE],
};

/// Maps term keys to dense ids `0, 1, 2, ...` in first-seen order.
pub struct TermTable {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
    arena: Vec<u8>,
}

impl Default for TermTable {
    fn default() -> Self {
        Self::new()
    }
}

impl TermTable {
    /// An empty table.
    pub fn new() -> Self {
        TermTable {
            slots: vec![VACANT; 1024],
            mask: 1023,
            len: 0,
            arena: Vec::new(),
        }
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no key was added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>() + self.arena.capacity()
    }

    /// The id of `key`, adding it with the next id when new.
    #[inline]
    pub fn intern(&mut self, key: &[u8]) -> u32 {
        self.intern_hashed(key, Self::hash(key))
    }

    /// The hash of `key` that [`TermTable::intern_hashed`] and
    /// [`TermTable::prefetch`] take.
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        xxh3_64(key)
    }

    /// Fetches into the cache the slot where a key of `hash` is looked up
    /// first.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        crate::common::prefetch(&self.slots[hash as usize & self.mask]);
    }

    /// [`TermTable::intern`] of `key`, whose [`TermTable::hash`] is `hash`.
    #[inline]
    pub fn intern_hashed(&mut self, key: &[u8], hash: u64) -> u32 {
        let h32 = (hash >> 32) as u32;
        let mut i = hash as usize & self.mask;
        loop {
            let slot = &self.slots[i];
            if slot.id == EMPTY {
                break;
            }
            if slot.hash == h32 && slot.len as usize == key.len() && self.holds(slot, key) {
                return slot.id;
            }
            i = (i + 1) & self.mask;
        }
        let id = self.len as u32;
        let mut slot = Slot {
            hash: h32,
            id,
            len: key.len().min(u16::MAX as usize) as u16,
            bytes: [0; INLINE],
        };
        if key.len() <= INLINE {
            slot.bytes[..key.len()].copy_from_slice(key);
        } else {
            slot.bytes[..8].copy_from_slice(&(self.arena.len() as u64).to_le_bytes());
            self.arena.extend_from_slice(key);
        }
        self.slots[i] = slot;
        self.len += 1;
        if self.len * 2 > self.slots.len() {
            self.grow();
        }
        id
    }

    /// Whether `slot`, of `key`'s length, holds `key`: an inline key is
    /// compared as up to three overlapping words, not by a call to
    /// `memcmp` (one per token).
    #[inline]
    fn holds(&self, slot: &Slot, key: &[u8]) -> bool {
        let n = key.len();
        if n > INLINE {
            return self.key_of(slot) == key;
        }
        let b = &slot.bytes;
        let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
        let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
        match n {
            // [0, 8), [n - 8, n) and, past 16 bytes, [8, 16) cover the key.
            8.. => {
                word(key, 0) == word(b, 0)
                    && word(key, n - 8) == word(b, n - 8)
                    && (n <= 16 || word(key, 8) == word(b, 8))
            }
            4.. => half(key, 0) == half(b, 0) && half(key, n - 4) == half(b, n - 4),
            _ => key.iter().zip(b).all(|(x, y)| x == y),
        }
    }

    #[inline]
    fn key_of<'a>(&'a self, slot: &'a Slot) -> &'a [u8] {
        let len = slot.len as usize;
        if len <= INLINE {
            &slot.bytes[..len]
        } else {
            let off = u64::from_le_bytes(slot.bytes[..8].try_into().unwrap()) as usize;
            &self.arena[off..off + len]
        }
    }

    fn grow(&mut self) {
        let bigger = vec![VACANT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|s| s.id != EMPTY) {
            let key = if slot.len as usize <= INLINE {
                xxh3_64(&slot.bytes[..slot.len as usize])
            } else {
                let off = u64::from_le_bytes(slot.bytes[..8].try_into().unwrap()) as usize;
                xxh3_64(&self.arena[off..off + slot.len as usize])
            };
            let mut i = key as usize & self.mask;
            while self.slots[i].id != EMPTY {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = slot;
        }
    }

    /// Every (key, id), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.id != EMPTY)
            .map(move |s| (self.key_of(s), s.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// A slot holds its own key and no key of that length differing in
        /// any one byte (hash collisions are too rare for the map test to
        /// reach every byte of the comparison).
        #[test]
        fn a_slot_holds_its_key_only(key in proptest::collection::vec(any::<u8>(), 1..30), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut t = TermTable::new();
            let id = t.intern(&key);
            let slot = *t.slots.iter().find(|s| s.id == id).unwrap();
            prop_assert!(t.holds(&slot, &key));
            let mut other = key.clone();
            other[at.index(key.len())] ^= flip;
            prop_assert!(!t.holds(&slot, &other));
        }

        #[test]
        fn behaves_like_a_map(keys in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..40), 0..3000)) {
            let mut t = TermTable::new();
            let mut m: HashMap<Vec<u8>, u32> = HashMap::new();
            for k in &keys {
                let next = m.len() as u32;
                let want = *m.entry(k.clone()).or_insert(next);
                prop_assert_eq!(t.intern(k), want);
            }
            prop_assert_eq!(t.len(), m.len());
            let got: HashMap<Vec<u8>, u32> = t.entries().map(|(k, v)| (k.to_vec(), v)).collect();
            prop_assert_eq!(got, m);
        }
    }
}
