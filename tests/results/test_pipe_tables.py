"""Tables in a pipe or a log: full width, one row a line, nothing cut (`results list` in the
`make demo` log was one character a line, node names ended in "…")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.record import write_record

from . import records

PCTK = Path(sys.executable).with_name("pctk")  # the console script, as a user runs it
LONG_CLUSTER = "train-dy-p4d24xlarge-research-team-cluster"


def _pctk(*argv: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PCTK_HOME=str(home))
    env.pop("PCTK_RESULTS_DB", None)
    # stdout and stderr are pipes, as in `make demo > log` or `pctk results list | less`
    return subprocess.run([str(PCTK), *map(str, argv)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_results_list_in_a_pipe_prints_whole_rows(tmp_path: Path) -> None:
    recs = [records.nccl_record(name=LONG_CLUSTER), records.fsdp_record(),
            records.health_record(fail=("gpu-st-p5-2", "gpu_count"))]
    paths = [write_record(tmp_path / f"{r['kind']}-{i}.json", r) for i, r in enumerate(recs)]
    home = tmp_path / "home"
    assert _pctk("results", "add", *paths, home=home).returncode == 0
    r = _pctk("results", "list", home=home)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "…" not in r.stdout and "\x1b[" not in r.stdout  # nothing cut, no colour codes
    assert not any(ch in r.stdout for ch in "│┃━─┏")  # plain: no box drawing
    row = next(line for line in lines if LONG_CLUSTER in line)
    # the whole row on one line: id, kind, cluster, instance type, verdict and figures
    assert "nccl-tests" in row and "p5.48xlarge" in row and "468.2 GB/s @ 16 GiB" in row
    assert all(line == line.rstrip() for line in lines)
    header = next(line for line in lines if line.lstrip().startswith("id"))
    assert header.split() == ["id", "created", "kind", "cluster", "instance", "type", "nodes",
                              "verdict", "figures"]


def test_config_show_in_a_pipe_keeps_every_column(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("""\
Region: us-east-1
Image: {Os: alinux2023}
HeadNode: {InstanceType: m5.8xlarge, Networking: {SubnetId: subnet-1}}
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: train-queue-with-a-long-name
      Networking: {SubnetIds: [subnet-1]}
      ComputeResources:
        - {Name: p4d-compute-resource, InstanceType: p4d.24xlarge, MinCount: 0, MaxCount: 16}
    - Name: cpu
      Networking: {SubnetIds: [subnet-1]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.2xlarge, MinCount: 0, MaxCount: 8}
""")
    r = _pctk("config", "show", config, home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if "p4d-compute-resource" in line]
    assert row.split() == ["train-queue-with-a-long-name", "p4d-compute-resource",
                           "p4d.24xlarge", "ONDEMAND", "0", "16", "8", "x", "A100-40GB", "no",
                           "21.96"]
    (cpu,) = [line for line in r.stdout.splitlines() if "c5.2xlarge" in line]
    assert cpu.split()[-1] == "0.34"  # the catalog knows its price now
