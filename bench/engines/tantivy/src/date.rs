//! The protocol's ISO-8601 dates: `YYYY-MM-DD` or
//! `YYYY-MM-DDTHH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]` (no zone = UTC; the
//! fraction is truncated to milliseconds), as epoch milliseconds.

/// Epoch milliseconds of `s`, or a message.
pub fn parse(s: &str) -> Result<i64, String> {
    let bad = || format!("bad date {s:?} (expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM])");
    let b = s.as_bytes();
    let n = b.len();
    let digits = |at: usize, len: usize| -> Result<i64, String> {
        let part = b.get(at..at + len).ok_or_else(bad)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(part.iter().fold(0i64, |v, &c| v * 10 + i64::from(c - b'0')))
    };
    if n < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let (y, mo, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return Err(bad());
    }
    let millis = days_from_civil(y, mo, d) * 86_400_000;
    if n == 10 {
        return Ok(millis);
    }
    if n < 19 || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (hh, mm, ss) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if hh > 23 || mm > 59 || ss > 59 {
        return Err(bad());
    }
    let mut i = 19;
    let mut ms = 0;
    if i < n && b[i] == b'.' {
        i += 1;
        let start = i;
        while i < n && b[i].is_ascii_digit() {
            i += 1;
        }
        let k = i - start;
        if !(1..=9).contains(&k) {
            return Err(bad());
        }
        for j in 0..3 {
            ms = ms * 10 + if j < k { i64::from(b[start + j] - b'0') } else { 0 };
        }
    }
    let mut offset = 0;
    if i < n {
        match b[i] {
            b'Z' => i += 1,
            c @ (b'+' | b'-') if i + 6 == n && b[i + 3] == b':' => {
                let (oh, om) = (digits(i + 1, 2)?, digits(i + 4, 2)?);
                if oh > 23 || om > 59 {
                    return Err(bad());
                }
                offset = (oh * 60 + om) * 60_000 * if c == b'+' { 1 } else { -1 };
                i += 6;
            }
            _ => return Err(bad()),
        }
    }
    if i != n {
        return Err(bad());
    }
    Ok(millis + hh * 3_600_000 + mm * 60_000 + ss * 1000 + ms - offset)
}

fn leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn dates() {
        assert_eq!(parse("1970-01-01"), Ok(0));
        assert_eq!(parse("2011-03-14T15:09:26Z"), Ok(1_300_115_366_000));
        assert_eq!(parse("2011-03-14T15:09:26.5Z"), Ok(1_300_115_366_500));
        assert_eq!(parse("2011-03-14T15:09:26.123456789"), Ok(1_300_115_366_123));
        assert_eq!(parse("2011-03-14T17:39:26+02:30"), Ok(1_300_115_366_000));
        assert_eq!(parse("1969-12-31T23:59:59Z"), Ok(-1000));
        assert_eq!(parse("2000-02-29"), Ok(951_782_400_000));
        for bad in [
            "2001-02-29",
            "1900-02-29",
            "2011-3-14",
            "2011-03-14T15:09",
            "2011-03-14T24:00:00Z",
            "2011-03-14T15:09:26.Z",
            "2011-03-14T15:09:26+0230",
            "2011-03-14 15:09:26",
            "2011-03-14T15:09:26Zx",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
