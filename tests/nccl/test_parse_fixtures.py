"""Real published nccl-tests outputs parse to exactly the figures read off their text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.nccl import FIXTURES
from toolkit.bench.comm.model import CollectiveRun
from toolkit.bench.comm.verdict import judge
from toolkit.bench.nccl import parse_nccl_file, parse_nccl_output
from toolkit.errors import PctkError

EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text())["files"]


def _parse(name: str, exp: dict[str, Any]) -> CollectiveRun:
    # name the collective only where the log itself does not (README/issue text named it)
    given = None if exp["collective_source"] == "command line in log" else exp["collective"]
    runs = parse_nccl_file(FIXTURES / name, collective=given)
    assert len(runs) == 1
    return runs[0]


def _measurements(run: CollectiveRun) -> list[Any]:
    return [m for r in run.rows for m in (r.out_of_place, r.in_place) if m]


def observed(run: CollectiveRun) -> dict[str, Any]:
    """The parse result in expected.json's vocabulary."""
    big = run.largest()
    ms = _measurements(run)
    errors = [m for m in ms if m.error is not None]
    worst_err = max(errors, key=lambda m: m.error) if errors else None
    old = run.format in ("old", "oldest")
    return {
        "collective": run.collective,
        "dtype": run.dtype,
        "nranks": run.nranks,
        "n_data_rows": len(run.rows),
        "format": run.format,
        "largest_size_bytes": big.size_bytes if big else None,
        "largest_oop_busbw": big.out_of_place.busbw_gbps if big and big.out_of_place else None,
        "largest_ip_busbw": big.in_place.busbw_gbps if big and big.in_place else None,
        "max_oop_busbw": max((r.out_of_place.busbw_gbps for r in run.rows if r.out_of_place),
                             default=None),
        "avg_bus_bandwidth": run.avg_busbw_gbps,
        "out_of_bounds": run.out_of_bounds,
        "total_wrong": None if old or not run.rows else sum(m.wrong or 0 for m in ms),
        "max_error": worst_err.error if worst_err else None,
        "max_error_text": worst_err.text["wrong"] if worst_err else None,
        "n_wrong_NA": (sum(1 for m in ms if m.text.get("wrong") == "N/A")
                       if run.rows else None),
        "complete": run.complete,
    }


FIELDS = ("collective", "dtype", "nranks", "n_data_rows", "largest_size_bytes",
          "largest_oop_busbw", "largest_ip_busbw", "max_oop_busbw", "avg_bus_bandwidth",
          "out_of_bounds", "total_wrong", "max_error", "max_error_text", "n_wrong_NA",
          "complete")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_to_expected_figures(name: str) -> None:
    exp = EXPECTED[name]
    run = _parse(name, exp)
    got = observed(run)
    for field in FIELDS:
        assert got[field] == exp[field], f"{name}: {field}: got {got[field]!r}"
    # expected.json spells the format out ("new (redop root ... #wrong)"); compare its word
    want_format = exp["format"].split()[0] if exp["format"] else None
    assert got["format"] == want_format


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rows_follow_from_each_other_within_rounding(name: str) -> None:
    exp = EXPECTED[name]
    runs = parse_nccl_file(FIXTURES / name, collective=exp["collective"],
                           nranks=exp["nranks"] or exp.get("nranks_context"))
    assert runs[0].inconsistencies == []
    if name.startswith("14_"):
        # 2019 build: all_gather algbw was size*(n-1)/n / time and busbw = algbw; the
        # convention is recognised once for the table instead of a warning per figure
        old = [n for n in runs[0].notes if n.startswith("old nccl-tests convention")]
        assert len(old) == 1 and "n=8" in old[0]


def test_collective_found_in_log_or_file_name() -> None:
    by_log = {n: e for n, e in EXPECTED.items() if e["collective_source"] ==
              "command line in log"}
    assert by_log, "fixtures should include logs with the command line"
    for name, exp in by_log.items():
        run = parse_nccl_file(FIXTURES / name)[0]
        assert (run.collective, run.collective_source) == (exp["collective"],
                                                           "command line in log")
    for name in ("01_awsome-p4de-2node-allreduce-srun.log",
                 "13_nccl-tests-331-sendrecv-a100-nthread2-info.log"):
        run = parse_nccl_file(FIXTURES / name)[0]
        assert (run.collective, run.collective_source) == (EXPECTED[name]["collective"],
                                                           "file name")


def test_devices_hosts_and_network_of_the_efa_log() -> None:
    run = _parse("05_aws-efa-eks-p4d-16rank-oldformat-info.log",
                 EXPECTED["05_aws-efa-eks-p4d-16rank-oldformat-info.log"])
    assert len(run.devices) == 16
    assert run.hosts == ["nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"]
    assert run.devices[8].device == 0 and run.devices[8].name == "A100-SXM4-40GB"
    assert run.network.transport == "efa"
    assert any("Selected Provider is efa" in e for e in run.network.evidence)
    assert run.nccl_version == "2.9.9+cuda11.2"


def test_several_gpus_per_process_devices() -> None:
    run = parse_nccl_file(FIXTURES / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log")[0]
    assert [(d.rank, d.host, d.device, d.bus) for d in run.devices] == [
        (0, "lrdn2296", 0, "0000:1d:00"), (1, "lrdn2296", 1, "0000:56:00")]
    assert run.network.transport == "ib"


def test_crashed_run_is_incomplete_with_failure_lines_and_fails() -> None:
    run = parse_nccl_file(FIXTURES / "10_nccl-tests-287-allreduce-2gpu-crash-info.log")[0]
    assert not run.complete and run.rows == []
    assert any("Test NCCL failure common.cu:392" in ln for ln in run.failure_lines)
    assert any("Cuda failure 1 'invalid argument'" in ln for ln in run.failure_lines)
    assert run.network.transport == "socket"
    v = judge(run)
    assert v.status == "FAIL"
    assert any("incomplete run" in r for r in v.reasons)


def test_truncated_log_keeps_what_was_measured() -> None:
    text = (FIXTURES / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log").read_text()
    cut = text[:text.index("   268435456")] + "srun: error: node-3: task 1: Killed\n"
    run = parse_nccl_output(cut, collective="sendrecv")[0]
    assert not run.complete
    assert len(run.rows) == 25 and run.largest().size_bytes == 134217728  # type: ignore[union-attr]
    assert run.failure_lines == ["srun: error: node-3: task 1: Killed"]
    assert judge(run).status == "FAIL"


def test_oldest_failed_run_fails_on_out_of_bounds_and_error() -> None:
    run = parse_nccl_file(FIXTURES / "14_nccl-tests-37-allgather-v100-oldest-format-failed.log")[0]
    v = judge(run)
    assert v.status == "FAIL"
    assert any("Out of bounds values : 2 FAILED" in r for r in v.reasons)
    assert any("error column above tolerance" in r for r in v.reasons)


def test_text_without_nccl_tests_output_is_bad_input() -> None:
    with pytest.raises(PctkError, match="no nccl-tests output"):
        parse_nccl_output("hello\nworld\n", source="notes.txt")
