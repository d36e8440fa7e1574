//! Host bindings of the three worlds of `wit/policy.wit`.

pub mod scorer {
    wasmtime::component::bindgen!({ path: "../../wit", world: "scorer" });
    pub use self::exports::tenon::policy::scoring::{InstanceType, Offering, ScoringInput, TypeLabel};
    pub use self::tenon::policy::types::{Label, Nodepool, Resources};
}

pub mod consolidator {
    wasmtime::component::bindgen!({ path: "../../wit", world: "consolidator" });
    pub use self::exports::tenon::policy::consolidation::{
        Candidate, ConsolidationInput, Method, Plan, PlanReview, Replacement, Verdict,
    };
    pub use self::tenon::policy::types::{Label, Nodepool};
}

pub mod budget {
    wasmtime::component::bindgen!({ path: "../../wit", world: "disruption-budget" });
    pub use self::exports::tenon::policy::budgets::{Allowance, Budget, BudgetInput, BudgetNodes, Reason};
    pub use self::tenon::policy::types::{Label, Nodepool};
}
