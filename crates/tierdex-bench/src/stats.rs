//! Statistics: per-query minimum and median over passes, per-category
//! aggregates over the queries every engine answered, ratios to peers,
//! count agreement and top-10 overlap.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::commands::BenchQuery;
use crate::engines::Answer;

/// Per-query timing over the measured passes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueryTime {
    /// Fastest pass (µs).
    pub min_us: u64,
    /// Median pass (µs).
    pub median_us: u64,
}

/// Minimum and median of each query's pass timings.
pub fn query_times(timings: &[Vec<u64>]) -> Vec<QueryTime> {
    timings
        .iter()
        .map(|t| {
            let mut v = t.clone();
            v.sort_unstable();
            QueryTime {
                min_us: v.first().copied().unwrap_or(0),
                median_us: v.get(v.len() / 2).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Latency of one engine over a group of queries (of their medians).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Queries in the group.
    pub n: usize,
    /// Mean of the per-query medians (µs).
    pub mean_us: f64,
    /// Median of the per-query medians (µs).
    pub p50_us: f64,
    /// 99th percentile of the per-query medians (µs).
    pub p99_us: f64,
    /// Mean of the per-query minimums (µs).
    pub mean_min_us: f64,
}

impl Latency {
    /// Aggregates the times of the queries `idx`.
    pub fn of(times: &[QueryTime], idx: &[usize]) -> Latency {
        let mut med: Vec<f64> = idx.iter().map(|&i| times[i].median_us as f64).collect();
        med.sort_by(f64::total_cmp);
        let n = med.len();
        if n == 0 {
            return Latency::default();
        }
        Latency {
            n,
            mean_us: med.iter().sum::<f64>() / n as f64,
            p50_us: percentile(&med, 0.5),
            p99_us: percentile(&med, 0.99),
            mean_min_us: idx.iter().map(|&i| times[i].min_us as f64).sum::<f64>() / n as f64,
        }
    }
}

/// One row of the comparison: a (source, mode, category) group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Query source.
    pub source: String,
    /// Protocol mode.
    pub mode: String,
    /// Category.
    pub category: String,
    /// Queries in the group answered by every engine.
    pub n: usize,
    /// Queries of the group left out because some engine failed on them.
    pub excluded: usize,
    /// Latency per engine.
    pub engines: BTreeMap<String, Latency>,
    /// tierdex's mean time divided by each peer's (below 1: tierdex faster).
    pub ratio: BTreeMap<String, f64>,
}

/// Groups queries by (source, mode, category) and aggregates each engine's
/// times over the queries that every engine answered without error.
pub fn rows(
    queries: &[BenchQuery],
    answers: &BTreeMap<String, Vec<Answer>>,
    times: &BTreeMap<String, Vec<QueryTime>>,
) -> Vec<Row> {
    let mut groups: BTreeMap<(String, String, String), (Vec<usize>, usize)> = BTreeMap::new();
    for (i, q) in queries.iter().enumerate() {
        let ok = answers.values().all(|a| a.get(i).is_some_and(|a| a.error.is_none()));
        let g = groups
            .entry((q.source.clone(), q.mode.clone(), q.category.clone()))
            .or_default();
        if ok {
            g.0.push(i);
        } else {
            g.1 += 1;
        }
    }
    let mut out = Vec::new();
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|((source, mode, category), _)| (rank_source(source), rank_mode(mode), rank_category(category)));
    for ((source, mode, category), (idx, excluded)) in groups {
        let engines: BTreeMap<String, Latency> = times
            .iter()
            .map(|(name, t)| (name.clone(), Latency::of(t, &idx)))
            .collect();
        let mut ratio = BTreeMap::new();
        if let Some(t) = engines.get("tierdex") {
            for (name, l) in &engines {
                if name != "tierdex" && l.mean_us > 0.0 {
                    ratio.insert(name.clone(), t.mean_us / l.mean_us);
                }
            }
        }
        out.push(Row {
            source,
            mode,
            category,
            n: idx.len(),
            excluded,
            engines,
            ratio,
        });
    }
    out
}

fn rank_source(s: &str) -> (usize, String) {
    let r = ["commands", "generated"].iter().position(|x| *x == s).unwrap_or(9);
    (r, s.to_string())
}

fn rank_mode(m: &str) -> usize {
    crate::commands::MODES.iter().position(|x| *x == m).unwrap_or(9)
}

fn rank_category(c: &str) -> (usize, String) {
    let known = ["term", "or", "and", "phrase", "mixed"];
    let r = known
        .iter()
        .position(|x| *x == c)
        .or_else(|| crate::workload::CATEGORIES.iter().position(|x| *x == c).map(|p| p + 10))
        .unwrap_or(99);
    (r, c.to_string())
}

/// How often two engines report the same count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Per category: (queries compared, counts equal).
    pub by_category: BTreeMap<String, (usize, usize)>,
    /// Some disagreements: query, our count, their count.
    pub examples: Vec<(String, u64, u64)>,
}

impl Agreement {
    /// Share of equal counts over all compared queries.
    pub fn rate(&self) -> f64 {
        let (n, eq) = self.by_category.values().fold((0, 0), |(n, e), (a, b)| (n + a, e + b));
        if n == 0 {
            1.0
        } else {
            eq as f64 / n as f64
        }
    }
}

/// Compares the counts of `ours` and `theirs` on the queries of `source`,
/// once per distinct query text.
pub fn count_agreement(queries: &[BenchQuery], source: &str, ours: &[Answer], theirs: &[Answer]) -> Agreement {
    let mut seen = std::collections::HashSet::new();
    let mut a = Agreement::default();
    for (i, q) in queries.iter().enumerate() {
        if q.source != source {
            continue;
        }
        let (Some(x), Some(y)) = (ours.get(i), theirs.get(i)) else {
            continue;
        };
        let (Some(cx), Some(cy)) = (x.count, y.count) else {
            continue;
        };
        if x.error.is_some() || y.error.is_some() || !seen.insert(q.text.clone()) {
            continue;
        }
        let e = a.by_category.entry(q.category.clone()).or_default();
        e.0 += 1;
        if cx == cy {
            e.1 += 1;
        } else if a.examples.len() < 40 {
            a.examples.push((q.text.clone(), cx, cy));
        }
    }
    a
}

/// Mean share of their top-10 ids that ours also returns, over the queries
/// of `source` with hits where they return at least one hit.
pub fn top10_overlap(queries: &[BenchQuery], source: &str, ours: &[Answer], theirs: &[Answer]) -> (f64, usize) {
    let mut seen = std::collections::HashSet::new();
    let (mut sum, mut n) = (0.0, 0usize);
    for (i, q) in queries.iter().enumerate() {
        if q.source != source || !q.mode.starts_with("TOP_10") || !seen.insert(q.text.clone()) {
            continue;
        }
        let (Some(x), Some(y)) = (ours.get(i), theirs.get(i)) else {
            continue;
        };
        if y.hits.is_empty() || x.error.is_some() {
            continue;
        }
        let theirs: std::collections::HashSet<&str> = y.hits.iter().take(10).map(|h| h.id.as_str()).collect();
        let common = x
            .hits
            .iter()
            .take(10)
            .filter(|h| theirs.contains(h.id.as_str()))
            .count();
        sum += common as f64 / theirs.len() as f64;
        n += 1;
    }
    (if n == 0 { 1.0 } else { sum / n as f64 }, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::HitRecord;

    fn q(cat: &str, mode: &str, text: &str) -> BenchQuery {
        BenchQuery {
            source: "commands".into(),
            category: cat.into(),
            mode: mode.into(),
            text: text.into(),
        }
    }

    fn ans(count: Option<u64>, ids: &[&str]) -> Answer {
        Answer {
            count,
            hits: ids
                .iter()
                .map(|i| HitRecord {
                    id: i.to_string(),
                    score: 1.0,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn medians_minimums_percentiles() {
        let t = query_times(&[vec![5, 1, 3], vec![7]]);
        assert_eq!(
            t[0],
            QueryTime {
                min_us: 1,
                median_us: 3
            }
        );
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        let l = Latency::of(&t, &[0, 1]);
        assert_eq!((l.n, l.mean_us, l.mean_min_us), (2, 5.0, 4.0));
    }

    #[test]
    fn rows_skip_failed_queries_and_compute_ratios() {
        let qs = vec![q("term", "COUNT", "a"), q("term", "COUNT", "b")];
        let mut answers = BTreeMap::new();
        answers.insert("tierdex".to_string(), vec![ans(Some(1), &[]), ans(Some(2), &[])]);
        let mut failed = ans(None, &[]);
        failed.error = Some("x".into());
        answers.insert("lucene".to_string(), vec![ans(Some(1), &[]), failed]);
        let mut times = BTreeMap::new();
        times.insert("tierdex".to_string(), query_times(&[vec![10], vec![1000]]));
        times.insert("lucene".to_string(), query_times(&[vec![20], vec![1]]));
        let r = rows(&qs, &answers, &times);
        assert_eq!((r[0].n, r[0].excluded), (1, 1));
        assert_eq!(r[0].ratio["lucene"], 0.5);
    }

    #[test]
    fn agreement_and_overlap() {
        let qs = vec![
            q("and", "COUNT", "+a +b"),
            q("and", "COUNT", "+a +b"),
            q("or", "TOP_10", "a b"),
        ];
        let ours = vec![ans(Some(3), &[]), ans(Some(3), &[]), ans(None, &["1", "2"])];
        let theirs = vec![ans(Some(4), &[]), ans(Some(4), &[]), ans(None, &["2", "3"])];
        let a = count_agreement(&qs, "commands", &ours, &theirs);
        assert_eq!(a.by_category["and"], (1, 0));
        assert_eq!(a.rate(), 0.0);
        assert_eq!(top10_overlap(&qs, "commands", &ours, &theirs), (0.5, 1));
    }
}
