//! `minimum_should_match` against the brute-force oracle (issue #23):
//! seeded random corpora (`support::gen`) indexed in several segment
//! layouts, and random booleans of 2 to 6 optional clauses (terms, absent
//! terms, words that analyse to nothing, phrases, nested groups and nested
//! minimums) with sometimes required, filter and excluded clauses, under a
//! minimum of every form: counts, percentages, negative ones, 0, and more
//! than there are clauses. Each runs alone and as a required, optional and
//! excluded clause, in every mode; counts, hits (ties by document order)
//! and scores must be the oracle's. Queries the DSL can express are also
//! parsed from their JSON and must give the same query.
//!
//! `TIERDEX_MSM_CORPORA` sets the number of corpora (default 40),
//! `TIERDEX_MSM_SEED` the base seed, `TIERDEX_MSM_CORPUS` runs one corpus.

mod support;

use serde_json::{json, Value};
use support::compare::{compare, report};
use support::gen::{self, Lexicon, Rng};
use support::oracle::{min_should_match, OracleIndex, SEMANTICS};
use support::shrink::shrink;
use tierdex::analysis::Analyzer;
use tierdex::cache::Canonical;
use tierdex::indexing::build_index;
use tierdex::query::ast::{Clause, MinimumShouldMatch, Occur, Query};
use tierdex::query::QueryLimits;
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Field};

const SEED: u64 = 0x05b0_0123_2026_0023;
const QUERIES_PER_CORPUS: u64 = 40;
/// Segment sizes the corpora cycle through: many tiny segments to one.
const SEGMENT_DOCS: [usize; 4] = [3, 7, 50, 1000];

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => v.replace('_', "").parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.range(0, i));
    }
}

/// A minimum for `n` optional clauses, of every form.
fn minimum(rng: &mut Rng, n: usize) -> MinimumShouldMatch {
    use MinimumShouldMatch::{Count, Percent};
    let n = n as i32;
    match rng.weighted(&[30, 15, 25, 15, 5, 10]) {
        0 => Count(rng.range(2, n.max(2) as usize) as i32),
        1 => Count(-(rng.range(1, n.max(1) as usize) as i32)),
        2 => Percent(*rng.pick(&[1, 20, 25, 33, 34, 50, 60, 66, 67, 75, 80, 99, 100])),
        3 => Percent(-*rng.pick(&[1, 10, 20, 25, 33, 50, 66, 75, 99, 100])),
        4 => *rng.pick(&[Count(0), Count(1), Percent(0), Percent(-100), Count(-n)]),
        _ => *rng.pick(&[Count(n + 1), Count(n + 3), Percent(150), Percent(101)]),
    }
}

/// Text for a term clause: mostly corpus words, sometimes words the
/// corpus lacks, stop words, punctuation (analyses to nothing) or two words.
fn term_text(rng: &mut Rng, lex: &Lexicon) -> String {
    match rng.weighted(&[60, 15, 6, 6, 5, 8]) {
        0 => lex.word(rng).to_string(),
        1 => lex.any_word(rng).to_string(),
        2 => format!("zz{}", rng.range(0, 9)),
        3 => rng.pick(gen::EXTRA_WORDS).to_string(),
        4 => rng.pick(gen::PUNCT_ONLY).to_string(),
        _ => format!("{}-{}", lex.word(rng), lex.any_word(rng)),
    }
}

fn term(rng: &mut Rng, lex: &Lexicon) -> Query {
    let field = rng.chance(0.2).then(|| lex.pick_field(rng));
    Query::Term {
        field,
        text: term_text(rng, lex),
    }
}

/// A `match` with a minimum: several words whose analysed tokens are the
/// optional clauses.
fn match_words(rng: &mut Rng, lex: &Lexicon) -> Query {
    let words: Vec<String> = (0..rng.range(1, 5)).map(|_| term_text(rng, lex)).collect();
    let n = words.len();
    Query::MinShouldMatch {
        query: Box::new(Query::Term {
            field: rng.chance(0.5).then(|| lex.pick_field(rng)),
            text: words.join(" "),
        }),
        min: minimum(rng, n),
    }
}

/// One optional clause.
fn optional(rng: &mut Rng, lex: &Lexicon, depth: usize) -> Query {
    match rng.weighted(&[70, 8, 8, 6, 8]) {
        0 => term(rng, lex),
        1 if depth < 2 => min_bool(rng, lex, depth + 1),
        2 => gen::query(rng, lex),
        3 => match_words(rng, lex),
        _ => Query::Phrase {
            field: None,
            text: rng.pick(&lex.phrases).join(" "),
        },
    }
}

/// A boolean of 2 to 6 optional clauses with a minimum, sometimes with
/// required, filter and excluded clauses.
fn min_bool(rng: &mut Rng, lex: &Lexicon, depth: usize) -> Query {
    let n = rng.range(2, 6);
    let mut clauses: Vec<Clause> = (0..n)
        .map(|_| Clause {
            occur: Occur::Should,
            query: optional(rng, lex, depth),
        })
        .collect();
    for (occur, p) in [(Occur::Must, 0.3), (Occur::Filter, 0.2), (Occur::MustNot, 0.25)] {
        if rng.chance(p) {
            clauses.push(Clause {
                occur,
                query: Query::Term {
                    field: None,
                    text: lex.word(rng).to_string(),
                },
            });
        }
    }
    shuffle(rng, &mut clauses);
    Query::MinShouldMatch {
        query: Box::new(Query::Boolean(clauses)),
        min: minimum(rng, n),
    }
}

/// A random query with a minimum at its top, or as a required, optional
/// or excluded clause next to a term.
fn query(rng: &mut Rng, lex: &Lexicon) -> Query {
    let q = min_bool(rng, lex, 0);
    let other = Query::Term {
        field: None,
        text: lex.word(rng).to_string(),
    };
    let pair = |a: Occur, qa: Query, b: Occur, qb: Query| {
        Query::Boolean(vec![Clause { occur: a, query: qa }, Clause { occur: b, query: qb }])
    };
    match rng.weighted(&[55, 15, 15, 15]) {
        0 => q,
        1 => pair(Occur::Must, q, Occur::Should, other),
        2 => pair(Occur::Must, other, Occur::Should, q),
        _ => pair(Occur::Should, other, Occur::MustNot, q),
    }
}

/// The DSL form of `q` over fields named `names`, when it has one that
/// parses back to `q` (up to clause order): unqualified terms, booleans
/// with a positive clause, and minimums over booleans and terms (`match`),
/// written as numbers or strings.
fn to_dsl(rng: &mut Rng, q: &Query, names: &[String]) -> Option<Value> {
    let spec = |rng: &mut Rng, min: MinimumShouldMatch| match min {
        MinimumShouldMatch::Count(c) if rng.chance(0.5) => json!(format!(" {c}")),
        MinimumShouldMatch::Count(c) => json!(c),
        MinimumShouldMatch::Percent(p) => json!(format!("{p}%")),
    };
    match q {
        Query::Term { field: None, text } => Some(json!({"term": {"_all": text}})),
        Query::Boolean(clauses) if clauses.iter().any(|c| c.occur != Occur::MustNot) => {
            let mut body = serde_json::Map::new();
            for c in clauses {
                let key = match c.occur {
                    Occur::Must => "must",
                    Occur::Should => "should",
                    Occur::MustNot => "must_not",
                    Occur::Filter => "filter",
                };
                let list = body.entry(key).or_insert_with(|| json!([]));
                list.as_array_mut().expect("a list").push(to_dsl(rng, &c.query, names)?);
            }
            Some(json!({ "bool": body }))
        }
        Query::MinShouldMatch { query, min } => match &**query {
            Query::Term { field, text } => {
                let name = field.map_or("_all", |f| names[f.index()].as_str());
                Some(json!({"match": {name: {"query": text, "minimum_should_match": spec(rng, *min)}}}))
            }
            inner => {
                let mut v = to_dsl(rng, inner, names)?;
                let spec = spec(rng, *min);
                v.get_mut("bool")?
                    .as_object_mut()?
                    .insert("minimum_should_match".into(), spec);
                Some(v)
            }
        },
        _ => None,
    }
}

/// `q` with every boolean's clauses in one order.
fn normalised(q: &Query) -> Query {
    match q {
        Query::Boolean(clauses) => {
            let mut c: Vec<Clause> = clauses
                .iter()
                .map(|c| Clause {
                    occur: c.occur,
                    query: normalised(&c.query),
                })
                .collect();
            c.sort_by_key(|c| format!("{c:?}"));
            Query::Boolean(c)
        }
        Query::MinShouldMatch { query, min } => Query::MinShouldMatch {
            query: Box::new(normalised(query)),
            min: *min,
        },
        other => other.clone(),
    }
}

/// Runs `q` in `mode` with `k` on the engine and the oracle.
fn check(s: &Searcher, oracle: &OracleIndex, q: &Query, mode: Mode, k: usize, context: &str) -> Result<(), String> {
    let expected = oracle.search(q, mode, k);
    let got = s
        .search_parsed(q, mode, k)
        .map_err(|e| format!("engine error: {e}\n{context}"))?;
    compare(&got, &expected, k).map_err(|why| report(&got, &expected, k, context, &why))
}

#[derive(Default)]
struct Tally {
    cases: u64,
    nonempty: u64,
    /// Cases whose top minimum is strictly between 1 and its clauses.
    proper: u64,
    dsl: u64,
}

fn run_corpus(base: u64, corpus_no: u64, tally: &mut Tally) {
    let seed = gen::mix(base, corpus_no);
    // Skip the generator's empty and tiny corpora: nothing to compare.
    let corpus = gen::corpus(seed, if corpus_no % 8 == 2 { 3 } else { corpus_no });
    let mut opts = gen::index_options(seed);
    opts.segment_docs = SEGMENT_DOCS[corpus_no as usize % SEGMENT_DOCS.len()];
    if corpus.docs.is_empty() {
        return;
    }
    let where_ = format!(
        "corpus {corpus_no} (seed {seed:#x}): {}; options {opts:?}\nreproduce: TIERDEX_MSM_SEED={base:#x} \
         TIERDEX_MSM_CORPUS={corpus_no} cargo test -p tierdex --test min_should_match",
        corpus.description
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    build_index(corpus.docs.iter().cloned().map(Ok), dir.path(), &opts)
        .unwrap_or_else(|e| panic!("{where_}\nbuild_index: {e}"));
    let searcher = Searcher::open(dir.path()).unwrap_or_else(|e| panic!("{where_}\nopen: {e}"));
    let oracle = OracleIndex::new(&corpus.docs, &Analyzer::new(opts.analyzer));
    let limits = QueryLimits::default();
    for query_no in 0..QUERIES_PER_CORPUS {
        let mut rng = Rng::new(gen::mix(seed, query_no));
        let q = query(&mut rng, &corpus.lexicon);
        let k = *rng.pick(&gen::KS);
        let context = format!("query {query_no}: {q:?}\nk {k}\n{where_}");
        for mode in [Mode::TopK, Mode::TopKAndCount, Mode::Count] {
            if let Err(msg) = check(&searcher, &oracle, &q, mode, k, &context) {
                let small = shrink(&q, 300, |q| check(&searcher, &oracle, q, mode, k, "").is_err());
                let small_msg = check(&searcher, &oracle, &small, mode, k, "shrunk query")
                    .err()
                    .unwrap_or_default();
                panic!(
                    "mode {mode:?}: {msg}\n\nshrunk to: {small:?}\n{small_msg}\n\nthe oracle's semantics:\n{SEMANTICS}"
                );
            }
        }
        tally.cases += 1;
        tally.nonempty += u64::from(oracle.search(&q, Mode::Count, 0).total() > 0);
        let top = match &q {
            Query::MinShouldMatch { query, min } => Some((query, min)),
            Query::Boolean(c) => c.iter().find_map(|c| match &c.query {
                Query::MinShouldMatch { query, min } => Some((query, min)),
                _ => None,
            }),
            _ => None,
        };
        if let Some((inner, min)) = top {
            let Query::Boolean(c) = &**inner else { unreachable!() };
            let n = c.iter().filter(|c| c.occur == Occur::Should).count();
            tally.proper += u64::from((2..n).contains(&min_should_match(*min, n)));
        }
        if let Some(v) = to_dsl(&mut rng, &q, &corpus.lexicon.fields) {
            let parsed = tierdex::query::dsl::query(searcher.schema(), &limits, &v)
                .unwrap_or_else(|e| panic!("DSL {v}: {e}\n{context}"));
            assert_eq!(normalised(&parsed), normalised(&q), "DSL {v}\n{context}");
            tally.dsl += 1;
        }
    }
}

#[test]
fn minimum_should_match_matches_the_oracle() {
    let base = env_u64("TIERDEX_MSM_SEED").unwrap_or(SEED);
    let corpora = match env_u64("TIERDEX_MSM_CORPUS") {
        Some(c) => c..c + 1,
        None => 0..env_u64("TIERDEX_MSM_CORPORA").unwrap_or(40),
    };
    let mut tally = Tally::default();
    for corpus_no in corpora.clone() {
        run_corpus(base, corpus_no, &mut tally);
    }
    eprintln!(
        "minimum_should_match: {} queries ({} with matches, {} with a minimum strictly between 1 and \
         the clauses, {} also through the DSL) over {} corpora, 3 modes each",
        tally.cases,
        tally.nonempty,
        tally.proper,
        tally.dsl,
        corpora.end - corpora.start
    );
    if corpora.end - corpora.start > 1 {
        assert!(tally.nonempty * 3 > tally.cases, "too few queries match anything");
        assert!(tally.proper * 3 > tally.cases, "too few minimums between 1 and all");
        assert!(tally.dsl * 10 > tally.cases, "too few queries through the DSL");
    }
}

/// Different minimums are different queries to the result cache; the
/// same minimum spelled differently, or reached by reordered clauses, is
/// the same.
#[test]
fn cache_keys_tell_minimums_apart() {
    let docs: Vec<Document> = (0..40)
        .map(|i| {
            Document::title_body(
                format!("d{i}"),
                "",
                format!("a{} b{} c{} d{}", i % 2, i % 3, i % 5, i % 7),
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    build_index(docs.into_iter().map(Ok), dir.path(), &Default::default()).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    let words = ["a0", "b0", "c0", "d0"];
    let q = |min: MinimumShouldMatch, rev: bool| {
        let mut clauses: Vec<Clause> = words
            .iter()
            .map(|w| Clause {
                occur: Occur::Should,
                query: Query::Term {
                    field: Some(Field::BODY),
                    text: w.to_string(),
                },
            })
            .collect();
        if rev {
            clauses.reverse();
        }
        Query::MinShouldMatch {
            query: Box::new(Query::Boolean(clauses)),
            min,
        }
    };
    let key = |q: &Query| Canonical::new(&s, q).unwrap().key.unwrap();
    use MinimumShouldMatch::{Count, Percent};
    let (two, three) = (key(&q(Count(2), false)), key(&q(Count(3), false)));
    assert_ne!(two, three);
    assert_eq!(two, key(&q(Percent(50), true)));
    assert_eq!(three, key(&q(Count(-1), false)));
    let plain = key(&Query::Boolean(match q(Count(1), false) {
        Query::MinShouldMatch { query, .. } => match *query {
            Query::Boolean(c) => c,
            _ => unreachable!(),
        },
        _ => unreachable!(),
    }));
    assert_ne!(two, plain);
    assert_eq!(plain, key(&q(Count(1), false)));
    assert_eq!(plain, key(&q(Count(0), false)));
    // Every clause required: the conjunction itself.
    assert_eq!(key(&q(Count(4), false)), key(&q(Percent(100), true)));
    assert!(Canonical::new(&s, &q(Count(5), false)).unwrap().key.is_none());
    // Scores equal to the last bit whatever the order of the clauses.
    for min in [Count(2), Count(3), Percent(75)] {
        let a = s.search_parsed(&q(min, false), Mode::TopKAndCount, 100).unwrap();
        let b = s.search_parsed(&q(min, true), Mode::TopKAndCount, 100).unwrap();
        assert_eq!(a.count, b.count);
        let bits = |r: &tierdex::search::SearchResults| -> Vec<(u32, u32)> {
            r.hits.iter().map(|h| (h.doc, h.score.to_bits())).collect()
        };
        assert_eq!(bits(&a), bits(&b), "{min:?}");
        assert!(a.count.unwrap() > 0);
    }
}
