//! No voluntary disruption in local business hours; drift only at night. Karpenter's budget
//! schedules are UTC crons: a team in Berlin or New York rewrites them twice a year for
//! daylight saving and cannot skip holidays. Outside those hours the NodePool's own budgets
//! apply unchanged.
//!
//! `tenon.dev/disruption-config`:
//! `{"timeZone": "Europe/Berlin", "businessHours": {"days": ["mon", "tue", "wed", "thu", "fri"],
//!   "start": "09:00", "end": "18:00"}, "holidays": ["2026-12-24"], "night": {"start": "22:00", "end": "06:00"}}`
//! `timeZone`: an IANA zone (`Europe/Berlin`, `Australia/Sydney`), whose daylight saving the
//! host's time-zone database knows (contract 0.2.0), or a fixed offset (`+08:00`).
//! `night` defaults to 22:00-06:00. A holiday is outside business hours all day.

use serde::Deserialize;
use tenon_policy_sdk::budget::{Allowance, BudgetInput, Guest, Reason, karpenter, utc_offset};
use tenon_policy_sdk::time::{DAY, WEEKDAYS, parse_date, parse_hhmm, weekday};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    time_zone: String,
    business_hours: Window,
    #[serde(default)]
    holidays: Vec<String>,
    night: Option<Window>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Window {
    #[serde(default)]
    days: Vec<String>,
    start: String,
    end: String,
}

fn bad(field: &str, want: &str, got: &str) -> String {
    format!("config: {field} must be {want}, got {got:?}")
}

/// A window's `[start, end)` in minutes after midnight; it may cross midnight.
fn span(field: &str, w: &Window) -> Result<(i64, i64), String> {
    let at = |which: &str, s: &str| parse_hhmm(s).ok_or_else(|| bad(&format!("{field}.{which}"), "HH:MM (24-hour)", s));
    let (start, end) = (at("start", &w.start)?, at("end", &w.end)?);
    if start == end {
        return Err(format!("config: {field}.start and .end are both {}: an empty window", w.start));
    }
    Ok((start, end))
}

fn within((from, to): (i64, i64), minute: i64) -> bool {
    if from <= to { from <= minute && minute < to } else { minute >= from || minute < to }
}

/// The configuration, checked: windows in minutes after midnight, days and holidays as numbers.
struct Settings {
    cfg: Config,
    open: (i64, i64),
    days: Vec<usize>,
    night: (i64, i64),
    holidays: Vec<i64>,
}

/// Seconds east of UTC in the configured zone at `now`.
fn offset(zone: &str, now: i64) -> Result<i64, String> {
    utc_offset(zone, now).map(i64::from).map_err(|e| format!("config: timeZone: {e}"))
}

fn settings(json: &str) -> Result<Settings, String> {
    let cfg: Config = tenon_policy_sdk::config(json)?;
    let open = span("businessHours", &cfg.business_hours)?;
    let days = cfg.business_hours.days.iter().map(|d| {
        WEEKDAYS.iter().position(|w| w.eq_ignore_ascii_case(d)).ok_or_else(|| bad("businessHours.days", "sun..sat", d))
    });
    let days = days.collect::<Result<Vec<usize>, String>>()?;
    if days.is_empty() {
        return Err("config: businessHours.days must name at least one day (mon..sun)".into());
    }
    let night = cfg.night.as_ref().map_or(Ok((22 * 60, 6 * 60)), |w| span("night", w))?;
    let holidays = cfg.holidays.iter().map(|h| parse_date(h).ok_or_else(|| bad("holidays[]", "YYYY-MM-DD", h)));
    let holidays = holidays.collect::<Result<Vec<i64>, String>>()?;
    Ok(Settings { cfg, open, days, night, holidays })
}

struct BusinessHours;

impl tenon_policy_sdk::Config for BusinessHours {
    fn validate_config(config: &str) -> Result<(), String> {
        let s = settings(config)?;
        offset(&s.cfg.time_zone, 0).map(drop)
    }
}

impl Guest for BusinessHours {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        let Settings { cfg, open, days, night, holidays } = settings(&input.nodepool.config)?;
        let local = input.now + offset(&cfg.time_zone, input.now)?;
        let (day, minute) = (local.div_euclid(DAY), local.rem_euclid(DAY) / 60);
        let clock = format!("{} {:02}:{:02} {}", WEEKDAYS[weekday(day)], minute / 60, minute % 60, cfg.time_zone);
        if days.contains(&weekday(day)) && !holidays.contains(&day) && within(open, minute) {
            let end = &cfg.business_hours.end;
            return Ok(Allowance {
                allowed: 0,
                reason: format!("business hours ({clock}, until {end}): no disruption"),
            });
        }
        if input.reason == Reason::Drifted && !within(night, minute) {
            return Ok(Allowance { allowed: 0, reason: format!("drift waits for the night ({clock})") });
        }
        let karpenter = karpenter(&input);
        Ok(Allowance { reason: format!("outside business hours ({clock}): {}", karpenter.reason), ..karpenter })
    }
}

tenon_policy_sdk::export_budget!(BusinessHours);
