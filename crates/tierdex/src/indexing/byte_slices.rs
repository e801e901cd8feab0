//! An arena of growing byte slices that holds every term's in-memory
//! postings stream while a segment is inverted (the shape of Lucene's
//! byte-block pool). A stream starts in a slice of 5 bytes; when a slice is
//! full, the next one (up to 200 bytes) is cut from the arena and its
//! address written in the 4 bytes after the full one. Rare terms, the vast
//! majority, thus cost a few bytes, common ones grow with little waste, and
//! no stream is ever copied or reallocated; the arena grows by blocks.

/// Bytes of data in a slice of each level; the last level repeats.
const LEVELS: [u32; 10] = [5, 14, 20, 30, 40, 40, 80, 80, 120, 200];
/// Bytes of the link to the next slice, after a slice's data.
const LINK: u32 = 4;
/// Bits of an address within a block.
const BLOCK_BITS: u32 = 16;
const BLOCK: usize = 1 << BLOCK_BITS;
/// Blocks an arena may hold (addresses are `u32`): 4 GiB.
const MAX_BLOCKS: usize = 1 << (32 - BLOCK_BITS);

/// Where a stream is written next: its current slice's next byte and end.
#[derive(Debug, Clone, Copy, Default)]
pub struct SliceCursor {
    pos: u32,
    end: u32,
    level: u8,
}

/// The arena.
#[derive(Default)]
pub struct ByteSlices {
    blocks: Vec<Box<[u8]>>,
    /// Bytes used in the last block.
    used: usize,
}

impl ByteSlices {
    /// An empty arena.
    pub fn new() -> Self {
        ByteSlices::default()
    }

    /// Bytes the arena holds.
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * BLOCK + self.blocks.capacity() * std::mem::size_of::<Box<[u8]>>()
    }

    /// Whether the arena holds 3 of the 4 GiB it can address: the segment
    /// being built must take no more documents (one document cannot fill
    /// the rest).
    pub fn nearly_full(&self) -> bool {
        self.blocks.len() >= MAX_BLOCKS / 4 * 3
    }

    /// Starts a new stream: its first slice. Returns the stream's start (to
    /// read it with [`ByteSlices::reader`]) and the cursor to write it.
    pub fn start(&mut self) -> (u32, SliceCursor) {
        let start = self.alloc(0);
        (
            start,
            SliceCursor {
                pos: start,
                end: start + LEVELS[0],
                level: 0,
            },
        )
    }

    /// Cuts a slice of `level` and returns its address.
    fn alloc(&mut self, level: u8) -> u32 {
        let size = (LEVELS[level as usize] + LINK) as usize;
        if self.blocks.is_empty() || self.used + size > BLOCK {
            assert!(
                self.blocks.len() < MAX_BLOCKS,
                "in-memory postings beyond 4 GiB in one segment"
            );
            self.blocks.push(vec![0u8; BLOCK].into_boxed_slice());
            self.used = 0;
        }
        let addr = (((self.blocks.len() - 1) << BLOCK_BITS) | self.used) as u32;
        self.used += size;
        addr
    }

    /// Fetches into the cache the byte `cursor` writes next.
    #[inline]
    pub fn prefetch(&self, cursor: &SliceCursor) {
        self.prefetch_start(cursor.pos);
    }

    /// Fetches into the cache the bytes at address `start` (a stream's
    /// first ones).
    #[inline]
    pub fn prefetch_start(&self, start: u32) {
        let (block, at) = split(start);
        if let Some(b) = self.blocks.get(block) {
            crate::common::prefetch(b.as_ptr().wrapping_add(at));
        }
    }

    /// Appends `b` to the stream written at `cursor`.
    #[inline]
    pub fn push(&mut self, cursor: &mut SliceCursor, b: u8) {
        if cursor.pos == cursor.end {
            self.next_slice(cursor);
        }
        let (block, at) = split(cursor.pos);
        self.blocks[block][at] = b;
        cursor.pos += 1;
    }

    /// Appends `bytes` to the stream written at `cursor`.
    #[inline]
    pub fn push_bytes(&mut self, cursor: &mut SliceCursor, bytes: &[u8]) {
        if (cursor.end - cursor.pos) as usize >= bytes.len() {
            let (block, at) = split(cursor.pos);
            self.blocks[block][at..at + bytes.len()].copy_from_slice(bytes);
            cursor.pos += bytes.len() as u32;
            return;
        }
        for &b in bytes {
            self.push(cursor, b);
        }
    }

    /// Appends `v` as VByte.
    #[inline(always)]
    pub fn push_u32(&mut self, cursor: &mut SliceCursor, mut v: u32) {
        if cursor.end - cursor.pos >= 5 {
            let (block, mut at) = split(cursor.pos);
            let bytes = &mut self.blocks[block];
            let first = at;
            while v >= 0x80 {
                bytes[at] = (v as u8) | 0x80;
                v >>= 7;
                at += 1;
            }
            bytes[at] = v as u8;
            cursor.pos += (at - first + 1) as u32;
            return;
        }
        while v >= 0x80 {
            self.push(cursor, (v as u8) | 0x80);
            v >>= 7;
        }
        self.push(cursor, v as u8);
    }

    #[cold]
    fn next_slice(&mut self, cursor: &mut SliceCursor) {
        let level = (cursor.level + 1).min(LEVELS.len() as u8 - 1);
        let next = self.alloc(level);
        let (block, at) = split(cursor.end);
        self.blocks[block][at..at + LINK as usize].copy_from_slice(&next.to_le_bytes());
        *cursor = SliceCursor {
            pos: next,
            end: next + LEVELS[level as usize],
            level,
        };
    }

    /// A reader of the stream that starts at `start`. It reads only what
    /// was written: its user knows where the stream ends.
    pub fn reader(&self, start: u32) -> SliceReader<'_> {
        SliceReader {
            slices: self,
            data: self.data(start, start + LEVELS[0]),
            end: start + LEVELS[0],
            level: 0,
        }
    }

    /// The bytes from address `from` to `to` (in one block).
    fn data(&self, from: u32, to: u32) -> &[u8] {
        let (block, at) = split(from);
        &self.blocks[block][at..at + (to - from) as usize]
    }
}

#[inline]
fn split(addr: u32) -> (usize, usize) {
    ((addr >> BLOCK_BITS) as usize, addr as usize & (BLOCK - 1))
}

/// Reads one stream of a [`ByteSlices`] from its start, slice after slice.
pub struct SliceReader<'a> {
    slices: &'a ByteSlices,
    /// What is left of the current slice.
    data: &'a [u8],
    /// The address of the current slice's link, and its level.
    end: u32,
    level: u8,
}

impl SliceReader<'_> {
    /// The next byte (the caller must not read past what was written).
    #[inline]
    pub fn byte(&mut self) -> u8 {
        if self.data.is_empty() {
            self.next_slice();
        }
        let b = self.data[0];
        self.data = &self.data[1..];
        b
    }

    #[cold]
    fn next_slice(&mut self) {
        let next = self.link();
        self.level = (self.level + 1).min(LEVELS.len() as u8 - 1);
        self.end = next + LEVELS[self.level as usize];
        self.data = self.slices.data(next, self.end);
        // The slice after this one is fetched while this one is read. The
        // last slice's link was never written: it reads 0 (blocks start
        // zeroed), a harmless address to fetch.
        let after = self.link();
        let level = (self.level + 1).min(LEVELS.len() as u8 - 1) as usize;
        for line in (0..LEVELS[level] + LINK).step_by(64) {
            self.slices.prefetch_start(after + line);
        }
    }

    /// The address in the current slice's link.
    #[inline]
    fn link(&self) -> u32 {
        let link = self.slices.data(self.end, self.end + LINK);
        u32::from_le_bytes(link.try_into().expect("4 bytes"))
    }

    /// Fills `out` with the next bytes (the caller must not read past what
    /// was written).
    #[inline]
    pub fn bytes(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.data.is_empty() {
                self.next_slice();
            }
            let n = self.data.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            at += n;
        }
    }

    /// Whether it is where `cursor` writes next: at the stream's end.
    #[inline]
    pub fn at(&self, cursor: &SliceCursor) -> bool {
        self.end - self.data.len() as u32 == cursor.pos
    }

    /// The next VByte-coded value; `None` if it runs over 5 bytes.
    #[inline(always)]
    pub fn u32(&mut self) -> Option<u32> {
        // Most values are one byte, and most lie inside the current slice.
        if let Some(&b) = self.data.first() {
            if b < 0x80 {
                self.data = &self.data[1..];
                return Some(u32::from(b));
            }
            if self.data.len() >= 5 {
                return self.u32_in_slice();
            }
        }
        let mut v = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.byte();
            v |= ((b & 0x7f) as u32) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// [`SliceReader::u32`] for a value whose 5 bytes at most lie in the
    /// current slice.
    #[inline]
    fn u32_in_slice(&mut self) -> Option<u32> {
        let d = self.data;
        let mut v = 0u32;
        for (i, &b) in d[..5].iter().enumerate() {
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b < 0x80 {
                self.data = &d[i + 1..];
                return Some(v);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Streams written interleaved read back as written.
        #[test]
        fn interleaved_streams_read_back(ops in proptest::collection::vec((0usize..8, prop_oneof![any::<u32>(), 0u32..128, 0u32..20_000], 0u8..3), 0..4000)) {
            let mut arena = ByteSlices::new();
            let mut streams: Vec<(u32, SliceCursor)> = (0..8).map(|_| arena.start()).collect();
            let mut want: Vec<Vec<(u32, bool)>> = vec![Vec::new(); 8];
            for &(s, v, kind) in &ops {
                match kind {
                    0 => {
                        arena.push(&mut streams[s].1, v as u8);
                        want[s].push((v as u8 as u32, true));
                    }
                    1 => {
                        arena.push_u32(&mut streams[s].1, v);
                        want[s].push((v, false));
                    }
                    _ => {
                        // A run of 0 to 9 bytes, in one call.
                        let run: Vec<u8> = (0..v % 10).map(|i| (v >> 8) as u8 ^ i as u8).collect();
                        arena.push_bytes(&mut streams[s].1, &run);
                        want[s].extend(run.iter().map(|&b| (b as u32, true)));
                    }
                }
            }
            for (s, values) in want.iter().enumerate() {
                let mut r = arena.reader(streams[s].0);
                for &(v, as_byte) in values {
                    let got = if as_byte { r.byte() as u32 } else { r.u32().unwrap() };
                    prop_assert_eq!(got, v);
                }
            }
        }

        /// Runs of bytes read with `bytes` in chunks of any size, across
        /// slices, equal what was pushed, and the reader ends at the end.
        #[test]
        fn bytes_read_in_chunks(n in 0usize..3000, chunks in proptest::collection::vec(1usize..300, 1..40)) {
            let mut arena = ByteSlices::new();
            let (_, mut other) = arena.start();
            let (start, mut cursor) = arena.start();
            for i in 0..n {
                arena.push(&mut cursor, (i * 7) as u8);
                arena.push(&mut other, i as u8);
            }
            let mut r = arena.reader(start);
            let mut got = Vec::new();
            for &c in chunks.iter().cycle() {
                let c = c.min(n - got.len());
                if c == 0 {
                    break;
                }
                let mut buf = vec![0u8; c];
                r.bytes(&mut buf);
                got.extend_from_slice(&buf);
            }
            prop_assert_eq!(got, (0..n).map(|i| (i * 7) as u8).collect::<Vec<_>>());
            prop_assert!(r.at(&cursor));
        }
    }

    /// A reader is `at` the writer's cursor exactly when it has read
    /// everything written, also when the last slice is exactly full (the
    /// next one not cut yet) and right after a new slice starts.
    #[test]
    fn the_reader_knows_the_end_of_the_stream() {
        for n in 0..400usize {
            let mut arena = ByteSlices::new();
            let (start, mut cursor) = arena.start();
            for i in 0..n {
                arena.push(&mut cursor, i as u8);
            }
            let mut r = arena.reader(start);
            for i in 0..n {
                assert!(!r.at(&cursor), "{n} bytes: at the end after {i}");
                assert_eq!(r.byte(), i as u8);
            }
            assert!(r.at(&cursor), "{n} bytes: not at the end");
        }
    }

    #[test]
    fn long_streams_cross_blocks() {
        let mut arena = ByteSlices::new();
        let (a, mut ca) = arena.start();
        let (b, mut cb) = arena.start();
        for i in 0..300_000u32 {
            arena.push_u32(&mut ca, i);
            arena.push_u32(&mut cb, i.wrapping_mul(2_654_435_761));
        }
        assert!(arena.memory_bytes() > 2 * BLOCK);
        let (mut ra, mut rb) = (arena.reader(a), arena.reader(b));
        for i in 0..300_000u32 {
            assert_eq!(ra.u32(), Some(i));
            assert_eq!(rb.u32(), Some(i.wrapping_mul(2_654_435_761)));
        }
    }
}
