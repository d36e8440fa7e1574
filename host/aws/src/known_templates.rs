//! The launch templates this process knows exist. A template's name is a hash of its content
//! (launch_template.rs), so a name known to exist stands for exactly that template and a
//! launch need not describe it again: one DescribeLaunchTemplates per template, not per
//! launch. Forgotten when EC2 says a template is gone and when templates are deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The error codes EC2 gives for a launch template that does not exist.
pub const GONE: [&str; 2] = ["InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"];

/// Whether `code` says a launch template is gone.
pub fn gone(code: &str) -> bool {
    GONE.contains(&code)
}

#[derive(Debug, Default)]
pub struct KnownTemplates(Mutex<BTreeSet<String>>, Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl KnownTemplates {
    /// The gate of one template name: launches that find it unknown at once describe (and
    /// make) it one at a time, the others then finding it known.
    pub fn gate(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.1.lock().unwrap_or_else(|e| e.into_inner()).entry(name.to_string()).or_default().clone()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains(name)
    }

    pub fn insert(&self, name: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string());
    }

    pub fn forget<'a>(&self, names: impl IntoIterator<Item = &'a String>) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for n in names {
            known.remove(n);
        }
    }

    /// Forgets every template, and their gates (held ones live on with their holders).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.1.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
