"""A moto server holding what an EKS cluster's AWS account holds before Tenon runs.

Usage: account.py PORT READY_FILE (PORT 0: a free one; READY_FILE gets the endpoint) CLUSTER[,CLUSTER...]

Per cluster name: two private subnets (us-east-1a, us-east-1b) and a node security group
tagged `karpenter.sh/discovery: <cluster>` (subnets also `capacity.example.io/tier: worker`,
as the runbooks select), the node role `KarpenterNodeRole-<cluster>`, and the EKS cluster
(endpoint, CA, Service CIDR 172.20.0.0/16) eks:DescribeCluster returns. The EKS optimized
AL2023 image parameters under /aws/service (which moto neither ships nor lets PutParameter
write) point at moto's own amd64 and arm64 images, for every Kubernetes version the tests use.
Spot prices differ by zone, as in AWS (moto quotes one price everywhere): us-east-1a's are
twice us-east-1b's, so a test can tell a zone a pod's volume forces from the cheapest one.
CreateFleet answers like a prioritized instant fleet (moto launches the first override of
the first template config, and never runs out of capacity; its instances get their launch
template's security groups, as in EC2): offerings listed in `<READY_FILE without extension>.exhausted.json` (a JSON list of
{"instanceType": "c6a.large" or "c6a.*", "zone": null or a zone, "capacityType": null,
"spot" or "on-demand"}, read at every call) have no capacity; the best-priority override
with capacity launches, and every override before it is reported in `Errors` as
InsufficientInstanceCapacity (all of them, and no instance, when none has capacity).
Instances listed in `<READY_FILE without extension>.impaired.json` (a JSON list of instance
ids, read at every call) fail their system reachability check in DescribeInstanceStatus,
impaired since an hour ago (moto reports every running instance healthy).
CreateFleet hangs (answers nothing, holding the connection) while
`<READY_FILE without extension>.hung.json` (a JSON list of actions) lists "CreateFleet";
DescribeSubnets is refused (UnauthorizedOperation, as for a node role missing the
permission) while `<READY_FILE without extension>.refused.json` lists "DescribeSubnets".
A terminated instance's private addresses return to its subnet, as in EC2 (moto keeps them
taken). Writes READY_FILE once everything is in place; runs until killed.
"""

import datetime
import fnmatch
import json
import os
import sys
import threading
import time

import catalog_cache
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.ec2.responses.fleets import Fleets
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.instances import Instance
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.subnets import Subnets
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
from moto.ec2.responses.spot_instances import SpotInstances
from moto.ec2.models import ec2_backends
from moto.eks.models import eks_backends
from moto.iam.models import iam_backends
from moto.ssm.models import Parameter, ssm_backends

REGION = "us-east-1"
# The EKS clusters' Service CIDR (EKS's default would be 10.100.0.0/16, Tenon's fallback).
SERVICE_CIDR = "172.20.0.0/16"
K8S_VERSIONS = ["1.33"]
# Each image version gets its own images (a newer version means new AMIs, as in AWS): the
# runbooks pin v20260304; the drift test moves to v20260401.
AMI_VERSIONS = ["v20260304", "v20260401"]


def tags_by_resource() -> None:
    """A resource's own tags read from the tag table by its id.

    moto finds them by running every tag of every resource through a regex, once per
    resource described: with a thousand instances a DescribeInstances call takes seconds
    and the stand-in, not the controller, becomes what a scale run measures. Same answer.
    """

    def get_tags(self):  # type: ignore[no-untyped-def]
        if not self.id:
            return []
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(self.id), "")
        return [
            {"resource_id": self.id, "key": key, "value": value, "resource_type": kind}
            for key, value in self.ec2_backend.tags.get(self.id, {}).items()
        ]

    TaggedEC2Resource.get_tags = get_tags


def released_addresses() -> None:
    """A terminated instance gives its private addresses back to its subnet, as in EC2.

    moto keeps them taken for as long as it keeps the terminated instance (for good), so a
    /22 subnet refuses every launch after its first thousand instances, however many ended.
    """
    terminate = Instance.terminate

    def terminate_and_release(self):  # type: ignore[no-untyped-def]
        state = terminate(self)
        if self.subnet_id:
            subnet = self.ec2_backend.get_subnet(self.subnet_id)
            for ip in list(self._private_ips):
                subnet.del_subnet_ip(ip)
        return state

    Instance.terminate = terminate_and_release


def zonal_spot_prices() -> None:
    """DescribeSpotPriceHistory with us-east-1a dearer than the other zones."""
    quote = SpotInstances.describe_spot_price_history

    def describe(self):  # type: ignore[no-untyped-def]
        result = quote(self)
        for entry in result.result["SpotPriceHistory"]:
            entry["SpotPrice"] = "0.00002" if entry["AvailabilityZone"] == "us-east-1a" else "0.00001"
        return result

    SpotInstances.describe_spot_price_history = describe


def exhausted_offerings(path: str):  # type: ignore[no-untyped-def]
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


def capacity_errors(exhausted_file: str, hung_file: str) -> None:
    """CreateFleet as a prioritized instant fleet over offerings that may have no capacity."""
    create = Fleets.create_fleet
    lock = threading.Lock()

    def no_capacity(backend, override, capacity_type, exhausted):  # type: ignore[no-untyped-def]
        zone = backend.get_subnet(override.get("SubnetId")).availability_zone
        return any(
            fnmatch.fnmatchcase(override.get("InstanceType", ""), e["instanceType"])
            and e.get("zone") in (None, zone)
            and e.get("capacityType") in (None, capacity_type)
            for e in exhausted
        )

    def create_fleet(self):  # type: ignore[no-untyped-def]
        while "CreateFleet" in exhausted_offerings(hung_file):
            time.sleep(0.2)
        # Always chosen here, capacity or not: moto alone launches the first override of
        # the first template config, whatever the priorities say.
        exhausted = exhausted_offerings(exhausted_file)
        configs = self._get_param("LaunchTemplateConfigs", [])
        target = self._get_param("TargetCapacitySpecification", {})
        capacity_type = target.get("DefaultTargetCapacityType", "on-demand")
        ranked = []
        for c, config in enumerate(configs):
            for override in config.get("Overrides") or []:
                ranked.append((float(override.get("Priority", 0)), c, override))
        ranked.sort(key=lambda r: (r[0], r[1]))
        errors, chosen = [], None
        for _, c, override in ranked:
            if not no_capacity(self.ec2_backend, override, capacity_type, exhausted):
                chosen = (c, override)
                break
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": configs[c].get("LaunchTemplateSpecification", {}),
                        "Overrides": override,
                    },
                    "Lifecycle": capacity_type,
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "We currently do not have sufficient capacity in the Availability Zone you requested.",
                }
            )
        if chosen is None:
            return ActionResult({"FleetId": "fleet-" + os.urandom(8).hex(), "Instances": [], "Errors": errors})
        c, override = chosen
        kept = [dict(configs[c], Overrides=[override])]
        with lock:
            backend = self.ec2_backend
            real = backend.create_fleet

            def only_chosen(**kw):  # type: ignore[no-untyped-def]
                kw["launch_template_configs"] = kept
                return real(**kw)

            backend.create_fleet = only_chosen
            try:
                result = create(self)
            finally:
                del backend.create_fleet
        result.result["Errors"] = errors
        # EC2 gives a fleet's instances their launch template's security groups; moto leaves
        # them off on-demand instances and gives spot ones the VPC's default group.
        groups = template_groups(self.ec2_backend, configs[c].get("LaunchTemplateSpecification", {}))
        for launched in result.result.get("Instances") or []:
            for instance_id in launched.get("InstanceIds", []):
                if groups:
                    self.ec2_backend.modify_instance_security_groups(instance_id, groups)
        return result

    Fleets.create_fleet = create_fleet


def template_groups(backend, spec):  # type: ignore[no-untyped-def]
    """The security group ids a launch template's version gives its instances."""
    if spec.get("LaunchTemplateId"):
        template = backend.get_launch_template(spec["LaunchTemplateId"])
    else:
        template = backend.get_launch_template_by_name(spec.get("LaunchTemplateName"))
    version = spec.get("Version")
    data = template.latest_version().data if version in (None, "$Latest") else template.get_version(version).data
    found = []

    def walk(value):  # type: ignore[no-untyped-def]
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("Groups", "SecurityGroupIds", "SecurityGroupId") and isinstance(inner, list):
                    found.extend(g for g in inner if isinstance(g, str))
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(data)
    return list(dict.fromkeys(found))


def impaired_instances(impaired_file: str) -> None:
    """DescribeInstanceStatus reports the listed instances' system reachability check failed."""
    describe = InstanceResponse.describe_instance_status

    def describe_instance_status(self):  # type: ignore[no-untyped-def]
        result = describe(self)
        impaired = set(exhausted_offerings(impaired_file))
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
        statuses = []
        for status in result.result["InstanceStatuses"]:
            if status.id not in impaired:
                statuses.append(status)
                continue
            ok = {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]}
            statuses.append(
                {
                    "AvailabilityZone": getattr(status.placement, "zone", None) or REGION + "a",
                    "InstanceId": status.id,
                    "InstanceState": {"Code": 16, "Name": "running"},
                    "InstanceStatus": ok,
                    "SystemStatus": {
                        "Status": "impaired",
                        "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}],
                    },
                }
            )
        result.result["InstanceStatuses"] = statuses
        return result

    InstanceResponse.describe_instance_status = describe_instance_status


def refusals(refused_file: str) -> None:
    """DescribeSubnets answers UnauthorizedOperation while the refused file lists it."""
    describe = Subnets.describe_subnets

    def describe_subnets(self):  # type: ignore[no-untyped-def]
        if "DescribeSubnets" in exhausted_offerings(refused_file):
            raise EC2ClientError(
                "UnauthorizedOperation", "You are not authorized to perform this operation. (ec2:DescribeSubnets)"
            )
        return describe(self)

    Subnets.describe_subnets = describe_subnets


def main() -> None:
    tags_by_resource()
    released_addresses()
    zonal_spot_prices()
    port, ready_file, clusters = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    base = os.path.splitext(ready_file)[0]
    capacity_errors(base + ".exhausted.json", base + ".hung.json")
    refusals(base + ".refused.json")
    impaired_instances(os.path.splitext(ready_file)[0] + ".impaired.json")
    # Port 0 binds a free port here, where no other test can take it between choice and bind.
    port = catalog_cache.serve(port, __file__)
    endpoint = f"http://127.0.0.1:{port}"

    # Written into moto's backends directly: the same objects its API would create, without
    # a round trip through an HTTP client and moto's serializer for each.
    ec2 = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    eks = eks_backends[DEFAULT_ACCOUNT_ID][REGION]
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    vpc = ec2.create_vpc(cidr_block="10.0.0.0/16").id
    for i, cluster in enumerate(clusters):
        discovery = {"karpenter.sh/discovery": cluster}
        for j, zone in enumerate(["us-east-1a", "us-east-1b"]):
            ec2.create_subnet(
                vpc_id=vpc,
                cidr_block=f"10.0.{i * 16 + j * 4}.0/22",
                availability_zone=zone,
                tags={"subnet": dict(discovery, **{"capacity.example.io/tier": "worker"})},
            )
        ec2.create_security_group(name=f"{cluster}-node", description="EKS nodes", vpc_id=vpc, tags=discovery)
        # The cluster itself: where nodes join (endpoint, CA) and its Service CIDR, which
        # is not EKS's usual default so a test can tell it was read.
        eks.create_cluster(
            name=cluster,
            role_arn=f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/{cluster}-cluster",
            resources_vpc_config={"subnetIds": []},
            kubernetes_network_config={"serviceIpv4Cidr": SERVICE_CIDR},
        )
        iam.create_role(
            role_name=f"KarpenterNodeRole-{cluster}",
            assume_role_policy_document='{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
            '"Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}',
            path="/",
            permissions_boundary=None,
            description=None,
            tags=[],
            max_session_duration=3600,
        )

    # Distinct images per (architecture, variant), as in AWS: one image id stands for one
    # set of requirements.
    by_arch = {}
    for image in sorted(ec2.describe_images(owners=["amazon"]), key=lambda im: im.id):
        by_arch.setdefault(image.architecture, []).append(image.id)
    backend = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]
    now = datetime.datetime.now(datetime.timezone.utc)
    for k8s in K8S_VERSIONS:
        for ssm_arch, arch in (("x86_64", "x86_64"), ("arm64", "arm64")):
            for variant_index, variant in enumerate(("standard", "nvidia")):
                names = [
                    (f"amazon-eks-node-al2023-{ssm_arch}-{variant}-{k8s}-{version}", 2 * v + variant_index)
                    for v, version in enumerate(AMI_VERSIONS)
                ]
                names.append(("recommended", 2 * (len(AMI_VERSIONS) - 1) + variant_index))
                for name, image_index in names:
                    path = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ssm_arch}/{variant}/{name}/image_id"
                    backend._parameters[path].append(
                        Parameter(
                            account_id=DEFAULT_ACCOUNT_ID,
                            name=path,
                            value=by_arch[arch][image_index],
                            parameter_type="String",
                            description=None,
                            allowed_pattern=None,
                            keyid=None,
                            last_modified_date=now,
                            version=1,
                            data_type="aws:ec2:image",
                        )
                    )

    # Renamed into place: the reader never sees half an endpoint.
    with open(ready_file + ".tmp", "w") as f:
        f.write(endpoint + "\n")
    os.replace(ready_file + ".tmp", ready_file)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
