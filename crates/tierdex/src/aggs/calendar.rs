//! Date histogram intervals: rounding a time down to its bucket and
//! stepping to the next, over the engine's calendar
//! ([`civil_from_days`], [`days_from_civil`]).

use crate::schema::value::{civil_from_days, days_from_civil};

const DAY: i64 = 86_400_000;

/// A calendar unit of `calendar_interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalendarUnit {
    /// 60 seconds.
    Minute,
    /// 60 minutes.
    Hour,
    /// A day.
    Day,
    /// An ISO week, from Monday.
    Week,
    /// A month.
    Month,
    /// Three months, from January, April, July or October.
    Quarter,
    /// A year.
    Year,
}

impl CalendarUnit {
    /// The unit `s` names (`month` or `1M`, ...).
    pub fn parse(s: &str) -> Option<CalendarUnit> {
        Some(match s {
            "minute" | "1m" => CalendarUnit::Minute,
            "hour" | "1h" => CalendarUnit::Hour,
            "day" | "1d" => CalendarUnit::Day,
            "week" | "1w" => CalendarUnit::Week,
            "month" | "1M" => CalendarUnit::Month,
            "quarter" | "1q" => CalendarUnit::Quarter,
            "year" | "1y" => CalendarUnit::Year,
            _ => return None,
        })
    }
}

/// A `date_histogram` bucket width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateInterval {
    /// A calendar unit.
    Calendar(CalendarUnit),
    /// A fixed number of milliseconds.
    Fixed(i64),
}

impl DateInterval {
    /// The start of the bucket holding local time `t` (milliseconds).
    pub fn round(self, t: i64) -> i64 {
        let day = t.div_euclid(DAY);
        match self {
            DateInterval::Fixed(ms) => t.div_euclid(ms) * ms,
            DateInterval::Calendar(u) => match u {
                CalendarUnit::Minute => t.div_euclid(60_000) * 60_000,
                CalendarUnit::Hour => t.div_euclid(3_600_000) * 3_600_000,
                CalendarUnit::Day => day * DAY,
                // 1970-01-01 was a Thursday (3 days after a Monday).
                CalendarUnit::Week => (day - (day + 3).rem_euclid(7)) * DAY,
                CalendarUnit::Month => {
                    let (y, m, _) = civil_from_days(day);
                    days_from_civil(y, m, 1) * DAY
                }
                CalendarUnit::Quarter => {
                    let (y, m, _) = civil_from_days(day);
                    days_from_civil(y, (m - 1) / 3 * 3 + 1, 1) * DAY
                }
                CalendarUnit::Year => {
                    let (y, _, _) = civil_from_days(day);
                    days_from_civil(y, 1, 1) * DAY
                }
            },
        }
    }

    /// The start of the bucket after the one starting at local time `start`.
    pub fn next(self, start: i64) -> i64 {
        let months = |n: u32| {
            let (y, m, _) = civil_from_days(start.div_euclid(DAY));
            let m0 = (m - 1 + n) as i64;
            days_from_civil(y + m0 / 12, (m0 % 12) as u32 + 1, 1) * DAY
        };
        match self {
            DateInterval::Fixed(ms) => start + ms,
            DateInterval::Calendar(u) => match u {
                CalendarUnit::Minute => start + 60_000,
                CalendarUnit::Hour => start + 3_600_000,
                CalendarUnit::Day => start + DAY,
                CalendarUnit::Week => start + 7 * DAY,
                CalendarUnit::Month => months(1),
                CalendarUnit::Quarter => months(3),
                CalendarUnit::Year => months(12),
            },
        }
    }
}

/// Times are bucketed within ±100 million days of the epoch (about
/// ±273,000 years); times beyond fall in the buckets at those edges.
pub const MAX_TIME: i64 = 100_000_000 * DAY;

/// The bucket key (UTC milliseconds) of UTC time `t`, for buckets in a zone
/// `zone_ms` ahead of UTC, shifted by `offset_ms`.
#[inline]
pub fn bucket_key(interval: DateInterval, t: i64, zone_ms: i64, offset_ms: i64) -> i64 {
    interval.round(t.clamp(-MAX_TIME, MAX_TIME) + zone_ms - offset_ms) + offset_ms - zone_ms
}

/// The key of the bucket after the one keyed `key` (UTC milliseconds).
pub fn next_key(interval: DateInterval, key: i64, zone_ms: i64, offset_ms: i64) -> i64 {
    interval.next(key.clamp(-MAX_TIME, MAX_TIME) + zone_ms - offset_ms) + offset_ms - zone_ms
}

/// `ms` as ISO-8601 in a zone `zone_ms` ahead of UTC
/// (`2020-01-01T00:00:00.000Z`, or `...000+01:00`).
pub fn format_in_zone(ms: i64, zone_ms: i64) -> String {
    let s = crate::schema::value::format_iso(ms + zone_ms);
    if zone_ms == 0 {
        return s;
    }
    let sign = if zone_ms < 0 { '-' } else { '+' };
    let z = zone_ms.abs() / 60_000;
    format!("{}{sign}{:02}:{:02}", &s[..s.len() - 1], z / 60, z % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::value::parse_iso;

    fn t(s: &str) -> i64 {
        parse_iso(s).unwrap()
    }

    #[test]
    fn calendar_units_round_to_their_start() {
        let x = t("2021-08-19T13:47:12.345Z");
        let cases = [
            (CalendarUnit::Minute, "2021-08-19T13:47:00Z"),
            (CalendarUnit::Hour, "2021-08-19T13:00:00Z"),
            (CalendarUnit::Day, "2021-08-19T00:00:00Z"),
            (CalendarUnit::Week, "2021-08-16T00:00:00Z"),
            (CalendarUnit::Month, "2021-08-01T00:00:00Z"),
            (CalendarUnit::Quarter, "2021-07-01T00:00:00Z"),
            (CalendarUnit::Year, "2021-01-01T00:00:00Z"),
        ];
        for (u, want) in cases {
            assert_eq!(DateInterval::Calendar(u).round(x), t(want), "{u:?}");
        }
        let m = DateInterval::Calendar(CalendarUnit::Month);
        assert_eq!(m.next(t("2021-12-01T00:00:00Z")), t("2022-01-01T00:00:00Z"));
        assert_eq!(m.round(t("1969-12-31T23:59:59Z")), t("1969-12-01T00:00:00Z"));
        let q = DateInterval::Calendar(CalendarUnit::Quarter);
        assert_eq!(q.next(t("2021-10-01T00:00:00Z")), t("2022-01-01T00:00:00Z"));
    }

    #[test]
    fn zones_shift_the_boundaries() {
        let d = DateInterval::Calendar(CalendarUnit::Day);
        // 23:30 UTC is the next day at +01:00.
        let k = bucket_key(d, t("2021-01-01T23:30:00Z"), 3_600_000, 0);
        assert_eq!(k, t("2021-01-01T23:00:00Z"));
        assert_eq!(format_in_zone(k, 3_600_000), "2021-01-02T00:00:00.000+01:00");
        assert_eq!(format_in_zone(k, -19_800_000), "2021-01-01T17:30:00.000-05:30");
        assert_eq!(next_key(d, k, 3_600_000, 0), t("2021-01-02T23:00:00Z"));
    }

    #[test]
    fn times_far_out_fall_in_the_edge_buckets() {
        for u in [
            CalendarUnit::Minute,
            CalendarUnit::Week,
            CalendarUnit::Month,
            CalendarUnit::Year,
        ] {
            let iv = DateInterval::Calendar(u);
            for x in [i64::MIN, i64::MAX] {
                let k = bucket_key(iv, x, -19_800_000, 3_600_000);
                assert!(next_key(iv, k, -19_800_000, 3_600_000) > k, "{u:?} {x}");
            }
        }
    }
}
