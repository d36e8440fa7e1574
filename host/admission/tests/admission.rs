//! Admission on small schemas, one behaviour of the API server each.

use serde_json::{Value, json};
use tenon_admission::{FieldError, Invalid, admit};

fn schema(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).expect("a schema")
}

fn lines(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(FieldError::line).collect()
}

const POOL: &str = r#"
type: object
properties:
  spec:
    type: object
    required: [template]
    x-kubernetes-validations:
      - rule: has(self.replicas) == has(oldSelf.replicas)
        message: Cannot transition between static and dynamic
    properties:
      replicas: {type: integer, minimum: 0}
      policy: {type: string, enum: [WhenEmpty, Balanced], default: WhenEmpty}
      disruption:
        type: object
        default: {consolidateAfter: 0s}
        properties:
          consolidateAfter: {type: string, pattern: '^(([0-9]+(s|m|h))+|Never)$'}
          budgets:
            type: array
            maxItems: 2
            default: [{nodes: 10%}]
            items:
              type: object
              properties:
                nodes: {type: string, default: 10%}
                schedule: {type: string}
      template:
        type: object
        properties:
          labels:
            type: object
            maxProperties: 2
            additionalProperties: {type: string}
            x-kubernetes-validations:
              - rule: self.all(x, !x.find('^([^/]+)').endsWith('karpenter.sh'))
                message: label domain "karpenter.sh" is restricted
          kubelet:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn unknown_fields_are_pruned_and_defaults_filled_in() {
    let s = schema(POOL);
    let mut o = json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "a"}, "extra": 1,
        "spec": {"template": {"unknown": true, "kubelet": {"anything": {"nested": 1}}}, "replicas": null}});
    admit(&s, &mut o, None).unwrap();
    assert_eq!(
        o,
        json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "a"},
            "spec": {"template": {"kubelet": {"anything": {"nested": 1}}}, "policy": "WhenEmpty",
                "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]}}})
    );
}

#[test]
fn structural_errors_are_worded_as_the_api_server_words_them() {
    let s = schema(POOL);
    let mut o = json!({"spec": {"replicas": -1, "policy": "Sometimes",
        "disruption": {"consolidateAfter": "1hr", "budgets": [{}, {}, {}]},
        "template": {"labels": {"a": "1", "b": "2", "c": 3}}}});
    let errors = admit(&s, &mut o, None).unwrap_err();
    assert_eq!(
        lines(&errors),
        [
            r#"spec.disruption.budgets: Too many: 3: must have at most 2 items"#,
            r#"spec.disruption.consolidateAfter: Invalid value: "1hr": spec.disruption.consolidateAfter in body should match '^(([0-9]+(s|m|h))+|Never)$'"#,
            r#"spec.policy: Unsupported value: "Sometimes": supported values: "WhenEmpty", "Balanced""#,
            r#"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"#,
            r#"spec.template.labels: Too many: 3: must have at most 2 items"#,
            r#"spec.template.labels[c]: Invalid value: "integer": spec.template.labels[c] in body must be of type string: "integer""#,
        ]
    );
    let mut missing = json!({"spec": {}});
    assert_eq!(lines(&admit(&s, &mut missing, None).unwrap_err()), ["spec.template: Required value"]);
}

#[test]
fn cel_rules_refuse_with_their_message() {
    let s = schema(POOL);
    let mut o = json!({"spec": {"template": {"labels": {"karpenter.sh/x": "a"}}}});
    let errors = admit(&s, &mut o, None).unwrap_err();
    assert_eq!(
        lines(&errors),
        [r#"spec.template.labels: Invalid value: "object": label domain "karpenter.sh" is restricted"#]
    );
    let mut ok = json!({"spec": {"template": {"labels": {"node-role.kubernetes.io/worker": ""}}}});
    admit(&s, &mut ok, None).unwrap();
}

#[test]
fn transition_rules_run_only_on_updates() {
    let s = schema(POOL);
    let mut created = json!({"spec": {"template": {}, "replicas": 2}});
    admit(&s, &mut created, None).unwrap();
    let mut dynamic = json!({"spec": {"template": {}}});
    let errors = admit(&s, &mut dynamic, Some(&created)).unwrap_err();
    assert_eq!(lines(&errors), [r#"spec: Invalid value: "object": Cannot transition between static and dynamic"#]);
    let mut scaled = json!({"spec": {"template": {}, "replicas": 3}});
    admit(&s, &mut scaled, Some(&created)).unwrap();
}

#[test]
fn a_rule_that_cannot_be_evaluated_refuses_the_object() {
    let s = schema(
        r#"
type: object
properties:
  reqs:
    type: array
    x-kubernetes-validations: [{rule: "self.all(x, x.values.size() == 1)", message: one value}]
    items: {type: object, properties: {values: {type: array, items: {type: string}}}}
"#,
    );
    let mut o = json!({"reqs": [{}]});
    let errors = admit(&s, &mut o, None).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "reqs");
    assert!(errors[0].detail.contains("values"), "{errors:?}");
}

#[test]
fn the_status_reads_as_kubectl_shows_it() {
    let errors = vec![FieldError::required("spec.template"), FieldError::required("spec.x")];
    let one = Invalid::new("NodePool", "karpenter.sh", "a", &errors[..1]);
    assert_eq!(one.message, r#"NodePool.karpenter.sh "a" is invalid: spec.template: Required value"#);
    let two = Invalid::new("NodePool", "karpenter.sh", "a", &errors);
    assert_eq!(
        two.message,
        r#"NodePool.karpenter.sh "a" is invalid: [spec.template: Required value, spec.x: Required value]"#
    );
    assert_eq!(two.details["causes"][1]["field"], "spec.x");
}
