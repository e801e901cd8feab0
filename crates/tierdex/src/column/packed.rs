//! Bit-packed arrays of unsigned integers of one width (0 to 64 bits):
//! value `i` occupies bits `i * width .. (i + 1) * width` of a
//! little-endian bit stream, so any value is found without reading the
//! others, and a run of values is a run of bytes.

/// Bytes of padding after an array, so that every value can be read as one
/// unaligned 16-byte little-endian word.
pub const PAD: usize = 16;

/// Bits needed to hold `max`.
#[inline]
pub fn bits_for(max: u64) -> u8 {
    (64 - max.leading_zeros()) as u8
}

/// Bytes of an array of `n` values of `bits` bits, padding included.
#[inline]
pub fn array_len(n: u64, bits: u8) -> u64 {
    if bits == 0 {
        0
    } else {
        (n * bits as u64).div_ceil(8) + PAD as u64
    }
}

/// Byte range (relative to the array's start) holding value `i`.
#[inline]
pub fn value_range(i: u64, bits: u8) -> std::ops::Range<usize> {
    let start = (i * bits as u64 / 8) as usize;
    start..start + PAD
}

/// Value `i` from `word`, the [`PAD`] bytes at `value_range(i, bits).start`.
#[inline]
pub fn decode(word: &[u8], i: u64, bits: u8) -> u64 {
    if bits == 0 {
        return 0;
    }
    let w = u128::from_le_bytes(word[..16].try_into().expect("16 bytes"));
    let shift = (i * bits as u64 % 8) as u32;
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    ((w >> shift) as u64) & mask
}

/// Value `i` of an array held whole in `bytes`.
#[cfg(test)]
#[inline]
pub fn get(bytes: &[u8], i: u64, bits: u8) -> u64 {
    if bits == 0 {
        return 0;
    }
    decode(&bytes[value_range(i, bits)], i, bits)
}

/// Appends `values`, packed at `bits` bits each (every value must fit),
/// and the padding, to `out`.
pub fn write(values: impl IntoIterator<Item = u64>, bits: u8, out: &mut Vec<u8>) {
    if bits == 0 {
        return;
    }
    let mut acc: u128 = 0;
    let mut fill: u32 = 0;
    for v in values {
        debug_assert!(bits == 64 || v >> bits == 0, "{v} does not fit in {bits} bits");
        acc |= (v as u128) << fill;
        fill += bits as u32;
        while fill >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            fill -= 8;
        }
    }
    if fill > 0 {
        out.push(acc as u8);
    }
    out.extend_from_slice(&[0; PAD]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_round_trips() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        for bits in 0..=64u8 {
            let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            let values: Vec<u64> = (0..301)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed & mask
                })
                .collect();
            let mut out = vec![0xAB; 3];
            write(values.iter().copied(), bits, &mut out);
            let bytes = &out[3..];
            assert_eq!(bytes.len() as u64, array_len(values.len() as u64, bits), "{bits}");
            for (i, &v) in values.iter().enumerate() {
                assert_eq!(get(bytes, i as u64, bits), v, "bits {bits} value {i}");
            }
        }
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(1), 1);
        assert_eq!(bits_for(255), 8);
        assert_eq!(bits_for(u64::MAX), 64);
    }
}
