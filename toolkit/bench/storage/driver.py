"""``pctk bench storage``: what the shared file system delivers to N nodes at once.

One ``sbatch`` of ``sbatch/storage.sbatch`` (the script a researcher can also submit by
hand) over N nodes, waited for with :func:`toolkit.slurm.wait_job`; node 0 writes
the record, and this side adds the verdict against the cluster config.
:func:`bench_storage` is what ``pctk bench storage`` calls: the config and the instance
type's network ceiling looked up, :func:`run_storage`, the record stored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import read_record, write_record
from benchmarks.storage.node import PHASES, block_size_problem, parse_block_sizes
from toolkit import catalog, slurm
from toolkit.bench.storage import expect
from toolkit.config.yamlio import load_yaml
from toolkit.errors import PctkError
from toolkit.joblog import no_record_error
from toolkit.paths import code_root, new_run_dir, resolve_config, sbatch_script
from toolkit.submit.cluster import find_cluster_config
from toolkit.submit.jobspec import JobSpec, sbatch_options

REPO = code_root()
SBATCH_SCRIPT = sbatch_script("storage.sbatch")
# Judged against the expectation: the sequential phases (file per process) and the
# checkpoint pattern (every rank writes its shard at the same moment, then reads it back),
# whose figures decide how long a checkpoint stalls training. The shared-file variant,
# random reads and metadata get figures only: the config states no expectation for them.
VERDICT_PHASES = ("seq_write", "seq_read", "ckpt_write", "ckpt_read")


@dataclass
class StorageJob:
    nodes: int
    target: str  # the folder the nodes write under; bench_storage fills "" from the config
    run_dir: Path
    jobs_per_node: int = 8
    size_mib: int = 1024
    ckpt_mib: int = 1024
    rand_seconds: int = 10
    meta_files: int = 1000
    phases: str = "seq,rand,shared,ckpt,meta"
    partition: str | None = None
    time_limit: str | None = None
    share_timeout: float = 30.0
    direct: bool = True  # False: buffered I/O even where O_DIRECT works
    block_sizes: str = "1M"  # throughput phases at each size, e.g. "1M,4M"
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def node_args(self) -> list[str]:
        return ["--target", self.target, "--out-dir", str(self.run_dir), "--run-id",
                self.run_id, "--jobs-per-node", str(self.jobs_per_node), "--size-mib",
                str(self.size_mib), "--ckpt-mib", str(self.ckpt_mib), "--rand-seconds",
                str(self.rand_seconds), "--meta-files", str(self.meta_files), "--phases",
                self.phases, "--share-timeout", str(self.share_timeout),
                "--block-sizes", self.block_sizes,
                *([] if self.direct else ["--no-direct"])]

    def sbatch_args(self) -> list[str]:
        spec = JobSpec(nodes=self.nodes, ntasks_per_node=1, partition=self.partition,
                       time=self.time_limit, output=str(self.run_dir / "slurm-%j.out"),
                       chdir=str(REPO), export="ALL")
        return [*sbatch_options(spec), str(SBATCH_SCRIPT), *self.node_args()]


def made_at_the_root(target: str) -> bool:
    """Would the nodes create ``target`` as a new folder directly under ``/``? A mistyped
    target (``/fxs/bench``) then benchmarks, and fills, the root disk. The part before a
    ``%n`` (the node name) is what must exist."""
    path = Path(target.split("%n", 1)[0] or "/")
    while not path.exists() and path != path.parent:
        if path.parent == Path("/"):
            return True
        path = path.parent
    return False


def validate(job: StorageJob) -> None:
    for name in ("nodes", "jobs_per_node", "size_mib", "ckpt_mib", "rand_seconds",
                 "meta_files"):
        if getattr(job, name) < 1:
            raise PctkError(f"--{name.replace('_', '-')} must be at least 1")
    try:
        blocks = parse_block_sizes(job.block_sizes)
    except argparse.ArgumentTypeError as exc:
        raise PctkError(f"--block-sizes: {exc}", "e.g. --block-sizes 1M,4M") from None
    if problem := block_size_problem(blocks, job.size_mib, job.ckpt_mib):
        raise PctkError(problem, "pick block sizes that divide --size-mib and --ckpt-mib")
    if unknown := sorted(set(job.phases.split(",")) - set(PHASES) - {""}):
        raise PctkError(f"unknown phase(s) {', '.join(unknown)}", f"use {','.join(PHASES)}")
    if not job.target.startswith("/"):
        raise PctkError(f"--target {job.target!r} is not an absolute path",
                        "give the folder as the nodes see it, e.g. /fsx/bench")
    if made_at_the_root(job.target):
        raise PctkError(f"--target {job.target}: no such folder, and the benchmark would make "
                        "it at the top of / (the root disk, not a shared file system)",
                        "check the path, or create the folder first; the shared file "
                        "system's MountDir (e.g. /fsx) is the usual parent")
    if any(c.isspace() for c in str(job.run_dir)):
        raise PctkError(f"run folder {str(job.run_dir)!r} has whitespace",
                        "pick a --run-dir with no whitespace")


def job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PCTK_PYTHON"] = sys.executable
    env["PCTK_REPO"] = str(REPO)
    return env


def refusals(run_dir: Path) -> list[str]:
    out = []
    for path in sorted(run_dir.glob("refused-*.json")):
        node = path.stem.removeprefix("refused-")
        try:
            info = json.loads(path.read_text())
            out.append(f"{info['node']}: {info['reason']}")
        except (OSError, ValueError, KeyError, TypeError):
            out.append(f"{node}: refused (its note is unreadable: {path})")
    return out


def apply_verdict(rec: dict[str, Any], config: Any | None,
                  network_gbps: float | None) -> dict[str, Any]:
    """Judge the record's sequential and checkpoint figures against the config (UNKNOWN
    without one)."""
    target, nodes = rec["params"]["target"], rec["params"]["nodes"]
    entry = expect.mount_for(config, target) if config is not None else None
    prov = expect.provisioned(entry) if entry else None
    ceiling = expect.client_ceiling(network_gbps, nodes) if network_gbps else None
    measured = {p: rec["metrics"][p]["mb_per_s"] for p in VERDICT_PHASES
                if rec["metrics"].get(p, {}).get("mb_per_s") is not None}
    status, reasons, expected = expect.judge(measured, prov, ceiling)
    if config is None:
        reasons = ["no cluster config given (--config); figures only"]
    rec["verdict"] = {"status": status, "reasons": reasons}
    rec["metrics"]["expected_mb_per_s"] = expected
    rec["metrics"]["provisioned_mb_per_s"] = prov.mb_per_s if prov else None
    rec["metrics"]["client_ceiling_mb_per_s"] = ceiling
    return rec


def run_storage(job: StorageJob, *, config: Any | None = None,
                network_gbps: float | None = None, timeout: float | None = None,
                detect_instance: bool = True,
                on_state: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Submit the job, wait, judge; returns the record (also written to run_dir).

    Without ``network_gbps`` the client ceiling comes from the instance type the nodes
    report (their Slurm features) when the catalog knows it and ``detect_instance``.
    """
    validate(job)
    job.run_dir.mkdir(parents=True, exist_ok=True)
    if leftovers := [p.name for pattern in ("record.json", "node-*.json", "refused-*.json")
                     for p in job.run_dir.glob(pattern)]:
        raise PctkError(f"run folder {job.run_dir} already holds a run ({leftovers[0]})",
                        "pick a new --run-dir")
    job_id = slurm.sbatch(job.sbatch_args(), env=job_env())
    # Ctrl-C or SIGTERM here: `pctk bench storage` says the job keeps running and how to
    # cancel it (toolkit.submit.longrun); scancel removes its files
    state = slurm.wait_job(job_id, timeout=timeout, on_state=on_state)
    log = job.run_dir / f"slurm-{job_id}.out"
    if refused := refusals(job.run_dir):
        raise PctkError(f"target {job.target} refused before any data was written: "
                        f"{refused[0]}", "point --target at a folder on a file system "
                        "every node mounts, with enough free space", log=str(log))
    path = job.run_dir / "record.json"
    if not path.exists():
        raise no_record_error(job_id, state, log)
    rec = read_record(path)
    if network_gbps is None and detect_instance and rec["cluster"].get("instance_type"):
        found = catalog.find(rec["cluster"]["instance_type"])
        network_gbps = found.network_gbps if found else None
    rec = apply_verdict(rec, config, network_gbps)
    rec["cluster"]["job_id"] = job_id
    rec["params"]["job_state"] = state
    write_record(path, rec)
    return rec


def default_run_dir() -> Path:
    """``<state home>/runs/storage-<time>``, as every benchmark's (docs/commands.md, "Where
    pctk writes")."""
    return new_run_dir("storage")


def storage_config(config: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The cluster config the run is judged against: ``--config`` (a file or a preset name, as
    every command takes it), else the one the other commands find (the running twin's,
    ParallelCluster's own copy on a head node, $PCTK_CLUSTER_CONFIG); None when none is."""
    if config is not None:
        return load_yaml(resolve_config(config))
    try:
        return load_yaml(find_cluster_config())
    except PctkError:
        return None


@dataclass
class StorageResult:
    record: dict[str, Any]
    record_path: Path
    stored: str | None = None  # its id in the results database

    @property
    def failed(self) -> bool:
        return bool(self.record["verdict"]["status"] == "FAIL")


def bench_storage(job: StorageJob, *, config_path: str | os.PathLike[str] | None = None,
                  instance_type: str | None = None, timeout: float | None = None,
                  on_state: Callable[[str], None] | None = None) -> StorageResult:
    """The whole benchmark from a cluster config: an empty ``job.target`` becomes the
    config's first SharedStorage MountDir; the client ceiling comes from ``instance_type``
    in the catalog (else from the nodes' Slurm feature); the record is judged against the
    config (the command adds it to the results database: results sit above benchmarks)."""
    config = storage_config(config_path)
    if not job.target:
        found = expect.first_mount_dir(config) if config is not None else None
        if found is None:
            raise PctkError("no --target, and no SharedStorage MountDir in a --config",
                            "give --target /fsx/bench or --config cluster.yaml")
        job.target = found
    gbps = catalog.get(instance_type).network_gbps if instance_type else None
    rec = run_storage(job, config=config, network_gbps=gbps, timeout=timeout,
                      detect_instance=instance_type is None, on_state=on_state)
    path = job.run_dir / "record.json"
    return StorageResult(rec, path)
