//! Streaming corpus readers: JSON lines files (plain, zstd, gzip) and
//! directories of plain text files.

mod json;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::CorpusError;
use crate::schema::{Document, Schema};

#[cfg(test)]
pub(crate) use json::parse_record;
pub(crate) use json::parse_record_with;

/// Buffer size for reading input files.
const READ_BUF: usize = 256 * 1024;

/// Default of [`ReadOptions::max_record_bytes`]: the largest document the
/// store accepts (a JSON record serialises to no more bytes than its line).
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

/// When the reusable line buffer has grown beyond this after a huge line,
/// it is shrunk back.
const SHRINK_LINE_BUF: usize = 16 * 1024 * 1024;

/// How many skipped bad records are logged one by one before only a
/// summary is logged.
const LOG_SKIPPED: u64 = 10;

/// The zstd frame magic number, little-endian on disk.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The gzip member magic number.
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];

/// How a corpus is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Skip (count and log) malformed records instead of stopping at the
    /// first one. I/O errors always stop the iteration.
    pub skip_bad: bool,
    /// A record (a line, or a file of a directory input) larger than this
    /// is a bad record, passed over without being held in memory.
    pub max_record_bytes: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            skip_bad: false,
            max_record_bytes: MAX_RECORD_BYTES,
        }
    }
}

/// A stream of documents read from one or more inputs, in the order given.
///
/// Iterating yields `Ok(document)` for each record, or one `Err` after which
/// the iteration ends (a bad record without [`ReadOptions::skip_bad`], or an
/// I/O error such as a truncated compressed stream). Reading is streaming:
/// only one record (or, for directories, one file) is in memory at a time.
pub struct Corpus {
    pending: VecDeque<Input>,
    current: Option<Source>,
    opts: ReadOptions,
    /// The schema records are checked against; dynamic mapping grows it as
    /// the records come (as the index being built will).
    schema: Schema,
    /// The key holding a record's id (default `id`, or `url`).
    id_field: Option<String>,
    line_buf: Vec<u8>,
    skipped: u64,
    progress: Arc<AtomicU64>,
    total_bytes: u64,
    done: bool,
}

/// One input as found by [`Corpus::open`].
enum Input {
    /// A JSON lines file (possibly compressed).
    File(PathBuf),
    /// A directory and its regular files (relative paths, sorted).
    Dir { root: PathBuf, files: Vec<PathBuf> },
}

/// The input being read.
enum Source {
    Lines {
        path: PathBuf,
        compression: Compression,
        reader: Box<dyn BufRead + Send>,
        line: u64,
    },
    Dir {
        root: PathBuf,
        files: std::vec::IntoIter<PathBuf>,
    },
}

/// The compression of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Zstd,
    Gzip,
}

impl Compression {
    /// What the file name says (`.zst`, `.zstd`, `.gz`).
    fn from_extension(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("zst") || e.eq_ignore_ascii_case("zstd") => Compression::Zstd,
            Some(e) if e.eq_ignore_ascii_case("gz") || e.eq_ignore_ascii_case("gzip") => Compression::Gzip,
            _ => Compression::None,
        }
    }

    /// What the first bytes say, if they say anything.
    fn from_magic(head: &[u8]) -> Option<Compression> {
        // zstd frames, or a skippable frame (magic 0x184D2A50..5F) first.
        let skippable = head.len() >= 4 && head[0] & 0xF0 == 0x50 && head[1..4] == [0x2A, 0x4D, 0x18];
        if head.starts_with(&ZSTD_MAGIC) || skippable {
            Some(Compression::Zstd)
        } else if head.starts_with(&GZIP_MAGIC) {
            Some(Compression::Gzip)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }
}

/// `n` bytes for a message: exact below 1 KiB, else in KiB/MiB/GiB.
fn bytes_text(n: u64) -> String {
    match n {
        n if n < 1 << 10 => format!("{n} bytes"),
        n if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        n if n < 1 << 30 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
    }
}

/// A reader that adds the bytes it reads to a shared counter.
struct Counting<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What one step of reading produced.
enum Step {
    Doc(Document),
    /// The current source is exhausted.
    End,
    /// A malformed record (skippable).
    Bad(CorpusError),
    /// An error that ends the iteration.
    Fatal(CorpusError),
}

fn io_err(path: &Path, source: io::Error) -> CorpusError {
    CorpusError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// Collects the regular files under `root` (recursively, hidden entries
/// skipped, symlinks to files followed, symlinks to directories not),
/// adding their sizes to `total`.
fn walk_dir(root: &Path, total: &mut u64) -> Result<Vec<PathBuf>, CorpusError> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let entries = std::fs::read_dir(&dir).map_err(|e| io_err(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&dir, e))?;
            let name = entry.file_name();
            if is_hidden(&name) {
                continue;
            }
            let path = entry.path();
            let mut ft = entry.file_type().map_err(|e| io_err(&path, e))?;
            let mut meta = None;
            if ft.is_symlink() {
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_file() => {
                        ft = m.file_type();
                        meta = Some(m);
                    }
                    // Dangling links and links to directories are skipped.
                    _ => continue,
                }
            }
            if ft.is_dir() {
                stack.push(rel.join(&name));
            } else if ft.is_file() {
                let meta = match meta {
                    Some(m) => m,
                    None => entry.metadata().map_err(|e| io_err(&path, e))?,
                };
                *total += meta.len();
                files.push(rel.join(&name));
            }
        }
    }
    files.sort();
    Ok(files)
}

impl Corpus {
    /// Opens inputs: files (.jsonl/.json/.ndjson, optionally .zst or .gz
    /// compressed, detected by extension and by magic bytes) or directories
    /// of plain text files. Every input must exist; directories are listed
    /// now (to know the total size), files are opened when reached. A file
    /// is read as JSON lines whatever its extension; compressed content is
    /// recognised by its magic bytes even without a `.zst`/`.gz` name, and a
    /// `.zst`/`.gz` name on uncompressed content is an error.
    pub fn open(inputs: &[PathBuf], opts: ReadOptions) -> Result<Corpus, CorpusError> {
        let mut pending = VecDeque::with_capacity(inputs.len());
        let mut total_bytes = 0u64;
        for path in inputs {
            let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
            if meta.is_dir() {
                let files = walk_dir(path, &mut total_bytes)?;
                pending.push_back(Input::Dir {
                    root: path.clone(),
                    files,
                });
            } else {
                total_bytes += meta.len();
                pending.push_back(Input::File(path.clone()));
            }
        }
        Ok(Corpus {
            pending,
            current: None,
            opts,
            schema: Schema::default(),
            id_field: None,
            line_buf: Vec::with_capacity(64 * 1024),
            skipped: 0,
            progress: Arc::new(AtomicU64::new(0)),
            total_bytes,
            done: false,
        })
    }

    /// Reads records as documents of `schema` (the default schema,
    /// `title` and `body`, otherwise): a key the schema does not have, or a
    /// value of the wrong type, makes the record bad.
    pub fn with_schema(mut self, schema: Arc<Schema>) -> Corpus {
        self.schema = (*schema).clone();
        self
    }

    /// Reads each record's id from key `field` (instead of `id`, or `url`);
    /// the key is not a field of the document then.
    pub fn with_id_field(mut self, field: impl Into<String>) -> Corpus {
        self.id_field = Some(field.into());
        self
    }

    /// Number of bad records skipped so far (only with
    /// [`ReadOptions::skip_bad`]).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Input bytes consumed so far (of the on-disk, possibly compressed,
    /// files), shared so that a progress bar can poll it from another thread.
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.progress)
    }

    /// Sum of the on-disk sizes of all inputs (files in directories
    /// included): the final value of [`Corpus::progress`].
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Opens the next input as a source.
    fn start(&self, input: Input) -> Result<Source, CorpusError> {
        match input {
            Input::Dir { root, files } => Ok(Source::Dir {
                root,
                files: files.into_iter(),
            }),
            Input::File(path) => {
                let file = File::open(&path).map_err(|e| io_err(&path, e))?;
                let counting = Counting {
                    inner: file,
                    counter: Arc::clone(&self.progress),
                };
                let mut raw = BufReader::with_capacity(READ_BUF, counting);
                let head = raw.fill_buf().map_err(|e| io_err(&path, e))?;
                let by_name = Compression::from_extension(&path);
                let compression = match Compression::from_magic(head) {
                    Some(c) => {
                        if c != by_name {
                            tracing::warn!(
                                "{}: content is {}-compressed (by its magic bytes) although its name says {}; reading it as {}",
                                path.display(),
                                c.name(),
                                by_name.name(),
                                c.name()
                            );
                        }
                        c
                    }
                    None if head.is_empty() => Compression::None,
                    None if by_name != Compression::None => {
                        return Err(io_err(
                            &path,
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("not a {}-compressed file (bad magic bytes)", by_name.name()),
                            ),
                        ));
                    }
                    None => Compression::None,
                };
                let reader: Box<dyn BufRead + Send> = match compression {
                    Compression::None => Box::new(raw),
                    Compression::Zstd => {
                        let dec = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| io_err(&path, e))?;
                        Box::new(BufReader::with_capacity(READ_BUF, dec))
                    }
                    Compression::Gzip => Box::new(BufReader::with_capacity(
                        READ_BUF,
                        flate2::bufread::MultiGzDecoder::new(raw),
                    )),
                };
                Ok(Source::Lines {
                    path,
                    compression,
                    reader,
                    line: 0,
                })
            }
        }
    }

    /// Reads the next record of the current source.
    fn step(
        source: &mut Source,
        buf: &mut Vec<u8>,
        progress: &AtomicU64,
        schema: &mut Schema,
        id_field: Option<&str>,
        limit: u64,
    ) -> Step {
        match source {
            Source::Lines {
                path,
                compression,
                reader,
                line,
            } => loop {
                buf.clear();
                if buf.capacity() > SHRINK_LINE_BUF {
                    buf.shrink_to(64 * 1024);
                }
                // One byte over the limit tells an over-long line (a newline
                // within the limit ends a record of at most the limit).
                let n = match reader.as_mut().take(limit + 1).read_until(b'\n', buf) {
                    Ok(n) => n,
                    Err(e) => {
                        let source = match compression {
                            Compression::None => e,
                            c => io::Error::new(
                                e.kind(),
                                format!("corrupt or truncated {} stream after line {}: {e}", c.name(), line),
                            ),
                        };
                        return Step::Fatal(io_err(path, source));
                    }
                };
                if n == 0 {
                    return Step::End;
                }
                *line += 1;
                let content = buf.strip_suffix(b"\n").unwrap_or(buf).len() as u64;
                if content > limit {
                    // Pass over the rest of the over-long line without
                    // keeping it, so that reading can go on with the next
                    // one (skip_bad).
                    let rest = match reader.skip_until(b'\n') {
                        Ok(n) => n as u64,
                        Err(e) => return Step::Fatal(io_err(path, e)),
                    };
                    let total = n as u64 + rest;
                    return Step::Bad(CorpusError::BadRecord {
                        path: path.clone(),
                        line: *line,
                        message: format!(
                            "a record of {} is larger than the limit of {} (--max-record-bytes)",
                            bytes_text(total),
                            bytes_text(limit)
                        ),
                    });
                }
                let mut bytes = buf.as_slice();
                if let [rest @ .., b'\n'] = bytes {
                    bytes = rest;
                }
                if let [rest @ .., b'\r'] = bytes {
                    bytes = rest;
                }
                if *line == 1 {
                    if let [0xEF, 0xBB, 0xBF, rest @ ..] = bytes {
                        bytes = rest;
                    }
                }
                if bytes.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                let text = match std::str::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(e) => {
                        return Step::Bad(CorpusError::BadRecord {
                            path: path.clone(),
                            line: *line,
                            message: format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
                        })
                    }
                };
                let parsed = parse_record_with(text, schema, id_field).and_then(|doc| {
                    // Typed and dynamic schemas check values here, where
                    // the record's file and line are known.
                    if !schema.text_only() || schema.dynamic_mode() != crate::schema::Dynamic::Strict {
                        schema.admit(&doc).map_err(|e| e.to_string())?;
                    }
                    Ok(doc)
                });
                return match parsed {
                    Ok(doc) => Step::Doc(doc),
                    Err(message) => Step::Bad(CorpusError::BadRecord {
                        path: path.clone(),
                        line: *line,
                        message,
                    }),
                };
            },
            Source::Dir { root, files } => {
                let Some(rel) = files.next() else {
                    return Step::End;
                };
                let path = root.join(&rel);
                match std::fs::metadata(&path) {
                    Ok(m) if m.len() > limit => {
                        progress.fetch_add(m.len(), Ordering::Relaxed);
                        return Step::Bad(CorpusError::BadRecord {
                            path,
                            line: 0,
                            message: format!(
                                "a file of {} is larger than the record limit of {} (--max-record-bytes)",
                                bytes_text(m.len()),
                                bytes_text(limit)
                            ),
                        });
                    }
                    Ok(_) => {}
                    Err(e) => return Step::Fatal(io_err(&path, e)),
                }
                let mut content = Vec::new();
                let read = File::open(&path).and_then(|mut f| {
                    let hint = f.metadata().map(|m| m.len() as usize).unwrap_or(0);
                    content.reserve_exact(hint);
                    let r = f.read_to_end(&mut content);
                    progress.fetch_add(content.len() as u64, Ordering::Relaxed);
                    r
                });
                if let Err(e) = read {
                    return Step::Fatal(io_err(&path, e));
                }
                let mut body = match String::from_utf8(content) {
                    Ok(s) => s,
                    Err(e) => {
                        return Step::Bad(CorpusError::BadRecord {
                            path,
                            line: 0,
                            message: format!("invalid UTF-8 at byte {} of the file", e.utf8_error().valid_up_to()),
                        })
                    }
                };
                if body.starts_with('\u{FEFF}') {
                    body.drain(..'\u{FEFF}'.len_utf8());
                }
                let id = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let title = rel
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut doc = Document::new(id);
                for (name, text) in [("title", title), ("body", body)] {
                    if !text.is_empty() {
                        doc = doc.with_text(name, text);
                    }
                }
                Step::Doc(doc)
            }
        }
    }

    /// Counts and logs a skipped bad record.
    fn note_skipped(&mut self, err: &CorpusError) {
        self.skipped += 1;
        if self.skipped <= LOG_SKIPPED {
            tracing::warn!("skipping bad record: {err}");
            if self.skipped == LOG_SKIPPED {
                tracing::warn!("further bad records are skipped without being logged one by one");
            }
        }
    }
}

impl Iterator for Corpus {
    type Item = Result<Document, CorpusError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let source = match &mut self.current {
                Some(s) => s,
                None => match self.pending.pop_front() {
                    None => {
                        self.done = true;
                        if self.skipped > LOG_SKIPPED {
                            tracing::warn!("skipped {} bad records in total", self.skipped);
                        }
                        return None;
                    }
                    Some(input) => match self.start(input) {
                        Ok(s) => self.current.insert(s),
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    },
                },
            };
            let limit = self.opts.max_record_bytes.max(1);
            match Self::step(
                source,
                &mut self.line_buf,
                &self.progress,
                &mut self.schema,
                self.id_field.as_deref(),
                limit,
            ) {
                Step::Doc(doc) => return Some(Ok(doc)),
                Step::End => self.current = None,
                Step::Bad(e) if self.opts.skip_bad => self.note_skipped(&e),
                Step::Bad(e) | Step::Fatal(e) => {
                    self.done = true;
                    self.current = None;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::iter::FusedIterator for Corpus {}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("pending_inputs", &self.pending.len())
            .field("opts", &self.opts)
            .field("skipped", &self.skipped)
            .field("progress", &self.progress.load(Ordering::Relaxed))
            .field("total_bytes", &self.total_bytes)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
