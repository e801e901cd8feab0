//! Typed-field workloads (issue #21) as structured queries of the bench
//! protocol (`bench/PROTOCOL.md`, "Structured (JSON) queries"):
//!
//! * `filter-<s>-<text>`: a text query (`term`, `and`, `or`) with a filter
//!   of selectivity `s` (0.1%, 1%, 10%, 50%): a `price`, `date` or
//!   `popularity` range or a `category` or `tags` term (or set of terms);
//! * `sort-price-asc`, `sort-date-desc`: a filter (or `match_all`) sorted by
//!   a numeric field; `text-sort-price-asc`, `text-sort-date-desc`: a text
//!   query sorted by it;
//! * `range-price`, `range-date`, `range-popularity`: range counts;
//! * `agg-terms-*`, `agg-month-*`, `agg-stats-*`: aggregations (`terms` on
//!   `category`, `date_histogram` of `date` by calendar month, `stats` of
//!   `price`) over `match_all` (`-all`) or a text query matching about 10%
//!   of the sample (`-text`), in `TOP_10_COUNT` mode: 10 hits and the count
//!   beside the aggregation, which covers every match.
//!
//! Filters are chosen on a sample of the corpus's typed values
//! ([`TypedSample`]) so that their selectivity is real: ranges between
//! quantiles of the sampled values, keywords (or sets of keywords) of
//! matching frequency. Each query carries the selectivity of its filter
//! measured on the sample.

use std::collections::HashMap;
use std::io::BufRead;

use anyhow::{Context, Result};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde::Deserialize;
use serde_json::{json, Value};
use tierdex::schema::value::{civil_from_days, days_from_civil};

/// Filter selectivities of the `filter-*` categories, with their names.
pub const FILTER_LEVELS: [(f64, &str); 4] = [(0.001, "0.1%"), (0.01, "1%"), (0.1, "10%"), (0.5, "50%")];

/// Kinds of text query combined with filters and sorts.
pub const TEXT_KINDS: [&str; 3] = ["term", "and", "or"];

/// The sort categories.
pub const SORT_CATEGORIES: [&str; 4] = [
    "sort-price-asc",
    "sort-date-desc",
    "text-sort-price-asc",
    "text-sort-date-desc",
];

/// The range-count categories.
pub const RANGE_CATEGORIES: [&str; 3] = ["range-price", "range-date", "range-popularity"];

/// The aggregation categories.
pub const AGG_CATEGORIES: [&str; 6] = [
    "agg-terms-all",
    "agg-terms-text",
    "agg-month-all",
    "agg-month-text",
    "agg-stats-all",
    "agg-stats-text",
];

/// Share of the documents the text queries of `agg-*-text` match.
pub const AGG_TEXT_SELECTIVITY: f64 = 0.1;

/// Modes of the filter categories.
pub const FILTER_MODES: &[&str] = &["TOP_10", "TOP_10_COUNT", "COUNT"];
/// Modes of the sort categories (`COUNT` ignores a sort).
pub const SORT_MODES: &[&str] = &["TOP_10", "TOP_10_COUNT"];
/// Modes of the range categories.
pub const RANGE_MODES: &[&str] = &["COUNT"];
/// Modes of the aggregation categories (as Elasticsearch's default `size`
/// of 10, with the exact count).
pub const AGG_MODES: &[&str] = &["TOP_10_COUNT"];

/// A filter's selectivity is accepted within this relative distance of the
/// target (or 2 documents of the sample, for tiny targets).
pub const TOLERANCE: f64 = 0.25;

/// Every typed category, in report order.
pub fn categories() -> Vec<String> {
    let mut out = Vec::new();
    for (_, level) in FILTER_LEVELS {
        for kind in TEXT_KINDS {
            out.push(format!("filter-{level}-{kind}"));
        }
    }
    out.extend(SORT_CATEGORIES.iter().map(|c| c.to_string()));
    out.extend(RANGE_CATEGORIES.iter().map(|c| c.to_string()));
    out.extend(AGG_CATEGORIES.iter().map(|c| c.to_string()));
    out
}

/// The `aggs` object of an aggregation category (`agg-terms-*`,
/// `agg-month-*`, `agg-stats-*`).
pub fn agg_body(category: &str) -> Option<Value> {
    let kind = category.strip_prefix("agg-")?.split('-').next()?;
    Some(match kind {
        "terms" => json!({"by_category": {"terms": {"field": "category", "size": 10}}}),
        "month" => json!({"by_month": {"date_histogram": {"field": "date", "calendar_interval": "month"}}}),
        "stats" => json!({"price_stats": {"stats": {"field": "price"}}}),
        _ => return None,
    })
}

/// The typed values of one sampled document (keywords as ids into
/// [`TypedSample`]'s dictionary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypedDoc {
    /// Epoch milliseconds.
    pub date: Option<i64>,
    pub price: Option<f64>,
    pub popularity: Option<i64>,
    pub category: Vec<u32>,
    pub tags: Vec<u32>,
}

/// A numeric typed field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumField {
    Date,
    Price,
    Popularity,
}

impl NumField {
    fn name(self) -> &'static str {
        match self {
            NumField::Date => "date",
            NumField::Price => "price",
            NumField::Popularity => "popularity",
        }
    }

    fn value(self, d: &TypedDoc) -> Option<f64> {
        match self {
            NumField::Date => d.date.map(|v| v as f64),
            NumField::Price => d.price,
            NumField::Popularity => d.popularity.map(|v| v as f64),
        }
    }

    /// A bound as the protocol's JSON value: dates as ISO-8601 strings,
    /// popularity as an integer, price as a number.
    fn json(self, v: f64) -> Value {
        match self {
            NumField::Date => Value::String(format_date(v as i64)),
            NumField::Popularity => json!(v as i64),
            NumField::Price => json!(v),
        }
    }
}

/// A keyword typed field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KwField {
    Category,
    Tags,
}

impl KwField {
    fn name(self) -> &'static str {
        match self {
            KwField::Category => "category",
            KwField::Tags => "tags",
        }
    }

    fn values(self, d: &TypedDoc) -> &[u32] {
        match self {
            KwField::Category => &d.category,
            KwField::Tags => &d.tags,
        }
    }
}

/// A filter of the workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `gte <= value < lt` (a missing bound is open).
    Range {
        field: NumField,
        gte: Option<f64>,
        lt: Option<f64>,
    },
    /// Any of the keywords (ids into the sample's dictionary).
    Terms { field: KwField, values: Vec<u32> },
}

impl Filter {
    /// Whether document `d` matches.
    pub fn matches(&self, d: &TypedDoc) -> bool {
        match self {
            Filter::Range { field, gte, lt } => field
                .value(d)
                .is_some_and(|v| gte.is_none_or(|g| v >= g) && lt.is_none_or(|l| v < l)),
            Filter::Terms { field, values } => field.values(d).iter().any(|v| values.contains(v)),
        }
    }

    /// The filter as a protocol query (`range`, `term` or `terms`).
    pub fn to_json(&self, sample: &TypedSample) -> Value {
        match self {
            Filter::Range { field, gte, lt } => {
                let mut b = serde_json::Map::new();
                if let Some(g) = gte {
                    b.insert("gte".into(), field.json(*g));
                }
                if let Some(l) = lt {
                    b.insert("lt".into(), field.json(*l));
                }
                json!({"range": {field.name(): b}})
            }
            Filter::Terms { field, values } => {
                let words: Vec<&str> = values.iter().map(|&v| sample.keyword(v)).collect();
                match words.as_slice() {
                    [one] => json!({"term": {field.name(): one}}),
                    _ => json!({"terms": {field.name(): words}}),
                }
            }
        }
    }
}

/// The typed values of a sample of a corpus's documents.
#[derive(Debug, Clone, Default)]
pub struct TypedSample {
    /// The sampled documents.
    pub docs: Vec<TypedDoc>,
    keywords: Vec<String>,
    ids: HashMap<String, u32>,
    /// Words of `title` and `body` whose document frequency is measured
    /// ([`TypedSample::watch`]), and their ids.
    watched: HashMap<String, u32>,
    /// Per sampled document (when words are watched): the ids of the
    /// watched words it contains, sorted.
    doc_words: Vec<Vec<u32>>,
}

/// The typed fields of a JSON lines record (other keys are skipped
/// without being copied).
#[derive(Deserialize)]
struct RawTyped {
    date: Option<Value>,
    price: Option<Value>,
    popularity: Option<Value>,
    category: Option<Value>,
    tags: Option<Value>,
    title: Option<Value>,
    body: Option<Value>,
}

impl TypedSample {
    /// An empty sample.
    pub fn new() -> TypedSample {
        TypedSample::default()
    }

    /// The keyword of dictionary id `id`.
    pub fn keyword(&self, id: u32) -> &str {
        &self.keywords[id as usize]
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.keywords.len() as u32;
        self.keywords.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// Adds the typed values of one JSON lines record; returns whether it
    /// had any. Values of the wrong type are ignored (the engines refuse
    /// them when indexing).
    pub fn push_json(&mut self, line: &str) -> Result<bool> {
        let raw: RawTyped = serde_json::from_str(line).context("a record of the corpus")?;
        let mut keywords = |v: Option<Value>| -> Vec<u32> {
            match v {
                Some(Value::String(s)) => vec![self.intern(&s)],
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(|s| self.intern(s)).collect(),
                _ => Vec::new(),
            }
        };
        let category = keywords(raw.category);
        let tags = keywords(raw.tags);
        let doc = TypedDoc {
            date: raw.date.and_then(|v| match v {
                Value::String(s) => parse_date(&s),
                other => other.as_i64(),
            }),
            price: raw.price.and_then(|v| v.as_f64()),
            popularity: raw.popularity.and_then(|v| v.as_i64()),
            category,
            tags,
        };
        let any = doc != TypedDoc::default();
        self.docs.push(doc);
        if !self.watched.is_empty() {
            let mut words = Vec::new();
            for text in [&raw.title, &raw.body].into_iter().flatten().filter_map(Value::as_str) {
                for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                    if let Some(&id) = self.watched.get(&w.to_lowercase()) {
                        words.push(id);
                    }
                }
            }
            words.sort_unstable();
            words.dedup();
            self.doc_words.push(words);
        }
        Ok(any)
    }

    /// Measures the document frequency of `words` (lowercase; whole
    /// words of `title` or `body`) in the documents added from now on.
    pub fn watch<'a>(&mut self, words: impl IntoIterator<Item = &'a str>) {
        for w in words {
            let n = self.watched.len() as u32;
            self.watched.entry(w.to_lowercase()).or_insert(n);
        }
    }

    /// A text query (one word or an OR of words, of the watched ones) that
    /// matches about `target` of the sampled documents, with the share it
    /// matches; the closest such query when none is within [`TOLERANCE`];
    /// `None` without watched words.
    pub fn text_query(&self, target: f64, rng: &mut Pcg64) -> Option<(String, f64)> {
        if self.watched.is_empty() || self.doc_words.is_empty() {
            return None;
        }
        let n = self.doc_words.len();
        let mut df = vec![0usize; self.watched.len()];
        for ws in &self.doc_words {
            for &w in ws {
                df[w as usize] += 1;
            }
        }
        let mut names = vec![""; self.watched.len()];
        for (w, &id) in &self.watched {
            names[id as usize] = w;
        }
        let k = (target * n as f64).round().max(1.0) as usize;
        let share = |c: usize| c as f64 / n as f64;
        let mut close: Vec<u32> = (0..df.len() as u32)
            .filter(|&w| within(df[w as usize].abs_diff(k), k))
            .collect();
        close.sort_unstable_by_key(|&w| names[w as usize]);
        if !close.is_empty() {
            let w = close[rng.random_range(0..close.len())] as usize;
            return Some((names[w].to_string(), share(df[w])));
        }
        // An OR of words that fit, the most frequent first from a random
        // start, until the union reaches the target.
        let mut by_freq: Vec<u32> = (0..df.len() as u32)
            .filter(|&w| (1..=k).contains(&df[w as usize]))
            .collect();
        by_freq.sort_unstable_by(|&a, &b| {
            df[b as usize]
                .cmp(&df[a as usize])
                .then(names[a as usize].cmp(names[b as usize]))
        });
        let most = k + (k as f64 * TOLERANCE) as usize;
        let mut chosen: Vec<u32> = Vec::new();
        let mut union = 0usize;
        if !by_freq.is_empty() {
            let start = rng.random_range(0..by_freq.len().min(8));
            for &w in by_freq[start..].iter().chain(&by_freq[..start]) {
                chosen.push(w);
                let count = self
                    .doc_words
                    .iter()
                    .filter(|ws| ws.iter().any(|x| chosen.contains(x)))
                    .count();
                if count > most {
                    chosen.pop();
                    continue;
                }
                union = count;
                if union >= k {
                    break;
                }
            }
        }
        // The closest single word, when the union is no closer.
        let best = (0..df.len()).min_by_key(|&w| (df[w].abs_diff(k), names[w]))?;
        if chosen.is_empty() || df[best].abs_diff(k) < union.abs_diff(k) {
            return Some((names[best].to_string(), share(df[best])));
        }
        let words: Vec<&str> = chosen.iter().map(|&w| names[w as usize]).collect();
        Some((words.join(" "), share(union)))
    }

    /// Reads every `every`-th record (the first, then every `every`-th) of
    /// JSON lines from `input`.
    pub fn read(input: impl BufRead, every: u64) -> Result<TypedSample> {
        TypedSample::read_watching(input, every, &[])
    }

    /// As [`TypedSample::read`], measuring the document frequency of
    /// `words` too ([`TypedSample::watch`]).
    pub fn read_watching(input: impl BufRead, every: u64, words: &[String]) -> Result<TypedSample> {
        let mut s = TypedSample::new();
        s.watch(words.iter().map(String::as_str));
        let every = every.max(1);
        let mut n = 0u64;
        for (i, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            if n.is_multiple_of(every) {
                s.push_json(&line).with_context(|| format!("line {}", i + 1))?;
            }
            n += 1;
        }
        Ok(s)
    }

    /// Whether any sampled document has a typed value.
    pub fn has_typed(&self) -> bool {
        self.docs.iter().any(|d| d != &TypedDoc::default())
    }

    /// Fraction of the sampled documents that `f` matches.
    pub fn selectivity(&self, f: &Filter) -> f64 {
        if self.docs.is_empty() {
            return 0.0;
        }
        self.docs.iter().filter(|d| f.matches(d)).count() as f64 / self.docs.len() as f64
    }

    /// A range of `field` matching about `target` of the documents, at a
    /// random place in its distribution; `None` when ties or missing
    /// values make that impossible within [`TOLERANCE`].
    pub fn range_filter(&self, field: NumField, target: f64, rng: &mut Pcg64) -> Option<Filter> {
        let mut vals: Vec<f64> = self.docs.iter().filter_map(|d| field.value(d)).collect();
        vals.sort_by(f64::total_cmp);
        let n = self.docs.len() as f64;
        let k = (target * n).round().max(1.0) as usize;
        if vals.is_empty() || k > vals.len() {
            return None;
        }
        let first = |x: f64| vals.partition_point(|&v| v < x);
        let past = |x: f64| vals.partition_point(|&v| v <= x);
        let mut best: Option<(usize, Filter)> = None;
        for _ in 0..64 {
            let i = rng.random_range(0..=vals.len() - k);
            let lo = vals[i];
            let a = first(lo);
            let b = a + k;
            // Candidate upper bounds around the target end; `None` = open.
            let ends: Vec<(Option<f64>, usize)> = if b >= vals.len() {
                vec![(None, vals.len() - a)]
            } else {
                let v = vals[b];
                let mut c = vec![(Some(v), first(v) - a)];
                let after = past(v);
                c.push(match vals.get(after) {
                    Some(&next) => (Some(next), after - a),
                    None => (None, vals.len() - a),
                });
                c
            };
            for (hi, count) in ends {
                let miss = count.abs_diff(k);
                if best.as_ref().is_none_or(|(m, _)| miss < *m) && count > 0 {
                    let filter = Filter::Range {
                        field,
                        gte: Some(lo),
                        lt: hi,
                    };
                    best = Some((miss, filter));
                }
            }
            if best.as_ref().is_some_and(|(m, _)| *m == 0) {
                break;
            }
        }
        best.filter(|(miss, _)| within(*miss, k)).map(|(_, f)| f)
    }

    /// One keyword of `field` with a document frequency near `target`, or
    /// (when no keyword is that frequent or none is close) a set of
    /// keywords whose union is; `None` when impossible within [`TOLERANCE`].
    pub fn keyword_filter(&self, field: KwField, target: f64, rng: &mut Pcg64) -> Option<Filter> {
        let mut df: HashMap<u32, usize> = HashMap::new();
        for d in &self.docs {
            let vs = field.values(d);
            for (j, v) in vs.iter().enumerate() {
                if !vs[..j].contains(v) {
                    *df.entry(*v).or_default() += 1;
                }
            }
        }
        let k = (target * self.docs.len() as f64).round().max(1.0) as usize;
        let mut close: Vec<u32> = df
            .iter()
            .filter(|(_, &c)| within(c.abs_diff(k), k))
            .map(|(&v, _)| v)
            .collect();
        close.sort_unstable();
        if !close.is_empty() {
            let v = close[rng.random_range(0..close.len())];
            return Some(Filter::Terms { field, values: vec![v] });
        }
        // A union of keywords: the frequent ones that fit, from a random
        // start in frequency order, until the union reaches the target.
        let mut by_freq: Vec<(u32, usize)> = df.into_iter().filter(|&(_, c)| c <= k).collect();
        by_freq.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        if by_freq.is_empty() {
            return None;
        }
        let start = rng.random_range(0..by_freq.len().min(8));
        let mut values = Vec::new();
        let mut union = 0usize;
        let most = k + (k as f64 * TOLERANCE) as usize;
        for &(v, _) in by_freq[start..].iter().chain(&by_freq[..start]) {
            values.push(v);
            let f = Filter::Terms {
                field,
                values: values.clone(),
            };
            let count = self.docs.iter().filter(|d| f.matches(d)).count();
            if count > most {
                values.pop();
                continue;
            }
            union = count;
            if union >= k {
                break;
            }
        }
        (!values.is_empty() && within(union.abs_diff(k), k)).then_some(Filter::Terms { field, values })
    }

    /// A filter of about `target` selectivity of the `kind`-th kind
    /// (rotating over price, date, category, popularity and tags ranges and
    /// terms); the next kind that works when one cannot reach it.
    pub fn filter(&self, target: f64, kind: usize, rng: &mut Pcg64) -> Option<Filter> {
        const KINDS: usize = 5;
        (0..KINDS).find_map(|j| match (kind + j) % KINDS {
            0 => self.range_filter(NumField::Price, target, rng),
            1 => self.range_filter(NumField::Date, target, rng),
            2 => self.keyword_filter(KwField::Category, target, rng),
            3 => self.range_filter(NumField::Popularity, target, rng),
            _ => self.keyword_filter(KwField::Tags, target, rng),
        })
    }
}

fn within(miss: usize, k: usize) -> bool {
    miss <= 2 || (miss as f64) <= TOLERANCE * k as f64
}

/// One typed query.
#[derive(Debug, Clone)]
pub struct TypedQuery {
    /// Its category (`filter-1%-and`, `sort-price-asc`, `range-date`, ...).
    pub category: String,
    /// The protocol's JSON query (one line).
    pub json: String,
    /// The protocol modes it runs in.
    pub modes: &'static [&'static str],
    /// The selectivity of its filter measured on the sample (`None` without one).
    pub selectivity: Option<f64>,
}

/// Text queries (the classic syntax) to combine with filters and sorts, by
/// kind: single terms, AND and OR queries.
#[derive(Debug, Clone, Default)]
pub struct TextPools {
    pub term: Vec<String>,
    pub and: Vec<String>,
    pub or: Vec<String>,
    /// Single words of every popularity level, candidates for the text
    /// queries of the aggregation categories.
    pub words: Vec<String>,
}

impl TextPools {
    /// The pools from a generated text workload: `term-1k` and `term-10k`
    /// (or any `term-*` when those are empty), `and`, `or`.
    pub fn from_workload(queries: &[crate::WorkloadQuery]) -> TextPools {
        let pick = |cats: &[&str]| -> Vec<String> {
            queries
                .iter()
                .filter(|q| cats.contains(&q.category.as_str()))
                .map(|q| q.text.clone())
                .collect()
        };
        let mut term = pick(&["term-1k", "term-10k"]);
        if term.is_empty() {
            term = queries
                .iter()
                .filter(|q| q.category.starts_with("term-"))
                .map(|q| q.text.clone())
                .collect();
        }
        let mut words: Vec<String> = queries
            .iter()
            .filter(|q| q.category.starts_with("term-"))
            .map(|q| q.text.to_lowercase())
            .filter(|t| !t.is_empty() && t.chars().all(char::is_alphanumeric))
            .collect();
        words.sort_unstable();
        words.dedup();
        TextPools {
            term,
            and: pick(&["and"]),
            or: pick(&["or"]),
            words,
        }
    }

    fn get(&self, kind: &str) -> &[String] {
        match kind {
            "term" => &self.term,
            "and" => &self.and,
            _ => &self.or,
        }
    }
}

fn text_query(text: &str) -> Value {
    json!({"query_string": {"query": text}})
}

/// Up to `per_category` queries of each typed category, deterministic for
/// `seed`. Categories whose filters or text queries cannot be drawn are
/// left out.
pub fn generate(sample: &TypedSample, texts: &TextPools, per_category: usize, seed: u64) -> Vec<TypedQuery> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = Vec::new();
    if !sample.has_typed() {
        return out;
    }
    let push = |out: &mut Vec<TypedQuery>, category: String, q: Value, modes, selectivity| {
        out.push(TypedQuery {
            category,
            json: q.to_string(),
            modes,
            selectivity,
        })
    };
    let mut kind = 0usize;
    for (target, level) in FILTER_LEVELS {
        for text_kind in TEXT_KINDS {
            let pool = texts.get(text_kind);
            if pool.is_empty() {
                continue;
            }
            for _ in 0..per_category {
                kind += 1;
                let Some(f) = sample.filter(target, kind, &mut rng) else {
                    continue;
                };
                let text = &pool[rng.random_range(0..pool.len())];
                let q = json!({"query": {"bool": {"must": [text_query(text)], "filter": [f.to_json(sample)]}}});
                push(
                    &mut out,
                    format!("filter-{level}-{text_kind}"),
                    q,
                    FILTER_MODES,
                    Some(sample.selectivity(&f)),
                );
            }
        }
    }
    for category in SORT_CATEGORIES {
        let sort = if category.ends_with("price-asc") {
            json!([{"price": {"order": "asc"}}])
        } else {
            json!([{"date": {"order": "desc"}}])
        };
        for i in 0..per_category {
            let (query, selectivity) = if category.starts_with("text-") {
                let kind = TEXT_KINDS[i % TEXT_KINDS.len()];
                let pool = texts.get(kind);
                if pool.is_empty() {
                    continue;
                }
                (text_query(&pool[rng.random_range(0..pool.len())]), None)
            } else if i % 5 == 0 {
                (json!({"match_all": {}}), Some(1.0))
            } else {
                kind += 1;
                let target = FILTER_LEVELS[i % FILTER_LEVELS.len()].0;
                let Some(f) = sample.filter(target, kind, &mut rng) else {
                    continue;
                };
                let s = sample.selectivity(&f);
                (json!({"bool": {"filter": [f.to_json(sample)]}}), Some(s))
            };
            push(
                &mut out,
                category.to_string(),
                json!({"query": query, "sort": sort}),
                SORT_MODES,
                selectivity,
            );
        }
    }
    for (category, field) in RANGE_CATEGORIES
        .iter()
        .zip([NumField::Price, NumField::Date, NumField::Popularity])
    {
        for _ in 0..per_category {
            // Selectivities spread evenly in log scale between 0.1% and 50%.
            let target = 0.001 * 500f64.powf(rng.random::<f64>());
            let Some(f) = sample.range_filter(field, target, &mut rng) else {
                continue;
            };
            let s = sample.selectivity(&f);
            push(
                &mut out,
                category.to_string(),
                json!({"query": f.to_json(sample)}),
                RANGE_MODES,
                Some(s),
            );
        }
    }
    for category in AGG_CATEGORIES {
        let aggs = agg_body(category).expect("an aggregation category");
        for _ in 0..per_category {
            let (query, selectivity) = if category.ends_with("-all") {
                (json!({"match_all": {}}), 1.0)
            } else {
                let Some((text, s)) = sample.text_query(AGG_TEXT_SELECTIVITY, &mut rng) else {
                    continue;
                };
                (text_query(&text), s)
            };
            push(
                &mut out,
                category.to_string(),
                json!({"query": query, "aggs": aggs}),
                AGG_MODES,
                Some(selectivity),
            );
        }
    }
    out
}

/// Epoch milliseconds of the protocol's ISO-8601 dates: `YYYY-MM-DD` or
/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]` (no zone = UTC); `None`
/// when `s` is not one.
pub fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let n = b.len();
    let digits = |at: usize, len: usize| -> Option<i64> {
        let part = b.get(at..at + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |v, &c| v * 10 + i64::from(c - b'0')))
    };
    if n < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    let millis = days_from_civil(y, mo as u32, d as u32) * 86_400_000;
    if n == 10 {
        return Some(millis);
    }
    if n < 19 || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hh, mm, ss) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0;
    if i < n && b[i] == b'.' {
        i += 1;
        let start = i;
        while i < n && b[i].is_ascii_digit() {
            i += 1;
        }
        if !(1..=9).contains(&(i - start)) {
            return None;
        }
        for j in 0..3 {
            ms = ms * 10
                + if start + j < i {
                    i64::from(b[start + j] - b'0')
                } else {
                    0
                };
        }
    }
    let mut offset = 0;
    if i < n {
        match b[i] {
            b'Z' => i += 1,
            c @ (b'+' | b'-') if i + 6 == n && b[i + 3] == b':' => {
                let (oh, om) = (digits(i + 1, 2)?, digits(i + 4, 2)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                offset = (oh * 60 + om) * 60_000 * if c == b'+' { 1 } else { -1 };
                i += 6;
            }
            _ => return None,
        }
    }
    (i == n).then_some(millis + hh * 3_600_000 + mm * 60_000 + ss * 1000 + ms - offset)
}

/// Epoch milliseconds as `YYYY-MM-DDTHH:MM:SSZ`, with `.mmm` when not a
/// whole second.
pub fn format_date(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (s, frac) = (rem / 1000, rem % 1000);
    let time = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    if frac == 0 {
        format!("{y:04}-{m:02}-{d:02}T{time}Z")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{time}.{frac:03}Z")
    }
}

fn leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests;
