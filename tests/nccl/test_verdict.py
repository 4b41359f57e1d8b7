"""Verdict rules with explicit expectations, network detection, compare, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.bench.comm.compare import compare_runs
from toolkit.bench.comm.model import CollectiveRun, Device, Measurement, Network, Row
from toolkit.bench.comm.network import detect_network
from toolkit.bench.comm.report import plot_busbw, runs_to_csv
from toolkit.bench.comm.verdict import Expectation, judge, lookup_expectation

GIB = 1 << 30


def make_run(busbw_at_large: float = 400.0, *, wrong: int = 0, transport: str = "efa",
             hosts: int = 2, complete: bool = True) -> CollectiveRun:
    rows = []
    for size, bw in ((1 << 20, 20.0), (GIB, busbw_at_large * 0.9), (4 * GIB, busbw_at_large)):
        n = 16
        alg = bw / (2 * (n - 1) / n)
        m = Measurement(size / alg / 1e3, alg, bw, wrong)
        rows.append(Row(size, size // 4, "float", "sum", -1, m, Measurement(m.time_us, alg, bw,
                                                                          0)))
    devices = [Device(r, f"node-{r // 8}", r % 8, None, "H100") for r in range(8 * hosts)]
    return CollectiveRun("all_reduce", "given", "float", "sum", 8 * hosts, "device lines",
                         devices, rows, "new", complete, [] if complete else ["srun: error"],
                         network=Network(transport, []))


EXP = Expectation(480.0, 4 * GIB, "S8a", "")


@pytest.mark.parametrize(("busbw", "status"), [(470.0, "PASS"), (432.0, "PASS"),
                                               (420.0, "WARN"), (360.0, "WARN"),
                                               (359.0, "FAIL"), (100.0, "FAIL")])
def test_bandwidth_thresholds(busbw: float, status: str) -> None:
    v = judge(make_run(busbw), EXP)
    assert v.status == status, v.reasons


def test_wrong_values_fail_even_when_fast() -> None:
    v = judge(make_run(480.0, wrong=3), EXP)
    assert v.status == "FAIL" and any("wrong elements" in r for r in v.reasons)


def test_socket_fallback_fails_across_nodes_and_warns_on_one() -> None:
    assert judge(make_run(transport="socket"), EXP).status == "FAIL"
    assert judge(make_run(transport="socket", hosts=1), None).status == "WARN"
    assert judge(make_run(transport="ofi-tcp"), EXP).status == "FAIL"


def test_incomplete_run_fails() -> None:
    v = judge(make_run(complete=False), EXP)
    assert v.status == "FAIL" and any("srun: error" in r for r in v.reasons)


def test_sweep_below_expectation_size_is_not_judged() -> None:
    v = judge(make_run(10.0), Expectation(480.0, 16 * GIB, "S8a"))
    assert v.status == "PASS"
    assert any("not judged" in r for r in v.reasons)


def test_catalog_expectation_lookup() -> None:
    exp = lookup_expectation("p5.48xlarge", 2, "all_reduce", 4 * GIB)
    # the catalog carries this figure: losing it is a regression, not a reason to skip
    assert exp is not None, "toolkit.catalog lost its p5.48xlarge 2-node all_reduce figure"
    assert exp.size_bytes is not None and exp.size_bytes <= 4 * GIB and exp.gbps > 100
    # a sweep that stopped early still gets a figure, which the verdict then declines to use
    small = lookup_expectation("p5.48xlarge", 2, "all_reduce", 1 << 20)
    assert small is not None and (small.size_bytes or 0) > 1 << 20
    assert lookup_expectation("no-such-type", 2, "all_reduce") is None


@pytest.mark.parametrize(("lines", "transport"), [
    (["h:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
      "h:1:1 [0] NCCL INFO Using network AWS Libfabric"], "efa"),
    (["h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct",
      "h:1:1 [0] NCCL INFO Using network Libfabric"], "efa"),
    (["h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
      "h:1:1 [0] NCCL INFO Using network Socket"], "socket"),
    (["h:1:1 [0] NCCL INFO Using network AWS Libfabric",
      "h:2:2 [1] NCCL INFO Using network Socket",
      "h:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa"], "mixed"),
    (["h:1:1 [0] NCCL INFO NET/OFI Selected Provider is tcp",
      "h:1:1 [0] NCCL INFO Using network AWS Libfabric"], "ofi-tcp"),
    (["h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB"], "ib"),
    (["no nccl here"], "unknown"),
])
def test_network_detection(lines: list[str], transport: str) -> None:
    assert detect_network(lines).transport == transport


def test_compare_flags_large_message_drops_only() -> None:
    before, after = make_run(480.0), make_run(400.0)
    after.rows[0].out_of_place.busbw_gbps = 5.0  # type: ignore[union-attr]  # 1 MiB: noisy
    comps, unmatched = compare_runs([before], [after], threshold=0.10, min_bytes=2 << 20)
    assert unmatched == []
    (c,) = comps
    assert [s.size_bytes for s in c.regressions] == [GIB, 4 * GIB]
    comps, _ = compare_runs([before], [make_run(470.0)], threshold=0.10)
    assert comps[0].regressions == []


def test_csv_and_plot(tmp_path: Path) -> None:
    runs = [make_run(480.0), make_run(300.0)]
    text = runs_to_csv(runs)
    assert text.splitlines()[0].startswith("source,collective,nranks")
    assert len(text.splitlines()) == 1 + 6
    png = plot_busbw(tmp_path / "busbw.png", runs, ["a", "b"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_block_round_trip() -> None:
    run = make_run(480.0)
    back = CollectiveRun.from_block(json.loads(json.dumps(run.to_block())))
    assert back.to_block() == run.to_block()
