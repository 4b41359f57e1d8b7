"""Slurm as a compute node sees it: the node side's counterpart of toolkit/slurm.py.

Every ``scontrol`` call of the node-side code (result records, health checks, prolog/epilog
drains) is a small function here. Standard library only, and no import of ``toolkit``:
``benchmarks/`` is copied alone onto nodes. A missing ``scontrol`` or one that does not
answer reads as no answer (None, empty), never an exception: a record or a health report is
still written.

``path``: where to look for ``scontrol`` (the health checks' tool path, which a Slurm job's
PATH often misses); it is then also the command's PATH, with ``LC_ALL=C``. Without it,
this process's PATH and environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def scontrol(*args: str, timeout: float = 10.0, path: str | None = None
             ) -> subprocess.CompletedProcess[str] | None:
    """``scontrol ARGS``; None when scontrol is absent or gave no answer in time."""
    exe = shutil.which("scontrol", path=path)
    if exe is None:
        return None
    env = None if path is None else dict(os.environ, PATH=path, LC_ALL="C")
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                              env=env, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None


def show_config(timeout: float = 10.0) -> dict[str, str]:
    """``scontrol show config`` as a dict ({} without an answer)."""
    r = scontrol("show", "config", timeout=timeout)
    out = {}
    for line in r.stdout.splitlines() if r else []:
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def node_features(node: str, *, timeout: float = 10.0, path: str | None = None) -> list[str]:
    """The node's AvailableFeatures (ParallelCluster and the twin list the instance type
    there: ``static,p5.48xlarge,p5,efa,gpu``); [] without an answer."""
    r = scontrol("show", "node", node, "-o", timeout=timeout, path=path)
    if r is None or r.returncode != 0:
        return []
    for token in r.stdout.split():
        if token.startswith("AvailableFeatures="):
            return [f for f in token.split("=", 1)[1].split(",") if f]
    return []


def drain(node: str, reason: str, *, timeout: float = 10.0, path: str | None = None) -> bool:
    """``scontrol update NodeName=NODE State=DRAIN Reason=REASON``; whether Slurm took it."""
    r = scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}",
                 timeout=timeout, path=path)
    return r is not None and r.returncode == 0
