//! Tokenizers that decide character by character, as Lucene's
//! `CharTokenizer`s do: a token is a maximal run of *token characters*,
//! cut into pieces of at most `max_chars` characters.
//!
//! * [`letters`]: Lucene's `LetterTokenizer` (the `simple` analyzer's):
//!   token characters are letters (`char::is_alphabetic`); terms are
//!   lowercased.
//! * [`whitespace`]: Lucene's `WhitespaceTokenizer`: token characters are
//!   all but Unicode white space (`char::is_whitespace`); terms are the
//!   source text as it is.

use super::tokenizer::Case;

/// Calls `emit(start, end, case)` for every run of letters in `text`.
#[inline]
pub(crate) fn letters(text: &str, max_chars: usize, emit: &mut impl FnMut(usize, usize, Case)) {
    runs(text, max_chars, char::is_alphabetic, true, emit);
}

/// Calls `emit(start, end, Case::Lower)` for every run of characters other
/// than white space in `text` (`Case::Lower`: the source text is the term).
#[inline]
pub(crate) fn whitespace(text: &str, max_chars: usize, emit: &mut impl FnMut(usize, usize, Case)) {
    runs(text, max_chars, |c| !c.is_whitespace(), false, emit);
}

/// Maximal runs of characters for which `token_char` holds, cut every
/// `max_chars` characters; `fold`: the terms are to be lowercased.
#[inline]
fn runs(
    text: &str,
    max_chars: usize,
    token_char: impl Fn(char) -> bool,
    fold: bool,
    emit: &mut impl FnMut(usize, usize, Case),
) {
    let case = |upper: bool, non_ascii: bool| match (fold, non_ascii, upper) {
        (false, _, _) | (true, false, false) => Case::Lower,
        (true, false, true) => Case::AsciiUpper,
        (true, true, _) => Case::Unicode,
    };
    let mut start: Option<usize> = None;
    let (mut chars, mut upper, mut non_ascii) = (0usize, false, false);
    for (i, c) in text.char_indices() {
        if !token_char(c) {
            if let Some(s) = start.take() {
                emit(s, i, case(upper, non_ascii));
            }
            continue;
        }
        match start {
            Some(s) if chars == max_chars => {
                emit(s, i, case(upper, non_ascii));
                start = Some(i);
            }
            Some(_) => {
                chars += 1;
                upper |= c.is_ascii_uppercase();
                non_ascii |= !c.is_ascii();
                continue;
            }
            None => start = Some(i),
        }
        chars = 1;
        upper = c.is_ascii_uppercase();
        non_ascii = !c.is_ascii();
    }
    if let Some(s) = start {
        emit(s, text.len(), case(upper, non_ascii));
    }
}
