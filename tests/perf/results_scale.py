"""Benchmark: `pctk results compare`, `pctk results trend` and `pctk report` over large
results databases (default 1,000 and 10,000 records).

Each database holds the history ``tests/results/records.fill_history`` builds: three
clusters, nightly nccl-tests, fsdp every third night, health every fifth, 2% noise and one
10% drop with an NCCL version change two thirds of the way through.

For each command: wall seconds, CPU seconds and the child's peak RSS (os.wait4; a child's
peak starts from its parent's at fork, so the databases are built in a separate process and
this one stays small). Target at 10,000 records: under 10 s and 1 GiB.

    .venv/bin/python tests/perf/results_scale.py [--records 1000 10000] [--keep DIR]
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
sys.path.insert(0, str(ROOT))

from tests.results.records import fill_history  # noqa: E402
from toolkit.results.store import ResultStore  # noqa: E402

PCTK = Path(sys.executable).parent / "pctk"
def measure(argv: list[str]) -> tuple[float, float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(PCTK), *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"pctk {' '.join(argv)} exited {code}: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--keep", type=Path, help="build the databases here and keep them")
    ap.add_argument("--build-only", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build_only:
        with ResultStore(args.build_only) as store:
            fill_history(store, args.records[0])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for count in args.records:
            db = folder / f"results-{count}.db"
            if not db.exists():
                t0 = time.perf_counter()
                subprocess.run([sys.executable, __file__, "--build-only", str(db),
                                "--records", str(count)], check=True)
                print(f"{count} records: built in {time.perf_counter() - t0:.1f} s, "
                      f"{db.stat().st_size / (1 << 20):.0f} MiB")
            for argv in (["results", "compare", "--json"], ["results", "trend", "--json"],
                         ["report", "--out", str(folder / f"report-{count}.html")]):
                wall, cpu, rss, code = measure([*argv, "--db", str(db)])
                print(f"  {' '.join(argv[:2]):<16} wall {wall:5.1f} s, CPU {cpu:5.1f} s, "
                      f"peak RSS {rss:5.0f} MiB, exit {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
