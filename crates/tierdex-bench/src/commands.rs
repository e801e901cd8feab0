//! Query sets: protocol lines (`MODE<TAB>QUERY`) with a source and a
//! category per query.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Modes of the protocol.
pub const MODES: [&str; 5] = ["TOP_10", "TOP_10_COUNT", "COUNT", "TOP_100", "TOP_1000"];

/// One benchmark query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchQuery {
    /// Where it comes from (`commands`, `generated`, a collection name).
    pub source: String,
    /// Its category (`term`, `and`, `or`, `phrase`, `mixed`, or a generated one).
    pub category: String,
    /// Protocol mode.
    pub mode: String,
    /// Query text.
    pub text: String,
}

impl BenchQuery {
    /// The protocol line.
    pub fn line(&self) -> String {
        format!("{}\t{}", self.mode, self.text)
    }
}

/// The shape of a query of the command file.
pub fn categorize(text: &str) -> &'static str {
    let t = text.trim();
    if t.starts_with('"') && t.ends_with('"') && t.len() > 1 && !t[1..t.len() - 1].contains('"') {
        return "phrase";
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    if words.len() == 1 && !t.contains(['+', '-', '"', '(', ')', ':']) {
        return "term";
    }
    if words.len() > 1 && words.iter().all(|w| w.starts_with('+') && w.len() > 1) {
        return "and";
    }
    if words.len() > 1 && !t.contains(['+', '-', '"', '(', ')', ':']) {
        return "or";
    }
    "mixed"
}

/// Reads a search-benchmark-game command file, skipping lines that are not
/// `MODE<TAB>QUERY` with a known mode (the file has stray log lines); a
/// third column (a workload file's) is the query's category.
/// Keeps every `sample`-th valid line (1: all).
pub fn read_command_file(path: &Path, sample: usize) -> Result<Vec<BenchQuery>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    let mut valid = 0usize;
    for line in text.lines() {
        let Some((mode, query)) = line.split_once('\t') else {
            continue;
        };
        // A workload file (`tierdex-bench workload`) adds each query's category.
        let (query, category) = match query.split_once('\t') {
            Some((q, c)) => (q, Some(c.trim())),
            None => (query, None),
        };
        if !MODES.contains(&mode) || query.trim().is_empty() {
            continue;
        }
        valid += 1;
        if !(valid - 1).is_multiple_of(sample.max(1)) {
            continue;
        }
        out.push(BenchQuery {
            source: "commands".into(),
            category: category.filter(|c| !c.is_empty()).unwrap_or(categorize(query)).into(),
            mode: mode.into(),
            text: query.into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        assert_eq!(categorize("hurricane"), "term");
        assert_eq!(categorize("car stereo"), "or");
        assert_eq!(categorize("+times +union"), "and");
        assert_eq!(categorize("\"ugly people\""), "phrase");
        assert_eq!(categorize("+a b"), "mixed");
        assert_eq!(categorize("a -b"), "mixed");
    }

    #[test]
    fn reads_and_samples_command_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.txt");
        std::fs::write(
            &p,
            "TOP_10\ta b\n- Run #1 of 3\nCOUNT\t+a +b\nTOP_10_COUNT\t\"a b\"\nBOGUS\tx\nTOP_10\t\n",
        )
        .unwrap();
        let all = read_command_file(&p, 1).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].line(), "COUNT\t+a +b");
        assert_eq!(read_command_file(&p, 2).unwrap().len(), 2);
        // A workload file's third column is the category, not query text.
        std::fs::write(&p, "TOP_10\t+of +to\tand\nCOUNT\ta b\t\n").unwrap();
        let w = read_command_file(&p, 1).unwrap();
        assert_eq!(
            (w[0].line().as_str(), w[0].category.as_str()),
            ("TOP_10\t+of +to", "and")
        );
        assert_eq!((w[1].line().as_str(), w[1].category.as_str()), ("COUNT\ta b", "or"));
    }
}
