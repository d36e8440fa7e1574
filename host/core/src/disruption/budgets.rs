//! Disruption budgets: how many of a NodePool's nodes may be voluntarily disrupted now.

use crate::model::{Budget, BudgetNodes, DisruptionReason};

/// What a budget rule sees for one NodePool and reason.
#[derive(Clone, Debug)]
pub struct BudgetContext<'a> {
    pub nodepool: &'a str,
    pub reason: DisruptionReason,
    /// Seconds since the epoch (UTC).
    pub now: i64,
    /// Initialized nodes of the NodePool.
    pub total_nodes: usize,
    /// Of those, nodes already being disrupted, deleted, or NotReady.
    pub disrupting: usize,
    pub budgets: &'a [Budget],
}

/// How many more nodes may be disrupted, and why that many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowance {
    pub allowed: usize,
    pub why: String,
}

/// A budget rule (a Wasm budget policy) only ever tightens the NodePool's own budgets: the
/// allowance is the smaller of the two.
pub trait BudgetRule {
    fn allowed(&self, ctx: &BudgetContext<'_>) -> Allowance;
    fn name(&self) -> &str;
    /// Whether the answer may change with `now` alone, the rest of the context unchanged.
    /// A policy sees the clock, so it may.
    fn varies_with_time(&self) -> bool {
        true
    }
}

/// `policy`'s answer, unless the NodePool's own budgets (`own`) allow fewer: a rule can
/// only tighten them.
pub fn tightened(policy: Allowance, own: Allowance, rule: &str) -> Allowance {
    if policy.allowed <= own.allowed {
        return policy;
    }
    let more = if policy.allowed == usize::MAX { "no limit".to_string() } else { policy.allowed.to_string() };
    Allowance { allowed: own.allowed, why: format!("{} ({rule} allowed {more}; a policy can only tighten)", own.why) }
}

/// Karpenter's budgets: the most restrictive active budget that applies to the reason,
/// percentages of the NodePool's nodes rounded up, minus nodes already disrupting; an
/// unparsable budget allows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct KarpenterBudgets;

/// Whether a budget's window is open at `now`; errors fail closed.
pub fn is_active(b: &Budget, now: i64) -> Result<bool, String> {
    match &b.window {
        None => Ok(true),
        Some(Err(e)) => Err(e.clone()),
        // Active when the schedule fired within the last `duration`: the next hit after
        // (now - duration) is not later than now.
        Some(Ok((schedule, duration))) => {
            Ok(schedule.next_at_or_after(now - duration + 1).is_some_and(|hit| hit <= now))
        }
    }
}

impl BudgetRule for KarpenterBudgets {
    fn allowed(&self, ctx: &BudgetContext<'_>) -> Allowance {
        let mut allowed = usize::MAX;
        let mut why = "no budget applies".to_string();
        for (i, b) in ctx.budgets.iter().enumerate() {
            if b.reasons.as_ref().is_some_and(|rs| !rs.contains(&ctx.reason)) {
                continue;
            }
            let active = match is_active(b, ctx.now) {
                Ok(a) => a,
                Err(e) => {
                    return Allowance {
                        allowed: 0,
                        why: format!("budget {i} is invalid ({e}): no disruption allowed"),
                    };
                }
            };
            if !active {
                continue;
            }
            let value = match b.nodes {
                BudgetNodes::Count(n) => n as usize,
                BudgetNodes::Percent(p) => (ctx.total_nodes * p as usize).div_ceil(100),
                BudgetNodes::Invalid => {
                    return Allowance {
                        allowed: 0,
                        why: format!("budget {i} has an invalid nodes value: no disruption allowed"),
                    };
                }
            };
            if value < allowed {
                allowed = value;
                let nodes = match b.nodes {
                    BudgetNodes::Count(n) => n.to_string(),
                    BudgetNodes::Percent(p) => format!("{p}% of {}", ctx.total_nodes),
                    BudgetNodes::Invalid => unreachable!(),
                };
                why = format!("budget {i} allows {value} ({nodes})");
            }
        }
        if allowed == usize::MAX {
            return Allowance { allowed, why };
        }
        let left = allowed.saturating_sub(ctx.disrupting);
        Allowance { allowed: left, why: format!("{why}, {} already disrupting", ctx.disrupting) }
    }

    fn name(&self) -> &str {
        "karpenter-budgets"
    }

    /// Only through the budgets' windows, which the NodePool shows.
    fn varies_with_time(&self) -> bool {
        false
    }
}
