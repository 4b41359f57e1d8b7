"""The official ParallelCluster schema, run offline: no credentials, no network, no AWS call.

``ClusterSchema.load`` builds a ``SlurmClusterConfig`` whose constructor reaches for the AWS
API (e.g. ``describe_capacity_reservations``); ``AWSApi.instance`` is patched to a recording
stub for the duration of the session, and name resolution and socket connects are refused, so
nothing leaves this process. :mod:`toolkit.config.upstream` runs the validators in the same
session and uses the stub's record to tell which of them needed AWS.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from unittest import mock

from toolkit.config.findings import Finding, Level, YamlPath

SCHEMA_CLUSTER_NAME = "pctk-check"


@cache
def parallelcluster_version() -> str:
    try:
        return version("aws-parallelcluster")
    except PackageNotFoundError:
        return "unknown"


def _refuse(what: str, log: list[str]) -> Any:
    """A stand-in for a network or boto3 entry point: records the attempt and raises."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        target = args[1] if what == "connect" and len(args) > 1 else args[0] if args else "?"
        log.append(f"{what} {target}")
        raise OSError(f"offline check: {what} {target} refused")

    return refuse


class OfflineSession:
    """The AWS API stub (a MagicMock: it records every call), refused network attempts and an
    event loop for the validators that are coroutines."""

    def __init__(self) -> None:
        self.aws = mock.MagicMock(name="aws")
        # unpacked into two values while validators register: answer with two unknowns
        api = "ec2.get_instance_type_and_reservation_type_from_capacity_reservation"
        self.aws.ec2.get_instance_type_and_reservation_type_from_capacity_reservation\
            .return_value = (mock.MagicMock(name=api), mock.MagicMock(name=api))
        self.refused: list[str] = []  # network and direct boto3 attempts, in order
        self.loop = asyncio.new_event_loop()


@contextmanager
def offline_aws(region: str) -> Iterator[OfflineSession]:
    """Patch the AWS API object out, hide credentials, refuse boto3 clients (some validators
    build their own, e.g. ``IamClient()``) and the network meanwhile."""
    import boto3

    hidden = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    env = {"AWS_DEFAULT_REGION": region, "AWS_EC2_METADATA_DISABLED": "true", **hidden}
    session = OfflineSession()
    refused = session.refused
    try:
        with _region_answered(region), _quiet("pcluster"), mock.patch.dict(os.environ, env), \
                mock.patch("pcluster.aws.aws_api.AWSApi.instance", return_value=session.aws), \
                mock.patch.object(boto3, "client", _refuse("boto3 client", refused)), \
                mock.patch.object(boto3, "resource", _refuse("boto3 resource", refused)), \
                mock.patch.object(socket, "getaddrinfo", _refuse("resolve", refused)), \
                mock.patch.object(socket.socket, "connect", _refuse("connect", refused)):
            yield session
    finally:
        session.loop.close()


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """pcluster logs each refused AWS call at ERROR; the findings say what matters."""
    logger = logging.getLogger(logger_name)
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


@contextmanager
def _region_answered(region: str) -> Iterator[None]:
    """pcluster's ``get_region()`` builds a boto3 session per call (~0.15 s each) only to read
    the region it was given; answer with that region in every module that imported it."""
    import pcluster.schemas.cluster_schema  # noqa: F401  (imports the modules patched below)
    from pcluster.aws import common

    original = common.get_region
    with ExitStack() as stack:
        for name, module in list(sys.modules.items()):
            if name.startswith("pcluster") and getattr(module, "get_region", None) is original:
                stack.enter_context(mock.patch.object(module, "get_region", lambda: region))
        yield


def region_of(data: Any) -> str:
    region = data.get("Region") if isinstance(data, dict) else None
    return region if isinstance(region, str) and region and "${" not in region else "us-east-1"


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
    with offline_aws(region_of(data)):
        return load_official(data)[1]


def load_official(data: Any) -> tuple[Any, list[Finding]]:
    """``(cluster config object or None, schema findings)``; call inside :func:`offline_aws`."""
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
    config = None
    try:
        config = ClusterSchema(cluster_name=SCHEMA_CLUSTER_NAME).load(load_data)
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
    return config, findings
