//! Instance types shaped from the current catalog, shared by every pass and launch that asks
//! for the same NodeClass. One entry per NodeClass: when its shape changes (its subnets'
//! zones, its AMI family, its kubelet settings), the entry is replaced and the old shaping
//! is dropped with the last pass holding it. Kept by shape alone, every shape a NodeClass
//! ever had stayed until the catalog was next fetched (1,340 types, several MB each).

use crate::catalog::{self, RawCatalog};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tenon_core::catalog::AwsCatalogOptions;
use tenon_core::instancetype::InstanceType;

/// What shapes a catalog into a NodeClass' instance types.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ShapeKey {
    pub zones: Vec<String>,
    /// Zone name → zone ID, from the NodeClass' subnets (offerings carry the IDs).
    pub zone_ids: BTreeMap<String, String>,
    pub options: AwsCatalogOptions,
    pub store: catalog::InstanceStore,
}

/// Instance types shaped from `catalog` for one NodeClass shape.
struct Shaped {
    catalog: Arc<RawCatalog>,
    key: ShapeKey,
    types: Arc<Vec<InstanceType>>,
}

/// Each NodeClass' instance types, by NodeClass name.
#[derive(Default)]
pub(crate) struct ShapedCatalogs(Mutex<BTreeMap<String, Shaped>>);

impl ShapedCatalogs {
    /// `nodeclass`'s instance types from `raw` under `key`: shaped again only when no
    /// NodeClass has this shape of this catalog.
    pub fn get_or_shape(&self, raw: &Arc<RawCatalog>, nodeclass: &str, key: ShapeKey) -> Arc<Vec<InstanceType>> {
        let shape = |key: &ShapeKey| {
            Arc::new(with_zone_ids(raw.instance_types_with(&key.zones, &key.options, key.store), &key.zone_ids))
        };
        let Ok(mut entries) = self.0.lock() else { return shape(&key) };
        entries.retain(|_, e| Arc::ptr_eq(&e.catalog, raw));
        if let Some(e) = entries.get(nodeclass).filter(|e| e.key == key) {
            return e.types.clone();
        }
        let types = entries.values().find(|e| e.key == key).map(|e| e.types.clone()).unwrap_or_else(|| shape(&key));
        entries.insert(nodeclass.to_string(), Shaped { catalog: raw.clone(), key, types: types.clone() });
        types
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// `types` with each offering's zone ID from `ids`, and the IDs among their requirements.
fn with_zone_ids(types: Vec<InstanceType>, ids: &BTreeMap<String, String>) -> Vec<InstanceType> {
    if ids.is_empty() {
        return types;
    }
    types
        .into_iter()
        .map(|t| {
            let mut offerings = t.offerings;
            for o in &mut offerings {
                o.zone_id = ids.get(&o.zone).cloned();
            }
            InstanceType::new(&t.name, t.requirements, t.capacity, t.overhead, offerings)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(zones: &[&str]) -> ShapeKey {
        ShapeKey {
            zones: zones.iter().map(|z| z.to_string()).collect(),
            zone_ids: BTreeMap::new(),
            options: AwsCatalogOptions::default(),
            store: catalog::InstanceStore::default(),
        }
    }

    #[test]
    fn a_nodeclass_whose_shape_changes_no_longer_holds_its_old_instance_types() {
        let raw = Arc::new(RawCatalog::default());
        let shaped = ShapedCatalogs::default();
        let before = shaped.get_or_shape(&raw, "a", key(&["us-east-1a"]));
        assert!(Arc::ptr_eq(&before, &shaped.get_or_shape(&raw, "a", key(&["us-east-1a"]))), "shaped once");
        let after = shaped.get_or_shape(&raw, "a", key(&["us-east-1a", "us-east-1b"]));
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(Arc::strong_count(&before), 1, "only the caller holds the old shape");
        assert_eq!(shaped.len(), 1);
    }

    #[test]
    fn nodeclasses_of_one_shape_share_one_shaping_and_a_new_catalog_replaces_it() {
        let raw = Arc::new(RawCatalog::default());
        let shaped = ShapedCatalogs::default();
        let a = shaped.get_or_shape(&raw, "a", key(&["us-east-1a"]));
        let b = shaped.get_or_shape(&raw, "b", key(&["us-east-1a"]));
        assert!(Arc::ptr_eq(&a, &b));
        let fresh = Arc::new(RawCatalog::default());
        let c = shaped.get_or_shape(&fresh, "a", key(&["us-east-1a"]));
        assert!(!Arc::ptr_eq(&a, &c), "shaped from the new catalog");
        assert_eq!(shaped.len(), 1, "the old catalog's entries are gone");
    }
}
