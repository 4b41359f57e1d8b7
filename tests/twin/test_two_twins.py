"""Two `local up` at once in one twin root, and twins of two roots with the same node names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolkit.local import clusters, state
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

PCTK = str(Path(sys.executable).parent / "pctk")


def _config(folder: Path, name: str) -> Path:
    """One static node, compute-st-c5-1, whatever the cluster's name."""
    cfg = folder / f"{name}.yaml"
    cfg.write_text(
        "Region: us-east-1\n"
        "Image: {Os: ubuntu2204}\n"
        "HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}\n"
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      Networking: {SubnetIds: [subnet-0123456789abcdef0]}\n"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 1}\n")
    return cfg


def _up(root: Path, cfg: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([PCTK, "local", "up", "--no-accounting", "--state-dir", str(root),
                             "-c", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _node_addr(twin: Twin, node: str) -> str:
    r = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True, text=True,
                       env={**os.environ, **twin.env()}, timeout=60, check=True)
    return next(t.split("=", 1)[1] for t in r.stdout.split() if t.startswith("NodeAddr="))


def test_two_ups_at_once_leave_one_twin_and_each_twin_resolves_its_own_node_names(tmp_path):
    root, other_root = (Path(tempfile.mkdtemp(prefix="pctk-2-", dir="/tmp")) for _ in range(2))
    try:
        ups = [_up(root, _config(tmp_path, name)) for name in ("alpha", "beta")]
        outs = [p.communicate(timeout=300)[0] for p in ups]
        assert [p.returncode for p in ups] == [0, 0], outs
        assert len(state.running(root)) == 1, outs  # the later up stopped the earlier twin
        st = subprocess.run([PCTK, "local", "status", "--state-dir", str(root)],
                            capture_output=True, text=True, timeout=120)
        assert st.returncode == 0, st.stderr

        if os.geteuid() != 0:
            return  # nodes share 127.0.0.1 without root: no address to confuse
        # another root's twin with the same node names, started after: its jobs must resolve
        # compute-st-c5-1 to its own node, not to the first block in /etc/hosts
        p = _up(other_root, _config(tmp_path, "alpha"))
        assert p.wait(timeout=300) == 0, p.stdout.read() if p.stdout else ""
        first = clusters.select(root)
        second = clusters.select(other_root)
        mine = _node_addr(second, "compute-st-c5-1")
        assert mine != _node_addr(first, "compute-st-c5-1")
        r = subprocess.run(["srun", "-N1", "-p", "compute", "getent", "hosts",
                            "compute-st-c5-1"], capture_output=True, text=True,
                           env={**os.environ, **second.env()}, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[0] == mine, r.stdout
        # this host's /etc/hosts alone answers with an earlier twin's block
        host = subprocess.run(["getent", "hosts", "compute-st-c5-1"], capture_output=True,
                              text=True, timeout=60)
        assert host.stdout.split()[0] != mine, host.stdout
    finally:
        for r in (root, other_root):
            for twin in clusters.known(r).values():
                twin.down(purge=True)
            shutil.rmtree(r, ignore_errors=True)  # the root's up lock
