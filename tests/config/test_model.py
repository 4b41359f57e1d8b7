"""The one parsed config model: its strict and tolerant modes read the same fields with the
same defaults, the defaults are ParallelCluster's, and a tolerant read of a half-broken config
still gets its lints."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolkit.config import model
from toolkit.config.check import check_text
from toolkit.config.lints import run_lints
from toolkit.config.model import ClusterTopology, load_topology, parse_cluster
from toolkit.config.schema import load_official, offline_aws
from toolkit.errors import PctkError

# everything optional left out: what each reader makes of it is the default
MINIMAL = yaml.safe_load("""
Region: us-east-1
Image: {Os: alinux2023}
HeadNode:
  InstanceType: c5.xlarge
  Networking: {SubnetId: subnet-0123456789abcdef0}
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: q
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c, InstanceType: c5.xlarge}
""")


def _official_bootstrap_timeout(cfg: Any) -> int:
    from pcluster.config.cluster_config import Timeouts

    timeouts = cfg.dev_settings.timeouts if cfg.dev_settings else None
    return int((timeouts or Timeouts()).compute_node_bootstrap_timeout)


def _cr(c: Any) -> Any:
    return c.scheduling.queues[0].compute_resources[0]


# (default, how pctk's model reads it, how the official schema's objects read it)
DEFAULTS: list[tuple[str, Any, Callable[[ClusterTopology], Any], Callable[[Any], Any]]] = [
    ("MinCount", model.DEFAULT_MIN_COUNT,
     lambda t: t.queues[0].compute_resources[0].min_count, lambda c: _cr(c).min_count),
    ("MaxCount", model.DEFAULT_MAX_COUNT,
     lambda t: t.queues[0].compute_resources[0].max_count, lambda c: _cr(c).max_count),
    ("Efa.Enabled", model.DEFAULT_EFA,
     lambda t: t.queues[0].compute_resources[0].efa, lambda c: _cr(c).efa.enabled),
    ("DisableSimultaneousMultithreading", model.DEFAULT_DISABLE_SMT,
     lambda t: t.queues[0].compute_resources[0].disable_hyperthreading,
     lambda c: _cr(c).disable_simultaneous_multithreading),
    ("StaticNodePriority", model.DEFAULT_STATIC_NODE_PRIORITY,
     lambda t: t.queues[0].compute_resources[0].static_node_priority,
     lambda c: _cr(c).static_node_priority),
    ("DynamicNodePriority", model.DEFAULT_DYNAMIC_NODE_PRIORITY,
     lambda t: t.queues[0].compute_resources[0].dynamic_node_priority,
     lambda c: _cr(c).dynamic_node_priority),
    ("CapacityType", model.DEFAULT_CAPACITY_TYPE,
     lambda t: t.queues[0].capacity_type, lambda c: c.scheduling.queues[0].capacity_type.value),
    ("JobExclusiveAllocation", model.DEFAULT_JOB_EXCLUSIVE,
     lambda t: t.queues[0].job_exclusive_allocation,
     lambda c: c.scheduling.queues[0].job_exclusive_allocation),
    ("ScaledownIdletime", model.DEFAULT_SCALEDOWN_IDLETIME,
     lambda t: t.scaledown_idletime, lambda c: c.scheduling.settings.scaledown_idletime),
    ("QueueUpdateStrategy", model.DEFAULT_QUEUE_UPDATE_STRATEGY,
     lambda t: t.queue_update_strategy, lambda c: c.scheduling.settings.queue_update_strategy),
    ("EnableMemoryBasedScheduling", model.DEFAULT_MEMORY_BASED_SCHEDULING,
     lambda t: t.enable_memory_based_scheduling,
     lambda c: c.scheduling.settings.enable_memory_based_scheduling),
    ("Database", False,
     lambda t: t.accounting, lambda c: c.scheduling.settings.database is not None),
    ("ComputeNodeBootstrapTimeout", model.DEFAULT_BOOTSTRAP_TIMEOUT,
     lambda t: t.bootstrap_timeout, _official_bootstrap_timeout),
]
STALE = {"ComputeNodeBootstrapTimeout": "aws-parallelcluster 3.16 defaults to 2100 s; the "
         "twin's ResumeTimeout (tests/golden) is still derived from 1800"}


@pytest.fixture(scope="module")
def official() -> Any:
    with offline_aws("us-east-1"):
        config, findings = load_official(copy.deepcopy(MINIMAL))
    assert findings == [] and config is not None
    return config


@pytest.mark.parametrize(("key", "default", "ours", "theirs"), [
    pytest.param(*d, id=d[0], marks=[pytest.mark.xfail(strict=True, reason=STALE[d[0]])]
                 if d[0] in STALE else []) for d in DEFAULTS])
def test_a_default_is_read_the_same_by_both_modes_and_the_official_schema(
        official: Any, key: str, default: Any, ours: Callable[[ClusterTopology], Any],
        theirs: Callable[[Any], Any]) -> None:
    strict = parse_cluster(copy.deepcopy(MINIMAL), "minimal.yaml")
    tolerant = parse_cluster(copy.deepcopy(MINIMAL), "minimal.yaml", tolerant=True)
    assert tolerant.problems == ()
    assert ours(strict) == default
    assert ours(tolerant) == default
    assert theirs(official) == default


def _queue(c: dict[str, Any]) -> dict[str, Any]:
    return c["Scheduling"]["SlurmQueues"][0]


def _cr_raw(c: dict[str, Any]) -> dict[str, Any]:
    return _queue(c)["ComputeResources"][0]


# a field of the wrong shape: strict refuses it at its path; tolerant records a problem at
# the same path and reads the field's default, as if it were not written
BAD_FIELDS: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[ClusterTopology], Any],
                       Any]] = [
    ("Scheduling.SlurmQueues[0].ComputeResources[0].MinCount",
     lambda c: _cr_raw(c).update(MinCount="${N}"),
     lambda t: t.queues[0].compute_resources[0].min_count, model.DEFAULT_MIN_COUNT),
    ("Scheduling.SlurmQueues[0].ComputeResources[0].MaxCount",
     lambda c: _cr_raw(c).update(MaxCount=True),
     lambda t: t.queues[0].compute_resources[0].max_count, model.DEFAULT_MAX_COUNT),
    ("Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled",
     lambda c: _cr_raw(c).update(Efa={"Enabled": "maybe"}),
     lambda t: t.queues[0].compute_resources[0].efa, model.DEFAULT_EFA),
    ("Scheduling.SlurmQueues[0].ComputeResources[0].StaticNodePriority",
     lambda c: _cr_raw(c).update(StaticNodePriority=-1),
     lambda t: t.queues[0].compute_resources[0].static_node_priority,
     model.DEFAULT_STATIC_NODE_PRIORITY),
    ("Scheduling.SlurmQueues[0].CapacityType",
     lambda c: _queue(c).update(CapacityType=["SPOT"]),
     lambda t: t.queues[0].capacity_type, model.DEFAULT_CAPACITY_TYPE),
    ("Scheduling.SlurmQueues[0].JobExclusiveAllocation",
     lambda c: _queue(c).update(JobExclusiveAllocation=2),
     lambda t: t.queues[0].job_exclusive_allocation, model.DEFAULT_JOB_EXCLUSIVE),
    ("Scheduling.SlurmSettings.ScaledownIdletime",
     lambda c: c["Scheduling"].update(SlurmSettings={"ScaledownIdletime": 0}),
     lambda t: t.scaledown_idletime, model.DEFAULT_SCALEDOWN_IDLETIME),
]


@pytest.mark.parametrize(("path", "mutate", "read", "default"), BAD_FIELDS,
                         ids=[b[0].rsplit(".", 1)[-1] for b in BAD_FIELDS])
def test_a_bad_field_is_refused_strictly_and_defaulted_tolerantly_at_the_same_path(
        path: str, mutate: Callable[[dict[str, Any]], None],
        read: Callable[[ClusterTopology], Any], default: Any) -> None:
    data = copy.deepcopy(MINIMAL)
    mutate(data)
    with pytest.raises(PctkError) as err:
        parse_cluster(data, "c.yaml")
    assert err.value.message.startswith(f"c.yaml: {path}: ")
    tolerant = parse_cluster(data, "c.yaml", tolerant=True)
    assert [p.path_str for p in tolerant.problems] == [path]
    assert read(tolerant) == default


@pytest.mark.parametrize(("written", "read"), [
    ("false", False), ("'false'", False), ("'no'", False), ("0", False),
    ("true", True), ("'true'", True), ("'yes'", True), ("1", True),
])
def test_a_boolean_is_read_as_the_official_schema_reads_it(written: str, read: bool) -> None:
    """`Enabled: "false"` is false to ParallelCluster (and was EFA on to the twin before)."""
    data = copy.deepcopy(MINIMAL)
    _cr_raw(data)["Efa"] = {"Enabled": yaml.safe_load(written)}
    assert parse_cluster(data, "c.yaml").queues[0].compute_resources[0].efa is read
    assert parse_cluster(data, "c.yaml", tolerant=True).queues[0].compute_resources[0].efa is read
    with offline_aws("us-east-1"):
        official, findings = load_official(data)
    assert findings == []
    assert _cr(official).efa.enabled is read


@pytest.mark.parametrize("written", [4, "4", " 4 ", 4.0, 4.5, "4.0", True, "x", "${N}", [4]])
def test_a_count_is_read_as_the_official_schema_reads_it(written: Any) -> None:
    """MaxCount "4" is 4 to ParallelCluster (marshmallow's Integer); the twin refused it."""
    from marshmallow import ValidationError
    from marshmallow.fields import Integer

    try:
        official: int | None = Integer().deserialize(written)
    except ValidationError:
        official = None
    data = copy.deepcopy(MINIMAL)
    _cr_raw(data)["MaxCount"] = written
    tolerant = parse_cluster(data, "c.yaml", tolerant=True)
    if official is None:
        with pytest.raises(PctkError, match=r"MaxCount: expected an integer"):
            parse_cluster(data, "c.yaml")
        assert [p.path_str for p in tolerant.problems] == [
            "Scheduling.SlurmQueues[0].ComputeResources[0].MaxCount"]
    else:
        assert parse_cluster(data, "c.yaml").queues[0].compute_resources[0].max_count == official
        assert tolerant.queues[0].compute_resources[0].max_count == official
        assert tolerant.problems == ()


def test_the_boolean_spellings_are_marshmallows() -> None:
    from marshmallow.fields import Boolean

    assert Boolean.truthy | {True} == model.TRUTHY
    assert Boolean.falsy | {False} == model.FALSY


def _half_broken(base: dict[str, Any]) -> dict[str, Any]:
    """p5-training with its cpu queue malformed and its gpu queue tripping a lint."""
    queues = base["Scheduling"]["SlurmQueues"]
    queues[0]["ComputeResources"][0]["Efa"] = {"Enabled": False}  # multinode-no-efa
    queues[1]["ComputeResources"] = "c5.xlarge"  # a list of compute resources is expected
    return base


def test_a_tolerant_read_of_a_half_broken_config_still_gets_the_other_queues_lints(
        base: dict[str, Any]) -> None:
    data = _half_broken(base)
    config = parse_cluster(data, "half.yaml", tolerant=True)
    assert [q.name for q in config.queues] == ["gpu", "cpu"]
    assert config.queues[1].compute_resources == ()
    assert [(p.path_str, p.message) for p in config.problems] == [
        ("Scheduling.SlurmQueues[1].ComputeResources", "missing or empty")]
    lints = [(f.code, f.path_str) for f in run_lints(config)]
    assert ("multinode-no-efa", "Scheduling.SlurmQueues[0].ComputeResources[0]") in lints
    # config check: the schema names the bad path, the lints report the good queue
    report = check_text(yaml.safe_dump(data), "half.yaml")
    assert report.exit_code == 1
    codes = {(f.stage, f.code) for f in report.findings}
    assert ("lint", "multinode-no-efa") in codes
    assert any(f.stage == "schema" and "SlurmQueues[1].ComputeResources" in f.path_str
               for f in report.findings), [f.path_str for f in report.findings]


def test_the_strict_read_refuses_the_same_file_in_one_line(base: dict[str, Any],
                                                           tmp_path: Path) -> None:
    path = tmp_path / "half.yaml"
    path.write_text(yaml.safe_dump(_half_broken(base)))
    with pytest.raises(PctkError) as err:
        load_topology(path)
    line = err.value.one_line()
    assert "\n" not in line
    assert line == f"{path}: Scheduling.SlurmQueues[1].ComputeResources: missing or empty"
    # the tolerant read of the file is the one above
    assert load_topology(path, tolerant=True).problems[0].text(str(path)) == line


def test_lints_take_the_model_and_raw_data_alike(base: dict[str, Any]) -> None:
    _half_broken(base)
    assert run_lints(base) == run_lints(parse_cluster(base, tolerant=True))


def test_a_config_that_is_not_a_mapping_is_one_problem_at_the_top() -> None:
    config = parse_cluster(["x"], "list.yaml", tolerant=True)
    assert config.queues == () and [p.text("list.yaml") for p in config.problems] == [
        "list.yaml: not a ParallelCluster config (expected a mapping at the top)"]
    with pytest.raises(PctkError, match=r"^list\.yaml: not a ParallelCluster config"):
        parse_cluster(["x"], "list.yaml")
