//! The query-language parser: a subset of Lucene's classic query syntax,
//! compatible with the search-benchmark-game command files.
//!
//! # Syntax
//!
//! * `a b` — clauses separated by whitespace are SHOULD clauses of the
//!   enclosing boolean query; `+a` is MUST, `-a` is MUST_NOT. An operator
//!   applies only at the start of a clause and may be followed by whitespace
//!   (`- a` is `-a`, as in Lucene); inside a word `+`/`-` are ordinary
//!   characters (`foo-bar`, `c++` are single terms).
//! * A **term** is a maximal run of characters other than whitespace
//!   (Unicode), `(`, `)` and `"`.
//! * `"a b c"` is a **phrase**; its text is everything up to the next
//!   unescaped `"` (whitespace and parentheses included). `""` is an empty
//!   phrase (the planner drops it).
//! * `(a b)` is a **group**, a nested boolean query; `()` is accepted as an
//!   empty group (which matches nothing). Groups nest at most
//!   [`MAX_DEPTH`] levels deep.
//! * `field:x` where `x` is a term, phrase or group restricts `x` to the
//!   field named (a field of the index's schema; `title` and `body` in the
//!   default schema, which [`parse`] uses). For a group the field applies to every term
//!   and phrase inside it that has no field of its own (explicit inner fields
//!   win). Only the first unescaped `:` of a word can start a field: in
//!   `title:a:b` the term is `a:b`. Field names are case-sensitive. A word
//!   with a non-empty name before its first `:` and a term, phrase or group
//!   right after it (no whitespace) is a field prefix: a name the schema
//!   does not have is [`QueryError::UnknownField`]. A field name followed by
//!   `:` with nothing right after it is a syntax error; any other word ending in `:`
//!   (`foo:`) or starting with `:` is an ordinary term.
//! * `AND`, `OR`, `NOT` (upper case, as whole words) are Lucene's boolean
//!   keywords with its classic semantics (default operator OR): `a AND b`
//!   makes both `a` and `b` MUST (a MUST_NOT clause on either side stays
//!   MUST_NOT); `OR` changes nothing (`a OR b` is `a b`); `NOT a` is `-a`.
//!   So `a AND b OR c` is `+a +b c` and `a AND NOT b` is `+a -b`. `AND`/`OR`
//!   need a clause on both sides; `NOT` is a prefix like `-`. After an
//!   operator or keyword a clause must follow, and a clause cannot carry two
//!   operators (`+-a`, `-NOT a` are errors). `title:AND` is the term `AND`.
//! * `&&`, `||` (as whole words) and `!` (at the start of a clause) are
//!   Lucene's symbols for `AND`, `OR` and `NOT`; inside a word they are
//!   ordinary characters (`yahoo!`).
//! * `\` escapes the next character, whatever it is, in terms, field names
//!   and phrases (`\"`, `\:`, `\(`, `\)`, `\+`, `\-`, `\\`, `\ `, `\AND`): it
//!   loses any special meaning and is part of the text. A `\` at the very end
//!   of the query is an error.
//!
//! # Syntax that is refused
//!
//! Lucene syntax that tierdex does not implement is an error
//! ([`QueryError::Unsupported`], naming the operator and its position)
//! rather than words searched for: wildcards (`*`, `?` anywhere in a word,
//! `*:*`), fuzzy and proximity searches (`~`, also after a phrase: `"a b"~2`),
//! boosts (`^`), ranges (`[`, `]`, `{`, `}` anywhere in a word, and
//! `field:>x`, `field:>=x`, `field:<x`, `field:<=x`), regular expressions (a
//! word starting with `/`) and `_exists_:field`. Escaped (`\*`) or inside a
//! phrase these characters are text, and elsewhere in a word `/`, `!`, `<`,
//! `>`, `&`, `|` are ordinary characters (`and/or`, `TCP/IP`).
//!
//! # Limits
//!
//! [`parse_limited`] refuses text longer than [`QueryLimits::max_bytes`]
//! before reading it, more than [`QueryLimits::max_clauses`] clauses and
//! groups nested deeper than [`QueryLimits::max_depth`]
//! ([`QueryError::TooLarge`], or a syntax error for the nesting); [`parse`]
//! and [`parse_with`] apply the defaults. The planner enforces the limits
//! that need analysed text (terms, phrase length).
//!
//! The result is always a [`Query::Boolean`] (empty for a blank query).
//! Parsing is a single left-to-right pass (linear time); errors carry the
//! byte offset of the offending character, and parsing never panics.

use std::ops::Bound;

use super::ast::{Clause, Occur, Query};
use super::limits::QueryLimits;
use crate::schema::{Field, Schema};

/// Deepest nesting of parenthesised groups that [`parse`] accepts (the
/// default [`QueryLimits::max_depth`]).
pub const MAX_DEPTH: usize = 64;

pub use crate::error::QueryError;

/// Parses `text` into a [`Query`] over the default schema's fields (`title`
/// and `body`; always a [`Query::Boolean`]; see the module documentation
/// for the syntax).
pub fn parse(text: &str) -> Result<Query, QueryError> {
    parse_with(text, &Schema::default())
}

/// Parses `text` into a [`Query`] over the fields of `schema`.
pub fn parse_with(text: &str, schema: &Schema) -> Result<Query, QueryError> {
    parse_limited(text, schema, &QueryLimits::default())
}

/// Parses `text` into a [`Query`] over the fields of `schema`, within
/// `limits` (a `max_depth` above [`QueryLimits::DEPTH_CEILING`] counts as
/// the ceiling).
pub fn parse_limited(text: &str, schema: &Schema, limits: &QueryLimits) -> Result<Query, QueryError> {
    if text.len() > limits.max_bytes {
        let mut position = limits.max_bytes;
        while !text.is_char_boundary(position) {
            position -= 1;
        }
        return Err(QueryError::TooLarge {
            position,
            message: format!(
                "the query is {} bytes long, over the limit of {} bytes (query limit `max_bytes`)",
                text.len(),
                limits.max_bytes
            ),
        });
    }
    let mut parser = Parser {
        src: text,
        pos: 0,
        schema,
        max_clauses: limits.max_clauses,
        max_depth: limits.max_depth.min(QueryLimits::DEPTH_CEILING),
        clauses: 0,
    };
    let clauses = parser.clauses(0, None, None)?;
    Ok(Query::Boolean(clauses))
}

/// Formats a parse error for people: the query on one line and, under it, a
/// caret `^` at the error position followed by the message.
///
/// Control characters of the query (newlines, tabs) are shown as spaces so
/// that the caret lines up (columns are counted in characters). Of a long
/// query only the 60 characters on either side of the error are shown,
/// with `…` where it is cut.
pub fn render_error(query: &str, err: &QueryError) -> String {
    const CONTEXT: usize = 60;
    let mut position = err.position().min(query.len());
    while !query.is_char_boundary(position) {
        position -= 1;
    }
    let start = query[..position]
        .char_indices()
        .rev()
        .nth(CONTEXT - 1)
        .map_or(0, |(i, _)| i);
    let end = query[position..]
        .char_indices()
        .nth(CONTEXT)
        .map_or(query.len(), |(i, _)| position + i);
    let (before, after) = (
        if start > 0 { "…" } else { "" },
        if end < query.len() { "…" } else { "" },
    );
    let shown: String = query[start..end]
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let column = before.chars().count() + query[start..position].chars().count();
    format!("{before}{shown}{after}\n{}^ {}", " ".repeat(column), err.message())
}

/// Prints `query` in the query syntax, so that [`parse`] gives back the same
/// query: `parse(&to_query_string(q)) == Ok(q)` for every `Query::Boolean`
/// whose terms have non-empty text. A query that is not a `Boolean` is printed
/// as the single clause of the top-level query that parsing it gives.
///
/// Fields are printed on each term and phrase (`(title:a title:b)`, never
/// `title:(a b)`); special characters are escaped with `\`.
pub fn to_query_string(query: &Query) -> String {
    to_query_string_with(query, &Schema::default())
}

/// [`to_query_string`] for a query over the fields of `schema`.
pub fn to_query_string_with(query: &Query, schema: &Schema) -> String {
    let mut out = String::new();
    match query {
        Query::Boolean(clauses) => print_clauses(clauses, schema, &mut out),
        other => print_query(other, schema, &mut out),
    }
    out
}

fn print_clauses(clauses: &[Clause], schema: &Schema, out: &mut String) {
    for (i, clause) in clauses.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match clause.occur {
            Occur::Should => {}
            // The query language has no filter clause: the closest is MUST.
            Occur::Must | Occur::Filter => out.push('+'),
            Occur::MustNot => out.push('-'),
        }
        print_query(&clause.query, schema, out);
    }
}

fn print_query(query: &Query, schema: &Schema, out: &mut String) {
    match query {
        Query::Term { field, text } => {
            print_field(*field, schema, out);
            let keyword = matches!(text.as_str(), "AND" | "OR" | "NOT" | "&&" | "||");
            for (i, c) in text.chars().enumerate() {
                let special = c.is_whitespace()
                    || matches!(c, '(' | ')' | '"' | '\\' | ':')
                    || is_operator_char(c)
                    || (i == 0 && (keyword || matches!(c, '+' | '-' | '!' | '/' | '<' | '>')));
                if special {
                    out.push('\\');
                }
                out.push(c);
            }
        }
        Query::Phrase { field, text } => {
            print_field(*field, schema, out);
            out.push('"');
            for c in text.chars() {
                if matches!(c, '"' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        }
        Query::Boolean(clauses) => {
            out.push('(');
            print_clauses(clauses, schema, out);
            out.push(')');
        }
        Query::MatchAll => out.push_str("*:*"),
        Query::Exists { field } => {
            out.push_str("_exists_:");
            out.push_str(schema.name(*field));
        }
        Query::Terms { field, values } => {
            out.push('(');
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print_field(Some(*field), schema, out);
                print_phrase_text(v, out);
            }
            out.push(')');
        }
        Query::Range { field, lower, upper } => {
            print_field(Some(*field), schema, out);
            let bound = |b: &Bound<String>, out: &mut String| match b {
                Bound::Unbounded => out.push('*'),
                Bound::Included(v) | Bound::Excluded(v) => print_phrase_text(v, out),
            };
            out.push(if matches!(lower, Bound::Excluded(_)) { '{' } else { '[' });
            bound(lower, out);
            out.push_str(" TO ");
            bound(upper, out);
            out.push(if matches!(upper, Bound::Excluded(_)) { '}' } else { ']' });
        }
        // The query language has no constant score nor minimum of
        // optional clauses: the query itself.
        Query::ConstantScore { query, .. } | Query::MinShouldMatch { query, .. } => print_query(query, schema, out),
        // Nor a maximum: shown as the disjunction it matches like.
        Query::DisMax { queries, .. } => {
            out.push('(');
            for (i, q) in queries.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print_query(q, schema, out);
            }
            out.push(')');
        }
        // Nor ids: shown as `_id:` clauses (not read back).
        Query::Ids(ids) => {
            out.push('(');
            for (i, id) in ids.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str("_id:");
                print_phrase_text(id, out);
            }
            out.push(')');
        }
    }
}

/// `text` as a quoted phrase.
fn print_phrase_text(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

fn print_field(field: Option<Field>, schema: &Schema, out: &mut String) {
    if let Some(field) = field {
        out.push_str(schema.name(field));
        out.push(':');
    }
}

/// A boolean keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    And,
    Or,
    Not,
}

/// The spellings of the keywords that are whole words.
const KEYWORDS: [(&str, Keyword); 5] = [
    ("AND", Keyword::And),
    ("OR", Keyword::Or),
    ("NOT", Keyword::Not),
    ("&&", Keyword::And),
    ("||", Keyword::Or),
];

/// A clause prefix: `+`, `-` or `NOT`.
#[derive(Debug, Clone, Copy)]
struct Modifier {
    occur: Occur,
    position: usize,
    name: &'static str,
}

/// Whether `c` ends a word.
fn ends_word(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '"')
}

/// Characters of unsupported operators wherever they are in a word.
fn is_operator_char(c: char) -> bool {
    matches!(c, '*' | '?' | '~' | '^' | '[' | ']' | '{' | '}')
}

fn syntax(position: usize, message: impl Into<String>) -> QueryError {
    QueryError::Syntax {
        position,
        message: message.into(),
    }
}

/// Recursive-descent parser over the query text; `pos` only moves forward.
struct Parser<'a> {
    src: &'a str,
    pos: usize,
    schema: &'a Schema,
    max_clauses: usize,
    max_depth: usize,
    /// Clauses so far, at any depth.
    clauses: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn skip_whitespace(&mut self) {
        let rest = &self.src[self.pos..];
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
    }

    /// The keyword starting at the current position, if the word there is
    /// exactly `AND`, `OR`, `NOT`, `&&` or `||`, and its spelling.
    fn peek_keyword(&self) -> Option<(Keyword, &'static str)> {
        let rest = &self.src[self.pos..];
        KEYWORDS.into_iter().find_map(|(name, k)| {
            rest.strip_prefix(name)
                .is_some_and(|after| after.chars().next().is_none_or(ends_word))
                .then_some((k, name))
        })
    }

    /// Refuses `c`, at the current position, when it is the operator of
    /// syntax tierdex does not implement; `at_start`: it starts a word.
    fn refuse_operator(&self, c: char, at_start: bool) -> Result<(), QueryError> {
        let operator = match c {
            '*' | '?' => format!("wildcard `{c}`"),
            '~' => "fuzzy or proximity search `~`".to_string(),
            '^' => "boost `^`".to_string(),
            '[' | ']' | '{' | '}' => format!("range `{c}` (ranges are `field:[a TO b]`)"),
            '/' if at_start => "regular expression `/`".to_string(),
            _ => return Ok(()),
        };
        Err(QueryError::Unsupported {
            position: self.pos,
            operator,
        })
    }

    /// Clauses up to the end of the text (`open == None`) or up to the `)`
    /// closing the `(` at byte `open` (consumed). `field` is the default
    /// field of the enclosing `field:( ... )` group.
    fn clauses(&mut self, depth: usize, field: Option<Field>, open: Option<usize>) -> Result<Vec<Clause>, QueryError> {
        let mut clauses: Vec<Clause> = Vec::new();
        // A pending `AND`/`OR`, its spelling and its position.
        let mut conjunction: Option<(Keyword, &str, usize)> = None;
        loop {
            self.skip_whitespace();
            let at = self.pos;
            let end_of_group = match self.peek() {
                None => {
                    if let Some(open) = open {
                        return Err(syntax(open, "unclosed `(`: missing `)`"));
                    }
                    true
                }
                Some(')') => {
                    if open.is_none() {
                        return Err(syntax(at, "unmatched `)`"));
                    }
                    self.pos += 1;
                    true
                }
                _ => false,
            };
            if end_of_group {
                if let Some((_, name, position)) = conjunction {
                    return Err(syntax(position, format!("`{name}` must be followed by a clause")));
                }
                return Ok(clauses);
            }
            let keyword = self.peek_keyword();
            if let Some((k @ (Keyword::And | Keyword::Or), name)) = keyword {
                if clauses.is_empty() || conjunction.is_some() {
                    return Err(syntax(at, format!("`{name}` must come between two clauses")));
                }
                conjunction = Some((k, name, at));
                self.pos += name.len();
                continue;
            }
            let modifier = match (self.peek(), keyword) {
                (Some('+'), _) => Some(Modifier {
                    occur: Occur::Must,
                    position: at,
                    name: "+",
                }),
                (Some('-'), _) => Some(Modifier {
                    occur: Occur::MustNot,
                    position: at,
                    name: "-",
                }),
                (Some('!'), _) => Some(Modifier {
                    occur: Occur::MustNot,
                    position: at,
                    name: "!",
                }),
                (_, Some((Keyword::Not, _))) => Some(Modifier {
                    occur: Occur::MustNot,
                    position: at,
                    name: "NOT",
                }),
                _ => None,
            };
            if let Some(m) = modifier {
                self.pos += m.name.len();
                self.skip_whitespace();
                let nothing = match self.peek() {
                    None | Some(')') | Some('+') | Some('-') | Some('!') => true,
                    Some(_) => self.peek_keyword().is_some(),
                };
                if nothing {
                    return Err(syntax(
                        m.position,
                        format!("`{}` must be followed by a term, phrase or group", m.name),
                    ));
                }
            }
            self.clauses += 1;
            if self.clauses > self.max_clauses {
                return Err(QueryError::TooLarge {
                    position: at,
                    message: format!("more than {} clauses (query limit `max_clauses`)", self.max_clauses),
                });
            }
            let query = self.atom(depth, field)?;
            let and = matches!(conjunction, Some((Keyword::And, ..)));
            if and {
                if let Some(previous) = clauses.last_mut() {
                    if previous.occur != Occur::MustNot {
                        previous.occur = Occur::Must;
                    }
                }
            }
            let occur = match modifier {
                Some(m) => m.occur,
                None if and => Occur::Must,
                None => Occur::Should,
            };
            clauses.push(Clause { occur, query });
            conjunction = None;
        }
    }

    /// A term, phrase or group (possibly with a field prefix) at the current
    /// position, which is not whitespace, `)` or the end.
    fn atom(&mut self, depth: usize, field: Option<Field>) -> Result<Query, QueryError> {
        let start = self.pos;
        match self.peek() {
            Some('"') => return self.phrase(field),
            Some('(') => return self.group(depth, field),
            _ => {}
        }
        let rest = &self.src[self.pos..];
        if let Some(after) = rest.strip_prefix("*:*") {
            if after.chars().next().is_none_or(ends_word) {
                self.pos += 3;
                return Ok(Query::MatchAll);
            }
        }
        if rest.starts_with("_exists_:") {
            return self.exists();
        }
        let mut text = String::new();
        let mut name_checked = false;
        while let Some(c) = self.peek() {
            if ends_word(c) {
                break;
            }
            if c == '\\' {
                text.push(self.escaped()?);
                continue;
            }
            self.refuse_operator(c, self.pos == start)?;
            self.pos += c.len_utf8();
            if c == ':' && !name_checked && !text.is_empty() {
                name_checked = true;
                let next = self.peek();
                let known = self.schema.field(&text);
                match next {
                    Some('"') | Some('(') => {}
                    Some(n) if !ends_word(n) => {}
                    _ => {
                        // Nothing right after the colon.
                        if known.is_some() {
                            return Err(syntax(
                                start,
                                format!(
                                    "`{text}:` must be followed by a term, phrase or group \
                                     (without a space)"
                                ),
                            ));
                        }
                        text.push(':');
                        continue;
                    }
                }
                let Some(known) = known else {
                    return Err(QueryError::UnknownField {
                        field: text,
                        position: start,
                        known: self.schema.names().into_iter().map(String::from).collect(),
                    });
                };
                return match next {
                    Some('"') => self.phrase(Some(known)),
                    Some('(') => self.group(depth, Some(known)),
                    Some('[' | '{') => self.range(known),
                    Some('<' | '>') => self.comparison(known),
                    _ => self.word(known),
                };
            }
            name_checked |= c == ':';
            text.push(c);
        }
        Ok(Query::Term { field, text })
    }

    /// The rest of a word after `field:`: the term text (colons included).
    fn word(&mut self, field: Field) -> Result<Query, QueryError> {
        let start = self.pos;
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if ends_word(c) {
                break;
            }
            if c == '\\' {
                text.push(self.escaped()?);
                continue;
            }
            self.refuse_operator(c, self.pos == start)?;
            self.pos += c.len_utf8();
            text.push(c);
        }
        Ok(Query::Term {
            field: Some(field),
            text,
        })
    }

    /// `_exists_:field` at the current position.
    fn exists(&mut self) -> Result<Query, QueryError> {
        let start = self.pos;
        self.pos += "_exists_:".len();
        let name_at = self.pos;
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if ends_word(c) {
                break;
            }
            if c == '\\' {
                name.push(self.escaped()?);
                continue;
            }
            self.pos += c.len_utf8();
            name.push(c);
        }
        if name.is_empty() {
            return Err(syntax(start, "`_exists_:` must be followed by a field name"));
        }
        match self.schema.field(&name) {
            Some(field) => Ok(Query::Exists { field }),
            None => Err(QueryError::UnknownField {
                field: name,
                position: name_at,
                known: self.schema.names().into_iter().map(String::from).collect(),
            }),
        }
    }

    /// One bound of a range: `*` (none), a quoted value or a word (up to
    /// whitespace or the closing bracket).
    fn bound_value(&mut self, closing: bool) -> Result<Option<String>, QueryError> {
        let start = self.pos;
        if self.peek() == Some('"') {
            let Query::Phrase { text, .. } = self.phrase(None)? else {
                unreachable!("phrase() makes phrases")
            };
            return Ok(Some(text));
        }
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if c.is_whitespace() || (closing && matches!(c, ']' | '}')) {
                break;
            }
            if c == '\\' {
                text.push(self.escaped()?);
                continue;
            }
            if matches!(c, '[' | '{' | '(' | ')' | '"') || (!closing && matches!(c, ']' | '}')) {
                return Err(syntax(self.pos, format!("unexpected `{c}` in a range")));
            }
            self.pos += c.len_utf8();
            text.push(c);
        }
        match text.as_str() {
            "" => Err(syntax(start, "a range bound is missing")),
            "*" => Ok(None),
            _ => Ok(Some(text)),
        }
    }

    /// `[a TO b]`, `{a TO b}` (or mixed) after `field:`.
    fn range(&mut self, field: Field) -> Result<Query, QueryError> {
        let open = self.pos;
        let inclusive_low = self.peek() == Some('[');
        self.pos += 1;
        self.skip_whitespace();
        let low = self.bound_value(false)?;
        self.skip_whitespace();
        if !self.src[self.pos..].starts_with("TO") {
            return Err(syntax(self.pos, "expected `TO` between the bounds of a range"));
        }
        self.pos += 2;
        if !self.peek().is_some_and(char::is_whitespace) {
            return Err(syntax(self.pos, "expected a space after `TO`"));
        }
        self.skip_whitespace();
        let high = self.bound_value(true)?;
        self.skip_whitespace();
        let inclusive_high = match self.peek() {
            Some(']') => true,
            Some('}') => false,
            _ => return Err(syntax(open, "unclosed range: missing `]` or `}`")),
        };
        self.pos += 1;
        if self.peek().is_some_and(|c| !ends_word(c)) {
            return Err(syntax(self.pos, "unexpected characters after a range"));
        }
        let bound = |v: Option<String>, inclusive: bool| match v {
            None => Bound::Unbounded,
            Some(v) if inclusive => Bound::Included(v),
            Some(v) => Bound::Excluded(v),
        };
        Ok(Query::Range {
            field,
            lower: bound(low, inclusive_low),
            upper: bound(high, inclusive_high),
        })
    }

    /// `>x`, `>=x`, `<x`, `<=x` after `field:`.
    fn comparison(&mut self, field: Field) -> Result<Query, QueryError> {
        let at = self.pos;
        let rest = &self.src[self.pos..];
        let (op, len) = if rest.starts_with(">=") {
            (">=", 2)
        } else if rest.starts_with("<=") {
            ("<=", 2)
        } else if rest.starts_with('>') {
            (">", 1)
        } else {
            ("<", 1)
        };
        self.pos += len;
        if self.peek().is_none_or(ends_word) && self.peek() != Some('"') {
            return Err(syntax(at, format!("`{op}` must be followed by a value")));
        }
        let value = self
            .bound_value(false)?
            .ok_or_else(|| syntax(at, format!("`{op}*` is not a bound")))?;
        let (lower, upper) = match op {
            ">=" => (Bound::Included(value), Bound::Unbounded),
            ">" => (Bound::Excluded(value), Bound::Unbounded),
            "<=" => (Bound::Unbounded, Bound::Included(value)),
            _ => (Bound::Unbounded, Bound::Excluded(value)),
        };
        Ok(Query::Range { field, lower, upper })
    }

    /// The character escaped by the `\` at the current position (both consumed).
    fn escaped(&mut self) -> Result<char, QueryError> {
        let backslash = self.pos;
        self.pos += 1;
        match self.peek() {
            Some(c) => {
                self.pos += c.len_utf8();
                Ok(c)
            }
            None => Err(syntax(backslash, "`\\` at the end of the query escapes nothing")),
        }
    }

    /// A phrase starting at the `"` at the current position.
    fn phrase(&mut self, field: Option<Field>) -> Result<Query, QueryError> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let Some(i) = rest.find(['"', '\\']) else {
                return Err(syntax(open, "unterminated phrase: missing closing `\"`"));
            };
            text.push_str(&rest[..i]);
            self.pos += i;
            if rest.as_bytes()[i] == b'"' {
                self.pos += 1;
                return Ok(Query::Phrase { field, text });
            }
            match self.escaped() {
                Ok(c) => text.push(c),
                Err(_) => {
                    return Err(syntax(open, "unterminated phrase: missing closing `\"`"));
                }
            }
        }
    }

    /// A group starting at the `(` at the current position.
    fn group(&mut self, depth: usize, field: Option<Field>) -> Result<Query, QueryError> {
        let open = self.pos;
        if depth >= self.max_depth {
            return Err(syntax(
                open,
                format!("groups nested more than {} levels deep", self.max_depth),
            ));
        }
        self.pos += 1;
        let clauses = self.clauses(depth + 1, field, Some(open))?;
        Ok(Query::Boolean(clauses))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn term(text: &str) -> Query {
        Query::Term {
            field: None,
            text: text.to_string(),
        }
    }

    fn fterm(field: Field, text: &str) -> Query {
        Query::Term {
            field: Some(field),
            text: text.to_string(),
        }
    }

    fn phrase(field: Option<Field>, text: &str) -> Query {
        Query::Phrase {
            field,
            text: text.to_string(),
        }
    }

    fn should(query: Query) -> Clause {
        Clause {
            occur: Occur::Should,
            query,
        }
    }

    fn must(query: Query) -> Clause {
        Clause {
            occur: Occur::Must,
            query,
        }
    }

    fn must_not(query: Query) -> Clause {
        Clause {
            occur: Occur::MustNot,
            query,
        }
    }

    fn ok(text: &str) -> Vec<Clause> {
        match parse(text) {
            Ok(Query::Boolean(clauses)) => clauses,
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    /// The position and message of a syntax error.
    fn syntax_err(text: &str) -> (usize, String) {
        match parse(text) {
            Err(QueryError::Syntax { position, message }) => (position, message),
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn terms_and_operators() {
        assert_eq!(ok("a b"), [should(term("a")), should(term("b"))]);
        assert_eq!(ok("+a +b"), [must(term("a")), must(term("b"))]);
        assert_eq!(ok("  -a\tb\n"), [must_not(term("a")), should(term("b"))]);
        assert_eq!(ok("- a + b"), [must_not(term("a")), must(term("b"))]);
        assert_eq!(
            ok("foo-bar c++ a+b"),
            [should(term("foo-bar")), should(term("c++")), should(term("a+b"))]
        );
        assert_eq!(ok("Ünïcode 東京"), [should(term("Ünïcode")), should(term("東京"))]);
        assert_eq!(ok("a\u{3000}b"), [should(term("a")), should(term("b"))]);
    }

    #[test]
    fn empty_queries() {
        assert_eq!(parse(""), Ok(Query::Boolean(vec![])));
        assert_eq!(parse(" \t\n "), Ok(Query::Boolean(vec![])));
        assert_eq!(ok("()"), [should(Query::Boolean(vec![]))]);
        assert_eq!(ok("+( )"), [must(Query::Boolean(vec![]))]);
    }

    #[test]
    fn phrases() {
        assert_eq!(ok(r#""a b c""#), [should(phrase(None, "a b c"))]);
        assert_eq!(
            ok(r#"+"a (b)" -"c:d""#),
            [must(phrase(None, "a (b)")), must_not(phrase(None, "c:d"))]
        );
        assert_eq!(ok(r#""""#), [should(phrase(None, ""))]);
        assert_eq!(
            ok(r#"x"a b"y"#),
            [should(term("x")), should(phrase(None, "a b")), should(term("y"))]
        );
        assert_eq!(ok(r#""say \"hi\" \\ \x""#), [should(phrase(None, r#"say "hi" \ x"#))]);
    }

    #[test]
    fn fields() {
        assert_eq!(ok("title:a"), [should(fterm(Field::TITLE, "a"))]);
        assert_eq!(ok(r#"+body:"a b""#), [must(phrase(Some(Field::BODY), "a b"))]);
        assert_eq!(ok("title:a:b"), [should(fterm(Field::TITLE, "a:b"))]);
        assert_eq!(ok("title:-a"), [should(fterm(Field::TITLE, "-a"))]);
        assert_eq!(ok("title:AND"), [should(fterm(Field::TITLE, "AND"))]);
        assert_eq!(
            ok(r#"title:(a "b c" body:d (e body:(f)))"#),
            [should(Query::Boolean(vec![
                should(fterm(Field::TITLE, "a")),
                should(phrase(Some(Field::TITLE), "b c")),
                should(fterm(Field::BODY, "d")),
                should(Query::Boolean(vec![
                    should(fterm(Field::TITLE, "e")),
                    should(Query::Boolean(vec![should(fterm(Field::BODY, "f"))])),
                ])),
            ]))]
        );
        // Not field prefixes: nothing after the colon, or no name before it.
        assert_eq!(
            ok("foo: :bar a:"),
            [should(term("foo:")), should(term(":bar")), should(term("a:"))]
        );
        assert_eq!(
            ok("(x foo:)"),
            [should(Query::Boolean(vec![should(term("x")), should(term("foo:"))]))]
        );
        // Escaped colons are not field separators.
        assert_eq!(ok(r"a\:b title\:x"), [should(term("a:b")), should(term("title:x"))]);
    }

    #[test]
    fn unknown_fields() {
        assert_eq!(
            parse("a Title:x"),
            Err(QueryError::UnknownField {
                field: "Title".into(),
                position: 2,
                known: vec!["title".into(), "body".into()]
            })
        );
        assert_eq!(
            parse("(x +foo:\"a\")"),
            Err(QueryError::UnknownField {
                field: "foo".into(),
                position: 4,
                known: vec!["title".into(), "body".into()]
            })
        );
        assert_eq!(
            parse("http://x"),
            Err(QueryError::UnknownField {
                field: "http".into(),
                position: 0,
                known: vec!["title".into(), "body".into()]
            })
        );
        assert!(matches!(parse("a:b"), Err(QueryError::UnknownField { .. })));
    }

    #[test]
    fn groups() {
        assert_eq!(
            ok("+(a b) -c"),
            [
                must(Query::Boolean(vec![should(term("a")), should(term("b"))])),
                must_not(term("c"))
            ]
        );
        assert_eq!(
            ok("a(b)c"),
            [
                should(term("a")),
                should(Query::Boolean(vec![should(term("b"))])),
                should(term("c"))
            ]
        );
        assert_eq!(
            ok("((a))"),
            [should(Query::Boolean(vec![should(Query::Boolean(vec![should(
                term("a")
            )]))]))]
        );
        let deep = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(parse(&deep).is_ok());
    }

    #[test]
    fn keywords() {
        assert_eq!(ok("a AND b"), [must(term("a")), must(term("b"))]);
        assert_eq!(ok("a OR b"), [should(term("a")), should(term("b"))]);
        assert_eq!(
            ok("a AND b OR c"),
            [must(term("a")), must(term("b")), should(term("c"))]
        );
        assert_eq!(ok("NOT a"), [must_not(term("a"))]);
        assert_eq!(ok("a AND NOT b"), [must(term("a")), must_not(term("b"))]);
        assert_eq!(ok("-a AND b"), [must_not(term("a")), must(term("b"))]);
        assert_eq!(ok("a AND -b"), [must(term("a")), must_not(term("b"))]);
        assert_eq!(ok("a NOT b"), [should(term("a")), must_not(term("b"))]);
        assert_eq!(
            ok("a AND (b OR c)"),
            [
                must(term("a")),
                must(Query::Boolean(vec![should(term("b")), should(term("c"))]))
            ]
        );
        assert_eq!(ok("NOT(a)"), [must_not(Query::Boolean(vec![should(term("a"))]))]);
        // Lower case or partial words are terms; escaped keywords too.
        assert_eq!(
            ok(r"and or not ANDROID \AND NOTE"),
            [
                should(term("and")),
                should(term("or")),
                should(term("not")),
                should(term("ANDROID")),
                should(term("AND")),
                should(term("NOTE"))
            ]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(
            ok(r#"\"a \(b\) \+c \-d e\\f g\ h"#),
            [
                should(term("\"a")),
                should(term("(b)")),
                should(term("+c")),
                should(term("-d")),
                should(term(r"e\f")),
                should(term("g h"))
            ]
        );
        assert_eq!(ok(r"title:a\ b\:c"), [should(fterm(Field::TITLE, "a b:c"))]);
        assert_eq!(ok(r"ti\tle:x"), [should(fterm(Field::TITLE, "x"))]);
        assert_eq!(ok("\\é"), [should(term("é"))]);
    }

    #[test]
    fn syntax_errors() {
        let cases: &[(&str, usize, &str)] = &[
            ("(a b", 0, "unclosed `(`"),
            ("a (b (c)", 2, "unclosed `(`"),
            ("a b)", 3, "unmatched `)`"),
            ("a) (b", 1, "unmatched `)`"),
            ("\"a b", 0, "unterminated phrase"),
            ("x title:\"a b", 8, "unterminated phrase"),
            ("\"a\\", 0, "unterminated phrase"),
            ("a +", 2, "`+` must be followed"),
            ("-", 0, "`-` must be followed"),
            ("a - ", 2, "`-` must be followed"),
            ("(a +)", 3, "`+` must be followed"),
            ("+-a", 0, "`+` must be followed"),
            ("- +a", 0, "`-` must be followed"),
            ("-NOT a", 0, "`-` must be followed"),
            ("NOT", 0, "`NOT` must be followed"),
            ("title:", 0, "`title:` must be followed"),
            ("a body: b", 2, "`body:` must be followed"),
            ("(title:)", 1, "`title:` must be followed"),
            ("AND a", 0, "`AND` must come between"),
            ("a AND", 2, "`AND` must be followed"),
            ("(a OR)", 3, "`OR` must be followed"),
            ("a AND OR b", 6, "`OR` must come between"),
            ("(AND a)", 1, "`AND` must come between"),
            ("a\\", 1, "escapes nothing"),
        ];
        for &(text, position, message) in cases {
            let (p, m) = syntax_err(text);
            assert_eq!(p, position, "{text:?}: {m}");
            assert!(m.contains(message), "{text:?}: {m}");
        }
    }

    #[test]
    fn too_deep() {
        let text = "(".repeat(MAX_DEPTH + 1) + "a" + &")".repeat(MAX_DEPTH + 1);
        let (position, message) = syntax_err(&text);
        assert_eq!(position, MAX_DEPTH);
        assert!(message.contains("nested"), "{message}");
        // Very deep input: an error, no stack overflow (with the size
        // limits out of the way).
        let unlimited = QueryLimits {
            max_bytes: usize::MAX,
            max_clauses: usize::MAX,
            ..QueryLimits::default()
        };
        let text = "(".repeat(1_000_000);
        let err = limited_err(&text, &unlimited);
        assert!(
            matches!(
                err,
                QueryError::Syntax {
                    position: MAX_DEPTH,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = "-(".repeat(100_000);
        let err = limited_err(&text, &unlimited);
        assert!(
            matches!(err, QueryError::Syntax { position, .. } if position == 2 * MAX_DEPTH + 1),
            "{err:?}"
        );
        // With the default limits too.
        assert_eq!(syntax_err(&"(".repeat(30_000)).0, MAX_DEPTH);
    }

    #[test]
    fn error_rendering() {
        let query = "title:(a b";
        let err = parse(query).unwrap_err();
        assert_eq!(
            render_error(query, &err),
            "title:(a b\n      ^ unclosed `(`: missing `)`"
        );
        let query = "é\tfoo:x";
        let err = parse(query).unwrap_err();
        assert_eq!(
            render_error(query, &err),
            "é foo:x\n  ^ unknown field `foo` (known fields: title, body)"
        );
        assert_eq!(err.position(), 3);
        assert_eq!(
            err.to_string(),
            "unknown field `foo` at position 3 (known fields: title, body)"
        );
    }

    /// The position and operator of an unsupported-syntax error.
    fn unsupported(text: &str) -> (usize, String) {
        match parse(text) {
            Err(QueryError::Unsupported { position, operator }) => (position, operator),
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn ranges_existence_and_match_all() {
        let t = Field::TITLE;
        let range = |lower, upper| vec![should(Query::Range { field: t, lower, upper })];
        let s = |v: &str| v.to_string();
        assert_eq!(
            ok("title:[a TO b]"),
            range(Bound::Included(s("a")), Bound::Included(s("b")))
        );
        assert_eq!(ok("title:{a TO *]"), range(Bound::Excluded(s("a")), Bound::Unbounded));
        assert_eq!(
            ok("title:[* TO \"x y\"}"),
            range(Bound::Unbounded, Bound::Excluded(s("x y")))
        );
        assert_eq!(ok("title:>=5"), range(Bound::Included(s("5")), Bound::Unbounded));
        assert_eq!(ok("title:>5"), range(Bound::Excluded(s("5")), Bound::Unbounded));
        assert_eq!(ok("title:<=5"), range(Bound::Unbounded, Bound::Included(s("5"))));
        assert_eq!(
            ok("title:<2020-01-01"),
            range(Bound::Unbounded, Bound::Excluded(s("2020-01-01")))
        );
        assert_eq!(ok("*:*"), vec![should(Query::MatchAll)]);
        assert_eq!(ok("+_exists_:body"), vec![must(Query::Exists { field: Field::BODY })]);
        for (text, says) in [
            ("title:[a TO b", "unclosed range"),
            ("title:[a b]", "expected `TO`"),
            ("title:[a TO b]x", "after a range"),
            ("title:[ TO b]", "expected `TO`"),
            ("_exists_:", "field name"),
            ("title:>", "must be followed by a value"),
        ] {
            let (_, m) = syntax_err(text);
            assert!(m.contains(says), "{text}: {m}");
        }
        assert!(matches!(parse("_exists_:nope"), Err(QueryError::UnknownField { .. })));
        for q in ["title:[a TO b]", "title:{\"a b\" TO *]", "*:*", "_exists_:title"] {
            let parsed = parse(q).unwrap();
            assert_eq!(parse(&to_query_string(&parsed)).unwrap(), parsed, "{q}");
        }
    }

    #[test]
    fn unsupported_syntax_is_refused() {
        let cases: &[(&str, usize, &str)] = &[
            ("tea*", 3, "wildcard `*`"),
            ("te?t", 2, "wildcard `?`"),
            ("what is love?", 12, "wildcard `?`"),
            ("a *", 2, "wildcard `*`"),
            ("title:te*", 8, "wildcard `*`"),
            ("title:*", 6, "wildcard `*`"),
            ("chien~1", 5, "fuzzy or proximity search `~`"),
            ("chien~", 5, "`~`"),
            (r#""ref name"~4"#, 10, "`~`"),
            (r#"title:"ref name"~4"#, 16, "`~`"),
            ("term^2", 4, "boost `^`"),
            (r#""a b"^2"#, 5, "boost `^`"),
            ("(a b)^2", 5, "boost `^`"),
            ("[a TO b]", 0, "range `[`"),
            ("{a TO b}", 0, "range `{`"),
            ("x ti[tle:a", 4, "range `[`"),
            ("a b]", 3, "range `]`"),
            ("/joh?n/", 0, "regular expression `/`"),
            ("title:/x/", 6, "regular expression `/`"),
            ("+(a -b\\ c*)", 9, "wildcard `*`"),
        ];
        for &(text, position, operator) in cases {
            let (p, o) = unsupported(text);
            assert_eq!(p, position, "{text:?}: {o}");
            assert!(o.contains(operator), "{text:?}: {o}");
        }
        let query = "chien~1";
        assert_eq!(
            render_error(query, &parse(query).unwrap_err()),
            "chien~1\n     ^ fuzzy or proximity search `~` is not supported"
        );
        assert_eq!(
            parse("tea*").unwrap_err().to_string(),
            "unsupported query syntax at position 3: wildcard `*` is not supported"
        );
    }

    #[test]
    fn operator_characters_escaped_in_phrases_or_inside_words_are_text() {
        assert_eq!(
            ok(r"tea\* a\?b c\~1 x\^2 \[a \{b\} \/x/ title:\>5 \_exists_\:x"),
            [
                should(term("tea*")),
                should(term("a?b")),
                should(term("c~1")),
                should(term("x^2")),
                should(term("[a")),
                should(term("{b}")),
                should(term("/x/")),
                should(fterm(Field::TITLE, ">5")),
                should(term("_exists_:x")),
            ]
        );
        assert_eq!(
            ok(r#""a* b? c~1 d^2 [e TO f] /g/ !h""#),
            [should(phrase(None, "a* b? c~1 d^2 [e TO f] /g/ !h"))]
        );
        // Punctuation inside ordinary words, as the tokenizer reads it.
        assert_eq!(
            ok("u.s 1,000 network's and/or TCP/IP yahoo! a>b <b> x&y a|b a&&b"),
            [
                should(term("u.s")),
                should(term("1,000")),
                should(term("network's")),
                should(term("and/or")),
                should(term("TCP/IP")),
                should(term("yahoo!")),
                should(term("a>b")),
                should(term("<b>")),
                should(term("x&y")),
                should(term("a|b")),
                should(term("a&&b")),
            ]
        );
    }

    #[test]
    fn lucene_boolean_symbols() {
        assert_eq!(ok("a && b"), [must(term("a")), must(term("b"))]);
        assert_eq!(ok("a || b"), [should(term("a")), should(term("b"))]);
        assert_eq!(ok("!a b"), [must_not(term("a")), should(term("b"))]);
        assert_eq!(ok("a && !b"), [must(term("a")), must_not(term("b"))]);
        assert_eq!(ok("! a"), [must_not(term("a"))]);
        assert_eq!(ok("!(a)"), [must_not(Query::Boolean(vec![should(term("a"))]))]);
        assert_eq!(
            ok(r"\&& \!a \||"),
            [should(term("&&")), should(term("!a")), should(term("||"))]
        );
        for (text, position, message) in [
            ("&& a", 0, "`&&` must come between"),
            ("a ||", 2, "`||` must be followed"),
            ("a !", 2, "`!` must be followed"),
            ("!-a", 0, "`!` must be followed"),
            ("-!a", 0, "`-` must be followed"),
        ] {
            let (p, m) = syntax_err(text);
            assert_eq!(p, position, "{text:?}: {m}");
            assert!(m.contains(message), "{text:?}: {m}");
        }
    }

    /// The error of `text` parsed over the default schema within `limits`.
    fn limited_err(text: &str, limits: &QueryLimits) -> QueryError {
        parse_limited(text, &Schema::default(), limits).unwrap_err()
    }

    #[test]
    fn size_limits() {
        let limits = QueryLimits {
            max_bytes: 20,
            max_clauses: 4,
            max_depth: 2,
            ..QueryLimits::default()
        };
        let fits = |text: &str| parse_limited(text, &Schema::default(), &limits).unwrap();
        fits("a b c d");
        fits("(a b) c");
        fits("((a))");
        fits(&"x".repeat(20));
        let err = limited_err(&"x".repeat(21), &limits);
        assert!(matches!(err, QueryError::TooLarge { position: 20, .. }), "{err:?}");
        assert!(err.message().contains("21 bytes long"), "{err}");
        // The position is a character boundary.
        let err = limited_err(&format!("x{}", "é".repeat(10)), &limits);
        assert!(matches!(err, QueryError::TooLarge { position: 19, .. }), "{err:?}");
        let err = limited_err("a b c d e", &limits);
        assert!(matches!(err, QueryError::TooLarge { position: 8, .. }), "{err:?}");
        assert!(err.message().contains("more than 4 clauses"), "{err}");
        // A group counts as a clause.
        let err = limited_err("(a b c) d", &limits);
        assert!(matches!(err, QueryError::TooLarge { position: 8, .. }), "{err:?}");
        let err = limited_err("(((a)))", &limits);
        assert!(matches!(err, QueryError::Syntax { position: 2, .. }), "{err:?}");
        // A depth over the ceiling is the ceiling: no stack overflow.
        let deep = QueryLimits {
            max_depth: usize::MAX,
            max_bytes: usize::MAX,
            ..QueryLimits::default()
        };
        let text = "(".repeat(100_000);
        let err = limited_err(&text, &deep);
        assert_eq!(err.position(), QueryLimits::DEPTH_CEILING, "{err:?}");
    }

    #[test]
    fn default_limits_refuse_huge_queries_at_once() {
        // 10 MB of text: refused before anything is read.
        let huge = "word ".repeat(2_000_000);
        let started = std::time::Instant::now();
        let err = parse(&huge).unwrap_err();
        assert!(matches!(err, QueryError::TooLarge { position: 65_536, .. }), "{err:?}");
        // A 40,000-word phrase, 1,025 terms.
        let phrase = format!("\"{}\"", "word ".repeat(40_000));
        assert!(matches!(parse(&phrase), Err(QueryError::TooLarge { .. })));
        let many = "w ".repeat(1025);
        assert!(matches!(parse(&many), Err(QueryError::TooLarge { position: 2048, .. })));
        assert!(parse(&"w ".repeat(1024)).is_ok());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn long_queries_render_a_window_around_the_error() {
        let query = format!("{}tea* {}", "a ".repeat(1000), "b ".repeat(1000));
        let err = parse(&query).unwrap_err();
        let rendered = render_error(&query, &err);
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with('…') && lines[0].ends_with('…'), "{rendered}");
        assert!(lines[0].contains(" a a tea* b b "), "{rendered}");
        assert_eq!(lines[0].chars().count(), 1 + 60 + 60 + 1);
        // The caret is under the `*`.
        let column = lines[1].find('^').unwrap();
        assert_eq!(lines[0].chars().nth(column), Some('*'), "{rendered}");
    }

    /// The query lines of the search-benchmark-game command files: the
    /// shared copy when it is there, and a sample of them always.
    fn benchmark_queries() -> Vec<String> {
        let mut queries: Vec<String> = [
            "the",
            "+griffith +observatory",
            "\"griffith observatory\"",
            "griffith observatory",
            "+python -snake -monty",
            "+boulder +city +nevada",
            "\"ugly people\"",
            "2009 nissan 350z",
            "+1 +2 +3",
        ]
        .map(String::from)
        .to_vec();
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/queries/search-benchmark-game");
        for name in ["commands.txt", "commands-intersection.txt"] {
            let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
                continue;
            };
            queries.extend(
                text.lines()
                    .filter_map(|l| l.split_once('\t'))
                    .map(|(_, q)| q.to_string()),
            );
        }
        if dir.exists() {
            assert!(
                queries.len() > 10_000,
                "{} queries read from {}",
                queries.len(),
                dir.display()
            );
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("queries.txt")) {
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                queries.push(v["query"].as_str().unwrap().to_string());
            }
        }
        queries
    }

    #[test]
    fn benchmark_queries_parse_as_written() {
        for q in benchmark_queries() {
            let parsed = parse(&q).unwrap_or_else(|e| panic!("{q:?}: {e}"));
            // Printed back, the query is what was written: every word,
            // operator and phrase was read as such.
            let words: Vec<&str> = q.split_whitespace().collect();
            assert_eq!(to_query_string(&parsed), words.join(" "), "{q:?}");
        }
    }

    #[test]
    fn printing() {
        let q = Query::Boolean(vec![
            must(fterm(Field::TITLE, "a b")),
            must_not(phrase(Some(Field::BODY), r#"say "hi" \"#)),
            should(Query::Boolean(vec![
                should(term("-x")),
                should(term("AND")),
                should(term("c:d(e)")),
            ])),
            should(Query::Boolean(vec![])),
        ]);
        let printed = to_query_string(&q);
        assert_eq!(printed, r#"+title:a\ b -body:"say \"hi\" \\" (\-x \AND c\:d\(e\)) ()"#);
        assert_eq!(parse(&printed), Ok(q));
        assert_eq!(to_query_string(&term("x")), "x");
        assert_eq!(parse("x"), Ok(Query::Boolean(vec![should(term("x"))])));
    }

    /// Mostly plain lowercase words; sometimes words full of characters
    /// the printer must escape.
    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => "[a-z]{1,8}",
            1 => "[a-zA-Z0-9:()\"\\\\+\\- \té\u{3000}]{1,6}",
            1 => prop::sample::select(vec![
                "AND", "OR", "NOT", "title", "title:", "body:x", "-", "+", ":", "\\",
            ])
            .prop_map(str::to_string),
        ]
    }

    fn field() -> impl Strategy<Value = Option<Field>> {
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(Field::TITLE)),
            1 => Just(Some(Field::BODY)),
        ]
    }

    fn occur() -> impl Strategy<Value = Occur> {
        prop_oneof![Just(Occur::Should), Just(Occur::Must), Just(Occur::MustNot)]
    }

    /// Random query trees: terms, phrases of 1–4 words, nested booleans.
    fn query() -> impl Strategy<Value = Query> {
        let leaf = prop_oneof![
            (field(), word()).prop_map(|(field, text)| Query::Term { field, text }),
            (field(), prop::collection::vec(word(), 1..=4)).prop_map(|(field, words)| {
                Query::Phrase {
                    field,
                    text: words.join(" "),
                }
            }),
        ];
        leaf.prop_recursive(5, 48, 5, |inner| {
            prop::collection::vec((occur(), inner), 0..5).prop_map(|clauses| {
                Query::Boolean(
                    clauses
                        .into_iter()
                        .map(|(occur, query)| Clause { occur, query })
                        .collect(),
                )
            })
        })
    }

    fn top_level() -> impl Strategy<Value = Query> {
        prop::collection::vec((occur(), query()), 0..6).prop_map(|clauses| {
            Query::Boolean(
                clauses
                    .into_iter()
                    .map(|(occur, query)| Clause { occur, query })
                    .collect(),
            )
        })
    }

    /// Strings rich in the query syntax's special characters.
    fn syntaxy() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            3 => "[a-z]{1,3}",
            4 => prop::sample::select(vec![
                " ", "(", ")", "\"", "+", "-", ":", "\\", "title:", "body:", "AND", "OR",
                "NOT", "foo:", "\t", "é", "\u{3000}", "((((((((", "))))",
            ])
            .prop_map(str::to_string),
        ];
        prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn round_trip(q in top_level()) {
            let printed = to_query_string(&q);
            prop_assert_eq!(parse(&printed), Ok(q), "printed: {}", printed);
        }

        #[test]
        fn never_panics(text in prop_oneof![any::<String>(), syntaxy(), "\\PC{0,40}"]) {
            match parse(&text) {
                Ok(q) => {
                    prop_assert!(matches!(q, Query::Boolean(_)));
                    // What parses prints to something that parses the same.
                    let printed = to_query_string(&q);
                    prop_assert_eq!(parse(&printed), Ok(q), "printed: {}", printed);
                }
                Err(e) => {
                    let p = e.position();
                    prop_assert!(p < text.len() && text.is_char_boundary(p), "{:?}", e);
                    let rendered = render_error(&text, &e);
                    prop_assert_eq!(rendered.lines().count(), 2);
                }
            }
        }

        #[test]
        fn operator_characters_round_trip(
            words in prop::collection::vec("[a-z*?~^\\[\\]{}/!&|<>:]{1,5}", 1..6),
            field in field(),
        ) {
            let q = Query::Boolean(
                words
                    .into_iter()
                    .map(|text| Clause { occur: Occur::Should, query: Query::Term { field, text } })
                    .collect(),
            );
            let printed = to_query_string(&q);
            prop_assert_eq!(parse(&printed), Ok(q), "printed: {}", printed);
        }

        #[test]
        fn deep_parentheses_never_overflow(
            depth in 0usize..300,
            prefix in prop::sample::select(vec!["", "+", "-", "title:", "NOT ", "a AND "]),
        ) {
            let text = format!("{}x{}", format!("{prefix}(").repeat(depth), ")".repeat(depth));
            let result = parse(&text);
            prop_assert_eq!(result.is_ok(), depth <= MAX_DEPTH, "{:?}", result);
        }
    }
}
