//! Text analysis: documents and queries become streams of terms with
//! positions and byte offsets (stub implementation; the API is fixed).

use serde::{Deserialize, Serialize};

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

/// Turns text into tokens. Cheap to share between threads.
#[derive(Debug, Clone)]
pub struct Analyzer {
    config: AnalyzerConfig,
}

impl Analyzer {
    /// An analyzer with the given options.
    pub fn new(config: AnalyzerConfig) -> Self {
        Analyzer { config }
    }

    /// The options this analyzer was built with.
    pub fn config(&self) -> AnalyzerConfig {
        self.config
    }

    /// Calls `sink` for every token of `text`, in order.
    pub fn analyze(&self, text: &str, mut sink: impl FnMut(Token<'_>)) {
        let mut position = 0;
        let mut offset = 0;
        for word in text.split_whitespace() {
            let start = text[offset..].find(word).unwrap() + offset;
            offset = start + word.len();
            let lower = word.to_lowercase();
            sink(Token {
                term: &lower,
                position,
                start: start as u32,
                end: offset as u32,
            });
            position += 1;
        }
    }
}
