//! The `direct` tier: O_DIRECT reads batched through io_uring into the
//! index's bounded buffer pool ([`crate::storage::direct`]); nothing else
//! cached.

use std::ops::Range;

use super::FileSource;
use crate::error::Result;
use crate::storage::direct::DirectFile;

impl FileSource for DirectFile {
    fn resident(&self) -> Option<&[u8]> {
        None
    }

    fn load(&self, range: Range<u64>, buf: &mut Vec<u8>) -> Result<(u64, u64)> {
        let c = self.read_into(range, buf)?;
        Ok((c.bytes_read, c.ios))
    }

    fn prefetch(&self, ranges: &[Range<u64>]) -> Result<(u64, u64)> {
        let c = DirectFile::prefetch(self, ranges)?;
        Ok((c.bytes_read, c.ios))
    }
}
