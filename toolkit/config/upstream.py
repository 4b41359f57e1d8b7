"""aws-parallelcluster's own create-time validators, run offline.

The config is loaded with ``ClusterSchema(cluster_name=...).load(...)`` (see
:mod:`toolkit.config.schema`) and its resource tree is validated the way
``Resource.validate()`` does it (nested resources first, then the resource's own
``_register_validators``), except that each validator runs on its own so that its use of AWS
can be seen:

- the AWS API object is a recording stub; a validator that calls it, or whose inputs came from
  it (``_register_validators`` computes some inputs from AWS calls), is *skipped*: its verdict
  would be about stub data, not about the config;
- the network is refused while validators run (``UrlValidator`` fetches script URLs); a
  validator that tried it is skipped too;
- every other validator's findings are kept, at the YAML path of the resource that registered
  it (refined by name where the validator's arguments name a queue, compute resource or
  storage).

Skipped validators are listed by name with the AWS call that made them unusable offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from toolkit.config.findings import Finding, Level, YamlPath, format_path
from toolkit.config.schema import OfflineSession, load_official, offline_aws, region_of

LEVELS = {"ERROR": Level.ERROR, "WARNING": Level.WARNING, "INFO": Level.INFO}
# YAML keys that are not the PascalCase of the model attribute
KEY_ALIASES = {"queues": "SlurmQueues", "settings": "SlurmSettings"}
# validator arguments that name the resource a finding is about, and that resource's YAML key
NAMING_ARGS = {"name": "Name", "mount_dir": "MountDir", "queue_name": "Name"}
# validators registered by the cluster as a whole whose findings are about one section
SECTION_OF = {
    "NumberOfStorageValidator": ("SharedStorage",),
    "DuplicateMountDirValidator": ("SharedStorage",),
    "OverlappingMountDirValidator": ("SharedStorage",),
    "ManagedFsxMultiAzValidator": ("SharedStorage",),
    "IntelHpcOsValidator": ("AdditionalPackages", "IntelSoftware"),
}
# DuplicateNameValidator's resource_name -> the list it is about (below the registering path)
DUPLICATE_LISTS = {"Queue": ("SlurmQueues",), "Compute resource": ("ComputeResources",),
                   "Shared Storage": ("SharedStorage",), "Shared Storage IDs": ("SharedStorage",)}


@dataclass(frozen=True)
class Skipped:
    validator: str
    reason: str
    path: YamlPath = ()

    def to_json(self) -> dict[str, str]:
        return {"validator": self.validator, "reason": self.reason,
                "path": format_path(self.path)}


@dataclass
class UpstreamReport:
    """Findings from the schema and the validators, and which validators ran or were skipped."""

    findings: list[Finding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    not_run: str | None = None  # why no validator ran (the schema rejected the config)

    def to_json(self) -> dict[str, Any]:
        return {"ran": self.ran, "skipped": [s.to_json() for s in self.skipped],
                "not_run": self.not_run}


def check_official(data: Any) -> UpstreamReport:
    """Schema findings, then (if the schema accepted the config) the validators' findings."""
    with offline_aws(region_of(data)) as session:
        config, schema_findings = load_official(data)
        if config is None or schema_findings:
            return UpstreamReport(schema_findings,
                                  not_run="the schema rejected the config; fix that first")
        try:
            return _validate(config, data, session)
        except Exception as exc:  # a pcluster model shape this walk does not know
            return UpstreamReport(not_run=f"validation failed offline ({type(exc).__name__}: "
                                          f"{exc}); pcluster create-cluster still runs it")


def _validate(config: Any, data: Any, session: OfflineSession) -> UpstreamReport:
    from pcluster.validators.common import ValidatorContext

    report = UpstreamReport()
    _load_region_list()
    paths = resource_paths(config, data)
    ran: set[str] = set()
    skipped: dict[tuple[str, str], Skipped] = {}
    for resource in _post_order(config):
        path = paths.get(id(resource), ())
        resource._validators.clear()
        calls_before, refused_before = len(session.aws.mock_calls), len(session.refused)
        try:
            resource._register_validators(ValidatorContext())
        except Exception as exc:  # registration computes some inputs from AWS answers
            # the validators registered before the failure still run below
            name = f"{type(resource).__name__} validators"
            why = (_reason(session, calls_before, refused_before)
                   or f"registration failed offline ({type(exc).__name__}: {exc})")
            skipped.setdefault((name, why), Skipped(name, why, path))
        for cls, args in list(resource._validators):
            results, reason = _run_one(cls, args, session)
            if reason is not None:
                skipped.setdefault((cls.__name__, reason), Skipped(cls.__name__, reason, path))
                continue
            ran.add(cls.__name__)
            where = _locate(cls.__name__, args, resource, path, paths)
            report.findings += [
                Finding(LEVELS.get(str(r.level), Level.ERROR), "validator", r.validator_type,
                        where, str(r.message))
                for r in results
            ]
        resource._validators.clear()
    report.ran = sorted(ran)
    report.skipped = sorted(skipped.values(), key=lambda s: (s.validator, s.reason))
    report.findings = _dedupe(report.findings)
    return report


def _load_region_list() -> None:
    """RegionValidator reads a region list fetched once per process, falling back to the copy
    packaged with pcluster when the fetch fails. Fetch it (refused: the packaged copy) before
    the validators run, so RegionValidator runs on the same data in every check of a process
    instead of being skipped in the first one only."""
    from pcluster.utils import retrieve_supported_regions

    with suppress(Exception):  # without the list RegionValidator is skipped, as before
        retrieve_supported_regions()


def _post_order(root: Any) -> Iterator[Any]:
    """Resources in ``Resource.validate()`` order: nested ones first, then the resource."""
    seen: set[int] = set()

    def visit(res: Any) -> Iterator[Any]:
        if id(res) in seen:
            return
        seen.add(id(res))
        for child in res._nested_resources():
            yield from visit(child)
        yield res

    yield from visit(root)


def _run_one(cls: type, args: dict[str, Any],
             session: OfflineSession) -> tuple[list[Any], str | None]:
    """The validator's results, or a reason to skip it (it needed AWS or the network)."""
    from pcluster.validators.common import AsyncValidator

    aws_inputs = _aws_values(args)
    if aws_inputs:
        return [], f"needs AWS data ({aws_inputs[0]}, an input)"
    calls_before = len(session.aws.mock_calls)
    refused_before = len(session.refused)
    validator = cls()
    error: BaseException | None = None
    results: list[Any] = []
    try:
        if isinstance(validator, AsyncValidator):
            results = session.loop.run_until_complete(validator.execute_async(**args))
        else:
            results = validator.execute(**args)
    except Exception as exc:
        error = exc
    reason = _reason(session, calls_before, refused_before)
    if reason is None and error is not None:
        reason = f"failed offline ({type(error).__name__}: {error})"
    return results, reason


def _reason(session: OfflineSession, calls_before: int, refused_before: int) -> str | None:
    calls = session.aws.mock_calls[calls_before:]
    if calls:
        return f"needs AWS data ({_api_name(calls[0][0])})"
    if len(session.refused) > refused_before:
        attempt = session.refused[refused_before]
        if attempt.startswith("boto3"):
            return f"needs AWS data ({attempt})"
        return f"needs network access ({attempt})"
    return None


def _api_name(dotted: str) -> str:
    """``aws.ec2.describe_image().volume_size`` -> ``ec2.describe_image``."""
    name = dotted.removeprefix("aws.").split("(")[0]
    return name or "AWS API"


def _aws_values(value: Any, depth: int = 0) -> list[str]:
    """Names of stub values among a validator's arguments (lists and dicts searched, not models)."""
    if isinstance(value, mock.NonCallableMock):
        return [_api_name(value._extract_mock_name())]
    if depth > 3:
        return []
    if isinstance(value, dict):
        items: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        return []
    return [name for item in items for name in _aws_values(item, depth + 1)]


def _pascal(attr: str) -> str:
    return KEY_ALIASES.get(attr) or "".join(part.title() for part in attr.split("_"))


def resource_paths(config: Any, data: Any) -> dict[int, YamlPath]:
    """``id(resource)`` -> the YAML path it was loaded from (its nearest written ancestor if
    the resource was implied by defaults)."""
    from pcluster.config.common import Resource

    paths: dict[int, YamlPath] = {}

    def visit(res: Any, path: YamlPath, raw: Any) -> None:
        if id(res) in paths:
            return
        paths[id(res)] = path
        for attr, value in vars(res).items():
            if attr.startswith("_"):
                continue
            key = _pascal(attr)
            sub = raw.get(key) if isinstance(raw, dict) else None
            child_path: YamlPath = (*path, key) if sub is not None else path
            if isinstance(value, Resource):
                visit(value, child_path, sub)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, Resource):
                        listed = sub[i] if isinstance(sub, list) and i < len(sub) else None
                        visit(item, (*child_path, i) if listed is not None else child_path,
                              listed)

    visit(config, (), data)
    return paths


def _locate(validator: str, args: dict[str, Any], resource: Any, path: YamlPath,
            paths: dict[int, YamlPath]) -> YamlPath:
    """A finer path than the registering resource's, where the arguments say which part."""
    if validator in SECTION_OF:
        return SECTION_OF[validator]
    if validator == "DuplicateNameValidator":
        listed = DUPLICATE_LISTS.get(str(args.get("resource_name")))
        if listed == ("SharedStorage",):
            return listed
        return (*path, *listed) if listed else path
    if validator == "ComputeResourceSizeValidator":
        for cr in getattr(resource, "compute_resources", None) or []:
            if (cr.min_count, cr.max_count) == (args.get("min_count"), args.get("max_count")):
                return (*paths.get(id(cr), path), "MinCount")
    for arg, key in NAMING_ARGS.items():
        wanted = args.get(arg)
        if not isinstance(wanted, str):
            continue
        attr = "mount_dir" if arg == "mount_dir" else "name"
        for res in _post_order(resource):
            if getattr(res, attr, None) == wanted and id(res) in paths:
                found = paths[id(res)]
                return found if arg == "queue_name" else (*found, key)
    return path


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per message: the same validator registered at two levels reports twice."""
    best: dict[tuple[Level, str, str], Finding] = {}
    for f in findings:
        key = (f.level, f.code, f.message)
        if key not in best or len(f.path) > len(best[key].path):
            best[key] = f
    return [f for f in findings if best[(f.level, f.code, f.message)] is f]
