"""Render a :class:`ClusterSpec` to a commented ParallelCluster v3 YAML (deterministic)."""

from __future__ import annotations

from typing import Any

from toolkit import catalog
from toolkit.config.emit import Comments, emit_yaml
from toolkit.config.findings import YamlPath
from toolkit.config.spec import (
    ClusterSpec,
    ComputeResourceSpec,
    CustomActionsSpec,
    QueueSpec,
    StorageSpec,
)

SSM_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def _efa_on(cr: ComputeResourceSpec) -> bool:
    if cr.efa is not None:
        return cr.efa
    inst = catalog.find(cr.instance_type)
    return bool(inst and inst.efa_supported)


def _is_accelerated(cr: ComputeResourceSpec) -> bool:
    inst = catalog.find(cr.instance_type)
    return bool(inst and inst.accelerator)


def _has_gpus(cr: ComputeResourceSpec) -> bool:
    inst = catalog.find(cr.instance_type)
    return bool(inst and inst.gpus)


def _custom_actions(actions: CustomActionsSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, script in (("OnNodeStart", actions.on_node_start),
                        ("OnNodeConfigured", actions.on_node_configured)):
        if script is not None:
            entry: dict[str, Any] = {"Script": script.script}
            if script.args:
                entry["Args"] = list(script.args)
            out[key] = entry
    return out


def _placement_group(q: QueueSpec) -> tuple[bool | None, str]:
    """Whether the queue gets a placement group, and why (None: leave the key out)."""
    efa = any(_efa_on(cr) for cr in q.compute_resources)
    reserved = any(cr.capacity_reservation_id for cr in q.compute_resources)
    if q.placement_group is not None:
        return q.placement_group, "set in the spec"
    if q.capacity_type == "CAPACITY_BLOCK":
        return None, ""  # the block places instances itself; PC warns if a group is added
    if efa and reserved:
        return False, "a targeted reservation has its own placement; a group could block launches"
    if efa:
        return True, "EFA traffic wants instances close together; PC requires an explicit choice"
    return None, ""


def _compute_resource(cr: ComputeResourceSpec, q: QueueSpec, path: YamlPath,
                      comments: Comments) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": cr.name, "InstanceType": cr.instance_type,
                           "MinCount": cr.min_count, "MaxCount": cr.max_count}
    inst = catalog.find(cr.instance_type)
    if inst is None:
        comments[(*path, "InstanceType")] = (
            "facts unknown (not in the pctk catalog): EFA, placement group and GPU health "
            "check not derived")
    if q.capacity_type == "CAPACITY_BLOCK":
        comments[(*path, "MinCount")] = "a capacity block needs MinCount = MaxCount = block size"
    elif cr.min_count:
        comments[(*path, "MinCount")] = "static nodes: they run (and bill) even when idle"
    if _efa_on(cr):
        out["Efa"] = {"Enabled": True}
        n = f"{inst.efa_interfaces} EFA interfaces" if inst else "EFA"
        comments[(*path, "Efa")] = f"{n}: NCCL/libfabric traffic between nodes bypasses TCP"
    elif inst and inst.efa_supported:
        out["Efa"] = {"Enabled": False}
        comments[(*path, "Efa")] = "EFA turned off in the spec"
    if cr.disable_hyperthreading:
        out["DisableSimultaneousMultithreading"] = True
        comments[(*path, "DisableSimultaneousMultithreading")] = (
            "one thread per core: steadier step times for data loader workers")
    if cr.capacity_reservation_id:
        out["CapacityReservationTarget"] = {"CapacityReservationId": cr.capacity_reservation_id}
        comments[(*path, "CapacityReservationTarget")] = (
            "launch into this capacity block" if q.capacity_type == "CAPACITY_BLOCK"
            else "launch into this targeted capacity reservation")
    return out


def _queue(q: QueueSpec, qi: int, comments: Comments) -> dict[str, Any]:
    path: YamlPath = ("Scheduling", "SlurmQueues", qi)
    out: dict[str, Any] = {"Name": q.name}
    if q.capacity_type != "ONDEMAND":
        out["CapacityType"] = q.capacity_type
        if q.capacity_type == "CAPACITY_BLOCK":
            comments[(*path, "CapacityType")] = "paid-for block; no placement group (AWS places it)"
    accelerated = any(_is_accelerated(cr) for cr in q.compute_resources)
    if accelerated:
        out["JobExclusiveAllocation"] = True
        comments[(*path, "JobExclusiveAllocation")] = (
            "whole nodes per job: training jobs never share accelerators, EFA or memory")
    networking: dict[str, Any] = {"SubnetIds": list(q.subnet_ids)}
    pg, why = _placement_group(q)
    if pg is not None:
        networking["PlacementGroup"] = {"Enabled": pg}
        comments[(*path, "Networking", "PlacementGroup")] = why
    out["Networking"] = networking
    if any(_has_gpus(cr) for cr in q.compute_resources):
        out["HealthChecks"] = {"Gpu": {"Enabled": True}}
        comments[(*path, "HealthChecks")] = "DCGM GPU check before each job; bad nodes drain"
    if q.custom_actions:
        out["CustomActions"] = _custom_actions(q.custom_actions)
    out["ComputeResources"] = [
        _compute_resource(cr, q, (*path, "ComputeResources", ci), comments)
        for ci, cr in enumerate(q.compute_resources)
    ]
    return out


def _shared_storage(storage: StorageSpec, comments: Comments) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    fsx = storage.fsx_lustre
    if fsx is not None:
        settings: dict[str, Any]
        if fsx.file_system_id:
            settings = {"FileSystemId": fsx.file_system_id}
            why = "existing FSx for Lustre: data outlives the cluster"
        else:
            settings = {"StorageCapacity": fsx.capacity_gib, "DeploymentType": fsx.deployment_type}
            if fsx.deployment_type.startswith("PERSISTENT") and fsx.throughput_mb_s_per_tib:
                settings["PerUnitStorageThroughput"] = fsx.throughput_mb_s_per_tib
            if fsx.data_compression:
                settings["DataCompressionType"] = "LZ4"
            why = "new FSx for Lustre (capacity in GiB) for datasets and checkpoints"
        comments[("SharedStorage", len(out))] = why
        out.append({"Name": "fsx", "StorageType": "FsxLustre", "MountDir": fsx.mount_dir,
                    "FsxLustreSettings": settings})
    home = storage.home
    if home is not None:
        comments[("SharedStorage", len(out))] = "shared /home: same dotfiles and venvs everywhere"
        if home.kind == "efs":
            efs: dict[str, Any] = (
                {"FileSystemId": home.file_system_id} if home.file_system_id
                else {"Encrypted": True}
            )
            out.append({"Name": "home", "StorageType": "Efs", "MountDir": "/home",
                        "EfsSettings": efs})
        else:
            out.append({"Name": "home", "StorageType": "FsxOpenZfs", "MountDir": "/home",
                        "FsxOpenZfsSettings": {"VolumeId": home.volume_id}})
    return out


def cluster_config_dict(spec: ClusterSpec) -> tuple[dict[str, Any], Comments]:
    """The ParallelCluster config as a plain dict, and the comments to write above keys."""
    comments: Comments = {}
    head = spec.head_node
    head_out: dict[str, Any] = {"InstanceType": head.instance_type,
                                "Networking": {"SubnetId": head.subnet_id}}
    if head.key_name:
        head_out["Ssh"] = {"KeyName": head.key_name}
    if head.ssm:
        head_out["Iam"] = {"AdditionalIamPolicies": [{"Policy": SSM_POLICY}]}
        comments[("HeadNode", "Iam")] = "log in with SSM Session Manager: no open SSH port needed"
    if head.root_volume_gib:
        head_out["LocalStorage"] = {"RootVolume": {"Size": head.root_volume_gib}}
    if spec.imdsv2:
        head_out["Imds"] = {"Secured": True}
        comments[("HeadNode", "Imds")] = "only root reads instance credentials on the head node"
    if head.custom_actions:
        head_out["CustomActions"] = _custom_actions(head.custom_actions)

    slurm_settings: dict[str, Any] = {"QueueUpdateStrategy": "DRAIN"}
    comments[("Scheduling", "SlurmSettings", "QueueUpdateStrategy")] = (
        "updates drain nodes instead of killing running jobs")
    if spec.database:
        db: dict[str, Any] = {"Uri": spec.database.uri, "UserName": spec.database.user_name,
                              "PasswordSecretArn": spec.database.password_secret_arn}
        if spec.database.database_name:
            db["DatabaseName"] = spec.database.database_name
        slurm_settings["Database"] = db
        comments[("Scheduling", "SlurmSettings", "Database")] = (
            "Slurm accounting: sacct and submitit job status need it")

    data: dict[str, Any] = {"Region": spec.region, "Image": {"Os": spec.os}, "HeadNode": head_out}
    data["Scheduling"] = {
        "Scheduler": "slurm",
        "SlurmSettings": slurm_settings,
        "SlurmQueues": [_queue(q, qi, comments) for qi, q in enumerate(spec.queues)],
    }
    storage = _shared_storage(spec.storage, comments)
    if storage:
        data["SharedStorage"] = storage
    mon = spec.monitoring
    data["Monitoring"] = {
        "DetailedMonitoring": mon.detailed,
        "Logs": {"CloudWatch": {"Enabled": mon.logs, "RetentionInDays": mon.log_retention_days}},
        "Dashboards": {"CloudWatch": {"Enabled": mon.dashboard}},
    }
    if spec.imdsv2:
        data["Imds"] = {"ImdsSupport": "v2.0"}
        comments[("Imds",)] = "IMDSv2 only: session tokens block SSRF credential theft"
    if spec.tags:
        data["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(spec.tags.items())]
        comments[("Tags",)] = "cost allocation"
    return data, comments


def render_cluster_config(spec: ClusterSpec, spec_source: str | None = None) -> str:
    """The full ParallelCluster v3 YAML for ``spec``; the same spec gives the same bytes."""
    data, comments = cluster_config_dict(spec)
    header = [spec.description or spec.name]
    if spec_source:
        header.append(f"Generated by `pctk config new --spec {spec_source}`: edit the spec, "
                      "not this file.")
    else:
        header.append("Generated by `pctk config new`.")
    return emit_yaml(data, comments, "\n".join(header))
