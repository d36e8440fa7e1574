//! Taints and tolerations with kube-scheduler's matching rules.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl Effect {
    pub fn parse(s: &str) -> Option<Effect> {
        match s {
            "NoSchedule" => Some(Effect::NoSchedule),
            "PreferNoSchedule" => Some(Effect::PreferNoSchedule),
            "NoExecute" => Some(Effect::NoExecute),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: Effect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{:?}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{:?}", self.key, self.value, self.effect)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `exists` tolerates every key.
    pub key: String,
    /// `Exists` (true) or `Equal` (false).
    pub exists: bool,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<Effect>,
}

impl Toleration {
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != t.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == t.key && (self.exists || self.value == t.value)
    }
}

/// The first taint that `tolerations` do not tolerate. `PreferNoSchedule` taints count only
/// when `strict`: Karpenter first treats them as hard and relaxes that last.
pub fn untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration], strict: bool) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| strict || t.effect != Effect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        let taint = Taint { key: "dedicated".into(), value: "ci".into(), effect: Effect::NoSchedule };
        let eq =
            Toleration { key: "dedicated".into(), exists: false, value: "ci".into(), effect: Some(Effect::NoSchedule) };
        let wrong = Toleration { value: "prod".into(), ..eq.clone() };
        let any = Toleration { key: String::new(), exists: true, value: String::new(), effect: None };
        assert!(eq.tolerates(&taint) && !wrong.tolerates(&taint) && any.tolerates(&taint));
        let soft = Taint { effect: Effect::PreferNoSchedule, ..taint.clone() };
        assert!(untolerated(std::slice::from_ref(&soft), &[], false).is_none());
        assert!(untolerated(&[soft], &[], true).is_some());
    }
}
