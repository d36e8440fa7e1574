//! Karpenter's two summaries (`karpenter_nodes_termination_duration_seconds`,
//! `karpenter_pods_startup_duration_seconds`), which prometheus-client cannot express: the
//! quantiles 0, 0.5, 0.9, 0.99 and 1 that Karpenter's dashboards read, over the observations of
//! the last ten minutes (Go's default summary window), with cumulative `_sum` and `_count`.

use std::collections::VecDeque;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// Karpenter's objectives.
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];
/// How long an observation counts towards the quantiles.
pub const WINDOW: Duration = Duration::from_secs(600);
/// At most this many observations are kept for the quantiles (the oldest go first): a bound
/// on memory when thousands of pods start at once. Quantiles are exact below it.
pub const KEPT: usize = 4096;

#[derive(Debug, Default, Clone)]
pub struct Window {
    recent: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

impl Window {
    pub fn observe(&mut self, at: Instant, v: f64) {
        self.recent.push_back((at, v));
        if self.recent.len() > KEPT {
            self.recent.pop_front();
        }
        self.sum += v;
        self.count += 1;
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The quantiles of the observations younger than [`WINDOW`] at `now` (NaN with none, as
    /// Go's client reports an empty window).
    pub fn quantiles(&self, now: Instant) -> [(f64, f64); 5] {
        let mut live: Vec<f64> =
            self.recent.iter().filter(|(t, _)| now.saturating_duration_since(*t) < WINDOW).map(|(_, v)| *v).collect();
        live.sort_by(f64::total_cmp);
        QUANTILES.map(|q| {
            if live.is_empty() {
                return (q, f64::NAN);
            }
            // The smallest value with at least q of the observations at or below it.
            let rank = ((q * live.len() as f64).ceil() as usize).clamp(1, live.len());
            (q, live[rank - 1])
        })
    }

    /// The summary's samples for one label set (`labels` already encoded, `a="x",b="y"`).
    pub fn encode(&self, out: &mut String, name: &str, labels: &str, now: Instant) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (q, v) in self.quantiles(now) {
            let _ = writeln!(out, "{name}{{{labels}{sep}quantile=\"{q}\"}} {}", number(v));
        }
        let braces = |s: &str| if s.is_empty() { String::new() } else { format!("{{{s}}}") };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), number(self.sum));
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), self.count);
    }
}

/// A sample value as the text format spells it.
fn number(v: f64) -> String {
    if v.is_nan() { "NaN".to_string() } else { v.to_string() }
}

/// A label value escaped for the text format.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_nearest_rank_over_the_window() {
        let t0 = Instant::now();
        let mut w = Window::default();
        for v in 1..=100 {
            w.observe(t0, f64::from(v));
        }
        let q = w.quantiles(t0 + Duration::from_secs(1));
        assert_eq!(q, [(0.0, 1.0), (0.5, 50.0), (0.9, 90.0), (0.99, 99.0), (1.0, 100.0)]);
        // Ten minutes later none count; the totals stay.
        let later = w.quantiles(t0 + WINDOW);
        assert!(later.iter().all(|(_, v)| v.is_nan()));
        let mut text = String::new();
        w.encode(&mut text, "x_seconds", "nodepool=\"a\"", t0 + WINDOW);
        assert!(text.contains("x_seconds{nodepool=\"a\",quantile=\"0.5\"} NaN\n"), "{text}");
        assert!(text.contains("x_seconds_sum{nodepool=\"a\"} 5050\nx_seconds_count{nodepool=\"a\"} 100\n"), "{text}");
    }

    #[test]
    fn memory_is_bounded_and_totals_are_not() {
        let t0 = Instant::now();
        let mut w = Window::default();
        for v in 0..(KEPT + 10) {
            w.observe(t0, v as f64);
        }
        assert_eq!(w.recent.len(), KEPT);
        assert_eq!(w.count(), (KEPT + 10) as u64);
        assert_eq!(w.quantiles(t0)[0], (0.0, 10.0), "the oldest observations went first");
    }
}
