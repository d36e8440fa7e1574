//! Karpenter's EC2NodeClass hash suite (AWS provider `pkg/apis/v1/ec2nodeclass_hash_test.go`),
//! ported. The hash decides which fields drift nodes: a change to what launch templates are
//! built from changes it; selector terms, order of tags and of block device mappings do not.
//! The suite's literal hash values are Karpenter's own function (hashstructure); Tenon's hash
//! is its own under its own version, so only the behaviour is ported (see
//! docs/karpenter-differences.md, "The EC2NodeClass hash is Tenon's own").

use serde_json::{Value, json};
use tenon_api::EC2NodeClass;

/// The suite's `BeforeEach` object, as it goes over the wire.
fn base() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "hash-case"},
        "spec": {
            "role": "role-1",
            "tags": {"keyTag-1": "valueTag-1", "keyTag-2": "valueTag-2"},
            "context": "fake-context",
            "detailedMonitoring": false,
            "associatePublicIPAddress": false,
            "metadataOptions": {
                "httpEndpoint": "disabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "optional"
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "map-device-1",
                    "ebs": {
                        "deleteOnTermination": false,
                        "encrypted": false,
                        "iops": 0,
                        "kmsKeyID": "fakeKMSKeyID",
                        "snapshotID": "fakeSnapshot",
                        "throughput": 0,
                        "volumeSize": "2G",
                        "volumeType": "standard"
                    }
                },
                {"deviceName": "map-device-2"}
            ],
            "userData": "userdata-test-1"
        }
    })
}

/// `object` with the value at `pointer` set (its parent must exist).
fn set(mut object: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a JSON pointer");
    let slot = object.pointer_mut(parent).unwrap_or_else(|| panic!("{parent} exists"));
    match slot {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        Value::Array(items) => items[key.parse::<usize>().expect("an index")] = value,
        other => panic!("{parent} is {other}, not a container"),
    }
    object
}

fn hash(object: &Value) -> String {
    let class: EC2NodeClass = serde_json::from_value(object.clone()).expect("a valid EC2NodeClass");
    class.static_hash()
}

/// The suite's static fields, each changed the way its table entry changes it.
fn static_changes() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("UserData", "/spec/userData", json!("userdata-test-2")),
        ("Tags", "/spec/tags/keyTag-test-3", json!("valueTag-test-3")),
        ("Context", "/spec/context", json!("context-2")),
        ("DetailedMonitoring", "/spec/detailedMonitoring", json!(true)),
        ("InstanceStorePolicy", "/spec/instanceStorePolicy", json!("RAID0")),
        ("AssociatePublicIPAddress", "/spec/associatePublicIPAddress", json!(true)),
        ("MetadataOptions HTTPEndpoint", "/spec/metadataOptions/httpEndpoint", json!("enabled")),
        ("MetadataOptions HTTPProtocolIPv6", "/spec/metadataOptions/httpProtocolIPv6", json!("enabled")),
        ("MetadataOptions HTTPPutResponseHopLimit", "/spec/metadataOptions/httpPutResponseHopLimit", json!(10)),
        ("MetadataOptions HTTPTokens", "/spec/metadataOptions/httpTokens", json!("required")),
        ("BlockDeviceMapping DeviceName", "/spec/blockDeviceMappings/0/deviceName", json!("map-device-test-3")),
        ("BlockDeviceMapping RootVolume", "/spec/blockDeviceMappings/0/rootVolume", json!(true)),
        ("BlockDeviceMapping DeleteOnTermination", "/spec/blockDeviceMappings/0/ebs/deleteOnTermination", json!(true)),
        ("BlockDeviceMapping Encrypted", "/spec/blockDeviceMappings/0/ebs/encrypted", json!(true)),
        ("BlockDeviceMapping IOPS", "/spec/blockDeviceMappings/0/ebs/iops", json!(10)),
        ("BlockDeviceMapping KMSKeyID", "/spec/blockDeviceMappings/0/ebs/kmsKeyID", json!("test")),
        ("BlockDeviceMapping SnapshotID", "/spec/blockDeviceMappings/0/ebs/snapshotID", json!("test")),
        ("BlockDeviceMapping Throughput", "/spec/blockDeviceMappings/0/ebs/throughput", json!(10)),
        ("BlockDeviceMapping VolumeType", "/spec/blockDeviceMappings/0/ebs/volumeType", json!("io1")),
        ("ConnectionTracking TCPEstablishedTimeout", "/spec/connectionTracking", json!({"tcpEstablishedTimeout": 300})),
        ("ConnectionTracking UDPStreamTimeout", "/spec/connectionTracking", json!({"udpStreamTimeout": 120})),
        ("ConnectionTracking UDPTimeout", "/spec/connectionTracking", json!({"udpTimeout": 45})),
        ("CPUOptions NestedVirtualization", "/spec/cpuOptions", json!({"nestedVirtualization": "enabled"})),
    ]
}

#[test]
fn a_change_to_any_static_field_changes_the_hash() {
    let before = hash(&base());
    let mut seen = std::collections::BTreeMap::new();
    for (name, pointer, value) in static_changes() {
        let after = hash(&set(base(), pointer, value));
        assert_ne!(after, before, "{name} changed but the hash did not");
        // Each change is a different launch configuration: no two collide either.
        if let Some(other) = seen.insert(after, name) {
            panic!("{name} and {other} hash the same");
        }
    }
}

#[test]
fn a_changed_volume_size_changes_the_hash() {
    let before = hash(&base());
    let after = hash(&set(base(), "/spec/blockDeviceMappings/0/ebs/volumeSize", json!("10G")));
    assert_ne!(after, before);
}

#[test]
fn a_changed_instance_profile_changes_the_hash() {
    let mut profile = base();
    profile["spec"].as_object_mut().unwrap().remove("role");
    let profile = set(profile, "/spec/instanceProfile", json!("test-instance-profile"));
    let with_role = hash(&base());
    let with_profile = hash(&profile);
    assert_ne!(with_profile, with_role, "role → instanceProfile");
    let other = hash(&set(profile, "/spec/instanceProfile", json!("other-instance-profile")));
    assert_ne!(other, with_profile, "one instance profile → another");
}

#[test]
fn reordered_tags_keep_the_hash() {
    let mut reordered = base();
    reordered["spec"]["tags"] = json!({"keyTag-2": "valueTag-2", "keyTag-1": "valueTag-1"});
    assert_eq!(hash(&reordered), hash(&base()));
}

#[test]
fn reordered_block_device_mappings_keep_the_hash() {
    let mut reordered = base();
    reordered["spec"]["blockDeviceMappings"].as_array_mut().unwrap().swap(0, 1);
    assert_eq!(hash(&reordered), hash(&base()));
}

#[test]
fn changed_selector_terms_keep_the_hash() {
    let before = hash(&base());
    // Each alone, as the static table's entries change them, and all together as the
    // behaviour/dynamic-fields case does.
    let terms = [
        ("/spec/amiSelectorTerms", json!([{"tags": {"ami-test-key": "ami-test-value"}}])),
        ("/spec/subnetSelectorTerms", json!([{"tags": {"subnet-test-key": "subnet-test-value"}}])),
        ("/spec/securityGroupSelectorTerms", json!([{"tags": {"sg-test-key": "sg-test-value"}}])),
        ("/spec/capacityReservationSelectorTerms", json!([{"tags": {"cr-test-key": "cr-test-value"}}])),
    ];
    let mut all = base();
    for (pointer, value) in terms.clone() {
        assert_eq!(hash(&set(base(), pointer, value.clone())), before, "{pointer}");
        all = set(all, pointer, value);
    }
    assert_eq!(hash(&all), before, "every selector at once");
}

#[test]
fn equal_specs_hash_equally_whatever_the_object_around_them() {
    let mut other = base();
    other["metadata"] = json!({"name": "another", "labels": {"team": "a"}, "annotations": {"x": "y"}});
    assert_eq!(hash(&other), hash(&base()));
}

#[test]
fn a_changed_kubelet_configuration_changes_the_hash() {
    let kubelet = |max_pods: i64| hash(&set(base(), "/spec/kubelet", json!({"maxPods": max_pods})));
    assert_ne!(kubelet(110), kubelet(220));
    // Karpenter once hashed the kubelet's raw bytes as a set, so "12" and "21" collided.
    assert_ne!(kubelet(12), kubelet(21));
    assert_ne!(kubelet(110), hash(&base()), "no kubelet → a kubelet");
}
