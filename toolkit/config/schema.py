"""The official ParallelCluster schema, run offline: no credentials, no network, no AWS call.

``ClusterSchema.load`` builds a ``SlurmClusterConfig`` whose constructor reaches for the AWS
API (e.g. ``describe_capacity_reservations``); ``AWSApi.instance`` is patched to a stub for
the duration of the load so nothing leaves this process.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from unittest import mock

from toolkit.config.findings import Finding, Level, YamlPath

SCHEMA_CLUSTER_NAME = "pctk-check"


@cache
def parallelcluster_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aws-parallelcluster")
    except PackageNotFoundError:
        return "unknown"


@contextmanager
def offline_aws(region: str) -> Iterator[None]:
    """Patch the AWS API object out and hide credentials while the schema loads."""
    hidden = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    env = {"AWS_DEFAULT_REGION": region, "AWS_EC2_METADATA_DISABLED": "true", **hidden}
    with mock.patch.dict(os.environ, env), mock.patch(
        "pcluster.aws.aws_api.AWSApi.instance", return_value=mock.MagicMock(name="offline-AWSApi")
    ):
        yield


def _messages_to_findings(messages: Any, path: YamlPath) -> Iterator[tuple[YamlPath, str]]:
    if isinstance(messages, dict):
        for key, sub in messages.items():
            child = path if key == "_schema" else (*path, key if isinstance(key, int) else str(key))
            yield from _messages_to_findings(sub, child)
    elif isinstance(messages, list):
        for item in messages:
            if isinstance(item, (dict, list)):
                yield from _messages_to_findings(item, path)
            else:
                yield path, str(item)
    else:
        yield path, str(messages)


def _hint_for(message: str) -> str | None:
    if message == "Unknown field.":
        return "remove the key or fix its spelling (keys are CamelCase, e.g. MinCount)"
    if message == "Missing data for required field.":
        return "add the required key"
    if message.startswith("Must be one of"):
        return "use one of the listed values"
    if "pattern" in message:
        return "check the ID format (e.g. subnet-0123456789abcdef0)"
    return None


def _queues_without_compute_resources(data: Any) -> list[int]:
    sched = data.get("Scheduling") if isinstance(data, dict) else None
    queues = sched.get("SlurmQueues") if isinstance(sched, dict) else None
    if not isinstance(queues, list):
        return []
    return [i for i, q in enumerate(queues) if isinstance(q, dict) and "ComputeResources" not in q]


def check_schema(data: Any) -> list[Finding]:
    """Findings from the official schema of the installed aws-parallelcluster package."""
    from marshmallow import ValidationError
    from pcluster.schemas.cluster_schema import ClusterSchema

    findings: list[Finding] = []
    load_data = data
    missing_crs = _queues_without_compute_resources(data)
    if missing_crs:
        # the schema raises TypeError deep inside for these; report them and let it check the rest
        load_data = copy.deepcopy(data)
        for qi in missing_crs:
            path: YamlPath = ("Scheduling", "SlurmQueues", qi, "ComputeResources")
            findings.append(Finding(
                Level.ERROR, "schema", "missing-compute-resources", path,
                "Missing data for required field: a queue needs ComputeResources",
                "add ComputeResources with at least one Name/InstanceType/MinCount/MaxCount",
            ))
            load_data["Scheduling"]["SlurmQueues"][qi]["ComputeResources"] = []
    region = data.get("Region") if isinstance(data, dict) else None
    region = region if isinstance(region, str) and region and "${" not in region else "us-east-1"
    try:
        with offline_aws(region):
            ClusterSchema(cluster_name=SCHEMA_CLUSTER_NAME).load(load_data)
    except ValidationError as exc:
        for path, message in _messages_to_findings(exc.messages, ()):
            findings.append(
                Finding(Level.ERROR, "schema", "schema", path, message, _hint_for(message))
            )
    except Exception as exc:  # the schema's own code can crash on malformed input
        findings.append(Finding(
            Level.ERROR, "schema", "schema-crash", (),
            "the ParallelCluster schema could not process this input "
            f"({type(exc).__name__}: {exc})",
            "check that every section has the shape the ParallelCluster docs show",
        ))
    return findings
