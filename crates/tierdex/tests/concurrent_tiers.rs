//! Several threads querying one index on the `direct` tier through a pool far
//! smaller than the index (constant eviction, frames loaded by one reader
//! while others wait) answer exactly like the `ram` tier, query by query.

use std::path::Path;

use tierdex::corpus::gen::{GenOptions, Generator};
use tierdex::index::OpenOptions;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::layout::{Codec, Layout};
use tierdex::search::{Mode, SearchResults, Searcher};
use tierdex::storage::{Madvise, Tier, TierOptions};

fn open(dir: &Path, tier: Tier, pool_bytes: usize) -> Searcher {
    let options = OpenOptions {
        tier: TierOptions {
            tier,
            madvise: Madvise::Adaptive,
            pool_bytes,
            // Prefetch every zone: the batched prefetch path runs too.
            prefetch_threshold: 1,
            ..TierOptions::default()
        },
        ..Default::default()
    };
    Searcher::open_with(dir, options).unwrap()
}

/// Hits as (doc, score bits) and the count: exact equality, scores included.
fn key(r: &SearchResults) -> (Vec<(u32, u32)>, Option<u64>) {
    (r.hits.iter().map(|h| (h.doc, h.score.to_bits())).collect(), r.count)
}

#[test]
fn threads_on_a_tiny_direct_pool_answer_like_ram() {
    for (layout, codec) in [(Layout::Grouped, Codec::Compressed), (Layout::Split, Codec::Direct)] {
        let tmp = tempfile::tempdir().unwrap();
        let gen = Generator::new(GenOptions {
            docs: 1500,
            seed: 11,
            vocab_size: 3000,
            ..GenOptions::default()
        });
        let opts = IndexOptions {
            layout,
            codec,
            merge: true,
            ..Default::default()
        };
        build_index(gen.docs().map(Ok), tmp.path(), &opts).unwrap();

        let words: Vec<&str> = gen.vocabulary().iter().map(String::as_str).collect();
        let mut queries = Vec::new();
        for i in 0..40 {
            let (a, b, c) = (
                words[i * 7 % 200],
                words[(i * 13 + 5) % 500],
                words[(i * 31 + 1) % 2000],
            );
            queries.extend([
                a.to_string(),
                format!("{a} {b}"),
                format!("+{a} +{b}"),
                format!("\"{a} {b}\""),
                format!("{c} -{a}"),
                format!("+{b} {c}"),
            ]);
        }
        let modes = [
            (Mode::TopK, 10),
            (Mode::TopKAndCount, 10),
            (Mode::Count, 0),
            (Mode::TopK, 1000),
        ];

        let reference = open(tmp.path(), Tier::Ram, 0);
        let expected: Vec<_> = queries
            .iter()
            .flat_map(|q| modes.iter().map(|&(m, k)| key(&reference.search(q, m, k).unwrap())))
            .collect();

        let answered = expected
            .iter()
            .filter(|(hits, count)| !hits.is_empty() || count.unwrap_or(0) > 0);
        assert!(
            answered.count() > expected.len() / 2,
            "most queries must match something"
        );

        // 32 KiB: eight frames for an index of megabytes.
        let direct = open(tmp.path(), Tier::Direct, 32 << 10);
        std::thread::scope(|s| {
            for t in 0..4usize {
                let (direct, queries, expected) = (&direct, &queries, &expected);
                s.spawn(move || {
                    // Each thread walks the queries from its own starting point, twice.
                    let n = queries.len();
                    for step in 0..2 * n {
                        let qi = (step * (2 * t + 1) + t * 17) % n;
                        for (mi, &(m, k)) in modes.iter().enumerate() {
                            let got = key(&direct.search(&queries[qi], m, k).unwrap());
                            assert_eq!(
                                got,
                                expected[qi * modes.len() + mi],
                                "{layout:?}/{codec:?} thread {t}: `{}` {m:?} k={k}",
                                queries[qi]
                            );
                        }
                    }
                });
            }
        });
        let stats = direct.index().storage().pool_stats().unwrap();
        assert!(stats.evictions > 0, "the pool never evicted: {stats:?}");
    }
}
