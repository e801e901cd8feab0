//! How one term's postings are laid out on storage, and how they are read.
//!
//! Two index-time choices, independent of each other and of the storage
//! tier: the [`Layout`] (grouped or split) and the [`Codec`] (compressed or
//! direct). The description below is the grouped layout; the split layout
//! writes the same three sections into three files.
//!
//! The grouped layout (DESIGN §0) keeps everything a query reads for a term
//! in one contiguous region, in read order:
//!
//! ```text
//! header  : term impacts (Pareto pairs of freq and norm, for the term's max score)
//! skip    : one entry per 128-doc block: last doc, block bytes, position and
//!           offset stream coordinates, filter group offsets (when the term
//!           has filters), block impacts (block-max scores)
//! blocks  : per block, doc-id deltas then frequencies (bit-packed FOR; the
//!           last partial block in VByte)
//! positions: per-doc delta-coded positions, bit-packed blocks of 128
//! offsets : per position (start - previous end, length), blocks of 128
//! after   : phrase filters, one group per block (crate::bloom), optional
//! before  : likewise
//! ```
//!
//! The header, skip table and doc/freq blocks form the term's *prefetch
//! zone*, whose size the term dictionary records. Regions that fit in a 4 KiB
//! page are aligned so they never straddle two. The filters come last so
//! that queries which do not test them read the same pages as without them
//! wherever a region spans pages; the split layout keeps them in a file of
//! their own (`.blm`).

pub mod chain;
pub mod cursor;
pub mod impacts;
pub mod norms;
pub mod postings;
pub mod writer;

pub use cursor::TermCursor;
pub use impacts::{Impact, Impacts};
pub use postings::{PostingsFiles, PostingsWriter};
pub use writer::{TermPostings, TermWriter};

use serde::{Deserialize, Serialize};

use crate::bloom::{BloomParams, FilterShape};

/// How an index's postings are encoded: the index-time choices, recorded in
/// the manifest and shared by all of its segments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Format {
    /// Where a term's sections go.
    pub layout: Layout,
    /// How postings integers are stored.
    pub codec: Codec,
    /// Phrase Bloom filters of the body field's terms (`None`: none).
    pub bloom: Option<BloomParams>,
    /// Grouped: each term's document frequency is kept in its dictionary
    /// value too, so query planning and single-term counts read nothing.
    pub dict_doc_freq: bool,
}

impl Default for Format {
    /// Grouped, compressed, with phrase filters of the default size.
    fn default() -> Self {
        Format {
            layout: Layout::default(),
            codec: Codec::default(),
            bloom: Some(BloomParams::default()),
            dict_doc_freq: true,
        }
    }
}

impl Format {
    /// `layout` and `codec` without phrase filters.
    pub fn plain(layout: Layout, codec: Codec) -> Self {
        Format {
            layout,
            codec,
            bloom: None,
            dict_doc_freq: true,
        }
    }

    /// The filter shape, checked (`None` without filters).
    pub fn bloom_shape(&self) -> crate::Result<Option<FilterShape>> {
        self.bloom.map(|p| p.shape()).transpose()
    }
}

/// Where a term's sections live (chosen at index time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One region per term, in read order, its metadata first: the term
    /// dictionary (an FST in memory) points straight at it and holds its
    /// document frequency, so a small term costs one page. Regions are
    /// ordered by term, then field ([`Layout::term_order`]).
    #[default]
    Grouped,
    /// Separate streams as in Lucene: a term-info table, then doc ids and
    /// frequencies (`.doc`), positions (`.pos`) and offsets (`.pay`).
    Split,
}

/// How postings integers are stored (chosen at index time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Bit-packed frame-of-reference blocks of 128 (SIMD), VByte tails.
    #[default]
    Compressed,
    /// Raw little-endian `u32` arrays: doc ids (absolute), frequencies,
    /// position and offset deltas. No decoding; about 3-4x the bytes.
    Direct,
}

impl Layout {
    /// The order in which a segment's terms are written (term keys are the
    /// field id byte, then the term). Grouped: by term, then field, so the
    /// regions of one word in every field sit side by side and a query on
    /// a bare word (title and body) reads them together. Split: by key
    /// (field, then term), each field's terms apart, as in Lucene.
    pub fn term_order(self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        match self {
            Layout::Grouped => {
                let (ra, rb) = (a.get(1..).unwrap_or(&[]), b.get(1..).unwrap_or(&[]));
                ra.cmp(rb).then_with(|| a.first().cmp(&b.first()))
            }
            Layout::Split => a.cmp(b),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::Grouped => "grouped",
            Layout::Split => "split",
        })
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Codec::Compressed => "compressed",
            Codec::Direct => "direct",
        })
    }
}

impl std::str::FromStr for Layout {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Layout> {
        match s {
            "grouped" => Ok(Layout::Grouped),
            "split" => Ok(Layout::Split),
            _ => Err(crate::Error::InvalidArgument(format!(
                "unknown layout `{s}` (grouped, split)"
            ))),
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Codec> {
        match s {
            "compressed" => Ok(Codec::Compressed),
            "direct" => Ok(Codec::Direct),
            _ => Err(crate::Error::InvalidArgument(format!(
                "unknown codec `{s}` (compressed, direct)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
