//! Kubernetes resource quantities (`100m`, `4Gi`, `1.5`, `2e3`) as exact integers.
//!
//! Values are returned in thousandths of the base unit (millicores for cpu, millibytes for
//! memory), rounded up as Kubernetes rounds sub-milli precision up.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QuantityError {
    #[error("{0:?} is not a quantity")]
    Malformed(String),
    #[error("{0:?} has unknown suffix {1:?}")]
    Suffix(String, String),
    #[error("{0:?} is too large")]
    Overflow(String),
}

/// Parses a quantity into thousandths of its unit, rounding up.
pub fn parse_milli(s: &str) -> Result<i128, QuantityError> {
    let malformed = || QuantityError::Malformed(s.to_string());
    let overflow = || QuantityError::Overflow(s.to_string());
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let num_len = body.chars().take_while(|c| c.is_ascii_digit() || *c == '.').count();
    let (number, suffix) = body.split_at(num_len);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(malformed());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits
        .trim_start_matches('0')
        .parse()
        .or_else(|_| if digits.chars().all(|c| c == '0') { Ok(0) } else { Err(overflow()) })?;
    // value = mantissa * num / den, then * 1000 for milli-units.
    let mut num: i128 = 1000;
    let mut den: i128 = 10i128.checked_pow(frac_part.len() as u32).ok_or_else(overflow)?;
    let pow = |base: i128, exp: u32| base.checked_pow(exp).ok_or_else(overflow);
    match suffix {
        "" => {}
        "m" => den = den.checked_mul(1000).ok_or_else(overflow)?,
        "k" => num *= 1000,
        "M" => num *= pow(10, 6)?,
        "G" => num *= pow(10, 9)?,
        "T" => num *= pow(10, 12)?,
        "P" => num *= pow(10, 15)?,
        "E" => num *= pow(10, 18)?,
        "Ki" => num *= 1 << 10,
        "Mi" => num *= 1 << 20,
        "Gi" => num *= 1 << 30,
        "Ti" => num *= 1 << 40,
        "Pi" => num *= 1 << 50,
        "Ei" => num *= 1 << 60,
        _ if suffix.starts_with(['e', 'E']) => {
            let exp: i32 = suffix[1..].parse().map_err(|_| malformed())?;
            if exp.unsigned_abs() > 30 {
                return Err(overflow());
            }
            if exp >= 0 {
                num = num.checked_mul(pow(10, exp as u32)?).ok_or_else(overflow)?;
            } else {
                den = den.checked_mul(pow(10, exp.unsigned_abs())?).ok_or_else(overflow)?;
            }
        }
        _ => return Err(QuantityError::Suffix(s.to_string(), suffix.to_string())),
    }
    let scaled = mantissa.checked_mul(num).ok_or_else(overflow)?;
    let value = scaled / den + i128::from(scaled % den != 0);
    // Kubernetes caps quantities at 2^63-1 of the base unit.
    if value > i128::from(i64::MAX) * 1000 {
        return Err(overflow());
    }
    Ok(if negative { -value } else { value })
}

/// Parses a quantity into whole units, rounding up (bytes, pods, GPUs).
pub fn parse_units(s: &str) -> Result<i128, QuantityError> {
    let milli = parse_milli(s)?;
    Ok(milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_kubernetes_accepts() {
        assert_eq!(parse_milli("1").unwrap(), 1000);
        assert_eq!(parse_milli("100m").unwrap(), 100);
        assert_eq!(parse_milli("1.5").unwrap(), 1500);
        assert_eq!(parse_milli("0.1m").unwrap(), 1, "sub-milli rounds up");
        assert_eq!(parse_units("256Mi").unwrap(), 256 << 20);
        assert_eq!(parse_units("4Gi").unwrap(), 4 << 30);
        assert_eq!(parse_units("1k").unwrap(), 1000);
        assert_eq!(parse_units("2e3").unwrap(), 2000);
        assert_eq!(parse_milli("-1").unwrap(), -1000);
        assert_eq!(parse_units("800").unwrap(), 800);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1.2.3", "10 Gi", "5GB", "1x", "."] {
            assert!(parse_milli(bad).is_err(), "{bad} should be rejected");
        }
        assert!(matches!(parse_milli("99999999999999999999Ei"), Err(QuantityError::Overflow(_))));
    }
}
