//! Running a scenario: the world ticks through virtual time, the timeline's steps are applied
//! when due, and expectations are checked when due. A failed expectation is a failed run.

use crate::scenario::{Count, Expectation, Scenario};
use crate::world::{DisruptionRecord, Event, NodeClaimRecord, PolicyFailures, Sample, SimError, World};
use serde::Serialize;
use tenon_core::disruption::PolicySet;
use tenon_core::scorer::Scorer;
use tenon_core::work::{self, Work};

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub duration_seconds: i64,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    /// Expectations that did not hold, with why.
    pub failures: Vec<String>,
    pub expectations_checked: usize,
    pub nodeclaims_created: usize,
    pub disruptions: usize,
    /// Every NodeClaim (what it launched as, or why it failed) and every disruption carried
    /// out, in order: the decisions, without their times.
    pub nodeclaims: Vec<NodeClaimRecord>,
    pub disruption_commands: Vec<DisruptionRecord>,
    /// Policy calls whose answer was not used (the fallback decided), grouped.
    pub policy_failures: Vec<PolicyFailures>,
    /// USD spent over the run.
    pub total_cost: f64,
    pub pending_p50_seconds: Option<i64>,
    /// How long each pod that got a node waited, seconds.
    pub pending_seconds: Vec<i64>,
    pub pending_max_seconds: Option<i64>,
    pub final_cost_per_hour: f64,
    /// Spot prices come from a discount model, not data.
    pub spot_prices_are_modelled: bool,
    /// What the decision core did over the run: deterministic, so a test can bound it.
    pub work: Work,
}

impl Report {
    /// Failed policy calls in all.
    pub fn policy_failure_count(&self) -> usize {
        self.policy_failures.iter().map(|f| f.count).sum()
    }
}

fn count_ok(c: &Count, v: usize) -> bool {
    c.min.is_none_or(|m| v >= m) && c.max.is_none_or(|m| v <= m)
}

fn check(w: &World<'_>, e: &Expectation) -> Vec<String> {
    let mut out = Vec::new();
    let at = World::describe_time(e.at.0);
    if let Some(n) = e.pending_pods
        && w.pending() != n
    {
        out.push(format!("at {at}: expected {n} pending pods, found {}", w.pending()));
    }
    if let Some(n) = e.running_pods
        && w.running() != n
    {
        out.push(format!("at {at}: expected {n} running pods, found {}", w.running()));
    }
    let by_pool = w.nodeclaims_by_pool();
    for (pool, c) in &e.nodeclaims {
        let v = by_pool.get(pool).copied().unwrap_or(0);
        if !count_ok(c, v) {
            out.push(format!("at {at}: expected NodeClaims of {pool} in {c:?}, found {v}"));
        }
    }
    let pods_by_pool = w.pods_by_pool();
    for (pool, c) in &e.pods_by_nodepool {
        let v = pods_by_pool.get(pool).copied().unwrap_or(0);
        if !count_ok(c, v) {
            out.push(format!("at {at}: expected pods on NodePool {pool} nodes in {c:?}, found {v}"));
        }
    }
    if let Some(c) = &e.nodeclaims_created
        && !count_ok(c, w.nodeclaims_created)
    {
        out.push(format!("at {at}: expected NodeClaims created in {c:?}, found {}", w.nodeclaims_created));
    }
    for (name, labels) in w.node_labels() {
        for (k, allowed) in &e.instance_labels {
            let v = labels.get(k).cloned().unwrap_or_default();
            if !allowed.contains(&v) {
                out.push(format!("at {at}: node {name} has {k}={v:?}, expected one of {allowed:?}"));
            }
        }
    }
    if let Some(m) = &e.event {
        let hit = w
            .events
            .iter()
            .any(|ev| ev.reason == m.reason && m.message.as_ref().is_none_or(|s| ev.message.contains(s.as_str())));
        if !hit {
            out.push(format!(
                "at {at}: expected an event {:?}{}",
                m.reason,
                m.message.as_ref().map(|s| format!(" mentioning {s:?}")).unwrap_or_default()
            ));
        }
    }
    if let Some(max) = e.cost_per_hour_at_most
        && w.cost_per_hour() > max + 1e-9
    {
        out.push(format!("at {at}: expected cost ≤ ${max:.4}/h, found ${:.4}/h", w.cost_per_hour()));
    }
    if let Some(c) = &e.disruptions
        && !count_ok(c, w.disruptions)
    {
        out.push(format!("at {at}: expected disruptions in {c:?}, found {}", w.disruptions));
    }
    out
}

/// Runs `scenario` to its end. `on_tick` sees every second (for progress and live output).
pub fn run(
    scenario: &Scenario,
    scorer: &dyn Scorer,
    policies: &dyn PolicySet,
    mut on_tick: impl FnMut(&World<'_>),
) -> Result<Report, SimError> {
    let started = work::total();
    let mut w = World::new(scenario, policies)?;
    let mut steps = scenario.timeline.iter().peekable();
    let mut expect: Vec<&Expectation> = scenario.expect.iter().collect();
    expect.sort_by_key(|e| e.at);
    let mut expect = expect.into_iter().peekable();
    let mut failures = Vec::new();
    let mut checked = 0;
    while w.elapsed() <= scenario.duration {
        while let Some((step, docs)) = steps.peek() {
            if step.at.0 > w.elapsed() {
                break;
            }
            w.step(step, docs)?;
            steps.next();
        }
        w.tick(scorer);
        while let Some(e) = expect.peek() {
            if e.at.0 >= w.elapsed() {
                break;
            }
            failures.extend(check(&w, e));
            checked += 1;
            expect.next();
        }
        on_tick(&w);
    }
    for e in expect {
        failures.push(format!(
            "expectation at {} is after the end of the scenario ({})",
            World::describe_time(e.at.0),
            World::describe_time(scenario.duration)
        ));
    }
    let mut pending = w.pending_times.clone();
    pending.sort_unstable();
    Ok(Report {
        scenario: scenario.name.clone(),
        duration_seconds: scenario.duration,
        events: w.events.clone(),
        samples: w.samples.clone(),
        failures,
        expectations_checked: checked,
        nodeclaims_created: w.nodeclaims_created,
        disruptions: w.disruptions,
        nodeclaims: w.nodeclaim_log.clone(),
        disruption_commands: w.disruption_log.clone(),
        policy_failures: w.policy_failures.values().cloned().collect(),
        total_cost: w.cost,
        pending_p50_seconds: pending.get(pending.len() / 2).copied(),
        pending_seconds: pending.clone(),
        pending_max_seconds: pending.last().copied(),
        final_cost_per_hour: w.cost_per_hour(),
        spot_prices_are_modelled: w.spot_prices_are_modelled(),
        work: work::total().since(started),
    })
}
