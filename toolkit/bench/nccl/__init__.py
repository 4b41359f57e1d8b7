"""nccl-tests, one source of the collectives core (:mod:`toolkit.bench.comm`, where the
``metrics`` layout of their records is documented): find and launch the binaries, parse their
text and ``-J`` JSON output, and the ``pctk bench nccl`` command.
"""

from __future__ import annotations

from toolkit.bench.comm.model import CollectiveRun, Measurement, Row
from toolkit.bench.nccl.parse import parse_nccl_file, parse_nccl_output

__all__ = ["CollectiveRun", "Measurement", "Row", "parse_nccl_file", "parse_nccl_output"]
