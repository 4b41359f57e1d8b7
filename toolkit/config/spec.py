"""The cluster spec: a small typed description that ``pctk config new`` renders to a full
ParallelCluster v3 config. Spec YAML files use the snake_case field names below.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from toolkit import catalog
from toolkit.config.typos import unknown_type_hint
from toolkit.config.yamlio import load_yaml
from toolkit.errors import PctkError

CAPACITY_TYPES = ("ONDEMAND", "SPOT", "CAPACITY_BLOCK")
T = TypeVar("T")


@dataclass(frozen=True)
class ScriptSpec:
    script: str  # s3:// or https:// URL
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class CustomActionsSpec:
    on_node_start: ScriptSpec | None = None
    on_node_configured: ScriptSpec | None = None


@dataclass(frozen=True)
class ComputeResourceSpec:
    name: str
    instance_type: str
    min_count: int = 0
    max_count: int = 1
    capacity_reservation_id: str | None = None
    efa: bool | None = None  # None: on exactly when the catalog says the type supports EFA
    disable_hyperthreading: bool = False


@dataclass(frozen=True)
class QueueSpec:
    name: str
    subnet_ids: tuple[str, ...]
    compute_resources: tuple[ComputeResourceSpec, ...]
    capacity_type: str = "ONDEMAND"
    placement_group: bool | None = None  # None: derived from EFA and reservations
    custom_actions: CustomActionsSpec | None = None


@dataclass(frozen=True)
class HeadNodeSpec:
    instance_type: str
    subnet_id: str
    key_name: str | None = None
    ssm: bool = False  # log in with SSM Session Manager instead of an SSH key
    root_volume_gib: int | None = None
    custom_actions: CustomActionsSpec | None = None


@dataclass(frozen=True)
class FsxLustreSpec:
    mount_dir: str = "/fsx"
    file_system_id: str | None = None  # an existing file system; otherwise a new one
    capacity_gib: int = 1200
    deployment_type: str = "PERSISTENT_2"
    throughput_mb_s_per_tib: int | None = 250
    data_compression: bool = True


@dataclass(frozen=True)
class HomeSpec:
    kind: str  # "efs" | "openzfs"
    file_system_id: str | None = None  # EFS: existing file system; omitted: a new one
    volume_id: str | None = None  # OpenZFS: existing volume (required)


@dataclass(frozen=True)
class StorageSpec:
    fsx_lustre: FsxLustreSpec | None = None
    home: HomeSpec | None = None


@dataclass(frozen=True)
class DatabaseSpec:
    uri: str
    user_name: str
    password_secret_arn: str
    database_name: str | None = None


@dataclass(frozen=True)
class MonitoringSpec:
    detailed: bool = False
    logs: bool = True
    log_retention_days: int = 14
    dashboard: bool = True


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    region: str
    head_node: HeadNodeSpec
    queues: tuple[QueueSpec, ...]
    os: str = "ubuntu2204"
    description: str = ""
    storage: StorageSpec = field(default_factory=StorageSpec)
    database: DatabaseSpec | None = None
    monitoring: MonitoringSpec = field(default_factory=MonitoringSpec)
    imdsv2: bool = True
    tags: dict[str, str] = field(default_factory=dict)


def _convert(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(value, inner, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise PctkError(f"{where}: expected a list, got {value!r}")
        return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise PctkError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return spec_from_dict(hint, value, where)  # type: ignore[arg-type]
    if hint is bool:
        if not isinstance(value, bool):
            raise PctkError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PctkError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise PctkError(f"{where}: expected a string, got {value!r}")
        return str(value)
    raise PctkError(f"{where}: unsupported spec type {hint!r}")  # pragma: no cover


def spec_from_dict(cls: type[T], data: Any, where: str = "spec") -> T:
    """Build a spec dataclass from a mapping; unknown or missing keys are one-line errors."""
    if not isinstance(data, dict):
        raise PctkError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(map(str, data)) - set(fields))
    if unknown:
        raise PctkError(f"{where}: unknown key(s) {', '.join(unknown)}",
                        f"known keys: {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise PctkError(f"{where}: missing required key {name!r}")
    obj = cls(**kwargs)
    _validate(obj, where)
    return obj


def _validate(obj: Any, where: str) -> None:
    if isinstance(obj, QueueSpec):
        if obj.capacity_type not in CAPACITY_TYPES:
            raise PctkError(f"{where}.capacity_type: {obj.capacity_type!r} is not one of "
                            f"{', '.join(CAPACITY_TYPES)}")
        if not obj.compute_resources:
            raise PctkError(f"{where}.compute_resources: a queue needs at least one")
    if isinstance(obj, HomeSpec):
        if obj.kind not in ("efs", "openzfs"):
            raise PctkError(f"{where}.kind: {obj.kind!r} is not efs or openzfs")
        if obj.kind == "openzfs" and not obj.volume_id:
            raise PctkError(f"{where}.volume_id: OpenZFS /home needs an existing volume id",
                            "ParallelCluster mounts existing OpenZFS volumes only")
    if isinstance(obj, HeadNodeSpec) and not obj.key_name and not obj.ssm:
        raise PctkError(f"{where}: no way to log in", "set key_name or ssm: true")


def unknown_instance_types(spec: ClusterSpec) -> list[tuple[str, str]]:
    """``(where, instance type)`` for compute resources whose type the catalog lacks."""
    return [
        (f"queues[{qi}].compute_resources[{ci}].instance_type", cr.instance_type)
        for qi, q in enumerate(spec.queues)
        for ci, cr in enumerate(q.compute_resources)
        if catalog.find(cr.instance_type) is None
    ]


def load_spec(path: str | Path, allow_unknown_types: bool = False) -> ClusterSpec:
    """Load a spec. A compute instance type the catalog lacks is rendered when it is spelled
    like an EC2 type (``c8i.4xlarge``: its facts are unknown, and `config check` warns so);
    a misspelled one (``p5.48xlarg``) is refused with the nearest catalog types unless
    ``allow_unknown_types``: EFA, placement group and GPU health check settings are derived
    from the catalog, and a typo would silently drop them."""
    spec = spec_from_dict(ClusterSpec, load_yaml(path), str(path))
    malformed = [(w, t) for w, t in unknown_instance_types(spec) if not catalog.well_formed(t)]
    if malformed and not allow_unknown_types:
        where, itype = malformed[0]
        more = f" (and {len(malformed) - 1} more)" if len(malformed) > 1 else ""
        raise PctkError(
            f"{path}: {where}: {itype!r} is not an EC2 instance type name{more}",
            f"{unknown_type_hint(itype)} (to render it anyway: pass --allow-unknown-types "
            "and set efa explicitly)",
        )
    return spec
