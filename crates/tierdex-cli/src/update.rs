//! `tierdex add`, `tierdex delete` and `tierdex compact`: updates to an
//! index on disk. Each command opens the index's writer (replaying any
//! logged changes), applies its changes in logged batches, and flushes by
//! the index's strategy before returning, so the change is durable and
//! visible to `tierdex search`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tierdex::analysis::AnalyzerConfig;
use tierdex::corpus::Corpus;
use tierdex::layout::Format;
use tierdex::schema::Schema;
use tierdex::update::{FlushReport, IndexWriter, Strategy, WriterOptions};

use crate::progress::bar;

/// Options shared by the update commands.
#[derive(clap::Args)]
pub struct WriterArgs {
    /// Buffer this many documents before writing a segment (also the
    /// merge strategies' flush unit).
    #[arg(long, default_value_t = 10_000)]
    buffer_docs: usize,
    /// Buffer at most this many MiB of text before writing a segment.
    #[arg(long, default_value_t = 64)]
    buffer_mb: usize,
    /// Open the index even though its write-ahead log holds a damaged
    /// record (the open fails otherwise, naming it): the log is cut there,
    /// and the batch it held and every later one are lost. Copy the log
    /// file aside first if they matter.
    #[arg(long)]
    truncate_corrupt_log: bool,
}

impl WriterArgs {
    fn options(&self) -> WriterOptions {
        WriterOptions {
            buffer_docs: self.buffer_docs,
            buffer_bytes: self.buffer_mb.max(1) << 20,
            truncate_corrupt_log: self.truncate_corrupt_log,
            ..WriterOptions::default()
        }
    }
}

/// Flushes `w`; a failure is a warning, since the changes are durable in
/// the write-ahead log already (a full disk must not make deletions fail:
/// they are how space is given back).
fn flush_or_warn(w: &IndexWriter, what: &str) {
    if let Err(e) = w.flush() {
        eprintln!(
            "warning: the {what} are durable in the write-ahead log, but writing them into the index failed: {e:#}; \
             the next writer of the index applies them (`tierdex compact {}` once the cause is gone); until then \
             `tierdex search` does not see them",
            w.dir().display()
        );
    }
}

/// Options of `tierdex add`.
#[derive(clap::Args)]
pub struct AddArgs {
    /// The index directory.
    dir: PathBuf,
    /// Documents: JSON-lines files ({"id"|"url", field: text, ...} per
    /// line, .zst/.gz ok) or directories of text files. A document whose id
    /// is already in the index replaces it; a field the index does not have
    /// makes the record bad.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Create the index if the directory holds none (with this strategy).
    #[arg(long)]
    create: bool,
    /// Text fields of an index made by --create (default: title,body).
    #[arg(long, value_delimiter = ',', conflicts_with = "schema", requires = "create")]
    fields: Vec<String>,
    /// Schema file or Elasticsearch mapping of an index made by --create
    /// (see `tierdex index --help`).
    #[arg(long, visible_alias = "mapping", requires = "create")]
    schema: Option<PathBuf>,
    /// Dynamic mapping of an index made by --create: true, false or strict
    /// (see `tierdex index --help`).
    #[arg(long, requires = "create", value_parser = |s: &str| s.parse::<tierdex::schema::Dynamic>())]
    dynamic: Option<tierdex::schema::Dynamic>,
    /// Key of each record's id (default `id`, or `url`); it is not a field.
    #[arg(long)]
    id_field: Option<String>,
    /// Strategy of an index made by --create: immediate-merge, geometric,
    /// logarithmic, no-merge, in-place or in-place-contiguous.
    #[arg(long, default_value = "logarithmic", value_parser = |s: &str| s.parse::<Strategy>().map_err(|e| e.to_string()))]
    strategy: Strategy,
    /// Skip malformed records (reported and counted) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
    /// A record larger than this (a line of a JSON-lines input, or a file
    /// of a directory) is a bad record: an error naming file and line, or
    /// skipped with --skip-bad; it is never read into memory whole. At most
    /// the store's limit of 64M.
    #[arg(long, default_value = "64M", value_parser = crate::tier::parse_bytes)]
    max_record_bytes: usize,
    /// Documents per logged batch.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    #[command(flatten)]
    writer: WriterArgs,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Options of `tierdex delete`.
#[derive(clap::Args)]
pub struct DeleteArgs {
    /// The index directory.
    dir: PathBuf,
    /// Ids of the documents to delete; `-` reads ids from stdin, one per line.
    #[arg(required = true)]
    ids: Vec<String>,
    #[command(flatten)]
    writer: WriterArgs,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Options of `tierdex compact`.
#[derive(clap::Args)]
pub struct CompactArgs {
    /// The index directory.
    dir: PathBuf,
    #[command(flatten)]
    writer: WriterArgs,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn open(dir: &std::path::Path, options: WriterOptions, create: Option<(Strategy, Schema)>) -> Result<IndexWriter> {
    let exists = dir.join(tierdex::index::manifest::MANIFEST).exists();
    match (exists, create) {
        (true, Some((_, schema))) if !schema.is_title_body() => bail!(
            "{} already holds an index, with its own fields: --fields and --schema only apply to a new one",
            dir.display()
        ),
        (true, _) => IndexWriter::open(dir, options).with_context(|| format!("opening {}", dir.display())),
        (false, Some((strategy, schema))) => IndexWriter::create_with_schema(
            dir,
            schema,
            AnalyzerConfig::default(),
            Format::default(),
            strategy,
            options,
        )
        .with_context(|| format!("creating an index in {}", dir.display())),
        (false, None) => bail!(
            "{} holds no tierdex index: build one with `tierdex index`, or pass --create",
            dir.display()
        ),
    }
}

fn print_report(what: serde_json::Value, flush: &FlushReport, w: &IndexWriter, json: bool) -> Result<()> {
    let mut v = what;
    v["flush"] = serde_json::to_value(flush)?;
    v["live_docs"] = w.live_docs().into();
    v["strategy"] = w.strategy().name().into();
    if json {
        println!("{v}");
    } else {
        for (k, x) in v.as_object().into_iter().flatten() {
            if k != "flush" {
                println!("{k}: {x}");
            }
        }
        println!(
            "flushed {} documents in {:.2} s: {} segments merged, {} compacted, {} segments now, {} bytes written",
            flush.docs_flushed,
            flush.secs,
            flush.segments_merged,
            flush.segments_compacted,
            flush.segments,
            flush.bytes_written
        );
    }
    Ok(())
}

/// Runs `tierdex add`.
pub fn add(a: AddArgs) -> Result<()> {
    if a.batch == 0 {
        bail!("--batch must be positive");
    }
    let create = match a.create {
        true => Some((
            a.strategy,
            crate::index::schema_of(&a.fields, a.schema.as_deref(), &[], true, a.dynamic)?,
        )),
        false => None,
    };
    let w = open(&a.dir, a.writer.options(), create)?;
    let mut corpus = Corpus::open(&a.inputs, crate::index::read_options(a.skip_bad, a.max_record_bytes)?)?
        .with_schema(Arc::new(w.schema()));
    if let Some(k) = &a.id_field {
        corpus = corpus.with_id_field(k);
    }
    let read = corpus.progress();
    let pb = bar(Some(corpus.total_bytes()), true, "adding");
    let (mut added, mut replaced) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(a.batch);
    let mut send = |batch: &mut Vec<tierdex::Document>| -> Result<()> {
        let applied = w.add(std::mem::take(batch))?;
        added += applied.added;
        replaced += applied.replaced;
        pb.set_position(read.load(Ordering::Relaxed));
        pb.set_message(format!("{added} docs"));
        Ok(())
    };
    for item in corpus.by_ref() {
        batch.push(item.context("reading the documents")?);
        if batch.len() >= a.batch {
            send(&mut batch)?;
        }
    }
    if !batch.is_empty() {
        send(&mut batch)?;
    }
    pb.set_prefix("flushing");
    flush_or_warn(&w, "additions");
    pb.finish_and_clear();
    let flush = w.stats().maintenance;
    let v = serde_json::json!({
        "added": added,
        "replaced": replaced,
        "skipped": corpus.skipped(),
    });
    print_report(v, &flush, &w, a.json)
}

/// Runs `tierdex delete`.
pub fn delete(a: DeleteArgs) -> Result<()> {
    let mut ids = Vec::new();
    for id in a.ids {
        if id == "-" {
            for line in crate::lines::text_lines(std::io::stdin().lock()) {
                let line = line
                    .context("reading ids from stdin")?
                    .map_err(|why| anyhow::anyhow!("reading ids from stdin: {why}; nothing was deleted"))?;
                let line = line.trim();
                if !line.is_empty() {
                    ids.push(line.to_string());
                }
            }
        } else {
            ids.push(id);
        }
    }
    let w = open(&a.dir, a.writer.options(), None)?;
    let applied = w.delete(ids)?;
    flush_or_warn(&w, "deletions");
    let flush = w.stats().maintenance;
    let v = serde_json::json!({ "deleted": applied.deleted, "not_found": applied.not_found });
    print_report(v, &flush, &w, a.json)
}

/// Runs `tierdex compact`.
pub fn compact(a: CompactArgs) -> Result<()> {
    let w = open(&a.dir, a.writer.options(), None)?;
    let pb = bar(None, false, "compacting");
    w.compact()?;
    pb.finish_and_clear();
    let flush = w.stats().maintenance;
    print_report(serde_json::json!({}), &flush, &w, a.json)
}
