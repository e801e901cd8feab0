//! Tests of the analyzer: Lucene-like expectations, equivalence of the ASCII
//! fast path with `unicode-segmentation`, robustness, and a throughput
//! micro-benchmark (`#[ignore]`d; run it in release mode, see [`bench`]).

use super::tokenizer::{self, Case};
use super::*;
use proptest::prelude::*;
use unicode_segmentation::UnicodeSegmentation;

/// (term, position, start, end) of every token.
fn analyze_all(analyzer: &Analyzer, text: &str) -> Vec<(String, u32, u32, u32)> {
    let mut out = Vec::new();
    analyzer.analyze(text, |t| out.push((t.term.to_string(), t.position, t.start, t.end)));
    out
}

fn terms(config: AnalyzerConfig, text: &str) -> Vec<String> {
    analyze_all(&Analyzer::new(config), text)
        .into_iter()
        .map(|t| t.0)
        .collect()
}

fn plain_terms(text: &str) -> Vec<String> {
    terms(AnalyzerConfig::default(), text)
}

/// Token spans from the production tokenizer (hybrid fast path).
fn hybrid_spans(text: &str, max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    tokenizer::tokenize(text, max, &mut |s, e, _| out.push((s, e)));
    out
}

/// Token spans from `unicode-segmentation`'s full UAX#29 implementation on
/// the whole text.
fn reference_spans(text: &str, max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    tokenizer::unicode_region(text, 0, text.len(), max, &mut |s, e, _| out.push((s, e)));
    out
}

/// Per-character full lowercasing (what the analyzer promises).
fn lower(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

#[test]
fn lucene_standard_example() {
    let got = analyze_all(
        &Analyzer::new(AnalyzerConfig::default()),
        "The U.S. network's 1,000 cars.",
    );
    let want = [
        ("the", 0, 0, 3),
        ("u.s", 1, 4, 7),
        ("network's", 2, 9, 18),
        ("1,000", 3, 19, 24),
        ("cars", 4, 25, 29),
    ];
    let want: Vec<_> = want.iter().map(|&(t, p, s, e)| (t.to_string(), p, s, e)).collect();
    assert_eq!(got, want);
}

#[test]
fn uax29_word_rules() {
    assert_eq!(plain_terms("don't."), ["don't"]);
    assert_eq!(
        plain_terms("foo_bar a:b 3.14 1;2 a;b"),
        ["foo_bar", "a:b", "3.14", "1;2", "a", "b"]
    );
    assert_eq!(
        plain_terms("e.g. x1.5 1.a a.1 __init__ _ __"),
        ["e.g", "x1.5", "1", "a", "a", "1", "__init__"]
    );
    assert_eq!(
        plain_terms("foo-bar foo/bar foo@bar.com"),
        ["foo", "bar", "foo", "bar", "foo", "bar.com"]
    );
    assert_eq!(
        plain_terms("1:2 a'b' 'quoted' a..b 1,,2"),
        ["1", "2", "a'b", "quoted", "a", "b", "1", "2"]
    );
    assert_eq!(plain_terms("Hello\r\nWORLD\tMiXeD"), ["hello", "world", "mixed"]);
}

#[test]
fn unicode_text() {
    // CJK ideographs and hiragana are one token per character; katakana stays together.
    assert_eq!(plain_terms("中文字"), ["中", "文", "字"]);
    assert_eq!(plain_terms("日本語のテキスト"), ["日", "本", "語", "の", "テキスト"]);
    // Non-ASCII letters, digits and punctuation.
    assert_eq!(
        plain_terms("Café CRÈME brûlée’s «ÉTÉ»"),
        ["café", "crème", "brûlée’s", "été"]
    );
    assert_eq!(plain_terms("ΣΊΣΥΦΟΣ ٣٤ straße"), ["σίσυφοσ", "٣٤", "straße"]);
    // Lowercasing may change the length in bytes; offsets stay in the source.
    let got = analyze_all(&Analyzer::default(), "xx İx Ⱥ");
    assert_eq!(got[1], ("i\u{307}x".to_string(), 1, 3, 6));
    assert_eq!(got[2], ("ⱥ".to_string(), 2, 7, 9));
    // A combining mark stays with its letter; emoji alone are not tokens.
    assert_eq!(plain_terms("cafe\u{301} 👍 a👍b"), ["cafe\u{301}", "a", "b"]);
}

#[test]
fn empty_and_punctuation_only() {
    for text in ["", " ", "...", " - , ; : \" ' ( ) \n\t", "«»—–…", "👍👍"] {
        assert!(plain_terms(text).is_empty(), "{text:?}");
    }
}

#[test]
fn stop_words_leave_position_gaps() {
    let config = AnalyzerConfig {
        stop_words: true,
        stemming: false,
        ..Default::default()
    };
    let got = analyze_all(&Analyzer::new(config), "The cat is on THE mat and it sat");
    let want = [("cat", 1, 4, 7), ("mat", 5, 18, 21), ("sat", 8, 29, 32)];
    let want: Vec<_> = want.iter().map(|&(t, p, s, e)| (t.to_string(), p, s, e)).collect();
    assert_eq!(got, want);
    // Without stop words nothing is removed.
    assert_eq!(plain_terms("the a an").len(), 3);
}

#[test]
fn stemming() {
    let config = AnalyzerConfig {
        stemming: true,
        stop_words: false,
        ..Default::default()
    };
    assert_eq!(
        terms(config, "Running runs ran easily THE"),
        ["run", "run", "ran", "easili", "the"]
    );
    let both = AnalyzerConfig {
        stemming: true,
        stop_words: true,
        ..Default::default()
    };
    // Stop words are removed before stemming ("this" would not stem to a stop word).
    let got = analyze_all(&Analyzer::new(both), "this is running");
    assert_eq!(got, [("run".to_string(), 2, 8, 15)]);
}

#[test]
fn stemming_inside_a_sink_works() {
    // The per-thread stem cache is busy during the outer call: the inner one
    // stems without it.
    let analyzer = Analyzer::new(AnalyzerConfig {
        stemming: true,
        stop_words: false,
        ..Default::default()
    });
    let mut pairs = Vec::new();
    analyzer.analyze("Cats running", |outer| {
        let mut inner = Vec::new();
        analyzer.analyze("jumping dogs", |t| inner.push(t.term.to_string()));
        pairs.push((outer.term.to_string(), inner));
    });
    let inner = vec!["jump".to_string(), "dog".to_string()];
    assert_eq!(pairs, [("cat".to_string(), inner.clone()), ("run".to_string(), inner)]);
}

#[test]
fn long_tokens_are_cut() {
    let word = "a".repeat(600);
    let got = analyze_all(&Analyzer::default(), &format!("x {word} y"));
    let lens: Vec<_> = got.iter().map(|t| (t.0.len(), t.1, t.2, t.3)).collect();
    assert_eq!(
        lens,
        [
            (1, 0, 0, 1),
            (255, 1, 2, 257),
            (255, 2, 257, 512),
            (90, 3, 512, 602),
            (1, 4, 603, 604)
        ]
    );
    // Characters, not bytes, are counted.
    let word = "é".repeat(300);
    let got = analyze_all(&Analyzer::default(), &word);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0.chars().count(), 255);
    assert_eq!((got[1].2, got[1].3), (510, 600));
    // Segmentation restarts after a piece: the `.` at the cut no longer joins.
    let analyzer = Analyzer::with_max_token_chars(AnalyzerConfig::default(), 3);
    assert_eq!(
        analyze_all(&analyzer, "abc.def ABCDEFG"),
        [
            ("abc".to_string(), 0, 0, 3),
            ("def".to_string(), 1, 4, 7),
            ("abc".to_string(), 2, 8, 11),
            ("def".to_string(), 3, 11, 14),
            ("g".to_string(), 4, 14, 15),
        ]
    );
}

#[test]
fn borrowed_terms_for_lowercase_ascii() {
    let text = "plain words Only";
    let mut borrowed = Vec::new();
    Analyzer::default().analyze(text, |t| {
        let inside = text.as_bytes().as_ptr_range().contains(&t.term.as_ptr());
        borrowed.push(inside);
    });
    assert_eq!(borrowed, [true, true, false]);
}

#[test]
fn analyzer_is_send_sync_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Analyzer>();
    let a = Analyzer::new(AnalyzerConfig {
        stemming: true,
        stop_words: true,
        ..Default::default()
    });
    assert_eq!(a.clone().config(), a.config());
}

#[test]
fn regions_split_at_spaces_only_where_safe() {
    // Non-ASCII next to ASCII punctuation that joins words.
    for text in [
        "l'été",
        "abc.é x",
        "é.abc",
        "1,٣",
        "a\u{301}.b c",
        "foo bar-\u{93E}x",
        "  é",
        "x \u{301}y",
        "\r\n\u{301}a",
        "a \u{200D}👍 b",
        "🇫🇷🇫 🇷x",
        "א\"ב \"x\"",
        "x'\u{AD}y z",
        "a\u{FF0E}b a.b",
    ] {
        assert_eq!(hybrid_spans(text, 255), reference_spans(text, 255), "{text:?}");
        let direct: Vec<_> = text.unicode_word_indices().map(|(s, w)| (s, s + w.len())).collect();
        assert_eq!(hybrid_spans(text, 255), direct, "{text:?}");
    }
}

/// ASCII characters whose word-break classes matter, weighted towards
/// letters and the joining punctuation.
fn ascii_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec!['a', 'b', 'Z', 'x', 'E']),
        3 => prop::sample::select(vec!['0', '1', '9']),
        4 => prop::sample::select(vec!['\'', '.', ':', ',', ';', '_']),
        3 => prop::sample::select(vec![' ', ' ', '\n', '\r', '\t', '\u{b}', '\u{c}']),
        2 => prop::sample::select(vec!['-', '"', '/', '@', '!', '(', ')', '#', '\u{0}', '\u{7f}']),
    ]
}

/// Non-ASCII characters with interesting word-break classes.
fn non_ascii_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        'é',
        'É',
        'ß',
        'Σ',
        'İ',
        'ﬁ', // letters (some with multi-char lowercase)
        '\u{301}',
        '\u{93E}',
        '\u{200D}',
        '\u{AD}',
        '\u{200B}', // Extend, ZWJ, Format
        '👍',
        '\u{1F1EB}',
        '\u{1F1F7}', // pictographic, regional indicators
        'א',
        'ב', // Hebrew letters (with `"` and `'`: WB7a–c)
        'カ',
        'ー',
        '中',
        'あ',
        'ก', // Katakana, Han, Hiragana, Thai
        '٣',
        '\u{FF10}', // non-ASCII digits
        '\u{A0}',
        '\u{3000}',
        '\u{2028}',
        '\u{85}', // spaces and newlines
        '\u{2019}',
        '\u{FF0E}',
        '\u{2024}',
        '\u{FE50}',
        '\u{FF1A}', // Mid* classes
        '\u{203F}', // ExtendNumLet (undertie)
    ])
}

fn ascii_text() -> impl Strategy<Value = String> {
    prop::collection::vec(ascii_char(), 0..200).prop_map(|v| v.into_iter().collect())
}

fn mixed_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![4 => ascii_char(), 1 => non_ascii_char()], 0..80)
        .prop_map(|v| v.into_iter().collect())
}

/// Texts with long runs, to exercise the cutting of long segments.
fn text_with_runs(chars: BoxedStrategy<char>) -> impl Strategy<Value = String> {
    prop::collection::vec((chars, 1usize..12), 0..20)
        .prop_map(|v| v.into_iter().map(|(c, n)| c.to_string().repeat(n)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ascii_fast_path_matches_uax29(text in ascii_text()) {
        let fast = hybrid_spans(&text, MAX_TOKEN_CHARS);
        // Independent reference: the full algorithm's bounds, filtered.
        let reference: Vec<_> = text
            .split_word_bound_indices()
            .filter(|(_, w)| w.chars().any(char::is_alphanumeric))
            .map(|(s, w)| (s, s + w.len()))
            .collect();
        prop_assert_eq!(&fast, &reference);
        prop_assert_eq!(fast, reference_spans(&text, MAX_TOKEN_CHARS));
    }

    #[test]
    fn mixed_regions_match_whole_text_uax29(text in mixed_text()) {
        prop_assert_eq!(
            hybrid_spans(&text, MAX_TOKEN_CHARS),
            reference_spans(&text, MAX_TOKEN_CHARS)
        );
    }

    #[test]
    fn cutting_long_segments_matches_reference(
        text in prop_oneof![
            text_with_runs(ascii_char().boxed()),
            text_with_runs(prop_oneof![3 => ascii_char(), 1 => non_ascii_char()].boxed()),
        ],
        max in 1usize..8,
    ) {
        prop_assert_eq!(hybrid_spans(&text, max), reference_spans(&text, max));
    }

    #[test]
    fn block_path_matches_scalar_path(
        text in prop_oneof![
            ascii_text(),
            text_with_runs(ascii_char().boxed()),
            prop::collection::vec(prop::sample::select(vec!['a', 'B', '1', '.', ',', ' ', '_']), 0..400)
                .prop_map(|v| v.into_iter().collect::<String>()),
        ],
        from in 0usize..70,
        max in prop_oneof![1usize..8, Just(MAX_TOKEN_CHARS)],
    ) {
        // Any sub-range is a text of its own for both.
        let from = from.min(text.len());
        let (mut blocks, mut scalar) = (Vec::new(), Vec::new());
        tokenizer::ascii_region(&text, from, text.len(), max, &mut |s, e, c| blocks.push((s, e, c)));
        tokenizer::ascii_scalar(&text, from, text.len(), max, &mut |s, e, c| scalar.push((s, e, c)));
        prop_assert_eq!(blocks, scalar);
    }

    #[test]
    fn ascii_case_flags_are_right(text in ascii_text()) {
        tokenizer::tokenize(&text, MAX_TOKEN_CHARS, &mut |s, e, case| {
            let upper = text[s..e].bytes().any(|b| b.is_ascii_uppercase());
            assert_eq!(case, if upper { Case::AsciiUpper } else { Case::Lower });
        });
    }

    #[test]
    fn arbitrary_unicode_is_analysed_consistently(
        text in prop_oneof![any::<String>(), mixed_text(), "\\PC{0,60}"],
    ) {
        let tokens = analyze_all(&Analyzer::default(), &text);
        let mut last_end = 0;
        for (i, (term, position, start, end)) in tokens.iter().enumerate() {
            let (s, e) = (*start as usize, *end as usize);
            prop_assert_eq!(*position as usize, i);
            prop_assert!(last_end <= s && s < e && e <= text.len());
            prop_assert!(text.is_char_boundary(s) && text.is_char_boundary(e));
            prop_assert_eq!(term, &lower(&text[s..e]));
            last_end = e;
        }
        // With every option on: no panic, valid offsets, increasing positions.
        let all = Analyzer::new(AnalyzerConfig { stemming: true, stop_words: true, ..Default::default() });
        let mut last = None;
        all.analyze(&text, |t| {
            assert!(text.is_char_boundary(t.start as usize));
            assert!(text.is_char_boundary(t.end as usize));
            assert!(last.is_none_or(|p| p < t.position));
            last = Some(t.position);
        });
    }

    #[test]
    fn stop_words_only_remove_tokens(text in ascii_text()) {
        let plain = analyze_all(&Analyzer::default(), &text);
        let stop = analyze_all(
            &Analyzer::new(AnalyzerConfig { stop_words: true, stemming: false, ..Default::default() }),
            &text,
        );
        let kept: Vec<_> = plain.into_iter().filter(|t| !is_stop_word(&t.0)).collect();
        prop_assert_eq!(stop, kept);
    }
}

/// Throughput of the analyzer on generated text. Run with
/// `cargo test --release -p tierdex --lib analysis::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench() {
    use std::time::Instant;

    const WORDS: [&str; 24] = [
        "the",
        "of",
        "and",
        "in",
        "to",
        "was",
        "for",
        "on",
        "as",
        "with",
        "by",
        "he",
        "network",
        "government",
        "university",
        "music",
        "film",
        "season",
        "population",
        "district",
        "international",
        "between",
        "following",
        "national",
    ];
    /// Wikipedia-like text of about `size` bytes; `accent` is a non-ASCII
    /// word inserted every `every` words (0: never).
    fn text(size: usize, every: u64, accent: &str) -> String {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut s = String::with_capacity(size + 64);
        while s.len() < size {
            let r = next();
            match r % 23 {
                0 => s.push_str("The"),
                1 => s.push_str("U.S."),
                2 => s.push_str("1,000"),
                3 => s.push_str("network's"),
                _ => s.push_str(WORDS[(r >> 8) as usize % WORDS.len()]),
            }
            if every != 0 && (r >> 20) % every == 0 {
                s.push(' ');
                s.push_str(accent);
            }
            s.push_str(match (r >> 32) % 12 {
                0 => ", ",
                1 => ". ",
                2 => "\n",
                3 => " (",
                4 => ") ",
                _ => " ",
            });
        }
        s
    }
    /// On-CPU time of this thread (Linux), so that the numbers hold on a
    /// machine shared with other jobs; wall-clock time elsewhere.
    fn cpu_seconds(wall: Instant) -> f64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(wall.elapsed().as_secs_f64(), |ns| ns as f64 / 1e9)
    }
    fn measure(label: &str, text: &str, mut run: impl FnMut(&str) -> usize) {
        let (mut best_cpu, mut best_wall) = (f64::MAX, f64::MAX);
        let mut count = 0;
        for _ in 0..5 {
            let epoch = Instant::now();
            let (wall, cpu) = (Instant::now(), cpu_seconds(epoch));
            count = run(text);
            best_wall = best_wall.min(wall.elapsed().as_secs_f64());
            best_cpu = best_cpu.min(cpu_seconds(epoch) - cpu);
        }
        let mb = text.len() as f64 / 1e6;
        println!(
            "{label:<50} {:>7.1} MB/s CPU {:>7.1} MB/s wall ({count} tokens, {mb:.0} MB)",
            mb / best_cpu,
            mb / best_wall,
        );
    }
    let size = 64 << 20;
    let ascii = text(size, 0, "");
    let sparse = text(size, 40, "café");
    let dense = text(size, 2, "Ünïcödé");
    let analyzer = Analyzer::default();
    let count_tokens = |a: &Analyzer| {
        let a = a.clone();
        move |t: &str| {
            let mut n = 0usize;
            a.analyze(t, |tok| n += tok.term.len() & 1 | 1);
            n
        }
    };
    let tokenizer_only = |t: &str| {
        let mut n = 0usize;
        tokenizer::tokenize(t, MAX_TOKEN_CHARS, &mut |s, _, _| n += s & 1 | 1);
        n
    };
    let unicode_only = |t: &str| {
        let mut n = 0usize;
        tokenizer::unicode_region(t, 0, t.len(), MAX_TOKEN_CHARS, &mut |s, _, _| n += s & 1 | 1);
        n
    };
    measure("tokenizer, ASCII fast path, ASCII text", &ascii, tokenizer_only);
    measure("tokenizer, unicode-segmentation, ASCII text", &ascii, unicode_only);
    measure("analyze (default), ASCII text", &ascii, count_tokens(&analyzer));
    measure(
        "analyze (default), 1 non-ASCII word / 40",
        &sparse,
        count_tokens(&analyzer),
    );
    measure(
        "analyze (default), 1 non-ASCII word / 2",
        &dense,
        count_tokens(&analyzer),
    );
    measure("tokenizer, unicode-segmentation, 1 non-ASCII / 2", &dense, unicode_only);
    let all = Analyzer::new(AnalyzerConfig {
        stemming: true,
        stop_words: true,
        ..Default::default()
    });
    measure(
        "analyze (stop words + stemming), ASCII text",
        &ascii,
        count_tokens(&all),
    );
}

/// Bytes the tokenizer examined while `f` ran (on this thread).
fn scanned_by(f: impl FnOnce()) -> u64 {
    let before = tokenizer::SCANNED.with(|s| s.get());
    f();
    tokenizer::SCANNED.with(|s| s.get()) - before
}

/// The tokenizer as it was before it worked in linear time: after cutting
/// a long segment it segments the rest of the region again, scanning the
/// remainder of the segment each time. The reference for the linear one.
fn restarting_reference_spans(text: &str, max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut base = 0;
    'restart: loop {
        for (offset, word) in text[base..].split_word_bound_indices() {
            if !word.chars().any(char::is_alphanumeric) {
                continue;
            }
            let start = base + offset;
            if let Some((cut, _)) = word.char_indices().nth(max) {
                if word[..cut].chars().any(char::is_alphanumeric) {
                    out.push((start, start + cut));
                }
                base = start + cut;
                continue 'restart;
            }
            out.push((start, start + word.len()));
        }
        return out;
    }
}

/// Long runs: every piece but the last has `max` characters.
fn pieces(text: &str, max: usize) -> Vec<(usize, usize)> {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(max).collect();
    let mut out: Vec<_> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    if let Some(&last) = bounds.last() {
        out.push((last, text.len()));
    }
    out
}

#[test]
fn long_runs_are_tokenized_in_linear_time() {
    // Before, each cut scanned the rest of the run again: n²/510 bytes.
    for unit in [
        "a",
        "_",
        "é",
        "a\u{301}",
        "\u{203F}",
        "中",
        "1.",
        "x\u{200D}",
        "\u{301}",
    ] {
        let text = unit.repeat(200_000 / unit.len());
        let mut spans = Vec::new();
        let work = scanned_by(|| tokenizer::tokenize(&text, MAX_TOKEN_CHARS, &mut |s, e, _| spans.push((s, e))));
        let n = text.len() as u64;
        assert!(work <= 16 * n, "{unit:?}: {work} bytes examined for {n}");
    }
}

#[test]
fn a_few_megabytes_of_one_character() {
    for unit in ["a", "é", "Z"] {
        let text = unit.repeat(3_000_000 / unit.len());
        let mut spans = Vec::new();
        tokenizer::tokenize(&text, MAX_TOKEN_CHARS, &mut |s, e, _| spans.push((s, e)));
        assert_eq!(spans, pieces(&text, MAX_TOKEN_CHARS), "{unit:?}");
    }
    // Surrounded by other text, and through the whole analyzer.
    let text = format!("before {} after", "é".repeat(1_000_000));
    let tokens = analyze_all(&Analyzer::default(), &text);
    assert_eq!(tokens.len(), 2 + 1_000_000usize.div_ceil(MAX_TOKEN_CHARS));
    assert_eq!(tokens[0].0, "before");
    assert_eq!(tokens[1].0, "é".repeat(MAX_TOKEN_CHARS));
    assert_eq!(tokens.last().unwrap().0, "after");
}

#[test]
fn long_mixed_runs_match_the_restarting_reference() {
    let max = MAX_TOKEN_CHARS;
    for unit in [
        "a\u{301}",
        "\u{301}a",
        "\u{301}",
        "a.",
        "a.b",
        "1,",
        "\u{203F}",
        "\u{203F}a",
        "é\u{200D}",
        "👍\u{200D}",
        "\u{1F1EB}\u{1F1F7}",
        "\u{1F1EB}",
        "a\u{AD}",
        "é ",
        "\u{A0}",
        "カー",
        "א\"",
        "a\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}b",
    ] {
        for n in [max - 1, max, max + 1, 3 * max + 7, 2000] {
            let text = format!("x {}.y", unit.repeat(n));
            assert_eq!(
                hybrid_spans(&text, max),
                restarting_reference_spans(&text, max),
                "{unit:?} x {n}"
            );
        }
    }
}

/// Non-ASCII characters for runs: the classes that join (letters, marks,
/// ExtendNumLet, ZWJ) are weighted up.
fn run_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec!['a', 'é', 'Z', '1', '_', '\u{203F}', 'カ']),
        3 => prop::sample::select(vec!['\u{301}', '\u{93E}', '\u{200D}', '\u{AD}']),
        2 => prop::sample::select(vec!['.', '\'', ',', ':', '\u{2019}', '"', ' ', '\u{A0}']),
        1 => non_ascii_char(),
        1 => ascii_char(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn linear_cutting_matches_the_restarting_reference(
        text in prop::collection::vec((run_char(), 1usize..40), 0..12)
            .prop_map(|v| v.into_iter().map(|(c, n)| c.to_string().repeat(n)).collect::<String>()),
        max in 1usize..12,
    ) {
        let reference = restarting_reference_spans(&text, max);
        prop_assert_eq!(hybrid_spans(&text, max), reference.clone());
        let mut whole = Vec::new();
        tokenizer::unicode_region(&text, 0, text.len(), max, &mut |s, e, _| whole.push((s, e)));
        prop_assert_eq!(whole, reference);
    }
}

/// (term, position, start, end) tuples from string slices.
fn owned(want: &[(&str, u32, u32, u32)]) -> Vec<(String, u32, u32, u32)> {
    want.iter().map(|&(t, p, s, e)| (t.to_string(), p, s, e)).collect()
}

fn named(name: &str) -> Analyzer {
    Analyzer::new(AnalyzerConfig::named(name).unwrap_or_else(|| panic!("{name}")))
}

#[test]
fn old_configs_read_as_english_and_write_as_before() {
    let old: AnalyzerConfig = serde_json::from_str(r#"{"stemming":true,"stop_words":true}"#).unwrap();
    assert_eq!(old, AnalyzerConfig::english());
    assert_eq!(
        (old.tokenizer, old.language),
        (TokenizerKind::Standard, Language::English)
    );
    let old: AnalyzerConfig = serde_json::from_str(r#"{"stemming":false,"stop_words":true}"#).unwrap();
    assert_eq!(
        (old.stop_words, old.stemming, old.language),
        (true, false, Language::English)
    );
    assert_eq!(
        serde_json::from_str::<AnalyzerConfig>("{}").unwrap(),
        AnalyzerConfig::STANDARD
    );
    assert_eq!(
        serde_json::to_string(&AnalyzerConfig::english()).unwrap(),
        r#"{"stemming":true,"stop_words":true}"#
    );
    let french = AnalyzerConfig::language(Language::French);
    let json = serde_json::to_string(&french).unwrap();
    assert_eq!(json, r#"{"stemming":true,"stop_words":true,"language":"french"}"#);
    assert_eq!(serde_json::from_str::<AnalyzerConfig>(&json).unwrap(), french);
    let simple = AnalyzerConfig::named("simple").unwrap();
    let json = serde_json::to_string(&simple).unwrap();
    assert_eq!(json, r#"{"stemming":false,"stop_words":false,"tokenizer":"simple"}"#);
    assert_eq!(serde_json::from_str::<AnalyzerConfig>(&json).unwrap(), simple);
    for bad in [
        r#"{"stemming":true,"stemer":true}"#,
        r#"{"language":"klingon"}"#,
        r#"{"tokenizer":"ngram"}"#,
    ] {
        assert!(serde_json::from_str::<AnalyzerConfig>(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_name_round_trips() {
    assert_eq!(ANALYZER_NAMES.len(), 3 + Language::ALL.len());
    let mut seen = Vec::new();
    for name in ANALYZER_NAMES {
        let config = AnalyzerConfig::named(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(config.name(), Some(name), "{config:?}");
        assert!(!seen.contains(&config), "{name}");
        seen.push(config);
    }
    assert_eq!(AnalyzerConfig::named("default"), Some(AnalyzerConfig::STANDARD));
    assert_eq!(AnalyzerConfig::named("English"), None);
    assert_eq!(AnalyzerConfig::named("klingon"), None);
    for (i, l) in Language::ALL.into_iter().enumerate() {
        assert_eq!(l.index(), i);
        assert_eq!(Language::from_name(l.name()), Some(l));
        assert_eq!(serde_json::to_value(l).unwrap(), l.name());
    }
    // Combinations without a name.
    for config in [
        AnalyzerConfig {
            stemming: true,
            ..AnalyzerConfig::STANDARD
        },
        AnalyzerConfig {
            stop_words: true,
            language: Language::German,
            ..AnalyzerConfig::STANDARD
        },
        AnalyzerConfig {
            tokenizer: TokenizerKind::Whitespace,
            ..AnalyzerConfig::english()
        },
        AnalyzerConfig {
            language: Language::French,
            ..AnalyzerConfig::STANDARD
        },
    ] {
        assert_eq!(config.name(), None, "{config:?}");
    }
}

#[test]
fn simple_tokenizer_is_runs_of_letters() {
    let text = "Don't stop-me 42 times, Ça_VA? x2y Ünïcödé中文 e\u{301}";
    assert_eq!(
        analyze_all(&named("simple"), text),
        owned(&[
            ("don", 0, 0, 3),
            ("t", 1, 4, 5),
            ("stop", 2, 6, 10),
            ("me", 3, 11, 13),
            ("times", 4, 17, 22),
            ("ça", 5, 24, 27),
            ("va", 6, 28, 30),
            ("x", 7, 32, 33),
            ("y", 8, 34, 35),
            ("ünïcödé中文", 9, 36, 53),
            ("e", 10, 54, 55),
        ])
    );
    for text in ["", "42 3.14 _-_ !?", " \u{301} 👍"] {
        assert!(analyze_all(&named("simple"), text).is_empty(), "{text:?}");
    }
    // Lowercasing as in the standard analyzer, lengths may change.
    assert_eq!(
        analyze_all(&named("simple"), "xx İx"),
        owned(&[("xx", 0, 0, 2), ("i\u{307}x", 1, 3, 6)])
    );
}

#[test]
fn whitespace_tokenizer_keeps_case_and_punctuation() {
    let text = "Hello, World!  foo-BAR\u{a0}baz\t\n«Ça»  x";
    assert_eq!(
        analyze_all(&named("whitespace"), text),
        owned(&[
            ("Hello,", 0, 0, 6),
            ("World!", 1, 7, 13),
            ("foo-BAR", 2, 15, 22),
            ("baz", 3, 24, 27),
            ("«Ça»", 4, 29, 36),
            ("x", 5, 38, 39),
        ])
    );
    assert_eq!(
        terms(AnalyzerConfig::named("whitespace").unwrap(), "U.S. 1,000 don't"),
        ["U.S.", "1,000", "don't"]
    );
    for text in ["", " \t\n\u{3000}\u{2028}\u{85}"] {
        assert!(analyze_all(&named("whitespace"), text).is_empty(), "{text:?}");
    }
    // Every term borrows the text: nothing is lowercased.
    let text = "ÉTÉ Mixed plain";
    named("whitespace").analyze(text, |t| {
        assert!(text.as_bytes().as_ptr_range().contains(&t.term.as_ptr()), "{t:?}");
    });
}

#[test]
fn character_tokenizers_cut_long_tokens() {
    for (name, text, want) in [
        (
            "simple",
            "ABCDEFG h1ij",
            owned(&[
                ("abc", 0, 0, 3),
                ("def", 1, 3, 6),
                ("g", 2, 6, 7),
                ("h", 3, 8, 9),
                ("ij", 4, 10, 12),
            ]),
        ),
        (
            "whitespace",
            "ééééé a.b.c.d",
            owned(&[
                ("ééé", 0, 0, 6),
                ("éé", 1, 6, 10),
                ("a.b", 2, 11, 14),
                (".c.", 3, 14, 17),
                ("d", 4, 17, 18),
            ]),
        ),
        ("simple", "abc", owned(&[("abc", 0, 0, 3)])),
    ] {
        let config = AnalyzerConfig::named(name).unwrap();
        assert_eq!(
            analyze_all(&Analyzer::with_max_token_chars(config, 3), text),
            want,
            "{name}"
        );
    }
    // At the real limit, as the standard tokenizer cuts.
    let word = "é".repeat(600);
    for name in ["simple", "whitespace"] {
        let got = analyze_all(&named(name), &format!("x {word} y"));
        let spans: Vec<_> = got.iter().map(|t| (t.0.chars().count(), t.1, t.2, t.3)).collect();
        assert_eq!(
            spans,
            [
                (1, 0, 0, 1),
                (255, 1, 2, 512),
                (255, 2, 512, 1022),
                (90, 3, 1022, 1202),
                (1, 4, 1203, 1204)
            ],
            "{name}"
        );
    }
}

#[test]
fn french_analyzer() {
    let got = analyze_all(&named("french"), "Le cheval et les CHEVAUX de la ferme");
    assert_eq!(
        got,
        owned(&[("cheval", 1, 3, 9), ("cheval", 4, 17, 24), ("ferm", 7, 31, 36)])
    );
    assert_eq!(
        terms(AnalyzerConfig::named("french").unwrap(), "la le les"),
        Vec::<String>::new()
    );
}

#[test]
fn german_analyzer() {
    let got = analyze_all(&named("german"), "Der Hund und die Häuser");
    assert_eq!(got, owned(&[("hund", 1, 4, 8), ("haus", 4, 17, 24)]));
    // English stop words are not German ones, and the other way round.
    assert_eq!(terms(AnalyzerConfig::named("german").unwrap(), "the der"), ["the"]);
    assert_eq!(terms(AnalyzerConfig::english(), "the der"), ["der"]);
}

#[test]
fn every_language_removes_its_stop_words_and_stems() {
    for l in Language::ALL {
        let analyzer = Analyzer::new(AnalyzerConfig::language(l));
        let words = stop_words(l);
        let text = words.join(" ");
        // Each word the standard tokenizer keeps whole is removed (a few
        // Arabic ones hold characters it splits at).
        let mut removed = 0;
        for w in words {
            if terms(AnalyzerConfig::STANDARD, w) == [*w] {
                assert!(analyze_all(&analyzer, w).is_empty(), "{l:?} {w}");
                removed += 1;
            }
        }
        assert!(removed * 10 >= words.len() * 9, "{l:?}: {removed} of {}", words.len());
        // Stemming only: the stop words are kept, some of them stemmed or
        // not, with the language's algorithm.
        let stemmer = Stemmer::create(l.algorithm());
        let stem_only = AnalyzerConfig {
            stop_words: false,
            ..AnalyzerConfig::language(l)
        };
        let want: Vec<String> = analyze_all(&Analyzer::default(), &text)
            .into_iter()
            .map(|t| stemmer.stem(&t.0).into_owned())
            .collect();
        assert_eq!(terms(stem_only, &text), want, "{l:?}");
    }
    assert_eq!(
        terms(AnalyzerConfig::named("spanish").unwrap(), "los caballos"),
        ["caball"]
    );
    assert_eq!(terms(AnalyzerConfig::named("russian").unwrap(), "и лошади"), ["лошад"]);
}

#[test]
fn languages_interleaved_on_one_thread_keep_their_stems() {
    let (french, english) = (named("french"), named("english"));
    for _ in 0..3 {
        assert_eq!(terms(french.config(), "chevaux nationales"), ["cheval", "national"]);
        assert_eq!(terms(english.config(), "chevaux nationales"), ["chevaux", "national"]);
    }
    // A French field analysed inside the sink of an English one.
    let mut inner = Vec::new();
    english.analyze("running", |outer| {
        assert_eq!(outer.term, "run");
        french.analyze("chevaux", |t| inner.push(t.term.to_string()));
    });
    assert_eq!(inner, ["cheval"]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn character_tokenizers_find_maximal_runs(
        text in prop_oneof![any::<String>(), mixed_text(), "\\PC{0,60}"],
        max in prop_oneof![1usize..5, Just(MAX_TOKEN_CHARS)],
    ) {
        for (name, token_char) in [
            ("simple", char::is_alphabetic as fn(char) -> bool),
            ("whitespace", |c: char| !c.is_whitespace()),
        ] {
            let analyzer = Analyzer::with_max_token_chars(AnalyzerConfig::named(name).unwrap(), max);
            let tokens = analyze_all(&analyzer, &text);
            // The reference: maximal runs, cut every `max` characters.
            let mut want = Vec::new();
            let mut run: Vec<(usize, char)> = Vec::new();
            for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
                if i < text.len() && token_char(c) {
                    run.push((i, c));
                    continue;
                }
                for piece in run.chunks(max) {
                    let (s, e) = (piece[0].0, piece.last().map(|&(i, c)| i + c.len_utf8()).unwrap());
                    want.push((s, e));
                }
                run.clear();
            }
            let spans: Vec<_> = tokens.iter().map(|t| (t.2 as usize, t.3 as usize)).collect();
            prop_assert_eq!(&spans, &want, "{}", name);
            for (i, (term, position, s, e)) in tokens.iter().enumerate() {
                prop_assert_eq!(*position as usize, i);
                let source = &text[*s as usize..*e as usize];
                let want = if name == "simple" { lower(source) } else { source.to_string() };
                prop_assert_eq!(term, &want);
            }
        }
    }
}
