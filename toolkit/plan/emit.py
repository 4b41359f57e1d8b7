"""The ParallelCluster config of a plan, through the spec renderer of ``pctk config new``."""

from __future__ import annotations

import re
from typing import Any

from toolkit.config.check import CheckReport, check_text
from toolkit.config.render import render_cluster_config
from toolkit.config.spec import (
    ClusterSpec,
    ComputeResourceSpec,
    FsxLustreSpec,
    HeadNodeSpec,
    HomeSpec,
    QueueSpec,
    StorageSpec,
)
from toolkit.plan.model import PlanError

EXAMPLE_SUBNET_HEAD = "subnet-0123456789abcdef0"
EXAMPLE_SUBNET_COMPUTE = "subnet-0123456789abcdef1"
EXAMPLE_KEY = "my-key"
HEAD_NODE_TYPE = "m5.8xlarge"
CLUSTER_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,39}$")


def plan_spec(plan: dict[str, Any], *, name: str = "plan", region: str = "us-east-1",
              head_subnet: str = EXAMPLE_SUBNET_HEAD,
              compute_subnet: str = EXAMPLE_SUBNET_COMPUTE, key_name: str | None = EXAMPLE_KEY,
              capacity_reservation_id: str | None = None) -> ClusterSpec:
    """One static GPU queue of the plan's nodes (all of them up for the whole run), a small
    dynamic CPU queue, FSx for Lustre sized for the checkpoints, EFS /home."""
    if not CLUSTER_NAME.match(name):
        raise PlanError(f"--name {name!r} is not a cluster name",
                        "start with a letter; letters, digits and '-', at most 40")
    nodes = int(plan["nodes"])
    itype = str(plan["instance_type"])
    capacity = "CAPACITY_BLOCK" if capacity_reservation_id else "ONDEMAND"
    short = re.sub(r"[^a-z0-9]", "", itype.split(".")[0])[:10] or "gpu"
    gpu_queue = QueueSpec(
        name="gpu", subnet_ids=(compute_subnet,), capacity_type=capacity,
        compute_resources=(ComputeResourceSpec(
            name=short, instance_type=itype, min_count=nodes, max_count=nodes,
            capacity_reservation_id=capacity_reservation_id),))
    cpu_queue = QueueSpec(name="cpu", subnet_ids=(compute_subnet,), compute_resources=(
        ComputeResourceSpec(name="c5", instance_type="c5.4xlarge", min_count=0, max_count=4),))
    fsx_gib = int(plan["inputs"]["fsx_capacity_gib"]["value"])
    days = plan["days"]
    model = plan["inputs"]["model"]["value"]
    return ClusterSpec(
        name=name, region=region,
        description=(f"pctk plan: {model}, {nodes} x {itype} ({plan['gpus']} GPUs), about "
                     f"{days:,.1f} days; replace the example subnet and key ids before "
                     "pcluster create-cluster"),
        head_node=HeadNodeSpec(instance_type=HEAD_NODE_TYPE, subnet_id=head_subnet,
                               key_name=key_name, ssm=key_name is None),
        queues=(gpu_queue, cpu_queue),
        storage=StorageSpec(fsx_lustre=FsxLustreSpec(capacity_gib=fsx_gib),
                            home=HomeSpec(kind="efs")),
        tags={"project": name},
    )


def render_and_check(spec: ClusterSpec, target: str) -> tuple[str, CheckReport]:
    """The rendered YAML and what ``pctk config check`` says of it."""
    text = render_cluster_config(spec)
    return text, check_text(text, target, {})
