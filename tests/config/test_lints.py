"""Each lint: a config that trips it and one that does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolkit.config.findings import Level
from toolkit.config.lints import ALL_LINTS, run_lints

Config = dict[str, Any]


def gpu_cr(c: Config) -> Config:
    return c["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]


def cpu_q(c: Config) -> Config:
    return c["Scheduling"]["SlurmQueues"][1]


def cpu_cr(c: Config) -> Config:
    return cpu_q(c)["ComputeResources"][0]


def _ondemand_gpu(c: Config, efa: bool = True) -> None:
    q = c["Scheduling"]["SlurmQueues"][0]
    del q["CapacityType"]
    del gpu_cr(c)["CapacityReservationTarget"]
    gpu_cr(c)["Efa"] = {"Enabled": efa}


def trip_cb_no_target(c: Config) -> None:
    del gpu_cr(c)["CapacityReservationTarget"]


def trip_pg_with_odcr(c: Config) -> None:
    _ondemand_gpu(c)
    gpu_cr(c)["CapacityReservationTarget"] = {"CapacityReservationId": "cr-0123456789abcdef0"}
    c["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"] = {"Enabled": True}


def trip_efa_off(c: Config) -> None:
    _ondemand_gpu(c, efa=False)
    gpu_cr(c)["MinCount"] = 0
    gpu_cr(c)["MaxCount"] = 1


def trip_efa_unsupported(c: Config) -> None:
    cpu_cr(c)["Efa"] = {"Enabled": True}
    cpu_q(c)["Networking"]["PlacementGroup"] = {"Enabled": True}


def trip_multinode_no_efa(c: Config) -> None:
    gpu_cr(c)["Efa"] = {"Enabled": False}


def trip_unknown_type(c: Config) -> None:
    cpu_cr(c)["InstanceType"] = "c8i.large"


def trip_no_accounting(c: Config) -> None:
    del c["Scheduling"]["SlurmSettings"]["Database"]


def trip_secret(c: Config) -> None:
    c["Tags"].append({"Key": "creds", "Value": "AKIAABCDEFGHIJKLMNOP"})


def trip_empty_queue(c: Config) -> None:
    cpu_q(c)["ComputeResources"] = []


def ok_efa_pg(c: Config) -> None:
    _ondemand_gpu(c)
    c["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"] = {"Enabled": True}


def ok_multinode_single(c: Config) -> None:
    cpu_cr(c)["InstanceType"] = "g5.48xlarge"
    cpu_cr(c)["MaxCount"] = 1
    cpu_cr(c)["Efa"] = {"Enabled": True}
    cpu_q(c)["Networking"]["PlacementGroup"] = {"Enabled": True}


def ok_external_slurmdbd(c: Config) -> None:
    del c["Scheduling"]["SlurmSettings"]["Database"]
    c["Scheduling"]["SlurmSettings"]["ExternalSlurmdbd"] = {"Host": "10.0.0.5"}


TRIPS = [
    ("capacity-block", Level.ERROR, trip_cb_no_target, "ComputeResources[0]"),
    ("placement-group-reservation", Level.WARNING, trip_pg_with_odcr, "PlacementGroup"),
    ("efa", Level.WARNING, trip_efa_off, "ComputeResources[0]"),
    ("efa", Level.ERROR, trip_efa_unsupported, "Efa.Enabled"),
    ("multinode-no-efa", Level.WARNING, trip_multinode_no_efa, "SlurmQueues[0]"),
    ("unknown-instance-type", Level.WARNING, trip_unknown_type, "InstanceType"),
    ("no-accounting", Level.WARNING, trip_no_accounting, "SlurmSettings"),
    ("secret", Level.ERROR, trip_secret, "Tags[1].Value"),
    ("empty-queue", Level.ERROR, trip_empty_queue, "ComputeResources"),
]

OKS = [
    ("placement-group-reservation", ok_efa_pg),
    ("multinode-no-efa", ok_multinode_single), ("no-accounting", ok_external_slurmdbd),
    ("efa", trip_multinode_no_efa),  # reported once, by multinode-no-efa
]


def test_base_config_is_clean(base: Config) -> None:
    assert run_lints(base) == []


def test_every_lint_has_a_tripping_case() -> None:
    assert {lint.code for lint in ALL_LINTS} <= {code for code, *_ in TRIPS}


@pytest.mark.parametrize(("code", "level", "mutate", "path_part"), TRIPS,
                         ids=[f"{t[0]}-{t[2].__name__}" for t in TRIPS])
def test_lint_trips(base: Config, code: str, level: Level, mutate: Callable[[Config], None],
                    path_part: str) -> None:
    mutate(base)
    hits = [f for f in run_lints(base) if f.code == code]
    assert hits, f"{code} did not fire"
    assert hits[0].level is level
    assert path_part in hits[0].path_str
    assert hits[0].hint


@pytest.mark.parametrize(("code", "mutate"), OKS, ids=[f"{c}-{m.__name__}" for c, m in OKS])
def test_lint_passes(base: Config, code: str, mutate: Callable[[Config], None]) -> None:
    mutate(base)
    assert [f for f in run_lints(base) if f.code == code] == []


def test_secret_arn_is_not_a_secret(base: Config) -> None:
    db = base["Scheduling"]["SlurmSettings"]["Database"]
    assert db["PasswordSecretArn"].startswith("arn:")
    assert [f for f in run_lints(base) if f.code == "secret"] == []
    db["Password"] = "hunter2"
    assert [f.path_str for f in run_lints(base) if f.code == "secret"] == [
        "Scheduling.SlurmSettings.Database.Password"]


def test_lints_survive_malformed_shapes() -> None:
    for data in (None, [], {"Scheduling": "x"}, {"Scheduling": {"SlurmQueues": [1, None]}},
                 {"Scheduling": {"SlurmQueues": [{"ComputeResources": [{"MinCount": "a"}]}]}}):
        run_lints(data)


def test_capacity_block_target_at_queue_level_is_honoured(base: Config) -> None:
    queue = base["Scheduling"]["SlurmQueues"][0]
    queue["CapacityReservationTarget"] = gpu_cr(base).pop("CapacityReservationTarget")
    assert [f for f in run_lints(base) if f.code == "capacity-block"] == []
    del queue["CapacityReservationTarget"]
    assert [f.path_str for f in run_lints(base) if f.code == "capacity-block"] == [
        "Scheduling.SlurmQueues[0].ComputeResources[0]"]


@pytest.mark.parametrize(("typo", "suggestion"), [
    ("c5.4xlarg", "did you mean c5.4xlarge"), ("p5.48xl", "did you mean p5.48xlarge"),
])
def test_unknown_type_suggests_the_nearest_catalog_type(base: Config, typo: str,
                                                        suggestion: str) -> None:
    cpu_cr(base)["InstanceType"] = typo
    (hit,) = [f for f in run_lints(base) if f.code == "unknown-instance-type"]
    assert hit.hint is not None and hit.hint.startswith(suggestion)


def test_unknown_type_far_from_the_catalog_gets_no_guess(base: Config) -> None:
    cpu_cr(base)["InstanceType"] = "c8i.large"
    (hit,) = [f for f in run_lints(base) if f.code == "unknown-instance-type"]
    assert hit.hint is not None and "did you mean" not in hit.hint
    assert "facts unknown" in hit.message


@pytest.mark.parametrize(("itype", "flagged"), [
    ("c5.2xlarge", True), ("m5.8xlarge", True), ("t3.large", True), ("c7i.24xlarge", True),
    ("c7i.48xlarge", False), ("hpc7g.16xlarge", False), ("c8i.4xlarge", False),
])
def test_efa_on_a_cpu_type_without_efa_is_flagged(base: Config, itype: str,
                                                   flagged: bool) -> None:
    cpu_cr(base)["InstanceType"] = itype
    cpu_cr(base)["Efa"] = {"Enabled": True}
    hits = [f for f in run_lints(base) if f.code == "efa" and itype in f.message]
    assert [f.level for f in hits] == ([Level.ERROR] if flagged else [])
