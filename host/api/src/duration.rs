//! Karpenter's duration strings: `720h`, `1h30m`, `10m`, `Never`.
//!
//! The CRDs only admit whole numbers of h, m and s (no `ms`, no fractions, no days), so that
//! is all this accepts; anything else is an error naming the offending text.

use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("{0:?} is not a duration of whole hours, minutes and seconds")]
    Malformed(String),
    #[error("{0:?} uses unit {1:?}; only h, m and s are accepted")]
    BadUnit(String, String),
    #[error("{0:?} is too large")]
    Overflow(String),
}

/// Parses `([0-9]+(h|m|s))+` into a duration.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    parse_with_units(s, &['h', 'm', 's'])
}

/// Parses a duration that may also be `Never` (returns `None` for `Never`).
pub fn parse_nillable_duration(s: &str) -> Result<Option<Duration>, DurationError> {
    if s == "Never" { Ok(None) } else { parse_duration(s).map(Some) }
}

/// Parses a budget duration: hours and/or minutes, as `h`, `m` or `XhYm`, optionally
/// followed by `0s` (Go's `Duration.String()` appends it).
pub fn parse_budget_duration(s: &str) -> Result<Duration, DurationError> {
    let core = s.strip_suffix("0s").filter(|c| !c.is_empty()).unwrap_or(s);
    parse_with_units(core, &['h', 'm'])
}

fn parse_with_units(s: &str, units: &[char]) -> Result<Duration, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let malformed = || DurationError::Malformed(s.to_string());
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(malformed());
        }
        let (num, tail) = rest.split_at(digits);
        let unit_len = tail.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        if unit_len == 0 {
            return Err(malformed());
        }
        let (unit, tail) = tail.split_at(unit_len);
        let secs_per = match unit {
            "h" if units.contains(&'h') => 3600,
            "m" if units.contains(&'m') => 60,
            "s" if units.contains(&'s') => 1,
            _ => return Err(DurationError::BadUnit(s.to_string(), unit.to_string())),
        };
        let n: u64 = num.parse().map_err(|_| DurationError::Overflow(s.to_string()))?;
        total = n
            .checked_mul(secs_per)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| DurationError::Overflow(s.to_string()))?;
        rest = tail;
    }
    Ok(Duration::from_secs(total))
}

/// A hint for a bad duration: converts day and week counts users often write.
pub fn duration_hint(s: &str, allow_never: bool) -> String {
    let never = if allow_never { ", or Never" } else { "" };
    let base = format!("write whole hours, minutes and seconds such as 720h, 1h30m or 10m{never}");
    let (num, unit) = s.split_at(s.chars().take_while(char::is_ascii_digit).count());
    match (num.parse::<u64>(), unit) {
        (Ok(n), "d") => format!("days are not accepted: {n}d is {}h; {base}", n * 24),
        (Ok(n), "w") => format!("weeks are not accepted: {n}w is {}h; {base}", n * 24 * 7),
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_karpenter_forms() {
        assert_eq!(parse_duration("720h").unwrap(), Duration::from_secs(720 * 3600));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_nillable_duration("Never").unwrap(), None);
        assert_eq!(parse_budget_duration("8h0m0s").unwrap(), Duration::from_secs(8 * 3600));
        assert_eq!(parse_budget_duration("30m").unwrap(), Duration::from_secs(1800));
    }

    #[test]
    fn rejects_what_the_crd_pattern_rejects() {
        for bad in ["", "10", "h", "1.5h", "30d", "10ms", "-1h", "1h 30m", "never"] {
            assert!(parse_nillable_duration(bad).is_err(), "{bad} should be rejected");
        }
        assert!(parse_budget_duration("10s").is_err());
        assert!(duration_hint("30d", true).contains("720h"));
    }
}
