//! Text analysis: documents and queries become streams of terms with
//! positions and byte offsets.
//!
//! An analyzer ([`AnalyzerConfig`]) is a tokenizer, lowercasing (except
//! with the whitespace tokenizer), and optionally a language's stop words
//! and Snowball stemmer. The named analyzers of mappings
//! ([`AnalyzerConfig::named`], [`ANALYZER_NAMES`]) are Elasticsearch's:
//!
//! * `standard`: the standard tokenizer and lowercasing (Lucene's
//!   `StandardAnalyzer` without stop words, the default);
//! * `simple`: the letter tokenizer and lowercasing;
//! * `whitespace`: the whitespace tokenizer, terms kept as written;
//! * `english`, `french`, `german`, .. (every [`Language`]): the standard
//!   tokenizer, lowercasing, the language's stop words and its Snowball
//!   stemmer.
//!
//! The pipeline:
//!
//! 1. **Tokenise**, by [`TokenizerKind`]:
//!    * *standard* (Lucene's `StandardTokenizer`): on Unicode UAX#29 word
//!      boundaries; a word segment is a token when it contains an
//!      alphanumeric character (`network's`, `u.s`, `1,000`, `foo_bar`,
//!      `a:b` are one token each; every CJK ideograph is a token of its
//!      own). Segments longer than [`MAX_TOKEN_CHARS`] characters are cut
//!      into pieces of at most that many characters, and segmentation
//!      restarts after each piece (as Lucene's scanner does). ASCII text
//!      takes a byte-level fast path; stretches with non-ASCII characters go
//!      through `unicode-segmentation` (see `tokenizer.rs` for why both
//!      agree).
//!    * *simple* (Lucene's `LetterTokenizer`): maximal runs of letters
//!      (`char::is_alphabetic`), so `don't` is `don` and `t` and digits are
//!      dropped;
//!    * *whitespace* (Lucene's `WhitespaceTokenizer`): maximal runs of
//!      characters other than Unicode white space (`char::is_whitespace`),
//!      punctuation included.
//!
//!    The last two cut runs longer than [`MAX_TOKEN_CHARS`] characters into
//!    pieces of that many, as Lucene's `CharTokenizer` does.
//! 2. **Lowercase** every character (`char::to_lowercase`, so a term may be
//!    longer or shorter in bytes than its source; there is no context-
//!    sensitive final-sigma rule, as in Lucene), except with the whitespace
//!    tokenizer.
//! 3. **Stop words** of the [`Language`] are removed when enabled (English:
//!    Lucene's classic [`ENGLISH_STOP_WORDS`]; the others: the Snowball
//!    lists, see [`stop_words`]); they still take a position, so phrases
//!    keep their gaps.
//! 4. **Stemming** with the language's Snowball algorithm when enabled.
//!
//! Positions count tokens from 0 in each [`Analyzer::analyze`] call; offsets
//! are byte offsets into the original text.

mod char_tokenizer;
mod language;
mod stem_cache;
mod stopwords;
mod tokenizer;

#[cfg(test)]
mod tests;

pub use language::Language;
pub use stopwords::{is_stop_word, stop_words, ENGLISH_STOP_WORDS};

use rust_stemmers::Stemmer;
use serde::{Deserialize, Serialize};
use tokenizer::Case;

/// Longest token, in characters (Lucene's default `maxTokenLength`); longer
/// tokens are cut into several.
pub const MAX_TOKEN_CHARS: usize = 255;

/// The analyzer names mappings accept ([`AnalyzerConfig::named`]).
pub const ANALYZER_NAMES: [&str; 21] = [
    "standard",
    "simple",
    "whitespace",
    "arabic",
    "danish",
    "dutch",
    "english",
    "finnish",
    "french",
    "german",
    "greek",
    "hungarian",
    "italian",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
];

/// How text is cut into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    /// Unicode UAX#29 word boundaries (Lucene's `StandardTokenizer`).
    #[default]
    Standard,
    /// Runs of letters (Lucene's `LetterTokenizer`).
    Simple,
    /// Runs of characters other than white space, case kept (Lucene's
    /// `WhitespaceTokenizer`).
    Whitespace,
}

/// Options of an analyzer, stored in the index manifest and per text field.
///
/// Written as JSON, the tokenizer and language are left out when they are
/// the defaults, so an old `{"stemming": true, "stop_words": true}` means
/// English stemming and stop words with the standard tokenizer, as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzerConfig {
    /// Snowball stemming in [`AnalyzerConfig::language`] (off by default).
    #[serde(default)]
    pub stemming: bool,
    /// Remove the stop words of [`AnalyzerConfig::language`] (off by
    /// default).
    #[serde(default)]
    pub stop_words: bool,
    /// The tokenizer (standard by default).
    #[serde(default, skip_serializing_if = "is_default")]
    pub tokenizer: TokenizerKind,
    /// The language of stop words and stemming (English by default).
    #[serde(default, skip_serializing_if = "is_default")]
    pub language: Language,
}

fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

impl AnalyzerConfig {
    /// The `standard` analyzer: standard tokenizer, lowercasing.
    pub const STANDARD: AnalyzerConfig = AnalyzerConfig {
        stemming: false,
        stop_words: false,
        tokenizer: TokenizerKind::Standard,
        language: Language::English,
    };

    /// The analyzer of `language`: standard tokenizer, lowercasing, the
    /// language's stop words and Snowball stemmer (`english`, `french`..).
    pub const fn language(language: Language) -> AnalyzerConfig {
        AnalyzerConfig {
            stemming: true,
            stop_words: true,
            tokenizer: TokenizerKind::Standard,
            language,
        }
    }

    /// The `english` analyzer.
    pub const fn english() -> AnalyzerConfig {
        AnalyzerConfig::language(Language::English)
    }

    /// The analyzer a mapping calls `name` (one of [`ANALYZER_NAMES`], or
    /// `default`, the same as `standard`).
    pub fn named(name: &str) -> Option<AnalyzerConfig> {
        let tokenizer = |tokenizer| AnalyzerConfig {
            tokenizer,
            ..AnalyzerConfig::STANDARD
        };
        match name {
            "standard" | "default" => Some(AnalyzerConfig::STANDARD),
            "simple" => Some(tokenizer(TokenizerKind::Simple)),
            "whitespace" => Some(tokenizer(TokenizerKind::Whitespace)),
            _ => Language::from_name(name).map(AnalyzerConfig::language),
        }
    }

    /// The name of this analyzer in [`ANALYZER_NAMES`], if it is one of
    /// them (`None` for other combinations of options, such as stemming
    /// without stop words).
    pub fn name(&self) -> Option<&'static str> {
        let plain = !self.stemming && !self.stop_words && self.language == Language::English;
        match self.tokenizer {
            TokenizerKind::Simple if plain => Some("simple"),
            TokenizerKind::Whitespace if plain => Some("whitespace"),
            TokenizerKind::Standard if plain => Some("standard"),
            TokenizerKind::Standard if self.stemming && self.stop_words => Some(self.language.name()),
            _ => None,
        }
    }
}

/// One token of analysed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// The normalised term.
    pub term: &'a str,
    /// Position in the field (0-based; removed stop words leave gaps).
    pub position: u32,
    /// Byte offset of the token's first byte in the original text.
    pub start: u32,
    /// Byte offset one past the token's last byte in the original text.
    pub end: u32,
}

/// Turns text into tokens. Cheap to clone and to share between threads.
#[derive(Debug, Clone)]
pub struct Analyzer {
    config: AnalyzerConfig,
    /// [`MAX_TOKEN_CHARS`], smaller in tests to exercise the cutting.
    max_token_chars: usize,
}

impl Analyzer {
    /// An analyzer with the given options.
    pub fn new(config: AnalyzerConfig) -> Self {
        Analyzer {
            config,
            max_token_chars: MAX_TOKEN_CHARS,
        }
    }

    /// An analyzer cutting tokens at `max_token_chars` characters (tests).
    #[cfg(test)]
    pub(crate) fn with_max_token_chars(config: AnalyzerConfig, max_token_chars: usize) -> Self {
        assert!(max_token_chars > 0);
        Analyzer {
            config,
            max_token_chars,
        }
    }

    /// The options this analyzer was built with.
    pub fn config(&self) -> AnalyzerConfig {
        self.config
    }

    /// Calls `sink` for every token of `text`, in order.
    ///
    /// Texts must be shorter than 4 GiB (offsets are `u32`). The term passed
    /// to `sink` borrows either `text` (already-lowercase ASCII tokens, or
    /// any token of the whitespace tokenizer), a buffer reused for the whole
    /// call, or (with stemming) a per-thread cache of stems: no allocation
    /// per token, except inside the stemmer on a cache miss.
    pub fn analyze(&self, text: &str, sink: impl FnMut(Token<'_>)) {
        debug_assert!(u32::try_from(text.len()).is_ok(), "text too long");
        match (self.config.stop_words, self.config.language) {
            (false, _) => self.stem_and_run(text, sink, |_| false),
            (true, Language::English) => self.stem_and_run(text, sink, is_stop_word),
            (true, language) => {
                let words = stop_words(language);
                self.stem_and_run(text, sink, |term| words.binary_search(&term).is_ok())
            }
        }
    }

    /// [`Analyzer::analyze`] with the stop-word predicate chosen.
    #[inline]
    fn stem_and_run(&self, text: &str, sink: impl FnMut(Token<'_>), stop: impl Fn(&str) -> bool) {
        if !self.config.stemming {
            return self.run(text, sink, stop, None);
        }
        let language = self.config.language;
        let stemmer = Stemmer::create(language.algorithm());
        stem_cache::STEM_CACHE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut cache) => self.run(text, sink, stop, Some((&stemmer, language, Some(&mut cache)))),
            // `sink` is analysing text itself on this thread: no cache.
            Err(_) => self.run(text, sink, stop, Some((&stemmer, language, None))),
        })
    }

    /// The pipeline behind [`Analyzer::analyze`].
    #[inline]
    fn run(
        &self,
        text: &str,
        mut sink: impl FnMut(Token<'_>),
        stop: impl Fn(&str) -> bool,
        mut stemming: Option<(&Stemmer, Language, Option<&mut stem_cache::StemCache>)>,
    ) {
        let mut buf = String::new();
        let mut position: u32 = 0;
        let mut emit = |start: usize, end: usize, case| {
            let raw = &text[start..end];
            let term: &str = match case {
                Case::Lower => raw,
                Case::AsciiUpper => {
                    buf.clear();
                    buf.push_str(raw);
                    buf.make_ascii_lowercase();
                    &buf
                }
                Case::Unicode => {
                    lowercase_into(raw, &mut buf);
                    &buf
                }
            };
            let token_position = position;
            position = position.wrapping_add(1);
            if stop(term) {
                return;
            }
            let (start, end) = (start as u32, end as u32);
            let token = |term| Token {
                term,
                position: token_position,
                start,
                end,
            };
            match &mut stemming {
                None => sink(token(term)),
                Some((stemmer, language, Some(cache))) => sink(token(cache.stem(stemmer, *language, term))),
                Some((stemmer, _, None)) => sink(token(&stemmer.stem(term))),
            }
        };
        let max = self.max_token_chars;
        match self.config.tokenizer {
            TokenizerKind::Standard => tokenizer::tokenize(text, max, &mut emit),
            TokenizerKind::Simple => char_tokenizer::letters(text, max, &mut emit),
            TokenizerKind::Whitespace => char_tokenizer::whitespace(text, max, &mut emit),
        }
    }
}

impl Default for Analyzer {
    /// The `standard` analyzer: no stop words, no stemming.
    fn default() -> Self {
        Analyzer::new(AnalyzerConfig::default())
    }
}

/// Lowercases `s` character by character into `buf` (cleared first).
#[inline]
fn lowercase_into(s: &str, buf: &mut String) {
    buf.clear();
    for c in s.chars() {
        if c.is_ascii() {
            buf.push(c.to_ascii_lowercase());
        } else {
            buf.extend(c.to_lowercase());
        }
    }
}
