//! `tenon controller` refuses bad settings before it touches the cluster: a non-zero exit and
//! a message naming the setting, the field and the fix (never a crash loop of panics).
#![cfg(feature = "controller")]

use std::process::{Command, Output};

/// `tenon controller` with `env` set and no cluster to talk to.
fn controller(env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tenon"));
    cmd.args(["controller", "--cluster-name", "lab"]);
    cmd.env("KUBECONFIG", "/nonexistent/kubeconfig").env_remove("KUBERNETES_SERVICE_HOST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run tenon controller")
}

#[test]
fn a_scheduler_config_kube_scheduler_would_refuse_is_refused_by_name() {
    let cases = [
        (
            "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]}",
            "podTopologySpread.defaultConstraints[0].labelSelector",
        ),
        (
            "podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}",
            "maxSkew",
        ),
        ("podTopologySpread: {defaultConstraint: []}", "podTopologySpread.defaultConstraint"),
    ];
    for (raw, field) in cases {
        let out = controller(&[("SCHEDULER_CONFIG", raw)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{raw}\n{stderr}");
        assert!(stderr.contains("SCHEDULER_CONFIG") && stderr.contains(field) && stderr.contains("fix:"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_valid_scheduler_config_gets_past_the_settings() {
    let out = controller(&[(
        "SCHEDULER_CONFIG",
        r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]}}"#,
    )]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It goes on to look for a cluster, and finds none here.
    assert!(!stderr.contains("SCHEDULER_CONFIG"), "{stderr}");
    assert!(stderr.contains("Kubernetes client configuration"), "{stderr}");
}
