//! Frame-of-reference bit packing of 128-integer blocks (SIMD).
//!
//! A block is one header byte (the bit width) followed by `16 * bits` bytes.

use bitpacking::{BitPacker, BitPacker4x};

/// Integers per packed block.
pub const BLOCK: usize = 128;

/// Bytes of a packed block (header included) of the given bit width.
#[inline]
pub fn packed_len(bits: u8) -> usize {
    1 + BLOCK * bits as usize / 8
}

/// Appends a packed block of `values`.
pub fn pack_block(values: &[u32; BLOCK], out: &mut Vec<u8>) {
    let packer = BitPacker4x::new();
    let bits = packer.num_bits(values);
    write_packed(out, bits, |dst| packer.compress(values, dst, bits));
}

/// Appends a packed block of strictly increasing `values`, delta-coded from
/// `previous` (the last value of the preceding block, `None` for the first).
pub fn pack_sorted_block(previous: Option<u32>, values: &[u32; BLOCK], out: &mut Vec<u8>) {
    let packer = BitPacker4x::new();
    let bits = packer.num_bits_strictly_sorted(previous, values);
    write_packed(out, bits, |dst| {
        packer.compress_strictly_sorted(previous, values, dst, bits)
    });
}

fn write_packed(out: &mut Vec<u8>, bits: u8, compress: impl FnOnce(&mut [u8]) -> usize) {
    out.push(bits);
    let start = out.len();
    out.resize(start + packed_len(bits) - 1, 0);
    let written = compress(&mut out[start..]);
    debug_assert_eq!(written, packed_len(bits) - 1);
}

/// Unpacks the block at the start of `data` into `out`; returns the bytes
/// consumed, or `None` if `data` is not a valid block.
#[inline]
pub fn unpack_block(data: &[u8], out: &mut [u32; BLOCK]) -> Option<usize> {
    let (bits, body) = block_body(data)?;
    BitPacker4x::new().decompress(body, out, bits);
    Some(packed_len(bits))
}

/// Unpacks a block written by [`pack_sorted_block`] with the same `previous`.
#[inline]
pub fn unpack_sorted_block(previous: Option<u32>, data: &[u8], out: &mut [u32; BLOCK]) -> Option<usize> {
    let (bits, body) = block_body(data)?;
    BitPacker4x::new().decompress_strictly_sorted(previous, body, out, bits);
    Some(packed_len(bits))
}

#[inline]
fn block_body(data: &[u8]) -> Option<(u8, &[u8])> {
    let bits = *data.first()?;
    if bits > 32 {
        return None;
    }
    let body = data.get(1..packed_len(bits))?;
    Some((bits, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn roundtrip(values in proptest::collection::vec(0u32..1 << 20, BLOCK)) {
            let values: [u32; BLOCK] = values.try_into().unwrap();
            let mut buf = vec![9];
            pack_block(&values, &mut buf);
            let mut out = [0; BLOCK];
            prop_assert_eq!(unpack_block(&buf[1..], &mut out), Some(buf.len() - 1));
            prop_assert_eq!(out, values);
        }

        #[test]
        fn sorted_roundtrip(gaps in proptest::collection::vec(1u32..5000, BLOCK), start in proptest::option::of(0u32..1000)) {
            let mut values = [0u32; BLOCK];
            let mut v = start.unwrap_or(0);
            for (i, g) in gaps.iter().enumerate() {
                v += if i == 0 && start.is_none() { g - 1 } else { *g };
                values[i] = v;
            }
            let mut buf = Vec::new();
            pack_sorted_block(start, &values, &mut buf);
            let mut out = [0; BLOCK];
            prop_assert_eq!(unpack_sorted_block(start, &buf, &mut out), Some(buf.len()));
            prop_assert_eq!(out, values);
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut out = [0; BLOCK];
            let _ = unpack_block(&data, &mut out);
            let _ = unpack_sorted_block(Some(3), &data, &mut out);
        }
    }
}
