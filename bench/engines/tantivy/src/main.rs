//! The tantivy peer engine of the tierdex benchmark: the engine protocol of
//! `bench/PROTOCOL.md` (`version`, `index`, `query`) on top of tantivy, with
//! tierdex's analyzer as tantivy's tokenizer so that both engines see the
//! same terms.

mod aggs;
mod corpus;
mod date;
mod index;
mod query;
mod schema;
mod structured;
mod tokenizer;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tierdex-tantivy-engine",
    about = "tantivy engine of the tierdex peer benchmark (bench/PROTOCOL.md)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prints `tantivy X.Y.Z`.
    Version,
    /// Builds a one-segment index in DIR from a JSON lines corpus.
    Index {
        /// JSON lines corpus, `{"id", "title", "body"}` per line, with the
        /// protocol's typed fields when present.
        #[arg(long)]
        corpus: PathBuf,
        /// Index directory (created; must not exist or be empty).
        #[arg(long)]
        index: PathBuf,
        /// Indexing threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Indexing memory budget in MiB, shared by all threads.
        #[arg(long = "memory-mb", default_value_t = 1024)]
        memory_mb: usize,
    },
    /// Answers `MODE<TAB>QUERY` lines from stdin, one JSON line each.
    Query {
        /// Index directory built by `index`.
        #[arg(long)]
        index: PathBuf,
        /// Worker threads evaluating queries concurrently.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

/// `X.Y.Z` of the tantivy crate linked in.
fn tantivy_version() -> String {
    // tantivy::version() displays as "tantivy v0.27.0, index_format v7".
    let full = tantivy::version().to_string();
    full.strip_prefix("tantivy v")
        .and_then(|rest| rest.split(',').next())
        .map(str::to_owned)
        .unwrap_or(full)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Version => {
            println!("tantivy {}", tantivy_version());
            Ok(())
        }
        Command::Index {
            corpus,
            index,
            threads,
            memory_mb,
        } => index::run(&corpus, &index, threads, memory_mb),
        Command::Query { index, threads } => query::run(&index, threads),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
