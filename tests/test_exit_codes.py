"""One table of exit codes (docs/commands.md, "Exit codes"; toolkit/cliout.py), and each command's
typical outcomes held to it, run through the console script as a user runs them.

Interrupted (130) needs a running job: tests/fsdp/test_twin.py and tests/storage/test_twin.py
send real signals; NOT_RUNNING (3) here is `local status` without a twin.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.cliout import EXIT_CODES, FAILED, NAGIOS_COMMANDS, NOT_RUNNING, OK, UNUSABLE
from toolkit.paths import preset_path

PCTK = Path(sys.executable).parent / "pctk"
COMMANDS_DOC = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
NCCL = Path(__file__).resolve().parent / "nccl" / "fixtures"
GOOD_LOG = NCCL / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log"
FAILED_LOG = NCCL / "14_nccl-tests-37-allgather-v100-oldest-format-failed.log"
P5 = preset_path("p5-training")


def docs_table() -> dict[int, str]:
    """code -> meaning, from the table of exit codes in docs/commands.md."""
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", COMMANDS_DOC.read_text(), re.M)
    return {int(code): meaning.strip() for code, meaning in rows}


def test_the_docs_table_is_cliouts_table() -> None:
    table = docs_table()
    assert sorted(table) == sorted(EXIT_CODES)
    for code, meaning in EXIT_CODES.items():
        assert table[code].startswith(meaning), (code, table[code])
    assert "`pctk health run` answers in Nagios codes" in COMMANDS_DOC.read_text()


def _bad_config(tmp: Path) -> Path:
    bad = tmp / "bad.yaml"
    bad.write_text(P5.read_text().replace("MinCount: 0", "MinCount: 9"))
    return bad


# (argv, expected code): %T is the test's folder; no Slurm and no twin on purpose
CASES: list[tuple[list[str], int]] = [
    (["--version"], OK),
    (["config", "check", str(P5)], OK),
    (["config", "check", "%T/bad.yaml"], FAILED),
    (["config", "check", "%T/missing.yaml"], UNUSABLE),
    (["bench", "nccl", "parse", str(GOOD_LOG), "--no-store"], OK),
    (["bench", "nccl", "parse", str(FAILED_LOG), "--no-store"], FAILED),
    (["bench", "nccl", "parse", "%T/nope.log"], UNUSABLE),
    (["bench", "fsdp", "--model", "bogus"], UNUSABLE),
    (["bench", "storage", "--nodes", "0", "--target", "/fsx"], UNUSABLE),
    (["health", "slow-nodes", "--size", "0", "--partition", "cpu"], UNUSABLE),
    (["health", "slow-nodes", "--partition", "cpu"], UNUSABLE),  # no Slurm
    (["health", "run", "--level", "bogus"], 3),  # Nagios UNKNOWN
    (["local", "status"], NOT_RUNNING),
    (["report", "-o", "%T/missing/x.html"], UNUSABLE),
    (["results", "add", "%T/nope.json"], UNUSABLE),
    (["results", "list"], OK),
    (["submit", "--", "true"], UNUSABLE),  # no Slurm, no twin
]


@pytest.mark.parametrize(("argv", "code"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_each_commands_typical_outcome_has_its_documented_code(tmp_path: Path,
                                                               argv: list[str],
                                                               code: int) -> None:
    _bad_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PCTK_"))}
    env["PCTK_HOME"] = str(tmp_path / "home")
    args = [a.replace("%T", str(tmp_path)) for a in argv]
    r = subprocess.run([str(PCTK), *args], capture_output=True, text=True, timeout=180,
                       env=env, cwd=tmp_path)
    assert r.returncode == code, (r.returncode, r.stderr[-800:])
    command = "pctk " + " ".join(argv[:2])
    if command not in NAGIOS_COMMANDS:
        assert code in docs_table()
    if code == UNUSABLE or (command in NAGIOS_COMMANDS and code == 3):
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pctk: error: "), r.stderr
    assert "Traceback" not in r.stderr


def test_slow_node_findings_are_1_not_nagios_2() -> None:
    from tests.health.test_slownodes_logic import _measure, _nodes
    from toolkit.health.slownodes import exit_code, run_sweep

    nodes = _nodes(8)
    speed: dict[str, float | None] = {x: 1.0 for x in nodes}
    assert exit_code(run_sweep(nodes, _measure(speed, []))) == OK
    speed["n03"] = 0.05
    assert exit_code(run_sweep(nodes, _measure(speed, []))) == FAILED
