"""pctk's own lints: what the official offline schema lets through.

Each lint is a small class with a ``code`` and ``check(data)`` returning findings, the shape
of aws-parallelcluster's validators. Several mirror checks ParallelCluster only runs at
create time, with AWS credentials (names, FSx capacity, EFA placement groups).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any, ClassVar

from toolkit import catalog
from toolkit.config import view
from toolkit.config.findings import Finding, Level, YamlPath

PC_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
PC_NAME_MAX = 25


class Lint:
    code: ClassVar[str]

    def check(self, data: Any) -> list[Finding]:
        return list(self._check(data))

    def _check(self, data: Any) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(
        self, level: Level, path: YamlPath, message: str, hint: str | None = None
    ) -> Finding:
        return Finding(level, "lint", self.code, path, message, hint)


class MinMaxCountLint(Lint):
    code = "min-gt-max"

    def _check(self, data: Any) -> Iterator[Finding]:
        for cr in view.compute_resources(data):
            if cr.min_count > cr.max_count:
                yield self.finding(
                    Level.ERROR, (*cr.path, "MinCount"),
                    f"{cr.label}: MinCount {cr.min_count} is larger than MaxCount {cr.max_count}",
                    "raise MaxCount or lower MinCount (MaxCount defaults to 10)",
                )


class EmptyQueueLint(Lint):
    code = "empty-queue"

    def _check(self, data: Any) -> Iterator[Finding]:
        for q in view.queues(data):
            crs = q.raw.get("ComputeResources")
            if isinstance(crs, list) and not crs:
                yield self.finding(Level.ERROR, (*q.path, "ComputeResources"),
                                   f"queue {q.name} has no compute resources",
                                   "add at least one compute resource or remove the queue")


class CapacityBlockLint(Lint):
    code = "capacity-block"

    def _check(self, data: Any) -> Iterator[Finding]:
        for q in view.queues(data):
            if q.capacity_type != "CAPACITY_BLOCK":
                continue
            for cr in q.compute_resources():
                if cr.reservation_target is None:
                    yield self.finding(
                        Level.ERROR, cr.path,
                        f"{cr.label}: CAPACITY_BLOCK needs CapacityReservationTarget",
                        "add CapacityReservationTarget/CapacityReservationId: cr-... of the block",
                    )
                if cr.min_count != cr.max_count:
                    yield self.finding(
                        Level.ERROR, (*cr.path, "MinCount"),
                        f"{cr.label}: a capacity block needs MinCount = MaxCount "
                        f"(got {cr.min_count} and {cr.max_count})",
                        "set both to the number of instances in the block",
                    )


class PlacementGroupReservationLint(Lint):
    code = "placement-group-reservation"

    def _check(self, data: Any) -> Iterator[Finding]:
        for cr in view.compute_resources(data):
            if cr.placement_group_enabled() is not True:
                continue
            if cr.queue.capacity_type == "CAPACITY_BLOCK":
                why = "a capacity block already places its instances close together"
            elif cr.reservation_target is not None:
                why = "a targeted reservation may not sit in this placement group"
            else:
                continue
            yield self.finding(
                Level.WARNING, (*cr.path, "Networking", "PlacementGroup"),
                f"{cr.label}: placement group enabled together with a reservation: {why}, and "
                "launches can fail with insufficient capacity",
                "set Networking/PlacementGroup/Enabled: false for this queue",
            )


def _accelerated(cr: view.CrView) -> bool:
    return any((inst := catalog.find(t)) is not None and inst.accelerator is not None
               for t in cr.instance_types)


def _accelerated_nodes(q: view.QueueView) -> int:
    return sum(cr.max_count for cr in q.compute_resources() if _accelerated(cr))


class EfaLint(Lint):
    """EFA on where the type has none; EFA off on a single-node accelerated queue.

    A multi-node queue without EFA is MultiNodeWithoutEfaLint's finding, not a second one here.
    """

    code = "efa"

    def _check(self, data: Any) -> Iterator[Finding]:
        for cr in view.compute_resources(data):
            for itype in cr.instance_types:
                inst = catalog.find(itype)
                if inst is None:
                    continue
                if cr.efa_enabled and not inst.efa_supported:
                    yield self.finding(Level.ERROR, (*cr.path, "Efa", "Enabled"),
                                       f"{cr.label}: {itype} does not support EFA",
                                       "set Efa/Enabled: false or pick an EFA instance type")
                elif (not cr.efa_enabled and inst.efa_supported and inst.accelerator is not None
                      and _accelerated_nodes(cr.queue) <= 1):
                    yield self.finding(
                        Level.WARNING, cr.path,
                        f"{cr.label}: {itype} supports EFA ({inst.efa_interfaces} interfaces) "
                        "but EFA is off",
                        "add Efa: {Enabled: true} (ParallelCluster warns about this too)",
                    )


class MultiNodeWithoutEfaLint(Lint):
    code = "multinode-no-efa"

    def _check(self, data: Any) -> Iterator[Finding]:
        for q in view.queues(data):
            nodes = _accelerated_nodes(q)
            if nodes <= 1:
                continue
            for cr in q.compute_resources():
                if not _accelerated(cr) or cr.efa_enabled:
                    continue
                capable = all((i := catalog.find(t)) is not None and i.efa_supported
                              for t in cr.instance_types)
                hint = ("add Efa: {Enabled: true} and a placement group" if capable else
                        "use an EFA-capable type (p4d, p5, p5en, p6-b200, trn1) or MaxCount: 1")
                yield self.finding(
                    Level.WARNING, cr.path,
                    f"{cr.label}: multi-node accelerated queue ({nodes} nodes) without EFA: "
                    "NCCL falls back to TCP sockets between nodes",
                    hint,
                )


class EfaPlacementGroupLint(Lint):
    """ParallelCluster's EfaPlacementGroupValidator, which needs credentials to run."""

    code = "efa-placement-group"

    def _check(self, data: Any) -> Iterator[Finding]:
        for cr in view.compute_resources(data):
            if cr.efa_enabled and cr.queue.capacity_type != "CAPACITY_BLOCK" \
                    and not cr.placement_group_explicit():
                yield self.finding(
                    Level.ERROR, cr.path,
                    f"{cr.label}: EFA is on but the placement group is not explicit; "
                    "pcluster create-cluster rejects this",
                    "add Networking/PlacementGroup/Enabled: true to the queue (or false with a "
                    "reservation that has its own placement group)",
                )


class UnknownInstanceTypeLint(Lint):
    code = "unknown-instance-type"

    def _check(self, data: Any) -> Iterator[Finding]:
        places: list[tuple[YamlPath, str]] = []
        head = view.dig(data, "HeadNode", "InstanceType")
        if isinstance(head, str):
            places.append((("HeadNode", "InstanceType"), head))
        for cr in view.compute_resources(data):
            places += [((*cr.path, "InstanceType"), t) for t in cr.instance_types]
        pools = view.dig(data, "LoginNodes", "Pools")
        for pi, pool in enumerate(pools if isinstance(pools, list) else []):
            if isinstance(pool, dict) and isinstance(pool.get("InstanceType"), str):
                places.append((("LoginNodes", "Pools", pi, "InstanceType"), pool["InstanceType"]))
        for path, itype in places:
            if catalog.find(itype) is None:
                yield self.finding(
                    Level.WARNING, path,
                    f"instance type {itype} is not in the pctk catalog: no GPU, EFA or price "
                    "facts for it",
                    "check the spelling; pctk catalog types are listed by `pctk config show`",
                )


FSX_DEFAULT_DEPLOYMENT = "SCRATCH_2"


def fsx_capacity_problem(capacity: int, deployment: str, storage_type: str,
                         throughput: Any) -> str | None:
    """The rule ParallelCluster's FsxStorageCapacityValidator applies, or None if it passes."""
    if deployment == "SCRATCH_1":
        if not (capacity in (1200, 2400) or capacity % 3600 == 0):
            return "SCRATCH_1 capacity is 1,200 GB, 2,400 GB or a multiple of 3,600 GB"
    elif deployment == "PERSISTENT_1" and storage_type == "HDD":
        if throughput == 12 and capacity % 6000:
            return "PERSISTENT_1 HDD at 12 MB/s/TiB needs a multiple of 6,000 GiB"
        if throughput == 40 and capacity % 1800:
            return "PERSISTENT_1 HDD at 40 MB/s/TiB needs a multiple of 1,800 GiB"
    elif deployment in ("SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2") and not (
        capacity == 1200 or capacity % 2400 == 0
    ):
        return f"{deployment} capacity is 1,200 GB or a multiple of 2,400 GB"
    return None


class FsxCapacityLint(Lint):
    code = "fsx-capacity"

    def _check(self, data: Any) -> Iterator[Finding]:
        for i, storage in view.shared_storage(data):
            settings = storage.get("FsxLustreSettings")
            if storage.get("StorageType") != "FsxLustre" or not isinstance(settings, dict):
                continue
            if settings.get("FileSystemId") or settings.get("BackupId"):
                continue
            path: YamlPath = ("SharedStorage", i, "FsxLustreSettings", "StorageCapacity")
            capacity = settings.get("StorageCapacity")
            if not isinstance(capacity, int) or isinstance(capacity, bool):
                yield self.finding(Level.ERROR, path,
                                   "a new FSx for Lustre file system needs StorageCapacity (GiB)",
                                   "set StorageCapacity, e.g. 1200 or a multiple of 2400")
                continue
            deployment = str(settings.get("DeploymentType", FSX_DEFAULT_DEPLOYMENT))
            problem = fsx_capacity_problem(capacity, deployment,
                                           str(settings.get("StorageType", "SSD")),
                                           settings.get("PerUnitStorageThroughput"))
            if problem:
                yield self.finding(Level.ERROR, path,
                                   f"StorageCapacity {capacity} is not valid: {problem}",
                                   "round StorageCapacity to a valid size")


class NameLint(Lint):
    code = "name"

    def _names(self, data: Any) -> Iterator[tuple[YamlPath, str, str]]:
        for q in view.queues(data):
            if isinstance(q.raw.get("Name"), str):
                yield (*q.path, "Name"), q.raw["Name"], "queue"
            for cr in q.compute_resources():
                if isinstance(cr.raw.get("Name"), str):
                    yield (*cr.path, "Name"), cr.raw["Name"], "compute resource"

    def _check(self, data: Any) -> Iterator[Finding]:
        for path, name, what in self._names(data):
            if not PC_NAME.match(name):
                yield self.finding(Level.ERROR, path,
                                   f"{what} name {name!r} is rejected by ParallelCluster",
                                   "start with a lowercase letter; use only a-z, 0-9 and '-'")
            elif len(name) > PC_NAME_MAX:
                yield self.finding(Level.ERROR, path,
                                   f"{what} name {name!r} is longer than {PC_NAME_MAX} characters",
                                   "shorten it (it becomes part of every node name)")
            elif name == "default":
                yield self.finding(Level.ERROR, path, f"{what} name 'default' is forbidden",
                                   "pick another name")


class DuplicateNameLint(Lint):
    code = "duplicate-name"

    def _dupes(self, named: list[tuple[YamlPath, Any]], what: str) -> Iterator[Finding]:
        counts = Counter(name for _, name in named)
        for path, name in named:
            if counts[name] > 1:
                yield self.finding(Level.ERROR, path,
                                   f"{what} name {name!r} is used {counts[name]} times",
                                   f"give every {what} a unique Name")

    def _check(self, data: Any) -> Iterator[Finding]:
        qs = list(view.queues(data))
        yield from self._dupes([((*q.path, "Name"), q.raw.get("Name")) for q in qs
                                if "Name" in q.raw], "queue")
        for q in qs:
            yield from self._dupes([((*cr.path, "Name"), cr.raw.get("Name"))
                                    for cr in q.compute_resources() if "Name" in cr.raw],
                                   f"compute resource (queue {q.name})")
        yield from self._dupes([(("SharedStorage", i, "Name"), s.get("Name"))
                                for i, s in view.shared_storage(data) if "Name" in s],
                               "shared storage")


class AccountingLint(Lint):
    code = "no-accounting"

    def _check(self, data: Any) -> Iterator[Finding]:
        settings = view.dig(data, "Scheduling", "SlurmSettings")
        if isinstance(settings, dict) and (settings.get("Database")
                                           or settings.get("ExternalSlurmdbd")):
            return
        if view.dig(data, "Scheduling") is None:
            return
        yield self.finding(
            Level.WARNING, ("Scheduling", "SlurmSettings"),
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

    def _check(self, data: Any) -> Iterator[Finding]:
        for path, value in self._walk(data, ()):
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


ALL_LINTS: tuple[Lint, ...] = (
    MinMaxCountLint(), EmptyQueueLint(), CapacityBlockLint(), PlacementGroupReservationLint(),
    EfaLint(), MultiNodeWithoutEfaLint(), EfaPlacementGroupLint(), UnknownInstanceTypeLint(),
    FsxCapacityLint(), NameLint(), DuplicateNameLint(), AccountingLint(), SecretLint(),
)


def run_lints(data: Any, lints: tuple[Lint, ...] = ALL_LINTS) -> list[Finding]:
    findings: list[Finding] = []
    for lint in lints:
        findings += lint.check(data)
    return findings
