//! The integration tests of this crate, as one test binary: linking the crate and its
//! dependencies once, not once per file. Each module is the file of the same name.

mod convert;
mod disruption;
mod disruption_properties;
mod karpenter_aws_instancetype;
mod karpenter_balanced;
mod karpenter_consolidation_1;
mod karpenter_consolidation_2;
mod karpenter_default_constraints;
mod karpenter_disruption_suite;
mod karpenter_drift;
mod karpenter_emptiness;
mod karpenter_instance_selection;
mod karpenter_provisioning;
mod karpenter_scheduling_1;
mod karpenter_scheduling_2;
mod karpenter_scheduling_metrics;
mod karpenter_termination;
mod karpenter_topology;
mod properties;
mod scheduling;
mod seeds;
mod support;
