//! Karpenter's scheduler configuration (`SCHEDULER_CONFIG`, `--scheduler-config`): the parts
//! of the cluster's kube-scheduler configuration a scheduling simulation must mirror. Today
//! that is the PodTopologySpread plugin's `defaultConstraints`, applied to pods that declare
//! no spread of their own. Decoded strictly and validated as kube-scheduler validates the
//! plugin's arguments, so a value either scheduler would refuse is refused here at start-up.

use crate::decode::render_path;
use crate::validation::rules::qualified_name_error;
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::{Deserialize, Serialize};

/// The decoded setting; `Default` is "no overrides".
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_topology_spread: Option<PodTopologySpread>,
}

/// kube-scheduler's PodTopologySpread plugin arguments, as far as scheduling mirrors them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpread {
    /// Applied to every pod without `topologySpreadConstraints`, with a selector deduced per
    /// pod from the Services and the controller that select it (never given here).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

/// Why the setting was refused: the field, what is wrong, and the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("SCHEDULER_CONFIG: {field}: {message} (fix: {fix})")]
pub struct SchedulerConfigError {
    pub field: String,
    pub message: String,
    pub fix: String,
}

fn refuse(field: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> SchedulerConfigError {
    SchedulerConfigError { field: field.into(), message: message.into(), fix: fix.into() }
}

impl SchedulerConfig {
    /// Decodes and validates a YAML or JSON document; an empty one means no overrides.
    pub fn parse(raw: &str) -> Result<SchedulerConfig, SchedulerConfigError> {
        if raw.trim().is_empty() {
            return Ok(SchedulerConfig::default());
        }
        let value: serde_json::Value = serde_yaml::from_str(raw)
            .map_err(|e| refuse("(document)", e.to_string(), "give a YAML or JSON mapping"))?;
        let mut unknown = Vec::new();
        let mut record = |p: serde_ignored::Path<'_>| unknown.push(render_path(&p));
        let de = serde_ignored::Deserializer::new(value, &mut record);
        let config: SchedulerConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            refuse(field, e.into_inner().to_string(), "fix the value's type")
        })?;
        if let Some(field) = unknown.into_iter().next() {
            return Err(refuse(
                field,
                "unknown field",
                "only podTopologySpread.defaultConstraints is read; check the spelling and indentation",
            ));
        }
        config.validate()?;
        Ok(config)
    }

    /// kube-scheduler's checks of `defaultConstraints` (ValidatePodTopologySpreadArgs).
    pub fn validate(&self) -> Result<(), SchedulerConfigError> {
        let constraints = self.default_constraints();
        for (i, c) in constraints.iter().enumerate() {
            let field = |f: &str| format!("podTopologySpread.defaultConstraints[{i}].{f}");
            if c.max_skew <= 0 {
                return Err(refuse(field("maxSkew"), "must be greater than 0", "set maxSkew: 1 or more"));
            }
            if c.topology_key.is_empty() {
                return Err(refuse(
                    field("topologyKey"),
                    "must be set",
                    "name a node label, e.g. topology.kubernetes.io/zone",
                ));
            }
            if let Some(why) = qualified_name_error(&c.topology_key) {
                return Err(refuse(field("topologyKey"), why, "name a node label, e.g. topology.kubernetes.io/zone"));
            }
            if !matches!(c.when_unsatisfiable.as_str(), "DoNotSchedule" | "ScheduleAnyway") {
                return Err(refuse(
                    field("whenUnsatisfiable"),
                    format!("{:?} is not DoNotSchedule or ScheduleAnyway", c.when_unsatisfiable),
                    "set whenUnsatisfiable: DoNotSchedule or ScheduleAnyway",
                ));
            }
            if c.label_selector.is_some() {
                return Err(refuse(
                    field("labelSelector"),
                    "must not be set: the selector is deduced for each pod",
                    "remove labelSelector",
                ));
            }
            if c.match_label_keys.as_ref().is_some_and(|k| !k.is_empty()) {
                return Err(refuse(
                    field("matchLabelKeys"),
                    "must not be set: it has no effect on default constraints",
                    "remove matchLabelKeys",
                ));
            }
            if let Some(j) = constraints[..i]
                .iter()
                .position(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable)
            {
                return Err(refuse(
                    format!("podTopologySpread.defaultConstraints[{i}]"),
                    format!(
                        "repeats [{j}] ({}, {}): one constraint per topologyKey and whenUnsatisfiable",
                        c.topology_key, c.when_unsatisfiable
                    ),
                    "remove one of the two",
                ));
            }
        }
        Ok(())
    }

    /// The default spread constraints; empty when none are configured.
    pub fn default_constraints(&self) -> &[TopologySpreadConstraint] {
        self.pod_topology_spread.as_ref().map_or(&[], |p| &p.default_constraints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(raw: &str) -> SchedulerConfigError {
        SchedulerConfig::parse(raw).expect_err(raw)
    }

    #[test]
    fn empty_means_no_defaults() {
        assert!(SchedulerConfig::parse("").unwrap().default_constraints().is_empty());
        assert!(SchedulerConfig::parse("  \n").unwrap().default_constraints().is_empty());
    }

    #[test]
    fn yaml_and_json_decode_the_same() {
        let yaml = "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}\n";
        let json = r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway","minDomains":2}]}}"#;
        let (a, b) = (SchedulerConfig::parse(yaml).unwrap(), SchedulerConfig::parse(json).unwrap());
        assert_eq!(a, b);
        let c = &a.default_constraints()[0];
        assert_eq!((c.max_skew, c.min_domains, c.when_unsatisfiable.as_str()), (1, Some(2), "ScheduleAnyway"));
    }

    #[test]
    fn each_refusal_names_the_field_and_the_fix() {
        let one = |c: &str| format!("podTopologySpread: {{defaultConstraints: [{c}]}}");
        let cases = [
            (one("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"), "[0].maxSkew"),
            (one("{maxSkew: 1, topologyKey: '', whenUnsatisfiable: DoNotSchedule}"), "[0].topologyKey"),
            (one("{maxSkew: 1, topologyKey: 'Not A/Label!', whenUnsatisfiable: DoNotSchedule}"), "[0].topologyKey"),
            (one("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}"), "[0].whenUnsatisfiable"),
            (
                one("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}"),
                "[0].labelSelector",
            ),
            (
                one("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}"),
                "[0].matchLabelKeys",
            ),
            (one("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, colour: red}"), "[0].colour"),
            (
                one(
                    "{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}",
                ),
                "defaultConstraints[1]",
            ),
        ];
        for (raw, field) in cases {
            let e = refused(&raw);
            assert!(e.field.ends_with(field), "{raw}: {e}");
            assert!(e.to_string().contains("fix:"), "{e}");
        }
        assert_eq!(refused("podTopologySpred: {}").field, "podTopologySpred");
        assert_eq!(refused("[1, 2").field, "(document)");
    }

    #[test]
    fn the_same_key_with_each_action_is_allowed() {
        let raw = "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 3, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]}";
        assert_eq!(SchedulerConfig::parse(raw).unwrap().default_constraints().len(), 2);
    }
}
