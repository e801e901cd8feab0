//! Columns against the values they were built from, on every tier.

use super::*;
use crate::storage::{Storage, Tier, TierOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Per document, its codes (numbers) or strings (keywords).
enum Data {
    Codes(Vec<Vec<u64>>),
    Strings(Vec<Vec<String>>),
}

fn tiers() -> Vec<TierOptions> {
    let mut direct = TierOptions::on(Tier::Direct);
    direct.pool_bytes = 64 << 10;
    vec![TierOptions::on(Tier::Ram), TierOptions::on(Tier::Mmap), direct]
}

#[test]
fn columns_give_back_every_value_and_every_range() {
    let mut rng = Rng(0x05ee_dc01_u64);
    for case in 0..40u64 {
        let max_doc = [0u64, 1, 5, 127, 128, 129, 1000, 3000][case as usize % 8] as u32;
        let dir = tempfile::tempdir().unwrap();
        let mut w = ColumnsWriter::new();
        let mut data = Vec::new();
        let kinds = [ColumnKind::Long, ColumnKind::Double, ColumnKind::Keyword, ColumnKind::Boolean, ColumnKind::Date];
        for (f, &kind) in kinds.iter().enumerate() {
            let (points, doc_values) = match rng.below(4) {
                0 => (true, false),
                1 => (false, true),
                _ => (true, true),
            };
            let col = w.add_column(f as u8 * 2, kind, points, doc_values);
            let missing = rng.below(3) as f64 / 3.0;
            let multi = rng.below(2) == 0;
            let spread = [1u64, 2, 10, 1000, u64::MAX][rng.below(5) as usize];
            let step = [1u64, 7, 1000][rng.below(3) as usize];
            let base = rng.next();
            if kind == ColumnKind::Keyword {
                let mut per_doc = Vec::new();
                for doc in 0..max_doc {
                    let mut vals = Vec::new();
                    if (rng.below(1000) as f64) >= missing * 1000.0 {
                        for _ in 0..if multi { 1 + rng.below(3) } else { 1 } {
                            let v = format!("k{}", rng.below(spread.min(50)));
                            w.push_keyword(col, doc, &v);
                            vals.push(v);
                        }
                    }
                    vals.sort();
                    vals.dedup();
                    per_doc.push(vals);
                }
                data.push((f as u8 * 2, kind, points, doc_values, Data::Strings(per_doc)));
            } else {
                let mut per_doc = Vec::new();
                for doc in 0..max_doc {
                    let mut vals = Vec::new();
                    if (rng.below(1000) as f64) >= missing * 1000.0 {
                        for _ in 0..if multi { 1 + rng.below(3) } else { 1 } {
                            let v = match kind {
                                ColumnKind::Boolean => rng.below(2),
                                ColumnKind::Double => double_code((rng.next() as i64 as f64) / 1e6),
                                _ => base.wrapping_add(rng.below(spread).wrapping_mul(step)),
                            };
                            w.push(col, doc, v);
                            vals.push(v);
                        }
                    }
                    vals.sort();
                    per_doc.push(vals);
                }
                data.push((f as u8 * 2, kind, points, doc_values, Data::Codes(per_doc)));
            }
        }
        let path = dir.path().join("s.col");
        w.finish(max_doc, &path).unwrap();
        for tier in tiers() {
            let storage = Storage::new(tier).unwrap();
            let cols = Columns::open(storage.open(&path).unwrap(), max_doc).unwrap();
            assert!(cols.column(1).is_none());
            for (field, kind, points, doc_values, d) in &data {
                let ctx = format!("case {case}, field {field} {kind:?}, {tier:?}");
                let mut r = cols.reader(*field).unwrap();
                assert_eq!(r.meta().kind, *kind);
                // Keywords become ordinals: the strings' ranks.
                let codes: Vec<Vec<u64>> = match d {
                    Data::Codes(c) => c.clone(),
                    Data::Strings(s) => {
                        let mut all: Vec<&String> = s.iter().flatten().collect();
                        all.sort();
                        all.dedup();
                        for (ord, v) in all.iter().enumerate() {
                            assert_eq!(r.ord_of(v.as_bytes()).unwrap(), Ok(ord as u64), "{ctx}");
                            let mut out = Vec::new();
                            r.term(ord as u64, &mut out).unwrap();
                            assert_eq!(out, v.as_bytes(), "{ctx}");
                        }
                        assert_eq!(r.ord_of(b"k").unwrap(), Err(0), "{ctx}");
                        assert_eq!(r.ord_of(b"z").unwrap(), Err(all.len() as u64), "{ctx}");
                        s.iter()
                            .map(|vals| vals.iter().map(|v| all.binary_search(&v).unwrap() as u64).collect())
                            .collect()
                    }
                };
                let with_value = codes.iter().filter(|v| !v.is_empty()).count() as u32;
                assert_eq!(r.meta().docs_with_value, with_value, "{ctx}");
                if *doc_values {
                    let mut out = Vec::new();
                    for (doc, want) in codes.iter().enumerate() {
                        r.codes(doc as u32, &mut out).unwrap();
                        assert_eq!(&out, want, "{ctx} doc {doc}");
                        assert_eq!(r.extreme(doc as u32, true).unwrap(), want.first().copied(), "{ctx}");
                        assert_eq!(r.extreme(doc as u32, false).unwrap(), want.last().copied(), "{ctx}");
                        assert_eq!(r.has_value(doc as u32).unwrap(), !want.is_empty());
                    }
                } else {
                    assert!(r.codes(0, &mut Vec::new()).is_err() || max_doc == 0);
                }
                assert_eq!(r.has_points(), *points);
                if *points {
                    let all: Vec<u64> = codes.iter().flatten().copied().collect();
                    for _ in 0..30 {
                        let pick = |rng: &mut Rng| match (all.is_empty(), rng.below(4)) {
                            (false, 0 | 1) => all[rng.below(all.len() as u64) as usize],
                            (false, 2) => all[rng.below(all.len() as u64) as usize].wrapping_add(1),
                            _ => rng.next(),
                        };
                        let (a, b) = (pick(&mut rng), pick(&mut rng));
                        let (lo, hi) = (a.min(b), a.max(b));
                        let run = r.point_run(lo, hi).unwrap();
                        let mut got = Vec::new();
                        r.point_docs(run, |d| got.push(d)).unwrap();
                        got.sort_unstable();
                        let want: Vec<u32> = codes
                            .iter()
                            .enumerate()
                            .flat_map(|(d, v)| {
                                let mut v: Vec<u64> = v.iter().copied().filter(|c| (lo..=hi).contains(c)).collect();
                                v.dedup();
                                v.into_iter().map(move |_| d as u32)
                            })
                            .collect();
                        assert_eq!(got, want, "{ctx}: range {lo}..={hi}");
                        // Points are in value order, then document order.
                        let mut prev = None;
                        for pos in run.start..run.end {
                            let p = (r.point_code(pos).unwrap(), r.point_doc(pos).unwrap());
                            assert!(prev.is_none_or(|q| q < p), "{ctx}");
                            prev = Some(p);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn codes_keep_the_order_of_values() {
    let longs = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
    for w in longs.windows(2) {
        assert!(long_code(w[0]) < long_code(w[1]));
    }
    for &v in &longs {
        assert_eq!(code_long(long_code(v)), v);
    }
    let doubles = [f64::NEG_INFINITY, -1e300, -2.5, -1e-300, 0.0, 1e-300, 3.25, 1e300, f64::INFINITY];
    for w in doubles.windows(2) {
        assert!(double_code(w[0]) < double_code(w[1]), "{w:?}");
    }
    for &v in &doubles {
        assert_eq!(code_double(double_code(v)), v);
    }
    assert_eq!(double_code(-0.0), double_code(0.0));
}

#[test]
fn damaged_directories_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = ColumnsWriter::new();
    let c = w.add_column(0, ColumnKind::Long, true, true);
    for d in 0..10 {
        w.push(c, d, long_code(d as i64));
    }
    let path = dir.path().join("s.col");
    w.finish(10, &path).unwrap();
    let storage = Storage::new(TierOptions::on(Tier::Ram)).unwrap();
    // A segment claiming more documents than the file holds values for.
    let err = Columns::open(storage.open(&path).unwrap(), 100_000).unwrap_err();
    assert_eq!(err.kind(), crate::error::ErrorKind::Corrupt, "{err}");
    let cols = Columns::open(storage.open(&path).unwrap(), 10).unwrap();
    let mut r = cols.reader(0).unwrap();
    assert!(r.codes(10, &mut Vec::new()).is_err());
}

#[test]
fn long_point_runs_decode_across_chunks_on_every_tier() {
    // 70,000 documents (17-bit document numbers), a multi-valued column so
    // that runs hold tens of thousands of points: the bulk decode of
    // `point_docs` crosses its chunk boundaries and must agree with
    // `point_doc` one by one.
    let mut rng = Rng(0x0b01_dc0d_u64);
    let max_doc = 70_000u32;
    let dir = tempfile::tempdir().unwrap();
    let mut w = ColumnsWriter::new();
    let col = w.add_column(0, ColumnKind::Long, true, false);
    for doc in 0..max_doc {
        for _ in 0..rng.below(3) {
            w.push(col, doc, rng.below(5000));
        }
    }
    let path = dir.path().join("s.col");
    w.finish(max_doc, &path).unwrap();
    for tier in tiers() {
        let storage = Storage::new(tier).unwrap();
        let cols = Columns::open(storage.open(&path).unwrap(), max_doc).unwrap();
        let mut r = cols.reader(0).unwrap();
        for (lo, hi) in [(0, u64::MAX), (17, 4021), (100, 100), (2500, 2600)] {
            let run = r.point_run(lo, hi).unwrap();
            let mut got = Vec::new();
            r.point_docs(run, |d| got.push(d)).unwrap();
            let want: Vec<u32> = (run.start..run.end).map(|p| r.point_doc(p).unwrap()).collect();
            assert_eq!(got.len() as u64, run.len(), "{tier:?} {lo}..={hi}");
            assert_eq!(got, want, "{tier:?} {lo}..={hi}");
        }
    }
}

#[test]
fn single_codes_read_a_block_as_codes_does_and_refuse_sparse_or_multi_valued_ones() {
    // A single-valued column with missing values and a multi-valued one,
    // on every tier: a block of near documents is decoded at once and
    // agrees with `codes`; documents a page or more apart, or a
    // multi-valued column, are refused (read one by one).
    let mut rng = Rng(0x51_6e61_u64);
    let max_doc = 50_000u32;
    let dir = tempfile::tempdir().unwrap();
    let mut w = ColumnsWriter::new();
    let single = w.add_column(0, ColumnKind::Long, true, true);
    let multi = w.add_column(2, ColumnKind::Long, true, true);
    for doc in 0..max_doc {
        if rng.below(5) != 0 {
            w.push(single, doc, 1_000 + rng.below(1 << 20) * 3);
        }
        w.push(multi, doc, rng.below(100));
        w.push(multi, doc, 100 + rng.below(100));
    }
    let path = dir.path().join("s.col");
    w.finish(max_doc, &path).unwrap();
    for tier in tiers() {
        let storage = Storage::new(tier).unwrap();
        let cols = Columns::open(storage.open(&path).unwrap(), max_doc).unwrap();
        let mut r = cols.reader(0).unwrap();
        let mut out = Vec::new();
        let mut one = Vec::new();
        for _ in 0..200 {
            let start = rng.below(max_doc as u64 - 300) as u32;
            let mut docs: Vec<u32> = (0..128).map(|_| start + rng.below(300) as u32).collect();
            docs.sort_unstable();
            docs.dedup();
            assert!(r.single_codes(&docs, &mut out).unwrap(), "{tier:?}");
            assert_eq!(out.len(), docs.len());
            for (&d, got) in docs.iter().zip(&out) {
                r.codes(d, &mut one).unwrap();
                assert_eq!(*got, one.first().copied(), "{tier:?} doc {d}");
            }
        }
        // 23-bit values: 2,000 documents apart is over a page.
        assert!(!r.single_codes(&[10, 2_010, 2_020], &mut out).unwrap());
        assert!(out.is_empty());
        assert!(r.single_codes(&[], &mut out).unwrap());
        let mut m = cols.reader(2).unwrap();
        assert!(!m.single_codes(&[1, 2, 3], &mut out).unwrap());
        assert!(r.single_codes(&[max_doc], &mut out).is_err());
    }
}
