"""The AWS instance manager against moto, across two regions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from benchmark.aws.instances import SECURITY_GROUP, TAG_KEY, TAG_VALUE, AwsError, InstanceManager
from benchmark.aws.settings import Settings
from benchmark.run_files import Ports

REGIONS = ("us-east-1", "eu-west-1")


@pytest.fixture
def settings() -> Settings:
    return Settings(
        key_name="hotmove",
        key_path=Path("/tmp/hotmove.pem"),
        regions=REGIONS,
        instance_type="m5d.8xlarge",
        ports=Ports(8000, 8001, 8002),
        repo_name="hotmove",
        repo_url="https://example.invalid/hotmove.git",
        branch="main",
        # moto's stock Canonical images are older Ubuntu releases.
        image_name="ubuntu/images/hvm-ssd/ubuntu-*-amd64-server-*",
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        for region in REGIONS:
            boto3.client("ec2", region_name=region).create_key_pair(KeyName="hotmove")
        yield


def _tagged(region: str) -> list[dict[str, object]]:
    client = boto3.client("ec2", region_name=region)
    reservations = client.describe_instances(
        Filters=[{"Name": f"tag:{TAG_KEY}", "Values": [TAG_VALUE]}]
    )
    return [i for r in reservations["Reservations"] for i in r["Instances"]]


@pytest.mark.usefixtures("aws")
def test_create_tags_instances_in_every_region(settings: Settings) -> None:
    manager = InstanceManager(settings)
    created = manager.create_instances(2)
    assert {region: len(ids) for region, ids in created.items()} == {"us-east-1": 2, "eu-west-1": 2}
    for region in REGIONS:
        instances = _tagged(region)
        assert len(instances) == 2
        assert all(i["InstanceType"] == "m5d.8xlarge" for i in instances)
        assert all(i["KeyName"] == "hotmove" for i in instances)
        group = boto3.client("ec2", region_name=region).describe_security_groups(
            GroupNames=[SECURITY_GROUP]
        )
        permissions = group["SecurityGroups"][0]["IpPermissions"]
        assert {(p["FromPort"], p["ToPort"]) for p in permissions} == {(22, 22), (8000, 8002)}
    hosts = manager.hosts()
    assert {region: len(ips) for region, ips in hosts.items()} == {"us-east-1": 2, "eu-west-1": 2}
    text = manager.info()
    assert "us-east-1: 2 instance(s)" in text
    assert "eu-west-1: 2 instance(s)" in text

    no_image = InstanceManager(replace(settings, image_name="no-such-image-*"))
    with pytest.raises(AwsError, match="us-east-1: no image named no-such-image"):
        no_image.create_instances(1)
    with pytest.raises(AwsError):
        manager.create_instances(0)


@pytest.mark.usefixtures("aws")
def test_stop_start_destroy(settings: Settings) -> None:
    client = boto3.client("ec2", region_name="us-east-1")
    image = client.describe_images(Owners=["099720109477"])["Images"][0]["ImageId"]
    untagged = client.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]
    manager = InstanceManager(settings)
    manager.create_instances(1)
    # A second `create` adds instances and reuses the security group.
    manager.create_instances(1)
    assert len(manager.instances()) == 4

    assert manager.stop_instances() == 4
    assert {i.state for i in manager.instances()} == {"stopped"}
    assert manager.hosts() == {"us-east-1": [], "eu-west-1": []}
    assert manager.stop_instances() == 0

    assert manager.start_instances() == 4
    assert {i.state for i in manager.instances()} == {"running"}

    assert manager.terminate_instances() == 4
    assert manager.instances() == []
    for region in REGIONS:
        assert {i["State"]["Name"] for i in _tagged(region)} == {"terminated"}
    assert manager.terminate_instances() == 0
    # Only the testbed's tagged instances were touched.
    other = client.describe_instances(InstanceIds=[untagged["InstanceId"]])
    assert other["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"
