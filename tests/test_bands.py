"""Every verdict band in one place (benchmarks/bands.py), one nccl-tests table parser
(benchmarks/nccltable.py) for the driver and the node, and the one named difference between a
node's pre-flight busbw check and a benchmark's verdict."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from benchmarks import bands
from benchmarks.health.context import THRESHOLDS_FILE, NodeContext, load_thresholds
from benchmarks.health.perf import check_nccl, parse_nccl_tests_busbw
from benchmarks.health.tools import Tools
from toolkit.bench.comm.verdict import Expectation, judge
from toolkit.bench.nccl.parse import parse_nccl_output
from toolkit.errors import PctkError
from toolkit.observe.rules import RULES_FILE, render_rules, with_bands

ROOT = Path(__file__).resolve().parent.parent
NEW = ("#  size  count type redop root  time algbw busbw #wrong  time algbw busbw #wrong\n"
       "  1073741824  268435456  float  sum  -1  5000  214.7  375.8  0  4990  215.1  376.5  0\n"
       "  2147483648  536870912  float  sum  -1  9000  238.6  417.5  0  9010  238.3  417.1  0\n"
       "# Avg bus bandwidth    : 396.7\n")
# a paste without its header, in the old format (an 'error' column, no root)
OLD = "   1048576  262144  float  sum  95.1  11.03  19.30  1e-06  94.9  11.05  19.34  1e-06\n"


@pytest.mark.parametrize("text", [NEW, OLD])
def test_driver_and_node_read_an_nccl_tests_table_alike(text: str) -> None:
    (run,) = parse_nccl_output(text, collective="all_reduce")
    driver = [(r.size_bytes, r.primary().busbw_gbps) for r in run.rows]  # type: ignore[union-attr]
    assert driver and driver == parse_nccl_tests_busbw(text)


def _table(busbw: float) -> str:
    return ("#  size  count type redop root  time algbw busbw #wrong  time algbw busbw #wrong\n"
            f"  4294967296 1073741824  float  sum  -1  20540  100.0  {busbw}  0  20550  100.0  "
            f"{busbw}  0\n# Avg bus bandwidth    : {busbw}\n")


def _stand_in(tmp_path: Path, table: str) -> Tools:
    """nccl-tests' all_reduce_perf printing ``table`` (the real one needs GPUs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "all_reduce_perf"
    exe.write_text(f"#!/bin/sh\ncat <<'X'\n{table}X\n")
    exe.chmod(0o755)
    return Tools([str(bin_dir)], "n1")


def test_a_busbw_at_78_percent_is_a_WARN_benchmark_and_a_FAIL_node_check(tmp_path: Path) -> None:
    """The named decision (bands.NODE_BUSBW): a node's own all_reduce over NVLink must reach
    80% of the catalog figure to join a job; a cluster benchmark, across the network, 75%."""
    table = _table(78.0)
    ctx = NodeContext(node="n1", instance_type=None,
                      expect={"gpu_count": 8, "nccl_all_reduce_busbw_gbps": 100.0},
                      thresholds=load_thresholds(), mounts=[], tools=_stand_in(tmp_path, table),
                      slurm_conf=str(tmp_path / "slurm.conf"))
    node = check_nccl(ctx)
    assert node.status == "FAIL", node.message
    (run,) = parse_nccl_output(table, collective="all_reduce")
    bench = judge(run, Expectation(100.0, None, "test"), nodes=1)
    assert bench.status == "WARN", bench.reasons
    assert bands.BUSBW.grade(0.78) == "WARN" and bands.NODE_BUSBW.grade(0.78) == "FAIL"


def test_node_thresholds_take_the_band_and_an_expectations_file_still_overrides() -> None:
    assert "nccl_fail_fraction" not in json.loads(THRESHOLDS_FILE.read_text())
    t = load_thresholds()
    assert (t["nccl_warn_fraction"], t["nccl_fail_fraction"]) == (
        bands.NODE_BUSBW.warn_below, bands.NODE_BUSBW.fail_below)
    assert load_thresholds({"nccl_fail_fraction": 0.5})["nccl_fail_fraction"] == 0.5


def test_rendered_alert_rules_carry_the_storage_band() -> None:
    shipped = RULES_FILE.read_text()
    assert render_rules() == shipped  # the shipped copy agrees with the band
    drifted = shipped.replace("(0.8 * pctk_storage", "(0.7 * pctk_storage").replace(
        "under 80% of", "under 70% of")
    assert drifted != shipped
    assert with_bands(drifted) == shipped
    assert f"({bands.STORAGE.warn_below:g} * pctk_storage_expected" in render_rules("5s")


def test_alert_rules_without_a_place_for_the_band_are_refused() -> None:
    with pytest.raises(PctkError, match="no place for a band"):
        with_bands("groups: []\n")


BAND_NAME = re.compile(r"(^|_)(WARN|FAIL|PASS)_(BELOW|AT)$|^(DEFAULT_)?THRESHOLD$")


def test_no_module_but_bands_sets_a_band_to_a_number() -> None:
    """WARN_BELOW = 0.9 in a module of its own would be a second home for a band."""
    found = []
    for path in [*(ROOT / "toolkit").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]:
        if path.name == "bands.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                    isinstance(v, ast.Constant) for v in
                    (node.value.elts if isinstance(node.value, ast.Tuple) else [node.value])):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)] + [
                    e.id for t in node.targets if isinstance(t, ast.Tuple)
                    for e in t.elts if isinstance(e, ast.Name)]
                if any(BAND_NAME.search(n) for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(names)}")
    assert not found, "\n".join(found)


def test_the_band_finder_sees_a_band() -> None:
    assert BAND_NAME.search("FAIL_BELOW") and BAND_NAME.search("PASS_AT")
    assert not BAND_NAME.search("DEFAULT_BOOT_DELAY")
