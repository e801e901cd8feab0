//! `dis_max` (and `multi_match`'s `best_fields`, issue #23) against the
//! engine's own single-clause answers: every match of any clause matches,
//! each scores its best clause's score plus the tie breaker times the
//! others', and the top-k (block-max bounds combined the same way) equals
//! the top of the exhaustive ranking.

mod support;

use std::collections::HashMap;

use support::gen::Rng;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::search::{Mode, Searcher};
use tierdex::Document;

const WORDS: [&str; 8] = ["oak", "elm", "ash", "fir", "yew", "box", "bay", "pine"];

fn scores(s: &Searcher, q: &Query) -> HashMap<String, f32> {
    let r = s.search_parsed(q, Mode::TopK, 100_000).unwrap();
    r.hits.iter().map(|h| (s.doc_id(h.doc).unwrap(), h.score)).collect()
}

fn field_query(field: &str, words: &[&str], s: &Searcher) -> Query {
    let f = s.index().schema().field(field).unwrap();
    Query::Boolean(
        words
            .iter()
            .map(|w| Clause {
                occur: Occur::Should,
                query: Query::Term {
                    field: Some(f),
                    text: w.to_string(),
                },
            })
            .collect(),
    )
}

#[test]
fn dis_max_scores_the_best_clause_plus_the_tie_breaker() {
    let mut rng = Rng::new(0xd15);
    let text = |rng: &mut Rng, n: usize| -> String {
        (0..rng.range(0, n))
            .map(|_| *rng.pick(&WORDS))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let docs: Vec<Document> = (0..2500)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "id": format!("d{i}"),
                "title": text(&mut rng, 4),
                "body": text(&mut rng, 30),
            }))
            .unwrap()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        segment_docs: 700,
        merge: false,
        ..Default::default()
    };
    build_index(docs.into_iter().map(Ok), dir.path(), &opts).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    for case in 0..60 {
        let words: Vec<&str> = (0..rng.range(1, 3)).map(|_| *rng.pick(&WORDS)).collect();
        let tie = [0.0f32, 0.3, 1.0][case % 3];
        let (title, body) = (field_query("title", &words, &s), field_query("body", &words, &s));
        let (st, sb) = (scores(&s, &title), scores(&s, &body));
        let q = Query::DisMax {
            queries: vec![title, body],
            tie_bits: tie.to_bits(),
        };
        let mut want: Vec<(String, f32)> = st
            .keys()
            .chain(sb.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|id| {
                let (a, b) = (st.get(id).copied().unwrap_or(0.0), sb.get(id).copied().unwrap_or(0.0));
                let best = a.max(b);
                (id.clone(), best + tie * (a + b - best))
            })
            .collect();
        want.sort_by(|x, y| y.1.total_cmp(&x.1));
        let ctx = format!("case {case}: {words:?} tie {tie}");
        let all = s.search_parsed(&q, Mode::TopKAndCount, 100_000).unwrap();
        assert_eq!(all.count, Some(want.len() as u64), "{ctx}: count");
        let got: HashMap<String, f32> = all.hits.iter().map(|h| (s.doc_id(h.doc).unwrap(), h.score)).collect();
        assert_eq!(got.len(), want.len(), "{ctx}: hits");
        for (id, w) in &want {
            let g = got[id];
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "{ctx}: {id} scored {g}, want {w}"
            );
        }
        // The top 10 through block-max skipping: the same scores as the
        // exhaustive ranking's first 10.
        let top = s.search_parsed(&q, Mode::TopK, 10).unwrap();
        let top_scores: Vec<f32> = top.hits.iter().map(|h| h.score).collect();
        let mut all_scores: Vec<f32> = all.hits.iter().map(|h| h.score).collect();
        all_scores.sort_by(|a, b| b.total_cmp(a));
        all_scores.truncate(10);
        assert_eq!(top_scores, all_scores, "{ctx}: top 10");
        let counted = s.search_parsed(&q, Mode::Count, 0).unwrap();
        assert_eq!(counted.count, Some(want.len() as u64), "{ctx}: count alone");
    }
}
