//! Label selectors (matchLabels and matchExpressions).

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorOp {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A label selector. `None` at a use site means "selects nothing"; an empty selector
/// selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    /// Sorted by key.
    pub expressions: Vec<(String, SelectorOp)>,
}

impl LabelSelector {
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        LabelSelector {
            expressions: labels.iter().map(|(k, v)| (k.clone(), SelectorOp::In(vec![v.clone()]))).collect(),
        }
    }

    pub fn push(&mut self, key: &str, op: SelectorOp) {
        self.expressions.push((key.to_string(), op));
        self.expressions.sort();
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.expressions.iter().all(|(k, op)| match (op, labels.get(k)) {
            (SelectorOp::In(vs), Some(v)) => vs.contains(v),
            (SelectorOp::In(_), None) => false,
            (SelectorOp::NotIn(vs), Some(v)) => !vs.contains(v),
            (SelectorOp::NotIn(_), None) => true,
            (SelectorOp::Exists, v) => v.is_some(),
            (SelectorOp::DoesNotExist, v) => v.is_none(),
        })
    }
}
