//! `tierdex get`: documents by id, with their stored `_source`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use tierdex::search::Searcher;

use crate::existing_dir;

/// Options of `tierdex get`.
#[derive(clap::Args)]
pub struct Args {
    /// Index directory.
    #[arg(value_parser = existing_dir)]
    dir: PathBuf,
    /// Document ids; `-` reads one id per line from stdin.
    #[arg(required = true)]
    ids: Vec<String>,
    /// Only these parts of each document (`_source` patterns: `user.name`,
    /// `tags`, `user.*`), comma-separated.
    #[arg(long, value_delimiter = ',')]
    source_includes: Vec<String>,
    /// Leave out these parts (patterns), comma-separated.
    #[arg(long, value_delimiter = ',')]
    source_excludes: Vec<String>,
    #[command(flatten)]
    tier: crate::tier::TierArgs,
}

/// Runs `tierdex get`: one JSON line per id (`{"_id", "found",
/// "_source"}`), in order; exits non-zero when some id was not found.
pub fn run(a: Args) -> Result<()> {
    let s = Searcher::open_with(&a.dir, a.tier.open_options())?;
    if s.unapplied_log_records() > 0 {
        eprintln!(
            "warning: {} acknowledged batches are only in the write-ahead log and not seen here; \
             open the index with a writer (tierdex add, serve) to apply them",
            s.unapplied_log_records()
        );
    }
    let filter = tierdex::query::dsl::SourceFilter {
        disabled: false,
        includes: a.source_includes.clone(),
        excludes: a.source_excludes.clone(),
    };
    let mut ids = Vec::new();
    for id in a.ids {
        if id == "-" {
            for line in crate::lines::text_lines(std::io::stdin().lock()) {
                let line = line?.map_err(|why| anyhow::anyhow!("reading ids from stdin: {why}"))?;
                if !line.trim().is_empty() {
                    ids.push(line.trim().to_string());
                }
            }
        } else {
            ids.push(id);
        }
    }
    let mut out = std::io::stdout().lock();
    let mut missing = 0;
    for id in &ids {
        let v = match s.get(id)? {
            Some(d) => serde_json::json!({ "_id": id, "found": true, "_source": filter.apply(&d) }),
            None => {
                missing += 1;
                serde_json::json!({ "_id": id, "found": false })
            }
        };
        writeln!(out, "{v}")?;
    }
    if missing > 0 {
        bail!("{missing} of {} ids not found", ids.len());
    }
    Ok(())
}
