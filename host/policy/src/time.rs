//! Contract 0.2.0's `tenon:policy/time` import: local time by the host's time-zone database
//! (jiff with the IANA database compiled in, so a minimal container image needs no
//! `/usr/share/zoneinfo`), for policies that keep none of their own.

use crate::sandbox::CallState;
use wasmtime::component::Linker;

/// The interface as a component imports it.
pub const INTERFACE: &str = "tenon:policy/time@0.2.0";

/// Seconds east of UTC in `zone` at `unix_seconds`: an IANA name (`Europe/Berlin`,
/// `Australia/Sydney`, `UTC`) or a fixed offset (`+08:00`, `-05:30`).
pub fn utc_offset(zone: &str, unix_seconds: i64) -> Result<i32, String> {
    if let Some(fixed) = fixed_offset(zone) {
        return Ok(fixed);
    }
    let at = jiff::Timestamp::from_second(unix_seconds).map_err(|e| format!("time {unix_seconds}: {e}"))?;
    let tz = jiff::tz::TimeZone::get(zone).map_err(|_| {
        format!(
            "unknown time zone {zone:?}: use an IANA name (Europe/Berlin, America/New_York, UTC) or an offset (+08:00)"
        )
    })?;
    Ok(tz.to_offset(at).seconds())
}

/// `+HH:MM` / `-HH:MM` within UTC−12:00…UTC+14:00, as seconds.
fn fixed_offset(zone: &str) -> Option<i32> {
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':').filter(|(h, m)| h.len() == 2 && m.len() == 2)?;
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    let minutes = h * 60 + m;
    let within = if sign > 0 { minutes <= 14 * 60 } else { minutes <= 12 * 60 };
    (m < 60 && within).then_some(sign * minutes * 60)
}

/// Links the import into `linker`.
pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.instance(INTERFACE)?.func_wrap(
        "utc-offset",
        |_store, (zone, unix_seconds): (String, i64)| -> wasmtime::Result<(Result<i32, String>,)> {
            Ok((utc_offset(&zone, unix_seconds),))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> i64 {
        rfc3339.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    #[test]
    fn offsets_follow_each_zones_daylight_saving_both_hemispheres() {
        // Berlin: CET in winter, CEST from the last Sunday of March.
        assert_eq!(utc_offset("Europe/Berlin", at("2026-01-15T12:00:00Z")), Ok(3600));
        assert_eq!(utc_offset("Europe/Berlin", at("2026-07-15T12:00:00Z")), Ok(7200));
        // Sydney: daylight saving in the southern summer (AEDT +11), not in July (AEST +10).
        assert_eq!(utc_offset("Australia/Sydney", at("2026-01-15T12:00:00Z")), Ok(11 * 3600));
        assert_eq!(utc_offset("Australia/Sydney", at("2026-07-15T12:00:00Z")), Ok(10 * 3600));
        // São Paulo has had none since 2019; Kathmandu is +05:45.
        assert_eq!(utc_offset("America/Sao_Paulo", at("2026-01-15T12:00:00Z")), Ok(-3 * 3600));
        assert_eq!(utc_offset("Asia/Kathmandu", at("2026-01-15T12:00:00Z")), Ok(5 * 3600 + 45 * 60));
        // New York changes at 02:00 local on the second Sunday of March (2026-03-08).
        assert_eq!(utc_offset("America/New_York", at("2026-03-08T06:59:59Z")), Ok(-5 * 3600));
        assert_eq!(utc_offset("America/New_York", at("2026-03-08T07:00:00Z")), Ok(-4 * 3600));
        assert_eq!(utc_offset("UTC", 0), Ok(0));
    }

    #[test]
    fn fixed_offsets_and_unknown_zones() {
        assert_eq!(utc_offset("+08:00", 0), Ok(8 * 3600));
        assert_eq!(utc_offset("-05:30", 0), Ok(-(5 * 3600 + 30 * 60)));
        assert!(utc_offset("+15:00", 0).is_err());
        let e = utc_offset("Mars/Olympus_Mons", 0).unwrap_err();
        assert!(e.contains("unknown time zone \"Mars/Olympus_Mons\"") && e.contains("IANA"), "{e}");
    }
}
