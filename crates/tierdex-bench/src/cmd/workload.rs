//! `tierdex-bench workload`: prints a generated workload over a tierdex
//! index.

use std::path::PathBuf;

use anyhow::Result;
use tierdex::search::Searcher;
use tierdex_bench::workload;

/// Options of `tierdex-bench workload`.
#[derive(clap::Args)]
pub struct Args {
    /// A tierdex index.
    pub index: PathBuf,
    /// Queries per category.
    #[arg(long, default_value_t = 100)]
    pub per_category: usize,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Mode of every line.
    #[arg(long, default_value = "TOP_10")]
    pub mode: String,
}

/// Runs `tierdex-bench workload`.
pub fn run(a: Args) -> Result<()> {
    let searcher = Searcher::open(&a.index)?;
    for q in workload::generate(&searcher, a.per_category, a.seed)? {
        println!("{}\t{}\t{}", a.mode, q.text, q.category);
    }
    Ok(())
}
