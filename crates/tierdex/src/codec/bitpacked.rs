//! Frame-of-reference bit packing of 128-integer blocks (SIMD).
//!
//! A block is one header byte (the bit width) followed by `16 * bits` bytes.
//! A block of strictly increasing values (document numbers) spanning at
//! most [`DENSE_SPAN`] may instead be a bit set ([`DENSE`] header): counts
//! and bit-set queries then OR its words instead of decoding it.

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

/// Header byte of a dense block: then the span less one (a byte), the first
/// value delta-coded from the previous block's last (a VByte), and the bit
/// set of the span (`span.div_ceil(8)` bytes, bit `i` for `first + i`).
pub const DENSE: u8 = 0x80;

/// Widest span (last value - first + 1) a block is written densely within:
/// two thirds of its values set or more, so it takes at most 31 bytes
/// (256 measured no faster on Wikipedia, and 0.06% smaller postings).
pub const DENSE_SPAN: u32 = 192;

/// A dense block read by [`dense_block`].
#[derive(Debug, Clone, Copy)]
pub struct Dense<'a> {
    /// The first value.
    pub first: u32,
    /// The bit set: bit `i` (LSB first within each byte) for `first + i`.
    pub bits: &'a [u8],
    /// Bytes the block takes.
    pub len: usize,
}

impl Dense<'_> {
    /// The bit set as words (a span is at most 256 bits), bit `i % 64` of
    /// word `i / 64` for `first + i`.
    #[inline]
    pub fn words(&self) -> [u64; 4] {
        let mut bytes = [0u8; 32];
        bytes[..self.bits.len()].copy_from_slice(self.bits);
        let mut words = [0u64; 4];
        for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        words
    }
}

/// Writes the values of a dense block's bit set `words` (bit `i` for
/// `first + i`, [`BLOCK`] of them set) into `out`, in order.
#[inline]
pub fn dense_ids(first: u32, words: &[u64; 4], out: &mut [u32; BLOCK]) {
    let mut n = 0;
    for (k, &w) in words.iter().enumerate() {
        let mut w = w;
        let at = first + 64 * k as u32;
        while w != 0 && n < BLOCK {
            out[n] = at + w.trailing_zeros();
            n += 1;
            w &= w - 1;
        }
    }
}

/// The dense block at the start of `data` (see [`DENSE`]), delta-coded
/// from `previous`; `None` when it is not one or is damaged (its bit set
/// must hold [`BLOCK`] values ending on its last bit).
#[inline]
pub fn dense_block(previous: Option<u32>, data: &[u8]) -> Option<Dense<'_>> {
    if *data.first()? != DENSE {
        return None;
    }
    let span = *data.get(1)? as u32 + 1;
    let mut at = 2;
    let delta = super::read_u32(data, &mut at)?;
    let first = match previous {
        Some(p) => p.checked_add(1)?.checked_add(delta)?,
        None => delta,
    };
    first.checked_add(span - 1)?;
    let bits = data.get(at..at + span.div_ceil(8) as usize)?;
    let ones: u32 = bits.iter().map(|b| b.count_ones()).sum();
    // The span's last bit set, and none past it.
    let last_set = bits.last().is_some_and(|&b| b as u32 >> ((span - 1) % 8) == 1);
    if ones != BLOCK as u32 || !last_set || bits[0] & 1 == 0 {
        return None;
    }
    Some(Dense {
        first,
        bits,
        len: at + bits.len(),
    })
}

/// Appends a block of strictly increasing `values`, delta-coded from
/// `previous` (the last value of the preceding block, `None` for the
/// first): a bit set when they span at most [`DENSE_SPAN`], else packed.
pub fn pack_sorted_block(previous: Option<u32>, values: &[u32; BLOCK], out: &mut Vec<u8>) {
    let (first, last) = (values[0], values[BLOCK - 1]);
    let span = last - first + 1;
    if span <= DENSE_SPAN {
        out.push(DENSE);
        out.push((span - 1) as u8);
        super::write_u32(out, previous.map_or(first, |p| first - p - 1));
        let at = out.len();
        out.resize(at + span.div_ceil(8) as usize, 0);
        for &v in values {
            let i = (v - first) as usize;
            out[at + i / 8] |= 1 << (i % 8);
        }
        return;
    }
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
    if data.first() == Some(&DENSE) {
        let d = dense_block(previous, data)?;
        dense_ids(d.first, &d.words(), out);
        return Some(d.len);
    }
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

    /// Strictly increasing values with these gaps after `start` (from 0,
    /// the first gap less one, without one).
    fn sorted(gaps: &[u32], start: Option<u32>) -> [u32; BLOCK] {
        let mut values = [0u32; BLOCK];
        let mut v = start.unwrap_or(0);
        for (i, g) in gaps.iter().enumerate() {
            v += if i == 0 && start.is_none() { g - 1 } else { *g };
            values[i] = v;
        }
        values
    }

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
            let values = sorted(&gaps, start);
            let mut buf = Vec::new();
            pack_sorted_block(start, &values, &mut buf);
            let mut out = [0; BLOCK];
            prop_assert_eq!(unpack_sorted_block(start, &buf, &mut out), Some(buf.len()));
            prop_assert_eq!(out, values);
        }

        #[test]
        fn dense_roundtrip(gaps in proptest::collection::vec(1u32..3, BLOCK), start in proptest::option::of(0u32..1000)) {
            let values = sorted(&gaps, start);
            let mut buf = Vec::new();
            pack_sorted_block(start, &values, &mut buf);
            let span = values[BLOCK - 1] - values[0] + 1;
            prop_assert_eq!(buf[0] == DENSE, span <= DENSE_SPAN);
            let mut out = [0; BLOCK];
            prop_assert_eq!(unpack_sorted_block(start, &buf, &mut out), Some(buf.len()));
            prop_assert_eq!(out, values);
            if let Some(d) = dense_block(start, &buf) {
                prop_assert_eq!((d.first, d.len), (values[0], buf.len()));
            }
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut out = [0; BLOCK];
            let _ = unpack_block(&data, &mut out);
            let _ = unpack_sorted_block(Some(3), &data, &mut out);
            let mut dense = data.clone();
            if let Some(b) = dense.first_mut() {
                *b = DENSE;
            }
            let _ = unpack_sorted_block(Some(3), &dense, &mut out);
            let _ = unpack_sorted_block(None, &dense, &mut out);
        }
    }
}
