//! Text analysis: documents and queries become streams of terms with
//! positions and byte offsets.
//!
//! The pipeline matches Lucene's `StandardAnalyzer` (`StandardTokenizer` +
//! `LowerCaseFilter`), optionally followed by Lucene's classic English stop
//! words and Snowball English stemming:
//!
//! 1. **Tokenise** on Unicode UAX#29 word boundaries; a word segment is a
//!    token when it contains an alphanumeric character (`network's`, `u.s`,
//!    `1,000`, `foo_bar`, `a:b` are one token each; every CJK ideograph is a
//!    token of its own). Segments longer than [`MAX_TOKEN_CHARS`] characters
//!    are cut into pieces of at most that many characters, and segmentation
//!    restarts after each piece (as Lucene's scanner does). ASCII text takes
//!    a byte-level fast path; stretches with non-ASCII characters go through
//!    `unicode-segmentation` (see `tokenizer.rs` for why both agree).
//! 2. **Lowercase** every character (`char::to_lowercase`, so a term may be
//!    longer or shorter in bytes than its source; there is no context-
//!    sensitive final-sigma rule, as in Lucene).
//! 3. **Stop words** ([`ENGLISH_STOP_WORDS`]) are removed when enabled; they
//!    still take a position, so phrases keep their gaps.
//! 4. **Stemming** (Snowball English) when enabled.
//!
//! Positions count tokens from 0 in each [`Analyzer::analyze`] call; offsets
//! are byte offsets into the original text.

mod stem_cache;
mod stopwords;
mod tokenizer;

#[cfg(test)]
mod tests;

pub use stopwords::{is_stop_word, ENGLISH_STOP_WORDS};

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};
use tokenizer::Case;

/// Longest token, in characters (Lucene's default `maxTokenLength`); longer
/// word segments are cut into several tokens.
pub const MAX_TOKEN_CHARS: usize = 255;

/// Options of the analyzer, stored in the index manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AnalyzerConfig {
    /// Snowball English stemming (off by default).
    #[serde(default)]
    pub stemming: bool,
    /// Remove English stop words (off by default).
    #[serde(default)]
    pub stop_words: bool,
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
    /// to `sink` borrows either `text` (already-lowercase ASCII tokens), a
    /// buffer reused for the whole call, or (with stemming) a per-thread
    /// cache of stems: no allocation per token, except inside the stemmer
    /// on a cache miss.
    pub fn analyze(&self, text: &str, sink: impl FnMut(Token<'_>)) {
        debug_assert!(u32::try_from(text.len()).is_ok(), "text too long");
        if !self.config.stemming {
            return self.run(text, sink, None);
        }
        let stemmer = Stemmer::create(Algorithm::English);
        stem_cache::STEM_CACHE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut cache) => self.run(text, sink, Some((&stemmer, Some(&mut cache)))),
            // `sink` is analysing text itself on this thread: no cache.
            Err(_) => self.run(text, sink, Some((&stemmer, None))),
        })
    }

    /// The pipeline behind [`Analyzer::analyze`].
    fn run(
        &self,
        text: &str,
        mut sink: impl FnMut(Token<'_>),
        mut stemming: Option<(&Stemmer, Option<&mut stem_cache::StemCache>)>,
    ) {
        let stop_words = self.config.stop_words;
        let mut buf = String::new();
        let mut position: u32 = 0;
        tokenizer::tokenize(text, self.max_token_chars, &mut |start, end, case| {
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
            if stop_words && is_stop_word(term) {
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
                Some((stemmer, Some(cache))) => sink(token(cache.stem(stemmer, term))),
                Some((stemmer, None)) => sink(token(&stemmer.stem(term))),
            }
        });
    }
}

impl Default for Analyzer {
    /// The default analyzer: no stop words, no stemming.
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
