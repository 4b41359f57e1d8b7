"""Benchmark: the storage benchmark's sequential-read figure on one node against plain fio
run on the same job file (target: ratio within 10% of 1).

Each round runs ``python -m benchmarks.storage.node --phases seq`` (one node, no Slurm:
its barriers have a single member), then plain ``fio`` on the write and read job files
that run wrote, and compares fio's read bandwidth with the record's ``seq_read`` MB/s.
Rounds alternate which side goes first so the page cache and disk drift do not favour one.
Each round also prints the record's figure over fio's own ``bw_bytes`` for the same run,
which isolates the benchmark's accounting from the disk's run-to-run noise.

    .venv/bin/python tests/perf/storage_overhead.py [--size-mib 256] [--jobs 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_benchmark(work: Path, out: Path, size_mib: int, jobs: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "benchmarks.storage.node", "--target", str(work),
                    "--out-dir", str(out), "--run-id", "perf", "--phases", "seq",
                    "--jobs-per-node", str(jobs), "--size-mib", str(size_mib)],
                   check=True, cwd=REPO)
    rec = json.loads((out / "record.json").read_text())
    figure = float(rec["metrics"]["seq_read"]["mb_per_s"])
    # the same run as fio itself reported it: the record's accounting should add nothing
    raw = json.loads(next(out.glob("fio-*-seq_read.json")).read_text())["jobs"][0]["read"]
    print(f"  benchmark figure / fio's own bw in that run: {figure / (raw['bw_bytes'] / 1e6):.3f}")
    return figure


def run_plain_fio(out: Path) -> float:
    """Plain fio on the benchmark's own job files: lay out with the write job, then read."""
    write_job = next(out.glob("fio-*-seq_write.fio"))
    read_job = next(out.glob("fio-*-seq_read.fio"))
    folder = Path(next(line.split("=", 1)[1] for line in read_job.read_text().splitlines()
                       if line.startswith("directory=")))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["fio", "--output-format=json", f"--output={out / 'plain-w.json'}",
                        str(write_job)], check=True)
        subprocess.run(["fio", "--output-format=json", f"--output={out / 'plain-r.json'}",
                        str(read_job)], check=True)
    finally:
        shutil.rmtree(folder.parent.parent, ignore_errors=True)  # the run's .pctk-storage-*
    read = json.loads((out / "plain-r.json").read_text())["jobs"][0]["read"]
    return read["io_bytes"] / (read["runtime"] / 1000) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="folder to test [a tmp folder]")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pctk-storage-perf-", dir=args.dir))
    ratios = []
    try:
        for i in range(args.rounds):
            out = base / "out"
            if i % 2 == 0:
                bench = run_benchmark(base / "target", out, args.size_mib, args.jobs)
                plain = run_plain_fio(out)
            else:
                run_benchmark(base / "target", out, args.size_mib, args.jobs)  # job files
                plain = run_plain_fio(out)
                bench = run_benchmark(base / "target", out, args.size_mib, args.jobs)
            ratios.append(bench / plain)
            print(f"round {i + 1}: benchmark {bench:,.0f} MB/s, plain fio {plain:,.0f} MB/s, "
                  f"ratio {bench / plain:.3f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"seq-read ratio benchmark/plain fio: median {statistics.median(ratios):.3f} "
          f"over {len(ratios)} round(s) ({args.jobs} jobs x {args.size_mib} MiB, 1 MiB blocks)")


if __name__ == "__main__":
    main()
