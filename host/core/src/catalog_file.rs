//! Instance types written out as JSON and read back: a pinned catalog. The simulator replays
//! one instead of its bundled EC2 data, so a run decides over exactly the instance types,
//! offerings and prices a controller resolved (a differential test pins both worlds to the
//! same catalog this way).

use crate::instancetype::{InstanceType, Offering};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Type {
    name: String,
    requirements: Vec<Req>,
    capacity: Amounts,
    overhead: Amounts,
    offerings: Vec<Off>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Req {
    key: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Amounts {
    cpu: i64,
    memory: i64,
    pods: i64,
    ephemeral_storage: i64,
    #[serde(default)]
    extended: BTreeMap<String, i64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Off {
    zone: String,
    capacity_type: String,
    price: f64,
    available: bool,
}

impl From<&Resources> for Amounts {
    fn from(r: &Resources) -> Amounts {
        Amounts {
            cpu: r.cpu,
            memory: r.memory,
            pods: r.pods,
            ephemeral_storage: r.ephemeral_storage,
            extended: r.extended.iter().cloned().collect(),
        }
    }
}

impl From<Amounts> for Resources {
    fn from(a: Amounts) -> Resources {
        let mut r = Resources::new(a.cpu, a.memory, a.pods);
        r.ephemeral_storage = a.ephemeral_storage;
        r.extended = a.extended.into_iter().collect();
        r
    }
}

/// `types` as JSON.
pub fn to_json(types: &[InstanceType]) -> serde_json::Value {
    let out: Vec<Type> = types
        .iter()
        .map(|t| Type {
            name: t.name.clone(),
            requirements: t
                .requirements
                .iter()
                .map(|r| Req {
                    key: r.key.clone(),
                    operator: format!("{:?}", r.operator()),
                    values: r.values().to_vec(),
                })
                .collect(),
            capacity: (&t.capacity).into(),
            overhead: (&t.overhead).into(),
            offerings: t
                .offerings
                .iter()
                .map(|o| Off {
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                    price: o.price,
                    available: o.available,
                })
                .collect(),
        })
        .collect();
    serde_json::to_value(out).unwrap_or_default()
}

/// Reads [`to_json`]'s output back; the error names the entry and what is wrong.
pub fn from_json(value: &serde_json::Value) -> Result<Vec<InstanceType>, String> {
    let types: Vec<Type> = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let mut reqs = Requirements::default();
            for r in t.requirements {
                let op = Operator::parse(&r.operator)
                    .filter(|op| {
                        matches!(op, Operator::In | Operator::NotIn | Operator::Exists | Operator::DoesNotExist)
                    })
                    .ok_or_else(|| format!("[{i}] ({}): requirement {}: operator {:?}", t.name, r.key, r.operator))?;
                reqs.add(Requirement::new(&r.key, op, r.values));
            }
            let offerings = t
                .offerings
                .into_iter()
                .map(|o| Offering {
                    zone_id: None,
                    zone: o.zone,
                    capacity_type: o.capacity_type,
                    price: o.price,
                    available: o.available,
                })
                .collect();
            Ok(InstanceType::new(&t.name, reqs, t.capacity.into(), t.overhead.into(), offerings))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{AwsCatalogOptions, aws};

    #[test]
    fn the_bundled_catalog_survives_a_round_trip() {
        let cat = aws(&AwsCatalogOptions::default()).unwrap();
        let back = from_json(&to_json(&cat)).unwrap();
        assert_eq!(back, cat);
    }

    #[test]
    fn a_bad_entry_is_named() {
        let bad = serde_json::json!([{"name": "x.large", "requirements": [{"key": "k", "operator": "Gt", "values": ["1"]}],
            "capacity": {"cpu": 1, "memory": 1, "pods": 1, "ephemeralStorage": 0},
            "overhead": {"cpu": 0, "memory": 0, "pods": 0, "ephemeralStorage": 0}, "offerings": []}]);
        assert!(from_json(&bad).unwrap_err().contains("x.large"));
        assert!(from_json(&serde_json::json!({"not": "a list"})).is_err());
    }
}
