"""aws-parallelcluster's own create-time validators, run offline by ``pctk config check``.

One case per rule: a config that trips it (the p5-training preset with one change) and the
upstream validator's level and message. Validators that need AWS data are skipped and named.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from toolkit.config.check import check_text
from toolkit.config.findings import Finding, Level
from toolkit.config.upstream import check_official

Config = dict[str, Any]
SUBNET_B = "subnet-0123456789abcdef2"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any connect or name lookup that escapes the offline session fails the test."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        attempts.append(args)
        raise OSError("network blocked by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts
    assert attempts == []


def settings(c: Config) -> Config:
    return c["Scheduling"]["SlurmSettings"]


def queue(c: Config, i: int) -> Config:
    return c["Scheduling"]["SlurmQueues"][i]


def cr(c: Config, qi: int) -> Config:
    return queue(c, qi)["ComputeResources"][0]


def storage(c: Config, i: int) -> Config:
    return c["SharedStorage"][i]


def deny_listed_setting(c: Config) -> None:
    settings(c)["CustomSlurmSettings"] = [{"Prolog": "/opt/prolog.sh"}]


def static_node_name(c: Config) -> None:
    settings(c)["CustomSlurmSettings"] = [{"NodeName": "gpu-st-p5-9", "CPUs": 8}]


def settings_and_include_file(c: Config) -> None:
    settings(c)["CustomSlurmSettings"] = [{"SchedulerParameters": "bf_interval=30"}]
    settings(c)["CustomSlurmSettingsIncludeFile"] = "s3://my-bucket/slurm.conf"


def external_slurmdbd_no_munge_key(c: Config) -> None:
    del settings(c)["Database"]
    settings(c)["ExternalSlurmdbd"] = {"Host": "10.0.0.5"}


def database_and_external_slurmdbd(c: Config) -> None:
    settings(c)["ExternalSlurmdbd"] = {"Host": "10.0.0.5"}
    settings(c)["MungeKeySecretArn"] = (
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:munge-AbCdEf")


def duplicate_mount_dir(c: Config) -> None:
    storage(c, 1)["MountDir"] = "/fsx"


def reserved_mount_dir(c: Config) -> None:
    storage(c, 0)["MountDir"] = "/opt"


def storage_named_default(c: Config) -> None:
    storage(c, 0)["Name"] = "default"


def file_cache_on_home(c: Config) -> None:
    c["SharedStorage"][1] = {"Name": "cache", "StorageType": "FileCache", "MountDir": "/home",
                             "FileCacheSettings": {"FileCacheId": "fc-0123456789abcdef0"}}


def six_ebs_volumes(c: Config) -> None:
    c["SharedStorage"] = [{"Name": f"ebs{i}", "StorageType": "Ebs", "MountDir": f"/ebs{i}"}
                          for i in range(6)]


def managed_fsx_multi_subnet(c: Config) -> None:
    queue(c, 1)["Networking"]["SubnetIds"].append(SUBNET_B)


def shared_fsx_volume_id(c: Config) -> None:
    c["SharedStorage"] = [
        {"Name": f"zfs{i}", "StorageType": "FsxOpenZfs", "MountDir": f"/zfs{i}",
         "FsxOpenZfsSettings": {"VolumeId": "fsvol-0123456789abcdef0"}}
        for i in range(2)
    ]


def intel_hpc_platform(c: Config) -> None:
    c["AdditionalPackages"] = {"IntelSoftware": {"IntelHpcPlatform": True}}


# Rules that pctk once re-implemented as lints; the upstream validator is what runs now.
def min_gt_max(c: Config) -> None:
    cr(c, 1)["MinCount"] = 9


def capacity_block_min_ne_max(c: Config) -> None:
    cr(c, 0)["MinCount"] = 2


def bad_queue_name(c: Config) -> None:
    queue(c, 1)["Name"] = "CPU_Queue"


def duplicate_queue_name(c: Config) -> None:
    queue(c, 1)["Name"] = "gpu"


def duplicate_compute_resource_name(c: Config) -> None:
    queue(c, 1)["ComputeResources"].append(dict(cr(c, 1)))


def efa_without_explicit_placement_group(c: Config) -> None:
    del queue(c, 0)["CapacityType"]
    del cr(c, 0)["CapacityReservationTarget"]


def capacity_block_with_placement_group(c: Config) -> None:
    queue(c, 0)["Networking"]["PlacementGroup"] = {"Enabled": True}


def fsx_capacity(c: Config) -> None:
    storage(c, 0)["FsxLustreSettings"]["StorageCapacity"] = 1300


def fsx_hdd_capacity(c: Config) -> None:
    storage(c, 0)["FsxLustreSettings"] = {
        "StorageCapacity": 4800, "DeploymentType": "PERSISTENT_1", "StorageType": "HDD",
        "PerUnitStorageThroughput": 12}


# (case, validator, level, words in the message, YAML path the finding points at)
RULES: list[tuple[Callable[[Config], None], str, Level, str, str]] = [
    (deny_listed_setting, "CustomSlurmSettingsValidator", Level.ERROR,
     "Prolog", "Scheduling.SlurmSettings"),
    (static_node_name, "CustomSlurmNodeNamesValidator", Level.ERROR,
     "gpu-st-p5-9", "Scheduling.SlurmSettings"),
    (settings_and_include_file, "CustomSlurmSettingsIncludeFileOnlyValidator", Level.ERROR,
     "CustomSlurmSettingsIncludeFile", "Scheduling.SlurmSettings"),
    (external_slurmdbd_no_munge_key, "ExternalSlurmdbdRequiresCustomMungeKey", Level.ERROR,
     "MungeKeySecretArn", "Scheduling.SlurmSettings"),
    (database_and_external_slurmdbd, "ExternalSlurmdbdVsDatabaseIncompatibility", Level.ERROR,
     "Database", "Scheduling.SlurmSettings"),
    (duplicate_mount_dir, "DuplicateMountDirValidator", Level.ERROR, "/fsx", "SharedStorage"),
    (reserved_mount_dir, "SharedStorageMountDirValidator", Level.ERROR,
     "/opt is reserved", "SharedStorage[0].MountDir"),
    (storage_named_default, "SharedStorageNameValidator", Level.ERROR,
     "It is forbidden to use 'default' as a name", "SharedStorage[0].Name"),
    (file_cache_on_home, "SharedFileCacheNotHomeValidator", Level.ERROR,
     "FileCache cannot be used to mount", "SharedStorage[1].MountDir"),
    (six_ebs_volumes, "NumberOfStorageValidator", Level.ERROR, "EBS", "SharedStorage"),
    (managed_fsx_multi_subnet, "ManagedFsxMultiAzValidator", Level.ERROR,
     "Managed FSx storage created by ParallelCluster is not supported", "SharedStorage"),
    (shared_fsx_volume_id, "DuplicateNameValidator", Level.ERROR,
     "Shared Storage IDs name fsvol-0123456789abcdef0 must be unique", "SharedStorage"),
    (intel_hpc_platform, "IntelHpcOsValidator", Level.ERROR,
     "When enabling intel software, the operating system", "AdditionalPackages.IntelSoftware"),
    (min_gt_max, "ComputeResourceSizeValidator", Level.ERROR,
     "Max count must be greater than or equal to min count",
     "Scheduling.SlurmQueues[1].ComputeResources[0].MinCount"),
    (capacity_block_min_ne_max, "ComputeResourceSizeValidator", Level.ERROR,
     "Max count must be set to the same value of min count",
     "Scheduling.SlurmQueues[0].ComputeResources[0].MinCount"),
    (bad_queue_name, "NameValidator", Level.ERROR, "Invalid name 'CPU_Queue'",
     "Scheduling.SlurmQueues[1].Name"),
    (duplicate_queue_name, "DuplicateNameValidator", Level.ERROR,
     "Queue name gpu must be unique", "Scheduling.SlurmQueues"),
    (duplicate_compute_resource_name, "DuplicateNameValidator", Level.ERROR,
     "Compute resource name c5 must be unique", "Scheduling.SlurmQueues[1].ComputeResources"),
    (efa_without_explicit_placement_group, "EfaPlacementGroupValidator", Level.ERROR,
     "must be explicit", "Scheduling.SlurmQueues[0]"),
    (capacity_block_with_placement_group, "PlacementGroupCapacityTypeValidator", Level.WARNING,
     "placement group constraint should not be set", "<root>"),
    (fsx_capacity, "FsxStorageCapacityValidator", Level.ERROR,
     "1,200 GB or increments of 2,400 GB", "SharedStorage[0]"),
    (fsx_hdd_capacity, "FsxStorageCapacityValidator", Level.ERROR,
     "PERSISTENT HDD 12 MB/s/TiB file systems is increments of 6,000 GiB", "SharedStorage[0]"),
]


def upstream_findings(data: Config) -> list[Finding]:
    text = yaml.safe_dump(data, sort_keys=False)
    return [f for f in check_text(text, "t.yaml", environ={}).findings if f.stage == "validator"]


def test_base_config_has_no_upstream_errors_or_warnings(base: Config) -> None:
    assert [f for f in upstream_findings(base) if f.level is not Level.INFO] == []


@pytest.mark.parametrize(("mutate", "validator", "level", "words", "path"), RULES,
                         ids=[r[0].__name__ for r in RULES])
def test_upstream_rule(base: Config, mutate: Callable[[Config], None], validator: str,
                       level: Level, words: str, path: str) -> None:
    mutate(base)
    hits = [f for f in upstream_findings(base) if f.code == validator]
    assert hits, f"{validator} did not fire"
    (hit,) = [f for f in hits if words in f.message]
    assert hit.level is level
    assert hit.path_str == path
    assert hit.line is not None


def test_fsx_hdd_at_a_valid_size_passes(base: Config) -> None:
    fsx_hdd_capacity(base)
    base["SharedStorage"][0]["FsxLustreSettings"]["StorageCapacity"] = 6000
    assert [f for f in upstream_findings(base) if f.code == "FsxStorageCapacityValidator"] == []


def test_validators_needing_aws_are_skipped_and_named(base: Config) -> None:
    report = check_official(base)
    skipped = {s.validator: s.reason for s in report.skipped}
    assert skipped["CapacityReservationValidator"] == (
        "needs AWS data (ec2.describe_capacity_reservations)")
    assert skipped["InstanceTypeValidator"] == "needs AWS data (ec2.list_instance_types)"
    assert skipped["PasswordSecretArnValidator"] == (
        "needs AWS data (secretsmanager.describe_secret)")
    assert "ArchitectureOsValidator" in skipped  # its input is EC2's answer
    assert {"NameValidator", "ComputeResourceSizeValidator",
            "ExternalSlurmdbdVsDatabaseIncompatibility"} <= set(report.ran)
    assert not set(report.ran) & set(skipped)


def test_validators_that_build_their_own_boto3_client_are_skipped(base: Config) -> None:
    base["HeadNode"]["Iam"] = {"AdditionalIamPolicies": [
        {"Policy": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"}]}
    report = check_official(base)
    assert {s.validator: s.reason for s in report.skipped}["AdditionalIamPolicyValidator"] == (
        "needs AWS data (boto3 client iam)")
    assert not [f for f in report.findings if f.code == "AdditionalIamPolicyValidator"]


def test_url_checks_do_not_reach_the_network(base: Config) -> None:
    queue(base, 1)["CustomActions"] = {"OnNodeConfigured": {
        "Script": "https://example.com/setup.sh"}}
    report = check_official(base)
    reason = {s.validator: s.reason for s in report.skipped}["AsyncTimedUrlValidator"]
    assert reason == "needs network access (resolve example.com)"


def test_validators_do_not_run_on_a_config_the_schema_rejects(base: Config) -> None:
    base["Image"]["Os"] = "windows"
    report = check_official(base)
    assert report.ran == [] and report.not_run
    assert [f.path_str for f in report.findings] == ["Image.Os"]


def test_a_broad_config_validates_offline(base: Config) -> None:
    """Login nodes, a multi-type compute resource, EBS/EFS/FSx, custom actions, IAM, DevSettings:
    registration that reaches for AWS data is skipped, everything else runs."""
    base["LoginNodes"] = {"Pools": [{"Name": "login", "InstanceType": "c5.xlarge", "Count": 1,
                                     "Networking": {"SubnetIds": [SUBNET_B]}}]}
    queue(base, 1)["ComputeResources"].append({"Name": "Flex_1", "Instances": [
        {"InstanceType": "c5.xlarge"}, {"InstanceType": "c5a.xlarge"}]})
    queue(base, 1)["Iam"] = {"S3Access": [{"BucketName": "my-data"}]}
    base["SharedStorage"].append({"Name": "scratch", "StorageType": "Ebs", "MountDir": "/scratch",
                                  "EbsSettings": {"VolumeType": "gp2", "Iops": 100}})
    base["HeadNode"]["CustomActions"] = {"OnNodeStart": {"Script": "s3://my-bucket/start.sh"}}
    base["DevSettings"] = {"Cookbook": {"ChefCookbook": "https://example.com/cookbook.tgz"}}
    report = check_official(base)
    assert report.not_run is None
    messages = {(f.code, f.path_str): f.message for f in report.findings}
    assert messages[("EbsVolumeIopsValidator", "SharedStorage[2]")] == (
        "The parameter IOPS is not supported for gp2 volumes.")
    # registered before that resource's registration reached for AWS data: still runs
    assert "Invalid name 'Flex_1'" in messages[
        ("NameValidator", "Scheduling.SlurmQueues[1].ComputeResources[1].Name")]
    skipped = {s.validator for s in report.skipped}
    assert {"SlurmFlexibleComputeResource validators", "UrlValidator", "SubnetsValidator"} <= (
        skipped)


def test_region_check_uses_the_packaged_region_list(base: Config) -> None:
    """pcluster falls back to its packaged region list when the fetch is refused: RegionValidator
    runs on it, in the first check of a process as in later ones."""
    assert "RegionValidator" in check_official(base).ran
    base["Region"] = "xx-nowhere-1"
    report = check_official(base)
    assert "RegionValidator" in report.ran
    (hit,) = [f for f in report.findings if f.code == "RegionValidator"]
    assert hit.message == "Region 'xx-nowhere-1' is not yet officially supported by ParallelCluster"
