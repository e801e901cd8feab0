//! A document's values as its fields index them: found by path (objects
//! and arrays walked), converted by type (keywords normalised, numbers
//! checked, dates parsed), each bad value an error naming the field.

use std::borrow::Cow;

use serde_json::Value;

use super::document::Fields;
use super::field::{FieldEntry, FieldType, KeywordOptions};
use crate::column::{double_code, long_code};

/// Calls `f` with every value at `path` in `fields`: a key equal to the
/// path, or an object (or array of objects) whose keys continue it
/// (`user.name` is `{"user.name": ..}` or `{"user": {"name": ..}}`).
/// Arrays are flattened; `null`s are absent values.
pub fn values_at<'a>(fields: &'a Fields, path: &str, f: &mut impl FnMut(&'a Value)) {
    for (k, v) in fields.iter() {
        step(k, v, path, f);
    }
}

fn step<'a>(key: &str, v: &'a Value, path: &str, f: &mut impl FnMut(&'a Value)) {
    if key == path {
        emit(v, f);
    } else if let Some(rest) = path.strip_prefix(key).and_then(|r| r.strip_prefix('.')) {
        descend(v, rest, f);
    }
}

fn descend<'a>(v: &'a Value, path: &str, f: &mut impl FnMut(&'a Value)) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                step(k, v, path, f);
            }
        }
        Value::Array(a) => {
            for v in a {
                descend(v, path, f);
            }
        }
        _ => {}
    }
}

fn emit<'a>(v: &'a Value, f: &mut impl FnMut(&'a Value)) {
    match v {
        Value::Null => {}
        Value::Array(a) => {
            for v in a {
                emit(v, f);
            }
        }
        v => f(v),
    }
}

/// A value as its field indexes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Indexed<'a> {
    /// Text to analyse.
    Text(Cow<'a, str>),
    /// A keyword (normalised).
    Keyword(Cow<'a, str>),
    /// A number, date or boolean as its column code.
    Code(u64),
    /// Nothing to index (a keyword over `ignore_above`).
    Skip,
}

/// A scalar value as text (numbers and booleans as JSON writes them), as
/// text and keyword fields take it; `None` for objects and arrays.
pub fn scalar_text(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        _ => None,
    }
}

/// `v` converted for `entry`'s type, or why it cannot be.
pub fn convert<'a>(entry: &FieldEntry, v: &'a Value) -> Result<Indexed<'a>, String> {
    let bad = |what: &str| format!("field `{}` is a {} field: {what}", entry.name, entry.ty.name());
    match &entry.ty {
        FieldType::Text(_) => scalar_text(v)
            .map(Indexed::Text)
            .ok_or_else(|| bad(&format!("it cannot hold {}", super::json_kind(v)))),
        FieldType::Keyword(o) => {
            let s = scalar_text(v).ok_or_else(|| bad(&format!("it cannot hold {}", super::json_kind(v))))?;
            Ok(keyword(o, s))
        }
        FieldType::Long(_) => long(v).map(|n| Indexed::Code(long_code(n))).map_err(|e| bad(&e)),
        FieldType::Double(_) => double(v).map(|x| Indexed::Code(double_code(x))).map_err(|e| bad(&e)),
        FieldType::Boolean(_) => match v {
            Value::Bool(b) => Ok(Indexed::Code(*b as u64)),
            Value::String(s) if s == "true" => Ok(Indexed::Code(1)),
            Value::String(s) if s == "false" || s.is_empty() => Ok(Indexed::Code(0)),
            other => Err(bad(&format!("`{other}` is not true or false"))),
        },
        FieldType::Date(o) => date(v, &o.format)
            .map(|ms| Indexed::Code(long_code(ms)))
            .map_err(|e| bad(&e)),
    }
}

/// A keyword value normalised by `o` (or skipped over `ignore_above`).
pub fn keyword<'a>(o: &KeywordOptions, s: Cow<'a, str>) -> Indexed<'a> {
    if o.ignore_above.is_some_and(|max| s.chars().count() > max as usize) {
        return Indexed::Skip;
    }
    if o.lowercase && s.chars().any(|c| c.to_lowercase().ne(std::iter::once(c))) {
        return Indexed::Keyword(Cow::Owned(s.to_lowercase()));
    }
    Indexed::Keyword(s)
}

/// A JSON value as a long: integers, floats (truncated toward zero, as
/// Elasticsearch coerces them) and numeric strings.
pub fn long(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i);
            }
            let x = n.as_f64().unwrap_or(f64::NAN);
            float_to_long(x).ok_or_else(|| format!("{n} is out of the range of a long"))
        }
        Value::String(s) => {
            let t = s.trim();
            if let Ok(i) = t.parse::<i64>() {
                return Ok(i);
            }
            match t.parse::<f64>() {
                Ok(x) if x.is_finite() => {
                    float_to_long(x).ok_or_else(|| format!("`{s}` is out of the range of a long"))
                }
                _ => Err(format!("`{s}` is not a number")),
            }
        }
        other => Err(format!("it cannot hold {}", super::json_kind(other))),
    }
}

fn float_to_long(x: f64) -> Option<i64> {
    let t = x.trunc();
    (-9.223_372_036_854_776e18..9.223_372_036_854_776e18)
        .contains(&t)
        .then_some(t as i64)
}

/// A JSON value as a finite double: numbers and numeric strings.
pub fn double(v: &Value) -> Result<f64, String> {
    let x = match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a double"))?,
        Value::String(s) => s.trim().parse::<f64>().map_err(|_| format!("`{s}` is not a number"))?,
        other => return Err(format!("it cannot hold {}", super::json_kind(other))),
    };
    if !x.is_finite() {
        return Err(format!("{x} is not a finite number"));
    }
    Ok(x)
}

/// The formats of `formats` (`a||b`) that are not known, if any.
pub fn unknown_date_format(formats: &str) -> Option<&str> {
    formats.split("||").find(|f| {
        !matches!(
            f.trim(),
            "strict_date_optional_time"
                | "date_optional_time"
                | "epoch_millis"
                | "epoch_second"
                | "yyyy/MM/dd HH:mm:ss"
                | "yyyy/MM/dd"
        )
    })
}

/// A JSON value as milliseconds since the epoch, by the first of
/// `formats` that reads it.
pub fn date(v: &Value, formats: &str) -> Result<i64, String> {
    let mut tried = Vec::new();
    for f in formats.split("||").map(str::trim) {
        let r = match (f, v) {
            ("strict_date_optional_time" | "date_optional_time", Value::String(s)) => parse_iso(s),
            ("yyyy/MM/dd HH:mm:ss", Value::String(s)) if s.len() == 19 => slash_date(s).ok_or_else(String::new),
            ("yyyy/MM/dd", Value::String(s)) if s.len() == 10 => slash_date(s).ok_or_else(String::new),
            ("epoch_millis", Value::Number(_)) => long(v),
            ("epoch_millis", Value::String(s)) => s.trim().parse::<i64>().map_err(|_| String::new()),
            ("epoch_second", Value::Number(_)) => long(v).and_then(|s| s.checked_mul(1000).ok_or_default()),
            ("epoch_second", Value::String(s)) => s
                .trim()
                .parse::<i64>()
                .map_err(|_| String::new())
                .and_then(|s| s.checked_mul(1000).ok_or_default()),
            _ => Err(String::new()),
        };
        match r {
            Ok(ms) => return Ok(ms),
            Err(e) if !e.is_empty() => tried.push(e),
            Err(_) => {}
        }
    }
    let shown = match v {
        Value::String(s) => format!("`{s}`"),
        other => other.to_string(),
    };
    let mut msg = format!("{shown} is not a date in the format {formats}");
    if let Some(why) = tried.first() {
        msg.push_str(&format!(" ({why})"));
    }
    Err(msg)
}

trait OkOrDefault<T> {
    fn ok_or_default(self) -> Result<T, String>;
}

impl<T> OkOrDefault<T> for Option<T> {
    fn ok_or_default(self) -> Result<T, String> {
        self.ok_or_else(|| "out of range".to_string())
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number from 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Milliseconds of an ISO-8601 date (Elasticsearch's
/// `strict_date_optional_time`): `yyyy`, `yyyy-MM`, `yyyy-MM-dd`,
/// optionally `THH`, `:mm`, `:ss`, `.S..` (up to nine digits) and a zone
/// (`Z`, `±HH`, `±HHmm`, `±HH:mm`; none means UTC).
pub fn parse_iso(s: &str) -> Result<i64, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let err = |what: &str| format!("`{s}`: {what}");
    let digits = |i: &mut usize, n: usize| -> Option<i64> {
        let part = b.get(*i..*i + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *i += n;
        Some(part.iter().fold(0i64, |a, &c| a * 10 + (c - b'0') as i64))
    };
    let year = digits(&mut i, 4).ok_or_else(|| err("expected a four-digit year"))?;
    let (mut month, mut day) = (1u32, 1u32);
    if b.get(i) == Some(&b'-') {
        i += 1;
        month = digits(&mut i, 2).ok_or_else(|| err("expected a two-digit month"))? as u32;
        if b.get(i) == Some(&b'-') {
            i += 1;
            day = digits(&mut i, 2).ok_or_else(|| err("expected a two-digit day"))? as u32;
        }
    }
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(err("no such day"));
    }
    let mut ms: i64 = 0;
    if b.get(i) == Some(&b'T') {
        i += 1;
        let h = digits(&mut i, 2).ok_or_else(|| err("expected a two-digit hour"))?;
        let (mut mi, mut sec) = (0, 0);
        if b.get(i) == Some(&b':') {
            i += 1;
            mi = digits(&mut i, 2).ok_or_else(|| err("expected two-digit minutes"))?;
            if b.get(i) == Some(&b':') {
                i += 1;
                sec = digits(&mut i, 2).ok_or_else(|| err("expected two-digit seconds"))?;
                if matches!(b.get(i), Some(b'.' | b',')) {
                    i += 1;
                    let start = i;
                    while i < b.len() && b[i].is_ascii_digit() && i - start < 9 {
                        i += 1;
                    }
                    if i == start {
                        return Err(err("expected fraction digits"));
                    }
                    let frac = &s[start..i];
                    let padded = format!("{frac:0<3}");
                    ms += padded[..3].parse::<i64>().expect("digits");
                }
            }
        }
        if h > 23 || mi > 59 || sec > 59 {
            return Err(err("no such time"));
        }
        ms += ((h * 60 + mi) * 60 + sec) * 1000;
        match b.get(i) {
            None => {}
            Some(b'Z') => i += 1,
            Some(&c @ (b'+' | b'-')) => {
                i += 1;
                let zh = digits(&mut i, 2).ok_or_else(|| err("expected a two-digit zone hour"))?;
                if b.get(i) == Some(&b':') {
                    i += 1;
                }
                let zm = if i < b.len() {
                    digits(&mut i, 2).ok_or_else(|| err("expected two-digit zone minutes"))?
                } else {
                    0
                };
                if zh > 18 || zm > 59 {
                    return Err(err("no such zone offset"));
                }
                let off = (zh * 60 + zm) * 60_000;
                ms -= if c == b'+' { off } else { -off };
            }
            Some(_) => return Err(err("unexpected characters after the time")),
        }
    }
    if i != b.len() {
        return Err(err("unexpected characters"));
    }
    days_from_civil(year, month, day)
        .checked_mul(86_400_000)
        .and_then(|d| d.checked_add(ms))
        .ok_or_else(|| err("out of range"))
}

/// Formats milliseconds since the epoch as ISO-8601 UTC
/// (`2011-03-14T15:09:26.000Z`), as Elasticsearch shows dates.
pub fn format_iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, rest) = (rest / 3_600_000, rest % 3_600_000);
    let (mi, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1000, rest % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// Whether dynamic mapping takes string `s` for a date (Elasticsearch's
/// `dynamic_date_formats`: `strict_date_optional_time` with at least a
/// full date, or `yyyy/MM/dd HH:mm:ss`, `yyyy/MM/dd`).
pub fn looks_like_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() >= 10 && b[4] == b'-' && b[7] == b'-' {
        return parse_iso(s).is_ok();
    }
    slash_date(s).is_some()
}

/// `yyyy/MM/dd` or `yyyy/MM/dd HH:mm:ss` as milliseconds.
pub fn slash_date(s: &str) -> Option<i64> {
    let (date, time) = match s.split_once(' ') {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('/').collect();
    if parts.len() != 3 || parts[0].len() != 4 || parts[1].len() != 2 || parts[2].len() != 2 {
        return None;
    }
    let iso = match time {
        Some(t) if t.len() == 8 => format!("{}-{}-{}T{t}Z", parts[0], parts[1], parts[2]),
        Some(_) => return None,
        None => format!("{}-{}-{}", parts[0], parts[1], parts[2]),
    };
    parse_iso(&iso).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_found_by_path() {
        let doc: Fields = serde_json::from_value(json!({
            "a": 1, "user": {"name": "x", "tags": ["p", null, ["q"]]},
            "user.name": "y", "list": [{"k": 1}, {"k": [2, 3]}, {"j": 4}], "n": null
        }))
        .unwrap();
        let at = |p: &str| {
            let mut out = Vec::new();
            values_at(&doc, p, &mut |v| out.push(v.clone()));
            out
        };
        assert_eq!(at("a"), vec![json!(1)]);
        let mut names = at("user.name");
        names.sort_by_key(|v| v.to_string());
        assert_eq!(names, vec![json!("x"), json!("y")]);
        assert_eq!(at("user.tags"), vec![json!("p"), json!("q")]);
        assert_eq!(at("list.k"), vec![json!(1), json!(2), json!(3)]);
        assert!(at("n").is_empty() && at("missing").is_empty() && at("user.nam").is_empty());
    }

    #[test]
    fn dates_parse_like_elasticsearch() {
        let f = crate::schema::field::DEFAULT_DATE_FORMAT;
        assert_eq!(date(&json!("1970-01-01"), f), Ok(0));
        assert_eq!(date(&json!("1970-01-02T00:00:01Z"), f), Ok(86_401_000));
        assert_eq!(date(&json!("2000-02-29T12:30:45.123+02:00"), f), Ok(951_820_245_123));
        assert_eq!(date(&json!("2000-02"), f), Ok(949_363_200_000));
        assert_eq!(date(&json!("2000"), f), Ok(946_684_800_000));
        assert_eq!(date(&json!(1234), f), Ok(1234));
        assert_eq!(date(&json!("12345"), f), Ok(12345));
        assert_eq!(
            date(&json!("1234"), f),
            Ok(days_from_civil(1234, 1, 1) * 86_400_000),
            "a year, as in Elasticsearch"
        );
        assert_eq!(date(&json!(5), "epoch_second"), Ok(5000));
        assert_eq!(date(&json!("1969-12-31T23:59:59.999Z"), f), Ok(-1));
        for bad in [
            "2001-02-29",
            "2000-13-01",
            "2000-01-01T25:00",
            "2000-1-01",
            "2000-01-01T10:00Zx",
            "yesterday",
        ] {
            let e = date(&json!(bad), f).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(date(&json!(true), f).is_err());
        for ms in [-86_400_001i64, -1, 0, 951_820_245_123, 4_102_444_800_000] {
            assert_eq!(parse_iso(&format_iso(ms)), Ok(ms), "{}", format_iso(ms));
        }
        assert!(looks_like_date("2015-01-01") && looks_like_date("2015/01/01 12:10:30"));
        assert!(!looks_like_date("2015") && !looks_like_date("hello") && !looks_like_date("2015-13-01"));
        assert_eq!(unknown_date_format("epoch_millis||yyyy"), Some("yyyy"));
        for d in -800_000..800_000i64 {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn values_convert_by_type_or_say_why_not() {
        use crate::schema::field::*;
        let e = |ty| FieldEntry::new("f", ty);
        let long_f = e(FieldType::Long(ValueOptions::default()));
        assert_eq!(convert(&long_f, &json!(-5)), Ok(Indexed::Code(long_code(-5))));
        assert_eq!(convert(&long_f, &json!(2.9)), Ok(Indexed::Code(long_code(2))));
        assert_eq!(convert(&long_f, &json!("17")), Ok(Indexed::Code(long_code(17))));
        assert!(convert(&long_f, &json!("x"))
            .unwrap_err()
            .contains("`x` is not a number"));
        assert!(convert(&long_f, &json!(1e30)).is_err());
        assert!(convert(&long_f, &json!({"a": 1}))
            .unwrap_err()
            .contains("field `f` is a long field"));
        let dbl = e(FieldType::Double(ValueOptions::default()));
        assert_eq!(convert(&dbl, &json!("2.5")), Ok(Indexed::Code(double_code(2.5))));
        let kw = e(FieldType::Keyword(KeywordOptions {
            lowercase: true,
            ignore_above: Some(3),
            ..Default::default()
        }));
        assert_eq!(convert(&kw, &json!("AbC")), Ok(Indexed::Keyword("abc".into())));
        assert_eq!(convert(&kw, &json!("abcd")), Ok(Indexed::Skip));
        assert_eq!(convert(&kw, &json!(12)), Ok(Indexed::Keyword("12".into())));
        let b = e(FieldType::Boolean(ValueOptions::default()));
        assert_eq!(convert(&b, &json!("true")), Ok(Indexed::Code(1)));
        assert!(convert(&b, &json!(1)).is_err());
        let t = e(FieldType::Text(TextOptions::default()));
        assert_eq!(convert(&t, &json!(3)), Ok(Indexed::Text("3".into())));
    }
}
