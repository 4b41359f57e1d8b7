"""One job description for every launcher: the sbatch options each renders, checked against
golden files (python tests/regen_golden.py rewrites them), and every option spelling accepted by the
twin's real sbatch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit import slurm
from toolkit.bench.collectives.driver import SweepJob, sbatch_command
from toolkit.bench.storage.driver import StorageJob
from toolkit.errors import PctkError
from toolkit.health.slownodes import PairTest, SlurmPairs
from toolkit.health.sweep import Group, SweepOptions, _sbatch_argv
from toolkit.paths import code_root
from toolkit.submit.command import CommandJob, job_spec, render_script
from toolkit.submit.jobspec import JobSpec, sbatch_header, sbatch_options

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sbatch"
RUN = Path("/fsx/runs/r1")


def _argv_text(argv: list[str]) -> str:
    """One argument a line, the checkout's path written $REPO so the file is portable."""
    return "".join(f"{a}\n" for a in argv).replace(str(code_root()), "$REPO")


RENDERED = {
    "command-2node-torchrun.argv": lambda: _argv_text(sbatch_options(job_spec(CommandJob(
        argv=["python", "train.py"], queue="gpu", nodes=2, gpus_per_node=8, torchrun=True,
        time="90", name="my run", exclusive=True), RUN))),
    "command-2node-torchrun.sh": lambda: render_script(CommandJob(
        argv=["python", "train.py", "--lr", "3e-4"], queue="gpu", nodes=2, gpus_per_node=8,
        torchrun=True, efa=True, instance_type="p5.48xlarge"), RUN),
    "health-sweep.argv": lambda: _argv_text(_sbatch_argv(
        Group("gpu", 8, ["gpu-st-p5-1", "gpu-st-p5-2"], reservation="pctk-health-x"),
        SweepOptions(level="quick", python="/fsx/venv/bin/python", checks=["gpu", "efa"]),
        RUN, 6)),
    "collectives.argv": lambda: _argv_text(sbatch_command(
        SweepJob(nodes=4, partition="gpu", ntasks_per_node=8, gpus_per_node=8,
                 time_limit="30"), RUN)),
    "slow-node-pair.argv": lambda: _argv_text(SlurmPairs(
        test=PairTest(size="4M", python="/fsx/venv/bin/python"), workdir=RUN, partition="cpu",
        timeout=300).sbatch_argv("r1-cpu-dy-c5-1-cpu-dy-c5-2", ("cpu-dy-c5-1", "cpu-dy-c5-2"),
                                 RUN / "r1.json", RUN / "r1.out")),
    "storage.argv": lambda: _argv_text(StorageJob(
        nodes=4, target="/fsx/bench", run_dir=RUN, partition="cpu", time_limit="20",
        run_id="abc").sbatch_args()),
}


def golden_files() -> dict[Path, str]:
    """What tests/regen_golden.py writes: each golden file and its rendering now."""
    return {GOLDEN / name: render() for name, render in RENDERED.items()}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_launchers_render_their_golden_options(name: str) -> None:
    assert RENDERED[name]() == (GOLDEN / name).read_text()


def test_options_follow_the_field_order_and_leave_unset_ones_out() -> None:
    spec = JobSpec(job_name="x", nodes=2, exclusive=True, requeue=False, time=30,
                   extra=("--comment=a b",))
    assert sbatch_options(spec) == ["--job-name=x", "--nodes=2", "--exclusive", "--time=30",
                                    "--no-requeue", "--comment=a b"]
    assert sbatch_options(JobSpec()) == []


def test_header_refuses_what_an_sbatch_line_cannot_carry() -> None:
    assert sbatch_header(JobSpec(job_name="x", requeue=True)) == [
        "#SBATCH --job-name=x", "#SBATCH --requeue"]
    with pytest.raises(PctkError, match="whitespace"):
        sbatch_header(JobSpec(output="/my runs/%j.out"))


@pytest.mark.twin
def test_every_option_spelling_is_real_sbatch(twin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = JobSpec(job_name="pctk spec", nodes=1, ntasks_per_node=1, cpus_per_task=1,
                   mem="100M", exclusive=True, partition="cpu", time="5", requeue=False,
                   open_mode="append", output=str(tmp_path / "%j.out"),
                   error=str(tmp_path / "%j.err"), chdir=str(tmp_path), export="ALL",
                   array="0-1", dependency="singleton", extra=("--comment=pctk",))
    r = slurm.sbatch_test_only(sbatch_options(spec))
    assert r.returncode == 0, r.stderr


def test_every_launcher_sets_the_efa_environment_of_efa_py() -> None:
    # bench fsdp's scripts lacked FI_PROVIDER, FI_EFA_USE_HUGE_PAGE, NCCL_SOCKET_IFNAME and
    # TORCH_NCCL_ASYNC_ERROR_HANDLING that `pctk submit` sets: one list (toolkit/submit/efa.py)
    # rendered by one function (jobspec.env_exports) for the generated scripts, and the
    # static scripts in sbatch/ checked against the same list
    import re

    from toolkit.bench.fsdp.driver import FsdpJob, render_sbatch
    from toolkit.submit.efa import DEBUG_ENV, EFA_ENV, TORCH_ENV, efa_env
    from toolkit.submit.jobspec import env_exports

    want = env_exports(efa_env(True))
    submit = render_script(CommandJob(argv=["python", "t.py"], queue="gpu", nodes=2,
                                      gpus_per_node=8, efa=True), RUN).splitlines()
    gpu = render_sbatch(FsdpJob(nodes=2, model="8b", run_dir=RUN)).splitlines()
    cpu = render_sbatch(FsdpJob(nodes=2, model="tiny", run_dir=RUN, gpus_per_node=0))
    assert [x for x in submit if x in want] == want
    assert [x for x in gpu if x in want] == want
    assert "FI_PROVIDER" not in cpu  # a CPU job (the twin, gloo) gets no EFA settings
    no_efa = FsdpJob(nodes=1, model="8b", run_dir=RUN, efa=False)  # e.g. g5.xlarge
    assert "FI_PROVIDER" not in render_sbatch(no_efa)

    def exported(script: str) -> dict[str, str]:
        text = (code_root() / "sbatch" / script).read_text()
        out = {}
        for name, value in re.findall(r'^export (\w+)="?([^"\n]*)"?$', text, re.M):
            m = re.fullmatch(r"\$\{\w+:-(.*)\}", value)  # ${X:-default}: the user's wins
            out[name] = m.group(1) if m else value
        return out

    for script, groups in (("fsdp.sbatch", (EFA_ENV, TORCH_ENV)),
                           ("collectives.sbatch", (EFA_ENV, TORCH_ENV, DEBUG_ENV)),
                           ("nccl-tests.sbatch", (EFA_ENV, DEBUG_ENV))):
        found = exported(script)
        for v in (v for g in groups for v in g):
            assert found.get(v.name) == v.value, (script, v.name, found.get(v.name))



def _dry_run(tmp_path: Path, *argv: str) -> str:
    env = {**os.environ, "PCTK_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", *argv, "--run-dir",
                        str(tmp_path / "run"), "--dry-run"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


SCRIPTS = {
    "submit": lambda tmp: render_script(CommandJob(argv=["python", "t.py"], queue="cpu",
                                                   nodes=2), tmp),
    "submit-torchrun": lambda tmp: render_script(CommandJob(argv=["t.py"], queue="cpu", nodes=2,
                                                            torchrun=True), tmp),
    "fsdp": lambda tmp: _dry_run(tmp, "bench", "fsdp", "--model", "tiny", "-p", "cpu",
                                 "--gpus-per-node", "0"),
    "fsdp-torchrun": lambda tmp: _dry_run(tmp, "bench", "fsdp", "--model", "tiny", "-p", "cpu",
                                          "--launcher", "torchrun"),
    "scaling": lambda tmp: _dry_run(tmp, "bench", "scaling", "--model", "tiny", "-p", "cpu",
                                    "--nodes", "1,2", "--gpus-per-node", "0"),
    "inference": lambda tmp: _dry_run(tmp, "bench", "inference", "--nodes", "2", "-p", "cpu"),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_generated_scripts_unset_the_launcher_variables_before_any_srun(
        name: str, tmp_path: Path) -> None:
    """sbatch exports the submitting shell into the job: RANK, MASTER_ADDR... that a torchrun
    session left there must not reach the job's ranks (twin tests run with them set)."""
    from benchmarks.distenv import LAUNCHER_VARIABLES

    lines = SCRIPTS[name](tmp_path).splitlines()
    unset = lines.index(f"unset {' '.join(LAUNCHER_VARIABLES)}")
    assert unset < min(i for i, x in enumerate(lines) if x.startswith("srun "))
    # nothing the script exports afterwards brings a stale rank back
    assert not any(x.startswith(("export RANK=", "export WORLD_SIZE=")) for x in lines)
