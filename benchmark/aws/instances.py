"""AWS instances of the testbed, through boto3: create, start, stop, terminate, list.

Instances are found again by their tag `Name=hotmove-node`; each region gets a security group
`hotmove` opening SSH and the node ports. Nothing here keeps local state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..errors import HarnessError
from .settings import Settings

TAG_KEY = "Name"
TAG_VALUE = "hotmove-node"
SECURITY_GROUP = "hotmove"
LIVE_STATES = ("pending", "running", "stopping", "stopped")
# Service errors, and client-side ones (no credentials, no network).
AWS_ERRORS = (ClientError, BotoCoreError)


class AwsError(HarnessError):
    """An AWS call failed; the message names the region."""


@dataclass(frozen=True)
class Instance:
    region: str
    instance_id: str
    state: str
    public_ip: str | None
    private_ip: str | None
    instance_type: str


class InstanceManager:
    """Manages the tagged instances in every region of the settings."""

    def __init__(
        self,
        settings: Settings,
        client_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self.settings = settings
        factory = client_factory or (lambda region: boto3.client("ec2", region_name=region))
        self.clients: dict[str, Any] = {region: factory(region) for region in settings.regions}

    # -- queries ---------------------------------------------------------------------------------

    def instances(self, states: tuple[str, ...] = LIVE_STATES) -> list[Instance]:
        found = []
        for region, client in self.clients.items():
            filters = [
                {"Name": f"tag:{TAG_KEY}", "Values": [TAG_VALUE]},
                {"Name": "instance-state-name", "Values": list(states)},
            ]
            try:
                pages = client.get_paginator("describe_instances").paginate(Filters=filters)
                for page in pages:
                    for reservation in page["Reservations"]:
                        for item in reservation["Instances"]:
                            found.append(
                                Instance(
                                    region=region,
                                    instance_id=item["InstanceId"],
                                    state=item["State"]["Name"],
                                    public_ip=item.get("PublicIpAddress"),
                                    private_ip=item.get("PrivateIpAddress"),
                                    instance_type=item.get("InstanceType", ""),
                                )
                            )
            except AWS_ERRORS as error:
                raise AwsError(f"{region}: cannot list instances: {error}") from error
        return found

    def hosts(self) -> dict[str, list[str]]:
        """Public IPs of the running instances, per region."""
        hosts: dict[str, list[str]] = {region: [] for region in self.clients}
        for instance in self.instances(("running",)):
            if instance.public_ip:
                hosts[instance.region].append(instance.public_ip)
        return hosts

    def info(self) -> str:
        lines = []
        everything = self.instances()
        for region in self.clients:
            instances = [i for i in everything if i.region == region]
            lines.append(f"{region}: {len(instances)} instance(s)")
            for i in instances:
                lines.append(
                    f"  {i.instance_id} {i.state:<8} {i.instance_type} "
                    f"public {i.public_ip or '-'} private {i.private_ip or '-'}"
                )
        key = self.settings.key_path
        user = self.settings.ssh_user
        lines.append(f"connect with: ssh -i {key} {user}@<public ip>")
        return "\n".join(lines)

    # -- changes ---------------------------------------------------------------------------------

    def create_instances(self, per_region: int) -> dict[str, list[str]]:
        """Start `per_region` tagged instances in every region; returns their ids per region."""
        if per_region <= 0:
            raise AwsError(f"instances per region must be positive, got {per_region}")
        created: dict[str, list[str]] = {}
        for region, client in self.clients.items():
            try:
                group_id = self._security_group(client)
                image = self._image(region, client)
                response = client.run_instances(
                    ImageId=image,
                    InstanceType=self.settings.instance_type,
                    KeyName=self.settings.key_name,
                    MinCount=per_region,
                    MaxCount=per_region,
                    SecurityGroupIds=[group_id],
                    TagSpecifications=[
                        {
                            "ResourceType": "instance",
                            "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}],
                        }
                    ],
                    BlockDeviceMappings=[
                        {
                            "DeviceName": "/dev/sda1",
                            "Ebs": {
                                "VolumeSize": self.settings.disk_gb,
                                "VolumeType": "gp3",
                                "DeleteOnTermination": True,
                            },
                        }
                    ],
                )
            except AWS_ERRORS as error:
                raise AwsError(f"{region}: cannot create instances: {error}") from error
            created[region] = [i["InstanceId"] for i in response["Instances"]]
        return created

    def _ids(self, states: tuple[str, ...]) -> dict[str, list[str]]:
        ids: dict[str, list[str]] = {}
        for instance in self.instances(states):
            ids.setdefault(instance.region, []).append(instance.instance_id)
        return ids

    def start_instances(self) -> int:
        """Start the stopped instances; returns how many."""
        return self._apply("start_instances", ("stopping", "stopped"))

    def stop_instances(self) -> int:
        """Stop the running instances (they keep their disks); returns how many."""
        return self._apply("stop_instances", ("pending", "running"))

    def terminate_instances(self) -> int:
        """Terminate every tagged instance, then remove the security groups where possible."""
        count = self._apply("terminate_instances", LIVE_STATES)
        for client in self.clients.values():
            # A group still used by a terminating instance cannot go yet; `destroy` again later.
            with contextlib.suppress(ClientError):
                client.delete_security_group(GroupName=SECURITY_GROUP)
        return count

    def _apply(self, action: str, states: tuple[str, ...]) -> int:
        count = 0
        for region, ids in self._ids(states).items():
            try:
                getattr(self.clients[region], action)(InstanceIds=ids)
            except AWS_ERRORS as error:
                raise AwsError(f"{region}: {action} failed: {error}") from error
            count += len(ids)
        return count

    # -- helpers ---------------------------------------------------------------------------------

    def _security_group(self, client: Any) -> str:  # noqa: ANN401 - a boto3 EC2 client
        try:
            groups = client.describe_security_groups(GroupNames=[SECURITY_GROUP])["SecurityGroups"]
            if groups:
                return str(groups[0]["GroupId"])
        except ClientError as error:
            if "NotFound" not in str(error.response.get("Error", {}).get("Code", "")):
                raise
        group_id = client.create_security_group(
            GroupName=SECURITY_GROUP, Description="HotMove testbed: SSH and node ports"
        )["GroupId"]
        low, high = self.settings.ports.span()
        client.authorize_security_group_ingress(
            GroupId=group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 22,
                    "ToPort": 22,
                    "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "SSH"}],
                },
                {
                    "IpProtocol": "tcp",
                    "FromPort": low,
                    "ToPort": high,
                    "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "node ports"}],
                },
            ],
        )
        return str(group_id)

    def _image(self, region: str, client: Any) -> str:  # noqa: ANN401 - a boto3 EC2 client
        images = client.describe_images(
            Owners=[self.settings.image_owner],
            Filters=[
                {"Name": "name", "Values": [self.settings.image_name]},
                {"Name": "state", "Values": ["available"]},
            ],
        )["Images"]
        if not images:
            raise AwsError(
                f"{region}: no image named {self.settings.image_name} "
                f"owned by {self.settings.image_owner}"
            )
        newest = max(images, key=lambda image: (image.get("CreationDate", ""), image["ImageId"]))
        return str(newest["ImageId"])
