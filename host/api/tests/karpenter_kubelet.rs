//! Karpenter's kubelet configuration helpers suite (AWS provider
//! `pkg/apis/v1/kubeletconfiguration_test.go`), ported to what Tenon has in their place.
//!
//! Karpenter reads `spec.kubelet` from an open map: twelve fields it interprets
//! (`ParsedKubeletConfig`), the rest passed through (`UnmanagedKubeletFields`). Tenon's
//! `KubeletConfiguration` has the same twelve typed fields and the rest in `extra`.
//! Karpenter's "expression" predicates decide whether its NodeClassCEL gate must be on; that
//! gate is off by default and Tenon has none, so here an expression is what validation
//! refuses, naming the gate, and everything else is not.

use serde_json::{Value, json};
use tenon_api::decode::decode_and_validate;
use tenon_api::ec2nodeclass::KubeletConfiguration;
use tenon_api::validation::Severity;

/// The errors `tenon check` reports for an AL2023 EC2NodeClass with `kubelet` (none: absent).
fn errors(kubelet: Option<Value>) -> Vec<String> {
    let mut spec = json!({
        "role": "role-1",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"*": "*"}}],
        "securityGroupSelectorTerms": [{"tags": {"*": "*"}}],
    });
    if let Some(k) = kubelet {
        spec["kubelet"] = k;
    }
    let doc =
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "k"}, "spec": spec});
    decode_and_validate(doc)
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect()
}

/// The errors that are there because a value is an expression (Karpenter's `HasExpressions`).
fn expression_errors(kubelet: Option<Value>) -> Vec<String> {
    errors(kubelet).into_iter().filter(|e| e.contains("NodeClassCEL")).collect()
}

fn decode(kubelet: Value) -> Result<KubeletConfiguration, serde_json::Error> {
    serde_json::from_value(kubelet)
}

#[test]
fn no_configuration_and_an_empty_one_hold_no_expression() {
    assert!(errors(None).is_empty());
    assert!(errors(Some(json!({}))).is_empty());
}

#[test]
fn static_values_are_not_expressions() {
    let kubelet = json!({
        "maxPods": 110,
        "kubeReserved": {"cpu": "100m", "memory": "256Mi"},
        "systemReserved": {"cpu": "50m", "memory": "128Mi", "ephemeral-storage": "1Gi"},
    });
    assert_eq!(errors(Some(kubelet)), Vec::<String>::new());
    assert!(errors(Some(json!({"maxPods": 58}))).is_empty(), "an integer maxPods");
}

#[test]
fn a_string_max_pods_is_an_expression() {
    let found = expression_errors(Some(json!({"maxPods": "vcpus * 10"})));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("spec.kubelet.maxPods"), "{found:?}");
}

#[test]
fn a_reserved_value_that_is_no_quantity_is_an_expression() {
    let kube = expression_errors(Some(json!({"kubeReserved": {"cpu": "vcpus * 30"}})));
    assert!(kube.len() == 1 && kube[0].contains("kubeReserved"), "{kube:?}");
    let system = expression_errors(Some(json!({"systemReserved": {"memory": "max_pods * 11"}})));
    assert!(system.len() == 1 && system[0].contains("systemReserved"), "{system:?}");
}

#[test]
fn an_expression_among_static_quantities_is_found_alone() {
    let found = errors(Some(json!({
        "maxPods": 110,
        "kubeReserved": {"cpu": "100m", "memory": "((default_enis - 1) * (ips_per_eni - 1)) + 2", "ephemeral-storage": "1Gi"},
    })));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("kubeReserved") && found[0].contains("memory") && found[0].contains("NodeClassCEL"));
}

#[test]
fn fields_that_never_hold_expressions_are_not_read_as_them() {
    // Eviction percentages are no quantities, and still no expressions.
    let kubelet = json!({
        "evictionHard": {"memory.available": "10%"},
        "evictionSoft": {"memory.available": "15%"},
        "evictionSoftGracePeriod": {"memory.available": "1m"},
        "podsPerCore": 10,
    });
    assert_eq!(errors(Some(kubelet)), Vec::<String>::new());
}

#[test]
fn a_max_pods_expression_alone_involves_no_reservation() {
    let found = expression_errors(Some(json!({"maxPods": "vcpus * 10", "kubeReserved": {"cpu": "100m"}})));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found.iter().all(|e| !e.contains("kubeReserved")), "{found:?}");
}

#[test]
fn no_configuration_and_an_empty_one_decode_to_nothing_set() {
    assert_eq!(decode(json!({})).unwrap(), KubeletConfiguration::default());
    let class: tenon_api::EC2NodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "k"}, "spec": {}
    }))
    .unwrap();
    assert_eq!(class.spec.kubelet, None);
}

#[test]
fn every_interpreted_field_is_read() {
    let k = decode(json!({
        "clusterDNS": ["10.0.0.10"],
        "maxPods": 110,
        "podsPerCore": 10,
        "systemReserved": {"cpu": "100m"},
        "kubeReserved": {"memory": "256Mi"},
        "evictionHard": {"memory.available": "5%"},
        "evictionSoft": {"memory.available": "10%"},
        "evictionSoftGracePeriod": {"memory.available": "1m"},
        "evictionMaxPodGracePeriod": 30,
        "imageGCHighThresholdPercent": 80,
        "imageGCLowThresholdPercent": 60,
        "cpuCFSQuota": false,
    }))
    .unwrap();
    assert_eq!(k.cluster_dns, ["10.0.0.10"]);
    assert_eq!(k.max_pods, Some(110));
    assert_eq!(k.pods_per_core, Some(10));
    assert_eq!(k.system_reserved["cpu"], "100m");
    assert_eq!(k.kube_reserved["memory"], "256Mi");
    assert_eq!(k.eviction_hard["memory.available"], "5%");
    assert_eq!(k.eviction_soft["memory.available"], "10%");
    assert_eq!(k.eviction_soft_grace_period["memory.available"], "1m");
    assert_eq!(k.eviction_max_pod_grace_period, Some(30));
    assert_eq!(k.image_gc_high_threshold_percent, Some(80));
    assert_eq!(k.image_gc_low_threshold_percent, Some(60));
    assert_eq!(k.cpu_cfs_quota, Some(false));
    assert!(k.extra.is_empty(), "every one of them is interpreted: {:?}", k.extra);
}

#[test]
fn passthrough_fields_are_kept_apart_and_in_order() {
    let k = decode(json!({"serializeImagePulls": false, "topologyManagerPolicy": "best-effort"})).unwrap();
    assert_eq!(KubeletConfiguration { extra: Default::default(), ..k.clone() }, KubeletConfiguration::default());
    let k = decode(json!({"maxPods": 110, "serializeImagePulls": false, "registryPullQPS": 10})).unwrap();
    assert_eq!(k.extra.keys().collect::<Vec<_>>(), ["registryPullQPS", "serializeImagePulls"]);
    assert!(decode(json!({})).unwrap().extra.is_empty());
}

#[test]
fn a_field_that_does_not_decode_is_an_error() {
    assert!(decode(json!({"podsPerCore": "ten"})).is_err());
    assert!(!errors(Some(json!({"podsPerCore": "ten"}))).is_empty());
}

#[test]
fn max_pods_has_a_value_only_as_an_integer() {
    assert_eq!(decode(json!({"maxPods": 58})).unwrap().max_pods, Some(58));
    assert_eq!(decode(json!({})).unwrap().max_pods, None, "unset");
    let expression = decode(json!({"maxPods": "vcpus * 10"})).unwrap_err().to_string();
    assert!(expression.contains("NodeClassCEL"), "{expression}");
    assert!(decode(json!({"podsPerCore": "ten"})).is_err(), "a config that does not decode has no maxPods");
}

#[test]
fn the_interpreted_fields_are_karpenters_twelve() {
    let all = json!({
        "clusterDNS": ["10.0.0.10"], "maxPods": 110, "podsPerCore": 2, "systemReserved": {"cpu": "50m"},
        "kubeReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"},
        "evictionSoft": {"memory.available": "10%"}, "evictionSoftGracePeriod": {"memory.available": "1m"},
        "evictionMaxPodGracePeriod": 60, "imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 60,
        "cpuCFSQuota": true,
    });
    let k = decode(all).unwrap();
    assert!(k.extra.is_empty(), "nothing Karpenter maps is passed through: {:?}", k.extra);
    // Every field named, none elided (Karpenter reflects over its struct): a thirteenth typed
    // field does not compile here until it is listed, and set above.
    let KubeletConfiguration {
        cluster_dns,
        max_pods,
        pods_per_core,
        system_reserved,
        kube_reserved,
        eviction_hard,
        eviction_soft,
        eviction_soft_grace_period,
        eviction_max_pod_grace_period,
        image_gc_high_threshold_percent,
        image_gc_low_threshold_percent,
        cpu_cfs_quota,
        extra: _,
    } = k.clone();
    let set = [
        !cluster_dns.is_empty(),
        max_pods.is_some(),
        pods_per_core.is_some(),
        !system_reserved.is_empty(),
        !kube_reserved.is_empty(),
        !eviction_hard.is_empty(),
        !eviction_soft.is_empty(),
        !eviction_soft_grace_period.is_empty(),
        eviction_max_pod_grace_period.is_some(),
        image_gc_high_threshold_percent.is_some(),
        image_gc_low_threshold_percent.is_some(),
        cpu_cfs_quota.is_some(),
    ];
    assert!(set.iter().all(|&s| s), "each typed field decoded: {set:?}");
    let typed = serde_json::to_value(&k).unwrap();
    let mut names: Vec<&str> = typed.as_object().unwrap().keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "clusterDNS",
            "cpuCFSQuota",
            "evictionHard",
            "evictionMaxPodGracePeriod",
            "evictionSoft",
            "evictionSoftGracePeriod",
            "imageGCHighThresholdPercent",
            "imageGCLowThresholdPercent",
            "kubeReserved",
            "maxPods",
            "podsPerCore",
            "systemReserved",
        ]
    );
}
