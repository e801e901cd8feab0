//! Snippets: a window of a field's text around the matched terms, with the
//! matches marked, computed from the byte offsets stored in the postings.

use serde::{Deserialize, Serialize};

/// Text with byte ranges to highlight.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Snippet {
    /// The excerpt (with `…` where it was cut).
    pub text: String,
    /// Byte ranges of `text` to highlight, sorted and disjoint.
    pub marks: Vec<(usize, usize)>,
}

impl Snippet {
    /// The text with each mark wrapped in `open`/`close`.
    pub fn render(&self, open: &str, close: &str) -> String {
        let mut out = String::with_capacity(self.text.len() + self.marks.len() * (open.len() + close.len()));
        let mut at = 0;
        for &(s, e) in &self.marks {
            out.push_str(&self.text[at..s]);
            out.push_str(open);
            out.push_str(&self.text[s..e]);
            out.push_str(close);
            at = e;
        }
        out.push_str(&self.text[at..]);
        out
    }
}

/// Builds a snippet of at most about `max_bytes` bytes of `text` around the
/// densest group of `matches` (byte ranges; invalid ones are ignored).
/// `max_bytes == usize::MAX` keeps the whole text.
pub fn make_snippet(text: &str, matches: &[(u32, u32)], max_bytes: usize) -> Snippet {
    let mut m: Vec<(usize, usize)> = matches
        .iter()
        .map(|&(s, e)| (s as usize, e as usize))
        .filter(|&(s, e)| s < e && e <= text.len() && text.is_char_boundary(s) && text.is_char_boundary(e))
        .collect();
    m.sort_unstable();
    m.dedup();
    // Drop overlaps.
    let mut marks: Vec<(usize, usize)> = Vec::with_capacity(m.len());
    for r in m {
        if marks.last().is_none_or(|l| r.0 >= l.1) {
            marks.push(r);
        }
    }
    if text.len() <= max_bytes {
        return Snippet {
            text: text.to_string(),
            marks,
        };
    }
    // The window start (a match start) covering the most matches.
    let (mut best_i, mut best_n) = (0usize, 0usize);
    let mut j = 0;
    for i in 0..marks.len() {
        while j < marks.len() && marks[j].1 <= marks[i].0 + max_bytes {
            j += 1;
        }
        if j - i > best_n {
            best_n = j - i;
            best_i = i;
        }
    }
    let anchor = marks.get(best_i).map_or(0, |m| m.0);
    let mut start = anchor.saturating_sub(max_bytes / 5);
    if start > 0 {
        // Start at a word boundary after `start` if one is near.
        if let Some(ws) = text[floor(text, start)..anchor].find(char::is_whitespace) {
            start = floor(text, start) + ws + 1;
        }
    }
    let start = floor(text, start.min(anchor));
    let mut end = floor(text, (start + max_bytes).min(text.len()));
    if end < text.len() {
        if let Some(ws) = text[start..end].rfind(char::is_whitespace) {
            if ws > max_bytes / 2 {
                end = start + ws;
            }
        }
    }
    let mut out = String::new();
    let mut shift = 0isize;
    if start > 0 {
        out.push('…');
        shift = '…'.len_utf8() as isize;
    }
    out.push_str(&text[start..end]);
    let delta = shift - start as isize;
    let marks = marks
        .into_iter()
        .filter(|&(s, e)| s >= start && e <= end)
        .map(|(s, e)| ((s as isize + delta) as usize, (e as isize + delta) as usize))
        .collect();
    if end < text.len() {
        out.push('…');
    }
    Snippet { text: out, marks }
}

fn floor(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Highlighted excerpts of one hit: per stored field, in schema order, a
/// window of its text around the matches (the whole text when it is short).
/// Serialised as an object from field name to snippet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Highlight {
    /// Field name and snippet, in schema order.
    pub fields: Vec<(String, Snippet)>,
}

impl Highlight {
    /// The snippet of field `name` (an empty one if the hit has none).
    pub fn get(&self, name: &str) -> &Snippet {
        static EMPTY: Snippet = Snippet {
            text: String::new(),
            marks: Vec::new(),
        };
        self.fields.iter().find(|(n, _)| n == name).map_or(&EMPTY, |(_, s)| s)
    }

    /// The `title` snippet (default schema).
    pub fn title(&self) -> &Snippet {
        self.get("title")
    }

    /// The `body` snippet (default schema).
    pub fn body(&self) -> &Snippet {
        self.get("body")
    }
}

impl Serialize for Highlight {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.fields.len()))?;
        for (name, snippet) in &self.fields {
            m.serialize_entry(name, snippet)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Highlight {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Highlight, D::Error> {
        let map = std::collections::BTreeMap::<String, Snippet>::deserialize(d)?;
        Ok(Highlight {
            fields: map.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_kept_whole() {
        let s = make_snippet("the quick fox", &[(4, 9)], 100);
        assert_eq!(s.render("[", "]"), "the [quick] fox");
    }

    #[test]
    fn window_goes_to_the_matches() {
        let text = format!("{} needle in a haystack {}", "x ".repeat(200), "y ".repeat(200));
        let at = text.find("needle").unwrap() as u32;
        let s = make_snippet(&text, &[(at, at + 6)], 60);
        let r = s.render("<b>", "</b>");
        assert!(r.contains("<b>needle</b>"), "{r}");
        assert!(r.starts_with('…') && r.ends_with('…'));
        assert!(s.text.len() <= 60 + 6);
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}", ms in proptest::collection::vec((0u32..250, 0u32..30), 0..8), max in 1usize..120) {
            let matches: Vec<(u32, u32)> = ms.iter().map(|&(s, l)| (s, s + l)).collect();
            let s = make_snippet(&text, &matches, max);
            for &(a, b) in &s.marks {
                prop_assert!(a < b && b <= s.text.len());
                prop_assert!(s.text.is_char_boundary(a) && s.text.is_char_boundary(b));
            }
            let _ = s.render("<", ">");
        }
    }
}
