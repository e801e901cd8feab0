//! The English stop-word set (Lucene's classic `ENGLISH_STOP_WORDS_SET`).

/// Lucene's classic English stop words (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`),
/// removed when [`super::AnalyzerConfig::stop_words`] is on.
pub const ENGLISH_STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// Whether `term` (already lowercased) is one of [`ENGLISH_STOP_WORDS`].
#[inline]
pub fn is_stop_word(term: &str) -> bool {
    // Every stop word is 1 to 5 ASCII bytes: most terms are rejected by length.
    if term.is_empty() || term.len() > 5 {
        return false;
    }
    matches!(
        term,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "but"
            | "by"
            | "for"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "no"
            | "not"
            | "of"
            | "on"
            | "or"
            | "such"
            | "that"
            | "the"
            | "their"
            | "then"
            | "there"
            | "these"
            | "they"
            | "this"
            | "to"
            | "was"
            | "will"
            | "with"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_predicate_agree() {
        for w in ENGLISH_STOP_WORDS {
            assert!(is_stop_word(w), "{w}");
        }
        let mut sorted = ENGLISH_STOP_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 33);
        for w in ["", "the2", "thee", "The", "an.", "within", "i", "s", "thing", "another"] {
            assert!(!is_stop_word(w), "{w}");
        }
    }
}
