//! Ranking quality on test collections with relevance judgments:
//! nDCG@10 (graded gains `2^rel - 1`) and MAP (relevant: `rel > 0`), over
//! the queries that have at least one relevant document, as trec_eval does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::commands::BenchQuery;
use crate::engines::Answer;

/// A test collection: documents, queries and judgments.
#[derive(Debug, Clone)]
pub struct Collection {
    /// Directory name (`cranfield`, ...).
    pub name: String,
    /// `docs.jsonl`.
    pub docs: PathBuf,
    /// Query id and text.
    pub queries: Vec<(String, String)>,
    /// Query id -> document id -> relevance.
    pub qrels: HashMap<String, HashMap<String, i32>>,
}

/// Quality of one engine on one collection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Mean nDCG@10.
    pub ndcg10: f64,
    /// Mean average precision (ranks up to 1000).
    pub map: f64,
    /// Queries evaluated (with at least one relevant document).
    pub queries: usize,
}

/// The collections under `root` (directories holding `docs.jsonl`,
/// `queries.tsv` and `qrels.tsv`), by name.
pub fn find_collections(root: &Path) -> Result<Vec<Collection>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(out);
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let (docs, queries, qrels) = (dir.join("docs.jsonl"), dir.join("queries.tsv"), dir.join("qrels.tsv"));
        if docs.is_file() && queries.is_file() && qrels.is_file() {
            out.push(load(&dir)?);
        }
    }
    Ok(out)
}

fn load(dir: &Path) -> Result<Collection> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).with_context(|| format!("reading {}/{f}", dir.display()));
    let queries = read("queries.tsv")?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(id, text)| (id.trim().to_string(), text.to_string()))
        .collect();
    let mut qrels: HashMap<String, HashMap<String, i32>> = HashMap::new();
    for line in read("qrels.tsv")?.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() >= 3 {
            let rel = f[2].trim().parse().unwrap_or(0);
            qrels
                .entry(f[0].trim().to_string())
                .or_default()
                .insert(f[1].trim().to_string(), rel);
        }
    }
    Ok(Collection {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        docs: dir.join("docs.jsonl"),
        queries,
        qrels,
    })
}

/// A natural-language query as plain OR terms every engine parses alike:
/// lowercased (so `AND`/`OR`/`NOT` stay words) with Lucene's query-syntax
/// characters replaced by spaces.
pub fn sanitize(text: &str) -> String {
    let cleaned: String = text
        .to_lowercase()
        .chars()
        .map(|c| if "+-&|!(){}[]^\"~*?:\\/".contains(c) { ' ' } else { c })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Collection {
    /// The collection's queries as `TOP_1000` benchmark queries (empty ones dropped).
    pub fn bench_queries(&self) -> Vec<(String, BenchQuery)> {
        self.queries
            .iter()
            .map(|(id, t)| (id.clone(), sanitize(t)))
            .filter(|(_, t)| !t.is_empty())
            .map(|(id, text)| {
                (
                    id,
                    BenchQuery {
                        source: self.name.clone(),
                        category: "quality".into(),
                        mode: "TOP_1000".into(),
                        text,
                    },
                )
            })
            .collect()
    }

    /// Scores ranked answers (`answers[i]` for query id `ids[i]`).
    pub fn evaluate(&self, ids: &[String], answers: &[Answer]) -> Metrics {
        let (mut ndcg, mut map, mut n) = (0.0, 0.0, 0usize);
        for (id, answer) in ids.iter().zip(answers) {
            let Some(judged) = self.qrels.get(id) else {
                continue;
            };
            let relevant = judged.values().filter(|&&r| r > 0).count();
            if relevant == 0 {
                continue;
            }
            let ranked: Vec<i32> = answer
                .hits
                .iter()
                .map(|h| judged.get(&h.id).copied().unwrap_or(0))
                .collect();
            ndcg += ndcg_at(&ranked, judged.values().copied(), 10);
            map += average_precision(&ranked, relevant);
            n += 1;
        }
        if n == 0 {
            return Metrics::default();
        }
        Metrics {
            ndcg10: ndcg / n as f64,
            map: map / n as f64,
            queries: n,
        }
    }
}

fn gain(rel: i32) -> f64 {
    if rel > 0 {
        (2f64).powi(rel) - 1.0
    } else {
        0.0
    }
}

/// nDCG at `k` of relevance grades in rank order, against the ideal order
/// of all judged grades.
pub fn ndcg_at(ranked: &[i32], judged: impl Iterator<Item = i32>, k: usize) -> f64 {
    let dcg = |rels: &mut dyn Iterator<Item = i32>| -> f64 {
        rels.take(k)
            .enumerate()
            .map(|(i, r)| gain(r) / ((i + 2) as f64).log2())
            .sum()
    };
    let mut ideal: Vec<i32> = judged.filter(|&r| r > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let best = dcg(&mut ideal.into_iter());
    if best == 0.0 {
        0.0
    } else {
        dcg(&mut ranked.iter().copied()) / best
    }
}

/// Average precision of relevance grades in rank order, with `relevant`
/// relevant documents in all.
pub fn average_precision(ranked: &[i32], relevant: usize) -> f64 {
    let mut hits = 0;
    let mut sum = 0.0;
    for (i, &r) in ranked.iter().enumerate() {
        if r > 0 {
            hits += 1;
            sum += hits as f64 / (i + 1) as f64;
        }
    }
    if relevant == 0 {
        0.0
    } else {
        sum / relevant as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_by_hand() {
        // Ranks 1 and 3 relevant (grades 2 and 1), 3 relevant in all.
        let ranked = [2, 0, 1];
        let dcg = 3.0 / 2f64.log2() + 1.0 / 4f64.log2();
        let idcg = 3.0 / 2f64.log2() + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((ndcg_at(&ranked, [2, 1, 1].into_iter(), 10) - dcg / idcg).abs() < 1e-12);
        assert!((average_precision(&ranked, 3) - (1.0 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert_eq!(ndcg_at(&[1, 1], [1, 1].into_iter(), 10), 1.0);
    }

    #[test]
    fn sanitize_removes_syntax() {
        assert_eq!(
            sanitize("What (AND why)? heat-transfer: \"x\""),
            "what and why heat transfer x"
        );
    }
}
