//! Stop words: Lucene's classic English set, and for the other languages
//! the Snowball project's lists (as the `stop-words` crate ships them from
//! NLTK's corpus, which took them from Snowball; Romanian, Greek, Arabic,
//! Turkish and Tamil come from NLTK's own additions).

use std::sync::OnceLock;

use super::Language;

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

/// The stop words of `language`, sorted (lowercase, as terms are): for
/// English [`ENGLISH_STOP_WORDS`], for the others the Snowball list.
pub fn stop_words(language: Language) -> &'static [&'static str] {
    static LISTS: [OnceLock<Vec<&'static str>>; Language::ALL.len()] = [const { OnceLock::new() }; Language::ALL.len()];
    if language == Language::English {
        return &ENGLISH_STOP_WORDS;
    }
    LISTS[language.index()].get_or_init(|| {
        let mut words: Vec<&'static str> = ::stop_words::lookup(language.iso_code())
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(|w| !w.is_empty() && !w.contains(char::is_whitespace))
            .collect();
        words.sort_unstable();
        words.dedup();
        words
    })
}

impl Language {
    /// Whether `term` (already lowercased) is one of the language's
    /// [`stop_words`].
    #[inline]
    pub fn is_stop_word(self, term: &str) -> bool {
        match self {
            Language::English => is_stop_word(term),
            _ => stop_words(self).binary_search(&term).is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_sorted_lowercase_stop_words() {
        for l in Language::ALL {
            let words = stop_words(l);
            assert!(words.len() >= 33, "{l:?}: {}", words.len());
            assert!(words.windows(2).all(|w| w[0] < w[1]), "{l:?} not sorted");
            for w in words {
                assert_eq!(w.to_lowercase(), *w, "{l:?}");
                assert!(l.is_stop_word(w), "{l:?} {w}");
            }
        }
        assert_eq!(stop_words(Language::English), ENGLISH_STOP_WORDS);
        for (l, yes, no) in [
            (Language::French, ["le", "la", "les", "et"], "chevaux"),
            (Language::German, ["der", "die", "und", "für"], "haus"),
            (Language::Spanish, ["el", "los", "que", "más"], "casa"),
            (Language::Russian, ["и", "в", "не", "что"], "дом"),
            (Language::Turkish, ["ve", "bu", "için", "çünkü"], "ev"),
        ] {
            for w in yes {
                assert!(l.is_stop_word(w), "{l:?} {w}");
            }
            assert!(!l.is_stop_word(no), "{l:?} {no}");
        }
        // English keeps Lucene's short list, not Snowball's.
        assert!(!Language::English.is_stop_word("our") && Language::English.is_stop_word("the"));
    }

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
