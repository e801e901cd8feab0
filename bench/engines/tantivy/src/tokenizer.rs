//! tierdex's analyzer as a tantivy tokenizer, so that both engines index and
//! query exactly the same terms at the same positions.
//!
//! tierdex's [`Analyzer::analyze`] pushes tokens into a sink while tantivy's
//! [`TokenStream`] is pulled, so a call to [`Tokenizer::token_stream`]
//! analyses the whole text up front into buffers owned by the tokenizer
//! (reused from call to call: tantivy keeps one tokenizer per indexing
//! thread and field), and the stream then hands the tokens out one by one.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tierdex::analysis::{Analyzer, AnalyzerConfig};

/// The name the tokenizer is registered under, in the index schema and in
/// the tokenizer manager at index and at query time.
pub const TOKENIZER_NAME: &str = "tierdex";

/// Where the text of one analysed token is.
#[derive(Debug, Clone, Copy)]
enum TermText {
    /// The token is the source text as is (`text[start..end]`).
    Source,
    /// The token's term is `terms[from..to]` (lowercased or otherwise
    /// normalised by the analyzer).
    Copied { from: u32, to: u32 },
}

/// One analysed token.
#[derive(Debug, Clone, Copy)]
struct Tok {
    term: TermText,
    position: u32,
    start: u32,
    end: u32,
}

/// tierdex's default analyzer (UAX#29 words, lowercase, no stop words, no
/// stemming: the benchmark's analysis) as a tantivy [`Tokenizer`].
pub struct TierdexTokenizer {
    analyzer: Analyzer,
    /// The terms that are not verbatim slices of the source text.
    terms: String,
    tokens: Vec<Tok>,
    token: Token,
}

impl TierdexTokenizer {
    pub fn new() -> Self {
        TierdexTokenizer {
            analyzer: Analyzer::new(AnalyzerConfig::default()),
            terms: String::new(),
            tokens: Vec::new(),
            token: Token::default(),
        }
    }
}

impl Default for TierdexTokenizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for TierdexTokenizer {
    /// A fresh tokenizer with the same analyzer and empty buffers.
    fn clone(&self) -> Self {
        TierdexTokenizer {
            analyzer: self.analyzer.clone(),
            terms: String::new(),
            tokens: Vec::new(),
            token: Token::default(),
        }
    }
}

impl Tokenizer for TierdexTokenizer {
    type TokenStream<'a> = TierdexTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TierdexTokenStream<'a> {
        self.terms.clear();
        self.tokens.clear();
        let terms = &mut self.terms;
        let tokens = &mut self.tokens;
        self.analyzer.analyze(text, |t| {
            let source = &text[t.start as usize..t.end as usize];
            // Already-lowercase tokens borrow the text itself: no copy.
            let term = if std::ptr::eq(t.term.as_ptr(), source.as_ptr()) && t.term.len() == source.len() {
                TermText::Source
            } else {
                let from = terms.len() as u32;
                terms.push_str(t.term);
                TermText::Copied {
                    from,
                    to: terms.len() as u32,
                }
            };
            tokens.push(Tok {
                term,
                position: t.position,
                start: t.start,
                end: t.end,
            });
        });
        self.token.reset();
        TierdexTokenStream {
            text,
            terms: &self.terms,
            tokens: &self.tokens,
            next: 0,
            token: &mut self.token,
        }
    }
}

/// The tokens of one text, analysed by [`TierdexTokenizer::token_stream`].
pub struct TierdexTokenStream<'a> {
    text: &'a str,
    terms: &'a str,
    tokens: &'a [Tok],
    next: usize,
    token: &'a mut Token,
}

impl TokenStream for TierdexTokenStream<'_> {
    fn advance(&mut self) -> bool {
        let Some(tok) = self.tokens.get(self.next) else {
            return false;
        };
        self.next += 1;
        let term = match tok.term {
            TermText::Source => &self.text[tok.start as usize..tok.end as usize],
            TermText::Copied { from, to } => &self.terms[from as usize..to as usize],
        };
        self.token.text.clear();
        self.token.text.push_str(term);
        self.token.position = tok.position as usize;
        self.token.offset_from = tok.start as usize;
        self.token.offset_to = tok.end as usize;
        self.token.position_length = 1;
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut tokenizer = TierdexTokenizer::new();
        let mut stream = tokenizer.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    #[test]
    fn same_tokens_as_tierdex() {
        let text = "The QUICK brown fox's U.S. \u{c9}t\u{c9} 1,000 foo_bar \u{4e2d}\u{6587} end";
        let mut expected = Vec::new();
        Analyzer::default().analyze(text, |t| {
            expected.push((
                t.term.to_string(),
                t.position as usize,
                t.start as usize,
                t.end as usize,
            ))
        });
        assert!(expected.len() > 8);
        assert_eq!(tokens(text), expected);
        assert_eq!(tokens(text)[0], ("the".to_string(), 0, 0, 3));
        assert_eq!(tokens(text)[1], ("quick".to_string(), 1, 4, 9));
    }

    #[test]
    fn empty_and_reuse() {
        assert!(tokens("").is_empty());
        assert!(tokens(" -- !! ").is_empty());
        let mut tokenizer = TierdexTokenizer::new();
        for text in ["Alpha beta", "gamma", ""] {
            let n = {
                let mut s = tokenizer.token_stream(text);
                let mut n = 0;
                while s.advance() {
                    n += 1;
                }
                n
            };
            assert_eq!(n, text.split_whitespace().count());
        }
    }
}
