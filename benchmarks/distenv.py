"""torch.distributed environment from Slurm (or torchrun) variables. Node-side, stdlib only.

Inside ``srun`` every task knows its place from ``SLURM_PROCID``/``SLURM_NTASKS``/
``SLURM_LOCALID``; the rendezvous address is the first host of the job's node list, which
we expand here without calling ``scontrol`` so it also works in lean containers. Values
already exported (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...; torchrun sets them) win.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return [p for p in parts if p]


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list: ``gpu-st-p5-[1-3,7],cpu-dy-c5-1`` -> five names, in order."""
    hosts: list[str] = []
    for part in _split_top(expr.strip()):
        m = re.match(r"^([^\[]*)\[([^\]]+)\](.*)$", part)
        if not m:
            hosts.append(part)
            continue
        prefix, body, suffix = m.groups()
        for item in body.split(","):
            r = _RANGE.match(item)
            if not r:
                raise ValueError(f"bad host range {item!r} in {expr!r}")
            lo, hi = r.group(1), r.group(2) or r.group(1)
            width = len(lo) if lo.startswith("0") else 0
            for i in range(int(lo), int(hi) + 1):
                expanded = f"{prefix}{str(i).zfill(width)}"
                # a suffix may itself hold a range: recurse
                hosts.extend(expand_hostlist(expanded + suffix) if "[" in suffix
                             else [expanded + suffix])
    return hosts


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: str
    master_port: int

    def export(self) -> None:
        """Set the variables ``torch.distributed.init_process_group('env://')`` reads."""
        os.environ.update(
            RANK=str(self.rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_RANK=str(self.local_rank),
            LOCAL_WORLD_SIZE=str(self.local_world_size),
            GROUP_RANK=str(self.node_rank),
            MASTER_ADDR=self.master_addr,
            MASTER_PORT=str(self.master_port),
        )


def _int_env(*names: str, default: int) -> int:
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return default


# Rendezvous ports: RDZV_PORT_BASE + (7 x job id + step) mod RDZV_PORT_SPAN, i.e. 20000-31999:
# below the kernel's ephemeral ports (32768 up on Linux), which any outgoing connection on the
# node (a Slurm RPC, another job's gloo link) may hold as its source port when the rank binds.
# Batch scripts use RDZV_PORT_BASE + job id mod RDZV_PORT_SPAN (toolkit/submit/jobspec.py).
RDZV_PORT_BASE = 20000
RDZV_PORT_SPAN = 12000


# What torchrun (or a launcher like it) exports to its ranks. A job's own ranks started by
# srun must not inherit them from the shell that submitted the job (a torchrun session, a
# notebook inside another job): sbatch/*.sbatch and every script pctk writes unset them
# (toolkit.submit.jobspec.unset_launcher_variables, also in ClusterExecutor jobs' setup; the
# slow-node pairs' --wrap).
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                      "MASTER_ADDR", "MASTER_PORT")


def ephemeral_ports() -> range:
    """The kernel's ephemeral range: source ports of outgoing connections come from it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = f.read().split()[:2]
        return range(int(lo), int(hi) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default


def local_rendezvous_port(avoid: tuple[range, ...] = ()) -> int:
    """A port free now on this host for ranks started here without a job id to derive one
    from (a one-rank check, ranks a test starts). Not ``bind(("", 0))``: that hands out an
    ephemeral port, free again once the probe closes, and on a busy host any outgoing
    connection may take it as its source port before the rank binds (EADDRINUSE). So: a port
    above the ephemeral range where there is room, else below it, and none in ``avoid``."""
    import random
    import socket

    eph = ephemeral_ports()
    above = [p for p in range(eph.stop, 65536) if not any(p in r for r in avoid)]
    candidates = above if len(above) >= 1000 else [
        p for p in range(1024, eph.start) if not any(p in r for r in avoid)]
    random.SystemRandom().shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free rendezvous port outside the kernel's ephemeral range")


def default_master_port() -> int:
    """A port derived from the job and step ids, so concurrent jobs on a node do not clash."""
    job = _int_env("SLURM_JOB_ID", default=0)
    step = _int_env("SLURM_STEP_ID", default=0)
    return RDZV_PORT_BASE + (job * 7 + step) % RDZV_PORT_SPAN


def detect() -> DistEnv:
    """Read rank/world from torchrun's variables, else Slurm's, else a single process."""
    rank = _int_env("RANK", "SLURM_PROCID", default=0)
    world = _int_env("WORLD_SIZE", "SLURM_NTASKS", default=1)
    local_rank = _int_env("LOCAL_RANK", "SLURM_LOCALID", default=0)
    # a step's own node count first: a step may use fewer nodes than its allocation
    num_nodes = _int_env("SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES",
                         default=1)
    local_world = _int_env("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE",
                           default=max(1, world // max(1, num_nodes)))
    node_rank = _int_env("GROUP_RANK", "SLURM_NODEID", default=0)
    addr = os.environ.get("MASTER_ADDR")
    if not addr:
        nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
        addr = expand_hostlist(nodelist)[0] if nodelist else "127.0.0.1"
    port = _int_env("MASTER_PORT", default=default_master_port())
    return DistEnv(rank, world, local_rank, local_world, node_rank, num_nodes, addr, port)
