//! `tierdex gen`: write a seeded synthetic corpus.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use tierdex::corpus::gen::{write_corpus, GenOptions};

use crate::human_bytes;
use crate::progress::bar;

/// Options of `tierdex gen`.
#[derive(clap::Args)]
pub struct Args {
    /// Number of documents.
    #[arg(long, default_value_t = 200_000)]
    docs: u64,
    /// Random seed (the same seed gives the same corpus).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Distinct words in the vocabulary.
    #[arg(long, default_value_t = 250_000)]
    vocab: usize,
    /// Add typed fields to every document: `date` (ISO-8601, 2005-2024),
    /// `category` (a keyword, ~1,000 Zipf-distributed values), `tags` (0-5
    /// keywords of 200), `price` (a log-normal double, absent from 3%) and
    /// `popularity` (a heavy-tailed long).
    #[arg(long)]
    typed: bool,
    /// Output file: .jsonl, .jsonl.zst or .jsonl.gz.
    #[arg(short, long)]
    out: PathBuf,
}

/// Runs `tierdex gen`.
pub fn run(a: Args) -> Result<()> {
    let opts = GenOptions {
        docs: a.docs,
        seed: a.seed,
        vocab_size: a.vocab,
        typed: a.typed,
        ..GenOptions::default()
    };
    let pb = bar(Some(a.docs), false, "generating");
    let started = Instant::now();
    let bytes = write_corpus(&opts, &a.out, &|done| pb.set_position(done))
        .with_context(|| format!("writing {}", a.out.display()))?;
    pb.finish_and_clear();
    println!(
        "wrote {} documents ({}) to {} in {:.1} s",
        a.docs,
        human_bytes(bytes),
        a.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
