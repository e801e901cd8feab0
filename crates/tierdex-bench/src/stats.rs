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
    /// Queries in the group answered by every engine compared.
    pub n: usize,
    /// Queries of the group left out because some engine failed on them.
    pub excluded: usize,
    /// Engines that failed on every query of the group (left out of the
    /// row, so that the others are still compared).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Latency per engine.
    pub engines: BTreeMap<String, Latency>,
    /// tierdex's mean time divided by each peer's (below 1: tierdex faster).
    pub ratio: BTreeMap<String, f64>,
}

/// Groups queries by (source, mode, category) and aggregates each engine's
/// times over the queries that every engine answered without error. An
/// engine that failed on every query of a group (e.g. tierdex before it
/// answers structured queries) is left out of that group instead, and named
/// in [`Row::failed`].
pub fn rows(
    queries: &[BenchQuery],
    answers: &BTreeMap<String, Vec<Answer>>,
    times: &BTreeMap<String, Vec<QueryTime>>,
) -> Vec<Row> {
    let mut groups: BTreeMap<(String, String, String), Vec<usize>> = BTreeMap::new();
    for (i, q) in queries.iter().enumerate() {
        groups
            .entry((q.source.clone(), q.mode.clone(), q.category.clone()))
            .or_default()
            .push(i);
    }
    let answered = |a: &[Answer], i: usize| a.get(i).is_some_and(|a| a.error.is_none());
    let mut out = Vec::new();
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|((source, mode, category), _)| (rank_source(source), rank_mode(mode), rank_category(category)));
    for ((source, mode, category), all) in groups {
        let (mut live, mut failed) = (Vec::new(), Vec::new());
        for (name, a) in answers {
            if all.iter().any(|&i| answered(a, i)) {
                live.push(name);
            } else {
                failed.push(name);
            }
        }
        let idx: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| live.iter().all(|name| answered(&answers[*name], i)))
            .collect();
        let engines: BTreeMap<String, Latency> = times
            .iter()
            .filter(|(name, _)| !failed.contains(name))
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
            excluded: all.len() - idx.len(),
            failed: failed.into_iter().cloned().collect(),
            engines,
            ratio,
        });
    }
    out
}

fn rank_source(s: &str) -> (usize, String) {
    let r = ["commands", "generated", "typed"]
        .iter()
        .position(|x| *x == s)
        .unwrap_or(9);
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
        .or_else(|| {
            crate::workload::typed::categories()
                .iter()
                .position(|x| x == c)
                .map(|p| p + 40)
        })
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

/// One engine's answers to structured (typed) queries compared with a
/// reference engine's (Lucene's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TypedAgreement {
    /// Counts, on every query with a count that both answered.
    pub counts: Agreement,
    /// Sorted queries, per category: (compared, equal sequences of field sort values).
    pub sorts: BTreeMap<String, (usize, usize)>,
    /// Some sort disagreements: the query and the first difference.
    pub sort_examples: Vec<String>,
    /// Mean top-10 overlap on the unsorted top-10 queries, and the queries compared.
    pub overlap: (f64, usize),
    /// Queries with aggregations, per category: (compared, equal results;
    /// see [`same_aggregations`]).
    #[serde(default)]
    pub aggs: BTreeMap<String, (usize, usize)>,
    /// Some aggregation disagreements: the query and the first difference.
    #[serde(default)]
    pub agg_examples: Vec<String>,
    /// Queries of the source the engine failed on.
    pub failed: usize,
    /// Queries of the source the reference failed on.
    pub reference_failed: usize,
}

impl TypedAgreement {
    /// Share of sorted queries whose sort values agree.
    pub fn sort_rate(&self) -> f64 {
        let (n, eq) = self.sorts.values().fold((0, 0), |(n, e), (a, b)| (n + a, e + b));
        if n == 0 {
            1.0
        } else {
            eq as f64 / n as f64
        }
    }
}

/// Whether a structured query asks for aggregations.
pub fn has_aggs(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| {
        v.get("aggs")
            .or_else(|| v.get("aggregations"))
            .is_some_and(|a| a.is_object())
    })
}

/// Floats equal within a relative 1e-9 (sums in another order may differ
/// in their last bits).
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Two aggregation results (Elasticsearch's response shape, an object of
/// named results) equal as the benchmark means it:
/// - buckets: the same keys (numbers by value; `key_as_string` is not
///   compared) with the same `doc_count`, in the same order; for `terms`
///   (a result with `sum_other_doc_count`), the same `sum_other_doc_count`
///   and counts, and the same keys except among the buckets tied on the
///   smallest count shown (which of the tied keys make the cut is
///   engine-specific), in any order among equal counts;
/// - metrics (`count`, `min`, `max`, `avg`, `sum`, `value`): equal within a
///   relative 1e-9, `null` only with `null`.
///
/// `Err` says where the first difference is.
pub fn same_aggregations(a: &serde_json::Value, b: &serde_json::Value) -> Result<(), String> {
    use serde_json::Value;
    let (Some(x), Some(y)) = (a.as_object(), b.as_object()) else {
        return Err(format!("not both objects: {} vs {}", brief(a), brief(b)));
    };
    if x.len() != y.len() || x.keys().any(|k| !y.contains_key(k)) {
        return Err(format!(
            "names {:?} vs {:?}",
            x.keys().collect::<Vec<_>>(),
            y.keys().collect::<Vec<_>>()
        ));
    }
    for (name, u) in x {
        let v = &y[name];
        let in_name = |e: String| format!("[{name}]: {e}");
        match (u.get("buckets"), v.get("buckets")) {
            (Some(Value::Array(p)), Some(Value::Array(q))) => {
                let terms = u.get("sum_other_doc_count").is_some() || v.get("sum_other_doc_count").is_some();
                let (so, sp) = (u.get("sum_other_doc_count"), v.get("sum_other_doc_count"));
                if terms && so.and_then(Value::as_u64) != sp.and_then(Value::as_u64) {
                    return Err(in_name(format!("sum_other_doc_count {so:?} vs {sp:?}")));
                }
                same_buckets(p, q, terms).map_err(in_name)?;
            }
            (None, None) => {
                for key in ["count", "min", "max", "avg", "sum", "value"] {
                    let (p, q) = (u.get(key), v.get(key));
                    let equal = match (p, q) {
                        (None, None) => true,
                        (Some(Value::Null), Some(Value::Null)) => true,
                        (Some(p), Some(q)) => p.as_f64().zip(q.as_f64()).is_some_and(|(p, q)| close(p, q)),
                        _ => false,
                    };
                    if !equal {
                        return Err(in_name(format!("{key}: {p:?} vs {q:?}")));
                    }
                }
            }
            _ => return Err(in_name(format!("{} vs {}", brief(u), brief(v)))),
        }
    }
    Ok(())
}

fn brief(v: &serde_json::Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A bucket's key and count; keys compare as numbers when both are.
fn bucket(b: &serde_json::Value) -> Result<(serde_json::Value, u64), String> {
    let count = b
        .get("doc_count")
        .and_then(|c| c.as_u64())
        .ok_or_else(|| format!("a bucket without a doc_count: {}", brief(b)))?;
    let key = b
        .get("key")
        .cloned()
        .ok_or_else(|| format!("a bucket without a key: {}", brief(b)))?;
    Ok((key, count))
}

fn same_buckets(p: &[serde_json::Value], q: &[serde_json::Value], terms: bool) -> Result<(), String> {
    let p = p.iter().map(bucket).collect::<Result<Vec<_>, _>>()?;
    let q = q.iter().map(bucket).collect::<Result<Vec<_>, _>>()?;
    if p.len() != q.len() {
        return Err(format!("{} vs {} buckets", p.len(), q.len()));
    }
    if !terms {
        for (i, ((k, c), (l, d))) in p.iter().zip(&q).enumerate() {
            if !same_value(k, l) || c != d {
                return Err(format!("bucket {i}: {k} ({c}) vs {l} ({d})"));
            }
        }
        return Ok(());
    }
    // Terms: the same counts in descending order, the same keys above the
    // smallest count.
    let counts = |b: &[(serde_json::Value, u64)]| b.iter().map(|x| x.1).collect::<Vec<_>>();
    let (cp, cq) = (counts(&p), counts(&q));
    if cp != cq || cp.windows(2).any(|w| w[0] < w[1]) {
        return Err(format!("counts {cp:?} vs {cq:?}"));
    }
    let last = cp.last().copied().unwrap_or(0);
    let above = |b: &[(serde_json::Value, u64)]| {
        let mut v: Vec<(String, u64)> = b
            .iter()
            .filter(|x| x.1 > last)
            .map(|(k, c)| (k.to_string(), *c))
            .collect();
        v.sort();
        v
    };
    let (ap, aq) = (above(&p), above(&q));
    if ap != aq {
        let first = ap.iter().zip(&aq).find(|(a, b)| a != b);
        return Err(format!("keys above the smallest count differ: {first:?}"));
    }
    Ok(())
}

/// For a structured query with a sort, which of its sort keys are fields
/// (`false` for `_score`); `None` without a sort.
pub fn field_sort_keys(text: &str) -> Option<Vec<bool>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let keys: Vec<&serde_json::Value> = match v.get("sort")? {
        serde_json::Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let is_score = |k: &serde_json::Value| match k {
        serde_json::Value::String(s) => s == "_score",
        serde_json::Value::Object(o) => o.contains_key("_score"),
        _ => false,
    };
    (!keys.is_empty()).then(|| keys.iter().map(|k| !is_score(k)).collect())
}

/// Sort values equal as the protocol means it: numbers by value (`1.0E-5`
/// and `0.00001` are equal), everything else exactly.
fn same_value(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The field sort values of an answer's hits, hit by hit.
fn field_sort_values(a: &Answer, fields: &[bool]) -> Vec<Vec<serde_json::Value>> {
    a.hits
        .iter()
        .map(|h| {
            h.sort
                .iter()
                .flatten()
                .zip(fields)
                .filter(|(_, &f)| f)
                .map(|(v, _)| v.clone())
                .collect()
        })
        .collect()
}

/// Compares `ours` with `reference` on every query of `source`: counts on
/// every query with a count, sorted results by their sequence of field
/// sort values (ties may come in any order, so ids are not compared), and
/// the top-10 overlap of unsorted top-10 queries.
pub fn typed_agreement(queries: &[BenchQuery], source: &str, ours: &[Answer], reference: &[Answer]) -> TypedAgreement {
    let mut t = TypedAgreement::default();
    let (mut overlap_sum, mut overlap_n) = (0.0, 0usize);
    for (i, q) in queries.iter().enumerate() {
        if q.source != source {
            continue;
        }
        let (Some(x), Some(y)) = (ours.get(i), reference.get(i)) else {
            continue;
        };
        t.failed += usize::from(x.error.is_some());
        t.reference_failed += usize::from(y.error.is_some());
        if x.error.is_some() || y.error.is_some() {
            continue;
        }
        if let (Some(cx), Some(cy)) = (x.count, y.count) {
            let e = t.counts.by_category.entry(q.category.clone()).or_default();
            e.0 += 1;
            if cx == cy {
                e.1 += 1;
            } else if t.counts.examples.len() < 40 {
                t.counts.examples.push((format!("{}\t{}", q.mode, q.text), cx, cy));
            }
        }
        if has_aggs(&q.text) {
            let e = t.aggs.entry(q.category.clone()).or_default();
            e.0 += 1;
            let empty = serde_json::Value::Null;
            let (a, b) = (
                x.aggregations.as_ref().unwrap_or(&empty),
                y.aggregations.as_ref().unwrap_or(&empty),
            );
            match same_aggregations(a, b) {
                Ok(()) => e.1 += 1,
                Err(why) if t.agg_examples.len() < 20 => {
                    t.agg_examples.push(format!("`{}\t{}`: {why}", q.mode, q.text))
                }
                Err(_) => {}
            }
        }
        if !q.mode.starts_with("TOP_") {
            continue;
        }
        match field_sort_keys(&q.text) {
            Some(fields) => {
                let (a, b) = (field_sort_values(x, &fields), field_sort_values(y, &fields));
                let equal = a.len() == b.len()
                    && a.iter()
                        .zip(&b)
                        .all(|(u, v)| u.len() == v.len() && u.iter().zip(v).all(|(p, q)| same_value(p, q)));
                let e = t.sorts.entry(q.category.clone()).or_default();
                e.0 += 1;
                if equal {
                    e.1 += 1;
                } else if t.sort_examples.len() < 20 {
                    let at = a
                        .iter()
                        .zip(&b)
                        .position(|(u, v)| u != v)
                        .unwrap_or(a.len().min(b.len()));
                    t.sort_examples.push(format!(
                        "`{}\t{}`: hit {at}: {:?} vs {:?} ({} vs {} hits)",
                        q.mode,
                        q.text,
                        a.get(at),
                        b.get(at),
                        a.len(),
                        b.len()
                    ));
                }
            }
            None if q.mode.starts_with("TOP_10") && !y.hits.is_empty() => {
                let theirs: std::collections::HashSet<&str> = y.hits.iter().take(10).map(|h| h.id.as_str()).collect();
                let common = x
                    .hits
                    .iter()
                    .take(10)
                    .filter(|h| theirs.contains(h.id.as_str()))
                    .count();
                overlap_sum += common as f64 / theirs.len() as f64;
                overlap_n += 1;
            }
            None => {}
        }
    }
    t.overlap = (
        if overlap_n == 0 {
            1.0
        } else {
            overlap_sum / overlap_n as f64
        },
        overlap_n,
    );
    t
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
                    score: Some(1.0),
                    sort: None,
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

    fn sorted(count: Option<u64>, values: &[(&str, serde_json::Value)]) -> Answer {
        Answer {
            count,
            hits: values
                .iter()
                .map(|(id, v)| HitRecord {
                    id: id.to_string(),
                    score: None,
                    sort: Some(vec![v.clone(), serde_json::json!(1.5)]),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn aggregations_compare_buckets_ties_and_floats() {
        use serde_json::json;
        let terms = |b: &[(&str, u64)], other: u64| {
            let list: Vec<_> = b.iter().map(|(k, c)| json!({"key": k, "doc_count": c})).collect();
            json!({"t": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": other, "buckets": list}})
        };
        let a = terms(&[("x", 9), ("y", 5), ("z", 5), ("w", 2)], 7);
        assert_eq!(same_aggregations(&a, &a), Ok(()));
        // Order among equal counts and the keys tied at the cut are free.
        let b = terms(&[("x", 9), ("z", 5), ("y", 5), ("v", 2)], 7);
        assert_eq!(same_aggregations(&a, &b), Ok(()));
        // Not above the cut, nor the counts, nor what is left out.
        assert!(same_aggregations(&a, &terms(&[("x", 9), ("y", 5), ("q", 5), ("w", 2)], 7)).is_err());
        assert!(same_aggregations(&a, &terms(&[("x", 9), ("y", 5), ("z", 4), ("w", 2)], 7)).is_err());
        assert!(same_aggregations(&a, &terms(&[("x", 9), ("y", 5), ("z", 5)], 7)).is_err());
        assert!(same_aggregations(&a, &terms(&[("x", 9), ("y", 5), ("z", 5), ("w", 2)], 8)).is_err());
        // Histograms: keys by value and counts, in order.
        let h = |b: &[(f64, u64)]| {
            let list: Vec<_> = b
                .iter()
                .map(|(k, c)| json!({"key": k, "key_as_string": "ignored", "doc_count": c}))
                .collect();
            json!({"m": {"buckets": list}})
        };
        let mut int_keys = h(&[(0.0, 1), (100.0, 0), (200.0, 3)]);
        int_keys["m"]["buckets"][1]["key"] = json!(100);
        assert_eq!(
            same_aggregations(&h(&[(0.0, 1), (100.0, 0), (200.0, 3)]), &int_keys),
            Ok(())
        );
        assert!(same_aggregations(&h(&[(0.0, 1), (200.0, 3)]), &h(&[(200.0, 3), (0.0, 1)])).is_err());
        assert!(same_aggregations(&h(&[(0.0, 1)]), &h(&[(0.0, 2)])).is_err());
        // Stats within a relative 1e-9.
        let st = |sum: f64, min: Option<f64>| json!({"s": {"count": 3, "min": min, "max": 4.0, "avg": sum / 3.0, "sum": sum}});
        assert_eq!(
            same_aggregations(&st(6.0, Some(1.0)), &st(6.0 + 1e-14, Some(1.0))),
            Ok(())
        );
        assert!(same_aggregations(&st(6.0, Some(1.0)), &st(6.001, Some(1.0))).is_err());
        assert!(same_aggregations(&st(6.0, Some(1.0)), &st(6.0, None)).is_err());
        // Names and shapes must match; a missing result is a difference.
        assert!(same_aggregations(&st(6.0, None), &json!({"other": {"count": 3}})).is_err());
        assert!(same_aggregations(&a, &serde_json::Value::Null).is_err());
        assert!(same_aggregations(&a, &h(&[(0.0, 1)])).is_err());
    }

    #[test]
    fn typed_aggregation_agreement() {
        use serde_json::json;
        let text = r#"{"query":{"match_all":{}},"aggs":{"s":{"stats":{"field":"price"}}}}"#;
        let qs = vec![
            BenchQuery {
                source: "typed".into(),
                category: "agg-stats-all".into(),
                mode: "TOP_10_COUNT".into(),
                text: text.into(),
            };
            3
        ];
        let with = |sum: f64| Answer {
            count: Some(3),
            aggregations: Some(json!({"s": {"count": 3, "min": 1.0, "max": 3.0, "avg": sum / 3.0, "sum": sum}})),
            ..Default::default()
        };
        let ours = vec![
            with(6.0),
            with(6.5),
            Answer {
                count: Some(3),
                ..Default::default()
            },
        ];
        let theirs = vec![with(6.0), with(6.0), with(6.0)];
        let t = typed_agreement(&qs, "typed", &ours, &theirs);
        assert_eq!(t.aggs["agg-stats-all"], (3, 1));
        assert_eq!(t.agg_examples.len(), 2);
        assert!(has_aggs(text) && !has_aggs(r#"{"query":{"match_all":{}}}"#));
    }

    #[test]
    fn typed_answers_compare_counts_sort_values_and_failures() {
        use serde_json::json;
        let typed = |cat: &str, mode: &str, text: &str| BenchQuery {
            source: "typed".into(),
            ..q(cat, mode, text)
        };
        let sort = r#"{"query":{"match_all":{}},"sort":[{"price":"asc"},"_score"]}"#;
        let qs = vec![
            typed("range-price", "COUNT", r#"{"query":{"range":{"price":{"gte":1}}}}"#),
            typed("range-price", "COUNT", r#"{"query":{"range":{"price":{"gte":2}}}}"#),
            typed("sort-price-asc", "TOP_10_COUNT", sort),
            typed("sort-price-asc", "TOP_10", sort),
            typed("filter-1%-or", "TOP_10", r#"{"query":{"match_all":{}}}"#),
            typed("filter-1%-or", "TOP_10", r#"{"query":{"match_all":{}}}"#),
            q("term", "COUNT", "a"),
        ];
        // Ties in any order: the same sequence of values with other ids agrees
        // (1e-5 and 0.00001 are one number; the `_score` values are not compared).
        let mut tied = sorted(
            Some(7),
            &[("b", json!(1.0e-5)), ("a", json!(1.0e-5)), ("c", json!(null))],
        );
        tied.hits[0].sort.as_mut().unwrap()[1] = json!(9.0);
        let ours = vec![
            ans(Some(5), &[]),
            ans(Some(3), &[]),
            tied,
            sorted(None, &[("a", json!(2.0))]),
            ans(None, &["1", "2"]),
            Answer {
                error: Some("no JSON yet".into()),
                ..Default::default()
            },
            ans(Some(1), &[]),
        ];
        let theirs = vec![
            ans(Some(5), &[]),
            ans(Some(4), &[]),
            sorted(
                Some(7),
                &[("a", json!(0.00001)), ("b", json!(0.00001)), ("c", json!(null))],
            ),
            sorted(None, &[("a", json!(3.0))]),
            ans(None, &["2", "3"]),
            ans(None, &["2", "3"]),
            ans(Some(2), &[]),
        ];
        let t = typed_agreement(&qs, "typed", &ours, &theirs);
        assert_eq!(t.counts.by_category["range-price"], (2, 1));
        assert_eq!(t.counts.by_category["sort-price-asc"], (1, 1));
        assert_eq!(t.counts.examples.len(), 1);
        assert_eq!(t.sorts["sort-price-asc"], (2, 1));
        assert!(t.sort_examples[0].contains("hit 0"), "{:?}", t.sort_examples);
        assert_eq!((t.failed, t.reference_failed), (1, 0));
        assert_eq!(t.overlap, (0.5, 1));
        assert_eq!(t.sort_rate(), 0.5);
        assert_eq!(field_sort_keys(sort), Some(vec![true, false]));
        assert_eq!(field_sort_keys("a b"), None);
    }

    #[test]
    fn an_engine_failing_a_whole_group_leaves_the_others_compared() {
        let qs = vec![q("range-price", "COUNT", "{}"), q("range-price", "COUNT", "{}")];
        let failed = Answer {
            error: Some("x".into()),
            ..Default::default()
        };
        let mut answers = BTreeMap::new();
        answers.insert("tierdex".to_string(), vec![failed.clone(), failed]);
        answers.insert("lucene".to_string(), vec![ans(Some(1), &[]), ans(Some(2), &[])]);
        answers.insert("tantivy".to_string(), vec![ans(Some(1), &[]), ans(Some(2), &[])]);
        let mut times = BTreeMap::new();
        times.insert("tierdex".to_string(), query_times(&[vec![0], vec![0]]));
        times.insert("lucene".to_string(), query_times(&[vec![20], vec![40]]));
        times.insert("tantivy".to_string(), query_times(&[vec![10], vec![10]]));
        let r = rows(&qs, &answers, &times);
        assert_eq!((r[0].n, r[0].excluded), (2, 0));
        assert_eq!(r[0].failed, vec!["tierdex".to_string()]);
        assert!(!r[0].engines.contains_key("tierdex") && r[0].ratio.is_empty());
        assert_eq!(
            (r[0].engines["lucene"].mean_us, r[0].engines["tantivy"].mean_us),
            (30.0, 10.0)
        );
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
