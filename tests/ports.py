"""A rendezvous port for ranks a test starts on this host.

``bind(("", 0))`` hands out a port from the kernel's ephemeral range, and the port is free
again once the probe socket closes: in the seconds the ranks take to import torch on a busy
host, any outbound connection may be given it as its source port, and a twin starting in
another xdist worker may take it (twins pick blocks in 10000-19999 and 40000-59999, jobs on a
twin rendezvous on 20000-31999). The ranks then fail with EADDRINUSE. So pick a port that
none of those hand out: above the ephemeral range where there is room, else below it, and
never in a twin's or a twin job's range.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

from benchmarks.distenv import RDZV_PORT_BASE, RDZV_PORT_SPAN
from toolkit.local.plan import PORT_BLOCKS

# what pctk itself hands out on this host: twin blocks and the rendezvous ports of jobs on a
# twin (20000 + job id mod 12000: toolkit.submit.jobspec, benchmarks.distenv)
_TAKEN = (*(range(b.start, b.stop) for b in PORT_BLOCKS),
          range(RDZV_PORT_BASE, RDZV_PORT_BASE + RDZV_PORT_SPAN))


def _ephemeral() -> range:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2]
        return range(int(lo), int(hi) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default


def _candidates() -> list[int]:
    eph = _ephemeral()
    above = [p for p in range(eph.stop, 65536) if not any(p in r for r in _TAKEN)]
    if len(above) >= 1000:
        return above
    return [p for p in range(1024, eph.start) if not any(p in r for r in _TAKEN)]


def rendezvous_port() -> int:
    """A port that is free now and that neither the kernel nor a twin hands out."""
    candidates = _candidates()
    random.SystemRandom().shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free rendezvous port outside the ephemeral and twin ranges")
