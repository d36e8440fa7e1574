//! The guest side of Tenon's policy contract (`wit/policy.wit`).
//!
//! A policy is one `impl` of a world's `Guest` trait and one export macro:
//!
//! ```ignore
//! use tenon_policy_sdk::scorer::{Guest, ScoringInput};
//! struct CheapestFirst;
//! impl Guest for CheapestFirst {
//!     // One score per offering, lower first.
//!     fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
//!         Ok(input.offerings.iter().map(|o| o.price).collect())
//!     }
//! }
//! tenon_policy_sdk::export_scorer!(CheapestFirst);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the policy.

/// A policy's check of its configuration, before any decision (contract 0.2.0, the `v0-2`
/// feature): the host calls it when the policy is resolved for a NodePool, so a bad
/// configuration shows on the NodePool (`PolicyHealthy=False` and an Event) when it is
/// applied. The default accepts anything; a policy that reads a configuration should parse
/// and check it here, with the same function its decisions use.
pub trait Config {
    fn validate_config(config: &str) -> Result<(), String> {
        let _ = config;
        Ok(())
    }
}

/// Implements a world's generated `config` export for every [`Config`].
#[cfg(feature = "v0-2")]
#[doc(hidden)]
#[macro_export]
macro_rules! validate_config_from {
    ($guest:path) => {
        impl<T: $crate::Config> $guest for T {
            fn validate_config(config: String) -> Result<(), String> {
                <T as $crate::Config>::validate_config(&config)
            }
        }
    };
}

/// The `scorer` world: rank the offerings of a new NodeClaim.
pub mod scorer {
    #[cfg(not(feature = "v0-2"))]
    wit_bindgen::generate!({
        path: "wit",
        world: "scorer",
        pub_export_macro: true,
        export_macro_name: "export_scorer",
        default_bindings_module: "tenon_policy_sdk::scorer",
    });
    #[cfg(not(feature = "v0-2"))]
    pub use self::{exports::tenon::policy::scoring, tenon::policy::types};
    /// Contract 0.2.0's bindings: the world's own `Guest` (`validate-config`) apart from the
    /// decision interface's.
    #[cfg(feature = "v0-2")]
    #[doc(hidden)]
    pub mod bindings {
        wit_bindgen::generate!({
            path: "wit/v0.2.0",
            world: "scorer",
            pub_export_macro: true,
            export_macro_name: "export_scorer",
            default_bindings_module: "tenon_policy_sdk::scorer::bindings",
            generate_all,
        });
        crate::validate_config_from!(Guest);
    }
    #[cfg(feature = "v0-2")]
    pub use self::bindings::{export_scorer, exports::tenon::policy0_1_0::scoring, tenon::policy0_1_0::types};

    /// Seconds east of UTC in `zone` (an IANA name such as `Australia/Sydney`, `UTC`, or an
    /// offset such as `+08:00`) at Unix time `unix_seconds`, from the host's time-zone
    /// database; an error names an unknown zone.
    #[cfg(feature = "v0-2")]
    pub fn utc_offset(zone: &str, unix_seconds: i64) -> Result<i32, String> {
        bindings::tenon::policy0_2_0::time::utc_offset(zone, unix_seconds)
    }
    pub use scoring::{Guest, InstanceType, Offering, ScoringInput, TypeLabel};
    pub use types::{Label, Nodepool, Resources};

    impl ScoringInput {
        /// The value of label `key` on instance type `index` (`karpenter.k8s.aws/instance-family`).
        pub fn label(&self, index: u32, key: &str) -> Option<&str> {
            let k = self.label_keys.iter().position(|x| x == key)? as u32;
            let t = self.instance_types.get(index as usize)?;
            t.labels.iter().find(|l| l.key == k).map(|l| l.value.as_str())
        }

        /// The instance type an offering launches.
        pub fn instance_type(&self, offering: &Offering) -> Option<&InstanceType> {
            self.instance_types.get(offering.instance_type as usize)
        }

        /// The zone of an offering.
        pub fn zone(&self, offering: &Offering) -> &str {
            self.zones.get(offering.zone as usize).map_or("", String::as_str)
        }

        /// The capacity type of an offering (`on-demand`, `spot`, `reserved`).
        pub fn capacity_type(&self, offering: &Offering) -> &str {
            self.capacity_types.get(offering.capacity_type as usize).map_or("", String::as_str)
        }

        fn number(&self, offering: &Offering, key: &str) -> Option<u64> {
            self.label(offering.instance_type, key)?.parse().ok()
        }

        /// vCPUs of the offering's instance type (`karpenter.k8s.aws/instance-cpu`).
        pub fn vcpus(&self, offering: &Offering) -> Option<u64> {
            self.number(offering, labels::CPU)
        }

        /// Memory of the offering's instance type in MiB (`karpenter.k8s.aws/instance-memory`).
        pub fn memory_mib(&self, offering: &Offering) -> Option<u64> {
            self.number(offering, labels::MEMORY)
        }

        /// Instance family (`m7i`; `karpenter.k8s.aws/instance-family`).
        pub fn family(&self, offering: &Offering) -> Option<&str> {
            self.label(offering.instance_type, labels::FAMILY)
        }

        /// Instance generation (`7`; `karpenter.k8s.aws/instance-generation`).
        pub fn generation(&self, offering: &Offering) -> Option<u64> {
            self.number(offering, labels::GENERATION)
        }

        /// CPU architecture (`amd64`, `arm64`; `kubernetes.io/arch`).
        pub fn architecture(&self, offering: &Offering) -> Option<&str> {
            self.label(offering.instance_type, labels::ARCH)
        }

        /// CPU manufacturer (`intel`, `amd`, `aws`; `karpenter.k8s.aws/instance-cpu-manufacturer`).
        pub fn manufacturer(&self, offering: &Offering) -> Option<&str> {
            self.label(offering.instance_type, labels::MANUFACTURER)
        }

        /// The price of the cheapest offering, if there is one.
        pub fn cheapest(&self) -> Option<f64> {
            self.offerings.iter().map(|o| o.price).reduce(f64::min)
        }

        /// A ranking of the offerings, by price until told otherwise (see [`Ranking`]).
        pub fn ranking(&self) -> Ranking<'_> {
            Ranking { input: self, keys: Vec::new() }
        }
    }

    /// The well-known labels the accessors read.
    pub mod labels {
        pub const CPU: &str = "karpenter.k8s.aws/instance-cpu";
        pub const MEMORY: &str = "karpenter.k8s.aws/instance-memory";
        pub const FAMILY: &str = "karpenter.k8s.aws/instance-family";
        pub const GENERATION: &str = "karpenter.k8s.aws/instance-generation";
        pub const MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
        pub const ARCH: &str = "kubernetes.io/arch";
    }

    /// Offerings ordered by preferences, then price: each [`Ranking::prefer`] puts the
    /// offerings it holds for before the others (the first preference weighs most), and
    /// [`Ranking::scores`] gives each offering its place (0 first), which is what `rank`
    /// returns. No price has to be inflated to push an offering down.
    ///
    /// ```ignore
    /// // AMD first, newest generation next, then price.
    /// let scores = input.ranking()
    ///     .prefer(|o| input.manufacturer(o) == Some("amd"))
    ///     .then_by(|o| u64::MAX - input.generation(o).unwrap_or(0))
    ///     .scores();
    /// ```
    pub struct Ranking<'a> {
        input: &'a ScoringInput,
        /// Per preference, each offering's key (lower first).
        keys: Vec<Vec<u64>>,
    }

    impl Ranking<'_> {
        /// Offerings `holds` is true for come before the rest.
        pub fn prefer(self, holds: impl Fn(&Offering) -> bool) -> Self {
            self.then_by(|o| u64::from(!holds(o)))
        }

        /// Then offerings with a lower `key` first.
        pub fn then_by(mut self, key: impl Fn(&Offering) -> u64) -> Self {
            self.keys.push(self.input.offerings.iter().map(key).collect());
            self
        }

        /// Each offering's place in the order: preferences, then price, then input order.
        pub fn scores(self) -> Vec<f64> {
            let offerings = &self.input.offerings;
            let mut order: Vec<usize> = (0..offerings.len()).collect();
            order.sort_by(|&a, &b| {
                self.keys
                    .iter()
                    .map(|k| k[a].cmp(&k[b]))
                    .find(|c| c.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(offerings[a].price.total_cmp(&offerings[b].price))
                    .then(a.cmp(&b))
            });
            let mut scores = vec![0.0; offerings.len()];
            for (place, i) in order.into_iter().enumerate() {
                scores[i] = place as f64;
            }
            scores
        }
    }
}

/// The `consolidator` world: order and approve consolidation plans.
pub mod consolidator {
    #[cfg(not(feature = "v0-2"))]
    wit_bindgen::generate!({
        path: "wit",
        world: "consolidator",
        pub_export_macro: true,
        export_macro_name: "export_consolidator",
        default_bindings_module: "tenon_policy_sdk::consolidator",
    });
    #[cfg(not(feature = "v0-2"))]
    pub use self::{exports::tenon::policy::consolidation, tenon::policy::types};
    /// Contract 0.2.0's bindings: the world's own `Guest` (`validate-config`) apart from the
    /// decision interface's.
    #[cfg(feature = "v0-2")]
    #[doc(hidden)]
    pub mod bindings {
        wit_bindgen::generate!({
            path: "wit/v0.2.0",
            world: "consolidator",
            pub_export_macro: true,
            export_macro_name: "export_consolidator",
            default_bindings_module: "tenon_policy_sdk::consolidator::bindings",
            generate_all,
        });
        crate::validate_config_from!(Guest);
    }
    #[cfg(feature = "v0-2")]
    pub use self::bindings::{
        export_consolidator, exports::tenon::policy0_1_0::consolidation, tenon::policy0_1_0::types,
    };

    /// Seconds east of UTC in `zone` (an IANA name such as `Australia/Sydney`, `UTC`, or an
    /// offset such as `+08:00`) at Unix time `unix_seconds`, from the host's time-zone
    /// database; an error names an unknown zone.
    #[cfg(feature = "v0-2")]
    pub fn utc_offset(zone: &str, unix_seconds: i64) -> Result<i32, String> {
        bindings::tenon::policy0_2_0::time::utc_offset(zone, unix_seconds)
    }
    pub use consolidation::{Candidate, ConsolidationInput, Guest, Method, Plan, PlanReview, Replacement, Verdict};
    pub use types::{Label, Nodepool};
}

/// The `disruption-budget` world: how many nodes may be disrupted now.
pub mod budget {
    #[cfg(not(feature = "v0-2"))]
    wit_bindgen::generate!({
        path: "wit",
        world: "disruption-budget",
        pub_export_macro: true,
        export_macro_name: "export_budget",
        default_bindings_module: "tenon_policy_sdk::budget",
    });
    #[cfg(not(feature = "v0-2"))]
    pub use self::{exports::tenon::policy::budgets, tenon::policy::types};
    /// Contract 0.2.0's bindings: the world's own `Guest` (`validate-config`) apart from the
    /// decision interface's.
    #[cfg(feature = "v0-2")]
    #[doc(hidden)]
    pub mod bindings {
        wit_bindgen::generate!({
            path: "wit/v0.2.0",
            world: "disruption-budget",
            pub_export_macro: true,
            export_macro_name: "export_budget",
            default_bindings_module: "tenon_policy_sdk::budget::bindings",
            generate_all,
        });
        crate::validate_config_from!(Guest);
    }
    #[cfg(feature = "v0-2")]
    pub use self::bindings::{export_budget, exports::tenon::policy0_1_0::budgets, tenon::policy0_1_0::types};

    /// Seconds east of UTC in `zone` (an IANA name such as `Australia/Sydney`, `UTC`, or an
    /// offset such as `+08:00`) at Unix time `unix_seconds`, from the host's time-zone
    /// database; an error names an unknown zone.
    #[cfg(feature = "v0-2")]
    pub fn utc_offset(zone: &str, unix_seconds: i64) -> Result<i32, String> {
        bindings::tenon::policy0_2_0::time::utc_offset(zone, unix_seconds)
    }
    pub use budgets::{Allowance, Budget, BudgetInput, BudgetNodes, Guest, Reason};
    pub use types::{Label, Nodepool};

    /// Karpenter's answer for `input`: the most restrictive active budget that applies to the
    /// reason, percentages rounded up, minus nodes already disrupting; anything invalid allows
    /// nothing. A policy that narrows Karpenter's budgets starts from this.
    pub fn karpenter(input: &BudgetInput) -> Allowance {
        let mut allowed = u32::MAX;
        let mut why = String::from("no budget applies");
        for (i, b) in input.budgets.iter().enumerate() {
            if b.reasons.as_ref().is_some_and(|rs| !rs.contains(&input.reason)) {
                continue;
            }
            if !b.valid {
                return Allowance { allowed: 0, reason: format!("budget {i} is invalid: no disruption allowed") };
            }
            if !b.active {
                continue;
            }
            let value = match b.nodes {
                BudgetNodes::Count(n) => n,
                BudgetNodes::Percent(p) => (u64::from(input.total_nodes) * u64::from(p)).div_ceil(100) as u32,
                BudgetNodes::Invalid => {
                    return Allowance {
                        allowed: 0,
                        reason: format!("budget {i} has an invalid nodes value: no disruption allowed"),
                    };
                }
            };
            if value < allowed {
                allowed = value;
                why = format!("budget {i} allows {value}");
            }
        }
        if allowed == u32::MAX {
            return Allowance { allowed, reason: why };
        }
        Allowance {
            allowed: allowed.saturating_sub(input.disrupting),
            reason: format!("{why}, {} already disrupting", input.disrupting),
        }
    }
}

/// Calendar helpers for policies. With contract 0.1.0 the sandbox has no time-zone database,
/// so [`time::utc_offset`] knows a small table of zones (EU and US daylight-saving rules) and
/// fixed offsets; with 0.2.0 (the `v0-2` feature) each world's `utc_offset` asks the host's
/// database instead, and the table is gone.
pub mod time {
    pub const DAY: i64 = 86_400;
    /// Weekday names by [`weekday`] number.
    pub const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

    #[cfg(not(feature = "v0-2"))]
    #[derive(Clone, Copy)]
    enum Dst {
        No,
        Eu,
        Us,
    }

    /// Minutes east of UTC in winter, and the daylight-saving rule.
    #[cfg(not(feature = "v0-2"))]
    const ZONES: &[(&str, i64, Dst)] = &[
        ("UTC", 0, Dst::No),
        ("Europe/London", 0, Dst::Eu),
        ("Europe/Dublin", 0, Dst::Eu),
        ("Europe/Berlin", 60, Dst::Eu),
        ("Europe/Paris", 60, Dst::Eu),
        ("Europe/Amsterdam", 60, Dst::Eu),
        ("Europe/Madrid", 60, Dst::Eu),
        ("Europe/Helsinki", 120, Dst::Eu),
        ("America/New_York", -300, Dst::Us),
        ("America/Chicago", -360, Dst::Us),
        ("America/Denver", -420, Dst::Us),
        ("America/Los_Angeles", -480, Dst::Us),
        ("Asia/Kolkata", 330, Dst::No),
        ("Asia/Shanghai", 480, Dst::No),
        ("Asia/Singapore", 480, Dst::No),
        ("Asia/Tokyo", 540, Dst::No),
    ];

    /// The zone names [`utc_offset`] knows.
    #[cfg(not(feature = "v0-2"))]
    pub fn zones() -> impl Iterator<Item = &'static str> {
        ZONES.iter().map(|z| z.0)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let (era, yoe) = (y.div_euclid(400), y.rem_euclid(400));
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
        era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    }

    /// 0 = Sunday (1970-01-01 was a Thursday).
    pub fn weekday(day: i64) -> usize {
        (day + 4).rem_euclid(7) as usize
    }

    /// `YYYY-MM-DD` as days since 1970-01-01, if it is a real date.
    pub fn parse_date(s: &str) -> Option<i64> {
        let mut p = s.splitn(3, '-').map(|x| x.parse::<i64>().ok());
        let (y, m, d) = (p.next()??, p.next()??, p.next()??);
        let day = days_from_civil(y, m, d);
        ((1..=12).contains(&m) && d >= 1 && day < days_from_civil(y + m / 12, m % 12 + 1, 1)).then_some(day)
    }

    /// `HH:MM` (24-hour) as minutes after midnight; `24:00` ends a day.
    pub fn parse_hhmm(s: &str) -> Option<i64> {
        let (h, m) = s.split_once(':').filter(|(h, m)| h.len() == 2 && m.len() == 2)?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        ((0..24).contains(&h) && (0..60).contains(&m) || (h, m) == (24, 0)).then_some(h * 60 + m)
    }

    #[cfg(not(feature = "v0-2"))]
    fn sunday_on_or_after(y: i64, m: i64, d: i64) -> i64 {
        let day = days_from_civil(y, m, d);
        day + (7 - weekday(day) as i64) % 7
    }

    /// Minutes east of UTC at Unix time `t` in `zone`: a name from [`zones`] or a fixed
    /// offset (`+08:00`, `-05:30`). None when the zone is unknown.
    #[cfg(not(feature = "v0-2"))]
    pub fn utc_offset(zone: &str, t: i64) -> Option<i64> {
        if let Some(rest) = zone.strip_prefix('+') {
            return parse_hhmm(rest).filter(|m| *m <= 14 * 60);
        }
        if let Some(rest) = zone.strip_prefix('-') {
            return parse_hhmm(rest).filter(|m| *m <= 12 * 60).map(|m| -m);
        }
        let &(_, std, dst) = ZONES.iter().find(|z| z.0 == zone)?;
        let day = t.div_euclid(DAY);
        let y = (1969 + day / 365..=1971 + day / 365).rev().find(|&y| days_from_civil(y, 1, 1) <= day)?;
        let (from, to) = match dst {
            Dst::No => return Some(std),
            // Last Sundays of March and October, 01:00 UTC.
            Dst::Eu => (sunday_on_or_after(y, 3, 25) * DAY + 3_600, sunday_on_or_after(y, 10, 25) * DAY + 3_600),
            // Second Sunday of March 02:00 standard time; first Sunday of November 02:00 daylight time.
            Dst::Us => (
                sunday_on_or_after(y, 3, 8) * DAY + 7_200 - std * 60,
                sunday_on_or_after(y, 11, 1) * DAY + 3_600 - std * 60,
            ),
        };
        Some(if (from..to).contains(&t) { std + 60 } else { std })
    }
}

/// Parses the configuration the NodePool gives your hook (`tenon.dev/scoring-config`,
/// `consolidation-config` or `disruption-config`, else the shared `tenon.dev/policy-config`)
/// into your settings type. An error names the problem; return it as your policy's `Err` so
/// the NodePool shows it.
pub fn config<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, String> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    serde_json::from_str(json).map_err(|e| format!("config: {e}"))
}

/// `value`, the config field `field`, when it is a finite number ≥ 0; else an error naming
/// the field (`maxPremiumPercent must be a non-negative percentage, got -5`).
pub fn non_negative(field: &str, value: f64, what: &str) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("config: {field} must be a non-negative {what}, got {value}"))
    }
}

/// The value of a NodePool label, if present.
pub fn label<'a>(labels: &'a [scorer::Label], key: &str) -> Option<&'a str> {
    labels.iter().find(|l| l.key == key).map(|l| l.value.as_str())
}

// The export macros emit the component's exports only when compiling for WebAssembly, so a
// policy crate's `cargo test` runs natively (native linkers reject the export names).

/// Exports a `scorer::Guest` implementation as the policy's `scorer` world.
#[macro_export]
macro_rules! export_scorer {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::scorer::export_scorer!($t);
    };
}

/// Exports a `consolidator::Guest` implementation as the policy's `consolidator` world.
#[macro_export]
macro_rules! export_consolidator {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::consolidator::export_consolidator!($t);
    };
}

/// Exports a `budget::Guest` implementation as the policy's `disruption-budget` world.
#[macro_export]
macro_rules! export_budget {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::budget::export_budget!($t);
    };
}
