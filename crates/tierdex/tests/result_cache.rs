//! The result cache against plain evaluation (DESIGN §6): random queries on
//! seeded random corpora, interleaved with updates (documents added and
//! deleted, the index rebuilt and a new snapshot opened, as a refresh does),
//! under small budgets that force evictions, every policy, matching mode and
//! sharding. Every answer must equal evaluation bit for bit, and no shard may
//! ever hold more than its budget.
//!
//! `TIERDEX_CACHE_CASES` sets the number of corpora (default 24).

mod support;

use std::collections::BTreeSet;

use support::gen::{self, Rng};
use tierdex::cache::{CacheConfig, Canonical, Matching, Outcome, PolicyKind, ResultCache, Sharding};
use tierdex::indexing::build_index;
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::search::{Mode, SearchResults, Searcher};
use tierdex::Document;

const SEED: u64 = 0xcac4_e000_2026_0001;

fn cases() -> u64 {
    std::env::var("TIERDEX_CACHE_CASES")
        .ok()
        .map(|v| v.parse().expect("TIERDEX_CACHE_CASES is a number"))
        .unwrap_or(24)
}

fn open(docs: &[Document], opts: &tierdex::indexing::IndexOptions) -> (tempfile::TempDir, Searcher) {
    let dir = tempfile::tempdir().unwrap();
    build_index(docs.iter().cloned().map(Ok), dir.path(), opts).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    (dir, s)
}

/// The same query with the clauses of every boolean in a random order.
fn permuted(rng: &mut Rng, q: &Query) -> Query {
    match q {
        Query::Boolean(clauses) => {
            let mut c: Vec<Clause> = clauses
                .iter()
                .map(|c| Clause {
                    occur: c.occur,
                    query: permuted(rng, &c.query),
                })
                .collect();
            for i in (1..c.len()).rev() {
                c.swap(i, rng.range(0, i));
            }
            Query::Boolean(c)
        }
        q => q.clone(),
    }
}

/// A pool of queries: random ones, reorderings of them, disjunctions of
/// words and those words alone (so partial matching has work).
fn pool(rng: &mut Rng, lex: &gen::Lexicon) -> Vec<Query> {
    let mut out = Vec::new();
    for _ in 0..12 {
        let q = gen::query(rng, lex);
        out.push(permuted(rng, &q));
        out.push(q);
    }
    for _ in 0..6 {
        let words: Vec<String> = (0..rng.range(2, 3)).map(|_| lex.word(rng).to_string()).collect();
        out.push(Query::Boolean(
            words
                .iter()
                .map(|w| Clause {
                    occur: Occur::Should,
                    query: Query::Term {
                        field: None,
                        text: w.clone(),
                    },
                })
                .collect(),
        ));
        for w in words {
            out.push(Query::Boolean(vec![Clause {
                occur: Occur::Should,
                query: Query::Term { field: None, text: w },
            }]));
        }
    }
    out
}

fn config(rng: &mut Rng, threads: usize) -> CacheConfig {
    let sharding = match rng.range(0, 2) {
        0 => Sharding::Hashed(1),
        1 => Sharding::Hashed(rng.range(2, 4)),
        _ => Sharding::PerThread(threads),
    };
    CacheConfig {
        policy: if rng.chance(0.5) {
            PolicyKind::Lru
        } else {
            PolicyKind::Dlirs
        },
        bytes: (*rng.pick(&[4096u64, 6144, 16384, 1 << 20])) * sharding_count(sharding) as u64,
        sharding,
        matching: if rng.chance(0.5) {
            Matching::Isomorphic
        } else {
            Matching::Partial
        },
        min_hits: *rng.pick(&[0, 0, 1, 3]),
    }
}

fn sharding_count(s: Sharding) -> usize {
    match s {
        Sharding::Hashed(n) | Sharding::PerThread(n) => n,
    }
}

fn check_budget(cache: &ResultCache, context: &str) {
    for (i, s) in cache.stats().shards.iter().enumerate() {
        assert!(
            s.bytes_used() <= s.capacity,
            "{context}: shard {i} holds {} bytes over its {} budget",
            s.bytes_used(),
            s.capacity
        );
    }
}

fn same(a: &SearchResults, b: &SearchResults) -> bool {
    a.count == b.count
        && a.hits.len() == b.hits.len()
        && a.hits
            .iter()
            .zip(&b.hits)
            .all(|(x, y)| x.doc == y.doc && x.score.to_bits() == y.score.to_bits())
}

#[test]
fn reordered_clauses_evaluate_identically() {
    for case in 0..cases() {
        let seed = gen::mix(SEED, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.is_empty() {
            continue;
        }
        let (_dir, s) = open(&corpus.docs, &gen::index_options(seed));
        let mut rng = Rng::new(gen::mix(seed, 1));
        for _ in 0..40 {
            let q = gen::query(&mut rng, &corpus.lexicon);
            let p = permuted(&mut rng, &q);
            let a = Canonical::new(&s, &q).unwrap();
            let b = Canonical::new(&s, &p).unwrap();
            assert_eq!(a.key, b.key, "case {case}: {q:?} and {p:?} got different keys");
            for (mode, k) in [(Mode::TopK, 10), (Mode::TopKAndCount, 3), (Mode::Count, 0)] {
                let x = s.search_parsed(&q, mode, k).unwrap();
                let y = s.search_parsed(&p, mode, k).unwrap();
                assert!(
                    same(&x, &y),
                    "case {case}: {q:?} vs {p:?} ({mode:?}, {k}): {x:?} vs {y:?}"
                );
            }
        }
    }
}

#[test]
fn cached_answers_equal_evaluation_across_updates() {
    let mut outcomes = [0u64; 4];
    let mut stale_checks = 0;
    for case in 0..cases() {
        let seed = gen::mix(SEED, 100 + case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 4 {
            continue;
        }
        let opts = gen::index_options(seed);
        let mut rng = Rng::new(gen::mix(seed, 2));
        let queries = pool(&mut rng, &corpus.lexicon);
        let cache = ResultCache::new(config(&mut rng, 1)).unwrap();
        let context = format!("case {case} ({}; {:?})", corpus.description, cache.config());
        // Documents live in the current snapshot: start with half.
        let mut live: BTreeSet<usize> = (0..corpus.docs.len()).filter(|_| rng.chance(0.5)).collect();
        live.insert(0);
        let docs = |live: &BTreeSet<usize>| live.iter().map(|&i| corpus.docs[i].clone()).collect::<Vec<_>>();
        let (mut _dir, mut s) = open(&docs(&live), &opts);
        for step in 0..160 {
            if step % 40 == 39 {
                // An update: add some documents, delete some, refresh.
                let before: Vec<(usize, SearchResults)> = (0..queries.len().min(8))
                    .map(|i| (i, cache.search(&s, 0, &queries[i], Mode::TopKAndCount, 10).unwrap().0))
                    .collect();
                for i in 0..corpus.docs.len() {
                    if rng.chance(0.25) && !live.remove(&i) {
                        live.insert(i);
                    }
                }
                if live.is_empty() {
                    live.insert(0);
                }
                let old = s;
                (_dir, s) = open(&docs(&live), &opts);
                // Whatever was cached for the old snapshot must not answer now.
                for (i, r) in before {
                    let (got, _) = cache.search(&s, 0, &queries[i], Mode::TopKAndCount, 10).unwrap();
                    let want = s.search_parsed(&queries[i], Mode::TopKAndCount, 10).unwrap();
                    assert!(
                        same(&got, &want),
                        "{context}: stale answer after refresh for {:?}",
                        queries[i]
                    );
                    stale_checks += usize::from(!same(&r, &want));
                }
                // A query still running on the old snapshot bypasses the cache.
                let q = &queries[0];
                let (got, outcome) = cache.search(&old, 0, q, Mode::TopK, 10).unwrap();
                assert!(same(&got, &old.search_parsed(q, Mode::TopK, 10).unwrap()), "{context}");
                assert!(
                    matches!(outcome, Outcome::Bypass),
                    "{context}: old snapshot got {outcome:?}"
                );
                continue;
            }
            // Skewed choice so that queries repeat.
            let i = ((rng.unit().powi(2)) * queries.len() as f64) as usize;
            let q = &queries[i.min(queries.len() - 1)];
            let (mode, k) = *rng.pick(&[
                (Mode::TopK, 10),
                (Mode::TopKAndCount, 10),
                (Mode::Count, 0),
                (Mode::TopK, 3),
            ]);
            let want = s.search_parsed(q, mode, k).unwrap();
            let (got, outcome) = cache.search(&s, 0, q, mode, k).unwrap();
            assert!(
                same(&got, &want),
                "{context} step {step}: {q:?} ({mode:?}, {k}) got {got:?} ({outcome:?}), want {want:?}"
            );
            outcomes[outcome as usize] += 1;
            check_budget(&cache, &context);
        }
    }
    // The test must have exercised every path it claims to.
    assert!(outcomes[Outcome::Hit as usize] > 100, "{outcomes:?}");
    assert!(outcomes[Outcome::PartialHit as usize] > 5, "{outcomes:?}");
    assert!(outcomes[Outcome::Miss as usize] > 100, "{outcomes:?}");
    assert!(stale_checks > 0, "no update changed a checked answer");
}

#[test]
fn concurrent_threads_get_exact_answers_within_budget() {
    let seed = gen::mix(SEED, 7);
    let corpus = gen::corpus(seed, 3);
    let (_dir, s) = open(&corpus.docs, &gen::index_options(seed));
    let mut rng = Rng::new(seed);
    let queries = pool(&mut rng, &corpus.lexicon);
    let want: Vec<SearchResults> = queries
        .iter()
        .map(|q| s.search_parsed(q, Mode::TopK, 10).unwrap())
        .collect();
    for sharding in [Sharding::Hashed(1), Sharding::Hashed(3), Sharding::PerThread(2)] {
        for policy in [PolicyKind::Lru, PolicyKind::Dlirs] {
            let cache = ResultCache::new(CacheConfig {
                policy,
                bytes: 8192 * 3,
                sharding,
                matching: Matching::Partial,
                min_hits: 0,
            })
            .unwrap();
            std::thread::scope(|scope| {
                for t in 0..2 {
                    let (cache, s, queries, want) = (&cache, &s, &queries, &want);
                    scope.spawn(move || {
                        let mut rng = Rng::new(gen::mix(seed, 10 + t as u64));
                        for _ in 0..400 {
                            let i = ((rng.unit().powi(2)) * queries.len() as f64) as usize % queries.len();
                            let (got, _) = cache.search(s, t, &queries[i], Mode::TopK, 10).unwrap();
                            assert!(same(&got, &want[i]), "{sharding:?} {policy:?}: {:?}", queries[i]);
                        }
                    });
                }
            });
            check_budget(&cache, &format!("{sharding:?} {policy:?}"));
            let st = cache.stats();
            assert!(st.total.hits > 0, "{st:?}");
        }
    }
}
