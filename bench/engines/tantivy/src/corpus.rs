//! Reading the protocol's JSON lines corpus: `id` (or `url`; a string or an
//! integer), `title` and `body` (strings; missing or `null` = empty), and
//! the typed fields of `bench/PROTOCOL.md` when present. Other keys are
//! ignored; a duplicate key, a value of the wrong type, a bad date or
//! invalid JSON is a bad record, reported as `FILE:LINE: message`. Blank
//! lines and a UTF-8 byte order mark are skipped.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// One record.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    pub title: String,
    pub body: String,
    pub category: Vec<String>,
    pub tags: Vec<String>,
    /// Epoch milliseconds.
    pub date: Option<i64>,
    pub price: Option<f64>,
    pub popularity: Option<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IdValue {
    Str(String),
    U64(u64),
    I64(i64),
}

impl IdValue {
    fn text(self) -> String {
        match self {
            IdValue::Str(s) => s,
            IdValue::U64(n) => n.to_string(),
            IdValue::I64(n) => n.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Keywords {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DateValue {
    Iso(String),
    Millis(i64),
}

/// The record as JSON; unknown keys are ignored, duplicates are errors.
#[derive(Deserialize)]
struct Raw {
    id: Option<IdValue>,
    url: Option<IdValue>,
    title: Option<String>,
    body: Option<String>,
    category: Option<Keywords>,
    tags: Option<Keywords>,
    date: Option<DateValue>,
    price: Option<f64>,
    popularity: Option<i64>,
}

fn keywords(k: Option<Keywords>) -> Vec<String> {
    match k {
        None => Vec::new(),
        Some(Keywords::One(s)) => vec![s],
        Some(Keywords::Many(v)) => v,
    }
}

/// Parses one line; the error is the message for `FILE:LINE: ...`.
pub fn parse(line: &str) -> Result<Record, String> {
    let raw: Raw = serde_json::from_str(line).map_err(|e| {
        let msg = e.to_string();
        let msg = match msg.rfind(" at line ") {
            Some(p) => msg[..p].to_string(),
            None => msg,
        };
        let msg = msg.replace(
            "data did not match any variant of untagged enum Keywords",
            "a keyword field must be a string or an array of strings",
        );
        let msg = msg.replace(
            "data did not match any variant of untagged enum DateValue",
            "`date` must be an ISO-8601 string or an integer of epoch milliseconds",
        );
        format!("bad record: {msg} (column {})", e.column())
    })?;
    let id = match raw.id.or(raw.url) {
        Some(id) => id.text(),
        None => return Err("missing `id` (or `url`) field".into()),
    };
    if id.is_empty() {
        return Err("empty `id` (or `url`)".into());
    }
    let date = match raw.date {
        None => None,
        Some(DateValue::Millis(ms)) => Some(ms),
        Some(DateValue::Iso(s)) => Some(crate::date::parse(&s).map_err(|e| format!("field `date`: {e}"))?),
    };
    Ok(Record {
        id,
        title: raw.title.unwrap_or_default(),
        body: raw.body.unwrap_or_default(),
        category: keywords(raw.category),
        tags: keywords(raw.tags),
        date,
        price: raw.price,
        popularity: raw.popularity,
    })
}

/// The records of a JSON lines file, in order.
pub struct Corpus {
    path: PathBuf,
    reader: BufReader<File>,
    line: u64,
    buf: String,
}

impl Corpus {
    pub fn open(path: &Path) -> Result<Corpus> {
        let file = File::open(path).with_context(|| format!("cannot open corpus {}", path.display()))?;
        Ok(Corpus {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 20, file),
            line: 0,
            buf: String::new(),
        })
    }

    /// The next record, `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_line(&mut self.buf)
                .with_context(|| format!("{}:{}: cannot read", self.path.display(), self.line + 1))?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let mut text = self.buf.trim_end_matches(['\n', '\r']);
            if self.line == 1 {
                text = text.trim_start_matches('\u{feff}');
            }
            if text.trim().is_empty() {
                continue;
            }
            match parse(text) {
                Ok(r) => return Ok(Some(r)),
                Err(e) => bail!("{}:{}: {e}", self.path.display(), self.line),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records() {
        let r = parse(r#"{"url": 5, "title": null, "category": "a", "tags": ["x", "y"], "date": "2011-03-14T15:09:26Z", "price": 3, "popularity": 7, "other": [1]}"#).unwrap();
        assert_eq!(r.id, "5");
        assert_eq!((r.category.len(), r.tags.len()), (1, 2));
        assert_eq!(
            (r.date, r.price, r.popularity),
            (Some(1_300_115_366_000), Some(3.0), Some(7))
        );
        for bad in [
            r#"{"id": "a", "price": "cheap"}"#,
            r#"{"id": "a", "popularity": 7.5}"#,
            r#"{"id": "a", "date": "2013-02-29"}"#,
            r#"{"id": "a", "tags": [1]}"#,
            r#"{"id": "a", "id": "b"}"#,
            r#"{"title": "x"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
