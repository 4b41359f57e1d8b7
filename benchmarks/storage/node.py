"""The storage benchmark on one node; ``srun`` starts one copy per node, all at once.

    python -m benchmarks.storage.node --target /fsx/bench --out-dir RUN_DIR --run-id ID

Before writing any data it refuses a target that lacks the free space the run needs, or
that is not shared between the nodes (each node leaves a marker; all must see all). Then
phases run in step, a barrier before each: sequential write and read (1 MiB blocks, one
file per process), random 4 KiB reads, sequential write and read of one file shared by
every process of every node (disjoint regions), the checkpoint pattern (each rank writes its shard,
then reads it back), metadata create/stat/remove. ``--block-sizes 1M,4M`` repeats each
throughput phase at every block size: the first keeps the plain phase name (``seq_read``),
the others are named ``seq_read@4M``. Each node writes ``node-NAME.json`` and
fio's raw reports into the out folder; node 0 then builds the record. The files written
to the target are removed on every exit path, including SIGTERM from ``scancel``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.record import atomic_write_text
from benchmarks.storage import barrier, fio, metadata

MiB = 1 << 20
PHASES = ("seq", "rand", "shared", "ckpt", "meta")
REFUSED = 3  # exit status of a refused target
SHARED_FILE = "shared.dat"
MARGIN_BYTES = 64 * MiB  # beyond the data itself: fio's and the metadata phase's small files
STOP_GRACE_S = 2.0  # how long a stopped fio gets to exit before SIGKILL


class Refused(Exception):
    """The target cannot be used; nothing was written to it."""


class Stopped(BaseException):
    """SIGTERM/SIGINT/SIGHUP: unwind so the ``finally`` blocks remove the files."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.storage.node")
    p.add_argument("--target", required=True,
                   help="folder on the shared file system; %%n is replaced by the node name")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--run-id", required=True)
    p.add_argument("--jobs-per-node", type=int, default=8)
    p.add_argument("--size-mib", type=int, default=1024, help="per process, sequential phase")
    p.add_argument("--ckpt-mib", type=int, default=1024, help="shard per rank, checkpoint")
    p.add_argument("--rand-seconds", type=int, default=10)
    p.add_argument("--meta-files", type=int, default=1000, help="per node")
    p.add_argument("--phases", default=",".join(PHASES))
    p.add_argument("--block-sizes", default=fio.BLOCK_SEQ, type=parse_block_sizes,
                   help="block sizes of the throughput phases, e.g. 1M,4M (the first one "
                        "gives the plain phase names)")
    p.add_argument("--no-direct", action="store_true",
                   help="buffered I/O even where O_DIRECT works (it is probed otherwise)")
    p.add_argument("--share-timeout", type=float, default=30.0)
    p.add_argument("--phase-timeout", type=float, default=3600.0)
    p.add_argument("--fio", default="fio")
    return p.parse_args(argv)


BLOCK_SIZE = re.compile(r"^([1-9][0-9]{0,6})([kKmM])$")


def block_bytes(text: str) -> int:
    m = BLOCK_SIZE.match(text)
    if not m:
        raise ValueError(text)
    return int(m[1]) << (10 if m[2] in "kK" else 20)


def parse_block_sizes(text: str) -> list[str]:
    """``1M,4M`` -> ["1M", "4M"]: sizes fio reads (k or M suffix), each once, in order."""
    sizes: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            block_bytes(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"block size {item!r} is not a number with a k or M suffix (1M, 512k)"
            ) from None
        canonical = item[:-1] + ("k" if item[-1] in "kK" else "M")
        if canonical not in sizes:
            sizes.append(canonical)
    return sizes


def block_size_problem(blocks: list[str], size_mib: int, ckpt_mib: int) -> str | None:
    """Why these block sizes do not fit the files (each file a whole number of blocks)."""
    for block in blocks:
        for flag, mib in (("--size-mib", size_mib), ("--ckpt-mib", ckpt_mib)):
            if (mib * MiB) % block_bytes(block):
                return f"block size {block} does not divide {flag} {mib} (MiB per file)"
    return None


def phase_name(phase: str, block: str, first: str) -> str:
    return phase if block == first else f"{phase}@{block}"


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def expand_target(target: str, node: str) -> Path:
    return Path(target.replace("%n", node))


def needed_bytes(args: argparse.Namespace, nodes: int, phases: list[str]) -> int:
    per_node = 0
    if "seq" in phases or "rand" in phases:
        per_node += args.jobs_per_node * args.size_mib * MiB
    if "shared" in phases:  # kept until the end of the run: other nodes may still read it
        per_node += args.jobs_per_node * args.size_mib * MiB
    if "ckpt" in phases:
        per_node += args.jobs_per_node * args.ckpt_mib * MiB
    return nodes * per_node + MARGIN_BYTES


def existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_space(target: Path, needed: int) -> None:
    st = os.statvfs(existing_parent(target))
    free = st.f_bavail * st.f_frsize
    if free < needed:
        raise Refused(f"{target} has {free / MiB:.0f} MiB free; the run needs "
                      f"{needed / MiB:.0f} MiB (all nodes' files)")


def check_shared(hello: Path, node: str, nodes: int, timeout_s: float) -> None:
    try:
        barrier.wait(hello, node, nodes, timeout_s)
    except barrier.BarrierTimeout as exc:
        raise Refused(f"{hello.parent.parent} is not shared between the nodes: {exc} "
                      "(each node sees only its own marker file)") from None


def direct_io_works(folder: Path) -> bool:
    """Whether O_DIRECT writes work here (tmpfs and some FUSE mounts refuse them)."""
    probe = folder / ".direct-probe"
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT requires
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | getattr(os, "O_DIRECT", 0), 0o600)
        try:
            os.write(fd, buf)
        finally:
            os.close(fd)
        return hasattr(os, "O_DIRECT")
    except OSError:
        return False
    finally:
        buf.close()
        probe.unlink(missing_ok=True)


class NodeRun:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.node = node_name()
        self.rank = int(os.environ.get("SLURM_NODEID", "0"))
        self.nodes = int(os.environ.get("SLURM_NNODES") or os.environ.get("SLURM_JOB_NUM_NODES")
                         or "1")
        self.target = expand_target(args.target, self.node)
        self.work = self.target / f".pctk-storage-{args.run_id}"
        self.data = self.work / "data" / self.node
        self.shared = self.work / "shared"  # the shared-file variant's one file
        self.out = args.out_dir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.result: dict[str, Any] = {"node": self.node, "rank": self.rank, "phases": {}}

    def sync(self, name: str, timeout_s: float | None = None) -> None:
        barrier.wait(self.work / "barrier" / name, self.node, self.nodes,
                     self.args.phase_timeout if timeout_s is None else timeout_s)

    def fio_phase(self, phase: str, job: fio.FioJob) -> None:
        job_file = self.out / f"fio-{self.node}-{phase}.fio"
        job_file.write_text(job.text())
        self.sync(phase)
        start = time.monotonic()
        res = fio.run(job_file, self.out / f"fio-{self.node}-{phase}.json", procs=self.procs,
                      fio=self.args.fio)
        self.result["phases"][phase] = {
            "bytes": res.io_bytes, "seconds": res.runtime_ms / 1000.0,
            "wall_s": round(time.monotonic() - start, 6), "iops": res.iops,
            "ios": res.total_ios, "lat_p50_us": res.lat_p50_us, "lat_p99_us": res.lat_p99_us,
            "fio_version": res.version, "direct": job.direct, "raw": job_file.stem + ".json",
            "block": job.block,
        }
        if res.clat_bins_ns is not None and phase == "rand_read":
            # for latency percentiles over every node's I/Os (benchmarks.storage.aggregate)
            self.result["phases"][phase]["clat_bins_ns"] = [list(b) for b in res.clat_bins_ns]

    def meta_phase(self) -> None:
        folder = self.data / "meta"
        folder.mkdir(parents=True, exist_ok=True)
        paths = metadata.file_names(folder, self.args.meta_files)
        for step, action in metadata.STEPS.items():
            self.sync(f"meta_{step}")
            self.result["phases"][f"meta_{step}"] = {"files": len(paths),
                                                     "seconds": action(paths)}

    def run(self, phases: list[str]) -> None:
        a = self.args
        self.data.mkdir(parents=True, exist_ok=True)
        direct = not a.no_direct and direct_io_works(self.data)
        self.result["direct"] = direct

        def job(name: str, rw: str, **kw: Any) -> fio.FioJob:
            return fio.FioJob(name=name, rw=rw, numjobs=a.jobs_per_node,
                              **{"directory": self.data, "size_mib": a.size_mib,
                                 "direct": direct, **kw})

        blocks, first = a.block_sizes, a.block_sizes[0]

        def named(phase: str, block: str) -> str:
            return phase_name(phase, block, first)

        # the random reads use the files the first block size's write leaves
        for block in blocks if "seq" in phases else blocks[:1] if "rand" in phases else []:
            self.fio_phase(named("seq_write", block),
                           job("seq", "write", block=block, end_fsync=not direct))
            if "seq" in phases:
                self.fio_phase(named("seq_read", block), job("seq", "read", block=block))
        if "rand" in phases:
            self.fio_phase("rand_read", job("seq", "randread", block=fio.BLOCK_RAND,
                                            runtime_s=a.rand_seconds))
        remove_matching(self.data, "seq.")
        if "shared" in phases:
            self.shared.mkdir(parents=True, exist_ok=True)
            slot = self.rank * a.jobs_per_node
            for block in blocks:
                self.fio_phase(named("seq_write_shared", block),
                               job("shared", "write", directory=self.shared, block=block,
                                   shared_file=SHARED_FILE, first_slot=slot,
                                   end_fsync=not direct))
                self.fio_phase(named("seq_read_shared", block),
                               job("shared", "read", directory=self.shared, block=block,
                                   shared_file=SHARED_FILE, first_slot=slot))
        if "ckpt" in phases:
            for block in blocks:
                # checkpoints are buffered writes made durable by fsync (torch.save, DCP)
                self.fio_phase(named("ckpt_write", block),
                               job("ckpt", "write", size_mib=a.ckpt_mib, block=block,
                                   direct=False, end_fsync=True))
                self.fio_phase(named("ckpt_read", block),
                               job("ckpt", "read", size_mib=a.ckpt_mib, block=block))
            remove_matching(self.data, "ckpt.")
        if "meta" in phases:
            self.meta_phase()

    def stop_fio(self) -> None:
        """Stop the running fio by pid within STOP_GRACE_S in all: the whole clean-up must
        end well inside Slurm's KillWait (30 s on ParallelCluster, a few seconds on the
        twin), or the step's SIGKILL cuts it short and the files stay."""
        procs = list(self.procs)
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def clean(self) -> None:
        """Remove this node's data and markers; the last node out removes the rest. Only
        on a failed or stopped run: while others may still poll a barrier, markers stay."""
        self.stop_fio()
        shutil.rmtree(self.data, ignore_errors=True)
        (self.shared / SHARED_FILE).unlink(missing_ok=True)  # the run is over for all nodes
        for marker in self.work.glob(f"*/*/{self.node}"):
            marker.unlink(missing_ok=True)
        for marker in self.work.glob(f"*/{self.node}"):
            if marker.is_file():
                marker.unlink(missing_ok=True)
        prune(self.work)

    def leave(self) -> None:
        """After a complete run: every node says it left; node 0 waits for all, then
        removes the run folder (markers included) in one go."""
        shutil.rmtree(self.data, ignore_errors=True)
        barrier.arrive(self.work / "barrier" / "left", self.node)
        if self.rank == 0:
            try:
                self.sync("left", timeout_s=60)
            finally:
                shutil.rmtree(self.work, ignore_errors=True)


def remove_matching(folder: Path, prefix: str) -> None:
    for path in folder.glob(prefix + "*"):
        path.unlink(missing_ok=True)


def prune(root: Path) -> None:
    """Remove empty folders under and including ``root``, deepest first."""
    if not root.is_dir():
        return
    for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def refuse(out: Path, node: str, reason: str) -> int:
    # whole or not at all: srun --kill-on-bad-exit stops this rank when another one refuses
    atomic_write_text(out / f"refused-{node}.json", json.dumps({"node": node, "reason": reason}))
    print(f"pctk-storage: {node}: refused: {reason}", file=sys.stderr)
    return REFUSED


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    if unknown := sorted(set(phases) - set(PHASES)):
        print(f"unknown phase(s) {', '.join(unknown)}; use {', '.join(PHASES)}",
              file=sys.stderr)
        return 2
    if problem := block_size_problem(args.block_sizes, args.size_mib, args.ckpt_mib):
        print(problem, file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    run = NodeRun(args)
    try:
        check_space(run.target, needed_bytes(args, run.nodes, phases))
    except Refused as exc:
        return refuse(args.out_dir, run.node, str(exc))
    complete = False
    try:
        check_shared(run.work / "hello", run.node, run.nodes, args.share_timeout)
        run.run(phases)
        shutil.rmtree(run.data, ignore_errors=True)
        (args.out_dir / f"node-{run.node}.json").write_text(json.dumps(run.result, indent=1))
        run.sync("reported")
        complete = True
        if run.rank == 0:
            from benchmarks.storage.aggregate import write_from_folder

            write_from_folder(args.out_dir, params=vars_for_record(args, phases, run.nodes))
        return 0
    except Refused as exc:
        return refuse(args.out_dir, run.node, str(exc))
    except Stopped as exc:
        print(f"pctk-storage: {run.node}: stopped by signal {exc.args[0]}; files removed",
              file=sys.stderr)
        return 128 + int(exc.args[0])
    except (fio.FioError, barrier.BarrierTimeout, OSError) as exc:
        print(f"pctk-storage: {run.node}: {exc}", file=sys.stderr)
        return 1
    finally:
        if complete:
            run.leave()
        else:
            # the job's other tasks are being stopped too (srun --kill-on-bad-exit): a second
            # signal must not cut this node's clean-up short and leave its files behind
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            run.clean()


def vars_for_record(args: argparse.Namespace, phases: list[str], nodes: int) -> dict[str, Any]:
    return {"target": args.target, "nodes": nodes, "jobs_per_node": args.jobs_per_node,
            "size_mib": args.size_mib, "ckpt_mib": args.ckpt_mib,
            "rand_seconds": args.rand_seconds, "meta_files": args.meta_files,
            "phases": phases, "no_direct": args.no_direct, "block_seq": args.block_sizes[0],
            "block_sizes": args.block_sizes, "block_rand": fio.BLOCK_RAND,
            "run_id": args.run_id}


if __name__ == "__main__":
    sys.exit(main())
