"""The one parsed model of a ParallelCluster v3 cluster config: every reader goes through it.

:func:`parse_cluster` reads the parts of a config that pctk uses (queues, compute resources,
Slurm settings, head and login node types, shared storage) in one of two modes:

- strict (the twin, submission and the benchmarks that submit through it, observe): the first
  field it cannot read is a one-line :class:`~toolkit.errors.PctkError` that names the file
  and the YAML path;
- tolerant (``pctk config check``'s lints, ``pctk config show``, ``pctk bench storage``): each
  such field becomes a :class:`Problem` with its YAML path and takes its default, and the rest
  is read on, so a half-broken config still gets its lints.

Each default is defined once, below, with ParallelCluster's value, and values are read as the
official schema reads them (``MaxCount: "4"`` is 4, ``Enabled: "false"`` is false);
tests/config/test_model.py holds both against the schema. Validity is the official schema's
call (:mod:`toolkit.config.schema`): this model reads only what pctk acts on, so
``config check`` reports the schema's findings, not this model's problems.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.config.findings import YamlPath, format_path
from toolkit.config.yamlio import load_yaml
from toolkit.errors import PctkError

# ParallelCluster's defaults for what a config leaves out (pcluster.config.cluster_config)
DEFAULT_SCHEDULER = "slurm"
DEFAULT_MIN_COUNT = 0
DEFAULT_MAX_COUNT = 10
DEFAULT_CAPACITY_TYPE = "ONDEMAND"
DEFAULT_EFA = False
DEFAULT_DISABLE_SMT = False  # DisableSimultaneousMultithreading
DEFAULT_JOB_EXCLUSIVE = False  # JobExclusiveAllocation
DEFAULT_STATIC_NODE_PRIORITY = 1
DEFAULT_DYNAMIC_NODE_PRIORITY = 1000
DEFAULT_SCALEDOWN_IDLETIME = 10  # minutes
DEFAULT_QUEUE_UPDATE_STRATEGY = "COMPUTE_FLEET_STOP"
DEFAULT_MEMORY_BASED_SCHEDULING = False
# DevSettings/Timeouts/ComputeNodeBootstrapTimeout, seconds. NB: aws-parallelcluster 3.16
# defaults to 2100 (pcluster.constants.NODE_BOOTSTRAP_TIMEOUT); the twin's ResumeTimeout has
# been derived from 1800 so far (tests/golden).
DEFAULT_BOOTSTRAP_TIMEOUT = 1800

QUEUES: YamlPath = ("Scheduling", "SlurmQueues")
SLURM_SETTINGS: YamlPath = ("Scheduling", "SlurmSettings")


def dig(data: Any, *keys: str | int) -> Any:
    """``data[k1][k2]...`` of raw YAML data, None where a level is missing or of another shape."""
    cur = data
    for key in keys:
        if isinstance(key, int):
            if not isinstance(cur, list) or not 0 <= key < len(cur):
                return None
        elif not isinstance(cur, dict):
            return None
        cur = cur[key] if isinstance(key, int) else cur.get(key)
    return cur


@dataclass(frozen=True)
class Problem:
    """A field the model could not read (tolerant mode): where, what, how to fix it."""

    path: YamlPath
    message: str
    hint: str | None = None

    @property
    def path_str(self) -> str:
        return format_path(self.path)

    def text(self, source: str) -> str:
        return f"{source}: {self.path_str}: {self.message}" if self.path else \
            f"{source}: {self.message}"


@dataclass(frozen=True)
class ComputeResource:
    name: str
    instance_type: str  # the first of instance_types ("" where none could be read)
    min_count: int
    max_count: int
    efa: bool
    disable_hyperthreading: bool = DEFAULT_DISABLE_SMT
    index: int = 0  # in its queue's ComputeResources
    instance_types: tuple[str, ...] = ()  # InstanceType, or each Instances[].InstanceType
    static_node_priority: int = DEFAULT_STATIC_NODE_PRIORITY
    dynamic_node_priority: int = DEFAULT_DYNAMIC_NODE_PRIORITY
    custom_slurm_settings: tuple[tuple[str, str], ...] = ()  # {Key: Value}, one word each
    placement_group: bool | None = None  # Networking/PlacementGroup/Enabled, None: not written
    reservation_target: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.instance_types and self.instance_type:
            object.__setattr__(self, "instance_types", (self.instance_type,))

    def node_names(self, queue: str, limit: int | None = None) -> list[str]:
        """ParallelCluster node names: static ``<q>-st-<cr>-<i>``, then ``<q>-dy-<cr>-<i>``."""
        total = self.max_count if limit is None else min(self.max_count, limit)
        static = min(self.min_count, total)
        names = [f"{queue}-st-{self.name}-{i}" for i in range(1, static + 1)]
        names += [f"{queue}-dy-{self.name}-{i}" for i in range(1, total - static + 1)]
        return names


@dataclass(frozen=True)
class Queue:
    name: str
    compute_resources: tuple[ComputeResource, ...]
    capacity_type: str = DEFAULT_CAPACITY_TYPE
    index: int = 0  # in Scheduling/SlurmQueues
    job_exclusive_allocation: bool = DEFAULT_JOB_EXCLUSIVE
    custom_slurm_settings: tuple[tuple[str, str], ...] = ()  # {Key: Value}, one word each
    placement_group: bool | None = None  # Networking/PlacementGroup/Enabled, None: not written
    reservation_target: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def path(self) -> YamlPath:
        return (*QUEUES, self.index)

    def path_of(self, cr: ComputeResource) -> YamlPath:
        return (*self.path, "ComputeResources", cr.index)

    def label(self, cr: ComputeResource) -> str:
        return f"{self.name}/{cr.name}"

    def reservation_target_of(self, cr: ComputeResource) -> dict[str, Any] | None:
        """The compute resource's own target, else the queue's (ParallelCluster's precedence)."""
        return cr.reservation_target or self.reservation_target

    def placement_group_enabled(self, cr: ComputeResource) -> bool | None:
        """The compute resource's PlacementGroup/Enabled, else the queue's."""
        return self.placement_group if cr.placement_group is None else cr.placement_group


@dataclass(frozen=True)
class Storage:
    """One ``SharedStorage`` entry; ``raw`` holds its settings as written."""

    index: int
    mount_dir: str | None
    storage_type: str | None
    name: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class ClusterTopology:
    """A parsed cluster config (the name stays from when it held the topology alone)."""

    name: str
    source: str
    queues: tuple[Queue, ...]
    accounting: bool  # Scheduling/SlurmSettings/Database
    region: str | None = None
    # Scheduling/SlurmSettings/CustomSlurmSettings: cluster-level slurm.conf lines
    custom_slurm_settings: tuple[tuple[str, str], ...] = ()
    external_slurmdbd: bool = False  # Scheduling/SlurmSettings/ExternalSlurmdbd
    scheduling: bool = True  # a Scheduling section is written
    scaledown_idletime: int = DEFAULT_SCALEDOWN_IDLETIME
    enable_memory_based_scheduling: bool = DEFAULT_MEMORY_BASED_SCHEDULING
    queue_update_strategy: str = DEFAULT_QUEUE_UPDATE_STRATEGY
    bootstrap_timeout: int = DEFAULT_BOOTSTRAP_TIMEOUT
    head_node_instance_type: str | None = None
    login_node_instance_types: tuple[tuple[int, str], ...] = ()  # (pool index, type)
    shared_storage: tuple[Storage, ...] = ()
    problems: tuple[Problem, ...] = ()  # tolerant mode: what could not be read
    raw: Any = field(default=None, compare=False, repr=False)  # the data as parsed from YAML

    def queue(self, name: str) -> Queue:
        for q in self.queues:
            if q.name == name:
                return q
        known = ", ".join(q.name for q in self.queues) or "none"
        raise PctkError(f"unknown queue {name!r}", f"the queues in {self.source} are: {known}")

    def compute_resources(self) -> Iterator[tuple[Queue, ComputeResource]]:
        for q in self.queues:
            for cr in q.compute_resources:
                yield q, cr

    @property
    def any_accounting(self) -> bool:
        """sacct works: a Database, or an ExternalSlurmdbd."""
        return self.accounting or self.external_slurmdbd


# what the official schema reads as true and false (marshmallow's Boolean field, non-strict):
# `Enabled: "true"` or `Enabled: 1` are as good as `Enabled: true` to ParallelCluster
# (1 == True and 0 == False: the sets hold both)
TRUTHY = frozenset({True, "1", "t", "T", "true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES",
                    "on", "On", "ON"})
FALSY = frozenset({False, "0", "f", "F", "false", "False", "FALSE", "n", "N", "no", "No", "NO",
                   "off", "Off", "OFF"})

_SLURM_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_SETTING_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class _Reader:
    """Reads fields; a field it cannot read raises (strict) or becomes a Problem (tolerant)."""

    def __init__(self, source: str, tolerant: bool) -> None:
        self.source = source
        self.tolerant = tolerant
        self.problems: list[Problem] = []

    def problem(self, path: YamlPath, message: str, hint: str | None = None) -> None:
        found = Problem(path, message, hint)
        if not self.tolerant:
            raise PctkError(found.text(self.source), hint)
        self.problems.append(found)

    def int_(self, owner: Any, key: str, path: YamlPath, default: int, *,
             accept: Callable[[int], bool] = lambda n: True,
             expected: str = "an integer") -> int:
        """An integer as the official schema reads one (marshmallow's Integer, non-strict:
        ``"4"`` and ``4.0`` are 4, ``true`` is none), within ``accept``."""
        value = owner.get(key) if isinstance(owner, dict) else None
        if value is None:
            return default
        number = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            with suppress(ValueError, OverflowError):
                number = int(value)
        if number is None or not accept(number):
            self.problem((*path, key), f"expected {expected}, got {value!r}")
            return default
        return number

    def opt_bool(self, owner: Any, key: str, path: YamlPath) -> bool | None:
        value = owner.get(key) if isinstance(owner, dict) else None
        if value is None:
            return None
        if isinstance(value, (bool, int, str)):
            if value in TRUTHY:
                return True
            if value in FALSY:
                return False
        self.problem((*path, key), f"expected true or false, got {value!r}")
        return None

    def bool_(self, owner: Any, key: str, path: YamlPath, default: bool) -> bool:
        value = self.opt_bool(owner, key, path)
        return default if value is None else value

    def str_(self, owner: Any, key: str, path: YamlPath, default: Any) -> Any:
        value = owner.get(key) if isinstance(owner, dict) else None
        if value is None:
            return default
        if not isinstance(value, str):
            self.problem((*path, key), f"expected a string, got {value!r}")
            return default
        return value

    def mapping(self, owner: Any, key: str, path: YamlPath, example: str) -> dict[str, Any]:
        value = owner.get(key) if isinstance(owner, dict) else None
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem((*path, key), f"expected a mapping like {example}")
            return {}
        return value


def parse_cluster(data: Any, source: str = "<config>", name: str | None = None, *,
                  tolerant: bool = False) -> ClusterTopology:
    """The model of a cluster config's raw YAML data; see the module's doc for the modes."""
    r = _Reader(source, tolerant)
    topo_name = name or Path(source).stem
    if not isinstance(data, dict):
        r.problem((), "not a ParallelCluster config (expected a mapping at the top)")
        return ClusterTopology(topo_name, source, (), False, problems=tuple(r.problems),
                               scheduling=False, raw=data)
    sched = data.get("Scheduling")
    if not isinstance(sched, dict) or sched.get("Scheduler", DEFAULT_SCHEDULER) != "slurm":
        r.problem(("Scheduling", "Scheduler"), "must be slurm",
                  "pctk works with Slurm clusters only")
    queues = _queues(r, sched)
    ss = r.mapping(sched, "SlurmSettings", ("Scheduling",), "{ScaledownIdletime: 10}")
    idle = r.int_(ss, "ScaledownIdletime", SLURM_SETTINGS, DEFAULT_SCALEDOWN_IDLETIME,
                  accept=lambda n: n >= 1 or n == -1, expected="minutes >= 1 or -1")
    boot = r.int_(dig(data, "DevSettings", "Timeouts"), "ComputeNodeBootstrapTimeout",
                  ("DevSettings", "Timeouts"), DEFAULT_BOOTSTRAP_TIMEOUT,
                  accept=lambda n: n > 0, expected="seconds > 0")
    head = dig(data, "HeadNode", "InstanceType")
    pools = dig(data, "LoginNodes", "Pools")
    return ClusterTopology(
        name=topo_name,
        source=source,
        queues=queues,
        accounting=bool(ss.get("Database")),
        region=r.str_(data, "Region", (), None),
        custom_slurm_settings=_cluster_custom(r, ss),
        external_slurmdbd=bool(ss.get("ExternalSlurmdbd")),
        scheduling=sched is not None,
        scaledown_idletime=idle,
        enable_memory_based_scheduling=r.bool_(ss, "EnableMemoryBasedScheduling", SLURM_SETTINGS,
                                               DEFAULT_MEMORY_BASED_SCHEDULING),
        queue_update_strategy=r.str_(ss, "QueueUpdateStrategy", SLURM_SETTINGS,
                                     DEFAULT_QUEUE_UPDATE_STRATEGY),
        bootstrap_timeout=boot,
        head_node_instance_type=head if isinstance(head, str) else None,
        login_node_instance_types=tuple(
            (pi, p["InstanceType"]) for pi, p in enumerate(pools if isinstance(pools, list) else [])
            if isinstance(p, dict) and isinstance(p.get("InstanceType"), str)),
        shared_storage=_storage(r, data),
        problems=tuple(r.problems),
        raw=data,
    )


def topology_from_dict(data: Any, source: str, name: str | None = None) -> ClusterTopology:
    """The strict model (a one-line PctkError at the first field it cannot read)."""
    return parse_cluster(data, source, name)


def load_topology(path: str | Path, *, tolerant: bool = False) -> ClusterTopology:
    """Read a ParallelCluster v3 YAML file into the model (strict unless ``tolerant``)."""
    return parse_cluster(load_yaml(path), str(path), tolerant=tolerant)


def _queues(r: _Reader, sched: Any) -> tuple[Queue, ...]:
    raw_queues = sched.get("SlurmQueues") if isinstance(sched, dict) else None
    if not isinstance(raw_queues, list) or not raw_queues:
        r.problem(QUEUES, "missing or empty")
        return ()
    queues: list[Queue] = []
    for qi, rq in enumerate(raw_queues):
        qpath: YamlPath = (*QUEUES, qi)
        if not isinstance(rq, dict):
            r.problem(qpath, "a queue needs a Name")
            continue
        qname = rq.get("Name")
        if not isinstance(qname, str):
            r.problem(qpath, "a queue needs a Name")
            qname = f"#{qi}"
        elif not _SLURM_NAME.fullmatch(qname):
            r.problem((*qpath, "Name"), f"{qname!r} is not a valid queue name",
                      "use lowercase letters, digits and '-', starting with a letter")
        crs: list[ComputeResource] = []
        raw_crs = rq.get("ComputeResources")
        if not isinstance(raw_crs, list) or not raw_crs:
            r.problem((*qpath, "ComputeResources"), "missing or empty")
            raw_crs = []
        for ci, rc in enumerate(raw_crs):
            cr = _compute_resource(r, rc, (*qpath, "ComputeResources", ci), ci)
            if cr is not None:
                crs.append(cr)
        queues.append(Queue(
            name=qname,
            compute_resources=tuple(crs),
            capacity_type=r.str_(rq, "CapacityType", qpath, DEFAULT_CAPACITY_TYPE),
            index=qi,
            job_exclusive_allocation=r.bool_(rq, "JobExclusiveAllocation", qpath,
                                             DEFAULT_JOB_EXCLUSIVE),
            custom_slurm_settings=_resource_custom(r, rq, qpath),
            placement_group=_placement_group(r, rq, qpath),
            reservation_target=_reservation_target(rq),
        ))
    return tuple(queues)


def _compute_resource(r: _Reader, rc: Any, cpath: YamlPath, ci: int) -> ComputeResource | None:
    if not isinstance(rc, dict):
        r.problem(cpath, "a compute resource needs a Name")
        return None
    name = rc.get("Name")
    if not isinstance(name, str):
        r.problem(cpath, "a compute resource needs a Name")
        name = f"#{ci}"
    types = _instance_types(r, rc, cpath)
    if not types:
        r.problem(cpath, "needs InstanceType (or Instances[0].InstanceType)")
    efa = r.mapping(rc, "Efa", cpath, "{Enabled: true}")
    return ComputeResource(
        name=name,
        instance_type=types[0] if types else "",
        min_count=r.int_(rc, "MinCount", cpath, DEFAULT_MIN_COUNT),
        max_count=r.int_(rc, "MaxCount", cpath, DEFAULT_MAX_COUNT),
        efa=r.bool_(efa, "Enabled", (*cpath, "Efa"), DEFAULT_EFA),
        disable_hyperthreading=r.bool_(rc, "DisableSimultaneousMultithreading", cpath,
                                       DEFAULT_DISABLE_SMT),
        index=ci,
        instance_types=types,
        static_node_priority=r.int_(rc, "StaticNodePriority", cpath,
                                    DEFAULT_STATIC_NODE_PRIORITY, accept=lambda n: n >= 0,
                                    expected="a whole number >= 0"),
        dynamic_node_priority=r.int_(rc, "DynamicNodePriority", cpath,
                                     DEFAULT_DYNAMIC_NODE_PRIORITY, accept=lambda n: n >= 0,
                                     expected="a whole number >= 0"),
        custom_slurm_settings=_resource_custom(r, rc, cpath),
        placement_group=_placement_group(r, rc, cpath),
        reservation_target=_reservation_target(rc),
    )


def _instance_types(r: _Reader, rc: dict[str, Any], cpath: YamlPath) -> tuple[str, ...]:
    single = rc.get("InstanceType")
    if isinstance(single, str):
        return (single,)
    if single is not None:
        r.problem((*cpath, "InstanceType"), f"expected a string, got {single!r}")
    items = rc.get("Instances")
    if not isinstance(items, list):
        return ()
    types: list[str] = []
    for i, item in enumerate(items):
        itype = item.get("InstanceType") if isinstance(item, dict) else None
        if isinstance(itype, str):
            types.append(itype)
        else:
            r.problem((*cpath, "Instances", i), "needs InstanceType")
    return tuple(types)


def _placement_group(r: _Reader, owner: dict[str, Any], path: YamlPath) -> bool | None:
    pg = dig(owner, "Networking", "PlacementGroup")
    return r.opt_bool(pg, "Enabled", (*path, "Networking", "PlacementGroup"))


def _reservation_target(owner: dict[str, Any]) -> dict[str, Any] | None:
    target = owner.get("CapacityReservationTarget")
    if isinstance(target, dict) and (
        target.get("CapacityReservationId") or target.get("CapacityReservationResourceGroupArn")
    ):
        return target
    return None


def _resource_custom(r: _Reader, owner: dict[str, Any],
                     path: YamlPath) -> tuple[tuple[str, str], ...]:
    """``CustomSlurmSettings: {Key: Value}`` of a queue or compute resource, one word each:
    nothing but ``Key=Value`` can come out of an entry (a value with a space or '=' would add
    another attribute to its partition or node line)."""
    raw = owner.get("CustomSlurmSettings")
    if raw is None:
        return ()
    where: YamlPath = (*path, "CustomSlurmSettings")
    if not isinstance(raw, dict):
        r.problem(where, "expected a mapping like {Key: Value}")
        return ()
    out: list[tuple[str, str]] = []
    for key, value in raw.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not isinstance(key, str) or not key.isalnum() or not key[:1].isalpha():
            r.problem(where, f"{key!r} is not a Slurm parameter name")
        elif isinstance(value, (dict, list)) or not text or any(c.isspace() for c in text):
            r.problem((*where, key), "the value must be one word (no spaces or newlines)")
        else:
            out.append((key, text))
    return tuple(out)


def _cluster_custom(r: _Reader, slurm_settings: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``CustomSlurmSettings: [{MaxArraySize: 2001}, ...]`` as (key, value) pairs, checked so
    that nothing but one ``Key=Value`` line can come out of each entry."""
    raw = slurm_settings.get("CustomSlurmSettings")
    if raw is None:
        return ()
    where: YamlPath = (*SLURM_SETTINGS, "CustomSlurmSettings")
    if not isinstance(raw, list):
        r.problem(where, "expected a list of single-key mappings")
        return ()
    out: list[tuple[str, str]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            r.problem((*where, i), "expected a mapping like {MaxArraySize: 2001}")
            continue
        for key, value in entry.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if not isinstance(key, str) or not _SETTING_KEY.fullmatch(key):
                r.problem((*where, i), f"{key!r} is not a slurm.conf parameter name")
            elif isinstance(value, (dict, list)) or "\n" in text or "\r" in text or not text:
                r.problem((*where, i, key), "the value must be one non-empty line")
            else:
                out.append((key, text))
    return tuple(out)


def _storage(r: _Reader, data: dict[str, Any]) -> tuple[Storage, ...]:
    raw = data.get("SharedStorage")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.problem(("SharedStorage",), "expected a list of storage entries")
        return ()
    out: list[Storage] = []
    for i, entry in enumerate(raw):
        path: YamlPath = ("SharedStorage", i)
        if not isinstance(entry, dict):
            r.problem(path, "expected a mapping (MountDir, Name, StorageType...)")
            continue
        out.append(Storage(i, r.str_(entry, "MountDir", path, None),
                           r.str_(entry, "StorageType", path, None),
                           r.str_(entry, "Name", path, None), entry))
    return tuple(out)
