//! Typed fields land in columns that hold every live document's values,
//! whatever builds, merges, flushes, deletes and compactions did (issue
//! #21): each document's column values, read back through the segments,
//! equal the values its stored `_source` converts to.

mod support;

use std::collections::HashMap;

use serde_json::{json, Value};
use support::gen::Rng;
use tierdex::column::ColumnKind;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::schema::value::{convert, values_at, Indexed};
use tierdex::schema::{Field, Schema};
use tierdex::search::Searcher;
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn mapping() -> Schema {
    Schema::from_json(
        &json!({"dynamic": "strict", "properties": {
            "body": {"type": "text"},
            "tags": {"type": "keyword"},
            "cat": {"type": "keyword", "normalizer": "lowercase", "doc_values": false},
            "n": {"type": "long"},
            "x": {"type": "double", "index": false},
            "when": {"type": "date"},
            "ok": {"type": "boolean"},
            "user": {"properties": {"name": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}}
        }})
        .to_string(),
    )
    .unwrap()
}

fn doc(rng: &mut Rng, id: usize) -> Document {
    let mut v = json!({"id": format!("d{id}"), "body": format!("w{} w{}", rng.range(0, 9), rng.range(0, 9))});
    let tags: Vec<String> = (0..rng.range(0, 3)).map(|_| format!("t{}", rng.range(0, 6))).collect();
    let n = rng.range(0, 1000) as i64 - 500;
    let values: Vec<(&str, Value)> = vec![
        ("tags", json!(tags)),
        ("cat", json!(["Books", "MUSIC", "books", "games"][rng.range(0, 3)])),
        ("n", if rng.chance(0.2) { json!([n, n + 3]) } else { json!(n) }),
        ("x", json!(rng.range(0, 10_000) as f64 / 7.0)),
        (
            "when",
            json!(format!(
                "20{:02}-0{}-1{}",
                rng.range(0, 24),
                rng.range(1, 9),
                rng.range(0, 9)
            )),
        ),
        ("ok", json!(rng.chance(0.5))),
        ("user", json!({"name": format!("User {}", rng.range(0, 4))})),
    ];
    for (key, value) in values {
        if rng.chance(0.8) {
            v[key] = value;
        }
    }
    serde_json::from_value(v).unwrap()
}

/// The codes (keywords: strings) `doc` holds for each typed field, sorted
/// as a column keeps them.
fn expected(schema: &Schema, doc: &Document) -> HashMap<Field, Vec<String>> {
    let mut out = HashMap::new();
    for f in schema.fields() {
        let e = schema.entry(f).unwrap();
        let Some(kind) = e.ty.column_kind() else {
            continue;
        };
        let mut vals = Vec::new();
        values_at(&doc.fields, e.path(), &mut |v| match convert(e, v).unwrap() {
            Indexed::Code(c) => vals.push(format!("{c:020}")),
            Indexed::Keyword(k) => vals.push(k.into_owned()),
            _ => {}
        });
        vals.sort();
        if kind == ColumnKind::Keyword {
            vals.dedup();
        }
        out.insert(f, vals);
    }
    out
}

/// Checks every live document of `s` against `docs` (by id).
fn check(s: &Searcher, docs: &HashMap<String, Document>, context: &str) {
    let index = s.index();
    let schema = index.schema();
    let mut seen = 0;
    for (si, seg) in index.segments().iter().enumerate() {
        let deletes = index.deletes(si);
        for part in seg.parts() {
            for local in 0..part.max_doc {
                let d = part.base + local;
                if deletes.is_some_and(|x| x.contains(d)) {
                    continue;
                }
                let mut id = String::new();
                seg.external_id(d, &mut id).unwrap();
                let want = expected(schema, &docs[&id]);
                seen += 1;
                for (f, want) in want {
                    let e = schema.entry(f).unwrap();
                    let Some(mut r) = part.columns().and_then(|c| c.reader(f.id())) else {
                        assert!(want.is_empty(), "{context}: {id} {} has no column", e.name);
                        continue;
                    };
                    let mut got: Vec<String> = Vec::new();
                    if r.has_doc_values() {
                        let mut codes = Vec::new();
                        r.codes(local, &mut codes).unwrap();
                        for c in codes {
                            got.push(match e.ty.column_kind() {
                                Some(ColumnKind::Keyword) => {
                                    let mut t = Vec::new();
                                    r.term(c, &mut t).unwrap();
                                    String::from_utf8(t).unwrap()
                                }
                                _ => format!("{c:020}"),
                            });
                        }
                    } else {
                        // Points only: find the document among them.
                        let all = r.all_points();
                        for pos in all.start..all.end {
                            if r.point_doc(pos).unwrap() == local {
                                let c = r.point_code(pos).unwrap();
                                let mut t = Vec::new();
                                r.term(c, &mut t).unwrap();
                                got.push(String::from_utf8(t).unwrap());
                            }
                        }
                    }
                    got.sort();
                    let mut want = want;
                    if !r.has_doc_values() {
                        want.dedup();
                    }
                    assert_eq!(got, want, "{context}: {id} field {}", e.name);
                }
            }
        }
    }
    assert_eq!(seen as u64, s.num_docs(), "{context}");
}

#[test]
fn typed_values_survive_builds_and_merges() {
    for case in 0..6u64 {
        let mut rng = Rng::new(0x7e5_0000 + case);
        let docs: Vec<Document> = (0..rng.range(1, 120)).map(|i| doc(&mut rng, i)).collect();
        let by_id: HashMap<String, Document> = docs.iter().map(|d| (d.id.clone(), d.clone())).collect();
        let dir = tempfile::tempdir().unwrap();
        let opts = IndexOptions {
            schema: mapping(),
            segment_docs: [5, 17, 1000][case as usize % 3],
            merge: case % 2 == 0,
            ..Default::default()
        };
        build_index(docs.clone().into_iter().map(Ok), dir.path(), &opts).unwrap();
        let s = Searcher::open(dir.path()).unwrap();
        check(&s, &by_id, &format!("build case {case}"));
    }
}

#[test]
fn typed_values_survive_every_strategy() {
    for strategy in [
        Strategy::Geometric,
        Strategy::NoMerge,
        Strategy::InPlace,
        Strategy::ImmediateMerge,
    ] {
        let mut rng = Rng::new(0x7e5_1000);
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            buffer_docs: 13,
            ..Default::default()
        };
        let w = IndexWriter::create_with_schema(
            dir.path(),
            mapping(),
            Default::default(),
            Default::default(),
            strategy,
            options,
        )
        .unwrap();
        let mut live: HashMap<String, Document> = HashMap::new();
        let mut next = 0;
        for round in 0..8 {
            let batch: Vec<Document> = (0..rng.range(1, 30))
                .map(|_| {
                    // Some replace a document added before.
                    let id = if rng.chance(0.2) && next > 0 {
                        rng.range(0, next - 1)
                    } else {
                        next
                    };
                    next = next.max(id + 1);
                    doc(&mut rng, id)
                })
                .collect();
            for d in &batch {
                live.insert(d.id.clone(), d.clone());
            }
            w.add(batch).unwrap();
            let victims: Vec<String> = live.keys().filter(|_| rng.chance(0.1)).cloned().collect();
            for v in &victims {
                live.remove(v);
            }
            w.delete(victims).unwrap();
            match round % 3 {
                0 => w.refresh().map(|_| ()).unwrap(),
                1 => w.flush().map(|_| ()).unwrap(),
                _ => w.compact().map(|_| ()).unwrap(),
            }
            w.refresh().unwrap();
            check(&w.searcher(), &live, &format!("{strategy} round {round}"));
        }
        drop(w);
        let w = IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
        w.flush().unwrap();
        check(&w.searcher(), &live, &format!("{strategy} reopened"));
    }
}
