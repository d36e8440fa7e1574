//! EC2NodeClass rules.

use super::kubelet::check_kubelet;
use super::{FieldPath, Problem, Report};
use crate::ec2nodeclass::{
    ALIAS_FAMILIES, AMI_FAMILIES, BlockDeviceMapping, EC2NodeClass, NetworkInterface, SelectorTags,
};
use crate::wellknown::{LABEL_NODECLASS, LABEL_NODEPOOL, TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME, TAG_NODECLAIM};

/// Validates an EC2NodeClass, returning every problem.
pub fn validate_ec2nodeclass(nc: &EC2NodeClass) -> Vec<Problem> {
    let mut r = Report::default();
    let spec = FieldPath::root("spec");
    let s = &nc.spec;

    // Identity: exactly one of role and instanceProfile.
    match (&s.role, &s.instance_profile) {
        (Some(_), Some(_)) | (None, None) => r.error(
            &spec.field("role"),
            "must specify exactly one of ['role', 'instanceProfile']",
            "set role (Tenon manages an instance profile for it) or instanceProfile (pre-created, e.g. where IAM is unreachable), not both",
        ),
        _ => {}
    }
    if s.role.as_deref() == Some("") {
        r.error(
            &spec.field("role"),
            "role cannot be empty",
            "name the node IAM role, e.g. KarpenterNodeRole-my-cluster",
        );
    }
    if s.instance_profile.as_deref() == Some("") {
        r.error(&spec.field("instanceProfile"), "instanceProfile cannot be empty", "name an existing instance profile");
    }

    // Karpenter v1.14 fields Tenon does not act on yet: refused rather than ignored, so a
    // node never launches without what the NodeClass asked for.
    if s.placement_group_selector.is_some() {
        r.error(
            &spec.field("placementGroupSelector"),
            "placement groups are not supported by Tenon yet",
            "remove placementGroupSelector, or use Karpenter for NodeClasses that need placement groups",
        );
    }
    match s.cpu_options.as_ref().and_then(|c| c.nested_virtualization.as_deref()) {
        None | Some("disabled") => {}
        Some("enabled") => r.error(
            &spec.field("cpuOptions").field("nestedVirtualization"),
            "nested virtualization is not supported by Tenon yet",
            "remove cpuOptions.nestedVirtualization or set it to disabled",
        ),
        Some(other) => r.error(
            &spec.field("cpuOptions").field("nestedVirtualization"),
            format!("unsupported value {other:?}"),
            "use enabled or disabled",
        ),
    }
    if let Some(ct) = &s.connection_tracking
        && ct.tcp_established_timeout.is_none()
        && ct.udp_stream_timeout.is_none()
        && ct.udp_timeout.is_none()
    {
        r.error(
            &spec.field("connectionTracking"),
            "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
            "set a timeout, e.g. tcpEstablishedTimeout: 3600, or remove connectionTracking",
        );
    }

    // Subnets.
    let p = spec.field("subnetSelectorTerms");
    if s.subnet_selector_terms.is_empty() {
        r.error(
            &p,
            "subnetSelectorTerms cannot be empty",
            "select subnets, e.g. - tags: {karpenter.sh/discovery: my-cluster}",
        );
    }
    check_term_count(&mut r, &p, s.subnet_selector_terms.len());
    for (i, t) in s.subnet_selector_terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() {
            r.error(&tp, "expected at least one, got none, ['tags', 'id']", "select by tags or by id");
        }
        if t.id.is_some() && t.tags.is_some() {
            r.error(&tp.field("id"), "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term", "put id and tags in separate terms");
        }
        check_id(&mut r, &tp.field("id"), t.id.as_deref(), "subnet-", "subnet-0123456789abcdef0");
        check_selector_tags(&mut r, &tp.field("tags"), t.tags.as_ref());
    }

    // Security groups.
    let p = spec.field("securityGroupSelectorTerms");
    if s.security_group_selector_terms.is_empty() {
        r.error(
            &p,
            "securityGroupSelectorTerms cannot be empty",
            "select security groups, e.g. - tags: {karpenter.sh/discovery: my-cluster}",
        );
    }
    check_term_count(&mut r, &p, s.security_group_selector_terms.len());
    for (i, t) in s.security_group_selector_terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() && t.name.is_none() {
            r.error(&tp, "expected at least one, got none, ['tags', 'id', 'name']", "select by tags, id or name");
        }
        if t.id.is_some() && (t.tags.is_some() || t.name.is_some()) {
            r.error(&tp.field("id"), "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term", "put id in a term of its own");
        }
        if t.name.is_some() && (t.tags.is_some() || t.id.is_some()) {
            r.error(&tp.field("name"), "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term", "put name in a term of its own");
        }
        check_id(&mut r, &tp.field("id"), t.id.as_deref(), "sg-", "sg-0123456789abcdef0");
        check_selector_tags(&mut r, &tp.field("tags"), t.tags.as_ref());
    }

    // Capacity reservations.
    let p = spec.field("capacityReservationSelectorTerms");
    check_term_count(&mut r, &p, s.capacity_reservation_selector_terms.len());
    for (i, t) in s.capacity_reservation_selector_terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() && t.instance_match_criteria.is_none() {
            r.error(
                &tp,
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
                "select by tags, id or instanceMatchCriteria",
            );
        }
        if t.id.is_some() && (t.tags.is_some() || t.owner_id.is_some() || t.instance_match_criteria.is_some()) {
            r.error(&tp.field("id"), "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term", "put id in a term of its own");
        }
        check_id(&mut r, &tp.field("id"), t.id.as_deref(), "cr-", "cr-0123456789abcdef0");
        if let Some(o) = &t.owner_id
            && !(o.len() == 12 && o.bytes().all(|b| b.is_ascii_digit()))
        {
            r.error(
                &tp.field("ownerID"),
                format!("ownerID {o:?} must be a 12-digit AWS account id"),
                "e.g. 123456789012",
            );
        }
        if let Some(m) = &t.instance_match_criteria
            && m != "open"
            && m != "targeted"
        {
            r.error(
                &tp.field("instanceMatchCriteria"),
                format!("unsupported instanceMatchCriteria {m:?}"),
                "use open or targeted",
            );
        }
        check_selector_tags(&mut r, &tp.field("tags"), t.tags.as_ref());
    }

    check_amis(&mut r, &spec, nc);

    // Tags.
    let tags = spec.field("tags");
    for k in s.tags.keys() {
        let kp = tags.key(k);
        if k.is_empty() {
            r.error(&kp, "empty tag keys aren't supported", "remove the empty key");
        } else if k == TAG_EKS_CLUSTER_NAME
            || k.starts_with(TAG_CLUSTER_PREFIX.trim_end_matches('/'))
            || k == LABEL_NODEPOOL
            || k == TAG_NODECLAIM
            || k == LABEL_NODECLASS
        {
            r.error(
                &kp,
                format!("tag contains a restricted tag matching {k}"),
                "Tenon sets this tag itself to track ownership; remove it",
            );
        }
    }

    if let Some(k) = &s.kubelet {
        check_kubelet(&mut r, &spec.field("kubelet"), k, &nc.ami_family());
    }
    check_block_devices(&mut r, &spec.field("blockDeviceMappings"), &s.block_device_mappings);
    if let Some(policy) = &s.instance_store_policy
        && policy != "RAID0"
    {
        r.error(
            &spec.field("instanceStorePolicy"),
            format!("unsupported instanceStorePolicy {policy:?}"),
            "use RAID0, or remove the field",
        );
    }
    if let Some(m) = &s.metadata_options {
        let mp = spec.field("metadataOptions");
        for (field, value, allowed) in [
            ("httpEndpoint", &m.http_endpoint, ["enabled", "disabled"]),
            ("httpProtocolIPv6", &m.http_protocol_ipv6, ["enabled", "disabled"]),
            ("httpTokens", &m.http_tokens, ["required", "optional"]),
        ] {
            if !allowed.contains(&value.as_str()) {
                r.error(
                    &mp.field(field),
                    format!("unsupported value {value:?}"),
                    format!("use {} or {}", allowed[0], allowed[1]),
                );
            }
        }
        if !(1..=64).contains(&m.http_put_response_hop_limit) {
            r.error(
                &mp.field("httpPutResponseHopLimit"),
                format!("{} is outside 1-64", m.http_put_response_hop_limit),
                "use 1 (the default) or 2 for pods that reach IMDS through a container network",
            );
        }
    }
    if let Some(n) = s.ip_prefix_count
        && n < 0
    {
        r.error(&spec.field("ipPrefixCount"), "ipPrefixCount may not be negative", "use 0 or more");
    }
    check_network_interfaces(&mut r, &spec.field("networkInterfaces"), &s.network_interfaces);
    if let Some(ct) = &s.connection_tracking {
        let cp = spec.field("connectionTracking");
        for (field, v, lo, hi) in [
            ("tcpEstablishedTimeout", ct.tcp_established_timeout, 60, 432_000),
            ("udpStreamTimeout", ct.udp_stream_timeout, 60, 180),
            ("udpTimeout", ct.udp_timeout, 30, 60),
        ] {
            if let Some(v) = v
                && !(lo..=hi).contains(&v)
            {
                r.error(&cp.field(field), format!("{v} is outside {lo}-{hi} seconds"), format!("use {lo} to {hi}"));
            }
        }
    }
    r.into_problems()
}

fn check_term_count(r: &mut Report, p: &FieldPath, n: usize) {
    if n > 30 {
        r.error(p, format!("{n} terms, at most 30 are allowed"), "combine terms using tags");
    }
}

fn check_id(r: &mut Report, p: &FieldPath, id: Option<&str>, prefix: &str, example: &str) {
    if let Some(id) = id {
        let ok = id
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        if !ok {
            r.error(p, format!("{id:?} is not an id of the form {prefix}…"), format!("e.g. {example}"));
        }
    }
}

fn check_selector_tags(r: &mut Report, p: &FieldPath, tags: Option<&SelectorTags>) {
    let Some(tags) = tags else { return };
    if tags.len() > 20 {
        r.error(p, format!("{} tags, at most 20 are allowed", tags.len()), "select on fewer tags");
    }
    for (k, v) in tags {
        if k.is_empty() || v.is_empty() {
            r.error(&p.key(k), "empty tag keys or values aren't supported", "use \"*\" to match any value of a key");
        }
    }
}

fn check_amis(r: &mut Report, spec: &FieldPath, nc: &EC2NodeClass) {
    let s = &nc.spec;
    let p = spec.field("amiSelectorTerms");
    if s.ami_selector_terms.is_empty() {
        r.error(
            &p,
            "amiSelectorTerms must have at least one term",
            "e.g. - alias: al2023@v20260304 (pin a version in production)",
        );
    }
    check_term_count(r, &p, s.ami_selector_terms.len());
    let has_alias = s.ami_selector_terms.iter().any(|t| t.alias.is_some());
    if has_alias && s.ami_selector_terms.len() != 1 {
        r.error(
            &p,
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            "use the alias term alone, or select by id/tags/name without an alias",
        );
    }
    for (i, t) in s.ami_selector_terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() && t.name.is_none() && t.alias.is_none() && t.ssm_parameter.is_none() {
            r.error(
                &tp,
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                "select by alias, id, name, tags or ssmParameter",
            );
        }
        if t.id.is_some() && (t.alias.is_some() || t.tags.is_some() || t.name.is_some() || t.owner.is_some()) {
            r.error(
                &tp.field("id"),
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                "put id in a term of its own",
            );
        }
        if t.alias.is_some() && (t.id.is_some() || t.tags.is_some() || t.name.is_some() || t.owner.is_some()) {
            r.error(
                &tp.field("alias"),
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                "use the alias on its own",
            );
        }
        check_id(r, &tp.field("id"), t.id.as_deref(), "ami-", "ami-0123456789abcdef0");
        check_selector_tags(r, &tp.field("tags"), t.tags.as_ref());
        if let Some(alias) = &t.alias {
            check_alias(r, &tp.field("alias"), alias, s.ami_family.as_deref());
        }
    }
    let fp = spec.field("amiFamily");
    match &s.ami_family {
        Some(f) if !AMI_FAMILIES.contains(&f.as_str()) => {
            r.error(&fp, format!("unsupported amiFamily {f:?}"), format!("use one of {}", AMI_FAMILIES.join(", ")));
        }
        None if !has_alias && !s.ami_selector_terms.is_empty() => {
            r.error(
                &fp,
                "must specify amiFamily if amiSelectorTerms does not contain an alias",
                "set amiFamily (AL2023, Bottlerocket, Custom, …) so Tenon knows the user-data format",
            );
        }
        _ => {}
    }
}

fn check_alias(r: &mut Report, p: &FieldPath, alias: &str, ami_family: Option<&str>) {
    if alias.len() > 30 {
        r.error(
            p,
            format!("alias {alias:?} is longer than 30 characters"),
            "write family@version, e.g. al2023@v20260304",
        );
    }
    let Some((family, version)) = alias
        .split_once('@')
        .filter(|(f, v)| !f.is_empty() && !v.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric()))
    else {
        r.error(
            p,
            format!("'alias' is improperly formatted, must match the format 'family@version' (found {alias:?})"),
            "e.g. al2023@v20260304 or bottlerocket@v1.30.0",
        );
        return;
    };
    if !ALIAS_FAMILIES.contains(&family) {
        r.error(p, format!("family {family:?} is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"), "e.g. al2023@v20260304");
        return;
    }
    if family.starts_with("windows") && version != "latest" {
        r.error(p, "windows families may only specify version 'latest'", format!("use {family}@latest"));
    }
    if version == "latest" && !family.starts_with("windows") {
        r.warning(
            p,
            format!("{alias} follows every new AMI release and drifts all nodes when one ships"),
            "pin a reviewed version, e.g. al2023@v20260304, and roll it forward deliberately",
        );
    }
    if let Some(f) = ami_family
        && f != "Custom"
        && !f.eq_ignore_ascii_case(family)
    {
        r.error(
            &FieldPath::root("spec").field("amiFamily"),
            format!(
                "if set, amiFamily must be '{}' or 'Custom' when using an {family} alias",
                AMI_FAMILIES.iter().find(|x| x.eq_ignore_ascii_case(family)).unwrap_or(&family)
            ),
            "remove amiFamily (it is inferred from the alias) or set it to Custom",
        );
    }
}

fn check_network_interfaces(r: &mut Report, p: &FieldPath, nis: &[NetworkInterface]) {
    if nis.len() > 150 {
        r.error(p, format!("{} network interfaces, at most 150 are allowed", nis.len()), "remove some");
    }
    for (i, ni) in nis.iter().enumerate() {
        let np = p.index(i);
        if ni.interface_type != "interface" && ni.interface_type != "efa-only" {
            r.error(
                &np.field("interfaceType"),
                format!("unsupported interfaceType {:?}", ni.interface_type),
                "use interface or efa-only",
            );
        }
        for (field, v) in [("networkCardIndex", ni.network_card_index), ("deviceIndex", ni.device_index)] {
            if v < 0 {
                r.error(&np.field(field), format!("{field} may not be negative"), "use 0 or more");
            }
        }
        let same = |o: &&NetworkInterface| o.network_card_index == ni.network_card_index;
        if nis.iter().filter(same).filter(|o| o.device_index == ni.device_index).count() > 1 {
            r.error(
                &np,
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs",
                "give each interface on a network card its own deviceIndex",
            );
        }
        if ni.interface_type == "efa-only"
            && nis.iter().filter(same).filter(|o| o.interface_type == "efa-only").count() > 1
        {
            r.error(&np, "a network card can have at most one efa-only interface", "keep one efa-only per card");
        }
    }
    let primary =
        |n: &NetworkInterface| n.network_card_index == 0 && n.device_index == 0 && n.interface_type == "interface";
    if !nis.is_empty() && !nis.iter().any(primary) {
        r.error(
            p,
            "networkInterfaces must include a primary interface with interfaceType='interface'",
            "add {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}",
        );
    }
}

fn check_block_devices(r: &mut Report, p: &FieldPath, bdms: &[BlockDeviceMapping]) {
    if bdms.len() > 50 {
        r.error(p, format!("{} block device mappings, at most 50 are allowed", bdms.len()), "remove some");
    }
    if bdms.iter().filter(|b| b.root_volume).count() > 1 {
        r.error(p, "must have only one blockDeviceMappings with rootVolume", "mark a single device rootVolume: true");
    }
    for (i, b) in bdms.iter().enumerate() {
        let Some(ebs) = &b.ebs else { continue };
        let ep = p.index(i).field("ebs");
        if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
            r.error(&ep, "snapshotID or volumeSize must be defined", "add volumeSize, e.g. 80Gi");
        }
        if let Some(rate) = ebs.volume_initialization_rate {
            if ebs.snapshot_id.as_deref().is_none_or(str::is_empty) {
                r.error(
                    &ep.field("volumeInitializationRate"),
                    "snapshotID must be set when volumeInitializationRate is set",
                    "add snapshotID or remove volumeInitializationRate",
                );
            }
            if !(100..=300).contains(&rate) {
                r.error(
                    &ep.field("volumeInitializationRate"),
                    format!("{rate} is outside 100-300 MiB/s"),
                    "use 100-300",
                );
            }
        }
        if let Some(size) = &ebs.volume_size
            && let Err(msg) = check_volume_size(&size.0)
        {
            r.error(
                &ep.field("volumeSize"),
                msg,
                "write a whole size in Gi, G, Ti or T, e.g. 80Gi (gp3 takes 1Gi-16Ti)",
            );
        }
        if let Some(t) = &ebs.volume_type
            && !matches!(t.as_str(), "standard" | "io1" | "io2" | "gp2" | "sc1" | "st1" | "gp3")
        {
            r.error(
                &ep.field("volumeType"),
                format!("unsupported volumeType {t:?}"),
                "use gp3, gp2, io1, io2, st1, sc1 or standard",
            );
        }
        if let Some(tp) = ebs.throughput
            && !(125..=2000).contains(&tp)
        {
            r.error(
                &ep.field("throughput"),
                format!("throughput {tp} is outside 125-2000 MiB/s"),
                "gp3 accepts 125-2000 MiB/s",
            );
        }
    }
}

/// The EBS volume size pattern of the CRD: whole Gi (1-59000), G (1-64000), Ti (1-58), T (1-64).
fn check_volume_size(s: &str) -> Result<(), String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits);
    let max = match unit {
        "Gi" => 59_000,
        "G" => 64_000,
        "Ti" => 58,
        "T" => 64,
        _ => return Err(format!("volumeSize {s:?} must be a whole number of Gi, G, Ti or T")),
    };
    match num.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) && !num.starts_with('0') => Ok(()),
        _ => Err(format!("volumeSize {s:?} must be 1-{max}{unit}")),
    }
}
