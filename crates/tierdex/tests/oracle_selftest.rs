//! Tests of the test oracle itself (and of the comparison helper): hand-
//! computed BM25 scores, phrase frequencies, boolean and field semantics,
//! Lucene's length quantisation, and invariants on random corpora.
//!
//! The corpora here use lowercase ASCII words separated by single spaces, so
//! any tokenizer (the whitespace stub or UAX#29) analyses them the same way.

mod support;

use support::compare::{assert_same, close, compare};
use support::gen;
use support::oracle::{byte4_to_int, evaluate, int_to_byte4, quantised_length, OracleIndex, OracleResult};
use tierdex::analysis::{Analyzer, AnalyzerConfig};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::search::{Hit, Mode, SearchResults};
use tierdex::{Document, Field};

fn doc(title: &str, body: &str) -> Document {
    Document::title_body(String::new(), title, body)
}

fn analyzer() -> Analyzer {
    Analyzer::new(AnalyzerConfig::default())
}

fn term(text: &str) -> Query {
    Query::Term {
        field: None,
        text: text.into(),
    }
}

fn field_term(field: Field, text: &str) -> Query {
    Query::Term {
        field: Some(field),
        text: text.into(),
    }
}

fn phrase(field: Option<Field>, text: &str) -> Query {
    Query::Phrase {
        field,
        text: text.into(),
    }
}

fn clause(occur: Occur, query: Query) -> Clause {
    Clause { occur, query }
}

fn should(q: Query) -> Clause {
    clause(Occur::Should, q)
}

fn must(q: Query) -> Clause {
    clause(Occur::Must, q)
}

fn must_not(q: Query) -> Clause {
    clause(Occur::MustNot, q)
}

/// Matching documents in rank order.
fn docs_of(index: &OracleIndex, q: &Query) -> Vec<u32> {
    index
        .search(q, Mode::TopK, usize::MAX)
        .hits
        .iter()
        .map(|h| h.0)
        .collect()
}

fn assert_close(got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{got} != {want}");
}

// ---------------------------------------------------------------------------
// Length norms
// ---------------------------------------------------------------------------

#[test]
fn small_float_matches_lucene() {
    // Lucene's BM25 explanation calls lengths exact up to norm byte 39.
    for len in 0..=39 {
        assert_eq!(int_to_byte4(len), len as u8);
        assert_eq!(byte4_to_int(len as u8), len);
    }
    // Beyond, 4 significant bits of (len - 24), rounded down.
    assert_eq!(quantised_length(40), 40);
    assert_eq!(quantised_length(41), 40);
    assert_eq!(quantised_length(42), 42);
    assert_eq!(quantised_length(47), 46);
    assert_eq!(quantised_length(100), 96);
    assert_eq!(int_to_byte4(100), 57);
    assert_eq!(quantised_length(1000), 984);
    assert_eq!(int_to_byte4(1000), 87);
    assert_eq!(int_to_byte4(i32::MAX as u32), 255);
    assert_eq!(byte4_to_int(255), 24 + (15 << 27));
    // Decoding is strictly increasing and inverts encoding on the byte side.
    for b in 0..=255u8 {
        assert_eq!(int_to_byte4(byte4_to_int(b)), b);
        if b > 0 {
            assert!(byte4_to_int(b) > byte4_to_int(b - 1));
        }
    }
    // Encoding is monotonic and rounds down.
    let mut prev = 0;
    for len in 0..200_000 {
        let b = int_to_byte4(len);
        assert!(b >= prev);
        assert!(byte4_to_int(b) <= len);
        prev = b;
    }
}

// ---------------------------------------------------------------------------
// BM25 by hand
// ---------------------------------------------------------------------------

/// title: docCount 2 (doc 1 has an empty title), sumTTF 3, avgdl 1.5.
/// body: docCount 3, sumTTF 8, avgdl 8/3.
fn fruit() -> Vec<Document> {
    vec![
        doc("apple banana", "apple apple cherry"),
        doc("", "banana cherry cherry date"),
        doc("cherry", "apple"),
    ]
}

#[test]
fn bm25_term_scores_by_hand() {
    let index = OracleIndex::new(&fruit(), &analyzer());
    assert_eq!(index.doc_count(Field::TITLE), 2);
    assert_eq!(index.doc_count(Field::BODY), 3);
    assert_eq!(index.df(Field::BODY, "apple"), 2);
    assert_close(index.avgdl(Field::BODY), (8.0f64 / 3.0) as f32 as f64);

    // body:apple, idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6.
    // doc 0: f = 2, dl = 3: ln1.6 * 2 / (2 + 1.2 (0.25 + 0.75 * 3 / (8/3))) = 0.283776
    // doc 2: f = 1, dl = 1: ln1.6 / (1 + 1.2 (0.25 + 0.75 / (8/3)))         = 0.287025
    // The short field wins although its frequency is lower.
    let r = index.search(&field_term(Field::BODY, "apple"), Mode::TopKAndCount, 10);
    assert_eq!(r.count, Some(2));
    assert_eq!(r.hits.len(), 2);
    assert_eq!(r.hits[0].0, 2);
    assert_close(r.hits[0].1, 0.287_025_118_859_673_7);
    assert_eq!(r.hits[1].0, 0);
    assert_close(r.hits[1].1, 0.283_775_778_733_392_55);

    // title:apple, idf = ln(1 + (2 - 1 + 0.5) / 1.5) = ln 2; doc 0: f = 1,
    // dl = 2: ln2 / (1 + 1.2 (0.25 + 0.75 * 2 / 1.5)) = ln2 / 2.5 = 0.277259
    let r = index.search(&field_term(Field::TITLE, "apple"), Mode::TopK, 10);
    assert_eq!(r.count, None);
    assert_eq!(r.hits.len(), 1);
    assert_close(r.hits[0].1, 0.277_258_872_223_978_1);

    // Unqualified: the sum over fields; doc 0 now wins.
    let r = index.search(&term("apple"), Mode::TopK, 10);
    assert_eq!(r.hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 2]);
    assert_close(r.hits[0].1, 0.561_034_650_957_370_7);
    assert_close(r.hits[1].1, 0.287_025_118_859_673_7);

    // Terms are analysed: capitals are folded like document text.
    assert_eq!(
        index.search(&term("APPLE"), Mode::TopK, 10),
        index.search(&term("apple"), Mode::TopK, 10)
    );
    // Absent terms match nothing.
    assert!(docs_of(&index, &term("zebra")).is_empty());
}

#[test]
fn bm25_uses_quantised_lengths() {
    // doc 0's body has 100 tokens, which Lucene stores as 96.
    let long = format!("q{}", " z".repeat(99));
    let docs = vec![doc("", &long), doc("", "q z")];
    let index = OracleIndex::new(&docs, &analyzer());
    assert_eq!(index.field_len(Field::BODY, 0), 100);
    // idf = ln(1 + 0.5 / 2.5) = ln 1.2; avgdl = 102 / 2 = 51;
    // ln1.2 / (1 + 1.2 (0.25 + 0.75 * 96 / 51)) = 0.0608933 (0.0594907 with dl = 100).
    let s = index.score_of(&term("q"), 0).unwrap();
    assert_close(s, 0.060_893_250_795_623_34);
}

#[test]
fn phrase_scores_by_hand() {
    let index = OracleIndex::new(&fruit(), &analyzer());
    // body "apple apple cherry": one start position (1); idf = ln1.6 + ln1.6
    // (cherry is in 2 of 3 bodies too); dl = 3:
    // 2 ln1.6 / (1 + 1.2 (0.25 + 0.75 * 3 / (8/3))) = 0.406490
    let q = phrase(Some(Field::BODY), "apple cherry");
    let r = index.search(&q, Mode::TopKAndCount, 10);
    assert_eq!(r.count, Some(1));
    assert_eq!(r.hits[0].0, 0);
    assert_close(r.hits[0].1, 0.406_489_630_597_723_25);
    // Unqualified: the title "apple banana" has no "apple cherry".
    assert_eq!(index.search(&phrase(None, "apple cherry"), Mode::TopK, 10), r_topk(&r));
    // Order matters.
    assert!(docs_of(&index, &phrase(None, "cherry apple")).is_empty());
    // "title:cherry" + "body:apple" in doc 2 is not a phrase: one field only.
    let docs = vec![doc("x cherry", "apple y")];
    let index2 = OracleIndex::new(&docs, &analyzer());
    assert!(docs_of(&index2, &phrase(None, "cherry apple")).is_empty());
    // A phrase matches in either field; the score sums the fields.
    let docs = vec![doc("apple banana", "apple banana"), doc("apple banana", "")];
    let index3 = OracleIndex::new(&docs, &analyzer());
    let both = index3.score_of(&phrase(None, "apple banana"), 0).unwrap();
    let title = index3.score_of(&phrase(Some(Field::TITLE), "apple banana"), 0).unwrap();
    let body = index3.score_of(&phrase(Some(Field::BODY), "apple banana"), 0).unwrap();
    assert_close(both, title + body);
    assert_eq!(docs_of(&index3, &phrase(Some(Field::BODY), "apple banana")), [0]);
}

fn r_topk(r: &OracleResult) -> OracleResult {
    OracleResult::from_matches(Mode::TopK, r.k, r.ranked.clone())
}

#[test]
fn phrase_frequency_counts_overlapping_starts() {
    // body docCount 2, sumTTF 5, avgdl 2.5; df(x) = 2, idf(x) = ln 1.2.
    let docs = vec![doc("", "x x x"), doc("", "x y")];
    let index = OracleIndex::new(&docs, &analyzer());
    let ix = 1.2f64.ln();
    let norm = 1.2 * (0.25 + 0.75 * 3.0 / 2.5);
    // "x x" starts at 0 and 1: f = 2, idf = 2 ln1.2.
    let s = index.score_of(&phrase(None, "x x"), 0).unwrap();
    assert_close(s, 2.0 * ix * 2.0 / (2.0 + norm));
    assert_close(s, 0.215_765_155_969_177_03);
    // "x x x": f = 1, idf = 3 ln1.2.
    let s = index.score_of(&phrase(None, "x x x"), 0).unwrap();
    assert_close(s, 3.0 * ix / (1.0 + norm));
    // "x x x x": no room.
    assert_eq!(index.score_of(&phrase(None, "x x x x"), 0), None);
    assert_eq!(docs_of(&index, &phrase(None, "x x")), [0]);
    // A one-token phrase is the term query.
    for d in 0..2 {
        assert_eq!(index.score_of(&phrase(None, "x"), d), index.score_of(&term("x"), d));
    }
    // A phrase with a token absent from the corpus matches nothing.
    assert!(docs_of(&index, &phrase(None, "x nothere")).is_empty());
    // Interleaved repeats: "a b a b a" has "a b a" at 0 and 2.
    let docs = vec![doc("", "a b a b a")];
    let index = OracleIndex::new(&docs, &analyzer());
    let s = index.score_of(&phrase(None, "a b a"), 0).unwrap();
    // docCount 1, df 1: idf = ln(1 + 0.5 / 1.5) each; dl = avgdl = 5.
    let i1 = (1.0f64 + 0.5 / 1.5).ln();
    assert_close(s, 3.0 * i1 * 2.0 / (2.0 + 1.2));
}

// ---------------------------------------------------------------------------
// Boolean and field semantics
// ---------------------------------------------------------------------------

fn pqr() -> Vec<Document> {
    vec![
        doc("", "p q"),    // 0
        doc("", "p"),      // 1
        doc("", "q"),      // 2
        doc("", "r"),      // 3
        doc("q", "p r"),   // 4
        doc("", ""),       // 5
        doc("r r", "p q"), // 6
    ]
}

#[test]
fn boolean_semantics() {
    let index = OracleIndex::new(&pqr(), &analyzer());
    let sorted = |q: Query| {
        let mut d = docs_of(&index, &q);
        d.sort_unstable();
        d
    };
    // OR.
    assert_eq!(
        sorted(Query::Boolean(vec![should(term("p")), should(term("q"))])),
        [0, 1, 2, 4, 6]
    );
    // AND, over either field.
    assert_eq!(
        sorted(Query::Boolean(vec![must(term("p")), must(term("q"))])),
        [0, 4, 6]
    );
    // MUST with optional SHOULD: only MUST decides, SHOULD adds.
    let q = Query::Boolean(vec![must(term("p")), should(term("r"))]);
    assert_eq!(sorted(q.clone()), [0, 1, 4, 6]);
    let p_only = index.score_of(&term("p"), 4).unwrap();
    let r_only = index.score_of(&term("r"), 4).unwrap();
    assert_close(index.score_of(&q, 4).unwrap(), p_only + r_only);
    assert_close(index.score_of(&q, 1).unwrap(), index.score_of(&term("p"), 1).unwrap());
    // Exclusion.
    assert_eq!(
        sorted(Query::Boolean(vec![should(term("p")), must_not(term("q"))])),
        [1]
    );
    assert_eq!(
        sorted(Query::Boolean(vec![
            should(term("p")),
            should(term("r")),
            must_not(field_term(Field::TITLE, "q")),
        ])),
        [0, 1, 3, 6]
    );
    // Only MUST_NOT, or nothing: no match.
    assert!(sorted(Query::Boolean(vec![must_not(term("p"))])).is_empty());
    assert!(sorted(Query::Boolean(vec![])).is_empty());
    // A MUST that cannot match empties the result; a SHOULD one is harmless.
    assert!(sorted(Query::Boolean(vec![must(term("zz")), should(term("p"))])).is_empty());
    assert_eq!(
        sorted(Query::Boolean(vec![should(term("zz")), should(term("r"))])),
        [3, 4, 6]
    );
    // Nested groups: +p +(q r) -(title:r).
    let q = Query::Boolean(vec![
        must(term("p")),
        must(Query::Boolean(vec![should(term("q")), should(term("r"))])),
        must_not(Query::Boolean(vec![should(field_term(Field::TITLE, "r"))])),
    ]);
    assert_eq!(sorted(q), [0, 4]);
    // A nested only-MUST_NOT group matches nothing, so requiring it does too.
    let q = Query::Boolean(vec![must(term("p")), must(Query::Boolean(vec![must_not(term("q"))]))]);
    assert!(sorted(q).is_empty());
    // Nested empty group: dropped (SEMANTICS 1), as Lucene drops an empty group.
    let q = Query::Boolean(vec![must(term("r")), must(Query::Boolean(vec![]))]);
    assert_eq!(sorted(q), [3, 4, 6]);
    // Scores of a group are the sum of its matching positive clauses.
    let q = Query::Boolean(vec![
        should(term("p")),
        should(Query::Boolean(vec![must(term("q")), should(term("r"))])),
    ]);
    let s6 = index.score_of(&term("p"), 6).unwrap()
        + index.score_of(&term("q"), 6).unwrap()
        + index.score_of(&term("r"), 6).unwrap();
    assert_close(index.score_of(&q, 6).unwrap(), s6);
}

#[test]
fn fields_are_scored_separately_and_summed() {
    let index = OracleIndex::new(&pqr(), &analyzer());
    for d in 0..7 {
        let t = index.score_of(&field_term(Field::TITLE, "q"), d);
        let b = index.score_of(&field_term(Field::BODY, "q"), d);
        let both = index.score_of(&term("q"), d);
        match (t, b) {
            (None, None) => assert_eq!(both, None),
            _ => assert_close(both.unwrap(), t.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }
    }
    // title docCount 2 (docs 4, 6), body docCount 6 (doc 5 is empty).
    assert_eq!(index.doc_count(Field::TITLE), 2);
    assert_eq!(index.doc_count(Field::BODY), 6);
    assert_eq!(docs_of(&index, &field_term(Field::TITLE, "q")), [4]);
}

#[test]
fn multi_token_term_is_a_disjunction() {
    // "p q" typed as one term analyses to two tokens with any tokenizer.
    let index = OracleIndex::new(&pqr(), &analyzer());
    let or = Query::Boolean(vec![should(term("p")), should(term("q"))]);
    assert_eq!(
        index.search(&term("p q"), Mode::TopKAndCount, 100),
        index.search(&or, Mode::TopKAndCount, 100)
    );
    let title = Query::Term {
        field: Some(Field::TITLE),
        text: "q r".into(),
    };
    assert_eq!(docs_of(&index, &title), [6, 4]);
}

#[test]
fn ranking_ties_modes_and_k() {
    // Identical documents tie exactly: ascending document number.
    let docs = vec![
        doc("", "s t"),
        doc("", "s"),
        doc("", "s t"),
        doc("", "t"),
        doc("", "s t"),
    ];
    let index = OracleIndex::new(&docs, &analyzer());
    let q = term("s");
    let all = index.search(&q, Mode::TopKAndCount, 1000);
    assert_eq!(all.count, Some(4));
    assert_eq!(all.hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 0, 2, 4]);
    assert_eq!(all.hits[1].1, all.hits[2].1);
    let top = index.search(&q, Mode::TopK, 3);
    assert_eq!(top.count, None);
    assert_eq!(top.hits, all.hits[..3]);
    let count = index.search(&q, Mode::Count, 3);
    assert_eq!(count.count, Some(4));
    assert!(count.hits.is_empty());
    assert_eq!(count.ranked, all.ranked);
    // The one-shot form agrees.
    assert_eq!(evaluate(&docs, &analyzer(), &q, Mode::TopK, 3), top);
}

#[test]
fn empty_corpus_and_empty_fields() {
    let index = OracleIndex::new(&[], &analyzer());
    let r = index.search(&term("a"), Mode::TopKAndCount, 10);
    assert_eq!(r.count, Some(0));
    assert!(r.hits.is_empty());
    let docs = vec![doc("", ""), doc("   ", "\n")];
    let index = OracleIndex::new(&docs, &analyzer());
    assert_eq!(index.doc_count(Field::TITLE), 0);
    assert_eq!(index.doc_count(Field::BODY), 0);
    assert_eq!(index.search(&term("a"), Mode::Count, 10).count, Some(0));
}

/// Whether `config`'s analyzer removes `the` (the stub does not; the real
/// analyzer does when stop words are on).
fn removes_stop_words(analyzer: &Analyzer) -> bool {
    let mut terms = Vec::new();
    analyzer.analyze("the x", |t| terms.push(t.term.to_owned()));
    terms == ["x"]
}

#[test]
fn stop_words_drop_clauses_and_leave_phrase_gaps() {
    let analyzer = Analyzer::new(AnalyzerConfig {
        stop_words: true,
        stemming: false,
        ..Default::default()
    });
    if !removes_stop_words(&analyzer) {
        eprintln!("skipped: the analyzer does not remove stop words yet (stub)");
        return;
    }
    let docs = vec![
        doc("", "x the y"), // 0: x@0 y@2
        doc("", "x y"),     // 1
        doc("", "y x"),     // 2
        doc("", "x of y"),  // 3: another stop word leaves the same gap
    ];
    let index = OracleIndex::new(&docs, &analyzer);
    // Removed stop words do not count in the length.
    assert_eq!(index.field_len(Field::BODY, 0), 2);
    // The gap is kept: "x the y" matches x _ y, "x y" does not.
    assert_eq!(docs_of(&index, &phrase(None, "x the y")), [0, 3]);
    assert_eq!(docs_of(&index, &phrase(None, "x y")), [1]);
    // Leading stop word: relative positions start at the first token.
    let mut d = docs_of(&index, &phrase(None, "the x"));
    d.sort_unstable();
    assert_eq!(d, [0, 1, 2, 3]);
    // idf of "x the y" sums the idfs of x and y only.
    let alone = index.score_of(&term("x"), 0).unwrap() + index.score_of(&term("y"), 0).unwrap();
    let p = index.score_of(&phrase(None, "x the y"), 0).unwrap();
    assert_close(p, alone); // f = 1 for each, same length norm
                            // A stop word alone is dropped: as a query it matches nothing, as a
                            // clause it disappears.
    assert!(docs_of(&index, &term("the")).is_empty());
    assert!(docs_of(&index, &phrase(None, "the of")).is_empty());
    let q = Query::Boolean(vec![must(term("the")), must(term("x"))]);
    assert_eq!(docs_of(&index, &q).len(), 4);
    let q = Query::Boolean(vec![should(term("y")), must_not(term("the"))]);
    assert_eq!(docs_of(&index, &q).len(), 4);
    // A group left empty is dropped from its parent; one left with only
    // MUST_NOT clauses matches nothing.
    let q = Query::Boolean(vec![must(term("y")), must(Query::Boolean(vec![should(term("the"))]))]);
    assert_eq!(docs_of(&index, &q).len(), 4);
    let q = Query::Boolean(vec![
        must(term("y")),
        must(Query::Boolean(vec![should(term("the")), must_not(term("x"))])),
    ]);
    assert!(docs_of(&index, &q).is_empty());
}

// ---------------------------------------------------------------------------
// The comparison helper
// ---------------------------------------------------------------------------

fn engine(hits: &[(u32, f32)], count: Option<u64>) -> SearchResults {
    SearchResults {
        hits: hits.iter().map(|&(doc, score)| Hit { doc, score }).collect(),
        count,
        sort: None,
        aggregations: None,
    }
}

/// Matches with scores 5, 4, 3, 3 (+1e-6 relative), 3, 2, 1.
fn ranked() -> Vec<(u32, f64)> {
    vec![
        (10, 5.0),
        (11, 4.0),
        (12, 3.0),
        (13, 3.000_003),
        (14, 3.0),
        (15, 2.0),
        (16, 1.0),
    ]
}

#[test]
fn compare_accepts_identical_and_rounded_answers() {
    let o = OracleResult::from_matches(Mode::TopKAndCount, 3, ranked());
    assert_eq!(o.hits, [(10, 5.0), (11, 4.0), (13, 3.000_003)]);
    assert!(compare(&engine(&[(10, 5.0), (11, 4.0), (13, 3.000_003)], Some(7)), &o, 3).is_ok());
    // f32 rounding of the scores is fine.
    let e = engine(&[(10, 5.000_1), (11, 3.999_9), (13, 3.0)], Some(7));
    assert!(compare(&e, &o, 3).is_ok());
    assert_same(&e, &o, 3, "rounded");
}

#[test]
fn compare_allows_reordering_inside_near_ties() {
    let o = OracleResult::from_matches(Mode::TopK, 6, ranked());
    // Whole tie group inside the list: any order, same set.
    let e = engine(
        &[(10, 5.0), (11, 4.0), (12, 3.0), (14, 3.0), (13, 3.0), (15, 2.0)],
        None,
    );
    assert!(compare(&e, &o, 6).is_ok());
    // Not the same set: a member replaced by an outsider.
    let e = engine(
        &[(10, 5.0), (11, 4.0), (12, 3.0), (14, 3.0), (15, 3.0), (16, 2.0)],
        None,
    );
    assert!(compare(&e, &o, 6).is_err());
    // Group straddling the cut-off: any members will do.
    let o = OracleResult::from_matches(Mode::TopK, 3, ranked());
    let e = engine(&[(10, 5.0), (11, 4.0), (14, 3.0)], None);
    assert!(compare(&e, &o, 3).is_ok());
    let o4 = OracleResult::from_matches(Mode::TopK, 4, ranked());
    let e = engine(&[(10, 5.0), (11, 4.0), (12, 3.0), (14, 3.0)], None);
    assert!(compare(&e, &o4, 4).is_ok());
    // ... but not a lower-scored document presented with a tie score.
    let e = engine(&[(10, 5.0), (11, 4.0), (15, 3.0)], None);
    assert!(compare(&e, &o, 3).is_err());
    // Outside near-ties the order is strict.
    let e = engine(&[(11, 4.0), (10, 5.0), (13, 3.0)], None);
    assert!(compare(&e, &o, 3).is_err());
}

#[test]
fn compare_rejects_wrong_answers() {
    let o = OracleResult::from_matches(Mode::TopKAndCount, 3, ranked());
    let good = [(10, 5.0), (11, 4.0), (13, 3.0)];
    // Wrong or missing count.
    assert!(compare(&engine(&good, Some(6)), &o, 3).is_err());
    assert!(compare(&engine(&good, None), &o, 3).is_err());
    // Too few or too many hits.
    assert!(compare(&engine(&good[..2], Some(7)), &o, 3).is_err());
    let more = [(10, 5.0), (11, 4.0), (13, 3.0), (12, 3.0)];
    assert!(compare(&engine(&more, Some(7)), &o, 3).is_err());
    // A score off by more than the tolerance.
    let off = [(10, 5.0), (11, 4.001), (13, 3.0)];
    assert!(compare(&engine(&off, Some(7)), &o, 3).is_err());
    // A duplicate, or a document that does not match.
    let dup = [(10, 5.0), (10, 5.0), (13, 3.0)];
    assert!(compare(&engine(&dup, Some(7)), &o, 3).is_err());
    let stranger = [(10, 5.0), (99, 4.0), (13, 3.0)];
    assert!(compare(&engine(&stranger, Some(7)), &o, 3).is_err());
    // Count mode: no hits, and the count.
    let c = OracleResult::from_matches(Mode::Count, 3, ranked());
    assert!(compare(&engine(&[], Some(7)), &c, 3).is_ok());
    assert!(compare(&engine(&good, Some(7)), &c, 3).is_err());
    // TopK: an unrequested count is allowed only if right.
    let t = OracleResult::from_matches(Mode::TopK, 3, ranked());
    assert!(compare(&engine(&good, None), &t, 3).is_ok());
    assert!(compare(&engine(&good, Some(7)), &t, 3).is_ok());
    assert!(compare(&engine(&good, Some(3)), &t, 3).is_err());
}

#[test]
#[should_panic(expected = "engine and oracle disagree")]
fn assert_same_panics_with_a_diff() {
    let o = OracleResult::from_matches(Mode::TopK, 3, ranked());
    assert_same(&engine(&[(10, 5.0)], None), &o, 3, "query: test");
}

// ---------------------------------------------------------------------------
// Invariants on random corpora (the generators the engine tests use)
// ---------------------------------------------------------------------------

#[test]
fn oracle_invariants_on_random_corpora() {
    let (mut queries, mut nonempty, mut phrases_matching) = (0u32, 0u32, 0u32);
    for case in 0..24u64 {
        let seed = gen::mix(0x5e1f_7e57, case);
        let corpus = gen::corpus(seed, case);
        let opts = gen::index_options(seed);
        let analyzer = Analyzer::new(opts.analyzer);
        let index = OracleIndex::new(&corpus.docs, &analyzer);
        let n = corpus.docs.len() as u32;
        if let Some(u) = &corpus.lexicon.universal {
            let r = index.search(&term(u), Mode::Count, 10);
            assert_eq!(r.count, Some(u64::from(n)), "{}", corpus.description);
        }
        for qn in 0..32u64 {
            let c = gen::query_case(gen::mix(seed, qn), &corpus.lexicon);
            let ctx = format!("corpus {case} ({}), query {:?}", corpus.description, c.query);
            let full = index.search(&c.query, Mode::TopKAndCount, usize::MAX);
            queries += 1;
            nonempty += u32::from(!full.ranked.is_empty());
            // Modes and k are views of one ranking.
            let r = index.search(&c.query, c.mode, c.k);
            assert_eq!(r.ranked, full.ranked, "{ctx}");
            if c.mode != Mode::Count {
                assert_eq!(r.hits, full.ranked[..c.k.min(full.ranked.len())], "{ctx}");
            }
            // score_of agrees with the scan, on matches and non-matches.
            for d in (0..n).step_by(7) {
                assert_eq!(index.score_of(&c.query, d), full.score_of(d), "{ctx}");
            }
            for &(d, s) in &full.ranked {
                assert!(s > 0.0 && s.is_finite(), "{ctx}");
                assert_eq!(index.score_of(&c.query, d), Some(s), "{ctx}");
            }
            // Disjunction, conjunction and exclusion with another query.
            let other = gen::query_case(gen::mix(seed, 1000 + qn), &corpus.lexicon).query;
            let set = |q: &Query| {
                let mut d: Vec<u32> = index.search(q, Mode::Count, 0).ranked.iter().map(|h| h.0).collect();
                d.sort_unstable();
                d
            };
            let (a, b) = (set(&c.query), set(&other));
            let or = Query::Boolean(vec![should(c.query.clone()), should(other.clone())]);
            let and = Query::Boolean(vec![must(c.query.clone()), must(other.clone())]);
            let not = Query::Boolean(vec![must(c.query.clone()), must_not(other.clone())]);
            let mut union: Vec<u32> = a.iter().chain(&b).copied().collect();
            union.sort_unstable();
            union.dedup();
            let both: Vec<u32> = a.iter().copied().filter(|d| b.contains(d)).collect();
            let minus: Vec<u32> = a.iter().copied().filter(|d| !b.contains(d)).collect();
            assert_eq!(set(&or), union, "{ctx} OR {other:?}");
            assert_eq!(set(&not), minus, "{ctx} NOT {other:?}");
            // (A dropped operand disappears from the conjunction.)
            if !index.is_dropped(&c.query) && !index.is_dropped(&other) {
                assert_eq!(set(&and), both, "{ctx} AND {other:?}");
                for d in both.iter().step_by(5) {
                    let sum = index.score_of(&c.query, *d).unwrap() + index.score_of(&other, *d).unwrap();
                    assert!(close(index.score_of(&or, *d).unwrap(), sum), "{ctx}");
                }
            }
            // A phrase only matches where all its tokens do, in one field.
            if let Query::Phrase { field, text } = &c.query {
                let all_tokens = Query::Boolean(
                    text.split_whitespace()
                        .map(|w| {
                            must(Query::Term {
                                field: *field,
                                text: w.into(),
                            })
                        })
                        .collect(),
                );
                let p = set(&c.query);
                phrases_matching += u32::from(!p.is_empty());
                let t = set(&all_tokens);
                assert!(p.iter().all(|d| t.contains(d)), "{ctx}");
            }
        }
    }
    // The generators must produce queries that find something.
    assert!(
        nonempty * 10 >= queries * 6,
        "only {nonempty} of {queries} random queries match anything"
    );
    assert!(phrases_matching > 10, "only {phrases_matching} phrases match");
}

/// The oracle's own answers, rounded to `f32` with a relative jitter of up
/// to `jitter` and re-ranked as an engine computing in `f32` might: the
/// comparison must accept them.
fn as_engine(r: &OracleResult, jitter: f64, rng: &mut gen::Rng) -> SearchResults {
    let mut hits: Vec<Hit> = r
        .ranked
        .iter()
        .map(|&(doc, s)| Hit {
            doc,
            score: (s * (1.0 + jitter * (2.0 * rng.unit() - 1.0))) as f32,
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    let total = hits.len() as u64;
    match r.mode {
        Mode::Count => engine(&[], Some(total)),
        mode => {
            hits.truncate(r.k);
            SearchResults {
                hits,
                count: (mode == Mode::TopKAndCount).then_some(total),
                sort: None,
                aggregations: None,
            }
        }
    }
}

#[test]
fn compare_accepts_f32_engines_and_rejects_broken_ones() {
    let mut rng = gen::Rng::new(7);
    let (mut cases, mut rejected) = (0, 0);
    for case in 0..16u64 {
        let seed = gen::mix(0xc0_ffee, case);
        let corpus = gen::corpus(seed, case);
        let index = OracleIndex::new(&corpus.docs, &Analyzer::new(gen::index_options(seed).analyzer));
        for qn in 0..32u64 {
            let c = gen::query_case(gen::mix(seed, qn), &corpus.lexicon);
            let r = index.search(&c.query, c.mode, c.k);
            for jitter in [0.0, 1e-6, 2e-5] {
                let e = as_engine(&r, jitter, &mut rng);
                let ctx = format!("{:?} jitter {jitter}", c.query);
                assert_same(&e, &r, c.k, &ctx);
            }
            cases += 1;
            // Broken answers: a lost match, or a wrong score at the top.
            let mut e = as_engine(&r, 0.0, &mut rng);
            if let Some(n) = e.count.as_mut() {
                *n += 1;
                assert!(compare(&e, &r, c.k).is_err());
            }
            let mut e = as_engine(&r, 0.0, &mut rng);
            if let Some(h) = e.hits.first_mut() {
                h.score *= 1.001;
                assert!(compare(&e, &r, c.k).is_err());
                rejected += 1;
            }
            let mut e = as_engine(&r, 0.0, &mut rng);
            if e.hits.len() > 1 && r.ranked.len() > e.hits.len() {
                // The last hit replaced by the next match after the cut-off.
                let next = r.ranked[e.hits.len()];
                let last = e.hits.len() - 1;
                let tied = close(next.1, r.ranked[last].1);
                e.hits[last] = Hit {
                    doc: next.0,
                    score: next.1 as f32,
                };
                assert_eq!(compare(&e, &r, c.k).is_ok(), tied, "{:?}", c.query);
            }
        }
    }
    assert!(cases > 500 && rejected > 200, "{cases} cases, {rejected} rejected");
}

#[test]
fn shrinking_finds_the_failing_core() {
    use support::shrink::shrink;
    // "Fails" whenever a required phrase containing w7 is present.
    let fails = |q: &Query| format!("{q:?}").contains("occur: Must, query: Phrase { field: None, text: \"w7");
    let big = Query::Boolean(vec![
        should(term("w1")),
        must(Query::Boolean(vec![
            should(term("w2")),
            must(phrase(None, "w7 w8 w9")),
            must_not(term("w3")),
        ])),
        must_not(phrase(None, "w4 w5")),
    ]);
    assert!(fails(&big));
    let small = shrink(&big, 1000, fails);
    assert_eq!(small, Query::Boolean(vec![must(phrase(None, "w7"))]));
}
