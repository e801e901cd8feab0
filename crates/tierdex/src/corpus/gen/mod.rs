//! The seeded synthetic corpus generator: the embedded default corpus for
//! the demo, the tests and the benchmarks (`tierdex gen`).
//!
//! The text imitates the statistics that matter to a search engine:
//!
//! * a vocabulary of `vocab_size` distinct lowercase words (English function
//!   words for the top 100 ranks, then syllable-built words that get longer
//!   with rank), drawn with Zipf frequencies `1 / rank^s`;
//! * recurring phrases: each word has a few preferred successors (a
//!   first-order Markov chain mixed with the Zipf draws), and a fixed set of
//!   2–4 word collocations recurs across documents with Zipf popularity, so
//!   phrase queries have matches at many frequencies;
//! * per-document topic words (the title's words and a few more) that
//!   repeat within the document, as real term frequencies do;
//! * log-normal body lengths (median `median_body_tokens`, long tail), a
//!   small fraction of empty bodies; sentences of 5–30 words with a capital,
//!   commas and a full stop; occasional numbers (`1984`, `1,000`),
//!   possessives (`network's`) and abbreviations (`u.s.`).
//!
//! With [`GenOptions::typed`], every document also carries typed fields
//! (`date`, `category`, `tags`, `price`, `popularity`; see [`typed`]) drawn
//! from their own RNG stream, so the text is the same either way.
//!
//! Output is deterministic: document `i` depends only on the options and
//! `i` (its RNG is seeded by `(seed, i)`), and all arithmetic is
//! platform-independent, so the same options give byte-identical corpora on
//! any machine and with any number of threads.

mod sample;
#[cfg(test)]
mod tests;
pub mod typed;
mod vocab;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::Rng;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

use self::sample::{below, exp, ln, normal, rng_for, threshold, unit, zipf_weights, Alias, GenRng, Zipf};
use self::typed::{TypedModel, TYPED_FIELDS};
use super::CorpusError;
use crate::schema::Document;

/// Options of the synthetic corpus. Two generators with equal options
/// produce identical documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenOptions {
    /// Number of documents (`g0` .. `g{docs-1}`).
    pub docs: u64,
    /// Seed of everything random: vocabulary, models and documents.
    pub seed: u64,
    /// Number of distinct words (at least 16).
    pub vocab_size: usize,
    /// Exponent `s` of the Zipf rank-frequency law `1 / rank^s`.
    pub zipf_exponent: f64,
    /// Median body length in tokens (body lengths are log-normal; the mean
    /// is `median * exp(sigma^2 / 2)`).
    pub median_body_tokens: f64,
    /// Sigma of the log-normal body length (larger = longer tail).
    pub body_sigma: f64,
    /// Fraction of documents with an empty body.
    pub empty_body_fraction: f64,
    /// Number of distinct recurring multi-word collocations.
    pub collocations: usize,
    /// Probability that a body position starts a collocation.
    pub collocation_rate: f64,
    /// Probability that a body word is a preferred successor of the
    /// previous word (the Markov part of the word model).
    pub markov_rate: f64,
    /// Probability that a body word is one of the document's topic words.
    pub topic_rate: f64,
    /// Whether documents carry the typed fields `date`, `category`, `tags`,
    /// `price` and `popularity` (see [`typed`]); off by default, so that
    /// corpora generated before typed fields existed stay byte-identical.
    pub typed: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            docs: 200_000,
            seed: 42,
            vocab_size: 250_000,
            zipf_exponent: 1.0,
            median_body_tokens: 300.0,
            body_sigma: 0.75,
            empty_body_fraction: 0.002,
            collocations: 5_000,
            collocation_rate: 0.02,
            markov_rate: 0.15,
            topic_rate: 0.04,
            typed: false,
        }
    }
}

/// Size of the inline word records (words of up to `INLINE - 1` bytes are
/// stored inline).
const INLINE: usize = 16;
/// Maximum tokens in one sentence (longest planned sentence plus a
/// collocation).
const MAX_SENTENCE: usize = 64;
/// Sentence plan codes above the word ids (vocabularies are capped below).
const TOKEN_NUMBER: u32 = u32::MAX - 64;
const TOKEN_ABBREVIATION: u32 = TOKEN_NUMBER + 1;
const PUNCT_COMMA: u8 = 1;
const PUNCT_POSSESSIVE: u8 = 2;
/// Preferred successors per word in the Markov model.
const SUCCESSORS: usize = 4;
/// Cumulative choice thresholds (of 2^32) among the successors: 50%, 25%,
/// 15%, 10%.
const SUCCESSOR_CDF: [u64; SUCCESSORS - 1] = [1 << 31, 3 << 30, 3_650_722_201];
/// Extra topic words per document besides the title's.
const EXTRA_TOPIC_WORDS: usize = 4;
/// Maximum topic words per document.
const MAX_TOPIC: usize = 8 + EXTRA_TOPIC_WORDS;
/// Bodies are capped at this multiple of the median length.
const MAX_BODY_FACTOR: f64 = 64.0;
/// Title length weights for 1..=8 words.
const TITLE_LEN_WEIGHTS: [u32; 8] = [10, 25, 25, 15, 10, 7, 5, 3];
/// Rare abbreviation tokens.
const ABBREVIATIONS: [&str; 8] = ["u.s.", "u.k.", "e.g.", "i.e.", "a.m.", "p.m.", "st.", "etc."];
/// Per-token probabilities of the rare token kinds.
const NUMBER_RATE: f64 = 0.004;
const ABBREVIATION_RATE: f64 = 0.0005;
const POSSESSIVE_RATE: f64 = 0.003;
const COMMA_RATE: f64 = 0.07;

/// RNG stream ids (the vocabulary uses stream 1).
const STREAM_SUCCESSORS: u64 = 2;
const STREAM_COLLOCATIONS: u64 = 3;
const STREAM_DOCS: u64 = 4;

/// A built synthetic corpus model: vocabulary, Zipf tables, transition
/// model and collocations, built once and shared (it is `Send + Sync`) by
/// threads that generate documents by number.
pub struct Generator {
    opts: GenOptions,
    /// Words by rank.
    words: Vec<String>,
    /// Per word: its length then its bytes, when shorter than [`INLINE`]
    /// (else the length byte is `INLINE` and the text is in `words`): one
    /// cache line per word instead of a pointer chase.
    inline: Vec<[u8; INLINE]>,
    /// Number of function words (the top ranks).
    n_function: u32,
    /// Zipf over all ranks.
    zipf: Zipf,
    /// Zipf over the content words (ranks `n_function..`); add `n_function`.
    content: Alias,
    /// `SUCCESSORS` preferred successors per word.
    successors: Vec<u32>,
    /// Collocation words, `colloc_offsets[c]..colloc_offsets[c + 1]`.
    colloc_words: Vec<u32>,
    colloc_offsets: Vec<u32>,
    /// Zipf popularity of the collocations (None when there are none).
    colloc: Option<Alias>,
    title_len: Alias,
    /// Log-normal body length parameters.
    mu: f64,
    sigma: f64,
    max_body: u32,
    t_empty: u64,
    /// Cumulative token kind thresholds (of 2^32).
    t_colloc: u64,
    t_topic: u64,
    t_number: u64,
    t_abbrev: u64,
    t_markov: u64,
    t_comma: u64,
    t_possessive: u64,
    /// The typed-field model, when [`GenOptions::typed`].
    typed: Option<TypedModel>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("opts", &self.opts)
            .field("collocations", &(self.colloc_offsets.len() - 1))
            .finish_non_exhaustive()
    }
}

/// A sanitised probability.
fn prob(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

impl Generator {
    /// Builds the model for `opts` (vocabulary, Zipf tables, successors,
    /// collocations). Out-of-range options are clamped: vocabulary at least
    /// 16 words, probabilities into `0..=1`, non-finite values to defaults.
    pub fn new(opts: GenOptions) -> Generator {
        let defaults = GenOptions::default();
        let mut opts = opts;
        opts.vocab_size = opts.vocab_size.clamp(16, u32::MAX as usize / 2);
        if !opts.zipf_exponent.is_finite() || opts.zipf_exponent < 0.0 {
            opts.zipf_exponent = defaults.zipf_exponent;
        }
        if opts.median_body_tokens.is_nan() {
            opts.median_body_tokens = defaults.median_body_tokens;
        }
        opts.median_body_tokens = opts.median_body_tokens.clamp(1.0, 1e6);
        if !opts.body_sigma.is_finite() || opts.body_sigma < 0.0 {
            opts.body_sigma = defaults.body_sigma;
        }
        opts.body_sigma = opts.body_sigma.min(4.0);
        for p in [
            &mut opts.empty_body_fraction,
            &mut opts.collocation_rate,
            &mut opts.markov_rate,
            &mut opts.topic_rate,
        ] {
            *p = prob(*p);
        }

        let v = opts.vocab_size;
        let nf = (v / 4).min(vocab::FUNCTION_WORDS.len());
        let words = vocab::build(opts.seed, v, nf);
        let inline = words
            .iter()
            .map(|w| {
                let mut rec = [0u8; INLINE];
                if w.len() < INLINE {
                    rec[0] = w.len() as u8;
                    rec[1..=w.len()].copy_from_slice(w.as_bytes());
                } else {
                    rec[0] = INLINE as u8;
                }
                rec
            })
            .collect();
        let s = opts.zipf_exponent;
        let zipf = Zipf::new(v, s);
        let content = Alias::new(&zipf_weights(nf + 1, v - nf, s));
        let nf32 = nf as u32;

        let mut rng = rng_for(opts.seed, STREAM_SUCCESSORS, 0);
        let successors = (0..v * SUCCESSORS).map(|_| content.sample(&mut rng) + nf32).collect();

        let mut rng = rng_for(opts.seed, STREAM_COLLOCATIONS, 0);
        let mut colloc_words = Vec::with_capacity(opts.collocations * 3);
        let mut colloc_offsets = vec![0u32];
        let mut seen = FxHashSet::default();
        let mut attempts = 0usize;
        let max_attempts = opts.collocations.saturating_mul(4).saturating_add(100);
        while colloc_offsets.len() <= opts.collocations && attempts < max_attempts {
            attempts += 1;
            let len = match below(&mut rng, 10) {
                0..=5 => 2,
                6..=8 => 3,
                _ => 4,
            };
            let mut c = [0u32; 4];
            for (k, slot) in c.iter_mut().enumerate().take(len) {
                // Content words at both ends; anything (often a function
                // word) inside: "bank of england".
                *slot = if k == 0 || k == len - 1 {
                    content.sample(&mut rng) + nf32
                } else {
                    zipf.sample(&mut rng)
                };
            }
            let key = c.iter().fold(len as u64, |h, &w| sample::mix64(h ^ u64::from(w)));
            if seen.insert(key) {
                colloc_words.extend_from_slice(&c[..len]);
                colloc_offsets.push(colloc_words.len() as u32);
            }
        }
        let n_colloc = colloc_offsets.len() - 1;
        let colloc = (n_colloc > 0).then(|| Alias::new(&zipf_weights(1, n_colloc, s)));
        let title_len = Alias::new(&TITLE_LEN_WEIGHTS.map(f64::from));

        let mu = ln(opts.median_body_tokens);
        let sigma = opts.body_sigma;
        let max_body = (opts.median_body_tokens * MAX_BODY_FACTOR).min(f64::from(u32::MAX / 2)) as u32;
        let t_colloc = if colloc.is_some() {
            threshold(opts.collocation_rate)
        } else {
            0
        };
        let t_topic = t_colloc + threshold(opts.topic_rate);
        let t_number = t_topic + threshold(NUMBER_RATE);
        let t_abbrev = t_number + threshold(ABBREVIATION_RATE);
        let t_markov = t_abbrev + threshold(opts.markov_rate);
        Generator {
            words,
            inline,
            n_function: nf32,
            zipf,
            content,
            successors,
            colloc_words,
            colloc_offsets,
            colloc,
            title_len,
            mu,
            sigma,
            max_body,
            t_empty: threshold(opts.empty_body_fraction),
            t_colloc,
            t_topic,
            t_number,
            t_abbrev,
            t_markov,
            t_comma: threshold(COMMA_RATE),
            t_possessive: (1u64 << 32) - threshold(POSSESSIVE_RATE),
            typed: opts.typed.then(|| TypedModel::new(opts.seed)),
            opts,
        }
    }

    /// The (sanitised) options this generator was built with.
    pub fn options(&self) -> &GenOptions {
        &self.opts
    }

    /// The vocabulary by rank (most frequent first), for workload
    /// generation. The first (up to) 100 words are English function words.
    pub fn vocabulary(&self) -> &[String] {
        &self.words
    }

    /// Number of function words at the top of [`Generator::vocabulary`]
    /// (100 unless the vocabulary is tiny).
    pub fn function_words(&self) -> usize {
        self.n_function as usize
    }

    /// The recurring collocations (2–4 words), most popular first: phrases
    /// that have matches at many frequencies, for phrase workloads.
    pub fn collocations(&self) -> impl ExactSizeIterator<Item = Vec<&str>> + '_ {
        self.colloc_offsets.windows(2).map(|r| {
            self.colloc_words[r[0] as usize..r[1] as usize]
                .iter()
                .map(|&w| self.word(w))
                .collect()
        })
    }

    /// Document `i` alone, from an RNG seeded by `(seed, i)`: random access,
    /// so callers can generate in parallel. `i` may exceed `docs`.
    pub fn doc(&self, i: u64) -> Document {
        let mut rng = rng_for(self.opts.seed, STREAM_DOCS, i);
        let mut topic = [0u32; MAX_TOPIC];
        let mut n_topic = 0;
        let mut title = Vec::with_capacity(64);
        self.title(&mut rng, &mut title, &mut topic, &mut n_topic);
        for _ in 0..EXTRA_TOPIC_WORDS {
            topic[n_topic] = self.content_word(&mut rng);
            n_topic += 1;
        }
        let n = self.body_len(&mut rng);
        let mut body = Vec::with_capacity(n as usize * 7 + 16);
        self.body(&mut rng, n, &topic[..n_topic], &mut body);
        let mut doc = Document::title_body(format!("g{i}"), ascii_string(title), ascii_string(body));
        if let Some(t) = &self.typed {
            t.set_fields(&t.values(i), &mut doc);
        }
        doc
    }

    /// The `category` values by rank (most frequent first); empty unless
    /// [`GenOptions::typed`].
    pub fn categories(&self) -> &[String] {
        self.typed.as_ref().map_or(&[], |t| t.categories())
    }

    /// The `tags` values by rank (most frequent first); empty unless
    /// [`GenOptions::typed`].
    pub fn tags(&self) -> &[String] {
        self.typed.as_ref().map_or(&[], |t| t.tags())
    }

    /// The typed values of document `i` without its text (tests sample
    /// many documents cheaply); `None` unless [`GenOptions::typed`].
    #[cfg(test)]
    fn typed_values(&self, i: u64) -> Option<typed::TypedValues> {
        self.typed.as_ref().map(|t| t.values(i))
    }

    /// Documents `0..docs` in order.
    pub fn docs(&self) -> impl Iterator<Item = Document> + '_ {
        (0..self.opts.docs).map(move |i| self.doc(i))
    }

    /// The text of word `w`.
    fn word(&self, w: u32) -> &str {
        &self.words[w as usize]
    }

    /// Appends word `w` (from the cache-friendly inline copy when short).
    #[inline]
    fn push_word(&self, out: &mut Vec<u8>, w: u32) {
        let rec = &self.inline[w as usize];
        let len = usize::from(rec[0]);
        if len < INLINE {
            out.extend_from_slice(&rec[1..=len]);
        } else {
            out.extend_from_slice(self.words[w as usize].as_bytes());
        }
    }

    #[inline]
    fn content_word(&self, rng: &mut GenRng) -> u32 {
        self.content.sample(rng) + self.n_function
    }

    fn collocation(&self, c: u32) -> &[u32] {
        &self.colloc_words[self.colloc_offsets[c as usize] as usize..self.colloc_offsets[c as usize + 1] as usize]
    }

    /// A title of 1–8 capitalised words, sometimes built around a
    /// collocation; its content words become topic words.
    fn title(&self, rng: &mut GenRng, out: &mut Vec<u8>, topic: &mut [u32; MAX_TOPIC], n_topic: &mut usize) {
        let n = self.title_len.sample(rng) as usize + 1;
        let mut count = 0;
        let mut push = |out: &mut Vec<u8>, w: u32, count: &mut usize| {
            if *count > 0 {
                out.push(b' ');
            }
            let start = out.len();
            self.push_word(out, w);
            out[start] = out[start].to_ascii_uppercase();
            *count += 1;
            if w >= self.n_function && !topic[..*n_topic].contains(&w) {
                topic[*n_topic] = w;
                *n_topic += 1;
            }
        };
        if n >= 2 && unit(rng) < 0.3 {
            if let Some(colloc) = &self.colloc {
                let c = colloc.sample(rng);
                for &w in self.collocation(c).iter().take(n) {
                    push(out, w, &mut count);
                }
            }
        }
        while count < n {
            let w = self.content_word(rng);
            push(out, w, &mut count);
        }
    }

    /// A body length in tokens: 0 for the empty fraction, else log-normal.
    fn body_len(&self, rng: &mut GenRng) -> u32 {
        if u64::from(rng.next_u32()) < self.t_empty {
            return 0;
        }
        let len = exp(self.mu + self.sigma * normal(rng)).round();
        (len as u32).clamp(1, self.max_body)
    }

    /// Writes a body of about `n` tokens as sentences.
    fn body(&self, rng: &mut GenRng, n: u32, topic: &[u32], out: &mut Vec<u8>) {
        let mut remaining = n;
        while remaining > 0 {
            let mut len = 5 + below(rng, 13) + below(rng, 14);
            if len + 4 > remaining {
                len = remaining;
            }
            let emitted = self.sentence(rng, len, topic, out);
            remaining = remaining.saturating_sub(emitted);
        }
    }

    /// Writes one sentence of at least `len` tokens (a collocation may run
    /// over); returns the number of tokens written.
    ///
    /// Two passes: first the token choices (their table lookups are
    /// independent, so the CPU overlaps their cache misses), then the text.
    fn sentence(&self, rng: &mut GenRng, len: u32, topic: &[u32], out: &mut Vec<u8>) -> u32 {
        let mut plan = [0u32; MAX_SENTENCE];
        let mut punct = [0u8; MAX_SENTENCE];
        let len = (len as usize).min(MAX_SENTENCE - 4);
        let mut n = 0usize;
        let mut prev: Option<u32> = None;
        while n < len {
            let x = rng.next_u64();
            let kind = x & 0xFFFF_FFFF;
            let high = x >> 32;
            let mut word = false;
            if kind < self.t_colloc && len - n >= 2 {
                // `t_colloc > 0` implies collocations exist.
                let c = self.colloc.as_ref().map_or(0, |a| a.sample(rng));
                let words = self.collocation(c);
                plan[n..n + words.len()].copy_from_slice(words);
                n += words.len();
                prev = words.last().copied();
            } else if kind >= self.t_topic && kind < self.t_number {
                plan[n] = TOKEN_NUMBER;
                n += 1;
                prev = None;
            } else if kind >= self.t_number && kind < self.t_abbrev && n > 0 && n + 1 < len {
                plan[n] = TOKEN_ABBREVIATION + below(rng, ABBREVIATIONS.len() as u32);
                n += 1;
                prev = None;
            } else {
                let w = if kind >= self.t_colloc && kind < self.t_topic && !topic.is_empty() {
                    topic[below(rng, topic.len() as u32) as usize]
                } else if let (Some(p), true) = (prev, kind >= self.t_abbrev && kind < self.t_markov) {
                    let y = u64::from(rng.next_u32());
                    let j = SUCCESSOR_CDF.iter().take_while(|&&t| y >= t).count();
                    self.successors[p as usize * SUCCESSORS + j]
                } else {
                    self.zipf.sample(rng)
                };
                plan[n] = w;
                n += 1;
                prev = Some(w);
                word = w >= self.n_function;
            }
            punct[n - 1] = if word && high >= self.t_possessive {
                PUNCT_POSSESSIVE
            } else if n < len && high < self.t_comma {
                PUNCT_COMMA
            } else {
                0
            };
        }
        if !out.is_empty() {
            out.push(b' ');
        }
        let start = out.len();
        for (k, (&t, &p)) in plan[..n].iter().zip(&punct[..n]).enumerate() {
            if k > 0 {
                out.push(b' ');
            }
            if t < TOKEN_NUMBER {
                self.push_word(out, t);
            } else if t == TOKEN_NUMBER {
                push_number(rng, out);
            } else {
                out.extend_from_slice(ABBREVIATIONS[(t - TOKEN_ABBREVIATION) as usize].as_bytes());
            }
            match p {
                PUNCT_POSSESSIVE => out.extend_from_slice(b"'s"),
                PUNCT_COMMA => out.push(b','),
                _ => {}
            }
        }
        if let Some(first) = out.get_mut(start) {
            first.make_ascii_uppercase();
        }
        out.push(b'.');
        n as u32
    }

    /// Appends documents `range` as JSON lines to `out`.
    fn write_json_lines(&self, range: std::ops::Range<u64>, out: &mut Vec<u8>) {
        for i in range {
            push_json_line(out, &self.doc(i));
        }
    }
}

/// A year, a small integer, a number with thousands separators or a
/// decimal.
fn push_number(rng: &mut GenRng, out: &mut Vec<u8>) {
    let r = below(rng, 100);
    // Writing to a Vec cannot fail.
    let _ = match r {
        0..=44 => write!(out, "{}", 1800 + below(rng, 225)),
        45..=74 => write!(out, "{}", 1 + below(rng, 100)),
        75..=91 => {
            let thousands = 1 + below(rng, 99);
            let rest = if below(rng, 3) == 0 { 0 } else { below(rng, 1000) };
            write!(out, "{thousands},{rest:03}")
        }
        _ => write!(out, "{}.{}", below(rng, 100), below(rng, 10)),
    };
}

/// The generator only writes ASCII; never panics even if that changed.
fn ascii_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends `doc` as one JSON line `{"id":..,"title":..,"body":..}\n`,
/// followed by its typed fields (in [`TYPED_FIELDS`] order) when it has
/// them.
fn push_json_line(out: &mut Vec<u8>, doc: &Document) {
    out.extend_from_slice(b"{\"id\":");
    push_json_str(out, &doc.id);
    out.extend_from_slice(b",\"title\":");
    push_json_str(out, doc.title());
    out.extend_from_slice(b",\"body\":");
    push_json_str(out, doc.body());
    for name in TYPED_FIELDS {
        if let Some(v) = doc.fields.get(name) {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            // Writing to a Vec cannot fail; numbers in serde_json's
            // shortest round-trip form.
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
    out.extend_from_slice(b"}\n");
}

/// Appends `s` as a JSON string literal.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    // Fast path (always taken for generated text); a non-short-circuiting
    // fold vectorises.
    if !bytes
        .iter()
        .fold(false, |acc, &b| acc | (b < 0x20) | (b == b'"') | (b == b'\\'))
    {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Documents per parallel chunk of [`write_corpus`].
const CHUNK_DOCS: u64 = 512;
/// zstd level of [`write_corpus`] (level 2 compresses generated text
/// within 2% of level 3, ~30% faster).
const ZSTD_LEVEL: i32 = 2;
/// gzip level of [`write_corpus`].
const GZIP_LEVEL: u32 = 6;

/// Output compression of [`write_corpus`], by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutCompression {
    None,
    Zstd,
    Gzip,
}

impl OutCompression {
    fn of(path: &Path) -> OutCompression {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("zst") || e.eq_ignore_ascii_case("zstd") => OutCompression::Zstd,
            Some(e) if e.eq_ignore_ascii_case("gz") => OutCompression::Gzip,
            _ => OutCompression::None,
        }
    }
}

/// Compresses chunks into self-contained zstd frames or gzip members.
/// Concatenated frames (members) form one valid stream, so chunks are
/// compressed in parallel by the generating threads.
enum ChunkCompressor {
    None,
    Zstd(Box<zstd::bulk::Compressor<'static>>),
    Gzip,
}

impl ChunkCompressor {
    fn new(c: OutCompression) -> io::Result<ChunkCompressor> {
        Ok(match c {
            OutCompression::None => ChunkCompressor::None,
            OutCompression::Zstd => {
                let mut z = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
                z.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
                ChunkCompressor::Zstd(Box::new(z))
            }
            OutCompression::Gzip => ChunkCompressor::Gzip,
        })
    }

    fn compress(&mut self, chunk: Vec<u8>) -> io::Result<Vec<u8>> {
        match self {
            ChunkCompressor::None => Ok(chunk),
            ChunkCompressor::Zstd(z) => z.compress(&chunk),
            ChunkCompressor::Gzip => {
                let out = Vec::with_capacity(chunk.len() / 3);
                let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(GZIP_LEVEL));
                enc.write_all(&chunk)?;
                enc.finish()
            }
        }
    }
}

/// Writes the corpus as JSON lines (`{"id","title","body"}`, plus the
/// typed fields with [`GenOptions::typed`]),
/// zstd-compressed (with checksums) when `out` ends in `.zst`, gzip when
/// `.gz`. Generates and compresses in parallel chunks on all cores and
/// writes them in order, so the output does not depend on the thread count
/// (compressed output is a sequence of independent frames/members, which
/// every zstd/gzip decoder reads as one stream); calls `progress(docs_done)`
/// after each chunk. The file appears under its name only when complete.
/// Returns the bytes written (the on-disk size).
pub fn write_corpus(opts: &GenOptions, out: &Path, progress: &(dyn Fn(u64) + Sync)) -> Result<u64, CorpusError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    write_corpus_with_threads(opts, out, progress, threads)
}

/// [`write_corpus`] with an explicit number of generating threads (the
/// output is the same for any number).
pub fn write_corpus_with_threads(
    opts: &GenOptions,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
    threads: usize,
) -> Result<u64, CorpusError> {
    let gen = Generator::new(opts.clone());
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = out.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let err = |source| CorpusError::Write {
        path: out.to_path_buf(),
        source,
    };
    let file = File::create(&tmp).map_err(err)?;
    let result = write_to(&gen, OutCompression::of(out), file, progress, threads)
        .and_then(|bytes| std::fs::rename(&tmp, out).map(|()| bytes))
        .map_err(err);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_to(
    gen: &Generator,
    compression: OutCompression,
    file: File,
    progress: &(dyn Fn(u64) + Sync),
    threads: usize,
) -> io::Result<u64> {
    let mut file = BufWriter::with_capacity(1 << 20, file);
    let mut written = 0u64;
    let docs = gen.opts.docs;
    let n_chunks = docs.div_ceil(CHUNK_DOCS);
    if n_chunks == 0 && compression != OutCompression::None {
        // An empty but valid compressed stream.
        let empty = ChunkCompressor::new(compression)?.compress(Vec::new())?;
        file.write_all(&empty)?;
        written += empty.len() as u64;
    }
    let threads = threads.clamp(1, n_chunks.clamp(1, 256) as usize);
    std::thread::scope(|scope| -> io::Result<()> {
        // Worker `w` generates chunks w, w + threads, ...; the writer takes
        // them round-robin, so the order is fixed and memory bounded.
        let mut receivers = Vec::with_capacity(threads);
        for w in 0..threads {
            let (tx, rx) = crossbeam_channel::bounded::<io::Result<Vec<u8>>>(2);
            receivers.push(rx);
            scope.spawn(move || {
                let mut compressor = match ChunkCompressor::new(compression) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let mut c = w as u64;
                while c < n_chunks {
                    let range = c * CHUNK_DOCS..((c + 1) * CHUNK_DOCS).min(docs);
                    let mut buf = Vec::with_capacity((range.end - range.start) as usize * 3000);
                    gen.write_json_lines(range, &mut buf);
                    if tx.send(compressor.compress(buf)).is_err() {
                        return; // the writer stopped (an I/O error)
                    }
                    c += threads as u64;
                }
            });
        }
        for c in 0..n_chunks {
            let Ok(chunk) = receivers[(c % threads as u64) as usize].recv() else {
                // A worker panicked; the scope re-raises its panic.
                return Ok(());
            };
            let chunk = chunk?;
            file.write_all(&chunk)?;
            written += chunk.len() as u64;
            progress(((c + 1) * CHUNK_DOCS).min(docs));
        }
        Ok(())
    })?;
    file.flush()?;
    Ok(written)
}
