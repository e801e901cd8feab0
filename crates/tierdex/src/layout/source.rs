//! Where a segment's postings come from, behind one trait (as Lucene's
//! `FieldsProducer`): a segment's postings files ([`PostingsFiles`]), or the
//! chain file of the in-place strategies ([`ChainPostings`]). Readers and
//! query code see only [`PostingsSource`] and [`TermCursor`].
//!
//! [`PostingsFiles`]: crate::layout::PostingsFiles
//! [`ChainPostings`]: crate::layout::chained::ChainPostings

use std::any::Any;
use std::ops::Range;

use crate::bloom::FilterShape;
use crate::error::Result;
use crate::layout::TermCursor;
use crate::termdict::TermInfo;

/// A segment's postings: its terms, their statistics and cursors over them.
pub trait PostingsSource: Send + Sync {
    /// Looks a term key up (see [`crate::termdict::term_key`]).
    fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>>;

    /// The term's document frequency (0: absent), reading nothing where the
    /// dictionary holds it.
    fn doc_freq(&self, key: &[u8]) -> Result<u64>;

    /// A cursor over the term `info` describes.
    fn cursor<'a>(&'a self, info: &TermInfo) -> Result<TermCursor<'a>>;

    /// Whether cursors may keep prefetching a term's zone ahead of their
    /// blocks (one contiguous zone per term).
    fn prefetches_zones(&self) -> bool;

    /// Calls `f` with every term key in `[lo, hi)` and its document
    /// frequency and total term frequency, in key order.
    fn terms_between(&self, lo: &[u8], hi: &[u8], f: &mut dyn FnMut(&[u8], u64, u64)) -> Result<()>;

    /// The shape of the phrase filters (`None`: there are none).
    fn bloom(&self) -> Option<FilterShape>;

    /// Prefetches term zones (byte ranges of the postings).
    fn prefetch(&self, ranges: &[Range<usize>]) -> Result<()>;

    /// Verifies every byte of the postings against its checksums.
    fn verify_all(&self) -> Result<()>;

    /// The source as [`Any`], for the code that works on one kind (merges
    /// read postings files, the in-place strategy grows its chain).
    fn as_any(&self) -> &dyn Any;
}
