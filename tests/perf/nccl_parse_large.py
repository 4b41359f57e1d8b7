"""Benchmark: time and peak memory of ``pctk bench nccl parse`` on a ~200 MB real log.

The log is made from a real published one (fixture 05: 16 ranks on 2 p4d nodes with
NCCL_DEBUG=INFO, 72 KB) in one of two ways:

- ``repeat``: the whole log over and over, as a long shell loop would leave it (about 2,800
  complete runs);
- ``single``: one run whose INFO section is repeated, as a verbose debug log of one long
  run looks (one table at the end).

Prints the size, wall seconds, CPU seconds and the child's peak RSS for each (a child's
peak RSS starts from its parent's at fork; this script stays small, about 15 MiB).

    .venv/bin/python tests/perf/nccl_parse_large.py [--mb 200] [--mode repeat|single|both]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REAL_LOG = (ROOT / "tests" / "nccl" / "fixtures" /
            "05_aws-efa-eks-p4d-16rank-oldformat-info.log")
PCTK = Path(sys.executable).parent / "pctk"


def make_repeated(path: Path, target: int) -> None:
    text = REAL_LOG.read_bytes()
    with path.open("wb") as fh:
        for _ in range(target // len(text) + 1):
            fh.write(text)


def make_single(path: Path, target: int) -> None:
    lines = REAL_LOG.read_bytes().splitlines(keepends=True)
    header = next(i for i, ln in enumerate(lines) if b"size         count" in ln)
    first_row = header + 2
    info = [ln for ln in lines[:header] if b"NCCL INFO" in ln]
    block = b"".join(info)
    with path.open("wb") as fh:
        fh.write(b"".join(lines[:header - 1]))
        for _ in range(max(1, (target - len(REAL_LOG.read_bytes())) // len(block))):
            fh.write(block)
        fh.write(b"".join(lines[header - 1:first_row]))
        fh.write(b"".join(lines[first_row:]))


def measure(log: Path, out: Path) -> tuple[float, float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(PCTK), "bench", "nccl", "parse", str(log), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"pctk exited {proc.returncode}: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--mode", choices=("repeat", "single", "both"), default="both")
    args = ap.parse_args()
    modes = ("repeat", "single") if args.mode == "both" else (args.mode,)
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            log = Path(tmp) / f"{mode}.log"
            (make_repeated if mode == "repeat" else make_single)(log, args.mb << 20)
            wall, cpu, rss_mb, rc = measure(log, Path(tmp) / f"{mode}.json")
            size = log.stat().st_size / (1 << 20)
            print(f"{mode}: {size:.0f} MiB log, wall {wall:.1f} s, CPU {cpu:.1f} s, "
                  f"peak RSS {rss_mb:.0f} MiB, exit {rc}")
            log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
