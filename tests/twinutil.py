"""Test helpers around a running twin: submit a script, wait, read its output."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.local.twin import Twin
from toolkit.slurm import TERMINAL

# A shell where a torchrun session (or a notebook inside another job) left its launcher
# variables: sbatch exports them into every job, and ranks that read them would all be rank 1
# of 8 waiting on 10.9.9.9. pctk's batch scripts unset them (toolkit.submit.jobspec).
STALE_LAUNCHER = {"RANK": "1", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8",
                  "GROUP_RANK": "0", "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "29500"}


@dataclass
class TwinHandle:
    twin: Twin
    env: dict[str, str]
    workdir: Path
    config: str = "p5-training"  # the config the twin was started with
    _n: list[int] = field(default_factory=lambda: [0])

    @property
    def state_dir(self) -> Path:
        return self.twin.state_dir

    def cmd(self, *argv: str, check: bool = True, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                           timeout=timeout, cwd=self.workdir)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def sbatch(self, script: str, *sbatch_args: str) -> tuple[str, Path]:
        """Submit script text; returns (job id, path of its stdout file)."""
        self._n[0] += 1
        fd, path = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=self.workdir)
        with os.fdopen(fd, "w") as fh:
            fh.write(script if script.startswith("#!") else "#!/bin/bash\n" + script)
        out = self.workdir / f"job-{self._n[0]}-%j.out"
        r = self.cmd("sbatch", "--parsable", f"--output={out}", *sbatch_args, path)
        job_id = r.stdout.strip().split(";")[0]
        return job_id, Path(str(out).replace("%j", job_id))

    def assert_left_running(self, job_id: str, stderr: str) -> None:
        """A stopped pctk command's last line names the job that keeps running (as
        toolkit.submit.longrun words it), and Slurm still has that job."""
        assert stderr.splitlines()[-1] == (f"pctk: stopped waiting; job {job_id} keeps "
                                           f"running. Cancel with: pctk cancel {job_id}"), stderr
        assert "Traceback" not in stderr
        st = self.cmd("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip()
        assert st in ("RUNNING", "PENDING", "CONFIGURING"), st

    def clean_up(self, proc: subprocess.Popen[str], job_id: str) -> None:
        """After a test interrupted a pctk process: the process gone, the job it left
        running cancelled."""
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if job_id:
            self.cmd("scancel", job_id, check=False)

    def state(self, job_id: str) -> str:
        r = self.cmd("sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State", check=False)
        states = [s.split()[0] for s in r.stdout.splitlines() if s.strip()]
        return states[-1] if states else "UNKNOWN"

    def wait(self, job_id: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.state(job_id)
            if st.startswith(TERMINAL):
                return st
            time.sleep(0.5)
        self.cmd("scancel", job_id, check=False)
        raise AssertionError(f"job {job_id} not finished after {timeout}s (state {st})")

    def wait_gone(self, job_id: str, timeout: float = 90) -> None:
        """Until the job's processes have all ended: sacct says CANCELLED as soon as
        scancel is taken, while the steps may still be COMPLETING (cleaning up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.cmd("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T", check=False)
            known = r.returncode == 0 or "Invalid job id" in r.stderr
            if known and "COMPLETING" not in r.stdout:
                return
            time.sleep(0.3)
        raise AssertionError(f"job {job_id} still completing after {timeout}s")

    def run(self, script: str, *sbatch_args: str, timeout: float = 120) -> tuple[str, str]:
        """Submit, wait for the end; returns (final sacct state, the job's stdout)."""
        job_id, out = self.sbatch(script, *sbatch_args)
        st = self.wait(job_id, timeout)
        text = out.read_text(errors="replace") if out.exists() else ""
        return st, text
