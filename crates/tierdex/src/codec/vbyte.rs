//! VByte (LEB128) variable-length integers.

/// Appends `v` to `out` as VByte.
#[inline]
pub fn write_u32(out: &mut Vec<u8>, v: u32) {
    write_u64(out, v as u64)
}

/// Appends `v` to `out` as VByte.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a VByte u32 at `*pos`, advancing it; `None` if truncated or too long.
#[inline]
pub fn read_u32(data: &[u8], pos: &mut usize) -> Option<u32> {
    let b = *data.get(*pos)?;
    if b < 0x80 {
        *pos += 1;
        return Some(b as u32);
    }
    read_u64(data, pos).and_then(|v| u32::try_from(v).ok())
}

/// Reads a VByte u64 at `*pos`, advancing it; `None` if truncated or too long.
#[inline]
pub fn read_u64(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *data.get(*pos)?;
        *pos += 1;
        if shift > 63 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn roundtrip(values in proptest::collection::vec(any::<u64>(), 0..100)) {
            let mut buf = Vec::new();
            for &v in &values { write_u64(&mut buf, v); }
            let mut pos = 0;
            for &v in &values { prop_assert_eq!(read_u64(&buf, &mut pos), Some(v)); }
            prop_assert_eq!(pos, buf.len());
            prop_assert_eq!(read_u64(&buf, &mut pos), None);
        }

        #[test]
        fn never_panics_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut pos = 0;
            while read_u32(&data, &mut pos).is_some() {}
        }
    }

    #[test]
    fn u32_rejects_overflow() {
        let mut buf = Vec::new();
        write_u64(&mut buf, u32::MAX as u64 + 1);
        assert_eq!(read_u32(&buf, &mut 0), None);
    }
}
