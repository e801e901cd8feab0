//! Seeded random corpora, index options and queries for the oracle tests.
//!
//! Everything derives from a `u64` seed through a small SplitMix64 generator,
//! so a failing case is reproduced from the seed printed with it.
//!
//! Corpora are built to stress an inverted index: small Zipf-skewed
//! vocabularies (terms collide), recurring 2-3-word sequences (phrases match),
//! runs of a repeated word (`x x x`), empty fields, a few huge documents
//! (thousands of tokens: long position lists, large frequencies), sizes around
//! the 128-document block boundaries with a term in every document, and
//! sprinkled capitals, punctuation, stop words, stemmable words and tokens
//! whose UAX#29 segmentation is special. The oracle analyses with the same
//! analyzer as the engine, so none of this depends on the tokenizer in use.

use tierdex::analysis::AnalyzerConfig;
use tierdex::indexing::IndexOptions;
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::search::Mode;
use tierdex::{Document, Field};

/// SplitMix64: tiny, fast, good enough to drive test generators.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        assert!(lo <= hi);
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A uniformly chosen element.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }

    /// An index chosen with the given relative weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = (self.next_u64() % u64::from(total)) as u32;
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        unreachable!()
    }
}

/// Derives an independent seed from `seed` and `n`.
pub fn mix(seed: u64, n: u64) -> u64 {
    Rng::new(seed ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// Stop words, stemmable words and tokens with special UAX#29 segmentation,
/// mixed into documents and queries. (No `and`/`or`/`not`: the query string
/// form must not read them as operators.)
pub const EXTRA_WORDS: &[&str] = &[
    "the",
    "a",
    "of",
    "to",
    "in",
    "is",
    "running",
    "runs",
    "run",
    "cats",
    "cat",
    "connected",
    "connection",
    "connecting",
    "network's",
    "u.s",
    "1,000",
    "e-mail",
    "C++",
    "foo_bar",
    "naïve",
    "Straße",
];

/// Tokens made of punctuation only (no token with a UAX#29 tokenizer).
pub const PUNCT_ONLY: &[&str] = &["-", "--", "!", "...", "&", "—"];

/// Term used by block-boundary corpora in every document.
pub const UNIVERSAL: &str = "every";

/// What the query generator knows about a corpus.
#[derive(Debug, Clone)]
pub struct Lexicon {
    /// The corpus's own words, most frequent first.
    pub vocab: Vec<String>,
    /// Cumulative Zipf weights over `vocab`.
    cdf: Vec<f64>,
    /// Recurring word sequences inserted into documents.
    pub phrases: Vec<Vec<String>>,
    /// A term present in every document, if any.
    pub universal: Option<String>,
    /// The corpus's field names, by field id.
    pub fields: Vec<String>,
}

impl Lexicon {
    fn new(rng: &mut Rng, vocab_size: usize) -> Self {
        let vocab: Vec<String> = (0..vocab_size).map(|i| format!("w{i}")).collect();
        let s = 0.7 + rng.unit() * 0.8;
        let mut acc = 0.0;
        let cdf = (0..vocab_size)
            .map(|i| {
                acc += 1.0 / ((i + 1) as f64).powf(s);
                acc
            })
            .collect();
        let mut lex = Lexicon {
            vocab,
            cdf,
            phrases: Vec::new(),
            universal: None,
            fields: vec!["title".into(), "body".into()],
        };
        for _ in 0..rng.range(2, 6) {
            let len = rng.range(2, 3);
            let phrase = (0..len).map(|_| lex.word(rng).to_string()).collect();
            lex.phrases.push(phrase);
        }
        lex
    }

    /// A Zipf-distributed vocabulary word.
    pub fn word(&self, rng: &mut Rng) -> &str {
        let x = rng.unit() * self.cdf.last().unwrap();
        let i = self.cdf.partition_point(|&c| c <= x).min(self.vocab.len() - 1);
        &self.vocab[i]
    }

    /// A uniformly chosen field.
    pub fn pick_field(&self, rng: &mut Rng) -> Field {
        Field::from_id(rng.range(0, self.fields.len() - 1) as u8)
    }

    /// A uniformly chosen vocabulary word (reaches the rare ones).
    pub fn any_word(&self, rng: &mut Rng) -> &str {
        &self.vocab[rng.range(0, self.vocab.len() - 1)]
    }
}

/// A generated corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The documents, numbered by position.
    pub docs: Vec<Document>,
    /// Words for queries.
    pub lexicon: Lexicon,
    /// One line saying what kind of corpus this is.
    pub description: String,
}

/// The corpus of case `case` with seed `seed`. The shape cycles with `case`
/// so every budget covers all shapes: block boundaries with a term in every
/// document, huge documents, tiny corpora (the empty one first), and general
/// random corpora.
pub fn corpus(seed: u64, case: u64) -> Corpus {
    let mut rng = Rng::new(seed);
    let vocab_size = rng.range(5, 40);
    let mut lex = Lexicon::new(&mut rng, vocab_size);
    let (n, huge, universal, shape) = match case % 8 {
        0 => {
            let n = *rng.pick(&[127, 128, 129, 255, 256, 257, 300]);
            (n, usize::from(rng.chance(0.3)), true, "block-boundary")
        }
        1 => (rng.range(20, 200), rng.range(1, 3), rng.chance(0.5), "huge-docs"),
        2 => {
            let n = if case == 2 { 0 } else { rng.range(0, 5) };
            (n, 0, false, "tiny")
        }
        _ => {
            let n = if rng.chance(0.3) {
                rng.range(0, 60)
            } else {
                rng.range(60, 300)
            };
            (n, usize::from(rng.chance(0.1)), rng.chance(0.15), "random")
        }
    };
    if universal {
        lex.universal = Some(UNIVERSAL.to_string());
    }
    let universal_title = universal && rng.chance(0.5);
    let huge_at: Vec<usize> = (0..huge.min(n)).map(|_| rng.range(0, n - 1)).collect();
    let mut docs = Vec::with_capacity(n);
    for i in 0..n {
        let title_len = if rng.chance(0.15) { 0 } else { rng.range(1, 8) };
        let body_len = if huge_at.contains(&i) {
            rng.range(2000, 6000)
        } else if rng.chance(0.08) {
            0
        } else if rng.chance(0.1) {
            rng.range(50, 200)
        } else {
            rng.range(1, 50)
        };
        let mut title = field_text(&mut rng, &lex, title_len);
        let mut body = field_text(&mut rng, &lex, body_len);
        if universal {
            insert_word(&mut rng, &mut body, UNIVERSAL);
            if universal_title {
                insert_word(&mut rng, &mut title, UNIVERSAL);
            }
        }
        if rng.chance(0.03) {
            title = " \t ".into();
        }
        docs.push(Document::title_body(format!("d{i}"), title, body));
    }
    let description = format!(
        "{shape} corpus: {n} docs, {vocab_size}-word vocabulary, {} huge docs, every-doc term: {universal}",
        huge_at.len()
    );
    Corpus {
        docs,
        lexicon: lex,
        description,
    }
}

/// Field names a multi-field corpus picks from: plain words, and the
/// punctuation a field name may hold.
const FIELD_NAMES: &[&str] = &[
    "name",
    "description",
    "notes",
    "a",
    "Title2",
    "tags_text",
    "user.name",
    "x-1",
    "über",
    "summary",
    "author@host",
    "b_2.c",
];

/// A corpus of 1 to 6 text fields with random names (case `case`, seed
/// `seed`), and the default fields its index searches: a random non-empty
/// subset. Field texts vary in length by field (one short, like a title;
/// one sometimes huge), and any field may be empty or absent.
pub fn corpus_fields(seed: u64, case: u64) -> (Corpus, Vec<Field>) {
    let mut rng = Rng::new(seed);
    let n_fields = 1 + (case % 6) as usize;
    let mut names: Vec<String> = Vec::new();
    while names.len() < n_fields {
        let name = rng.pick(FIELD_NAMES).to_string();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let vocab_size = rng.range(5, 40);
    let mut lex = Lexicon::new(&mut rng, vocab_size);
    lex.fields = names.clone();
    let n = if rng.chance(0.2) {
        rng.range(1, 20)
    } else {
        rng.range(20, 260)
    };
    let universal = rng.chance(0.3);
    if universal {
        lex.universal = Some(UNIVERSAL.to_string());
    }
    let max_len: Vec<usize> = (0..n_fields).map(|_| *rng.pick(&[6, 40, 200])).collect();
    let mut docs = Vec::with_capacity(n);
    for i in 0..n {
        let mut doc = Document::new(format!("d{i}"));
        for (f, name) in names.iter().enumerate() {
            if rng.chance(0.1) {
                continue;
            }
            let len = if rng.chance(0.05) { 0 } else { rng.range(1, max_len[f]) };
            let mut text = field_text(&mut rng, &lex, len);
            if universal && f == 0 {
                insert_word(&mut rng, &mut text, UNIVERSAL);
            }
            doc = doc.with_text(name.clone(), text);
        }
        docs.push(doc);
    }
    let mut default_fields: Vec<Field> = (0..n_fields as u8)
        .map(Field::from_id)
        .filter(|_| rng.chance(0.6))
        .collect();
    if default_fields.is_empty() {
        default_fields.push(lex.pick_field(&mut rng));
    }
    let description = format!(
        "{n_fields}-field corpus {names:?} (searched by default: {default_fields:?}): {n} docs, \
         {vocab_size}-word vocabulary, every-doc term in the first field: {universal}"
    );
    let corpus = Corpus {
        docs,
        lexicon: lex,
        description,
    };
    (corpus, default_fields)
}

/// The schema of a multi-field corpus: its fields, each with phrase filters
/// or not, `default_fields` searched by default.
pub fn schema_of(seed: u64, names: &[String], default_fields: &[Field]) -> tierdex::schema::Schema {
    let mut rng = Rng::new(mix(seed, 0x5c4e));
    let fields = names
        .iter()
        .map(|n| {
            tierdex::schema::FieldEntry::text(
                n.clone(),
                tierdex::schema::TextOptions {
                    phrase_filters: rng.chance(0.6),
                    ..Default::default()
                },
            )
        })
        .collect();
    let mut schema = tierdex::schema::Schema::new(fields).expect("valid schema");
    let defaults: Vec<&str> = default_fields.iter().map(|f| names[f.index()].as_str()).collect();
    schema.set_default_fields(&defaults).expect("known fields");
    schema
}

/// Text of about `len` words.
fn field_text(rng: &mut Rng, lex: &Lexicon, len: usize) -> String {
    let mut words: Vec<String> = Vec::with_capacity(len + 3);
    while words.len() < len {
        match rng.weighted(&[76, 10, 4, 10]) {
            0 => words.push(lex.word(rng).to_string()),
            1 => words.extend(rng.pick(&lex.phrases).iter().cloned()),
            2 => {
                let w = lex.word(rng).to_string();
                for _ in 0..rng.range(2, 4) {
                    words.push(w.clone());
                }
            }
            _ => words.push(rng.pick(EXTRA_WORDS).to_string()),
        }
    }
    let mut text = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            text.push_str(match rng.weighted(&[95, 3, 2]) {
                0 => " ",
                1 => "  ",
                _ => "\n",
            });
        }
        if rng.chance(0.02) {
            text.push_str(rng.pick::<&str>(PUNCT_ONLY));
            text.push(' ');
        }
        text.push_str(&decorate(rng, w));
    }
    text
}

/// Sometimes capitalises the first letter or appends punctuation.
fn decorate(rng: &mut Rng, word: &str) -> String {
    let mut out = if rng.chance(0.08) {
        capitalise(word)
    } else {
        word.to_string()
    };
    if rng.chance(0.06) {
        out.push_str(rng.pick::<&str>(&[",", ".", "!", ";", ":", "?"]));
    }
    out
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Inserts `word` between two words of `text` (or at either end).
fn insert_word(rng: &mut Rng, text: &mut String, word: &str) {
    let spaces: Vec<usize> = text.match_indices(' ').map(|(i, _)| i).collect();
    if spaces.is_empty() || rng.chance(0.2) {
        if text.trim().is_empty() {
            *text = word.to_string();
        } else {
            text.push(' ');
            text.push_str(word);
        }
    } else {
        let at = *rng.pick(&spaces);
        text.insert_str(at, &format!(" {word}"));
    }
}

/// Index options for corpus `seed`: small segments (multi-segment search),
/// merged or not, one or two threads, analyzer options on or off.
pub fn index_options(seed: u64) -> IndexOptions {
    let mut rng = Rng::new(mix(seed, 0x0b7e));
    let analyzer = if rng.chance(0.5) {
        AnalyzerConfig::default()
    } else {
        AnalyzerConfig {
            stemming: rng.chance(0.5),
            stop_words: rng.chance(0.6),
            ..Default::default()
        }
    };
    IndexOptions {
        analyzer,
        segment_docs: *rng.pick(&[7, 50, 1000]),
        threads: rng.range(1, 2),
        merge: rng.chance(0.4),
        layout: if rng.chance(0.5) {
            tierdex::layout::Layout::Grouped
        } else {
            tierdex::layout::Layout::Split
        },
        codec: if rng.chance(0.5) {
            tierdex::layout::Codec::Compressed
        } else {
            tierdex::layout::Codec::Direct
        },
        bloom: bloom_options(seed),
        ..IndexOptions::default()
    }
}

/// Phrase filters of a random corpus (their own stream, so the other
/// options stay what they were before filters existed): off for one corpus
/// in four; otherwise the defaults, or tiny filters with many false
/// positives, or large ones, or filters on the rarer terms only.
pub fn bloom_options(seed: u64) -> Option<tierdex::bloom::BloomParams> {
    let mut rng = Rng::new(mix(seed, 0xb100));
    if rng.chance(0.25) {
        return None;
    }
    Some(*rng.pick(&[
        tierdex::bloom::BloomParams::default(),
        tierdex::bloom::BloomParams {
            expected: 1,
            fpr: 0.3,
            max_doc_share: 1.0,
            ..Default::default()
        },
        tierdex::bloom::BloomParams {
            expected: 12,
            fpr: 0.0001,
            max_doc_share: 1.0,
            ..Default::default()
        },
        // Filters for the rarer terms only, so segments and merges hold
        // terms with and without them.
        tierdex::bloom::BloomParams {
            max_doc_share: 0.2,
            min_doc_ceiling: 2,
            ..Default::default()
        },
    ]))
}

/// One random query case.
#[derive(Debug, Clone)]
pub struct QueryCase {
    /// The query.
    pub query: Query,
    /// What to ask for.
    pub mode: Mode,
    /// How many hits.
    pub k: usize,
}

/// The values of k every budget exercises.
pub const KS: [usize; 4] = [1, 3, 10, 1000];

/// A random query case from `seed` over `lex`.
pub fn query_case(seed: u64, lex: &Lexicon) -> QueryCase {
    let mut rng = Rng::new(seed);
    let query = query(&mut rng, lex);
    let mode = *rng.pick(&[Mode::TopK, Mode::TopKAndCount, Mode::Count]);
    let k = *rng.pick(&KS);
    QueryCase { query, mode, k }
}

/// A random query: single terms, disjunctions, conjunctions, mixed
/// required/optional, exclusions, phrases, field-qualified leaves, nested
/// groups up to depth 3, and a few degenerate forms.
pub fn query(rng: &mut Rng, lex: &Lexicon) -> Query {
    let positives = |rng: &mut Rng, occur: Occur, n: usize| -> Vec<Clause> {
        (0..n)
            .map(|_| Clause {
                occur,
                query: leaf(rng, lex),
            })
            .collect()
    };
    match rng.weighted(&[10, 15, 12, 12, 12, 12, 7, 17, 3]) {
        0 => term(rng, lex, None),
        1 => {
            let n = rng.range(2, 5);
            Query::Boolean(positives(rng, Occur::Should, n))
        }
        2 => {
            let n = rng.range(2, 4);
            Query::Boolean(positives(rng, Occur::Must, n))
        }
        3 => {
            let (m, s) = (rng.range(1, 2), rng.range(1, 3));
            let mut clauses = positives(rng, Occur::Must, m);
            clauses.extend(positives(rng, Occur::Should, s));
            shuffle(rng, &mut clauses);
            Query::Boolean(clauses)
        }
        4 => {
            let occur = *rng.pick(&[Occur::Should, Occur::Must]);
            let (p, x) = (rng.range(1, 3), rng.range(1, 2));
            let mut clauses = positives(rng, occur, p);
            clauses.extend(positives(rng, Occur::MustNot, x));
            shuffle(rng, &mut clauses);
            Query::Boolean(clauses)
        }
        5 => phrase(rng, lex, None),
        6 => {
            let field = Some(lex.pick_field(rng));
            if rng.chance(0.5) {
                term(rng, lex, field)
            } else {
                phrase(rng, lex, field)
            }
        }
        7 => nested(rng, lex, 1),
        _ => match rng.range(0, 3) {
            0 => Query::Boolean(Vec::new()),
            1 => {
                let n = rng.range(1, 2);
                Query::Boolean(positives(rng, Occur::MustNot, n))
            }
            2 => Query::Boolean(vec![Clause {
                occur: *rng.pick(&[Occur::Should, Occur::Must]),
                query: Query::Term {
                    field: None,
                    text: rng.pick(PUNCT_ONLY).to_string(),
                },
            }]),
            _ => Query::Boolean(vec![Clause {
                occur: *rng.pick(&[Occur::Should, Occur::Must]),
                query: leaf(rng, lex),
            }]),
        },
    }
}

/// A boolean group at `depth` (1 = top level) whose clauses may be groups
/// themselves, down to depth 3.
fn nested(rng: &mut Rng, lex: &Lexicon, depth: usize) -> Query {
    let n = rng.range(1, 4);
    let clauses = (0..n)
        .map(|_| {
            let occur = match rng.weighted(&[50, 30, 20]) {
                0 => Occur::Should,
                1 => Occur::Must,
                _ => Occur::MustNot,
            };
            let query = if depth < 3 && rng.chance(0.35) {
                nested(rng, lex, depth + 1)
            } else {
                leaf(rng, lex)
            };
            Clause { occur, query }
        })
        .collect();
    Query::Boolean(clauses)
}

/// A term (mostly) or phrase, mostly unqualified.
fn leaf(rng: &mut Rng, lex: &Lexicon) -> Query {
    let field = if rng.chance(0.2) {
        Some(lex.pick_field(rng))
    } else {
        None
    };
    if rng.chance(0.75) {
        term(rng, lex, field)
    } else {
        phrase(rng, lex, field)
    }
}

/// Text of one query term.
fn term_text(rng: &mut Rng, lex: &Lexicon) -> String {
    let text = match rng.weighted(&[55, 20, 8, 5, 4, 3, 5]) {
        0 => lex.word(rng).to_string(),
        1 => lex.any_word(rng).to_string(),
        2 => rng.pick(EXTRA_WORDS).to_string(),
        3 => format!("zz{}", rng.range(0, 9)),
        4 => lex.universal.clone().unwrap_or_else(|| lex.word(rng).to_string()),
        5 => rng.pick(PUNCT_ONLY).to_string(),
        _ => {
            let (a, b) = (lex.word(rng).to_string(), lex.any_word(rng).to_string());
            let sep = *rng.pick(&["-", "/", " "]);
            format!("{a}{sep}{b}")
        }
    };
    if rng.chance(0.1) {
        capitalise(&text)
    } else {
        text
    }
}

fn term(rng: &mut Rng, lex: &Lexicon, field: Option<Field>) -> Query {
    Query::Term {
        field,
        text: term_text(rng, lex),
    }
}

/// A phrase of 2-4 words: a recurring sequence (or part of one, or one
/// extended), random words, a repeated word, with a stop word inside, or with
/// a word absent from the corpus.
fn phrase(rng: &mut Rng, lex: &Lexicon, field: Option<Field>) -> Query {
    let mut words: Vec<String> = match rng.weighted(&[45, 25, 12, 10, 8]) {
        0 => {
            let mut p = rng.pick(&lex.phrases).clone();
            if rng.chance(0.2) && p.len() > 2 {
                p.remove(if rng.chance(0.5) { 0 } else { p.len() - 1 });
            } else if rng.chance(0.2) {
                p.push(lex.word(rng).to_string());
            }
            p
        }
        1 => (0..rng.range(2, 4)).map(|_| lex.word(rng).to_string()).collect(),
        2 => {
            let w = lex.word(rng).to_string();
            vec![w; rng.range(2, 3)]
        }
        3 => {
            let (a, b) = (lex.word(rng).to_string(), lex.word(rng).to_string());
            let stop = rng.pick(&["the", "a", "of"]).to_string();
            vec![a, stop, b]
        }
        _ => {
            let mut p = rng.pick(&lex.phrases).clone();
            let at = rng.range(0, p.len());
            p.insert(at, format!("zz{}", rng.range(0, 9)));
            p
        }
    };
    if rng.chance(0.1) {
        words[0] = capitalise(&words[0]);
    }
    Query::Phrase {
        field,
        text: words.join(" "),
    }
}

fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.range(0, i));
    }
}

/// The query-language form of `query` over fields named `fields` (DESIGN
/// §2 syntax), or `None` when it has no faithful one here (texts with
/// syntax characters, empty groups).
pub fn to_query_string(query: &Query, fields: &[String]) -> Option<String> {
    let leaf_text = |field: Option<Field>, body: String| -> String {
        match field {
            Some(f) => format!("{}:{body}", fields[f.index()]),
            None => body,
        }
    };
    let clause = |c: &Clause| -> Option<String> {
        let prefix = match c.occur {
            Occur::Should => "",
            Occur::Must => "+",
            Occur::MustNot => "-",
            Occur::Filter => return None,
        };
        let inner = match &c.query {
            Query::Boolean(_) => format!("({})", to_query_string(&c.query, fields)?),
            q => to_query_string(q, fields)?,
        };
        Some(format!("{prefix}{inner}"))
    };
    match query {
        Query::Term { field, text } => {
            let plain = !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ',' | '\''))
                && !matches!(text.as_str(), "AND" | "OR" | "NOT");
            plain.then(|| leaf_text(*field, text.clone()))
        }
        Query::Phrase { field, text } => {
            let plain = !text.contains(['"', '\\']);
            plain.then(|| leaf_text(*field, format!("\"{text}\"")))
        }
        Query::Boolean(clauses) if clauses.is_empty() => None,
        Query::Boolean(clauses) => Some(clauses.iter().map(clause).collect::<Option<Vec<_>>>()?.join(" ")),
        // Typed queries are checked by tests/typed_oracle.rs.
        _ => None,
    }
}
