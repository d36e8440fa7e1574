//! Standard five-field cron schedules for disruption budgets, evaluated in UTC, with the
//! semantics Karpenter inherits from robfig/cron's `ParseStandard`: `*`, `?`, lists, ranges,
//! steps, month and weekday names, and the `@yearly`…`@hourly` descriptors. Day-of-month and
//! day-of-week are ORed when both are restricted, ANDed when either is `*`.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CronError {
    #[error("expected 5 fields (minute hour day-of-month month day-of-week), found {0}")]
    FieldCount(usize),
    #[error("unknown descriptor {0:?}")]
    Descriptor(String),
    #[error("time zones are not supported in budget schedules (found {0:?}); schedules are UTC")]
    TimeZone(String),
    #[error("{field}: {message}")]
    Field { field: &'static str, message: String },
}

/// A parsed schedule. Each field is a bit set of allowed values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    dom_star: bool,
    dow_star: bool,
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

impl CronSchedule {
    pub fn parse(spec: &str) -> Result<Self, CronError> {
        let spec = spec.trim();
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            return Err(CronError::TimeZone(spec.split_whitespace().next().unwrap_or("").to_string()));
        }
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => return Err(CronError::Descriptor(s.to_string())),
            s => s,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CronError::FieldCount(fields.len()));
        }
        let b = |name, min, max, names| Bounds { name, min, max, names };
        let minutes = parse_field(fields[0], &b("minute", 0, 59, &[]))?;
        let hours = parse_field(fields[1], &b("hour", 0, 23, &[]))?;
        let dom = parse_field(fields[2], &b("day-of-month", 1, 31, &[]))?;
        let months = parse_field(fields[3], &b("month", 1, 12, &MONTHS))?;
        let dow = parse_field(fields[4], &b("day-of-week", 0, 6, &WEEKDAYS))?;
        Ok(CronSchedule {
            minutes,
            hours: hours as u32,
            days_of_month: dom as u32,
            months: months as u16,
            days_of_week: dow as u8,
            dom_star: fields[2].starts_with(['*', '?']),
            dow_star: fields[4].starts_with(['*', '?']),
        })
    }

    /// The first time at or after `t` (Unix seconds, UTC) that the schedule fires, at minute
    /// resolution; `None` if it never fires within eight years (e.g. 30 February).
    pub fn next_at_or_after(&self, t: i64) -> Option<i64> {
        let mut t = t.div_euclid(60) * 60 + if t.rem_euclid(60) == 0 { 0 } else { 60 };
        let limit = t + 8 * 366 * 86_400;
        while t < limit {
            let days = t.div_euclid(86_400);
            let (_, month, day) = civil_from_days(days);
            let weekday = (days + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday.
            if self.months & (1 << month) == 0 {
                t = next_month_start(days);
                continue;
            }
            if !self.day_matches(day, weekday) {
                t = (days + 1) * 86_400;
                continue;
            }
            let secs = t.rem_euclid(86_400);
            let (hour, minute) = ((secs / 3600) as u32, ((secs % 3600) / 60) as u32);
            if self.hours & (1 << hour) == 0 {
                t = days * 86_400 + (i64::from(hour) + 1) * 3600;
                continue;
            }
            if self.minutes & (1 << minute) == 0 {
                t += 60;
                continue;
            }
            return Some(t);
        }
        None
    }

    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.days_of_month & (1 << day) != 0;
        let dow = self.days_of_week & (1 << weekday) != 0;
        if self.dom_star || self.dow_star { dom && dow } else { dom || dow }
    }
}

fn parse_field(field: &str, b: &Bounds) -> Result<u64, CronError> {
    let err = |message: String| CronError::Field { field: b.name, message };
    let mut bits = 0u64;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| err(format!("step {s:?} is not a number")))?;
                if step == 0 {
                    return Err(err("step must be at least 1".into()));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (b.min, b.max)
        } else if let Some((a, z)) = range.split_once('-') {
            (value(a, b)?, value(z, b)?)
        } else {
            let v = value(range, b)?;
            // `5/15` means from 5 to the end in steps of 15.
            (v, if step.is_some() { b.max } else { v })
        };
        if lo > hi {
            return Err(err(format!("range {range:?} runs backwards")));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

fn value(text: &str, b: &Bounds) -> Result<u32, CronError> {
    let err = |message: String| CronError::Field { field: b.name, message };
    let lower = text.to_ascii_lowercase();
    let v = if let Some(i) = b.names.iter().position(|n| *n == lower) {
        i as u32 + b.min
    } else {
        text.parse::<u32>().map_err(|_| err(format!("{text:?} is not a number or a name")))?
    };
    if v < b.min || v > b.max {
        return Err(err(format!("{v} is outside {}-{}", b.min, b.max)));
    }
    Ok(v)
}

/// Howard Hinnant's days → (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since the epoch of (year, month, day).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn next_month_start(days: i64) -> i64 {
    let (y, m, _) = civil_from_days(days);
    let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(y, m, 1) * 86_400
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;
    // 2026-11-30T00:00:00Z, a Monday.
    const MON: i64 = 1_795_996_800;

    #[test]
    fn epoch_arithmetic_is_right() {
        assert_eq!(days_from_civil(2026, 11, 30) * DAY, MON);
        assert_eq!(civil_from_days(MON / DAY), (2026, 11, 30));
    }

    #[test]
    fn finds_next_hits() {
        let s = CronSchedule::parse("0 9 * * mon-fri").unwrap();
        assert_eq!(s.next_at_or_after(MON), Some(MON + 9 * 3600));
        assert_eq!(s.next_at_or_after(MON + 9 * 3600 + 1), Some(MON + DAY + 9 * 3600));
        let daily = CronSchedule::parse("@daily").unwrap();
        assert_eq!(daily.next_at_or_after(MON + 1), Some(MON + DAY));
        let every15 = CronSchedule::parse("*/15 * * * *").unwrap();
        assert_eq!(every15.next_at_or_after(MON + 61), Some(MON + 15 * 60));
        // Saturday 2026-12-05 is the next Saturday; the 1st of December is a Tuesday.
        let sat_or_first = CronSchedule::parse("0 0 1 * sat").unwrap();
        assert_eq!(sat_or_first.next_at_or_after(MON + 1), Some(MON + DAY));
        assert_eq!(sat_or_first.next_at_or_after(MON + DAY + 1), Some(MON + 5 * DAY));
        assert_eq!(CronSchedule::parse("0 0 30 2 *").unwrap().next_at_or_after(MON), None);
    }

    #[test]
    fn rejects_bad_schedules() {
        for bad in [
            "",
            "* * * *",
            "61 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "*/0 * * * *",
            "5-1 * * * *",
            "@every 5m",
            "TZ=Asia/Tokyo 0 9 * * *",
            "a b c d e",
        ] {
            assert!(CronSchedule::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
