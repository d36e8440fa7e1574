//! The API types as a controller and a user rely on them: Karpenter's defaults, its CRD
//! names and columns, and validation that reports everything at once.

use serde_json::json;
use tenon_api::decode::{Object, decode_and_validate};
use tenon_api::validation::Severity;
use tenon_api::{EC2NodeClass, NodePool};

fn seed(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/seeds/{path}",
        std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test")
    ))
    .unwrap();
    serde_yaml::from_str(&text).unwrap()
}

#[test]
fn nodepool_gets_karpenter_defaults() {
    let np: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "minimal"},
        "spec": {"template": {"spec": {
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    }))
    .unwrap();
    assert_eq!(np.spec.template.spec.expire_after, "720h");
    assert_eq!(np.spec.disruption.consolidate_after.as_deref(), Some("0s"));
    assert_eq!(np.spec.disruption.consolidation_policy, "WhenEmptyOrUnderutilized");
    assert_eq!(np.spec.disruption.budgets.len(), 1);
    assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
    assert_eq!(np.weight(), 0, "an absent weight counts as 0");
    assert!(tenon_api::validation::validate_nodepool(&np).is_empty());
}

#[test]
fn explicit_empty_budgets_stay_empty() {
    // An empty list is not defaulted by the API server; it means no budget (unlimited).
    let np: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {"group": "g", "kind": "k", "name": "n"}}},
                 "disruption": {"consolidateAfter": "Never", "budgets": []}}
    }))
    .unwrap();
    assert!(np.spec.disruption.budgets.is_empty());
}

#[test]
fn ec2nodeclass_gets_metadata_defaults_and_alias_family() {
    let nc: EC2NodeClass = serde_json::from_value(seed("amd-fallback/ec2-node-class-default.yaml")).unwrap();
    let m = nc.spec.metadata_options.as_ref().unwrap();
    assert_eq!(
        (m.http_endpoint.as_str(), m.http_tokens.as_str(), m.http_put_response_hop_limit),
        ("enabled", "required", 1)
    );
    assert_eq!(nc.ami_family(), "AL2023");
    assert_eq!(nc.alias().unwrap().version, "v20260304");
}

#[test]
fn seeds_round_trip_without_loss() {
    for path in ["lab-general/nodepool-lab-general.yaml", "amd-fallback/node-pool-default-amd.yaml"] {
        let np: NodePool = serde_json::from_value(seed(path)).unwrap();
        let again: NodePool = serde_json::from_value(serde_json::to_value(&np).unwrap()).unwrap();
        assert_eq!(np, again, "{path}");
    }
    let np: NodePool = serde_json::from_value(seed("amd-fallback/node-pool-default-amd.yaml")).unwrap();
    assert_eq!(np.spec.limits["cpu"].0, "800", "a bare number limit is kept as a quantity");
    assert_eq!(np.weight(), 100);
}

#[test]
fn validation_reports_every_problem_with_paths() {
    let d = decode_and_validate(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "bad"},
        "spec": {
            "weight": 0,
            "template": {"spec": {
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In"}],
                "expireAfter": "1y"}},
            "disruption": {"consolidateAfter": "5m", "budgets": [{"nodes": "x"}]},
            "limitz": {}
        }
    }));
    assert!(matches!(d.object, Some(Object::NodePool(_))));
    let errors: Vec<&str> =
        d.problems.iter().filter(|p| p.severity == Severity::Error).map(|p| p.path.as_str()).collect();
    for want in [
        "spec.limitz",
        "spec.weight",
        "spec.template.spec.requirements[0].values",
        "spec.template.spec.nodeClassRef",
        "spec.template.spec.expireAfter",
        "spec.disruption.budgets[0].nodes",
    ] {
        assert!(errors.contains(&want), "missing {want} in {errors:?}");
    }
    assert_eq!(errors.len(), 6, "{errors:?}");
}

#[test]
fn type_errors_name_the_field() {
    let d = decode_and_validate(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"requirements": [{"key": "k", "operator": "In", "values": "amd64"}]}}}
    }));
    assert!(d.object.is_none());
    assert_eq!(d.problems.len(), 1);
    assert_eq!(d.problems[0].path, "spec.template.spec.requirements[0].values");
}

#[test]
fn crds_carry_karpenter_names_columns_and_status() {
    let crds = tenon_api::crds::crds();
    let names: Vec<&str> = crds.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"]);
    for crd in &crds {
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.categories.as_deref(), Some(&["karpenter".to_string()][..]));
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1");
        assert!(v.served && v.storage);
        assert!(v.subresources.as_ref().unwrap().status.is_some(), "{} has a status subresource", crd.spec.names.kind);
    }
    let columns = |i: usize| -> Vec<String> {
        crds[i].spec.versions[0].additional_printer_columns.as_ref().unwrap().iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(columns(0), ["NodeClass", "Nodes", "Ready", "Age", "Weight", "CPU", "Memory"]);
    assert_eq!(
        columns(1),
        ["Type", "Capacity", "Zone", "Node", "Ready", "Age", "ImageID", "ID", "NodePool", "NodeClass", "Drifted"]
    );
    assert_eq!(columns(2), ["Ready", "Age", "Role"]);
    assert_eq!(crds[0].spec.names.short_names.as_deref(), Some(&["np".to_string(), "nps".to_string()][..]));
    assert_eq!(crds[2].spec.names.short_names.as_deref(), Some(&["ec2nc".to_string(), "ec2ncs".to_string()][..]));
    let scale = crds[0].spec.versions[0].subresources.as_ref().unwrap().scale.as_ref().unwrap();
    assert_eq!(scale.status_replicas_path, ".status.nodes");
    // The schema carries Karpenter's defaults so an API server applies them too.
    let schema = serde_json::to_value(&crds[0].spec.versions[0].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["disruption"]["default"]["budgets"][0]["nodes"], "10%");
    assert_eq!(spec["template"]["properties"]["spec"]["properties"]["expireAfter"]["default"], "720h");
}

/// An EC2NodeClass of `family` whose kubelet block is `kubelet`.
fn nodeclass_with_kubelet(family: &str, kubelet: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "t"},
        "spec": {
            "role": "r", "amiFamily": family, "amiSelectorTerms": [{"tags": {"a": "b"}}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            "kubelet": kubelet,
        }
    })
}

#[test]
fn kubelet_fields_karpenter_does_not_map_pass_to_al2023_only() {
    let kubelet = json!({"maxPods": 20, "topologyManagerPolicy": "best-effort", "serializeImagePulls": false});
    let d = decode_and_validate(nodeclass_with_kubelet("AL2023", kubelet.clone()));
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let Some(tenon_api::decode::Object::EC2NodeClass(nc)) = d.object else { panic!("an EC2NodeClass") };
    let k = nc.spec.kubelet.as_ref().unwrap();
    assert_eq!(k.max_pods, Some(20), "mapped fields stay typed");
    assert_eq!(k.extra.get("topologyManagerPolicy"), Some(&json!("best-effort")));
    // Written back as read.
    assert_eq!(serde_json::to_value(k).unwrap(), kubelet);
    // Bottlerocket maps only Karpenter's fields: the others are refused, by name.
    let d = decode_and_validate(nodeclass_with_kubelet("Bottlerocket", kubelet));
    let mut paths: Vec<&str> = d.problems.iter().map(|p| p.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["spec.kubelet.serializeImagePulls", "spec.kubelet.topologyManagerPolicy"]);
    assert!(d.problems[0].hint.contains("spec.userData"), "{}", d.problems[0]);
    // A mapped field of the wrong type is still an error naming it.
    let d = decode_and_validate(nodeclass_with_kubelet("AL2023", json!({"maxPods": "min(110, 20 * 2)"})));
    assert!(d.object.is_none());
    assert_eq!(d.problems[0].path, "spec.kubelet.maxPods");
    // The CRD keeps every field, as Karpenter's open kubelet schema does: types are checked
    // by validation, not by the API server.
    let crds = tenon_api::crds::crds();
    let schema = serde_json::to_value(&crds[2].spec.versions[0].schema).unwrap();
    let kubelet = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubelet"];
    assert_eq!(kubelet["x-kubernetes-preserve-unknown-fields"], true, "{kubelet}");
    assert_eq!(kubelet["additionalProperties"]["x-kubernetes-preserve-unknown-fields"], true, "{kubelet}");
    assert!(kubelet.get("properties").is_none(), "{kubelet}");
}

fn nodeclass_with(spec: serde_json::Value) -> serde_json::Value {
    let mut nc = nodeclass_with_kubelet("AL2023", json!({}));
    for (k, v) in spec.as_object().unwrap() {
        nc["spec"][k] = v.clone();
    }
    nc
}

fn problem_paths(doc: serde_json::Value) -> Vec<String> {
    let mut paths: Vec<String> = decode_and_validate(doc).problems.into_iter().map(|p| p.path).collect();
    paths.sort();
    paths
}

#[test]
fn network_interfaces_need_a_primary_and_unique_slots() {
    let ni = |card: i32, device: i32, kind: &str| json!({"networkCardIndex": card, "deviceIndex": device, "interfaceType": kind});
    let ok = json!([ni(0, 0, "interface"), ni(0, 1, "efa-only"), ni(1, 0, "efa-only")]);
    assert_eq!(problem_paths(nodeclass_with(json!({"networkInterfaces": ok}))), Vec::<String>::new());
    // No primary ENA interface on card 0, device 0.
    let no_primary = json!([ni(0, 0, "efa-only"), ni(1, 0, "interface")]);
    assert_eq!(problem_paths(nodeclass_with(json!({"networkInterfaces": no_primary}))), ["spec.networkInterfaces"]);
    // The same slot twice; two EFA-only interfaces on one card; an unknown type.
    let bad = json!([
        ni(0, 0, "interface"),
        ni(0, 0, "interface"),
        ni(1, 0, "efa-only"),
        ni(1, 1, "efa-only"),
        ni(2, 0, "efa")
    ]);
    assert_eq!(
        problem_paths(nodeclass_with(json!({"networkInterfaces": bad}))),
        [
            "spec.networkInterfaces[0]",
            "spec.networkInterfaces[1]",
            "spec.networkInterfaces[2]",
            "spec.networkInterfaces[3]",
            "spec.networkInterfaces[4].interfaceType"
        ]
    );
}

#[test]
fn connection_tracking_timeouts_are_within_ec2s_bounds() {
    let ct = json!({"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 30});
    assert_eq!(problem_paths(nodeclass_with(json!({"connectionTracking": ct}))), Vec::<String>::new());
    let ct = json!({"tcpEstablishedTimeout": 59, "udpStreamTimeout": 181, "udpTimeout": 61});
    assert_eq!(
        problem_paths(nodeclass_with(json!({"connectionTracking": ct}))),
        [
            "spec.connectionTracking.tcpEstablishedTimeout",
            "spec.connectionTracking.udpStreamTimeout",
            "spec.connectionTracking.udpTimeout"
        ]
    );
}

#[test]
fn karpenter_1_14_aws_labels_are_well_known() {
    // Karpenter v1.14's AWS provider adds these to its well-known labels; any other key in
    // the karpenter.k8s.aws domain stays restricted.
    for key in [
        "karpenter.k8s.aws/capacity-reservation-type",
        "karpenter.k8s.aws/capacity-reservation-interruptible",
        "karpenter.k8s.aws/placement-group-id",
        "karpenter.k8s.aws/placement-group-partition",
    ] {
        assert_eq!(requirement_errors(key), Vec::<String>::new(), "{key}");
    }
    let refused = requirement_errors("karpenter.k8s.aws/not-a-label");
    assert_eq!(refused, ["spec.template.spec.requirements[0].key"]);
}

fn requirement_errors(key: &str) -> Vec<String> {
    let doc = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "labels"},
        "spec": {"template": {"spec": {
            "requirements": [{"key": key, "operator": "Exists"}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    });
    decode_and_validate(doc).problems.into_iter().filter(|p| p.severity == Severity::Error).map(|p| p.path).collect()
}
