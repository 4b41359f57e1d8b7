"""pctk's own lints: what aws-parallelcluster's schema and offline validators let through.

Each lint is a small class with a ``code`` and ``check(config)`` returning findings, the shape
of aws-parallelcluster's validators: ``config`` is the parsed model
(:mod:`toolkit.config.model`, read tolerantly, so a half-broken config still gets its lints).
Some stand in for upstream validators that need AWS data and are therefore skipped offline
(EFA support and instance types from the pctk catalog instead of EC2); none repeats a
validator that runs offline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

from toolkit import catalog
from toolkit.config.findings import Finding, Level, YamlPath
from toolkit.config.model import (
    SLURM_SETTINGS,
    ClusterTopology,
    ComputeResource,
    Queue,
    dig,
    parse_cluster,
)
from toolkit.config.typos import unknown_type_hint


class Lint:
    """A check of the parsed config (:class:`~toolkit.config.model.ClusterTopology`, read
    tolerantly), as upstream validators check the parsed cluster objects."""

    code: ClassVar[str]

    def check(self, config: ClusterTopology) -> list[Finding]:
        return list(self._check(config))

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(
        self, level: Level, path: YamlPath, message: str, hint: str | None = None
    ) -> Finding:
        return Finding(level, "lint", self.code, path, message, hint)


class EmptyQueueLint(Lint):
    """``ComputeResources: []`` (a queue without the key is the schema's finding)."""

    code = "empty-queue"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for q in config.queues:
            if not q.compute_resources and dig(config.raw, *q.path, "ComputeResources") == []:
                yield self.finding(Level.ERROR, (*q.path, "ComputeResources"),
                                   f"queue {q.name} has no compute resources",
                                   "add at least one compute resource or remove the queue")


class CapacityBlockLint(Lint):
    """Upstream's CapacityTypeValidator checks this too, but only after an EC2 call, so it is
    skipped offline. MinCount = MaxCount is ComputeResourceSizeValidator's (it runs offline)."""

    code = "capacity-block"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for q in config.queues:
            if q.capacity_type != "CAPACITY_BLOCK":
                continue
            for cr in q.compute_resources:
                if q.reservation_target_of(cr) is None:
                    yield self.finding(
                        Level.ERROR, q.path_of(cr),
                        f"{q.label(cr)}: CAPACITY_BLOCK needs CapacityReservationTarget",
                        "add CapacityReservationTarget/CapacityReservationId: cr-... of the block",
                    )


class PlacementGroupReservationLint(Lint):
    """A targeted reservation with a placement group. Upstream's check of this
    (PlacementGroupCapacityReservationValidator) needs EC2; a capacity block with a placement
    group is PlacementGroupCapacityTypeValidator's, which runs offline."""

    code = "placement-group-reservation"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for q, cr in config.compute_resources():
            if q.placement_group_enabled(cr) is not True:
                continue
            if q.capacity_type == "CAPACITY_BLOCK" or q.reservation_target_of(cr) is None:
                continue
            yield self.finding(
                Level.WARNING, (*q.path_of(cr), "Networking", "PlacementGroup"),
                f"{q.label(cr)}: placement group enabled together with a targeted reservation: "
                "the reservation may not sit in this placement group, and launches can fail "
                "with insufficient capacity",
                "set Networking/PlacementGroup/Enabled: false for this queue",
            )


def _accelerated(cr: ComputeResource) -> bool:
    return any((inst := catalog.find(t)) is not None and inst.accelerator is not None
               for t in cr.instance_types)


def _accelerated_nodes(q: Queue) -> int:
    return sum(cr.max_count for cr in q.compute_resources if _accelerated(cr))


class EfaLint(Lint):
    """EFA on where the type has none; EFA off on a single-node accelerated queue.

    A multi-node queue without EFA is MultiNodeWithoutEfaLint's finding, not a second one here.
    """

    code = "efa"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for q, cr in config.compute_resources():
            for itype in cr.instance_types:
                inst = catalog.find(itype)
                if inst is None:
                    continue
                if cr.efa and not inst.efa_supported:
                    yield self.finding(Level.ERROR, (*q.path_of(cr), "Efa", "Enabled"),
                                       f"{q.label(cr)}: {itype} does not support EFA",
                                       "set Efa/Enabled: false or pick an EFA instance type")
                elif (not cr.efa and inst.efa_supported and inst.accelerator is not None
                      and _accelerated_nodes(q) <= 1):
                    yield self.finding(
                        Level.WARNING, q.path_of(cr),
                        f"{q.label(cr)}: {itype} supports EFA ({inst.efa_interfaces} interfaces) "
                        "but EFA is off",
                        "add Efa: {Enabled: true} (ParallelCluster warns about this too)",
                    )


class MultiNodeWithoutEfaLint(Lint):
    code = "multinode-no-efa"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for q in config.queues:
            nodes = _accelerated_nodes(q)
            if nodes <= 1:
                continue
            for cr in q.compute_resources:
                if not _accelerated(cr) or cr.efa:
                    continue
                capable = all((i := catalog.find(t)) is not None and i.efa_supported
                              for t in cr.instance_types)
                hint = ("add Efa: {Enabled: true} and a placement group" if capable else
                        "use an EFA-capable type (p4d, p5, p5en, p6-b200, trn1) or MaxCount: 1")
                yield self.finding(
                    Level.WARNING, q.path_of(cr),
                    f"{q.label(cr)}: multi-node accelerated queue ({nodes} nodes) without EFA: "
                    "NCCL falls back to TCP sockets between nodes",
                    hint,
                )


class UnknownInstanceTypeLint(Lint):
    code = "unknown-instance-type"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        places: list[tuple[YamlPath, str]] = []
        if config.head_node_instance_type is not None:
            places.append((("HeadNode", "InstanceType"), config.head_node_instance_type))
        for q, cr in config.compute_resources():
            places += [((*q.path_of(cr), "InstanceType"), t) for t in cr.instance_types]
        places += [(("LoginNodes", "Pools", pi, "InstanceType"), itype)
                   for pi, itype in config.login_node_instance_types]
        for path, itype in places:
            if catalog.find(itype) is not None:
                continue
            if catalog.well_formed(itype):
                yield self.finding(
                    Level.WARNING, path,
                    f"instance type {itype}: facts unknown (not in the pctk catalog): nothing "
                    "checks its vCPUs, GPUs, EFA or price",
                    "set Efa/Enabled explicitly; `pctk catalog refresh` reads its facts from "
                    "the EC2 API where AWS credentials exist",
                )
            else:
                yield self.finding(
                    Level.WARNING, path,
                    f"instance type {itype} is not an EC2 instance type name: no GPU, EFA or "
                    "price facts for it",
                    unknown_type_hint(itype),
                )


class AccountingLint(Lint):
    code = "no-accounting"

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        if config.any_accounting or not config.scheduling:
            return
        yield self.finding(
            Level.WARNING, SLURM_SETTINGS,
            "no Slurm accounting database: sacct does not work, so job history and submitit's "
            "job status degrade (it can wait forever for a job that died)",
            "add Scheduling/SlurmSettings/Database (Uri, UserName, PasswordSecretArn)",
        )


_SECRET_PATTERNS = [
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\baws_secret_access_key\s*[=:]", re.IGNORECASE), "an AWS secret key assignment"),
]
_SECRET_KEY_NAME = re.compile(r"(secret|password|passwd|token)", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^[A-Za-z0-9/+]{40}$")


class SecretLint(Lint):
    code = "secret"

    def _walk(self, node: Any, path: YamlPath) -> Iterator[tuple[YamlPath, str]]:
        if isinstance(node, dict):
            for k, v in node.items():
                yield from self._walk(v, (*path, str(k)))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from self._walk(v, (*path, i))
        elif isinstance(node, str):
            yield path, node

    def _check(self, config: ClusterTopology) -> Iterator[Finding]:
        for path, value in self._walk(config.raw, ()):
            key = str(path[-1]) if path and isinstance(path[-1], str) else ""
            what = next((w for rx, w in _SECRET_PATTERNS if rx.search(value)), None)
            if what is None and _SECRET_VALUE.match(value) and any(c.isdigit() for c in value) \
                    and any(c.isupper() for c in value) and any(c.islower() for c in value):
                what = "an AWS secret access key"
            if what is None and _SECRET_KEY_NAME.search(key) and not key.endswith("Arn") \
                    and value and not value.startswith("arn:"):
                what = "a plain-text secret"
            if what:
                yield self.finding(
                    Level.ERROR, path,
                    f"value looks like {what}; cluster configs end up in S3 and CloudFormation",
                    "remove it and rotate it; reference a Secrets Manager ARN or an IAM role",
                )


# Removed because an upstream validator that runs offline does the same (see upstream.py):
# MinCount > MaxCount and a capacity block's MinCount = MaxCount (ComputeResourceSizeValidator),
# names (NameValidator, SharedStorageNameValidator), duplicate names (DuplicateNameValidator),
# EFA without an explicit placement group (EfaPlacementGroupValidator), FSx for Lustre capacity
# (FsxStorageCapacityValidator), a capacity block with a placement group
# (PlacementGroupCapacityTypeValidator).
ALL_LINTS: tuple[Lint, ...] = (
    EmptyQueueLint(), CapacityBlockLint(), PlacementGroupReservationLint(), EfaLint(),
    MultiNodeWithoutEfaLint(), UnknownInstanceTypeLint(), AccountingLint(), SecretLint(),
)


def run_lints(config: ClusterTopology | Any,
              lints: tuple[Lint, ...] = ALL_LINTS) -> list[Finding]:
    """Each lint's findings on ``config``: the model, or raw YAML data (read tolerantly)."""
    if not isinstance(config, ClusterTopology):
        config = parse_cluster(config, tolerant=True)
    findings: list[Finding] = []
    for lint in lints:
        findings += lint.check(config)
    return findings
