//! Writing a document store.

use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use super::format::{self, DataHeader, IndexTrailer, FLAG_DICTIONARY, MAX_DOCUMENT_BYTES};
use super::reader::StoreReader;
use super::zstd_codec::{self, Compressor, TrainLimits};
use super::{StoreFiles, StoreOptions};
use crate::error::{Error, Result};
use crate::schema::{DocId, Document, TERMINATED};
use crate::storage::FileWriter;

/// Largest dictionary trained (zstd's own default size).
const MAX_DICTIONARY: usize = 110 << 10;
/// Bytes of each sampled document used for training.
const SAMPLE_PREFIX: usize = 16 << 10;
/// Most bytes of whole documents held while sampling (long documents count
/// only their prefix towards the training sample, but are held whole).
const MAX_SAMPLE_BUFFER: usize = 32 << 20;
/// While more documents follow the sample, the store is assumed to be at
/// least this many times larger than it when weighing a dictionary's cost.
const ASSUMED_GROWTH: usize = 8;

/// Writes the document store of one segment: documents are numbered 0, 1, 2,
/// ... in the order they are added.
pub struct StoreWriter {
    options: StoreOptions,
    data: FileWriter,
    index: FileWriter,
    num_docs: u32,
    raw_bytes: u64,
    padding_bytes: u64,
    /// Serialisation buffer, reused.
    serial: Vec<u8>,
    /// Compression output buffer, reused.
    compressed: Vec<u8>,
    /// A copied record read from a store that is not resident, reused.
    copy_buf: Vec<u8>,
    compressor: Compressor,
    state: State,
}

/// A dictionary in use: its bytes and what identifies it.
struct Dictionary {
    bytes: Vec<u8>,
    hash: u64,
}

/// Documents buffered for dictionary training.
#[derive(Default)]
struct Sample {
    /// Serialised documents, in order.
    docs: Vec<Vec<u8>>,
    /// Bytes of them used for training (a prefix of each).
    training_bytes: usize,
    /// Bytes held.
    buffered_bytes: usize,
}

/// A dictionary decision: the dictionary kept (if any) and the sampled
/// documents compressed accordingly.
type Weighed = (Option<Vec<u8>>, Vec<Vec<u8>>);

enum State {
    /// Buffering serialised documents to train a dictionary on; nothing has
    /// been written to the data file yet.
    Sampling(Sample),
    /// Header written; records are compressed as they come.
    Writing { dict: Option<Dictionary> },
}

impl StoreWriter {
    /// Creates (truncates) the two files of a new store.
    pub fn create(data_path: &Path, index_path: &Path, options: StoreOptions) -> Result<StoreWriter> {
        let range = zstd::compression_level_range();
        if !range.contains(&options.level) {
            return Err(Error::InvalidArgument(format!(
                "zstd level {} outside {}..={}",
                options.level,
                range.start(),
                range.end()
            )));
        }
        let data = FileWriter::create(data_path)?;
        let index = FileWriter::create(index_path)?;
        let compressor = Compressor::new(options.level).map_err(|e| internal(data_path, e))?;
        let mut writer = StoreWriter {
            options,
            data,
            index,
            num_docs: 0,
            raw_bytes: 0,
            padding_bytes: 0,
            serial: Vec::new(),
            compressed: Vec::new(),
            copy_buf: Vec::new(),
            compressor,
            state: State::Sampling(Sample::default()),
        };
        if !options.dictionary {
            writer.start_writing(None)?;
        }
        Ok(writer)
    }

    /// Creates a store that compresses with `dictionary` (trained once with
    /// [`train_dictionary`] and shared by the stores of several segments, so
    /// that merging them copies records without recompression); `None`
    /// means no dictionary.
    pub fn create_with_dictionary(
        data_path: &Path,
        index_path: &Path,
        options: StoreOptions,
        dictionary: Option<&[u8]>,
    ) -> Result<StoreWriter> {
        let mut writer = StoreWriter::create(data_path, index_path, options)?;
        if matches!(writer.state, State::Sampling(_)) {
            writer.start_writing(dictionary.map(<[u8]>::to_vec))?;
        }
        Ok(writer)
    }

    /// Creates a store that will receive the documents of `sources` (a
    /// merge): it adopts the dictionary of the largest source that has one,
    /// so that source's records are copied by [`copy_from`](Self::copy_from)
    /// without recompression. Without such a source (or with
    /// `options.dictionary` off) this is [`create`](Self::create).
    pub fn create_for_merge(
        data_path: &Path,
        index_path: &Path,
        options: StoreOptions,
        sources: &[&StoreReader],
    ) -> Result<StoreWriter> {
        let mut writer = StoreWriter::create(data_path, index_path, options)?;
        if options.dictionary {
            let best = sources
                .iter()
                .filter(|s| s.dictionary_len() > 0)
                .max_by_key(|s| s.data_len());
            if let Some(source) = best {
                let dict = source.dictionary()?.map(<[u8]>::to_vec);
                writer.start_writing(dict)?;
            }
        }
        Ok(writer)
    }

    /// Documents added so far.
    pub fn num_docs(&self) -> u32 {
        self.num_docs
    }

    /// Adds a document; returns its number.
    pub fn add(&mut self, doc: &Document) -> Result<DocId> {
        self.check_room()?;
        format::serialise(doc, &mut self.serial);
        let len = self.serial.len();
        if len > MAX_DOCUMENT_BYTES {
            return Err(Error::InvalidArgument(format!(
                "document {:?} is {len} bytes serialised, more than the store's limit of {MAX_DOCUMENT_BYTES}",
                doc.id
            )));
        }
        self.add_serialised()
    }

    /// Appends a record exactly as [`StoreReader::raw`] returned it, without
    /// recompressing it. The record must come from a store using the same
    /// dictionary as this writer (or none when neither uses one), which only
    /// [`copy_from`](Self::copy_from) can check: prefer it. Refused while
    /// the writer is still sampling documents for its dictionary. The frame
    /// itself is checked (one complete zstd frame of plausible size); a record
    /// compressed with another dictionary is caught by its content checksum
    /// when read.
    pub fn add_raw(&mut self, raw: &[u8]) -> Result<DocId> {
        self.check_room()?;
        if matches!(self.state, State::Sampling(_)) {
            return Err(Error::InvalidArgument(
                "add_raw before the store's dictionary is chosen; use copy_from".into(),
            ));
        }
        let raw_len = format::record_content_size(raw).map_err(|e| Error::InvalidArgument(format!("add_raw: {e}")))?;
        match zstd::zstd_safe::find_frame_compressed_size(raw) {
            Ok(n) if n == raw.len() => {}
            _ => {
                return Err(Error::InvalidArgument(
                    "add_raw: not exactly one complete zstd frame".into(),
                ))
            }
        }
        self.write_record(raw, raw_len)
    }

    /// Appends document `doc` of `source`: the compressed record is copied as
    /// is when both stores use the same dictionary (or none), otherwise the
    /// document is decompressed and recompressed for this store. A writer
    /// that has not chosen its dictionary yet and holds no document adopts
    /// the source's. Use this for merges.
    pub fn copy_from(&mut self, source: &StoreReader, doc: DocId) -> Result<DocId> {
        self.check_room()?;
        if let State::Sampling(sample) = &self.state {
            if sample.docs.is_empty() && self.options.dictionary {
                if let Some(dict) = source.dictionary()? {
                    self.start_writing(Some(dict.to_vec()))?;
                }
            }
        }
        let same_dictionary = match &self.state {
            State::Writing { dict } => dict.as_ref().map(|d| (d.bytes.len(), d.hash)) == source.dictionary_id(),
            State::Sampling(_) => false,
        };
        if same_dictionary {
            // Read (not borrowed) on tiers that are not resident.
            let mut buf = std::mem::take(&mut self.copy_buf);
            let result = (|| {
                let record = source.raw_into(doc, &mut buf)?;
                let raw_len = format::record_content_size(record).map_err(|e| source.record_corrupt(doc, e))?;
                self.write_record(record, raw_len)
            })();
            self.copy_buf = buf;
            result
        } else {
            source.read_serialised(doc, &mut self.serial)?;
            self.add_serialised()
        }
    }

    /// Writes the index, closes both files and reports what was written.
    pub fn finish(mut self) -> Result<StoreFiles> {
        if matches!(self.state, State::Sampling(_)) {
            self.finish_sampling(true)?;
        }
        let dictionary_bytes = match &self.state {
            State::Writing { dict: Some(d) } => d.bytes.len() as u64,
            _ => 0,
        };
        let data = self.data.finish()?;
        let trailer = IndexTrailer {
            num_docs: self.num_docs,
            data_len: data.content_len,
            data_checksum: data.checksum,
        };
        self.index.write_all(&trailer.encode())?;
        let index = self.index.finish()?;
        Ok(StoreFiles {
            data,
            index,
            docs: self.num_docs,
            raw_bytes: self.raw_bytes,
            padding_bytes: self.padding_bytes,
            dictionary_bytes,
        })
    }

    fn check_room(&self) -> Result<()> {
        // Document numbers stay below the cursors' TERMINATED sentinel.
        if self.num_docs >= TERMINATED - 1 {
            return Err(Error::InvalidArgument(format!(
                "a store holds at most {} documents",
                TERMINATED - 1
            )));
        }
        Ok(())
    }

    /// Adds the serialised document in `self.serial`.
    fn add_serialised(&mut self) -> Result<DocId> {
        match &mut self.state {
            State::Sampling(sample) => {
                sample.training_bytes += self.serial.len().min(SAMPLE_PREFIX);
                sample.buffered_bytes += self.serial.len();
                sample.docs.push(self.serial.clone());
                let full = sample.docs.len() >= self.options.dictionary_sample_docs
                    || sample.training_bytes >= self.options.dictionary_sample_bytes
                    || sample.buffered_bytes >= MAX_SAMPLE_BUFFER;
                let id = self.num_docs;
                self.num_docs += 1;
                if full {
                    self.finish_sampling(false)?;
                }
                Ok(id)
            }
            State::Writing { .. } => {
                let mut compressed = std::mem::take(&mut self.compressed);
                let result = self
                    .compressor
                    .compress(&self.serial, &mut compressed)
                    .map_err(|e| internal(self.data.path(), e))
                    .and_then(|()| self.write_record(&compressed, self.serial.len()));
                self.compressed = compressed;
                result
            }
        }
    }

    /// Appends one compressed record to the data file and its index entry.
    fn write_record(&mut self, record: &[u8], raw_len: usize) -> Result<DocId> {
        let len = u32::try_from(record.len())
            .map_err(|_| Error::InvalidArgument(format!("record of {} bytes is too large", record.len())))?;
        if self.options.align {
            self.padding_bytes += self.data.align_for(record.len())? as u64;
        }
        let offset = self.data.position();
        self.data.write_all(record)?;
        self.index.write_all(&format::encode_entry(offset, len))?;
        self.raw_bytes += raw_len as u64;
        let id = self.num_docs;
        self.num_docs += 1;
        Ok(id)
    }

    /// Writes the data header and the dictionary; records follow.
    fn start_writing(&mut self, dict: Option<Vec<u8>>) -> Result<()> {
        debug_assert!(matches!(self.state, State::Sampling(_)));
        debug_assert_eq!(self.data.position(), 0);
        let dict = dict.map(|bytes| Dictionary {
            hash: xxh3_64(&bytes),
            bytes,
        });
        let header = match &dict {
            Some(d) => DataHeader {
                flags: FLAG_DICTIONARY,
                dict_len: u32::try_from(d.bytes.len())
                    .map_err(|_| Error::InvalidArgument("dictionary too large".into()))?,
                dict_hash: d.hash,
            },
            None => DataHeader {
                flags: 0,
                dict_len: 0,
                dict_hash: 0,
            },
        };
        self.compressor
            .set_dictionary(dict.as_ref().map_or(&[][..], |d| &d.bytes))
            .map_err(|e| internal(self.data.path(), e))?;
        self.data.write_all(&header.encode())?;
        if let Some(d) = &dict {
            self.data.write_all(&d.bytes)?;
        }
        self.state = State::Writing { dict };
        Ok(())
    }

    /// Ends sampling: trains a dictionary on the buffered documents, keeps it
    /// if it pays for itself, and writes them. `complete` says the sample is
    /// the whole store; otherwise more documents follow.
    fn finish_sampling(&mut self, complete: bool) -> Result<()> {
        let State::Sampling(Sample { docs, .. }) =
            std::mem::replace(&mut self.state, State::Sampling(Sample::default()))
        else {
            return Ok(());
        };
        self.num_docs -= docs.len() as u32;
        let path = self.data.path().to_path_buf();
        match weigh_dictionary(&mut self.compressor, &path, &docs, complete)? {
            Some((dict, records)) => {
                self.start_writing(dict)?;
                for (doc, record) in docs.iter().zip(&records) {
                    self.write_record(record, doc.len())?;
                }
            }
            None => {
                self.start_writing(None)?;
                for doc in docs {
                    self.serial = doc;
                    self.add_serialised()?;
                }
            }
        }
        Ok(())
    }
}

/// Trains a dictionary on `docs` and compresses them with and without
/// it. The dictionary must save more than its own size on the sample, or,
/// when more documents follow, on a store `ASSUMED_GROWTH` times larger.
/// Returns the dictionary kept (if any) and `docs` compressed
/// accordingly; `None` when no dictionary could be trained.
fn weigh_dictionary(
    compressor: &mut Compressor,
    path: &Path,
    docs: &[Vec<u8>],
    complete: bool,
) -> Result<Option<Weighed>> {
    let started = std::time::Instant::now();
    let limits = TrainLimits {
        sample_prefix: SAMPLE_PREFIX,
        max_dict: MAX_DICTIONARY,
    };
    let Some(dict) = zstd_codec::train(docs, &limits) else {
        return Ok(None);
    };
    let trained = started.elapsed();
    let path = path.to_path_buf();
    let compress_all = |c: &mut Compressor| -> Result<Vec<Vec<u8>>> {
        docs.iter()
            .map(|d| {
                let mut out = Vec::new();
                c.compress(d, &mut out).map_err(|e| internal(&path, e))?;
                Ok(out)
            })
            .collect()
    };
    let plain = compress_all(compressor)?;
    let plain_len: usize = plain.iter().map(Vec::len).sum();
    compressor.set_dictionary(&dict).map_err(|e| internal(&path, e))?;
    let with_dict = compress_all(compressor)?;
    let with_len: usize = with_dict.iter().map(Vec::len).sum();
    let saved = plain_len.saturating_sub(with_len);
    let growth = if complete { 1 } else { ASSUMED_GROWTH };
    let keep = saved * growth > dict.len();
    tracing::debug!(
        docs = docs.len(),
        dict = dict.len(),
        plain = plain_len,
        with_dict = with_len,
        keep,
        train_ms = trained.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "document store dictionary"
    );
    Ok(Some(if keep { (Some(dict), with_dict) } else { (None, plain) }))
}

/// Trains a dictionary on a sample of `docs` (the first ones, within the
/// options' sample limits) for [`StoreWriter::create_with_dictionary`];
/// `None` when dictionaries are off or one would not pay for itself.
pub fn train_dictionary(docs: &[Document], options: &StoreOptions) -> Result<Option<Vec<u8>>> {
    if !options.dictionary {
        return Ok(None);
    }
    let mut sample = Vec::new();
    let (mut training, mut buffered) = (0usize, 0usize);
    for doc in docs {
        if sample.len() >= options.dictionary_sample_docs
            || training >= options.dictionary_sample_bytes
            || buffered >= MAX_SAMPLE_BUFFER
        {
            break;
        }
        let mut serial = Vec::new();
        format::serialise(doc, &mut serial);
        training += serial.len().min(SAMPLE_PREFIX);
        buffered += serial.len();
        sample.push(serial);
    }
    let path = Path::new("<dictionary sample>");
    let mut compressor = Compressor::new(options.level).map_err(|e| internal(path, e))?;
    Ok(weigh_dictionary(&mut compressor, path, &sample, false)?.and_then(|(dict, _)| dict))
}

/// A failure inside zstd that is not about the data (allocation, misuse).
fn internal(path: &Path, reason: String) -> Error {
    Error::io(path, std::io::Error::other(reason))
}
