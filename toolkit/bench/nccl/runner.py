"""Launch the nccl-tests binaries with the EFA environment and keep their raw output.

The command is always an argument list (never a shell string). Default launch: ``srun``
with one task per GPU (nccl-tests built with ``MPI=1`` gets its ranks from PMIx), ``-g 1``.
``mpirun`` and a single process driving all local GPUs (``-g N``) are the alternatives.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.submit.efa import efa_env

BINARIES = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
            "reduce_scatter": "reduce_scatter_perf", "alltoall": "alltoall_perf",
            "broadcast": "broadcast_perf", "sendrecv": "sendrecv_perf",
            "reduce": "reduce_perf"}
DEFAULT_DIRS = ("/opt/nccl-tests/build", "~/nccl-tests/build", "./nccl-tests/build")
BUILD_HINT = ("build it on the cluster with `sbatch sbatch/nccl-tests-build.sbatch`, then pass "
              "--nccl-tests-dir <dir>/build or set NCCL_TESTS_DIR")

# The EFA network variables plus NCCL's INFO lines the verdict reads; each variable's reason
# is in toolkit/submit/efa.py, the one list every launcher uses
EFA_ENV = efa_env(True, debug=True, torch=False)
# Open MPI must not grab EFA itself (NCCL does); TCP over the primary interface suffices
MPIRUN_FLAGS = ("--mca", "pml", "^cm,ucx", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_exclude", "lo,docker0", "--bind-to", "none")


@dataclass
class LaunchSpec:
    collective: str
    nodes: int = 1
    gpus_per_node: int = 8
    launcher: str = "srun"                  # srun | mpirun | none
    min_bytes: str = "8"
    max_bytes: str = "16G"
    step_factor: int = 2
    iters: int = 20
    warmup: int = 5
    check: int = 1
    partition: str | None = None
    srun_mpi: str = "pmix"
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)


def find_binary(collective: str, nccl_tests_dir: str | None = None) -> Path:
    name = BINARIES.get(collective)
    if name is None:
        raise PctkError(f"no nccl-tests binary for {collective!r}",
                        f"use one of {', '.join(BINARIES)}")
    env_dir = os.environ.get("NCCL_TESTS_DIR")
    dirs = [nccl_tests_dir] if nccl_tests_dir else ([env_dir] if env_dir else list(DEFAULT_DIRS))
    looked = []
    for d in dirs:
        assert d is not None
        p = Path(d).expanduser() / name
        looked.append(str(p))
        if p.is_file() and os.access(p, os.X_OK):
            return p.resolve()
    if not nccl_tests_dir and not env_dir and (which := shutil.which(name)):
        return Path(which)
    where = ", ".join(looked) + ("" if nccl_tests_dir or env_dir else ", $PATH")
    raise PctkError(f"{name} not found (looked in {where})", BUILD_HINT)


def launch_env(spec: LaunchSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(EFA_ENV)
    env.update(spec.extra_env)
    return env


def build_command(spec: LaunchSpec, binary: Path) -> list[str]:
    gpus_per_proc = spec.gpus_per_node if spec.launcher == "none" else 1
    bench = [str(binary), "-b", spec.min_bytes, "-e", spec.max_bytes, "-f",
             str(spec.step_factor), "-g", str(gpus_per_proc), "-n", str(spec.iters),
             "-w", str(spec.warmup), "-c", str(spec.check), *spec.extra_args]
    if spec.launcher == "none":
        return bench
    if spec.launcher == "srun":
        cmd = ["srun", f"--nodes={spec.nodes}", f"--ntasks-per-node={spec.gpus_per_node}",
               f"--mpi={spec.srun_mpi}", "--export=ALL"]
        if spec.partition:
            cmd.append(f"--partition={spec.partition}")
        return [*cmd, *bench]
    if spec.launcher == "mpirun":
        cmd = ["mpirun", "-np", str(spec.nodes * spec.gpus_per_node), "--map-by",
               f"ppr:{spec.gpus_per_node}:node", *MPIRUN_FLAGS]
        for key in sorted({*EFA_ENV, *spec.extra_env, "LD_LIBRARY_PATH", "PATH"}):
            cmd += ["-x", key]
        return [*cmd, *bench]
    raise PctkError(f"unknown launcher {spec.launcher!r}", "use srun, mpirun or none")


@dataclass
class RunOutcome:
    command: list[str]
    log_path: Path
    returncode: int | None
    timed_out: bool
    seconds: float


def run_logged(cmd: list[str], env: dict[str, str], log_path: Path, *,
               timeout: float | None = None,
               on_line: Callable[[str], None] | None = None) -> RunOutcome:
    """Run ``cmd``, writing stdout+stderr to ``log_path`` as it comes; never raises on exit."""
    if shutil.which(cmd[0], path=env.get("PATH")) is None and not Path(cmd[0]).is_file():
        raise PctkError(f"launcher {cmd[0]!r} not found on PATH",
                        "run on the cluster's head node or pick --launcher none")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    expired = threading.Event()
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                text=True, errors="replace", start_new_session=True)
        assert proc.stdout is not None

        def expire() -> None:
            expired.set()
            _stop(proc)
        # a watchdog, so a hung run that prints nothing is stopped too
        timer = threading.Timer(timeout, expire) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if on_line:
                    on_line(line)
            rc = proc.wait()
        except KeyboardInterrupt:
            _stop(proc)
            log.write("\npctk: interrupted; run stopped\n")
            raise
        finally:
            if timer:
                timer.cancel()
        timed_out = expired.is_set()
        if timed_out:
            log.write(f"\npctk: timed out after {timeout:g} s; run stopped\n")
        elif rc != 0:
            log.write(f"\npctk: {Path(cmd[0]).name} exited with status {rc}\n")
    return RunOutcome(cmd, log_path, rc, timed_out, time.monotonic() - start)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the launcher's process group (srun forwards it to the tasks), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue
