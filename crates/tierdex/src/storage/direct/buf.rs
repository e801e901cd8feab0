//! Page-aligned, zero-initialised memory for frames and scratch space.
//!
//! The memory is an anonymous private mapping: page-aligned as O_DIRECT
//! needs, and committed lazily, so a large pool costs memory only for the
//! frames that have held a page (an aligned heap allocation would be zeroed,
//! and so touched, in full at startup).

use std::ptr::NonNull;

use memmap2::MmapMut;

use super::PAGE;

/// A region of whole 4 KiB pages, aligned to 4096 bytes, as O_DIRECT needs.
///
/// It hands out raw pointers only: every access to the bytes goes through an
/// `unsafe` block of its owner, which knows which parts the kernel may be
/// writing at that moment.
pub(super) struct AlignedBuf {
    ptr: NonNull<u8>,
    pages: usize,
    /// Owns the mapping `ptr` points into (`None` for an empty buffer); unmapped on drop.
    _map: Option<MmapMut>,
}

// SAFETY: `AlignedBuf` owns plain bytes (no thread-affine state) and exposes them
// only as raw pointers; reading or writing through those is `unsafe` at the use
// site, where the owner's protocol (pins and frame states in the pool, or a
// buffer private to one call) rules out data races.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above: `&AlignedBuf` gives out nothing but raw pointers.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `pages` zeroed pages, or `None` if the mapping failed or its size overflows.
    pub(super) fn new(pages: usize) -> Option<AlignedBuf> {
        if pages == 0 {
            return Some(AlignedBuf {
                ptr: NonNull::dangling(),
                pages: 0,
                _map: None,
            });
        }
        let mut map = MmapMut::map_anon(pages.checked_mul(PAGE)?).ok()?;
        // Anonymous mappings start on a page boundary; `PAGE` is the page size.
        let ptr = NonNull::new(map.as_mut_ptr())?;
        debug_assert_eq!(ptr.as_ptr() as usize % PAGE, 0);
        Some(AlignedBuf {
            ptr,
            pages,
            _map: Some(map),
        })
    }

    /// Number of pages.
    pub(super) fn pages(&self) -> usize {
        self.pages
    }

    /// Pointer to the first byte of page `i` (`i < pages`).
    #[inline]
    pub(super) fn page_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.pages);
        // SAFETY: `i < pages`, so the offset `i * PAGE` stays inside the allocation
        // (it was checked not to overflow when the buffer was made).
        unsafe { self.ptr.as_ptr().add(i * PAGE) }
    }
}
