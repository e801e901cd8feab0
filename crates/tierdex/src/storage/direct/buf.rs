//! Page-aligned, zero-initialised memory for frames and scratch space.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use super::PAGE;

/// A heap region of whole 4 KiB pages, aligned to 4096 bytes, as O_DIRECT needs.
///
/// It hands out raw pointers only: every access to the bytes goes through an
/// `unsafe` block of its owner, which knows which parts the kernel may be
/// writing at that moment.
pub(super) struct AlignedBuf {
    ptr: NonNull<u8>,
    pages: usize,
}

// SAFETY: `AlignedBuf` owns plain bytes (no thread-affine state) and exposes them
// only as raw pointers; reading or writing through those is `unsafe` at the use
// site, where the owner's protocol (pins and frame states in the pool, or a
// buffer private to one call) rules out data races.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above: `&AlignedBuf` gives out nothing but raw pointers.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `pages` zeroed pages, or `None` if the allocation failed or its size overflows.
    pub(super) fn new(pages: usize) -> Option<AlignedBuf> {
        if pages == 0 {
            return Some(AlignedBuf {
                ptr: NonNull::dangling(),
                pages: 0,
            });
        }
        let layout = Layout::from_size_align(pages.checked_mul(PAGE)?, PAGE).ok()?;
        // SAFETY: `layout` has a non-zero size (pages > 0) and a valid power-of-two
        // alignment, as `alloc_zeroed` requires; a null result is handled below.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| AlignedBuf { ptr, pages })
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

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.pages > 0 {
            // SAFETY: the pointer came from `alloc_zeroed` with exactly this layout
            // (the same size and alignment computation succeeded in `new`), and it
            // is freed once. No I/O can still target it: every read is reaped
            // before the call that issued it returns, and calls borrow the owner.
            unsafe {
                dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align_unchecked(self.pages * PAGE, PAGE),
                )
            }
        }
    }
}
