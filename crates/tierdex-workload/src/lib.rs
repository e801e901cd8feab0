//! Query workloads drawn from an index's own terms and documents, so every
//! category has real matches: single terms at popularity levels, two-term
//! OR and AND, two- and three-term phrases, exclusions, title-only terms.
//! The `pair-*` categories are the phrase-filter workload (DESIGN §4): a
//! popular term next to a term of each popularity level, which rarely
//! stand side by side. [`typed`] builds the typed-field workloads (filters
//! of chosen selectivity, sorts, range counts) as structured queries.

use anyhow::Result;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use tierdex::search::Searcher;
use tierdex::Field;

pub mod typed;

/// One generated query.
#[derive(Debug, Clone)]
pub struct WorkloadQuery {
    /// Category name (`term-1k`, `or`, `and`, `phrase`, ...).
    pub category: String,
    /// Query text in tierdex syntax.
    pub text: String,
}

/// Every category, in report order.
pub const CATEGORIES: [&str; 16] = [
    "term-10",
    "term-100",
    "term-1k",
    "term-10k",
    "term-100k",
    "or",
    "and",
    "phrase-2",
    "phrase-3",
    "exclusion",
    "title",
    "pair-10",
    "pair-100",
    "pair-1k",
    "pair-10k",
    "pair-100k",
];

/// Documents a term must be in to be the popular side of a `pair-*` phrase.
pub const PAIR_POPULAR: u64 = 10_000;

/// Popularity levels (documents per term) of the single-term categories.
pub const LEVELS: [u64; 5] = [10, 100, 1_000, 10_000, 100_000];

fn level_name(l: u64) -> String {
    format!("term-{}", level_suffix(l))
}

fn level_suffix(l: u64) -> String {
    match l {
        l if l >= 1000 => format!("{}k", l / 1000),
        l => format!("{l}"),
    }
}

/// Up to `per_category` queries of each category, deterministic for `seed`.
pub fn generate(s: &Searcher, per_category: usize, seed: u64) -> Result<Vec<WorkloadQuery>> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let index = s.index();
    let num_docs = index.num_docs();
    // By name: a mapping may number `title` and `body` differently.
    let body = s.schema().field("body").unwrap_or(Field::BODY);
    let title = s.schema().field("title").unwrap_or(Field::TITLE);
    let terms = index.field_terms(body)?;
    let title_terms = index.field_terms(title)?;
    let mut out = Vec::new();
    let mut push = |category: &str, text: String| {
        out.push(WorkloadQuery {
            category: category.into(),
            text,
        })
    };

    // Single terms at popularity levels (within 30% of the level).
    let mut popular = Vec::new();
    let mut level_pools = Vec::new();
    for level in LEVELS {
        if level * 2 > num_docs {
            continue;
        }
        let (lo, hi) = (level * 7 / 10, level * 13 / 10);
        let pool: Vec<&str> = terms
            .iter()
            .filter(|t| t.doc_freq >= lo && t.doc_freq <= hi)
            .map(|t| t.term.as_str())
            .collect();
        if pool.is_empty() {
            continue;
        }
        for _ in 0..per_category {
            let t = pool[rng.random_range(0..pool.len())];
            push(&level_name(level), t.to_string());
        }
        if level >= 100 {
            popular.extend(pool.iter().copied());
        }
        level_pools.push((level, pool));
    }
    // Phrase-filter pairs: a popular body term that takes part in filters
    // (stop words never do) beside a term of each level, in either order.
    let format = index.manifest().postings_format();
    let filtered = |t: &str| {
        let mut key = Vec::new();
        tierdex::termdict::term_key(body, t, &mut key);
        format.filtered_term(&key)
    };
    let hubs: Vec<&str> = terms
        .iter()
        .filter(|t| t.doc_freq > PAIR_POPULAR && filtered(&t.term))
        .map(|t| t.term.as_str())
        .collect();
    if !hubs.is_empty() {
        for (level, pool) in &level_pools {
            let pool: Vec<&str> = pool.iter().copied().filter(|t| filtered(t)).collect();
            if pool.is_empty() {
                continue;
            }
            for i in 0..per_category {
                let hub = hubs[rng.random_range(0..hubs.len())];
                let t = pool[rng.random_range(0..pool.len())];
                let text = if i % 2 == 0 {
                    format!("\"{hub} {t}\"")
                } else {
                    format!("\"{t} {hub}\"")
                };
                push(&format!("pair-{}", level_suffix(*level)), text);
            }
        }
    }
    if popular.is_empty() {
        popular = terms.iter().map(|t| t.term.as_str()).collect();
    }
    if popular.is_empty() {
        return Ok(out);
    }
    let pick = |rng: &mut Pcg64| popular[rng.random_range(0..popular.len())];
    for _ in 0..per_category {
        let (a, b) = (pick(&mut rng), pick(&mut rng));
        push("or", format!("{a} {b}"));
        let (a, b) = (pick(&mut rng), pick(&mut rng));
        push("exclusion", format!("{a} -{b}"));
    }
    if !title_terms.is_empty() {
        let pool: Vec<&str> = title_terms
            .iter()
            .filter(|t| t.doc_freq >= 10)
            .map(|t| t.term.as_str())
            .collect();
        for _ in 0..per_category.min(pool.len() * 4) {
            push("title", format!("title:{}", pool[rng.random_range(0..pool.len())]));
        }
    }
    // AND and phrases from the text of random documents, so they match.
    let analyzer = index.analyzer(body).clone();
    let mut tokens = Vec::new();
    let (mut and, mut phrases) = (0, 0);
    let mut attempts = 0;
    while (and < per_category || phrases < per_category) && attempts < per_category * 20 + 100 {
        attempts += 1;
        let doc = s.doc(rng.random_range(0..num_docs) as u32)?;
        tokens.clear();
        analyzer.analyze(doc.body(), |t| tokens.push(t.term.to_string()));
        if tokens.len() < 8 {
            continue;
        }
        if and < per_category {
            let a = &tokens[rng.random_range(0..tokens.len())];
            let b = &tokens[rng.random_range(0..tokens.len())];
            if a != b {
                push("and", format!("+{a} +{b}"));
                and += 1;
            }
        }
        if phrases < per_category {
            for n in [2, 3] {
                let at = rng.random_range(0..tokens.len() - n);
                push(&format!("phrase-{n}"), format!("\"{}\"", tokens[at..at + n].join(" ")));
            }
            phrases += 1;
        }
    }
    Ok(out)
}
