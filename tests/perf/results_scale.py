"""Benchmark: `pctk results compare`, `pctk results trend` and `pctk report` over large
results databases (default 1,000 and 10,000 records).

Each database holds a year-like history over three clusters (p5.48xlarge, p4d.24xlarge,
p5.48xlarge at 4 nodes): per night an nccl-tests all_reduce sweep (real nccl-tests output
parsed and judged by toolkit.nccl, via tests/results/records.py), every third night an
fsdp run and every fifth a health sweep; 2% run-to-run noise and one 10% busbw drop with an
NCCL version change two thirds of the way through. Records are built once per shape and
copied with a new id, date and scaled figures, so building 10,000 takes seconds.

For each command: wall seconds, CPU seconds and the child's peak RSS (os.wait4; a child's
peak starts from its parent's at fork, so the databases are built in a separate process and
this one stays small). Target at 10,000 records: under 10 s and 1 GiB.

    .venv/bin/python tests/perf/results_scale.py [--records 1000 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.results import records  # noqa: E402
from toolkit.results.store import ResultStore  # noqa: E402

PCTK = Path(sys.executable).parent / "pctk"
CLUSTERS = (("train-a", "p5.48xlarge", 2), ("train-b", "p4d.24xlarge", 2),
            ("train-c", "p5.48xlarge", 4))


def templates() -> dict[str, dict[str, Any]]:
    return {"nccl-tests": records.nccl_record(), "fsdp": records.fsdp_record(),
            "health": records.health_record()}


def _scale_busbw(rec: dict[str, Any], factor: float) -> None:
    for block in rec["metrics"].get("collectives") or []:
        for row in block.get("rows") or []:
            for side in ("out_of_place", "in_place"):
                part = row.get(side)
                if isinstance(part, dict):
                    for key in ("busbw_gbps", "algbw_gbps"):
                        if isinstance(part.get(key), float):
                            part[key] = round(part[key] * factor, 2)


def night_record(template: dict[str, Any], cluster: tuple[str, str, int], night: int,
                 hour: int, factor: float, nccl: str) -> dict[str, Any]:
    rec = copy.deepcopy(template)
    rec["id"] = uuid.uuid4().hex
    rec["created"] = (f"{2025 + night // 336}-{1 + night % 336 // 28:02d}-"
                      f"{1 + night % 28:02d}T{hour:02d}:00:00Z")
    name, instance_type, nodes = cluster
    rec["cluster"] = {**rec["cluster"], "name": name, "instance_type": instance_type,
                      "nodes": nodes}
    rec["software"] = {**rec["software"], "nccl": nccl}
    if rec["kind"] == "nccl-tests":
        _scale_busbw(rec, factor)
    elif rec["kind"] == "fsdp":
        rec["metrics"]["tokens_per_s_per_gpu"] *= factor
    return rec


def build_db(path: Path, count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    shapes = templates()
    nights = count * 15 // (len(CLUSTERS) * 23)  # 1 + 1/3 + 1/5 records per night
    made = 0
    with ResultStore(path) as store:
        for night in range(nights + 10):
            for cluster in CLUSTERS:
                kinds = ["nccl-tests"] + (["fsdp"] if night % 3 == 0 else []) + (
                    ["health"] if night % 5 == 0 else [])
                for hour, kind in enumerate(kinds, start=2):
                    if made == count:
                        return
                    late = night > nights * 2 // 3
                    factor = (0.9 if late else 1.0) * rng.gauss(1.0, 0.02)
                    store.add(night_record(shapes[kind], cluster, night, hour, factor,
                                           "2.23.4" if late else "2.21.5"))
                    made += 1


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
        build_db(args.build_only, args.records[0])
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
