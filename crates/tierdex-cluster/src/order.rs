//! How the broker orders the shards' hits: by score, or by a request's
//! `sort`, and where each shard's page starts for a `search_after`.
//!
//! Equal keys are ordered by shard, then by the document number in the
//! replica's snapshot (Elasticsearch's `_shard_doc`): a sorted hit's sort
//! values end with `shard << 32 | document`, and a `search_after` holding it
//! continues exactly after that hit. As in Elasticsearch, that tie-break is
//! stable while the replicas answering do not change (a refresh or another
//! replica renumbers documents); a sort ending with a unique field pages
//! the same whatever answers.

use std::cmp::Ordering;

use serde_json::{json, Map, Value};
use tierdex::schema::Schema;
use tierdex::search::{SortBy, SortField, SortValue};

use crate::wire::ShardHit;

/// A hit's place in the tie-break order: (shard, document number).
type ShardDoc = (u32, u32);

/// A request's order, as the broker merges the shards' pages.
#[derive(Debug, Clone, Default)]
pub struct Order {
    /// The keys up to the first `_doc` (empty: by score, or by `_doc` alone).
    keys: Vec<SortField>,
    /// What the nodes sort by (`None`: by score).
    node_sort: Option<Value>,
    /// The request's `search_after`: its key values and, when given, the
    /// tie-break (shard, document).
    after: Option<(Vec<SortValue>, Option<ShardDoc>)>,
}

/// A bad `sort` or `search_after`.
fn bad(msg: impl Into<String>) -> tierdex::Error {
    tierdex::Error::InvalidArgument(msg.into())
}

impl Order {
    /// The order a search body asks for (`sort`, `search_after`), read
    /// against the index's mapping; `shards` bounds the tie-break's shard.
    pub fn parse(schema: &Schema, body: &Value, shards: u32) -> tierdex::Result<Order> {
        let spec = match body.get("sort") {
            None => Vec::new(),
            Some(v) => tierdex::query::dsl::sort(schema, v)?,
        };
        let mut order = Order::default();
        if spec.is_empty() {
            if body.get("search_after").is_some() {
                return Err(bad("[search_after] needs a [sort]"));
            }
            return Ok(order);
        }
        let cut = spec.iter().position(|f| f.by == SortBy::Doc);
        if let Some(i) = cut {
            if spec[i].descending {
                return Err(bad(
                    "[sort] by _doc descending is not supported across shards (equal keys are ordered by \
                     shard, then document, ascending)",
                ));
            }
        }
        order.keys = spec[..cut.unwrap_or(spec.len())].to_vec();
        order.node_sort = Some(if order.keys.is_empty() {
            json!(["_doc"])
        } else {
            sort_json(schema, &order.keys)
        });
        if let Some(v) = body.get("search_after") {
            let mut values = tierdex::query::dsl::search_after(v)?;
            let k = order.keys.len();
            let tie = if values.len() == k + 1 {
                match values.pop() {
                    Some(SortValue::Long(t)) if t >= 0 && (t >> 32) < i64::from(shards) => {
                        Some(((t >> 32) as u32, (t & 0xffff_ffff) as u32))
                    }
                    Some(other) => {
                        return Err(bad(format!(
                            "[search_after] value {} ({other:?}) is not a hit's shard-document value",
                            k + 1
                        )))
                    }
                    None => None,
                }
            } else if values.len() == k && k > 0 {
                None
            } else {
                return Err(bad(format!(
                    "[search_after] has {} values; the sort has {k} keys before the hit's shard-document \
                     value (take a hit's whole [sort] values)",
                    values.len()
                )));
            };
            order.after = Some((values, tie));
        }
        Ok(order)
    }

    /// Whether hits are ordered by a `sort` (and carry sort values).
    pub fn sorted(&self) -> bool {
        self.node_sort.is_some()
    }

    /// What the nodes sort by (`None`: by score).
    pub fn node_sort(&self) -> Option<Value> {
        self.node_sort.clone()
    }

    /// Where `shard`'s page starts: the values the engine takes as its
    /// `search_after` (`None`: from its first hit).
    pub fn shard_after(&self, shard: u32) -> Option<Vec<SortValue>> {
        let (values, tie) = self.after.as_ref()?;
        if self.keys.is_empty() {
            // The nodes sort by `_doc`: a shard before the hit's gives
            // nothing, its own from after the document, the later ones all.
            let (s0, d0) = tie.expect("a tie-break when sorted by _doc alone");
            return match shard.cmp(&s0) {
                Ordering::Less => Some(vec![SortValue::Long(i64::from(u32::MAX))]),
                Ordering::Equal => Some(vec![SortValue::Long(i64::from(d0))]),
                Ordering::Greater => None,
            };
        }
        let mut v = values.clone();
        if let Some((s0, d0)) = tie {
            match shard.cmp(s0) {
                // Strictly after the values.
                Ordering::Less => {}
                Ordering::Equal => v.push(SortValue::Long(i64::from(*d0))),
                // Equal values come after.
                Ordering::Greater => v.push(SortValue::Long(-1)),
            }
        }
        Some(v)
    }

    /// The order of two shards' hits.
    pub fn cmp(&self, a: (&ShardHit, u32), b: (&ShardHit, u32)) -> Ordering {
        let by_keys = if self.sorted() {
            fn value(h: &ShardHit, i: usize) -> &SortValue {
                const NONE: &SortValue = &SortValue::Missing;
                h.sort.as_ref().and_then(|v| v.get(i)).unwrap_or(NONE)
            }
            self.keys
                .iter()
                .enumerate()
                .map(|(i, f)| f.cmp_values(value(a.0, i), value(b.0, i)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        } else {
            b.0.score.total_cmp(&a.0.score)
        };
        by_keys.then(a.1.cmp(&b.1)).then(a.0.doc.cmp(&b.0.doc))
    }

    /// A hit's `sort` values in the answer (`None` when not sorted): its
    /// keys' values, then `shard << 32 | document`.
    pub fn hit_values(&self, hit: &ShardHit, shard: u32) -> Option<Value> {
        if !self.sorted() {
            return None;
        }
        let mut v: Vec<Value> = (0..self.keys.len())
            .map(|i| {
                let x = hit
                    .sort
                    .as_ref()
                    .and_then(|s| s.get(i))
                    .cloned()
                    .unwrap_or(SortValue::Missing);
                serde_json::to_value(x).unwrap_or(Value::Null)
            })
            .collect();
        v.push(json!((u64::from(shard) << 32) | u64::from(hit.doc)));
        Some(Value::Array(v))
    }
}

/// `keys` as a request's `sort`, by field name.
fn sort_json(schema: &Schema, keys: &[SortField]) -> Value {
    let items = keys
        .iter()
        .map(|f| {
            let name = match f.by {
                SortBy::Score => "_score".to_string(),
                SortBy::Doc => "_doc".to_string(),
                SortBy::Field(field) => schema.entries()[field.index()].name.clone(),
            };
            let mut o = Map::new();
            o.insert("order".into(), json!(if f.descending { "desc" } else { "asc" }));
            o.insert(
                "missing".into(),
                json!(if f.missing_first { "_first" } else { "_last" }),
            );
            o.insert("mode".into(), json!(if f.max { "max" } else { "min" }));
            json!({ name: o })
        })
        .collect();
    Value::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::from_json(
            &json!({"properties": {"body": {"type": "text"}, "tag": {"type": "keyword"}, "n": {"type": "long"}}})
                .to_string(),
        )
        .unwrap()
    }

    fn hit(doc: u32, score: f32, sort: Option<Vec<SortValue>>) -> ShardHit {
        ShardHit {
            id: format!("d{doc}"),
            score,
            doc,
            sort,
        }
    }

    #[test]
    fn sorts_go_to_the_nodes_by_name_and_round_trip() {
        let s = schema();
        let body = json!({"sort": [{"n": {"order": "desc", "missing": "_first"}}, "tag", "_score"]});
        let o = Order::parse(&s, &body, 3).unwrap();
        let again = tierdex::query::dsl::sort(&s, &o.node_sort().unwrap()).unwrap();
        assert_eq!(again, tierdex::query::dsl::sort(&s, &body["sort"]).unwrap());
        assert!(o.sorted());
        assert!(!Order::parse(&s, &json!({}), 3).unwrap().sorted());
        // `_doc` ends the keys; alone, the nodes sort by it.
        let o = Order::parse(&s, &json!({"sort": ["tag", "_doc", "n"]}), 3).unwrap();
        assert_eq!(o.keys.len(), 1);
        let o = Order::parse(&s, &json!({"sort": "_doc"}), 3).unwrap();
        assert_eq!(o.node_sort(), Some(json!(["_doc"])));
    }

    #[test]
    fn hits_merge_by_keys_then_shard_then_document() {
        let s = schema();
        let o = Order::parse(&s, &json!({"sort": [{"n": "desc"}]}), 3).unwrap();
        let a = hit(5, 1.0, Some(vec![SortValue::Long(7)]));
        let b = hit(1, 9.0, Some(vec![SortValue::Long(3)]));
        let c = hit(0, 1.0, Some(vec![SortValue::Missing]));
        assert_eq!(o.cmp((&a, 2), (&b, 0)), Ordering::Less);
        assert_eq!(o.cmp((&c, 0), (&b, 2)), Ordering::Greater, "missing last");
        assert_eq!(o.cmp((&a, 1), (&a, 2)), Ordering::Less, "equal values: by shard");
        let by_score = Order::default();
        assert_eq!(by_score.cmp((&b, 2), (&a, 0)), Ordering::Less);
        assert_eq!(o.hit_values(&a, 2), Some(json!([7, (2u64 << 32) | 5])));
        assert_eq!(by_score.hit_values(&a, 2), None);
    }

    #[test]
    fn search_after_splits_by_shard() {
        let s = schema();
        let t = (1i64 << 32) | 4;
        let o = Order::parse(&s, &json!({"sort": ["n"], "search_after": [7, t]}), 3).unwrap();
        assert_eq!(o.shard_after(0), Some(vec![SortValue::Long(7)]));
        assert_eq!(o.shard_after(1), Some(vec![SortValue::Long(7), SortValue::Long(4)]));
        assert_eq!(o.shard_after(2), Some(vec![SortValue::Long(7), SortValue::Long(-1)]));
        let o = Order::parse(&s, &json!({"sort": ["n"], "search_after": [7]}), 3).unwrap();
        assert_eq!(o.shard_after(2), Some(vec![SortValue::Long(7)]));
        let o = Order::parse(&s, &json!({"sort": ["_doc"], "search_after": [t]}), 3).unwrap();
        assert_eq!(o.shard_after(0), Some(vec![SortValue::Long(u32::MAX as i64)]));
        assert_eq!(o.shard_after(1), Some(vec![SortValue::Long(4)]));
        assert_eq!(o.shard_after(2), None);
        for (body, says) in [
            (json!({"search_after": [1]}), "needs a [sort]"),
            (json!({"sort": ["n"], "search_after": [1, 2, 3]}), "has 3 values"),
            (json!({"sort": ["_doc"], "search_after": []}), "has 0 values"),
            (
                json!({"sort": ["n"], "search_after": [1, 5i64 << 32]}),
                "shard-document",
            ),
            (json!({"sort": [{"_doc": "desc"}]}), "descending"),
            (json!({"sort": ["nope"]}), "nope"),
        ] {
            let e = Order::parse(&s, &body, 3).unwrap_err().to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    /// The engine's contract for one shard: its hits in sort order, those
    /// after `after` (trailing document: strictly after it, -1 all equal;
    /// none: strictly after the values), the first `k`.
    fn shard_page(hits: &[ShardHit], keys: &[SortField], after: Option<&[SortValue]>, k: usize) -> Vec<ShardHit> {
        let key = |h: &ShardHit, a: &[SortValue]| {
            keys.iter()
                .enumerate()
                .map(|(i, f)| f.cmp_values(&h.sort.as_ref().unwrap()[i], &a[i]))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        hits.iter()
            .filter(|h| match after {
                None => true,
                Some(a) => match key(h, a) {
                    Ordering::Greater => true,
                    Ordering::Less => false,
                    Ordering::Equal => match a.get(keys.len()) {
                        Some(SortValue::Long(d)) => i64::from(h.doc) > *d,
                        _ => false,
                    },
                },
            })
            .take(k)
            .cloned()
            .collect()
    }

    #[test]
    fn search_after_chains_walk_every_hit_once() {
        let s = schema();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for sort in [
            json!(["n"]),
            json!([{"n": {"order": "desc", "missing": "_first"}}]),
            json!(["tag", {"n": "desc"}]),
            json!(["_doc"]),
        ] {
            for _ in 0..30 {
                let shards = 1 + next(4) as u32;
                let o = Order::parse(&s, &json!({ "sort": sort }), shards).unwrap();
                // The nodes' keys (by `_doc` alone: the document number).
                let node_keys = tierdex::query::dsl::sort(&s, &o.node_sort().unwrap()).unwrap();
                let per: Vec<Vec<ShardHit>> = (0..shards)
                    .map(|_| {
                        let mut hits: Vec<ShardHit> = (0..next(25) as u32)
                            .map(|doc| {
                                let n = match next(6) {
                                    0 => SortValue::Missing,
                                    v => SortValue::Long(v as i64),
                                };
                                let tag = SortValue::Keyword(["a", "b"][next(2) as usize].into());
                                let sort = match node_keys[0].by {
                                    SortBy::Doc => vec![SortValue::Long(i64::from(doc))],
                                    _ if node_keys.len() == 2 => vec![tag, n],
                                    _ => vec![n],
                                };
                                hit(doc, 0.0, Some(sort))
                            })
                            .collect();
                        hits.sort_by(|a, b| {
                            node_keys
                                .iter()
                                .enumerate()
                                .map(|(i, f)| f.cmp_values(&a.sort.as_ref().unwrap()[i], &b.sort.as_ref().unwrap()[i]))
                                .find(|o| o.is_ne())
                                .unwrap_or(Ordering::Equal)
                                .then(a.doc.cmp(&b.doc))
                        });
                        hits
                    })
                    .collect();
                let gather = |o: &Order, k: usize| {
                    let mut all: Vec<(ShardHit, u32)> = Vec::new();
                    for (shard, hits) in per.iter().enumerate() {
                        let after = o.shard_after(shard as u32);
                        let page = shard_page(hits, &node_keys, after.as_deref(), k);
                        all.extend(page.into_iter().map(|h| (h, shard as u32)));
                    }
                    all.sort_by(|a, b| o.cmp((&a.0, a.1), (&b.0, b.1)));
                    all.truncate(k);
                    all
                };
                let whole: Vec<(u32, u32)> = gather(&o, usize::MAX).iter().map(|h| (h.1, h.0.doc)).collect();
                let size = 1 + next(5) as usize;
                let mut walked = Vec::new();
                let mut o2 = o.clone();
                loop {
                    let page = gather(&o2, size);
                    if page.is_empty() {
                        break;
                    }
                    walked.extend(page.iter().map(|h| (h.1, h.0.doc)));
                    let (last, shard) = page.last().unwrap();
                    let values = o2.hit_values(last, *shard).unwrap();
                    o2 = Order::parse(&s, &json!({ "sort": sort, "search_after": values }), shards).unwrap();
                }
                assert_eq!(walked, whole, "sort {sort}, {shards} shards, pages of {size}");
            }
        }
    }
}
