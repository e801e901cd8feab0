//! The manifest: which segments make up the index, their statistics and
//! file checksums, and the options every reader must use.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::analysis::AnalyzerConfig;
use crate::bloom::BloomParams;
use crate::error::{Error, Result};
use crate::index::deletes::DeletesMeta;
use crate::index::strategy::Strategy;
pub use crate::layout::chain::PackedRun;
use crate::layout::{Codec, Format, Layout};
use crate::schema::{Field, Schema};
use crate::storage::faults::{self, FaultOp};
use crate::storage::{mode, FileInfo};

/// File name of the manifest inside an index directory.
pub const MANIFEST: &str = "manifest.json";
/// Current on-disk format version (4: term skip tables may have a second
/// level, flagged in each table's length; 5: full document blocks may be
/// bit sets, flagged in their header byte).
pub const FORMAT_VERSION: u32 = 5;

/// Oldest format this build reads: version 3 differs only in having no
/// second skip level, which readers take as absent, and 3 and 4 in having
/// no dense blocks, which readers recognise by their header.
pub const OLDEST_READABLE_FORMAT: u32 = 3;

/// Per-field statistics of a segment (or, summed, of the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FieldStats {
    /// Documents with at least one token in the field.
    pub doc_count: u64,
    /// Tokens in the field over all documents.
    pub sum_total_term_freq: u64,
}

impl FieldStats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &FieldStats) {
        self.doc_count += other.doc_count;
        self.sum_total_term_freq += other.sum_total_term_freq;
    }
}

/// What the manifest records about one segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentMeta {
    /// File-name prefix of the segment's files.
    pub name: String,
    /// Number of documents.
    pub max_doc: u32,
    /// Statistics per field, in [`Field`] id order (the schema's fields
    /// when the segment was written; later fields have none).
    pub fields: Vec<FieldStats>,
    /// The fields with norms (a run of one byte per document each, in this
    /// order); absent: every field of `fields` (segments of text-only
    /// schemas, and every segment written before typed fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_fields: Option<Vec<u8>>,
    /// Number of distinct terms (all fields).
    pub num_terms: u64,
    /// The segment's files by extension, with their sizes and checksums.
    pub files: BTreeMap<String, FileInfo>,
    /// Its tombstones, if any document of it was deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletes: Option<DeletesMeta>,
    /// A chained segment of the in-place strategies: its postings are in a
    /// chain file, its documents in parts (see [`ChainMeta`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainMeta>,
}

/// What a commit covers of a chained segment (DESIGN §5, in-place): the
/// chain file (`{name}.chn`) and its dictionary log (`{name}.chl`) up to
/// the given lengths, and one part per flush holding the flushed
/// documents' norms, stored documents and ids (its own files, no postings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainMeta {
    /// Bytes of the chain file in use (whole blocks).
    pub file_len: u64,
    /// Bytes of the log the commit covers.
    pub log_len: u64,
    /// A term's data is kept in one contiguous run (`in-place-contiguous`).
    pub contiguous: bool,
    /// The parts, in document order.
    pub parts: Vec<SegmentMeta>,
    /// The packed runs holding the short terms' data, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<PackedRun>,
}

/// Extension of a chain file.
pub const CHAIN_EXT: &str = "chn";
/// Extension of a chain's dictionary log.
pub const CHAIN_LOG_EXT: &str = "chl";

impl SegmentMeta {
    /// Path of the segment's file with extension `ext`.
    pub fn file_name(&self, ext: &str) -> String {
        format!("{}.{ext}", self.name)
    }

    /// The ids of the fields with norms, in the order of their runs.
    pub fn normed_fields(&self) -> Vec<u8> {
        match &self.norm_fields {
            Some(f) => f.clone(),
            None => (0..self.fields.len().min(crate::schema::Field::MAX) as u8).collect(),
        }
    }

    /// Total bytes of the segment's files (content only).
    pub fn bytes(&self) -> u64 {
        let chain = self.chain.as_ref().map_or(0, |c| {
            c.file_len + c.log_len + c.parts.iter().map(SegmentMeta::bytes).sum::<u64>()
        });
        self.files.values().map(|f| f.content_len).sum::<u64>() + self.deletes.map_or(0, |d| d.file.content_len) + chain
    }

    /// A chained segment with no documents yet (the in-place strategies).
    pub fn empty_chain(name: String, contiguous: bool) -> SegmentMeta {
        SegmentMeta {
            name,
            max_doc: 0,
            fields: Default::default(),
            norm_fields: None,
            num_terms: 0,
            files: Default::default(),
            deletes: None,
            chain: Some(ChainMeta {
                file_len: 0,
                log_len: 0,
                contiguous,
                parts: Vec::new(),
                runs: Vec::new(),
            }),
        }
    }

    /// Every file name of the segment the manifest refers to.
    pub fn all_file_names(&self) -> Vec<String> {
        let mut out: Vec<String> = self.files.keys().map(|e| self.file_name(e)).collect();
        if let Some(d) = &self.deletes {
            out.push(d.file_name(&self.name));
        }
        if let Some(c) = &self.chain {
            out.push(self.file_name(CHAIN_EXT));
            out.push(self.file_name(CHAIN_LOG_EXT));
            for p in &c.parts {
                out.extend(p.all_file_names());
            }
        }
        out
    }

    /// Documents not deleted.
    pub fn live_docs(&self) -> u32 {
        self.max_doc - self.deletes.map_or(0, |d| d.count)
    }

    /// Statistics of `field` (none for a field the segment predates).
    pub fn field_stats(&self, field: Field) -> FieldStats {
        self.fields.get(field.index()).copied().unwrap_or_default()
    }
}

/// The index manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// On-disk format version.
    pub format: u32,
    /// Analyzer options (queries are analysed the same way).
    pub analyzer: AnalyzerConfig,
    /// The fields (absent: the default schema, `title` and `body`, which
    /// every index built before schemas existed has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// Posting codec.
    pub codec: Codec,
    /// Posting layout.
    pub layout: Layout,
    /// Phrase Bloom filters of the body field (absent: none; indexes built
    /// before they existed have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bloom: Option<BloomParams>,
    /// Grouped dictionaries keep document frequencies in their FST values
    /// (absent: indexes built before they did).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dict_doc_freq: bool,
    /// Segments in document order.
    pub segments: Vec<SegmentMeta>,
    /// Next unused segment number.
    pub next_segment: u64,
    /// How flushed updates are merged (chosen at creation).
    #[serde(default, skip_serializing_if = "Strategy::is_default")]
    pub strategy: Strategy,
    /// Last write-ahead-log sequence number the segments hold (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub applied_seq: u64,
    /// Position in an external log that the segments bring the index up to
    /// (the last [`crate::update::wal::Op::Mark`] of the batches up to
    /// `applied_seq`; 0: none). A cluster node keeps its shard stream's
    /// sequence here, so that a restart resumes after it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub source_seq: u64,
    /// Commits so far: each [`Manifest::store`] numbers its manifest one
    /// more (readers' leases name it, see [`crate::index::lease`]; 0 in
    /// indexes written before it existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u64,
    /// Hash of everything above, checked on load.
    #[serde(default)]
    pub checksum: String,
}

impl Manifest {
    /// An empty manifest for a new index of the default schema.
    pub fn new(analyzer: AnalyzerConfig, format: Format) -> Manifest {
        Manifest::with_schema(Schema::default(), analyzer, format)
    }

    /// An empty manifest for a new index of `schema`.
    pub fn with_schema(schema: Schema, analyzer: AnalyzerConfig, format: Format) -> Manifest {
        Manifest {
            format: FORMAT_VERSION,
            schema: (!schema.is_title_body()).then_some(schema),
            analyzer,
            codec: format.codec,
            layout: format.layout,
            bloom: format.bloom,
            dict_doc_freq: format.dict_doc_freq,
            segments: Vec::new(),
            next_segment: 0,
            strategy: Strategy::default(),
            applied_seq: 0,
            source_seq: 0,
            generation: 0,
            checksum: String::new(),
        }
    }

    fn compute_checksum(&self) -> String {
        let mut unsummed = self.clone();
        unsummed.checksum.clear();
        let bytes = serde_json::to_vec(&unsummed).expect("manifest serialises");
        format!("{:016x}", xxh3_64(&bytes))
    }

    /// Reads and checks `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(format!(
                    "{} is not a tierdex index (no {MANIFEST}); build one with `tierdex index`",
                    dir.display()
                )))
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let m: Manifest =
            serde_json::from_slice(&text).map_err(|e| Error::corrupt(&path, format!("invalid manifest: {e}")))?;
        if m.checksum != m.compute_checksum() {
            return Err(Error::corrupt(&path, "manifest checksum mismatch (edited or damaged)"));
        }
        if !(OLDEST_READABLE_FORMAT..=FORMAT_VERSION).contains(&m.format) {
            return Err(Error::corrupt(
                &path,
                format!(
                    "index format {} is not supported (this build reads {OLDEST_READABLE_FORMAT} to {FORMAT_VERSION})",
                    m.format
                ),
            ));
        }
        Ok(m)
    }

    /// Writes `dir/manifest.json` atomically (temporary file, fsync, rename),
    /// as the next generation.
    pub fn store(&mut self, dir: &Path) -> Result<()> {
        self.generation += 1;
        // What this build writes may use the current format's features.
        self.format = FORMAT_VERSION;
        self.checksum = self.compute_checksum();
        let path = dir.join(MANIFEST);
        let tmp = dir.join(format!("{MANIFEST}.tmp"));
        let text = serde_json::to_vec_pretty(self).expect("manifest serialises");
        let io = |e| Error::io(&tmp, e);
        let mut f = faults::check(&tmp, FaultOp::Create)
            .and_then(|_| mode::create_options().write(true).create(true).truncate(true).open(&tmp))
            .map_err(io)?;
        faults::check(&tmp, FaultOp::Write)
            .and_then(|_| f.write_all(&text))
            .and_then(|_| f.write_all(b"\n"))
            .map_err(io)?;
        faults::check(&tmp, FaultOp::Sync).and_then(|_| f.sync_all()).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// The index's schema.
    pub fn schema(&self) -> Schema {
        self.schema.clone().unwrap_or_default()
    }

    /// How the index's postings are encoded.
    pub fn postings_format(&self) -> Format {
        Format {
            layout: self.layout,
            codec: self.codec,
            bloom: self.bloom,
            filter_fields: Default::default(),
            dict_doc_freq: self.dict_doc_freq,
        }
        .with_schema(&self.schema())
    }

    /// Total documents, deleted ones included.
    pub fn num_docs(&self) -> u64 {
        self.segments.iter().map(|s| s.max_doc as u64).sum()
    }

    /// Documents not deleted.
    pub fn live_docs(&self) -> u64 {
        self.segments.iter().map(|s| s.live_docs() as u64).sum()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
