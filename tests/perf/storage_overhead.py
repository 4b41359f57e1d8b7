"""Benchmark: the storage benchmark's sequential-read figure on one node against plain fio
run on the same job file (target: ratio within 10% of 1).

What can differ between the two, and how this script holds it equal:

- the figure's arithmetic: the record's ``seq_read`` MB/s is fio's ``io_bytes`` over fio's
  own ``runtime`` (not the wall time, which includes fio's start-up), exactly what plain fio
  reports as ``bw_bytes``; each round prints the two for the same run (must be 1.000);
- the command: plain fio runs the job file the benchmark wrote, with the benchmark's
  arguments (``--output-format=json+``), laying the files out with the benchmark's write job
  first, in the same folder, so both read freshly written files;
- the page cache: the job files say ``direct=1`` (O_DIRECT, probed; this script refuses a
  folder where the benchmark fell back to buffered I/O, whose reads would come from memory)
  and ``invalidate=1``;
- drift of the disk over time: rounds alternate which side goes first, and each side reads
  ``--jobs`` x ``--size-mib`` (4 GiB by default, a few seconds) so one hiccup weighs less.

What is left is the disk's own run-to-run spread (a shared virtual disk here), printed as
the range of the per-round ratios beside their median.

    .venv/bin/python tests/perf/storage_overhead.py [--size-mib 1024] [--jobs 4] [--rounds 5]
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


def run_benchmark(work: Path, out: Path, size_mib: int, jobs: int) -> tuple[float, float]:
    """(the record's seq_read MB/s, that over fio's own bw_bytes in the same report)."""
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "benchmarks.storage.node", "--target", str(work),
                    "--out-dir", str(out), "--run-id", "perf", "--phases", "seq",
                    "--jobs-per-node", str(jobs), "--size-mib", str(size_mib)],
                   check=True, cwd=REPO)
    rec = json.loads((out / "record.json").read_text())
    if not rec["metrics"]["direct_io"]:
        raise SystemExit(f"{work}: no O_DIRECT here, reads would come from the page cache; "
                         "pick another --dir")
    figure = float(rec["metrics"]["seq_read"]["mb_per_s"])
    raw = json.loads(next(out.glob("fio-*-seq_read.json")).read_text())["jobs"][0]["read"]
    return figure, figure / (raw["bw_bytes"] / 1e6)


def run_plain_fio(out: Path) -> float:
    """Plain fio on the benchmark's own job files: lay out with the write job, then read."""
    write_job = next(out.glob("fio-*-seq_write.fio"))
    read_job = next(out.glob("fio-*-seq_read.fio"))
    folder = Path(next(line.split("=", 1)[1] for line in read_job.read_text().splitlines()
                       if line.startswith("directory=")))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for job, report in ((write_job, "plain-w.json"), (read_job, "plain-r.json")):
            subprocess.run(["fio", "--output-format=json+", f"--output={out / report}",
                            str(job)], check=True)
    finally:
        shutil.rmtree(folder.parent.parent, ignore_errors=True)  # the run's .pctk-storage-*
    read = json.loads((out / "plain-r.json").read_text())["jobs"][0]["read"]
    return float(read["bw_bytes"]) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="folder to test [a tmp folder]")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pctk-storage-perf-", dir=args.dir))
    ratios, accounting = [], []
    try:
        out = base / "out"
        run_benchmark(base / "target", out, 64, args.jobs)  # warm-up; leaves the job files
        for i in range(args.rounds):
            if i % 2 == 0:
                bench, same_run = run_benchmark(base / "target", out, args.size_mib, args.jobs)
                plain = run_plain_fio(out)
            else:
                run_benchmark(base / "target", out, args.size_mib, args.jobs)  # job files
                plain = run_plain_fio(out)
                bench, same_run = run_benchmark(base / "target", out, args.size_mib,
                                                args.jobs)
            ratios.append(bench / plain)
            accounting.append(same_run)
            print(f"round {i + 1}: benchmark {bench:,.0f} MB/s, plain fio {plain:,.0f} MB/s, "
                  f"ratio {bench / plain:.3f} (record / fio's bw_bytes, same run: "
                  f"{same_run:.4f})", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"seq-read ratio benchmark/plain fio: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} round(s) "
          f"({args.jobs} jobs x {args.size_mib} MiB, 1 MiB blocks, direct I/O); record vs "
          f"fio's own figure in the same run: {min(accounting):.4f}-{max(accounting):.4f}")


if __name__ == "__main__":
    main()
