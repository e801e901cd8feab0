//! Integer codecs: VByte for small and irregular streams, bit-packed
//! frame-of-reference blocks of 128 (SIMD, via the `bitpacking` crate) for
//! doc-id deltas, frequencies, positions and offsets.
//!
//! Decoders never panic on damaged input: they return `None` and the caller
//! reports the file as corrupt.

mod bitpacked;
mod vbyte;

pub use bitpacked::{
    dense_block, dense_ids, pack_block, pack_sorted_block, packed_len, unpack_block, unpack_sorted_block, Dense, BLOCK, DENSE,
    DENSE_SPAN,
};
pub use vbyte::{read_u32, read_u64, write_u32, write_u64};
