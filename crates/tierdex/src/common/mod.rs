//! What every layer shares: document numbers and sets of them.

mod bitset;

pub use bitset::{BitSet, FieldSet};

/// A document number inside one segment (or, in results, inside the whole
/// index: segment base + local number).
pub type DocId = u32;

/// Sentinel returned by cursors once they are exhausted.
pub const TERMINATED: DocId = u32::MAX;

/// Asks the CPU to fetch the cache line of `p` (a hint: nothing happens on
/// targets without the instruction).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the
    // address; `sse` is part of the x86_64 baseline. Exercised by every
    // indexing test (e.g. `segment_writer::tests`) and scoring test.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
