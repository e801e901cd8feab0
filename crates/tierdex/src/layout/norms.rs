//! Field-length norms: one byte per document and field.
//!
//! Lengths are quantised like Lucene's `SmallFloat.intToByte4` (a float with
//! a 4-bit mantissa; 0..=23 exact), so BM25 scores agree with Lucene's.

/// Values below this are stored exactly.
const FREE_VALUES: u32 = 24;

fn long_to_int4(i: u64) -> u32 {
    let bits = 64 - i.leading_zeros();
    if bits < 4 {
        i as u32
    } else {
        let shift = bits - 4;
        let mantissa = ((i >> shift) & 0x07) as u32;
        mantissa | ((shift + 1) << 3)
    }
}

fn int4_to_long(i: u32) -> u64 {
    let mantissa = (i & 0x07) as u64;
    let shift = (i >> 3) as i32 - 1;
    if shift < 0 {
        mantissa
    } else {
        (mantissa | 0x08) << shift
    }
}

/// Encodes a field length (number of tokens) into one byte; larger lengths
/// round down to the nearest representable value.
pub fn encode(length: u32) -> u8 {
    let length = length.min(i32::MAX as u32);
    if length < FREE_VALUES {
        length as u8
    } else {
        (FREE_VALUES + long_to_int4((length - FREE_VALUES) as u64)) as u8
    }
}

/// Decodes a norm byte into the length it stands for.
pub fn decode(norm: u8) -> u32 {
    let n = norm as u32;
    if n < FREE_VALUES {
        n
    } else {
        (FREE_VALUES as u64 + int4_to_long(n - FREE_VALUES)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_lengths_are_exact() {
        for l in 0..40 {
            if l < 24 {
                assert_eq!(decode(encode(l)), l);
            }
        }
        assert_eq!(encode(u32::MAX), 255);
    }

    #[test]
    fn monotone_and_rounding_down() {
        let mut prev = 0;
        for l in 0..200_000u32 {
            let e = encode(l);
            assert!(e >= prev);
            assert!(decode(e) <= l);
            prev = e;
        }
        for b in 0..=255u8 {
            assert_eq!(encode(decode(b)), b);
        }
    }
}
