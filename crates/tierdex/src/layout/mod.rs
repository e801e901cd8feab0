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
//!           has filters), block impacts (block-max scores), delta-coded;
//!           then, for terms of more than 32 blocks (format 4), a second
//!           level of fixed-size records, one per further span of 32 blocks
//!           (where its first entry starts, the absolute values its deltas
//!           apply to), so a seek far ahead jumps over whole spans
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
pub mod chained;
pub mod cursor;
pub mod impacts;
pub mod norms;
pub mod postings;
pub mod source;
pub mod writer;

pub use crate::termdict::{Layout, RegionInfo};
pub use cursor::TermCursor;
pub use impacts::{Impact, Impacts};
pub use postings::{PostingsFiles, PostingsPart, PostingsWriter};
pub use source::PostingsSource;
pub use writer::{TermPostings, TermWriter};

use serde::{Deserialize, Serialize};

use crate::bloom::{BloomParams, FilterShape};
use crate::common::FieldSet;
use crate::schema::{Field, Schema};

/// How an index's postings are encoded: the index-time choices, recorded in
/// the manifest and shared by all of its segments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Format {
    /// Where a term's sections go.
    pub layout: Layout,
    /// How postings integers are stored.
    pub codec: Codec,
    /// Phrase Bloom filters (`None`: none).
    pub bloom: Option<BloomParams>,
    /// The fields whose terms have phrase filters (when `bloom` is set).
    pub filter_fields: FieldSet,
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
            filter_fields: FieldSet::of([Field::BODY.id()]),
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
            filter_fields: FieldSet::of([Field::BODY.id()]),
            dict_doc_freq: true,
        }
    }

    /// The format with the phrase filters `schema` asks for.
    pub fn with_schema(mut self, schema: &Schema) -> Format {
        self.filter_fields = FieldSet::of(schema.fields().filter(|&f| schema.phrase_filters(f)).map(Field::id));
        self
    }

    /// Whether the term with dictionary key `key` has phrase filters.
    #[inline]
    pub fn filtered_term(&self, key: &[u8]) -> bool {
        self.bloom.is_some() && crate::bloom::filtered_term(&self.filter_fields, key)
    }

    /// The filter shape, checked (`None` without filters).
    pub fn bloom_shape(&self) -> crate::error::Result<Option<FilterShape>> {
        self.bloom.map(|p| p.shape()).transpose()
    }
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

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Codec::Compressed => "compressed",
            Codec::Direct => "direct",
        })
    }
}

impl std::str::FromStr for Codec {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Codec> {
        match s {
            "compressed" => Ok(Codec::Compressed),
            "direct" => Ok(Codec::Direct),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "unknown codec `{s}` (compressed, direct)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
