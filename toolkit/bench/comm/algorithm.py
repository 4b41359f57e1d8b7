"""Which NCCL algorithm a run used (Ring, Tree, NVLS, ...), from what its log says.

Evidence, strongest first (strings as NCCL prints them with ``NCCL_DEBUG=INFO``):

- ``NCCL INFO NCCL_ALGO set by environment to Ring`` (or the variable on a command line:
  ``NCCL_ALGO=Ring ./build/all_reduce_perf``, ``mpirun -x NCCL_ALGO=Ring``). The value may
  be a list (``Tree,Ring``), an exclusion (``^NVLS``) or per collective
  (``allreduce:nvls;reducescatter:ring``); only a single algorithm for this collective is
  taken as what ran.
- For all_reduce on one node without ``NCCL_ALGO``: ``NVLS multicast support is available
  on dev N`` together with ``... N nvls channels ...`` > 0 means NCCL runs NVLS at large
  sizes (NVLink SHARP is its default on NVSwitch systems that have it); ``NVLS multicast
  support is not available`` or ``0 nvls channels`` means it cannot, leaving Ring for large
  messages on one node.

Anything else: None, with no guess.
"""

from __future__ import annotations

import re

_ENV = re.compile(r"NCCL INFO NCCL_ALGO set by environment to\s*(\S*)")
_CMDLINE = re.compile(r"(?:^|[\s;])(?:-x\s+|export\s+)?NCCL_ALGO=([^\s;'\"]+)")
_MULTICAST = re.compile(r"NVLS multicast support is (not )?available")
_CHANNELS = re.compile(r"\b(\d+) nvls channels\b")
_NNODES = re.compile(r"NCCL INFO comm \S+ rank \d+ nRanks \d+ nNodes (\d+)")

CANONICAL = {"ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvlstree": "NVLSTree",
             "collnetdirect": "CollnetDirect", "collnetchain": "CollnetChain", "pat": "PAT",
             "collnet": "CollnetDirect"}
_OP_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather",
             "reducescatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
             "sendrecv": "sendrecv", "alltoall": "alltoall"}


def algorithm_from_setting(value: str, collective: str | None) -> str | None:
    """The one algorithm an ``NCCL_ALGO`` value forces for ``collective``, else None."""
    value = value.strip().strip("'\"")
    if ":" in value:
        chosen = None
        for part in value.split(";"):
            op, _, algos = part.partition(":")
            if _OP_NAMES.get(op.strip().lower()) == collective:
                chosen = algos
        if chosen is None:
            return None
        value = chosen
    if value.startswith("^"):
        return None
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    if len(names) != 1:
        return None
    return CANONICAL.get(names[0])


class AlgorithmScanner:
    """Fed one line at a time; bounded state."""

    def __init__(self) -> None:
        self.setting: str | None = None
        self.setting_line: str | None = None
        self.multicast: bool | None = None
        self.nvls_channels: int | None = None
        self.nnodes: int | None = None

    def feed(self, line: str) -> None:
        if "NCCL_ALGO" in line:
            m = _ENV.search(line) or _CMDLINE.search(line)
            if m and self.setting is None:
                self.setting, self.setting_line = m.group(1), line.strip()
            return
        if "NCCL INFO" not in line:
            return
        if "NVLS multicast" in line and (m := _MULTICAST.search(line)):
            available = m.group(1) is None
            self.multicast = available if self.multicast is None else self.multicast and available
        elif "nvls channels" in line and (m := _CHANNELS.search(line)):
            n = int(m.group(1))
            self.nvls_channels = n if self.nvls_channels is None else min(n, self.nvls_channels)
        elif "nNodes" in line and (m := _NNODES.search(line)):
            self.nnodes = max(int(m.group(1)), self.nnodes or 0)

    def result(self, collective: str | None, hosts: int | None) -> tuple[str | None, str | None]:
        """(algorithm, where that comes from)."""
        if self.setting is not None:
            algo = algorithm_from_setting(self.setting, collective)
            if algo:
                return algo, f"NCCL_ALGO={self.setting} ({self.setting_line})"
            return None, f"NCCL_ALGO={self.setting} leaves NCCL a choice"
        nodes = self.nnodes or hosts
        if collective != "all_reduce" or nodes != 1:
            return None, None
        if self.multicast and (self.nvls_channels or 0) > 0:
            return "NVLS", (f"NVLS multicast available and {self.nvls_channels} nvls channels "
                            "on one node (NCCL's default for large all_reduce there)")
        if self.multicast is False or self.nvls_channels == 0:
            why = ("NVLS multicast not available" if self.multicast is False
                   else "0 nvls channels")
            return "Ring", f"{why} on one node: large all_reduce runs Ring"
        return None, None
