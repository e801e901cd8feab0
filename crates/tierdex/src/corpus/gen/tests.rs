use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::corpus::{Corpus, ReadOptions};

fn small(docs: u64, seed: u64) -> GenOptions {
    GenOptions {
        docs,
        seed,
        vocab_size: 40_000,
        ..GenOptions::default()
    }
}

/// Lowercased alphanumeric runs (apostrophes and inner dots kept), a rough
/// stand-in for the analyzer.
fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || c == ',')
        .map(|t| t.trim_end_matches('.').to_ascii_lowercase())
        .filter(|t| !t.is_empty())
}

#[test]
fn deterministic_and_random_access() {
    let a = Generator::new(small(60, 7));
    let b = Generator::new(small(60, 7));
    let all: Vec<Document> = a.docs().collect();
    assert_eq!(all.len(), 60);
    assert_eq!(all, b.docs().collect::<Vec<_>>());
    for i in [0u64, 1, 17, 59] {
        assert_eq!(a.doc(i), all[i as usize]);
        assert_eq!(all[i as usize].id, format!("g{i}"));
    }
    assert_eq!(a.vocabulary(), b.vocabulary());
}

#[test]
fn different_seeds_differ() {
    let a = Generator::new(small(20, 1));
    let b = Generator::new(small(20, 2));
    assert_ne!(a.vocabulary()[100..200], b.vocabulary()[100..200]);
    let (da, db): (Vec<_>, Vec<_>) = (a.docs().collect(), b.docs().collect());
    assert!(da
        .iter()
        .zip(&db)
        .all(|(x, y)| x.body() != y.body() || x.body().is_empty()));
}

#[test]
fn golden_output_is_stable() {
    // Pins the exact output: a change here means every generated corpus
    // (and every benchmark number measured on one) changes. Update the
    // constant only on purpose.
    let g = Generator::new(GenOptions {
        docs: 50,
        ..GenOptions::default()
    });
    let mut buf = Vec::new();
    g.write_json_lines(0..50, &mut buf);
    let hash = xxhash_rust::xxh3::xxh3_64(&buf);
    assert_eq!(hash, 0x6731_105b_0bb2_6b56, "golden hash changed: {hash:#x}");
}

#[test]
fn default_vocabulary_is_large_distinct_and_word_like() {
    let t = std::time::Instant::now();
    let g = Generator::new(GenOptions::default());
    let built = t.elapsed();
    let v = g.vocabulary();
    assert_eq!(v.len(), 250_000);
    assert_eq!(v.iter().collect::<HashSet<_>>().len(), v.len());
    assert!(v
        .iter()
        .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())));
    assert_eq!(g.function_words(), 100);
    assert_eq!(&v[..5], ["the", "of", "and", "to", "a"]);
    assert!(v[..100].iter().all(|w| w.len() <= 7));
    assert!(g.collocations().len() >= 4_900);
    assert!(g.collocations().all(|c| (2..=4).contains(&c.len())));
    eprintln!("built the default generator in {built:?}");
}

#[test]
fn text_looks_like_text() {
    let g = Generator::new(small(300, 3));
    let mut numbers = 0;
    let mut possessives = 0;
    let mut commas = 0;
    for d in g.docs() {
        let words: Vec<&str> = d.title().split(' ').collect();
        assert!((1..=8).contains(&words.len()), "title {:?}", d.title());
        assert!(
            words
                .iter()
                .all(|w| w.chars().next().is_some_and(|c| c.is_ascii_uppercase())),
            "title {:?}",
            d.title()
        );
        if d.body().is_empty() {
            continue;
        }
        assert!(d.body().ends_with('.'), "{}", d.body());
        assert!(
            d.body().chars().next().unwrap().is_ascii_uppercase() || d.body().starts_with(|c: char| c.is_ascii_digit())
        );
        assert!(d
            .body()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .,'".contains(&b)));
        for sentence in d.body().split(". ") {
            let n = sentence.split(' ').count();
            assert!(n <= 40, "sentence of {n} words: {sentence}");
        }
        numbers += d
            .body()
            .split(' ')
            .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
            .count();
        possessives += d.body().matches("'s").count();
        commas += d.body().matches(',').count();
    }
    assert!(
        numbers > 50 && possessives > 50 && commas > 1000,
        "{numbers} {possessives} {commas}"
    );
}

#[test]
fn zipf_rank_frequency_slope() {
    let g = Generator::new(GenOptions::default());
    let mut counts: HashMap<String, u64> = HashMap::new();
    for i in 0..1500 {
        let d = g.doc(i);
        for t in tokens(d.body()) {
            *counts.entry(t).or_default() += 1;
        }
    }
    let mut freqs: Vec<u64> = counts.into_values().collect();
    freqs.sort_unstable_by(|a, b| b.cmp(a));
    // Least squares fit of ln(freq) against ln(rank) over ranks 10..=2000.
    let pts: Vec<(f64, f64)> = (10..=2000)
        .map(|r| ((r as f64).ln(), (freqs[r - 1] as f64).ln()))
        .collect();
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
    let (mx, my) = (sx / n, sy / n);
    let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = cov / var;
    eprintln!("rank-frequency slope {slope:.3}, {} distinct tokens", freqs.len());
    assert!((-1.2..=-0.8).contains(&slope), "slope {slope}");
}

#[test]
fn body_length_median_and_tail() {
    let g = Generator::new(small(4000, 5));
    let mut lens: Vec<usize> = g.docs().map(|d| tokens(d.body()).count()).collect();
    lens.sort_unstable();
    let median = lens[lens.len() / 2] as f64;
    let empty = lens.iter().filter(|&&l| l == 0).count();
    let max = *lens.last().unwrap() as f64;
    eprintln!("median {median}, max {max}, empty {empty}");
    assert!((270.0..=330.0).contains(&median), "median {median}");
    assert!(max > 5.0 * median, "no long tail: max {max}");
    assert!(empty <= 30, "{empty} empty bodies");

    // Configurable; the empty fraction is honoured.
    let g = Generator::new(GenOptions {
        median_body_tokens: 50.0,
        body_sigma: 0.3,
        empty_body_fraction: 0.5,
        ..small(1000, 5)
    });
    let lens: Vec<usize> = g.docs().map(|d| tokens(d.body()).count()).collect();
    let empty = lens.iter().filter(|&&l| l == 0).count();
    assert!((400..600).contains(&empty), "{empty}");
    let mut nonempty: Vec<usize> = lens.into_iter().filter(|&l| l > 0).collect();
    nonempty.sort_unstable();
    let median = nonempty[nonempty.len() / 2];
    assert!((44..=56).contains(&median), "median {median}");
}

#[test]
fn phrases_recur_across_documents() {
    let g = Generator::new(small(2000, 11));
    let function: HashSet<&str> = g.vocabulary()[..g.function_words()]
        .iter()
        .map(String::as_str)
        .collect();
    let mut df: HashMap<(String, String), u32> = HashMap::new();
    for d in g.docs() {
        let toks: Vec<String> = tokens(d.body()).collect();
        let mut seen = HashSet::new();
        for w in toks.windows(2) {
            if !function.contains(w[0].as_str()) && !function.contains(w[1].as_str()) {
                seen.insert((w[0].clone(), w[1].clone()));
            }
        }
        for k in seen {
            *df.entry(k).or_default() += 1;
        }
    }
    let mut dfs: Vec<u32> = df.into_values().collect();
    dfs.sort_unstable_by(|a, b| b.cmp(a));
    eprintln!("top content bigram document frequencies: {:?}", &dfs[..10]);
    // Some content-word bigrams occur in a large share of documents, and
    // there are recurring bigrams at many frequency levels.
    assert!(dfs[0] >= 400, "{:?}", &dfs[..10]);
    for level in [100, 30, 10] {
        assert!(
            dfs.iter().filter(|&&d| d >= level).count() >= 20,
            "few bigrams with df >= {level}"
        );
    }
    // The most popular collocation appears in many documents verbatim.
    let top = g.collocations().next().unwrap().join(" ");
    let with_top = g
        .docs()
        .filter(|d| d.body().to_ascii_lowercase().contains(&top))
        .count();
    assert!(with_top > 200, "{top:?} in {with_top} docs");
}

#[test]
fn tiny_and_odd_options_do_not_panic() {
    for opts in [
        GenOptions {
            docs: 30,
            vocab_size: 0,
            collocations: 100,
            ..GenOptions::default()
        },
        GenOptions {
            docs: 30,
            vocab_size: 500,
            collocations: 0,
            zipf_exponent: f64::NAN,
            median_body_tokens: 0.0,
            body_sigma: -1.0,
            collocation_rate: 2.0,
            ..GenOptions::default()
        },
        GenOptions {
            docs: 5,
            vocab_size: 1000,
            zipf_exponent: 0.0,
            markov_rate: 1.0,
            topic_rate: 0.0,
            ..GenOptions::default()
        },
    ] {
        let g = Generator::new(opts);
        assert!(g.vocabulary().len() >= 16);
        for d in g.docs() {
            assert!(!d.title().is_empty());
        }
    }
}

#[test]
fn json_escaping_round_trips() {
    let d = Document::title_body("a\"b\\c", "tab\there\nnew \u{1} \u{1f} é ☃", "\r\u{7f}");
    let mut buf = Vec::new();
    push_json_line(&mut buf, &d);
    assert_eq!(buf.last(), Some(&b'\n'));
    let line = std::str::from_utf8(&buf[..buf.len() - 1]).unwrap();
    assert_eq!(
        crate::corpus::read::parse_record(line, &crate::schema::Schema::default()).unwrap(),
        d
    );
}

fn read_back(path: &std::path::Path) -> Vec<Document> {
    Corpus::open(&[path.to_path_buf()], ReadOptions::default())
        .unwrap()
        .map(|d| d.unwrap())
        .collect()
}

#[test]
fn writer_round_trips_in_all_formats() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(1100, 9);
    let expected: Vec<Document> = Generator::new(opts.clone()).docs().collect();
    let mut plain_bytes = Vec::new();
    for name in ["c.jsonl", "c.jsonl.zst", "c.jsonl.gz"] {
        let out: PathBuf = dir.path().join(name);
        let last = AtomicU64::new(0);
        let calls = AtomicU64::new(0);
        let progress = |done: u64| {
            assert!(done >= last.load(Ordering::Relaxed));
            last.store(done, Ordering::Relaxed);
            calls.fetch_add(1, Ordering::Relaxed);
        };
        let bytes = write_corpus(&opts, &out, &progress).unwrap();
        assert_eq!(bytes, std::fs::metadata(&out).unwrap().len(), "{name}");
        assert_eq!(last.load(Ordering::Relaxed), 1100);
        assert!(calls.load(Ordering::Relaxed) >= 2);
        assert_eq!(read_back(&out), expected, "{name}");
        if name == "c.jsonl" {
            plain_bytes = std::fs::read(&out).unwrap();
        }
        // No temporary file left behind.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
    // Byte-identical whatever the thread count.
    let zst_bytes = std::fs::read(dir.path().join("c.jsonl.zst")).unwrap();
    for threads in [1, 3] {
        let out = dir.path().join(format!("t{threads}.jsonl"));
        write_corpus_with_threads(&opts, &out, &|_| {}, threads).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), plain_bytes, "{threads} threads");
        let out = dir.path().join(format!("t{threads}.jsonl.zst"));
        write_corpus_with_threads(&opts, &out, &|_| {}, threads).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), zst_bytes, "{threads} threads");
    }
    // The compressed stream is one valid stream for a standard decoder.
    let decoded = zstd::decode_all(zst_bytes.as_slice()).unwrap();
    assert_eq!(decoded, plain_bytes);
    // Empty corpus: still a valid (empty) compressed stream.
    for name in ["empty.jsonl.zst", "empty.jsonl.gz", "empty.jsonl"] {
        let out = dir.path().join(name);
        write_corpus(&small(0, 1), &out, &|_| {}).unwrap();
        assert!(read_back(&out).is_empty());
    }
    let empty = std::fs::read(dir.path().join("empty.jsonl.zst")).unwrap();
    assert!(!empty.is_empty() && zstd::decode_all(empty.as_slice()).unwrap().is_empty());
}

#[test]
fn writer_reports_unwritable_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no/such/dir/c.jsonl");
    match write_corpus(&small(10, 1), &out, &|_| {}) {
        Err(e @ CorpusError::Write { .. }) => assert_eq!(e.path(), out),
        other => panic!("unexpected {other:?}"),
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn generator_is_send_sync() {
    assert_send_sync::<Generator>();
}

/// Generation speed. Run with
/// `cargo test --release -p tierdex --lib gen_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn gen_speed() {
    let t = std::time::Instant::now();
    let g = Generator::new(GenOptions::default());
    let build = t.elapsed();
    let n = 50_000u64;
    let t = std::time::Instant::now();
    let mut tokens = 0usize;
    let mut bytes = 0usize;
    for i in 0..n {
        let d = g.doc(i);
        tokens += d.body().split(' ').count() + d.title().split(' ').count();
        bytes += d.body().len() + d.title().len();
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "build {build:?}; {n} docs in {secs:.2}s on one core: {:.0} docs/s, {:.1} M tokens/s, {:.0} MB/s, {:.0} tokens/doc",
        n as f64 / secs,
        tokens as f64 / secs / 1e6,
        bytes as f64 / secs / 1e6,
        tokens as f64 / n as f64
    );
    let dir = tempfile::tempdir().unwrap();
    for name in ["speed.jsonl", "speed.jsonl.zst"] {
        let out = dir.path().join(name);
        let t = std::time::Instant::now();
        let opts = GenOptions {
            docs: 100_000,
            ..GenOptions::default()
        };
        let written = write_corpus(&opts, &out, &|_| {}).unwrap();
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "write_corpus {name}: 100000 docs in {secs:.2}s ({:.0} docs/s), {:.1} MB",
            1e5 / secs,
            written as f64 / 1e6
        );
    }
}

/// Prints a few documents, to eyeball the text:
/// `cargo test -p tierdex --lib gen_sample -- --ignored --nocapture`.
#[test]
#[ignore]
fn gen_sample() {
    let g = Generator::new(GenOptions::default());
    for i in 0..4 {
        let d = g.doc(i);
        eprintln!("{} | {}\n{}\n", d.id, d.title(), &d.body()[..d.body().len().min(1200)]);
    }
    let top: Vec<String> = g.collocations().take(15).map(|c| c.join(" ")).collect();
    eprintln!("collocations: {top:?}");
    eprintln!("ranks 100..130: {:?}", &g.vocabulary()[100..130]);
    eprintln!("ranks 10000..10010: {:?}", &g.vocabulary()[10000..10010]);
    eprintln!("ranks 249990..: {:?}", &g.vocabulary()[249_990..]);
    let mut hist = [0u64; 21];
    for i in 0..2000 {
        for t in tokens(g.doc(i).body()) {
            let letters = t.bytes().filter(u8::is_ascii_lowercase).count();
            hist[letters.min(20)] += 1;
        }
    }
    let n: u64 = hist[1..].iter().sum();
    let mean = hist.iter().enumerate().map(|(l, &c)| l as u64 * c).sum::<u64>() as f64 / n as f64;
    let shares: Vec<String> = hist[1..16]
        .iter()
        .map(|&c| format!("{:.3}", c as f64 / n as f64))
        .collect();
    eprintln!("mean token length {mean:.2} letters; share by length 1..15: {shares:?}");
}

fn typed(docs: u64, seed: u64) -> GenOptions {
    GenOptions {
        typed: true,
        ..small(docs, seed)
    }
}

/// Parses a JSON lines corpus with typed fields (the corpus reader checks
/// records against a title/body schema).
fn read_typed(path: &std::path::Path) -> Vec<Document> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn typed_fields_leave_the_text_alone() {
    let plain = Generator::new(small(40, 3));
    let g = Generator::new(typed(40, 3));
    for (a, b) in plain.docs().zip(g.docs()) {
        assert_eq!(
            (a.id.as_str(), a.title(), a.body()),
            (b.id.as_str(), b.title(), b.body())
        );
        assert_eq!(a.fields.len(), 2);
        for f in ["date", "category", "tags", "popularity"] {
            assert!(b.fields.contains_key(f), "{} lacks {f}", b.id);
        }
    }
    assert!(plain.categories().is_empty() && plain.tags().is_empty());
    assert_eq!((g.categories().len(), g.tags().len()), (1000, 200));
    let names: HashSet<&String> = g.categories().iter().chain(g.tags()).collect();
    assert_eq!(names.len(), 1200, "category and tag names are distinct");
}

#[test]
fn typed_fields_are_deterministic_and_well_formed() {
    let a = Generator::new(typed(300, 8));
    let b = Generator::new(typed(300, 8));
    let other = Generator::new(typed(300, 9));
    let docs: Vec<Document> = a.docs().collect();
    assert_eq!(docs, b.docs().collect::<Vec<_>>());
    assert_eq!(a.doc(123), docs[123]);
    assert_ne!(docs, other.docs().collect::<Vec<_>>());
    let categories: HashSet<&str> = a.categories().iter().map(String::as_str).collect();
    let tags: HashSet<&str> = a.tags().iter().map(String::as_str).collect();
    for d in &docs {
        let date = d.fields.get("date").and_then(|v| v.as_str()).unwrap();
        assert_eq!(date.len(), 20, "{date}");
        assert!(
            ("2005-01-01T00:00:00Z"..="2024-12-31T23:59:59Z").contains(&date),
            "{date}"
        );
        assert!(categories.contains(d.fields.get("category").and_then(|v| v.as_str()).unwrap()));
        let t: Vec<&str> = d
            .fields
            .get("tags")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(t.len() <= 5 && t.iter().all(|x| tags.contains(x)));
        assert_eq!(t.iter().collect::<HashSet<_>>().len(), t.len(), "distinct tags {t:?}");
        if let Some(p) = d.fields.get("price") {
            let p = p.as_f64().unwrap();
            let cents = (p * 100.0).round();
            assert!(p >= 0.0 && (cents / 100.0 - p).abs() < 1e-9, "{p}");
        }
        let pop = d.fields.get("popularity").unwrap().as_u64().unwrap();
        assert!(pop <= 1_000_000);
        // The values come from the same stream as the cheap sampler's.
        let i: u64 = d.id[1..].parse().unwrap();
        let v = a.typed_values(i).unwrap();
        assert_eq!(v.popularity, pop);
        assert_eq!(typed::format_date(v.date_secs), date);
    }
}

#[test]
fn typed_golden_output_is_stable() {
    // Pins the typed corpus like `golden_output_is_stable` pins the text.
    let g = Generator::new(GenOptions {
        docs: 50,
        typed: true,
        ..GenOptions::default()
    });
    let mut buf = Vec::new();
    g.write_json_lines(0..50, &mut buf);
    let first = buf.split(|&b| b == b'\n').next().unwrap();
    let first = std::str::from_utf8(first).unwrap();
    // Field order of the line: id, title, body, then the typed fields.
    let keys: Vec<usize> = [
        "\"id\"",
        "\"title\"",
        "\"body\"",
        "\"date\"",
        "\"category\"",
        "\"tags\"",
        "\"popularity\"",
    ]
    .iter()
    .map(|k| first.find(k).unwrap())
    .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{first}");
    let hash = xxhash_rust::xxh3::xxh3_64(&buf);
    assert_eq!(hash, 0xa4ef_8731_be3d_e43b, "typed golden hash changed: {hash:#x}");
}

#[test]
fn typed_distributions() {
    // 100,000 documents' typed values (no text: fast).
    let g = Generator::new(typed(0, 42));
    let n = 100_000u64;
    let mut category_counts = vec![0u32; 1000];
    let mut tag_counts = vec![0u32; 200];
    let (mut prices, mut missing, mut no_tags, mut n_tags) = (Vec::new(), 0u64, 0u64, 0u64);
    let mut pops = Vec::new();
    let (mut first_decade, mut min_date, mut max_date) = (0u64, i64::MAX, i64::MIN);
    // 2015-01-01T00:00:00Z.
    let mid = 1_420_070_400;
    for i in 0..n {
        let v = g.typed_values(i).unwrap();
        category_counts[v.category as usize] += 1;
        for &t in &v.tags[..v.n_tags] {
            tag_counts[t as usize] += 1;
        }
        n_tags += v.n_tags as u64;
        no_tags += u64::from(v.n_tags == 0);
        match v.price_cents {
            Some(c) => prices.push(c),
            None => missing += 1,
        }
        pops.push(v.popularity);
        first_decade += u64::from(v.date_secs < mid);
        min_date = min_date.min(v.date_secs);
        max_date = max_date.max(v.date_secs);
    }
    let distinct = category_counts.iter().filter(|&&c| c > 0).count();
    let top = f64::from(category_counts[0]) / n as f64;
    eprintln!("categories: {distinct} distinct, top {top:.3}");
    assert!((950..=1000).contains(&distinct), "{distinct} categories");
    // Zipf(1) over 1,000 values: the top one has 1/H(1000) = 13.4%.
    assert!((0.12..0.15).contains(&top), "top category {top}");
    assert!(category_counts[0] > 5 * category_counts[9] && category_counts[9] > category_counts[500]);

    let tags_seen = tag_counts.iter().filter(|&&c| c > 0).count();
    let no_tags = no_tags as f64 / n as f64;
    eprintln!(
        "tags: {tags_seen} distinct, {no_tags:.3} without, mean {:.2}",
        n_tags as f64 / n as f64
    );
    assert!(tags_seen >= 195 && tag_counts[0] > 10 * tag_counts[150]);
    assert!((0.13..0.17).contains(&no_tags), "{no_tags}");

    prices.sort_unstable();
    let median = prices[prices.len() / 2] as f64 / 100.0;
    let missing = missing as f64 / n as f64;
    let p90 = prices[prices.len() * 9 / 10] as f64 / 100.0;
    eprintln!("price: median {median}, p90 {p90}, {missing:.4} missing");
    assert!((28.5..31.5).contains(&median), "median price {median}");
    // Log-normal, sigma 1: p90 = median * e^1.2816 = 3.6 x median.
    assert!((3.2..4.0).contains(&(p90 / median)), "p90 {p90}");
    assert!((0.025..0.035).contains(&missing), "missing {missing}");

    // Linear density from 1 to 2 over 20 years: 5/12 in the first decade.
    let share = first_decade as f64 / n as f64;
    eprintln!(
        "dates: {} .. {}, first decade {share:.3}",
        typed::format_date(min_date),
        typed::format_date(max_date)
    );
    assert!((0.40..0.43).contains(&share), "first decade {share}");
    assert!(min_date >= typed::DATE_START_SECS && max_date < typed::DATE_END_SECS);
    assert!(min_date < typed::DATE_START_SECS + 86_400 * 30 && max_date > typed::DATE_END_SECS - 86_400 * 30);

    pops.sort_unstable();
    let (p50, p99, max) = (pops[pops.len() / 2], pops[pops.len() * 99 / 100], *pops.last().unwrap());
    let mean = pops.iter().sum::<u64>() as f64 / n as f64;
    eprintln!("popularity: p50 {p50}, p99 {p99}, max {max}, mean {mean:.0}");
    assert!(
        (5..=10).contains(&p50) && p99 > 400 && max > 50_000 && max <= 1_000_000,
        "{p50} {p99} {max}"
    );
    assert!(mean > 3.0 * p50 as f64);
}

#[test]
fn dates_format_as_iso_8601() {
    assert_eq!(typed::format_date(0), "1970-01-01T00:00:00Z");
    assert_eq!(typed::format_date(1_300_115_366), "2011-03-14T15:09:26Z");
    assert_eq!(typed::format_date(typed::DATE_START_SECS), "2005-01-01T00:00:00Z");
    assert_eq!(typed::format_date(typed::DATE_END_SECS - 1), "2024-12-31T23:59:59Z");
    // Leap days, and a century that is not a leap year.
    assert_eq!(typed::format_date(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(typed::format_date(1_709_164_800), "2024-02-29T00:00:00Z");
    assert_eq!(typed::format_date(-2_203_891_200), "1900-03-01T00:00:00Z");
    assert_eq!(typed::format_date(-1), "1969-12-31T23:59:59Z");
}

#[test]
fn typed_corpus_round_trips_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let opts = typed(700, 4);
    let expected: Vec<Document> = Generator::new(opts.clone()).docs().collect();
    let out = dir.path().join("t.jsonl");
    write_corpus(&opts, &out, &|_| {}).unwrap();
    assert_eq!(read_typed(&out), expected);
    let one = dir.path().join("t1.jsonl");
    write_corpus_with_threads(&opts, &one, &|_| {}, 1).unwrap();
    assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&out).unwrap());
    // Some documents have no price, some no tags (an empty array).
    assert!(expected.iter().any(|d| !d.fields.contains_key("price")));
    assert!(expected
        .iter()
        .any(|d| d.fields.get("tags").unwrap().as_array().unwrap().is_empty()));
    // Untyped options give the untyped corpus.
    let plain = dir.path().join("p.jsonl");
    write_corpus(&small(700, 4), &plain, &|_| {}).unwrap();
    let text = std::fs::read_to_string(&plain).unwrap();
    assert!(!text.contains("\"category\""));
    assert_eq!(read_back(&plain).len(), 700);
}
