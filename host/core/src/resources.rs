//! Integer resource vectors: millicores, bytes, pod slots, extended resources.

use std::collections::BTreeMap;
use std::fmt;
use tenon_api::quantity::{QuantityError, parse_milli, parse_units};

/// A set of resource amounts. CPU is in millicores, memory and ephemeral storage in bytes,
/// pods and extended resources (`nvidia.com/gpu`) in units.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub pods: i64,
    pub ephemeral_storage: i64,
    /// Sorted by name; absent means zero.
    pub extended: Vec<(String, i64)>,
}

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const NODES: &str = "nodes";

impl Resources {
    pub fn new(cpu_milli: i64, memory: i64, pods: i64) -> Self {
        Resources { cpu: cpu_milli, memory, pods, ..Default::default() }
    }

    /// One quantity of resource `name` as a number, as Karpenter's metrics and checks compare
    /// them: cpu in cores, everything else in units (bytes, counts).
    pub fn approximate(name: &str, q: &str) -> Result<f64, QuantityError> {
        Ok(if name == CPU { parse_milli(q)? as f64 / 1000.0 } else { parse_units(q)? as f64 })
    }

    /// Parses a Kubernetes resource list (`{cpu: "2", memory: 4Gi}`).
    pub fn from_quantities<'a>(list: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, QuantityError> {
        let mut r = Resources::default();
        for (name, q) in list {
            match name {
                CPU => r.cpu = parse_milli(q)? as i64,
                _ => r.set(name, parse_units(q)? as i64),
            }
        }
        Ok(r)
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            PODS => self.pods,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            _ => self.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)).map_or(0, |i| self.extended[i].1),
        }
    }

    pub fn set(&mut self, name: &str, v: i64) {
        match name {
            CPU => self.cpu = v,
            MEMORY => self.memory = v,
            PODS => self.pods = v,
            EPHEMERAL_STORAGE => self.ephemeral_storage = v,
            _ => match self.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) => self.extended[i].1 = v,
                Err(i) => self.extended.insert(i, (name.to_string(), v)),
            },
        }
    }

    pub fn add(&mut self, o: &Resources) {
        self.cpu += o.cpu;
        self.memory += o.memory;
        self.pods += o.pods;
        self.ephemeral_storage += o.ephemeral_storage;
        for (n, v) in &o.extended {
            let cur = self.get(n);
            self.set(n, cur + v);
        }
    }

    pub fn sub(&mut self, o: &Resources) {
        self.cpu -= o.cpu;
        self.memory -= o.memory;
        self.pods -= o.pods;
        self.ephemeral_storage -= o.ephemeral_storage;
        for (n, v) in &o.extended {
            let cur = self.get(n);
            self.set(n, cur - v);
        }
    }

    pub fn plus(&self, o: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(o);
        r
    }

    /// Component-wise maximum.
    pub fn max_with(&mut self, o: &Resources) {
        self.cpu = self.cpu.max(o.cpu);
        self.memory = self.memory.max(o.memory);
        self.pods = self.pods.max(o.pods);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        for (n, v) in &o.extended {
            let cur = self.get(n);
            self.set(n, cur.max(*v));
        }
    }

    /// Component-wise minimum (an extended resource absent from either counts as zero).
    pub fn min_with(&mut self, o: &Resources) {
        self.cpu = self.cpu.min(o.cpu);
        self.memory = self.memory.min(o.memory);
        self.pods = self.pods.min(o.pods);
        self.ephemeral_storage = self.ephemeral_storage.min(o.ephemeral_storage);
        for e in &mut self.extended {
            e.1 = e.1.min(o.get(&e.0));
        }
    }

    /// Whether these requests fit in `capacity`. Ephemeral storage is only checked when
    /// requested, as kube-scheduler does.
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.cpu <= capacity.cpu
            && self.memory <= capacity.memory
            && self.pods <= capacity.pods
            && (self.ephemeral_storage == 0 || self.ephemeral_storage <= capacity.ephemeral_storage)
            && self.extended.iter().all(|(n, v)| *v <= 0 || *v <= capacity.get(n))
    }

    /// Whether `self + more` fits in `capacity`, without building the sum (a hot check).
    pub fn sum_fits_in(&self, more: &Resources, capacity: &Resources) -> bool {
        self.cpu + more.cpu <= capacity.cpu
            && self.memory + more.memory <= capacity.memory
            && self.pods + more.pods <= capacity.pods
            && (self.ephemeral_storage + more.ephemeral_storage == 0
                || self.ephemeral_storage + more.ephemeral_storage <= capacity.ephemeral_storage)
            && (more.extended.is_empty() && self.extended.is_empty() || self.plus(more).fits_in(capacity))
    }

    /// The first resource that does not fit, for explanations.
    pub fn first_excess(&self, capacity: &Resources) -> Option<(String, i64, i64)> {
        let core =
            [(CPU, self.cpu, capacity.cpu), (MEMORY, self.memory, capacity.memory), (PODS, self.pods, capacity.pods)];
        for (n, want, have) in core {
            if want > have {
                return Some((n.to_string(), want, have));
            }
        }
        if self.ephemeral_storage > 0 && self.ephemeral_storage > capacity.ephemeral_storage {
            return Some((EPHEMERAL_STORAGE.into(), self.ephemeral_storage, capacity.ephemeral_storage));
        }
        self.extended
            .iter()
            .find(|(n, v)| *v > 0 && *v > capacity.get(n))
            .map(|(n, v)| (n.clone(), *v, capacity.get(n)))
    }

    /// All non-zero entries by Kubernetes name.
    pub fn entries(&self) -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for (n, v) in
            [(CPU, self.cpu), (MEMORY, self.memory), (PODS, self.pods), (EPHEMERAL_STORAGE, self.ephemeral_storage)]
        {
            if v != 0 {
                m.insert(n.to_string(), v);
            }
        }
        for (n, v) in &self.extended {
            if *v != 0 {
                m.insert(n.clone(), *v);
            }
        }
        m
    }
}

/// Renders one amount the way Kubernetes users write it.
pub fn format_amount(name: &str, v: i64) -> String {
    match name {
        CPU if v % 1000 == 0 => format!("{}", v / 1000),
        CPU => format!("{v}m"),
        MEMORY | EPHEMERAL_STORAGE => {
            const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
            UNITS
                .iter()
                .find(|(_, f)| v != 0 && v % f == 0)
                .map_or_else(|| v.to_string(), |(u, f)| format!("{}{u}", v / f))
        }
        _ => v.to_string(),
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.entries().iter().map(|(n, v)| format!("{n}={}", format_amount(n, *v))).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_adds_and_fits() {
        let pod = Resources::from_quantities([("cpu", "1"), ("memory", "256Mi"), ("nvidia.com/gpu", "1")]).unwrap();
        assert_eq!((pod.cpu, pod.memory, pod.get("nvidia.com/gpu")), (1000, 256 << 20, 1));
        let mut cap = Resources::new(4000, 16 << 30, 110);
        assert!(!pod.fits_in(&cap), "no GPU on the node");
        cap.set("nvidia.com/gpu", 4);
        assert!(pod.fits_in(&cap));
        let mut sum = pod.clone();
        sum.add(&pod);
        assert_eq!(sum.to_string(), "cpu=2, memory=512Mi, nvidia.com/gpu=2");
        sum.sub(&pod);
        assert_eq!(sum, pod);
        assert_eq!(Resources::new(5000, 0, 0).first_excess(&cap).unwrap().0, "cpu");
    }
}
