//! The benchmark's aggregations (`"aggs"` of a structured query), run with
//! tantivy's aggregation module and answered in Elasticsearch's shape (as
//! tierdex answers them):
//!
//! * `{"terms": {"field": KEYWORD, "size": n}}`: tantivy's `terms`, buckets
//!   ordered by count descending then key ascending;
//! * `{"date_histogram": {"field": "date", "calendar_interval": "month"}}`:
//!   tantivy's `date_histogram` takes fixed intervals only, so this is its
//!   `range` aggregation with one range per calendar month (UTC) of the
//!   index's dates; buckets from the first to the last non-empty month;
//! * `{"stats": {"field": NUMBER}}`: tantivy's `stats`.
//!
//! Any other shape or option is an error.

use serde_json::{json, Map, Value};
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::agg_result::AggregationResults;
use tantivy::Searcher;
use tierdex::schema::value::{civil_from_days, days_from_civil, format_iso};

use crate::schema::{Kind, TypedFields};

const DAY_MS: i64 = 86_400_000;

/// One named aggregation of a request.
#[derive(Debug, Clone, PartialEq)]
enum Spec {
    Terms,
    /// Month starts (epoch ms) of the ranges, the last one the end of the last month.
    Month(Vec<i64>),
    Stats,
}

/// A parsed `aggs` object: tantivy's request and what its answer turns into.
pub struct Request {
    pub tantivy: Aggregations,
    specs: Vec<(String, Spec)>,
}

/// Epoch ms of the first day of the month of `ms`.
fn month_start(ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(ms.div_euclid(DAY_MS));
    days_from_civil(y, m, 1) * DAY_MS
}

fn next_month(ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(ms.div_euclid(DAY_MS));
    let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(y, m, 1) * DAY_MS
}

/// The smallest and largest value (epoch ms) of date field `field` in the
/// index; `None` without any.
pub fn date_bounds(searcher: &Searcher, field: &str) -> tantivy::Result<Option<(i64, i64)>> {
    let mut bounds: Option<(i64, i64)> = None;
    for segment in searcher.segment_readers() {
        let column = segment.fast_fields().date(field)?;
        if column.values.num_vals() == 0 {
            continue;
        }
        let (lo, hi) = (
            column.min_value().into_timestamp_millis(),
            column.max_value().into_timestamp_millis(),
        );
        bounds = Some(bounds.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    Ok(bounds)
}

fn only_keys(o: &Map<String, Value>, what: &str, allowed: &[&str]) -> Result<(), String> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("{what}: `{k}` is not supported (only {})", allowed.join(", "))),
        None => Ok(()),
    }
}

fn field<'a>(o: &'a Map<String, Value>, what: &str) -> Result<&'a str, String> {
    o.get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} needs a string `field`"))
}

/// Parses the `aggs` object; `dates` are the index's date bounds (for the
/// monthly ranges).
pub fn parse(aggs: &Value, typed: Option<&TypedFields>, dates: Option<(i64, i64)>) -> Result<Request, String> {
    let aggs = aggs.as_object().ok_or("`aggs` must be an object")?;
    let typed = typed.ok_or("aggregations need the typed fields, which this index lacks")?;
    let mut specs = Vec::new();
    let mut req = Map::new();
    for (name, body) in aggs {
        let o = body
            .as_object()
            .ok_or_else(|| format!("aggregation `{name}` must be an object"))?;
        if o.len() != 1 {
            return Err(format!(
                "aggregation `{name}` must have exactly one type (no sub-aggregations)"
            ));
        }
        let (ty, params) = o.iter().next().expect("one entry");
        let what = format!("`{ty}` aggregation `{name}`");
        let p = params.as_object().ok_or_else(|| format!("{what} takes an object"))?;
        let f = field(p, &what)?;
        let kind = typed.get(f).map(|(_, k)| k);
        let (spec, tantivy) = match ty.as_str() {
            "terms" => {
                only_keys(p, &what, &["field", "size"])?;
                if kind != Some(Kind::Keyword) {
                    return Err(format!("{what}: `{f}` is not a keyword field"));
                }
                let size = match p.get("size") {
                    None => 10,
                    Some(v) => v.as_u64().ok_or_else(|| format!("{what}: `size` must be a whole number"))?,
                };
                (Spec::Terms, json!({"terms": {"field": f, "size": size}}))
            }
            "date_histogram" => {
                only_keys(p, &what, &["field", "calendar_interval"])?;
                if kind != Some(Kind::Date) {
                    return Err(format!("{what}: `{f}` is not a date field"));
                }
                match p.get("calendar_interval").and_then(Value::as_str) {
                    Some("month" | "1M") => {}
                    other => return Err(format!("{what}: only `calendar_interval: month` is supported, not {other:?}")),
                }
                let mut starts = Vec::new();
                if let Some((lo, hi)) = dates {
                    let mut m = month_start(lo);
                    while m <= hi {
                        starts.push(m);
                        m = next_month(m);
                    }
                    starts.push(m);
                }
                // A date field's range bounds are nanoseconds.
                let ranges: Vec<Value> = starts
                    .windows(2)
                    .map(|w| json!({"key": w[0].to_string(), "from": w[0] as f64 * 1e6, "to": w[1] as f64 * 1e6}))
                    .collect();
                let tantivy = if ranges.is_empty() {
                    // No date in the index: any bucket would do; none shows.
                    json!({"range": {"field": f, "ranges": [{"key": "none", "to": 0.0}]}})
                } else {
                    json!({"range": {"field": f, "ranges": ranges}})
                };
                (Spec::Month(starts), tantivy)
            }
            "stats" => {
                only_keys(p, &what, &["field"])?;
                if !matches!(kind, Some(Kind::Double | Kind::Long)) {
                    return Err(format!("{what}: `{f}` is not a numeric field"));
                }
                (Spec::Stats, json!({"stats": {"field": f}}))
            }
            other => {
                return Err(format!(
                    "aggregation `{name}`: `{other}` is not supported (terms, date_histogram by month, stats)"
                ))
            }
        };
        specs.push((name.clone(), spec));
        req.insert(name.clone(), tantivy);
    }
    let tantivy: Aggregations =
        serde_json::from_value(Value::Object(req)).map_err(|e| format!("tantivy aggregation request: {e}"))?;
    Ok(Request { tantivy, specs })
}

impl Request {
    /// tantivy's result in Elasticsearch's shape.
    pub fn answer(&self, result: &AggregationResults) -> Result<Value, String> {
        let v = serde_json::to_value(result).map_err(|e| format!("aggregation result: {e}"))?;
        let mut out = Map::new();
        for (name, spec) in &self.specs {
            let r = v
                .get(name)
                .ok_or_else(|| format!("tantivy gave no result for aggregation `{name}`"))?;
            let buckets = || -> Result<Vec<(Value, u64)>, String> {
                r.get("buckets")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("aggregation `{name}`: no buckets in {r}"))?
                    .iter()
                    .map(|b| {
                        let key = b.get("key").cloned().unwrap_or(Value::Null);
                        let count = b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
                        Ok((key, count))
                    })
                    .collect()
            };
            let answer = match spec {
                Spec::Terms => {
                    let mut list = buckets()?;
                    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.as_str().cmp(&b.0.as_str())));
                    let list: Vec<Value> = list
                        .into_iter()
                        .map(|(k, c)| json!({"key": k, "doc_count": c}))
                        .collect();
                    json!({
                        "doc_count_error_upper_bound": r.get("doc_count_error_upper_bound").cloned().unwrap_or(json!(0)),
                        "sum_other_doc_count": r.get("sum_other_doc_count").cloned().unwrap_or(json!(0)),
                        "buckets": list,
                    })
                }
                Spec::Month(starts) => {
                    let mut counts = vec![0u64; starts.len().saturating_sub(1)];
                    for (key, c) in buckets()? {
                        // The ranges below and above the months have keys
                        // of their own (`*-...`): not months.
                        let Some(ms) = key.as_str().and_then(|k| k.parse::<i64>().ok()) else {
                            continue;
                        };
                        if let Ok(i) = starts.binary_search(&ms) {
                            counts[i] = c;
                        }
                    }
                    let (first, last) = (
                        counts.iter().position(|&c| c > 0),
                        counts.iter().rposition(|&c| c > 0),
                    );
                    let list: Vec<Value> = match (first, last) {
                        (Some(a), Some(b)) => (a..=b)
                            .map(|i| json!({"key_as_string": format_iso(starts[i]), "key": starts[i], "doc_count": counts[i]}))
                            .collect(),
                        _ => Vec::new(),
                    };
                    json!({ "buckets": list })
                }
                Spec::Stats => {
                    let get = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
                    json!({"count": get("count"), "min": get("min"), "max": get("max"), "avg": get("avg"), "sum": get("sum")})
                }
            };
            out.insert(name.clone(), answer);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months() {
        let ms = |y, m, d| days_from_civil(y, m, d) * DAY_MS;
        assert_eq!(month_start(ms(2020, 2, 29) + 5), ms(2020, 2, 1));
        assert_eq!(next_month(ms(2020, 12, 1)), ms(2021, 1, 1));
        assert_eq!(month_start(ms(1969, 12, 31) + 1), ms(1969, 12, 1));
    }
}
