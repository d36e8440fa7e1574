//! (Long: one algebra over requirement sets, which every decision uses, and its tests.)
//! Karpenter's requirements algebra: node selector requirements as sets that can be
//! intersected, checked for compatibility, and asked *which* key conflicts.
//!
//! A requirement is a set of allowed values for one label key: a finite set (`In`), the
//! complement of a finite set (`NotIn`, `Exists`), empty (`DoesNotExist`), optionally bounded
//! for integers (`Gt`, `Lt`, `Gte`, `Lte`).

use std::cmp::Ordering;
use std::fmt;
use tenon_api::wellknown;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    complement: bool,
    /// Sorted, without duplicates.
    values: Vec<String>,
    /// Exclusive lower bound.
    gt: Option<i64>,
    /// Exclusive upper bound.
    lt: Option<i64>,
    pub min_values: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

impl Requirement {
    /// Builds a requirement. Bounds of Gt/Lt/Gte/Lte that do not parse as integers make the
    /// requirement unsatisfiable, as a non-integer bound can match no value.
    pub fn new(key: &str, op: Operator, values: impl IntoIterator<Item = impl Into<String>>) -> Requirement {
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        let bound = || values.first().and_then(|v| v.parse::<i64>().ok());
        let mut r = Requirement {
            key: key.to_string(),
            complement: false,
            values: vec![],
            gt: None,
            lt: None,
            min_values: None,
        };
        match op {
            Operator::In => r.values = sorted(values),
            Operator::NotIn => {
                r.complement = true;
                r.values = sorted(values);
            }
            Operator::Exists => r.complement = true,
            Operator::DoesNotExist => {}
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => {
                let Some(b) = bound() else { return r };
                r.complement = true;
                match op {
                    Operator::Gt => r.gt = Some(b),
                    Operator::Gte => r.gt = Some(b.saturating_sub(1)),
                    Operator::Lt => r.lt = Some(b),
                    _ => r.lt = Some(b.saturating_add(1)),
                }
            }
        }
        r
    }

    pub fn in_values(key: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Requirement {
        Requirement::new(key, Operator::In, values)
    }

    pub fn exists(key: &str) -> Requirement {
        Requirement::new(key, Operator::Exists, Vec::<String>::new())
    }

    pub fn with_min_values(mut self, min: Option<u32>) -> Self {
        self.min_values = min;
        self
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.gt.is_none() && self.lt.is_none() {
            return true;
        }
        let Ok(v) = value.parse::<i64>() else { return false };
        self.gt.is_none_or(|g| v > g) && self.lt.is_none_or(|l| v < l)
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        let listed = self.values.binary_search_by(|v| v.as_str().cmp(value)).is_ok();
        (listed != self.complement) && self.within_bounds(value)
    }

    /// The intersection of two requirements on the same key.
    pub fn intersection(&self, o: &Requirement) -> Requirement {
        let complement = self.complement && o.complement;
        let gt = match (self.gt, o.gt) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let lt = match (self.lt, o.lt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let values = match (self.complement, o.complement) {
            (true, true) => sorted(self.values.iter().chain(&o.values).cloned().collect()),
            (true, false) => o.values.iter().filter(|v| !self.values.contains(v)).cloned().collect(),
            (false, true) => self.values.iter().filter(|v| !o.values.contains(v)).cloned().collect(),
            (false, false) => self.values.iter().filter(|v| o.values.binary_search(v).is_ok()).cloned().collect(),
        };
        let min_values = match (self.min_values, o.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let mut r = Requirement { key: self.key.clone(), complement, values, gt, lt, min_values };
        if !r.complement {
            let keep: Vec<String> = r.values.iter().filter(|v| r.within_bounds(v)).cloned().collect();
            r.values = keep;
        } else if let (Some(g), Some(l)) = (r.gt, r.lt)
            && g.saturating_add(1) >= l
        {
            r = Requirement {
                key: r.key,
                complement: false,
                values: vec![],
                gt: None,
                lt: None,
                min_values: r.min_values,
            };
        }
        r
    }

    /// Whether intersecting with `o` would leave this requirement exactly as it is, decided
    /// without building the intersection (the scheduler's hot path: a pod whose requirements
    /// a NodeClaim already meets need not copy the NodeClaim's).
    pub fn absorbs(&self, o: &Requirement) -> bool {
        let min_kept = match (self.min_values, o.min_values) {
            (_, None) => true,
            (Some(a), Some(b)) => a >= b,
            (None, Some(_)) => false,
        };
        let gt_kept = match (self.gt, o.gt) {
            (_, None) => true,
            (Some(a), Some(b)) => a >= b,
            (None, Some(_)) => false,
        };
        let lt_kept = match (self.lt, o.lt) {
            (_, None) => true,
            (Some(a), Some(b)) => a <= b,
            (None, Some(_)) => false,
        };
        if self.key != o.key || !(min_kept && gt_kept && lt_kept) {
            return false;
        }
        if self.complement {
            // Stays a complement only against one; the forbidden values become the union.
            o.complement
                && o.values.iter().all(|v| self.values.binary_search(v).is_ok())
                && !matches!((self.gt, self.lt), (Some(g), Some(l)) if g.saturating_add(1) >= l)
        } else {
            // The bounds are this one's, so `o`'s are no tighter: its listing decides.
            self.values.iter().all(|v| o.has(v) && self.within_bounds(v))
        }
    }

    /// Whether some value satisfies both, without building the intersection.
    pub fn overlaps(&self, o: &Requirement) -> bool {
        match (self.complement, o.complement) {
            (false, false) => self
                .values
                .iter()
                .any(|v| o.values.binary_search(v).is_ok() && self.within_bounds(v) && o.within_bounds(v)),
            (true, false) => o.values.iter().any(|v| self.has(v) && o.within_bounds(v)),
            (false, true) => self.values.iter().any(|v| o.has(v) && self.within_bounds(v)),
            (true, true) => {
                let gt = self.gt.max(o.gt);
                let lt = match (self.lt, o.lt) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                !matches!((gt, lt), (Some(g), Some(l)) if g.saturating_add(1) >= l)
            }
        }
    }

    /// Whether no value satisfies the requirement.
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// Number of allowed values; `usize::MAX`-ish for complements (unbounded).
    pub fn len(&self) -> usize {
        if self.complement { usize::MAX - self.values.len() } else { self.values.len() }
    }

    /// The finite set of allowed values (meaningful only when not a complement).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The exclusive numeric bounds (`Gt`, `Lt`), if any.
    pub fn bounds(&self) -> (Option<i64>, Option<i64>) {
        (self.gt, self.lt)
    }

    /// The operator this requirement would be written with.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    fn negative(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// Whether a node can satisfy both: some value in common, or (Karpenter's exception)
    /// both only forbid values, so the label may simply be absent.
    pub fn agrees_with(&self, other: &Requirement) -> bool {
        self.overlaps(other) || (self.negative() && other.negative())
    }

    /// Any one allowed value, preferring the smallest listed (for a chosen domain).
    pub fn any(&self) -> Option<&str> {
        if self.complement { None } else { self.values.first().map(String::as_str) }
    }

    /// A label value a new node can carry to satisfy it: the first listed value, or for
    /// `NotIn`, `Exists`, `Gt` and `Lt` the smallest non-negative integer allowed (Karpenter
    /// picks one at random from the same range). `None` for `DoesNotExist` or when nothing fits.
    pub fn label_value(&self) -> Option<String> {
        if !self.complement {
            return self.values.iter().find(|v| self.within_bounds(v)).cloned();
        }
        let from = self.gt.map_or(0, |g| g.saturating_add(1)).max(0);
        let to = self.lt.unwrap_or(i64::MAX);
        (from..to).take(self.values.len() + 1).map(|n| n.to_string()).find(|v| !self.values.contains(v))
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = || format!("[{}]", self.values.join(", "));
        match self.operator() {
            Operator::In => write!(f, "In {}", list())?,
            Operator::NotIn => write!(f, "NotIn {}", list())?,
            Operator::Exists if self.gt.is_some() || self.lt.is_some() => {}
            Operator::Exists => f.write_str("Exists")?,
            _ => f.write_str("DoesNotExist")?,
        }
        if self.complement {
            let mut sep = if self.values.is_empty() { "" } else { " " };
            if let Some(g) = self.gt {
                write!(f, "{sep}Gt {g}")?;
                sep = " ";
            }
            if let Some(l) = self.lt {
                write!(f, "{sep}Lt {l}")?;
            }
        }
        Ok(())
    }
}

/// A conflict between two requirement sets, naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// Both constrain `key` and no value satisfies both.
    Disjoint { key: String, incoming: String, existing: String },
    /// `key` is a custom label the other side does not define.
    Undefined { key: String },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Disjoint { key, incoming, existing } => write!(f, "{key} {incoming} conflicts with {existing}"),
            Conflict::Undefined { key } => write!(f, "label {key:?} does not have known values"),
        }
    }
}

/// Requirements on distinct keys, sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements(Vec<Requirement>);

impl Requirements {
    pub fn new() -> Self {
        Requirements(Vec::new())
    }

    /// Gives back the room the vector grew into (a one-key set holds room for four): for
    /// the snapshot's ten thousand pods, not for the scheduler's short-lived sets.
    pub fn compact(mut self) -> Self {
        self.0.shrink_to_fit();
        self
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|r| r.key.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        // A scan beats the binary search at these sizes (tens of keys): most keys differ in
        // length, so few are compared byte by byte, and well-known keys share long prefixes.
        self.0.iter().find(|r| r.key == key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Adds a requirement, intersecting with any existing one on the same key. Returns
    /// whether the set changed.
    pub fn add(&mut self, req: Requirement) -> bool {
        match self.find(&req.key) {
            Ok(i) => {
                let merged = self.0[i].intersection(&req);
                let changed = merged != self.0[i];
                self.0[i] = merged;
                changed
            }
            Err(i) => {
                self.0.insert(i, req);
                true
            }
        }
    }

    pub fn add_all(&mut self, other: &Requirements) {
        for r in &other.0 {
            self.add(r.clone());
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Karpenter's `Intersects`: every key both sides constrain must have a common value,
    /// except when both sides only exclude values.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Conflict> {
        // Merge-join over the two sorted lists.
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() && j < incoming.0.len() {
            let (a, b) = (&self.0[i], &incoming.0[j]);
            match a.key.cmp(&b.key) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    if a.intersection(b).is_empty() && !(a.negative() && b.negative()) {
                        return Err(Conflict::Disjoint {
                            key: a.key.clone(),
                            incoming: b.to_string(),
                            existing: a.to_string(),
                        });
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// Karpenter's `Compatible` with `AllowUndefinedWellKnownLabels`: incoming custom labels
    /// must be defined here (unless they only exclude), well-known labels may be undefined,
    /// and every shared key must intersect.
    pub fn compatible(&self, incoming: &Requirements) -> Result<(), Conflict> {
        for r in &incoming.0 {
            if !is_well_known(&r.key) && !self.has(&r.key) && !r.negative() {
                return Err(Conflict::Undefined { key: r.key.clone() });
            }
        }
        self.intersects(incoming)
    }

    /// [`Self::compatible`] as a yes/no answer, without allocating: the scheduler's hot path.
    pub fn is_compatible(&self, incoming: &Requirements) -> bool {
        incoming.0.iter().all(|b| match self.get(&b.key) {
            Some(a) => a.overlaps(b) || (a.negative() && b.negative()),
            None => b.negative() || is_well_known(&b.key),
        })
    }

    /// Whether a node with these labels satisfies every requirement.
    pub fn matches_labels(&self, labels: &dyn Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|r| match labels(&r.key) {
            Some(v) => r.has(&v),
            None => r.negative() || r.operator() == Operator::DoesNotExist,
        })
    }
}

impl FromIterator<Requirement> for Requirements {
    /// Collects requirements, intersecting those on the same key.
    fn from_iter<I: IntoIterator<Item = Requirement>>(reqs: I) -> Self {
        let mut r = Requirements::new();
        for req in reqs {
            r.add(req);
        }
        r
    }
}

/// Labels whose values instance types and offerings define, so a NodePool need not.
pub fn is_well_known(key: &str) -> bool {
    wellknown::WELL_KNOWN_KUBERNETES_LABELS.contains(&key)
        || wellknown::WELL_KNOWN_AWS_LABELS.contains(&key)
        || key == wellknown::LABEL_ZONE_ID
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|r| format!("{} {r}", r.key)).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Operator::*;

    fn req(op: Operator, vals: &[&str]) -> Requirement {
        Requirement::new("k", op, vals.iter().copied())
    }

    #[test]
    fn a_compacted_set_keeps_its_requirements_in_no_more_room_than_they_take() {
        let grown = || Requirements::from_iter([Requirement::in_values("a", ["1"])]);
        assert!(grown().0.capacity() > 1, "a vector grows into room for several");
        let compact = grown().compact();
        assert_eq!(compact.0.capacity(), 1);
        assert_eq!(compact, grown());
    }

    /// Requirements on one key over a small universe: every operator with a few values,
    /// with minValues, and pairwise intersections (combined bounds, unions of NotIn).
    fn universe() -> Vec<Requirement> {
        let sets: [&[&str]; 5] = [&[], &["1"], &["2"], &["1", "2"], &["1", "2", "3"]];
        let mut base = Vec::new();
        for op in [In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte] {
            for vals in sets {
                base.push(req(op, vals));
                base.push(req(op, vals).with_min_values(Some(2)));
            }
        }
        let mut all = base.clone();
        for a in &base {
            for b in &base {
                all.push(a.intersection(b));
            }
        }
        all.sort_by_key(|r| format!("{r:?}"));
        all.dedup();
        all
    }

    #[test]
    fn absorbs_only_when_the_intersection_is_unchanged() {
        let all = universe();
        let mut absorbed = 0;
        for a in &all {
            for b in &all {
                if a.absorbs(b) {
                    absorbed += 1;
                    assert_eq!(&a.intersection(b), a, "{a:?} absorbs {b:?}");
                }
            }
        }
        assert!(absorbed > all.len(), "absorbs is not trivially false ({absorbed} pairs)");
    }

    #[test]
    fn a_node_claims_settled_values_absorb_what_its_pods_ask_again() {
        let settled = req(In, &["1"]);
        for asked in [req(In, &["1"]), req(In, &["1", "2"]), req(Exists, &[]), req(NotIn, &["2"])] {
            assert!(settled.absorbs(&asked), "{asked:?}");
        }
        assert!(!settled.absorbs(&req(In, &["2"])));
        assert!(!settled.absorbs(&req(Gt, &["0"])), "the bound would be recorded");
        assert!(!settled.absorbs(&req(In, &["1"]).with_min_values(Some(1))), "minValues would be added");
        assert!(req(NotIn, &["1", "2"]).absorbs(&req(NotIn, &["2"])));
        assert!(!req(NotIn, &["1"]).absorbs(&req(NotIn, &["2"])));
        assert!(!req(Exists, &[]).absorbs(&req(In, &["1"])));
        assert!(!req(In, &["1"]).with_min_values(None).absorbs(&Requirement::in_values("other", ["1"])));
    }

    #[test]
    fn label_values_satisfy_the_requirement() {
        assert_eq!(req(In, &["b", "a"]).label_value().as_deref(), Some("a"));
        assert_eq!(req(NotIn, &["0", "1"]).label_value().as_deref(), Some("2"));
        assert_eq!(req(Exists, &[]).label_value().as_deref(), Some("0"));
        assert_eq!(req(DoesNotExist, &[]).label_value(), None);
        assert_eq!(req(Gt, &["5"]).label_value().as_deref(), Some("6"));
        assert_eq!(req(Lt, &["4"]).label_value().as_deref(), Some("0"));
        let none = req(Gt, &["5"]).intersection(&req(Lt, &["6"]));
        assert_eq!(none.label_value(), None, "nothing lies strictly between 5 and 6");
    }

    #[test]
    fn set_semantics() {
        assert!(req(In, &["a", "b"]).has("a"));
        assert!(!req(NotIn, &["a"]).has("a"));
        assert!(req(Exists, &[]).has("anything"));
        assert!(!req(DoesNotExist, &[]).has("x"));
        assert!(req(Gt, &["4"]).has("5") && !req(Gt, &["4"]).has("4") && !req(Gt, &["4"]).has("x"));
        assert!(req(Gte, &["4"]).has("4") && req(Lte, &["4"]).has("4") && !req(Lt, &["4"]).has("4"));
    }

    #[test]
    fn intersections() {
        let r = req(In, &["a", "b", "c"]).intersection(&req(NotIn, &["b"]));
        assert_eq!(r.values(), ["a", "c"]);
        let r = req(NotIn, &["a"]).intersection(&req(NotIn, &["b"]));
        assert_eq!(r.operator(), NotIn);
        assert!(!r.has("a") && !r.has("b") && r.has("c"));
        let r = req(In, &["3", "5", "7"]).intersection(&req(Gt, &["4"]));
        assert_eq!(r.values(), ["5", "7"]);
        assert!(req(Gt, &["8"]).intersection(&req(Lt, &["9"])).is_empty());
        assert!(!req(Gt, &["7"]).intersection(&req(Lt, &["9"])).is_empty());
        assert!(req(In, &["a"]).intersection(&req(DoesNotExist, &[])).is_empty());
        assert_eq!(req(Exists, &[]).with_min_values(Some(2)).intersection(&req(In, &["a", "b"])).min_values, Some(2));
    }

    #[test]
    fn compatibility_names_the_conflicting_key() {
        let pool = Requirements::from_iter([Requirement::in_values("kubernetes.io/arch", ["amd64"])]);
        let pod = Requirements::from_iter([Requirement::in_values("kubernetes.io/arch", ["arm64"])]);
        let err = pool.compatible(&pod).unwrap_err();
        assert_eq!(err.to_string(), "kubernetes.io/arch In [arm64] conflicts with In [amd64]");
        // A custom label must be defined by the pool, unless the pod only excludes it.
        let custom = Requirements::from_iter([Requirement::in_values("example.com/team", ["a"])]);
        assert!(matches!(pool.compatible(&custom), Err(Conflict::Undefined { .. })));
        let not = Requirements::from_iter([Requirement::new("example.com/team", NotIn, ["a"])]);
        assert!(pool.compatible(&not).is_ok());
        // Undefined well-known labels are fine: instance types define them.
        let zone = Requirements::from_iter([Requirement::in_values("topology.kubernetes.io/zone", ["us-east-1a"])]);
        assert!(pool.compatible(&zone).is_ok());
        // Both only excluding never conflicts.
        let a = Requirements::from_iter([Requirement::new("k", DoesNotExist, Vec::<String>::new())]);
        let b = Requirements::from_iter([Requirement::new("k", NotIn, ["x"])]);
        assert!(a.intersects(&b).is_ok());
    }

    #[test]
    fn overlaps_agrees_with_intersection() {
        let all = [
            req(In, &["1", "5", "a"]),
            req(In, &["5"]),
            req(NotIn, &["5"]),
            req(Exists, &[]),
            req(DoesNotExist, &[]),
            req(Gt, &["4"]),
            req(Lt, &["5"]),
            req(Gte, &["5"]),
            req(Lte, &["1"]),
        ];
        for a in &all {
            for b in &all {
                assert_eq!(a.overlaps(b), !a.intersection(b).is_empty(), "{a} vs {b}");
                let (ra, rb) = (Requirements::from_iter([a.clone()]), Requirements::from_iter([b.clone()]));
                assert_eq!(ra.is_compatible(&rb), ra.compatible(&rb).is_ok(), "{a} vs {b}");
            }
        }
    }
}
