"""Driver-side faults and wide faults on the shared twin: only a node's own evidence drains it.

- the nodes cannot start the checks (an interpreter path that does not exist there) or the
  checks still run at the driver's timeout (a stand-in interpreter that hangs): every node
  is UNKNOWN, none drained, exit 3;
- more failing nodes than --max-drain: none drained, and the record says why;
- a storage check failing on every node at once: the storage, not the nodes; none drained.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.health.faults import (
    FI_INFO_WITHOUT_EFA,
    failing,
    fi_info_with_efa,
    make_read_only,
    node_table,
    read_record,
    undo_read_only,
    write_tool,
)
from toolkit.cli import main

pytestmark = pytest.mark.twin

CPU_NODES = [f"cpu-dy-c5-{i}" for i in range(1, 5)]
GPU_NODES = [f"gpu-st-p5-{i}" for i in range(1, 5)]


def _sweep(base: Path, partition: str, *extra: str) -> tuple[int, dict]:
    out = base / f"record-{len(list(base.glob('record-*.json')))}.json"
    rc = main(["health", "run", "--partition", partition, "--workdir", str(base / "runs"),
               "--out", str(out), *extra])
    return rc, read_record(out)


def _node_checks(rec: dict) -> dict[str, dict]:
    return {node: checks["node"] for node, checks in rec["metrics"]["nodes"].items()}


def _undrain(env: dict[str, str], twin) -> None:
    for node, (_state, reason) in node_table(env).items():
        if reason.startswith("pctk:"):
            twin.cmd("scontrol", "update", f"NodeName={node}", "State=RESUME")


def test_missing_interpreter_leaves_every_node_unknown_and_undrained(twin, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        rc, rec = _sweep(tmp_path, "cpu", "--drain", "--mount", str(mnt), "--timeout", "60",
                         "--python", str(tmp_path / "no-such-venv" / "bin" / "python3"))
        assert rc == 3, rec["verdict"]
        assert rec["verdict"]["status"] == "UNKNOWN"
        node = _node_checks(rec)
        assert {n: c["status"] for n, c in node.items()} == {n: "UNKNOWN" for n in CPU_NODES}
        assert all("FAILED before the node wrote one" in c["message"] for c in node.values())
        assert rec["params"]["drained"] == {}
        assert sorted(rec["params"]["unchecked"]) == CPU_NODES
        assert any("no node of job" in r and "driver" in r for r in rec["verdict"]["reasons"])
        table = node_table(twin.env)
        assert all(table[n] == ("idle", "") for n in CPU_NODES), table
    finally:
        _undrain(twin.env, twin)


def test_checks_still_running_at_the_timeout_leave_nodes_unknown(twin, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # stand-in interpreter that hangs, as checks stuck on a hung mount would
    hang = write_tool(tmp_path / "bin", "python3", "sleep 120\n")
    try:
        rc, rec = _sweep(tmp_path, "cpu", "--drain", "--mount", str(mnt), "--timeout", "10",
                         "--python", str(hang))
        assert rc == 3, rec["verdict"]
        node = _node_checks(rec)
        assert {c["status"] for c in node.values()} == {"UNKNOWN"}, node
        assert all("still RUNNING at the 10s timeout" in c["message"] for c in node.values())
        assert rec["params"]["drained"] == {}
        table = node_table(twin.env)
        assert all(table[n][1] == "" and "drain" not in table[n][0] for n in CPU_NODES), table
    finally:
        _undrain(twin.env, twin)


def test_more_failing_nodes_than_max_drain_drains_none_and_says_why(twin, tmp_path):
    for node in GPU_NODES:
        (tmp_path / "mnt" / node).mkdir(parents=True)
        body = FI_INFO_WITHOUT_EFA if node in GPU_NODES[:2] else fi_info_with_efa()
        write_tool(tmp_path / "tools" / node / "bin", "fi_info", body)
    args = ("--drain", "--mount", f"{tmp_path}/mnt/%n", "--tool-path",
            f"{tmp_path}/tools/%n/bin", "--timeout", "120")
    try:
        # default cap on the 4-node partition: max(1, 10% of 4) = 1
        rc, rec = _sweep(tmp_path, "gpu", *args)
        assert rc == 2
        assert failing(rec) == {GPU_NODES[0]: {"efa"}, GPU_NODES[1]: {"efa"},
                                GPU_NODES[2]: set(), GPU_NODES[3]: set()}
        assert rec["params"]["drained"] == {} and rec["params"]["max_drain"] == 1
        assert any("2 nodes would be drained, more than --max-drain 1: drained none" in r
                   for r in rec["verdict"]["reasons"])
        table = node_table(twin.env)
        assert all(table[n] == ("idle", "") for n in GPU_NODES), table

        rc, rec = _sweep(tmp_path, "gpu", *args, "--max-drain", "2")
        assert rc == 2
        assert sorted(rec["params"]["drained"]) == GPU_NODES[:2]
        table = node_table(twin.env)
        assert all(table[n][1].startswith("pctk: efa: ") for n in GPU_NODES[:2]), table
        assert all(table[n] == ("idle", "") for n in GPU_NODES[2:]), table
    finally:
        _undrain(twin.env, twin)


def test_storage_failing_on_every_node_drains_no_node(twin, tmp_path):
    shared = tmp_path / "fsx"
    shared.mkdir()
    how = make_read_only(shared)
    try:
        rc, rec = _sweep(tmp_path, "cpu", "--drain", "--max-drain", "4", "--mount", str(shared),
                         "--timeout", "120")
        assert rc == 2
        assert failing(rec) == {n: {"storage"} for n in CPU_NODES}
        assert rec["params"]["drained"] == {}
        assert any("storage fails on every node checked (4): the shared storage, not the "
                   "nodes" in r for r in rec["verdict"]["reasons"])
        table = node_table(twin.env)
        assert all(table[n] == ("idle", "") for n in CPU_NODES), table
    finally:
        undo_read_only(shared, how)
        _undrain(twin.env, twin)
