"""Benchmark: one `pctk observe collect` scrape on a 32-node twin with 10,000 finished jobs.

Target: a scrape (sinfo + squeue + sacct over the 24 h window, parsed, exposition rendered)
in < 2 s with 10,000 jobs in accounting. The jobs are real: job arrays of 1,000
`true` tasks on the cpu partition (Slurm's default MaxArraySize is 1001), each batch waited
for before the next (slurmctld keeps ended jobs for MinJobAge=300 s and holds at most
MaxJobCount=10000, so past that sbatch waits until old ones age out). After some batches the
scrape is timed (median of --repeats), with the sacct call alone beside it, to show how the
time grows with the number of jobs.

    .venv/bin/python tests/perf/observe_collect.py [--jobs 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from prometheus_client import generate_latest

from toolkit import slurm
from toolkit.local.twin import Twin
from toolkit.observe import collect

REPO = Path(__file__).resolve().parents[2]
ARRAY = 1000


def config_32(folder: Path) -> Path:
    """The p5-training preset with 16 p5 and 16 c5 nodes (the twin caps at 64)."""
    cfg = yaml.safe_load((REPO / "cluster-configs" / "p5-training.yaml").read_text())
    for queue in cfg["Scheduling"]["SlurmQueues"]:
        for cr in queue["ComputeResources"]:
            cr["MaxCount"] = 16
            cr["MinCount"] = min(cr.get("MinCount", 0), 16)
    path = folder / "observe-perf.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def time_scrape(repeats: int) -> tuple[float, float, int]:
    """(median scrape seconds, median sacct seconds, ended jobs in the window)."""
    reg = collect.registry()
    scrapes, saccts = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        text = generate_latest(reg).decode()
        scrapes.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = slurm.sacct_ended_jobs(time.strftime("%Y-%m-%dT%H:%M:%S",
                                                 time.localtime(time.time() - 86400)))
        saccts.append(time.perf_counter() - t0)
    ended = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("pctk_slurm_jobs_ended{"))
    assert r.returncode == 0, r.stderr
    return statistics.median(scrapes), statistics.median(saccts), int(ended)


def wait_room(env: dict[str, str], n: int, limit: int = 9000, timeout: float = 900) -> None:
    """Wait until slurmctld holds few enough jobs (ended ones included) for ``n`` more."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(["squeue", "-h", "-r", "--states=all", "-o", "%i"],
                           capture_output=True, text=True, env=env)
        if r.returncode == 0 and len(r.stdout.split()) + n <= limit:
            return
        time.sleep(5)
    raise SystemExit(f"slurmctld still holds too many jobs after {timeout:.0f} s")


def wait_idle(env: dict[str, str], timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                           env=env)
        if r.returncode == 0 and not r.stdout.strip():
            return
        time.sleep(2)
    raise SystemExit(f"jobs still queued after {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="pctk-obsperf-", dir="/tmp"))
    twin = Twin(state)
    try:
        st = twin.up(config_32(state), timeout=300)
        os.environ.update(twin.env())
        env = dict(os.environ)
        print(f"twin: {len(st.nodes)} nodes, accounting on")
        rows = [(0, *time_scrape(args.repeats))]
        done, t_jobs = 0, time.perf_counter()
        while done < args.jobs:
            n = min(ARRAY, args.jobs - done)
            wait_room(env, n)
            subprocess.run(["sbatch", "--parsable", "-p", "cpu", f"--array=1-{n}",
                            "-o", "/dev/null", "--wrap", "true"], env=env, check=True,
                           capture_output=True)
            wait_idle(env)
            done += n
            if done in (1000, 2000, 5000) or done >= args.jobs or done % 5000 == 0:
                rows.append((done, *time_scrape(args.repeats)))
                print(f"  {done} jobs finished ({time.perf_counter() - t_jobs:.0f} s so far)",
                      flush=True)
    finally:
        twin.down(purge=True)
    print(f"\n{'jobs submitted':>14} {'ended in sacct':>14} {'scrape s':>9} {'sacct s':>8}")
    for jobs, scrape, sacct, ended in rows:
        print(f"{jobs:>14} {ended:>14} {scrape:>9.3f} {sacct:>8.3f}")
    if len(rows) > 2:  # least squares over the rows with jobs (the first scrape warms up)
        slope = statistics.linear_regression([r[0] for r in rows[1:]],
                                             [r[1] for r in rows[1:]]).slope
        print(f"growth: {slope * 1e6:+.1f} ms per 1,000 jobs (least squares; on a shared "
              "machine the noise between scrapes is larger than the growth)")
    last = rows[-1]
    print(f"target < 2 s at {last[0]} jobs: {'met' if last[1] < 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
