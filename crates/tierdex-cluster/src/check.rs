//! Comparing a cluster's answers with one index's: the tests, the bench and
//! `tierdex demo --cluster` check with these.

use serde_json::{json, Value};

/// The `(_id, _score)` of a `_search` answer's hits, in order.
pub fn hits_of(answer: &Value) -> Vec<(String, f32)> {
    answer["hits"]["hits"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    (
                        h["_id"].as_str().unwrap_or_default().to_string(),
                        h["_score"].as_f64().unwrap_or(f64::NAN) as f32,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How two top-k lists of `(id, score)` agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopAgreement {
    /// Scores equal to the last bit, in order.
    pub exact: bool,
    /// Scores within a millionth (relative), in order.
    pub near: bool,
    /// `near`, and the same ids: those tied with the page's last score are
    /// taken as a set that either side may cut elsewhere.
    pub ids: bool,
}

/// Compares `got` with `want`.
pub fn same_top(got: &[(String, f32)], want: &[(String, f32)]) -> TopAgreement {
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
    let exact = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a.1 == b.1);
    let near = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| close(a.1, b.1));
    let last = want.last().map(|h| h.1);
    let kept = |h: &&(String, f32)| last.is_none_or(|l| !close(h.1, l));
    let mut a: Vec<&str> = got.iter().filter(kept).map(|h| h.0.as_str()).collect();
    let mut b: Vec<&str> = want.iter().filter(kept).map(|h| h.0.as_str()).collect();
    a.sort_unstable();
    b.sort_unstable();
    TopAgreement {
        exact,
        near,
        ids: near && a == b,
    }
}

/// A count, the top 10 `(id, score)` and the finalized aggregations.
pub type OneAnswer = (u64, Vec<(String, f32)>, Option<Value>);

/// One index's answer to a `_search` body (`query`, absent: every
/// document; `aggs`): the exact count, the top 10 `(id, score)` and the
/// finalized aggregations.
pub fn one_index(s: &tierdex::Searcher, body: &Value) -> tierdex::Result<OneAnswer> {
    let query = match body.get("query") {
        Some(q) => tierdex::query::dsl::query(s.schema(), s.query_limits(), q)?,
        None => tierdex::query::ast::Query::MatchAll,
    };
    let mut req = tierdex::search::SearchRequest::new(&query, 10);
    req.mode = tierdex::Mode::TopKAndCount;
    let r = s.search_request(&req)?;
    let top = r
        .hits
        .iter()
        .map(|h| Ok((s.doc_id(h.doc)?, h.score)))
        .collect::<tierdex::Result<Vec<_>>>()?;
    let aggs = match body.get("aggs").or_else(|| body.get("aggregations")) {
        None => None,
        Some(a) => {
            let wrapped = json!({ "aggs": a });
            let Some(req) = tierdex::aggs::Aggregations::from_body(
                s.schema(),
                s.query_limits(),
                wrapped.as_object().expect("an object"),
            )?
            else {
                return Ok((r.count.unwrap_or(0), top, None));
            };
            let mut m = tierdex::aggs::AggsPartial::empty(&req);
            for p in s.aggregate_parts(&query, &req)? {
                m.merge(p);
            }
            Some(tierdex::aggs::finalize(&req, &m)?)
        }
    };
    Ok((r.count.unwrap_or(0), top, aggs))
}

/// A sorted hit: its id and its sort values (without the tie-break).
pub type SortedHit = (String, Vec<Value>);

/// One index's answer to a sorted `_search` body (`query`, `sort`, `from`,
/// `size`): the exact count and each hit's id and sort values.
pub fn sorted_one_index(s: &tierdex::Searcher, body: &Value) -> tierdex::Result<(u64, Vec<SortedHit>)> {
    let query = match body.get("query") {
        Some(q) => tierdex::query::dsl::query(s.schema(), s.query_limits(), q)?,
        None => tierdex::query::ast::Query::MatchAll,
    };
    let sort = tierdex::query::dsl::sort(s.schema(), body.get("sort").unwrap_or(&Value::Null))?;
    let mut req = tierdex::search::SearchRequest::new(&query, body["size"].as_u64().unwrap_or(10) as usize);
    req.from = body["from"].as_u64().unwrap_or(0) as usize;
    req.sort = sort.clone();
    req.mode = tierdex::Mode::TopKAndCount;
    let r = s.search_request(&req)?;
    let values = r.sort.unwrap_or_default();
    let hits = r
        .hits
        .iter()
        .zip(values)
        .map(|(h, v)| {
            let v = v[..sort.len().min(v.len())]
                .iter()
                .map(|x| serde_json::to_value(x).unwrap_or(Value::Null))
                .collect();
            Ok((s.doc_id(h.doc)?, v))
        })
        .collect::<tierdex::Result<Vec<_>>>()?;
    Ok((r.count.unwrap_or(0), hits))
}

/// The id and sort values (without the trailing tie-break) of a sorted
/// `_search` answer's hits.
pub fn sorted_hits(answer: &Value) -> Vec<SortedHit> {
    answer["hits"]["hits"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    let v = h["sort"].as_array().cloned().unwrap_or_default();
                    let keys = v.len().saturating_sub(1);
                    (h["_id"].as_str().unwrap_or_default().to_string(), v[..keys].to_vec())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether two sorted pages agree: the same sort values in order, and the
/// same ids within each run of equal values (which either side orders by
/// its own tie-break); the run at the page's end may be cut elsewhere.
pub fn same_sorted(got: &[SortedHit], want: &[SortedHit]) -> bool {
    if got.len() != want.len() || got.iter().zip(want).any(|(a, b)| a.1 != b.1) {
        return false;
    }
    let last = want.last().map(|h| &h.1);
    let mut i = 0;
    while i < want.len() {
        let mut j = i;
        while j < want.len() && want[j].1 == want[i].1 {
            j += 1;
        }
        if Some(&want[i].1) != last {
            let mut a: Vec<&str> = got[i..j].iter().map(|h| h.0.as_str()).collect();
            let mut b: Vec<&str> = want[i..j].iter().map(|h| h.0.as_str()).collect();
            a.sort_unstable();
            b.sort_unstable();
            if a != b {
                return false;
            }
        }
        i = j;
    }
    true
}

/// Whether two JSON values are equal but for numbers within `rel`
/// (relative): float sums added in another order (across shards or
/// segments) may differ in their last bits.
pub fn json_close(a: &Value, b: &Value, rel: f64) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= rel * x.abs().max(y.abs()),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y, rel)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w, rel)))
        }
        _ => a == b,
    }
}

/// One index of `(id, source)` documents under `dir` with `mappings` (as
/// a cluster index is created with), flushed and searchable: what a
/// cluster's answers are compared with.
pub fn reference_index(
    dir: &std::path::Path,
    mappings: &Value,
    docs: &[(String, Value)],
) -> tierdex::Result<tierdex::update::IndexWriter> {
    let schema = tierdex::Schema::from_json(&mappings.to_string())
        .map_err(|e| tierdex::Error::InvalidArgument(e.to_string()))?;
    let w = tierdex::update::IndexWriter::create_with_schema(
        dir,
        schema,
        Default::default(),
        Default::default(),
        Default::default(),
        tierdex::update::WriterOptions::default(),
    )?;
    for chunk in docs.chunks(5000) {
        let batch = chunk
            .iter()
            .map(|(id, v)| crate::node::source_doc(id.clone(), v).map_err(tierdex::Error::InvalidArgument))
            .collect::<tierdex::Result<Vec<_>>>()?;
        w.add(batch)?;
    }
    w.flush()?;
    w.refresh()?;
    Ok(w)
}

/// A `_bulk` body indexing `(id, source)` pairs.
pub fn bulk_body<'a>(docs: impl IntoIterator<Item = (&'a str, &'a Value)>) -> String {
    let mut nd = String::new();
    for (id, source) in docs {
        nd.push_str(&json!({ "index": { "_id": id } }).to_string());
        nd.push('\n');
        nd.push_str(&source.to_string());
        nd.push('\n');
    }
    nd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(id: &str, s: f32) -> (String, f32) {
        (id.to_string(), s)
    }

    #[test]
    fn ties_at_the_end_may_be_cut_elsewhere() {
        let want = [h("a", 3.0), h("b", 2.0), h("c", 1.0)];
        let got = [h("a", 3.0), h("b", 2.0), h("d", 1.0)];
        assert_eq!(
            same_top(&got, &want),
            TopAgreement {
                exact: true,
                near: true,
                ids: true
            }
        );
        let swapped = [h("a", 3.0), h("c", 2.0), h("b", 1.0)];
        assert!(!same_top(&swapped, &want).ids);
        let off = [h("a", 3.0), h("b", 2.0 + 1e-3), h("c", 1.0)];
        let t = same_top(&off, &want);
        assert!(!t.exact && !t.near && !t.ids);
        let ulp = [h("a", 3.0), h("b", f32::from_bits(2.0f32.to_bits() + 1)), h("c", 1.0)];
        let t = same_top(&ulp, &want);
        assert!(!t.exact && t.near && t.ids);
        assert!(!same_top(&want[..2], &want).near);
    }

    #[test]
    fn sorted_pages_agree_up_to_ties() {
        let hit = |id: &str, v: i64| (id.to_string(), vec![json!(v)]);
        let want = [hit("a", 1), hit("b", 2), hit("c", 2), hit("d", 3), hit("e", 3)];
        let swapped = [hit("a", 1), hit("c", 2), hit("b", 2), hit("d", 3), hit("f", 3)];
        assert!(same_sorted(&swapped, &want));
        let other = [hit("a", 1), hit("b", 2), hit("x", 2), hit("d", 3), hit("e", 3)];
        assert!(!same_sorted(&other, &want));
        let values = [hit("a", 1), hit("b", 2), hit("c", 3), hit("d", 3), hit("e", 3)];
        assert!(!same_sorted(&values, &want));
        assert!(!same_sorted(&want[..4], &want));
        let v = json!({ "hits": { "hits": [ { "_id": "x", "sort": ["k", 7, 12345] } ] } });
        assert_eq!(sorted_hits(&v), vec![("x".to_string(), vec![json!("k"), json!(7)])]);
    }

    #[test]
    fn json_close_allows_last_bits_only() {
        let a = json!({ "s": { "sum": 244373.31999999995, "n": [1, "x"] } });
        let b = json!({ "s": { "sum": 244373.32000000033, "n": [1, "x"] } });
        assert!(json_close(&a, &b, 1e-12) && a != b);
        assert!(!json_close(&a, &b, 1e-18));
        let c = json!({ "s": { "sum": 244373.32000000033, "n": [1, "y"] } });
        assert!(!json_close(&a, &c, 1e-12));
        assert!(!json_close(&json!({ "a": 1 }), &json!({ "a": 1, "b": 2 }), 1e-12));
        assert!(!json_close(&json!([1.0]), &json!([1.5]), 1e-12));
    }

    #[test]
    fn hits_and_bulk_bodies() {
        let v = json!({ "hits": { "hits": [ { "_id": "x", "_score": 1.5 } ] } });
        assert_eq!(hits_of(&v), vec![h("x", 1.5)]);
        assert!(hits_of(&json!({})).is_empty());
        let src = json!({ "t": "a\nb" });
        let nd = bulk_body([("1", &src)]);
        let lines: Vec<&str> = nd.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(serde_json::from_str::<Value>(lines[1]).unwrap(), src);
    }
}
