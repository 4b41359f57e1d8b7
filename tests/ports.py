"""A rendezvous port for ranks a test starts on this host.

``bind(("", 0))`` hands out a port from the kernel's ephemeral range, and the port is free
again once the probe socket closes: in the seconds the ranks take to import torch on a busy
host, any outbound connection may be given it as its source port, and a twin starting in
another xdist worker may take it (twins pick blocks in 10000-19999 and 40000-59999, jobs on a
twin rendezvous on 20000-31999). The ranks then fail with EADDRINUSE. So pick a port that
none of those hand out: ``benchmarks.distenv.local_rendezvous_port`` (above the ephemeral
range where there is room, else below it) told to avoid a twin's and a twin job's ranges.
"""

from __future__ import annotations

from benchmarks.distenv import RDZV_PORT_BASE, RDZV_PORT_SPAN, local_rendezvous_port
from toolkit.local.plan import PORT_BLOCKS

# what pctk itself hands out on this host: twin blocks and the rendezvous ports of jobs on a
# twin (20000 + job id mod 12000: toolkit.submit.jobspec, benchmarks.distenv)
_TAKEN = (*(range(b.start, b.stop) for b in PORT_BLOCKS),
          range(RDZV_PORT_BASE, RDZV_PORT_BASE + RDZV_PORT_SPAN))


def rendezvous_port() -> int:
    """A port that is free now and that neither the kernel nor a twin hands out."""
    return local_rendezvous_port(avoid=_TAKEN)
