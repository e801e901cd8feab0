//! The typed fields of a generated document (`GenOptions::typed`): what a
//! real user's records carry besides their text, with realistic
//! distributions, for filters, sorting and their benchmarks.
//!
//! * `date`: an ISO-8601 UTC timestamp (`2011-03-14T15:09:26Z`) between
//!   2005-01-01 and 2024-12-31, its density growing linearly so that the
//!   last day is twice as likely as the first;
//! * `category`: one keyword of [`CATEGORIES`] word-like values, Zipf
//!   distributed (exponent 1);
//! * `tags`: 0 to [`MAX_TAGS`] distinct keywords of a vocabulary of
//!   [`TAGS`], Zipf distributed (an empty array for some documents);
//! * `price`: a double, log-normal (median [`PRICE_MEDIAN`], sigma
//!   [`PRICE_SIGMA`]) rounded to cents; absent from [`PRICE_MISSING`] of the
//!   documents;
//! * `popularity`: a long, discrete Pareto (tail exponent
//!   [`POPULARITY_ALPHA`]) capped at [`POPULARITY_MAX`].
//!
//! The values of document `i` come from their own RNG stream seeded by
//! `(seed, i)`, so the text of a document is the same with and without
//! typed fields.

use rand::Rng;
use serde_json::Value;

use super::sample::{exp, ln, mix64, normal, rng_for, threshold, unit, zipf_weights, Alias, GenRng};
use super::vocab;
use crate::schema::value::civil_from_days;
use crate::schema::Document;

/// Names of the typed fields, in the order they are written.
pub const TYPED_FIELDS: [&str; 5] = ["date", "category", "tags", "price", "popularity"];

/// The Elasticsearch mapping of a typed generated corpus: `title` and `body`
/// text, then the typed fields with the types their values have.
pub fn mapping() -> Value {
    serde_json::json!({"properties": {
        "title": {"type": "text"},
        "body": {"type": "text"},
        "date": {"type": "date"},
        "category": {"type": "keyword"},
        "tags": {"type": "keyword"},
        "price": {"type": "double"},
        "popularity": {"type": "long"},
    }})
}
/// Distinct `category` values.
pub const CATEGORIES: usize = 1000;
/// Distinct `tags` values.
pub const TAGS: usize = 200;
/// Most tags on one document.
pub const MAX_TAGS: usize = 5;
/// Median `price`.
pub const PRICE_MEDIAN: f64 = 30.0;
/// Sigma of the log-normal `price`.
pub const PRICE_SIGMA: f64 = 1.0;
/// Fraction of documents without a `price`.
pub const PRICE_MISSING: f64 = 0.03;
/// Tail exponent of `popularity` (`P(X > x) ~ x^-alpha`).
pub const POPULARITY_ALPHA: f64 = 1.2;
/// Scale of `popularity`: `floor(scale * (u^(-1/alpha) - 1))`.
const POPULARITY_SCALE: f64 = 10.0;
/// Largest `popularity`.
pub const POPULARITY_MAX: u64 = 1_000_000;
/// First second of the `date` range: 2005-01-01T00:00:00Z.
pub const DATE_START_SECS: i64 = 1_104_537_600;
/// End of the `date` range (exclusive): 2025-01-01T00:00:00Z.
pub const DATE_END_SECS: i64 = 1_735_689_600;
/// Weights of 0..=5 tags on a document.
const TAG_COUNT_WEIGHTS: [f64; MAX_TAGS + 1] = [15.0, 20.0, 25.0, 20.0, 12.0, 8.0];
/// RNG stream of the typed values (the text uses streams 1..=4).
const STREAM_TYPED: u64 = 5;
/// Salt of the seed of the category and tag names.
const NAMES_SALT: u64 = 0x7479_7065_645f_6e6d;

/// The sampled typed values of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypedValues {
    /// Seconds since the Unix epoch.
    pub(crate) date_secs: i64,
    /// Category rank (0 = most frequent).
    pub(crate) category: u32,
    /// Tag ranks, `tags[..n_tags]`, distinct, in the order drawn.
    pub(crate) tags: [u32; MAX_TAGS],
    pub(crate) n_tags: usize,
    /// Price in cents, `None` when the document has no price.
    pub(crate) price_cents: Option<u64>,
    pub(crate) popularity: u64,
}

/// The typed-field model: names and samplers, built once per generator.
pub(crate) struct TypedModel {
    seed: u64,
    categories: Vec<String>,
    tags: Vec<String>,
    category: Alias,
    tag: Alias,
    tag_count: Alias,
    t_price_missing: u64,
}

impl TypedModel {
    pub(crate) fn new(seed: u64) -> TypedModel {
        let mut names = vocab::build(mix64(seed ^ NAMES_SALT), CATEGORIES + TAGS, 0);
        let tags = names.split_off(CATEGORIES);
        TypedModel {
            seed,
            categories: names,
            tags,
            category: Alias::new(&zipf_weights(1, CATEGORIES, 1.0)),
            tag: Alias::new(&zipf_weights(1, TAGS, 1.0)),
            tag_count: Alias::new(&TAG_COUNT_WEIGHTS),
            t_price_missing: threshold(PRICE_MISSING),
        }
    }

    /// The category names by rank (most frequent first).
    pub(crate) fn categories(&self) -> &[String] {
        &self.categories
    }

    /// The tag names by rank (most frequent first).
    pub(crate) fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The typed values of document `i`.
    pub(crate) fn values(&self, i: u64) -> TypedValues {
        let mut rng = rng_for(self.seed, STREAM_TYPED, i);
        let date_secs = sample_date(&mut rng);
        let category = self.category.sample(&mut rng);
        let n_tags = self.tag_count.sample(&mut rng) as usize;
        let mut tags = [0u32; MAX_TAGS];
        let mut n = 0;
        let mut attempts = 0;
        while n < n_tags && attempts < 64 {
            attempts += 1;
            let t = self.tag.sample(&mut rng);
            if !tags[..n].contains(&t) {
                tags[n] = t;
                n += 1;
            }
        }
        let missing = u64::from(rng.next_u32()) < self.t_price_missing;
        let price = exp(ln(PRICE_MEDIAN) + PRICE_SIGMA * normal(&mut rng));
        let price_cents = (!missing).then(|| (price * 100.0).round().max(0.0) as u64);
        // u in (0, 1]: never ln(0).
        let u = 1.0 - unit(&mut rng);
        let popularity = (POPULARITY_SCALE * (exp(-ln(u) / POPULARITY_ALPHA) - 1.0)).floor();
        let popularity = (popularity.max(0.0) as u64).min(POPULARITY_MAX);
        TypedValues {
            date_secs,
            category,
            tags,
            n_tags: n,
            price_cents,
            popularity,
        }
    }

    /// Sets the typed fields of `doc` to `v`.
    pub(crate) fn set_fields(&self, v: &TypedValues, doc: &mut Document) {
        let f = &mut doc.fields;
        f.insert("date".into(), Value::String(format_date(v.date_secs)));
        f.insert(
            "category".into(),
            Value::String(self.categories[v.category as usize].clone()),
        );
        let tags = v.tags[..v.n_tags]
            .iter()
            .map(|&t| Value::String(self.tags[t as usize].clone()))
            .collect();
        f.insert("tags".into(), Value::Array(tags));
        if let Some(c) = v.price_cents {
            f.insert("price".into(), Value::from(c as f64 / 100.0));
        }
        f.insert("popularity".into(), Value::from(v.popularity));
    }
}

/// Seconds in `[DATE_START_SECS, DATE_END_SECS)` with a density growing
/// linearly from 1 to 2: the inverse of `F(t) = (t + t^2 / 2) / 1.5`.
fn sample_date(rng: &mut GenRng) -> i64 {
    let u = unit(rng);
    let t = (1.0 + 3.0 * u).sqrt() - 1.0;
    let span = (DATE_END_SECS - DATE_START_SECS) as f64;
    (DATE_START_SECS + (t * span).floor() as i64).clamp(DATE_START_SECS, DATE_END_SECS - 1)
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic
/// Gregorian calendar, UTC).
pub fn format_date(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let s = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}
