//! How one term's postings are laid out on storage, and how they are read.
//!
//! The grouped layout (DESIGN §0) keeps everything a query reads for a term
//! in one contiguous region, in read order:
//!
//! ```text
//! header  : term impacts (Pareto pairs of freq and norm, for the term's max score)
//! skip    : one entry per 128-doc block: last doc, block bytes, position and
//!           offset stream coordinates, block impacts (block-max scores)
//! blocks  : per block, doc-id deltas then frequencies (bit-packed FOR; the
//!           last partial block in VByte)
//! positions: per-doc delta-coded positions, bit-packed blocks of 128
//! offsets : per position (start - previous end, length), blocks of 128
//! ```
//!
//! The header, skip table and doc/freq blocks form the term's *prefetch
//! zone*, whose size the term dictionary records. Regions that fit in a 4 KiB
//! page are aligned so they never straddle two.

pub mod cursor;
pub mod impacts;
pub mod norms;
pub mod writer;

pub use cursor::TermCursor;
pub use impacts::{Impact, Impacts};
pub use writer::{TermPostings, TermWriter};

#[cfg(test)]
mod tests;
