//! A segment's postings files on both sides: [`PostingsWriter`] places each
//! term's sections by [`Layout`] and records them in the term dictionary;
//! [`PostingsFiles`] opens them and resolves a dictionary entry into a
//! [`TermInfo`].

use std::path::Path;

use crate::bloom::FilterShape;
use crate::error::{Error, Result};
use crate::layout::source::PostingsSource;
use crate::layout::writer::{TermPostings, TermWriter};
use crate::layout::{Codec, Format, Layout, TermCursor};
use crate::storage::{io, FileInfo, FileWriter, IndexFile};
use crate::termdict::{decode_meta, encode_meta, TermDict, TermDictWriter, TermInfo, TermRef, MAX_META_LEN};

/// File extensions of postings and dictionaries.
pub mod ext {
    /// FST of term keys (both layouts).
    pub const TERMS: &str = "fst";
    /// Term info table (split).
    pub const TERM_INFOS: &str = "tin";
    /// Grouped term regions.
    pub const POSTINGS: &str = "pst";
    /// Zones: impacts, skip data, doc ids and frequencies (split).
    pub const DOCS: &str = "doc";
    /// Positions (split).
    pub const POSITIONS: &str = "pos";
    /// Offsets (split).
    pub const PAYLOADS: &str = "pay";
    /// Phrase Bloom filters (split, when the index has them).
    pub const BLOOM: &str = "blm";

    /// The files a layout writes (besides norms and store).
    pub fn of(layout: super::Layout) -> &'static [&'static str] {
        match layout {
            super::Layout::Grouped => &[TERMS, POSTINGS],
            super::Layout::Split => &[TERMS, TERM_INFOS, DOCS, POSITIONS, PAYLOADS],
        }
    }
}

/// Writes a segment's postings and term dictionary.
pub struct PostingsWriter {
    layout: Layout,
    bloom: bool,
    writer: TermWriter,
    dict: TermDictWriter,
    doc: FileWriter,
    pos: Option<FileWriter>,
    pay: Option<FileWriter>,
    blm: Option<FileWriter>,
    meta: Vec<u8>,
    fst_path: std::path::PathBuf,
}

impl PostingsWriter {
    /// Creates the files of segment `name` in `dir`.
    pub fn create(dir: &Path, name: &str, format: Format) -> Result<Self> {
        let Format { layout, codec, .. } = format;
        let shape = format.bloom_shape()?;
        let path = |e: &str| dir.join(format!("{name}.{e}"));
        let (doc, pos, pay) = match layout {
            Layout::Grouped => (FileWriter::create(path(ext::POSTINGS))?, None, None),
            Layout::Split => (
                FileWriter::create(path(ext::DOCS))?,
                Some(FileWriter::create(path(ext::POSITIONS))?),
                Some(FileWriter::create(path(ext::PAYLOADS))?),
            ),
        };
        let blm = match (layout, shape) {
            (Layout::Split, Some(_)) => Some(FileWriter::create(path(ext::BLOOM))?),
            _ => None,
        };
        Ok(PostingsWriter {
            layout,
            blm,
            bloom: shape.is_some(),
            writer: TermWriter::with_format(codec, shape),
            dict: TermDictWriter::create(layout, shape.is_some(), format.dict_doc_freq, &path(ext::TERM_INFOS))?,
            doc,
            pos,
            pay,
            meta: Vec::with_capacity(MAX_META_LEN),
            fst_path: path(ext::TERMS),
        })
    }

    /// The same writer, its data files not synced when finished: the
    /// part of a merge that is appended to another writer and removed.
    pub fn temporary(mut self) -> Self {
        self.doc = self.doc.temporary();
        self.pos = self.pos.map(FileWriter::temporary);
        self.pay = self.pay.map(FileWriter::temporary);
        self.blm = self.blm.map(FileWriter::temporary);
        self
    }

    /// Adds the next term, in the layout's write order
    /// ([`Layout::term_order`]); `norms` are the field's norms, for the
    /// impacts.
    pub fn add(&mut self, key: &[u8], p: &TermPostings, norms: &[u8]) -> Result<()> {
        let region = self
            .writer
            .write(p, norms)
            .map_err(|e| Error::Internal(format!("cannot encode a term's postings: {e}")))?;
        self.write_term(key, region)
    }

    /// The encoder of the next term, to stream its documents into
    /// ([`TermWriter::start`], then [`TermWriter::push`] per document);
    /// [`Self::end_term`] adds the term.
    pub fn term_writer(&mut self) -> &mut TermWriter {
        &mut self.writer
    }

    /// Adds the term streamed into [`Self::term_writer`] as the next term
    /// (see [`Self::add`]).
    pub fn end_term(&mut self, key: &[u8]) -> Result<()> {
        let region = self
            .writer
            .finish()
            .map_err(|e| Error::Internal(format!("cannot encode a term's postings: {e}")))?;
        self.write_term(key, region)
    }

    /// Writes the sections the encoder holds for the term `key`.
    fn write_term(&mut self, key: &[u8], region: crate::termdict::RegionInfo) -> Result<()> {
        let w = &self.writer;
        match (&mut self.pos, &mut self.pay) {
            (Some(pos), Some(pay)) => {
                self.doc.align_for(w.zone().len())?;
                let info = TermInfo {
                    doc_offset: self.doc.position(),
                    pos_offset: pos.position(),
                    off_offset: pay.position(),
                    bloom_offset: self.blm.as_ref().map_or(0, |b| b.position()),
                    region,
                };
                self.doc.write_all(w.zone())?;
                if let Some(blm) = &mut self.blm {
                    for f in w.filters() {
                        blm.write_all(f)?;
                    }
                }
                pos.write_all(w.positions())?;
                pay.write_all(w.offsets())?;
                self.dict.insert(key, 0, &info)
            }
            _ => {
                self.meta.clear();
                encode_meta(&region, self.bloom, &mut self.meta);
                let total = self.meta.len() + region.len() as usize;
                self.doc.align_for(total)?;
                let start = self.doc.position();
                self.doc.write_all(&self.meta)?;
                self.doc.write_all(w.zone())?;
                self.doc.write_all(w.positions())?;
                self.doc.write_all(w.offsets())?;
                for f in w.filters() {
                    self.doc.write_all(f)?;
                }
                let info = TermInfo {
                    region,
                    ..TermInfo::default()
                };
                self.dict.insert(key, start, &info)
            }
        }
    }

    /// Appends every term of `part`, the finished postings of a range of
    /// terms that come after every term added so far in the layout's term
    /// order (split: in key order), written in this writer's format: its
    /// files are copied in, each starting on a page boundary so that no
    /// region straddles a page it did not straddle there, and its
    /// dictionary entries are relocated. A merge writes term ranges on
    /// several threads and joins them with this.
    pub fn append(&mut self, part: &PostingsFiles) -> Result<()> {
        use fst::Streamer;
        let doc_base = append_file(part.doc_file(), &mut self.doc)?;
        match self.layout {
            Layout::Grouped => {
                let mut stream = part.terms().fst().stream();
                while let Some((key, value)) = stream.next() {
                    self.dict.insert_relocated(key, value, doc_base)?;
                }
            }
            Layout::Split => {
                let (pos, pay) = match (&mut self.pos, &mut self.pay) {
                    (Some(pos), Some(pay)) => (pos, pay),
                    _ => return Err(Error::Internal("split postings without their files".into())),
                };
                let pos_base = append_file(part.pos_file(), pos)?;
                let pay_base = append_file(part.pay_file(), pay)?;
                let bloom_base = match &mut self.blm {
                    Some(blm) => append_file(part.bloom_file(), blm)?,
                    None => 0,
                };
                let mut stream = part.terms().fst().stream();
                while let Some((key, value)) = stream.next() {
                    let mut info = part.resolve(part.terms().term_ref(value))?;
                    info.doc_offset += doc_base;
                    info.pos_offset += pos_base;
                    info.off_offset += pay_base;
                    if self.blm.is_some() {
                        info.bloom_offset += bloom_base;
                    }
                    self.dict.insert(key, 0, &info)?;
                }
            }
        }
        Ok(())
    }

    /// Finishes a part of a merge (see [`Self::append_part`]): its data
    /// files, and for the grouped layout its dictionary left unwritten (the
    /// writer it is appended to puts the entries in its own dictionary, so
    /// no FST of the part is built only to be read back).
    pub fn finish_part(self) -> Result<PostingsPart> {
        match self.layout {
            Layout::Grouped => Ok(PostingsPart {
                files: vec![(ext::POSTINGS, self.doc.finish()?)],
                dict: Some(self.dict),
            }),
            Layout::Split => Ok(PostingsPart {
                files: self.finish()?,
                dict: None,
            }),
        }
    }

    /// Appends a grouped part finished by [`Self::finish_part`]: `postings`
    /// is its postings file (opened), `dict` its dictionary; as
    /// [`Self::append`] otherwise.
    pub fn append_part(&mut self, postings: &IndexFile, dict: TermDictWriter) -> Result<()> {
        if self.layout != Layout::Grouped {
            return Err(Error::Internal("only grouped postings are appended with their dictionary".into()));
        }
        let doc_base = append_file(postings, &mut self.doc)?;
        self.dict.absorb(dict, doc_base)
    }

    /// Terms added so far.
    pub fn len(&self) -> u64 {
        self.dict.len()
    }

    /// True when no term was added.
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }

    /// Finishes every file; returns their summaries by extension.
    pub fn finish(self) -> Result<Vec<(&'static str, FileInfo)>> {
        let mut files = vec![];
        let (fst, tin) = self.dict.finish(&self.fst_path)?;
        files.push((ext::TERMS, fst));
        if let Some(tin) = tin {
            files.push((ext::TERM_INFOS, tin));
        }
        match self.layout {
            Layout::Grouped => files.push((ext::POSTINGS, self.doc.finish()?)),
            Layout::Split => {
                files.push((ext::DOCS, self.doc.finish()?));
                if let Some(p) = self.pos {
                    files.push((ext::POSITIONS, p.finish()?));
                }
                if let Some(p) = self.pay {
                    files.push((ext::PAYLOADS, p.finish()?));
                }
                if let Some(b) = self.blm {
                    files.push((ext::BLOOM, b.finish()?));
                }
            }
        }
        Ok(files)
    }
}

/// Appends the content of `from` to `to` from its next page boundary;
/// returns where it starts.
fn append_file(from: &IndexFile, to: &mut FileWriter) -> Result<u64> {
    let page = crate::storage::PAGE_SIZE as u64;
    to.write_zeros(((page - to.position() % page) % page) as usize)?;
    let base = to.position();
    to.append(from)?;
    Ok(base)
}

/// A merge's part finished by [`PostingsWriter::finish_part`].
pub struct PostingsPart {
    /// Its files by extension.
    pub files: Vec<(&'static str, FileInfo)>,
    /// Its dictionary, not written (grouped layout); `None` when written
    /// with the files (split).
    pub dict: Option<TermDictWriter>,
}

/// A segment's postings opened for reading.
pub struct PostingsFiles {
    layout: Layout,
    codec: Codec,
    bloom: Option<FilterShape>,
    terms: TermDict,
    doc: IndexFile,
    pos: Option<IndexFile>,
    pay: Option<IndexFile>,
    blm: Option<IndexFile>,
}

impl PostingsFiles {
    /// Opens the postings of segment `name` in `dir`; `open` opens (and
    /// checks) one file of the segment by extension.
    pub fn open(format: Format, open: impl Fn(&str) -> Result<IndexFile>) -> Result<Self> {
        let Format { layout, codec, .. } = format;
        let bloom = format.bloom_shape()?;
        Ok(match layout {
            Layout::Grouped => PostingsFiles {
                layout,
                codec,
                bloom,
                terms: TermDict::open(open(ext::TERMS)?, None, bloom.is_some(), format.dict_doc_freq)?,
                doc: open(ext::POSTINGS)?,
                pos: None,
                pay: None,
                blm: None,
            },
            Layout::Split => PostingsFiles {
                layout,
                codec,
                bloom,
                terms: TermDict::open(open(ext::TERMS)?, Some(open(ext::TERM_INFOS)?), bloom.is_some(), false)?,
                doc: open(ext::DOCS)?,
                pos: Some(open(ext::POSITIONS)?),
                pay: Some(open(ext::PAYLOADS)?),
                blm: bloom.map(|_| open(ext::BLOOM)).transpose()?,
            },
        })
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The shape of the segment's phrase filters (`None`: it has none).
    pub fn bloom(&self) -> Option<FilterShape> {
        self.bloom
    }

    /// The term dictionary.
    pub fn terms(&self) -> &TermDict {
        &self.terms
    }

    /// The file holding zones (the postings file when grouped).
    pub fn doc_file(&self) -> &IndexFile {
        &self.doc
    }

    /// The file holding positions.
    pub fn pos_file(&self) -> &IndexFile {
        self.pos.as_ref().unwrap_or(&self.doc)
    }

    /// The file holding offsets.
    pub fn pay_file(&self) -> &IndexFile {
        self.pay.as_ref().unwrap_or(&self.doc)
    }

    /// The file holding phrase filters.
    pub fn bloom_file(&self) -> &IndexFile {
        self.blm.as_ref().unwrap_or(&self.doc)
    }

    /// The document frequency of a term key in this segment (0: absent):
    /// from the dictionary alone when it holds it, else from the term's info.
    pub fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        let Some(value) = self.terms.value(key) else {
            return Ok(0);
        };
        match self.terms.doc_freq_of(value) {
            Some(df) => Ok(df as u64),
            None => Ok(self.resolve(self.terms.term_ref(value))?.region.doc_freq as u64),
        }
    }

    /// Looks a term key up.
    pub fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        match self.terms.get(key) {
            Some(r) => self.resolve(r).map(Some),
            None => Ok(None),
        }
    }

    /// The info of a dictionary entry: the split layout reads its table,
    /// the grouped layout the metadata at the start of the term's region.
    pub fn resolve(&self, r: TermRef) -> Result<TermInfo> {
        match r {
            TermRef::Ordinal(ord) => self.terms.info(ord),
            TermRef::Region(start) => {
                let start = start as usize;
                let end = (start + MAX_META_LEN).min(self.doc.len());
                let mut buf = Vec::new();
                let data = self.doc.read(start.min(end)..end, &mut buf)?;
                let (info, used) = decode_meta(data, start as u64, self.bloom.is_some())
                    .ok_or_else(|| Error::corrupt(self.doc.path(), format!("damaged term metadata at byte {start}")))?;
                io::record_needed(used as u64);
                Ok(info)
            }
        }
    }

    /// A cursor over a term.
    pub fn cursor(&self, info: &TermInfo) -> Result<TermCursor<'_>> {
        TermCursor::open(self, info)
    }

    /// Verifies every page of every postings file.
    pub fn verify_all(&self) -> Result<()> {
        self.terms.verify_all()?;
        self.doc.verify_all()?;
        for f in [&self.pos, &self.pay, &self.blm].into_iter().flatten() {
            f.verify_all()?;
        }
        Ok(())
    }
}

impl PostingsSource for PostingsFiles {
    fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        PostingsFiles::term_info(self, key)
    }

    fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        PostingsFiles::doc_freq(self, key)
    }

    fn cursor<'a>(&'a self, info: &TermInfo) -> Result<TermCursor<'a>> {
        TermCursor::open(self, info)
    }

    fn prefetches_zones(&self) -> bool {
        true
    }

    fn terms_between(&self, lo: &[u8], hi: &[u8], f: &mut dyn FnMut(&[u8], u64, u64)) -> Result<()> {
        use fst::{IntoStreamer, Streamer};
        let mut stream = self.terms().fst().range().ge(lo).lt(hi).into_stream();
        while let Some((key, value)) = stream.next() {
            let info = self.resolve(self.terms().term_ref(value))?;
            f(key, info.region.doc_freq as u64, info.region.total_term_freq);
        }
        Ok(())
    }

    fn bloom(&self) -> Option<FilterShape> {
        self.bloom
    }

    fn prefetch(&self, ranges: &[std::ops::Range<usize>]) -> Result<()> {
        self.doc_file().prefetch(ranges)
    }

    fn verify_all(&self) -> Result<()> {
        PostingsFiles::verify_all(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
