//! `index`: streams a JSON lines corpus into a new tantivy index, commits,
//! then force-merges it into one segment.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use tantivy::directory::MmapDirectory;
use tantivy::merge_policy::NoMergePolicy;
use tantivy::{DateTime, Index, IndexSettings, IndexWriter, TantivyDocument};

use crate::corpus::Corpus;
use crate::schema::{self, Fields};

/// tantivy's bounds on the memory arena of one indexing thread
/// (`MEMORY_BUDGET_NUM_BYTES_MIN`/`_MAX` in its `index_writer.rs`, not
/// exported).
const MIN_BYTES_PER_THREAD: usize = 15_000_000;
const MAX_BYTES_PER_THREAD: usize = u32::MAX as usize - 1_000_000 - 1;
/// tantivy's limit on indexing threads (`MAX_NUM_THREAD`).
const MAX_THREADS: usize = 8;

/// Memory budget of the writer that only runs the final merge (merging
/// does not use the indexing arena; tantivy wants at least 15 MB anyway).
const MERGE_WRITER_BYTES: usize = 50_000_000;

/// Log progress every this many documents.
const PROGRESS_EVERY: u64 = 1_000_000;

pub fn run(corpus_path: &Path, dir: &Path, threads: usize, memory_mb: usize) -> Result<()> {
    ensure!(
        (1..=MAX_THREADS).contains(&threads),
        "--threads must be between 1 and {MAX_THREADS} (tantivy's limit), got {threads}"
    );
    let total_bytes = memory_mb.saturating_mul(1 << 20);
    let mut per_thread = total_bytes / threads;
    ensure!(
        per_thread >= MIN_BYTES_PER_THREAD,
        "--memory-mb {memory_mb} gives {} MB per indexing thread; tantivy needs at least {} MB per thread",
        per_thread / 1_000_000,
        MIN_BYTES_PER_THREAD / 1_000_000
    );
    if per_thread > MAX_BYTES_PER_THREAD {
        eprintln!(
            "tantivy: a thread's indexing arena is limited to 4 GB; using {} MB per thread instead of {}",
            MAX_BYTES_PER_THREAD >> 20,
            per_thread >> 20
        );
        per_thread = MAX_BYTES_PER_THREAD;
    }

    // The corpus first: a missing corpus must not leave an index directory.
    ensure!(corpus_path.is_file(), "corpus {} is not a file", corpus_path.display());
    let corpus = Corpus::open(corpus_path)?;

    let created = prepare_dir(dir)?;
    let result = build(corpus, dir, threads, per_thread);
    if result.is_err() {
        // Do not leave a half-built index behind (the directory was empty
        // or did not exist, so everything in it is ours).
        clean_up(dir, created);
    }
    let (docs, index_secs, merge_secs) = result?;
    println!(
        "{}",
        serde_json::json!({"docs": docs, "index_secs": index_secs, "merge_secs": merge_secs})
    );
    Ok(())
}

/// Creates `dir` or checks that it is an empty directory; tells whether it
/// was created.
fn prepare_dir(dir: &Path) -> Result<bool> {
    match std::fs::metadata(dir) {
        Ok(meta) => {
            ensure!(
                meta.is_dir(),
                "index path {} exists and is not a directory",
                dir.display()
            );
            let mut entries =
                std::fs::read_dir(dir).with_context(|| format!("cannot list index directory {}", dir.display()))?;
            ensure!(
                entries.next().is_none(),
                "index directory {} is not empty (a new index needs a new or empty directory)",
                dir.display()
            );
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create index directory {}", dir.display()))?;
            Ok(true)
        }
        Err(e) => Err(e).with_context(|| format!("cannot access index directory {}", dir.display())),
    }
}

fn clean_up(dir: &Path, created: bool) {
    if created {
        let _ = std::fs::remove_dir_all(dir);
    } else if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path: PathBuf = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// Indexes, commits, merges; returns (docs, index_secs, merge_secs).
fn build(corpus: Corpus, dir: &Path, threads: usize, bytes_per_thread: usize) -> Result<(u64, f64, f64)> {
    let start = Instant::now();
    let (schema, fields) = schema::build();
    let directory =
        MmapDirectory::open(dir).with_context(|| format!("cannot open index directory {}", dir.display()))?;
    let index = Index::create(directory, schema, IndexSettings::default()).context("cannot create the index")?;
    schema::register_tokenizer(&index);

    let mut writer: IndexWriter<TantivyDocument> = index
        .writer_with_num_threads(threads, bytes_per_thread * threads)
        .context("cannot create the index writer")?;
    let docs = add_documents(&writer, corpus, fields, start)?;
    ensure!(docs > 0, "the corpus has no documents: nothing to index");
    writer.commit().context("commit failed")?;
    // Background merges the default merge policy may have started during
    // indexing belong to indexing: let them finish (and start no more),
    // then close this writer so that the final merge sees a settled index.
    writer.set_merge_policy(Box::new(NoMergePolicy));
    writer.wait_merging_threads().context("indexing threads failed")?;
    let index_secs = start.elapsed().as_secs_f64();

    let merge_start = Instant::now();
    let before = index.searchable_segment_ids()?.len();
    let mut writer: IndexWriter<TantivyDocument> = index
        .writer_with_num_threads(1, MERGE_WRITER_BYTES)
        .context("cannot reopen the index writer for the final merge")?;
    writer.set_merge_policy(Box::new(NoMergePolicy));
    let segment_ids = index.searchable_segment_ids()?;
    if segment_ids.len() > 1 {
        // The merged segment replaces the committed ones in meta.json
        // (tantivy saves the metas at the end of a merge of committed
        // segments): no further commit needed.
        writer.merge(&segment_ids).wait().context("final merge failed")?;
    }
    writer
        .garbage_collect_files()
        .wait()
        .context("garbage collection failed")?;
    writer.wait_merging_threads().context("merging threads failed")?;
    let merge_secs = merge_start.elapsed().as_secs_f64();

    let metas = index.load_metas().context("cannot read back the index metadata")?;
    ensure!(
        metas.segments.len() == 1,
        "expected one segment after the final merge, found {}",
        metas.segments.len()
    );
    let indexed = u64::from(metas.segments[0].num_docs());
    if indexed != docs {
        bail!("read {docs} documents but the merged index holds {indexed}");
    }
    eprintln!(
        "tantivy: indexed {docs} docs in {index_secs:.2} s ({before} segment(s)), merged into one in {merge_secs:.2} s"
    );
    Ok((docs, index_secs, merge_secs))
}

/// Streams the corpus into the writer; returns the number of documents.
fn add_documents(
    writer: &IndexWriter<TantivyDocument>,
    mut corpus: Corpus,
    fields: Fields,
    start: Instant,
) -> Result<u64> {
    let mut docs = 0u64;
    let Some(typed) = fields.typed else {
        bail!("the schema has no typed fields");
    };
    // The error names the file and the 1-based line.
    while let Some(d) = corpus.next_record()? {
        let mut doc = TantivyDocument::with_capacity(d.id.len() + d.title.len() + d.body.len() + 64);
        doc.add_text(fields.id, &d.id);
        doc.add_text(fields.title, &d.title);
        doc.add_text(fields.body, &d.body);
        for c in &d.category {
            doc.add_text(typed.category, c);
        }
        for t in &d.tags {
            doc.add_text(typed.tags, t);
        }
        if let Some(ms) = d.date {
            doc.add_date(typed.date, DateTime::from_timestamp_millis(ms));
        }
        if let Some(p) = d.price {
            doc.add_f64(typed.price, p);
        }
        if let Some(p) = d.popularity {
            doc.add_i64(typed.popularity, p);
        }
        writer.add_document(doc).context("cannot add a document")?;
        docs += 1;
        if docs.is_multiple_of(PROGRESS_EVERY) {
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "tantivy: {docs} docs read in {secs:.1} s ({:.0} docs/s)",
                docs as f64 / secs
            );
        }
    }
    Ok(docs)
}
