//! What every layer shares: document numbers and sets of them.

mod bitset;

pub use bitset::{BitSet, FieldSet};

/// A document number inside one segment (or, in results, inside the whole
/// index: segment base + local number).
pub type DocId = u32;

/// Sentinel returned by cursors once they are exhausted.
pub const TERMINATED: DocId = u32::MAX;
