//! `tierdex index`: build an index from corpus files.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use tierdex::analysis::AnalyzerConfig;
use tierdex::bloom::BloomParams;
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::indexing::reorder::{self, BpParams};
use tierdex::indexing::{build_index_with, BuildStats, IndexOptions, Progress};
use tierdex::layout::{Codec, Layout};
use tierdex::schema::{Dynamic, Schema};
use tierdex::update::Strategy;

use crate::human_bytes;
use crate::progress::bar;

/// Options of `tierdex index`.
#[derive(clap::Args)]
pub struct Args {
    /// Inputs: JSON-lines files ({"id"|"url", field: text, ...} per line,
    /// optionally .zst or .gz compressed) or directories of text files
    /// (title and body schema only).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Text fields of the documents, by name (e.g. `name,description`);
    /// each gets phrase filters when --bloom is on. Default: title,body
    /// (phrase filters on body). A record holding any other field is bad.
    #[arg(long, value_delimiter = ',', conflicts_with = "schema")]
    fields: Vec<String>,
    /// The fields as a schema file: an Elasticsearch mapping
    /// ({"dynamic": "strict", "properties": {"name": {"type": "text"},
    /// "tags": {"type": "keyword"}, "price": {"type": "double"}}}), or
    /// tierdex's own {"fields": [{"name": "name", "type": "text",
    /// "phrase_filters": true}], "default_fields": ["name"]}.
    #[arg(long, visible_alias = "mapping")]
    schema: Option<PathBuf>,
    /// What happens to a value no field is for: true (a field is added,
    /// typed by Elasticsearch's dynamic mapping rules), false (kept in
    /// _source only) or strict (the record is bad). Default: a mapping's
    /// own (true when it says nothing), else strict. Alone, `true` maps
    /// every field from the documents.
    #[arg(long, value_parser = |s: &str| s.parse::<Dynamic>())]
    dynamic: Option<Dynamic>,
    /// Key of each record's id (default `id`, or `url`); it is not a field.
    #[arg(long)]
    id_field: Option<String>,
    /// Fields unqualified query terms search (default: every field).
    #[arg(long, value_delimiter = ',')]
    default_fields: Vec<String>,
    /// Directory of the new index.
    #[arg(short, long)]
    out: PathBuf,
    /// Skip malformed records (reported and counted) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
    /// A record larger than this (a line of a JSON-lines input, or a file
    /// of a directory) is a bad record: an error naming file and line, or
    /// skipped with --skip-bad; it is never read into memory whole. At most
    /// the store's limit of 64M.
    #[arg(long, default_value = "64M", value_parser = crate::tier::parse_bytes)]
    max_record_bytes: usize,
    /// Indexing threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Threads of the final merge, each merging a range of the terms while
    /// the documents' side is copied (0: as many as --threads).
    #[arg(long, default_value_t = 0)]
    merge_threads: usize,
    /// Most segments one merge takes: more are first merged in groups of
    /// consecutive segments (0: as many as --memory-mb allows, for their
    /// dictionaries and mapped pages; otherwise at least 2)
    #[arg(long, default_value_t = 0)]
    merge_fan_in: usize,
    /// Most documents per segment built in memory.
    #[arg(long, default_value_t = 1_000_000)]
    segment_docs: usize,
    /// Resident memory to stay under while indexing (MiB): segments are
    /// cut small enough for every thread's documents and in-memory
    /// postings to fit. The default suits a 2-core, 4 GiB machine.
    #[arg(long, default_value_t = 1024)]
    memory_mb: usize,
    /// Most text (MiB) per segment built in memory (default: what
    /// --memory-mb allows, at most 128).
    #[arg(long)]
    segment_mb: Option<usize>,
    /// Keep the segments as built instead of merging them into one.
    #[arg(long)]
    no_merge: bool,
    /// Reorder the documents of the final merge by recursive graph
    /// bisection, so that documents sharing terms get nearby numbers:
    /// smaller postings and more blocks skipped by top-k queries, at the
    /// cost of indexing time (on Wikipedia, 180,131 articles: about 10 s
    /// on 2 cores, queries 1.16x faster). `auto`, the default with the
    /// merge, first bisects a sample of the documents and reorders only
    /// when it saves at least 15% of the postings' log-gap cost
    /// (documents with no topics to group keep their order); `on` always
    /// reorders. Off with --no-merge.
    #[arg(long, value_enum)]
    reorder: Option<Reorder>,
    /// Terms in fewer documents are left out of the reordering (they cost
    /// its time and gain little).
    #[arg(long, default_value_t = BpParams::default().min_doc_freq)]
    reorder_min_doc_freq: u32,
    /// Snowball English stemming (off by default, for parity with the peers).
    #[arg(long)]
    stemming: bool,
    /// Remove English stop words (off by default).
    #[arg(long)]
    stop_words: bool,
    /// The index's analyzer by name (standard, simple, whitespace, english,
    /// french, german, ..: every name a mapping accepts), instead of
    /// --stemming and --stop-words; fields with their own analyzer keep it.
    #[arg(long, conflicts_with_all = ["stemming", "stop_words"], value_parser = parse_analyzer)]
    analyzer: Option<AnalyzerConfig>,
    /// Replace an index already in --out: the new index is built beside it
    /// and swapped in when complete (a failed build leaves the old one);
    /// refused while a server or another command writes to it.
    #[arg(long)]
    force: bool,
    /// Postings layout: grouped (one region per term, metadata inline) or
    /// split (Lucene-like separate streams).
    #[arg(long, default_value = "grouped", value_parser = |s: &str| s.parse::<Layout>().map_err(|e| e.to_string()))]
    layout: Layout,
    /// Postings codec: compressed (bit-packed) or direct (raw u32 arrays).
    #[arg(long, default_value = "compressed", value_parser = |s: &str| s.parse::<Codec>().map_err(|e| e.to_string()))]
    codec: Codec,
    /// Phrase Bloom filters for the fields that ask for them (body in the
    /// default schema): per (term, document) filters of the terms right
    /// after and right before it, so phrase queries skip documents without
    /// reading positions. About 2 x 3 bytes per posting of a non-stop-word
    /// term within --bloom-max-doc-share with the defaults (on Wikipedia
    /// the index is 1.15x the size of one without filters).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    bloom: OnOff,
    /// Expected distinct neighbours per filter: more makes filters larger
    /// and keeps their false-positive rate for documents repeating a term.
    #[arg(long, default_value_t = BloomParams::default().expected)]
    bloom_expected: u32,
    /// Target false-positive rate of a filter holding --bloom-expected
    /// terms: lower rejects more non-matching documents, at more bytes per
    /// filter (0.003 with 2 terms: 3 bytes and 8 hashes).
    #[arg(long, default_value_t = BloomParams::default().fpr)]
    bloom_fpr: f64,
    /// Phrase filters only for the terms in at most this share of a
    /// segment's documents (and for any term in at most
    /// --bloom-min-doc-ceiling): common terms hold most postings, so most
    /// filter bytes, and gain little from them. 1: every term
    #[arg(long, default_value_t = BloomParams::default().max_doc_share)]
    bloom_max_doc_share: f64,
    /// Terms in at most this many documents of a segment keep their phrase
    /// filters whatever --bloom-max-doc-share says
    #[arg(long, default_value_t = BloomParams::default().min_doc_ceiling)]
    bloom_min_doc_ceiling: u64,
    /// How later `tierdex add`/`delete` updates are maintained, remembered
    /// by the index: immediate-merge, geometric (r=3), logarithmic,
    /// no-merge, in-place (postings appended to each term's chain of 8 KiB
    /// blocks) or in-place-contiguous (each term's data in one run, moved
    /// when it outgrows it); the in-place ones need the grouped layout.
    #[arg(long, default_value = "logarithmic", value_parser = |s: &str| s.parse::<Strategy>().map_err(|e| e.to_string()))]
    strategy: Strategy,
    /// Print the build statistics as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Whether the final merge reorders the documents.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Reorder {
    /// When a sample shows that it pays.
    Auto,
    /// Always.
    On,
    /// Never: the input's order.
    Off,
}

/// A switch.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Runs `tierdex index`.
/// The schema `--fields`, `--schema` and `--default-fields` ask for.
pub fn schema_of(
    fields: &[String],
    file: Option<&std::path::Path>,
    defaults: &[String],
    bloom: bool,
    dynamic: Option<Dynamic>,
) -> Result<Schema> {
    let mut schema = match (fields, file) {
        ([], None) if dynamic == Some(Dynamic::True) => Schema::dynamic(),
        ([], None) => Schema::default(),
        (names, None) => Schema::text_fields(names, bloom).context("bad --fields")?,
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Schema::from_json(&text).with_context(|| format!("schema file {}", path.display()))?
        }
    };
    if let Some(d) = dynamic {
        schema.set_dynamic(d);
    }
    if !defaults.is_empty() {
        schema.set_default_fields(defaults).context("bad --default-fields")?;
    }
    Ok(schema)
}

/// How the inputs are read, checked against the store's limit.
pub fn read_options(skip_bad: bool, max_record_bytes: usize) -> Result<ReadOptions> {
    let max = tierdex::corpus::MAX_RECORD_BYTES;
    if max_record_bytes == 0 || max_record_bytes as u64 > max {
        anyhow::bail!(
            "--max-record-bytes must be between 1 and {} (the largest document the store takes)",
            crate::human_bytes(max)
        );
    }
    Ok(ReadOptions {
        skip_bad,
        max_record_bytes: max_record_bytes as u64,
    })
}

pub fn run(a: Args) -> Result<()> {
    let schema = schema_of(
        &a.fields,
        a.schema.as_deref(),
        &a.default_fields,
        a.bloom == OnOff::On,
        a.dynamic,
    )?;
    let mut corpus =
        Corpus::open(&a.inputs, read_options(a.skip_bad, a.max_record_bytes)?)?.with_schema(Arc::new(schema.clone()));
    if let Some(k) = &a.id_field {
        corpus = corpus.with_id_field(k);
    }
    let opts = IndexOptions {
        schema,
        analyzer: a.analyzer.unwrap_or(AnalyzerConfig {
            stemming: a.stemming,
            stop_words: a.stop_words,
            ..Default::default()
        }),
        segment_docs: a.segment_docs,
        segment_bytes: a.segment_mb.unwrap_or(128).max(1) << 20,
        memory_budget: Some(a.memory_mb << 20),
        threads: a.threads,
        merge_threads: a.merge_threads,
        merge_fan_in: a.merge_fan_in,
        merge: !a.no_merge,
        overwrite: a.force,
        layout: a.layout,
        codec: a.codec,
        bloom: (a.bloom == OnOff::On).then_some(BloomParams {
            expected: a.bloom_expected,
            fpr: a.bloom_fpr,
            max_doc_share: a.bloom_max_doc_share,
            min_doc_ceiling: a.bloom_min_doc_ceiling,
        }),
        strategy: a.strategy,
        reorder: match a.reorder.unwrap_or(Reorder::Auto) {
            _ if a.no_merge => None,
            Reorder::Off => None,
            Reorder::On => Some(0.0),
            Reorder::Auto => Some(reorder::AUTO_MIN_GAIN),
        }
        .map(|min_gain| BpParams {
            min_doc_freq: a.reorder_min_doc_freq,
            min_gain,
            ..BpParams::default()
        }),
    };
    if a.reorder.is_some_and(|r| r != Reorder::Off) && a.no_merge {
        anyhow::bail!("--reorder on/auto reorders the final merge's documents: it cannot go with --no-merge");
    }
    if let Some(b) = opts.bloom {
        b.shape()
            .context("bad --bloom-expected, --bloom-fpr or --bloom-max-doc-share")?;
    }
    let read = corpus.progress();
    let pb = bar(Some(corpus.total_bytes()), true, "indexing");
    let started = Instant::now();
    let mut corpus = corpus;
    let total = corpus.total_bytes().max(1) as f64;
    let share = || read.load(Ordering::Relaxed) as f64 / total;
    let progress = |p| match p {
        Progress::Indexed { docs, .. } => {
            pb.set_position(read.load(Ordering::Relaxed));
            let rate = docs as f64 / started.elapsed().as_secs_f64().max(1e-3);
            pb.set_message(format!("{docs} docs, {rate:.0} docs/s"));
        }
        Progress::MergeStarted { segments } => {
            pb.set_prefix("merging");
            pb.set_message(format!("{segments} segments into one"));
        }
        Progress::Merging { terms } => pb.set_message(format!("{terms} terms merged")),
    };
    let stats = build_index_with(corpus.by_ref(), &a.out, &opts, &progress, Some(&share));
    pb.finish_and_clear();
    let stats = stats.with_context(|| format!("building the index in {}", a.out.display()))?;
    report(&stats, corpus.skipped(), &a.out, a.json)
}

fn report(s: &BuildStats, skipped: u64, out: &std::path::Path, json: bool) -> Result<()> {
    let secs = s.index_secs + s.merge_secs;
    if json {
        let mut v = serde_json::to_value(s)?;
        v["skipped"] = skipped.into();
        v["docs_per_sec"] = (s.docs as f64 / secs.max(1e-9)).into();
        println!("{v}");
        return Ok(());
    }
    println!("indexed {} documents into {}", s.docs, out.display());
    if skipped > 0 {
        println!("  skipped {skipped} malformed records");
    }
    if s.replaced > 0 {
        println!("  {} records replaced by a later record with the same id", s.replaced);
    }
    println!(
        "  {:.1} s ({:.1} s inverting, {:.1} s merging): {:.0} docs/s, {:.1} MB/s of text",
        secs,
        s.index_secs,
        s.merge_secs,
        s.docs as f64 / secs.max(1e-9),
        s.text_bytes as f64 / 1e6 / secs.max(1e-9)
    );
    println!(
        "  {} thread(s), segments of at most {} of text, {} merge thread(s)",
        s.threads,
        human_bytes(s.segment_bytes as u64),
        s.merge_threads
    );
    println!(
        "  index: {} in {} segment(s) ({:.0}% of the {} of text)",
        human_bytes(s.index_bytes),
        s.segments,
        100.0 * s.index_bytes as f64 / s.text_bytes.max(1) as f64,
        human_bytes(s.text_bytes)
    );
    Ok(())
}

/// An analyzer by its mapping name.
fn parse_analyzer(name: &str) -> Result<AnalyzerConfig, String> {
    AnalyzerConfig::named(name).ok_or_else(|| {
        format!(
            "unknown analyzer `{name}` ({})",
            tierdex::analysis::ANALYZER_NAMES.join(", ")
        )
    })
}
