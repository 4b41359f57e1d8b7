"""Shared fixtures. The local twin is started once per test session, on a real Slurm."""

from __future__ import annotations

import os
import re
import signal
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.local import procs, state
from toolkit.local.plan import RELEASE_FIRST_JOB_ID
from toolkit.local.twin import Twin
from toolkit.paths import slurm_images_dir
from toolkit.slurm import node_states

REPO = Path(__file__).resolve().parent.parent

# `make test` runs four pytest workers (pytest-xdist, --dist loadgroup --no-loadscope-reorder)
# over these groups, in this order:
# - "measure": the benchmarks that measure the CPU with a throttled node (MEASURE: the FSDP
#   straggler run, the scaling ladder, on the session twin; then the slow-node sweeps on a twin
#   of 8 nodes of their own), one after the other on one worker, so no two of them ever measure
#   at once; then the notebook test (on the session twin), to even the workers' lengths;
# - "waiters-a", "waiters-b": the modules that start a twin of their own and mostly wait on
#   Slurm's clocks (SlurmdTimeout, SuspendTime, boots, requeues), in two halves of about the
#   same length;
# - "main": every other module that asks for the session twin (one per worker: these stay on
#   one);
# - then every other module (those that start a twin of their own included) as a group of its
#   own, on whichever worker is free.
# Twins on different workers may run torch jobs at once: each worker's twins number their jobs
# from a band of their own (worker_job_ids below), so that their jobs' rendezvous ports, which
# follow the job id, differ.
WAITERS_A = frozenset({
    "tests/submit/test_accounting_faults.py",
    "tests/test_first_hour.py",
    "tests/submit/test_no_accounting.py",
    "tests/health/test_slurmd_down.py",
    "tests/twin/test_lifecycle.py",
    "tests/twin/test_two_twins.py",
})
WAITERS_B = frozenset({
    "tests/twin/test_power.py",
    "tests/twin/test_crash.py",
    "tests/twin/test_slurm_release.py",
    "tests/submit/test_max_array.py",
    "tests/test_slurmimage.py",
    "tests/twin/test_hostile_input.py",
    "tests/twin/test_gc.py",
})
OWN_TWIN_WAITERS = WAITERS_A | WAITERS_B
MEASURE = (
    "tests/fsdp/test_stragglers_twin.py",
    "tests/scaling/test_scaling_twin.py",
    "tests/health/test_slownodes_twin.py",
    "tests/examples/test_notebook.py",  # measures nothing: runs after them
)
# Each worker's twins number their jobs from a band of JOB_ID_BAND ids of their own: 1, 1501,
# 3001 and 4501 for the system's Slurm, from 6001 (toolkit.local.plan.RELEASE_FIRST_JOB_ID)
# for a built release's leg. Jobs rendezvous on 20000 + job id mod 12000 (batch scripts) or
# 20000 + (7 x job id + step) mod 12000 (benchmarks/distenv.py): the 8 bands fill those 12,000
# ports once, and two workers' jobs meet only when a twin has submitted 1,500 jobs, far more
# than a session does.
JOB_ID_BAND = 1500
BANDS_PER_LEG = 4


def worker_job_ids(worker: str | None, release: str | None) -> int | None:
    """PCTK_TWIN_FIRST_JOB_ID for the twins of xdist worker ``worker`` (gw0, gw1, ...) in the
    leg of Slurm ``release`` (None or "": the system's); None outside xdist."""
    if not worker or not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    base = RELEASE_FIRST_JOB_ID if release else 1
    return base + JOB_ID_BAND * (int(worker[2:]) % BANDS_PER_LEG)


def pytest_configure(config: pytest.Config) -> None:
    """A worker's twins take its band of job ids, unless PCTK_TWIN_FIRST_JOB_ID is set.

    A suite started in the background by a script (`make test &`, nohup, a CI runner's shell)
    inherits SIGINT ignored, and so would every process a test starts: a Python program that
    starts with SIGINT ignored never raises KeyboardInterrupt, and the tests that send Ctrl-C
    to pctk would wait out their timeouts (or pass only after some earlier test in the same
    worker happened to install a handler). Give the processes the tests start Ctrl-C as a
    terminal would.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    first = worker_job_ids(os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PCTK_SLURM"))
    if first is not None:
        os.environ.setdefault("PCTK_TWIN_FIRST_JOB_ID", str(first))


def module_group(path: str, fixturenames: Iterable[str]) -> str:
    """The xdist group of module ``path`` (tests/...) whose tests use these fixtures."""
    if path in WAITERS_A:
        return "waiters-a"
    if path in WAITERS_B:
        return "waiters-b"
    if path in MEASURE:
        return "measure"
    if "twin" in fixturenames:
        return "main"
    return path


# What pctk parses from Slurm or passes to it, run a second time by `make test`, beside the
# suite, on a twin of a newer Slurm (PCTK_SLURM=24.11 -m slurm_matrix; that twin numbers its
# jobs from 6001, so torch jobs of both legs at once ask for different ports): the Slurm
# layer, submission (command jobs, submitit arrays, requeue, waits), accounting with and
# without slurmdbd, the health sweep, and the twin's own per-node addresses, faults, power
# saving and `local env`.
SLURM_MATRIX = frozenset({
    "tests/twin/test_jobs.py",
    "tests/twin/test_faults.py",
    "tests/twin/test_power.py",
    "tests/twin/test_state.py",
    "tests/twin/test_follows_config.py",
    "tests/submit/test_cli.py",
    "tests/submit/test_executor.py",
    "tests/submit/test_jobspec.py",
    "tests/submit/test_logs.py",
    "tests/submit/test_wait_states.py",
    "tests/submit/test_accounting_faults.py",
    "tests/submit/test_no_accounting.py",
    "tests/submit/test_max_array.py",
    "tests/health/test_twin_sweep.py",
})


# What starts a twin of a module's own (toolkit.local: Twin.up, clusters.up, `pctk local up`,
# tests.twinutil.TwinHandle): such a module needs Slurm as much as one that asks for the
# session twin. Read from the module's text, so a new module is classed without a list.
_STARTS_TWIN = re.compile(r"\.up\(|[\"']local[\"'],\s*[\"']up[\"']|TwinHandle\(")


# Modules that need no twin but run for tens of seconds (torch ranks, a wheel install, a
# browser, fio sweeps): marker `slow`. `make check` leaves them to `make test` too, so the
# quick tier stays within its 3 minutes on a 2-core machine.
SLOW = frozenset({
    "tests/fsdp/test_posttrain_gpu_check.py",
    "tests/fsdp/test_gpu_check.py",
    "tests/fsdp/test_posttrain_results.py",
    "tests/fsdp/test_resume.py",
    "tests/fsdp/test_equivalence.py",
    "tests/fsdp/test_accelerator_pg.py",
    "tests/fsdp/test_plain_loop.py",
    "tests/fsdp/test_speed_paths.py",
    "tests/fsdp/test_rl.py",
    "tests/fsdp/test_sft.py",
    "tests/fsdp/test_defaults.py",
    "tests/scaling/test_diagnose.py",
    "tests/test_packaging.py",
    "tests/results/test_history.py",
    "tests/results/test_report_browser.py",
    "tests/storage/test_node.py",
    "tests/storage/test_results.py",
    "tests/nccl/test_runner.py",
})


def needs_twin(path: str, fixturenames: Iterable[str]) -> bool:
    """Whether the tests of module ``path`` run on a Slurm twin (marker ``twin``): those
    ``make check`` leaves to ``make test``."""
    if module_group(path, fixturenames) != path or path.startswith("tests/twin/"):
        return True
    try:
        return bool(_STARTS_TWIN.search((REPO / path).read_text()))
    except OSError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The groups for --dist loadgroup (a no-op without xdist), in the order above; the
    Slurm-matrix and twin markers."""
    fixtures: dict[str, set[str]] = {}
    for item in items:
        fixtures.setdefault(item.nodeid.split("::", 1)[0], set()).update(
            getattr(item, "fixturenames", ()))
    rank: dict[str, tuple[int, int]] = {}
    twin_modules: dict[str, bool] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = module_group(path, fixtures[path])  # a module is never split
        item.add_marker(pytest.mark.xdist_group(group))
        if path in SLURM_MATRIX:
            item.add_marker(pytest.mark.slurm_matrix)
        if path not in twin_modules:
            twin_modules[path] = needs_twin(path, fixtures[path])
        if twin_modules[path]:
            item.add_marker(pytest.mark.twin)
        if path in SLOW:
            item.add_marker(pytest.mark.slow)
        first = {"measure": 0, "waiters-a": 1, "waiters-b": 2, "main": 3}.get(group, 4)
        within = MEASURE.index(path) if path in MEASURE else len(MEASURE)
        rank[item.nodeid] = (first, within)
    items.sort(key=lambda it: rank[it.nodeid])  # stable: modules keep their own order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """xdist appends each test's group to its node id on the worker. pytest 9.2 ignores that
    (pytest-xdist issue 1386): the groups would be split silently, a module's twin fixture
    starting on both workers. Stop before any test runs instead."""
    config = getattr(node, "config", None)
    if config is not None and config.getoption("dist") == "loadgroup" and ids \
            and "@" not in ids[0]:
        pytest.exit(f"pytest-xdist cannot group tests under pytest {pytest.__version__} "
                    "(pytest-xdist issue 1386): install the pinned versions (make venv, or pip "
                    "install -c constraints.txt -e '.[dev]') or run in one process "
                    "(make test PYTEST_WORKERS=0)", returncode=2)


@pytest.fixture(scope="session", autouse=True)
def _private_state_home() -> Iterator[Path]:
    """Benchmarks store their results as they finish: keep that out of the user's own state."""
    home = Path(tempfile.mkdtemp(prefix="pctk-home-", dir="/tmp"))
    mp = pytest.MonkeyPatch()
    # Slurm builds are a cache worth keeping (5 minutes each): the user's own, not the session's
    mp.setenv("PCTK_SLURM_IMAGES", str(slurm_images_dir()))
    mp.setenv("PCTK_HOME", str(home))
    mp.delenv("PCTK_RESULTS_DB", raising=False)
    yield home
    mp.undo()


def session_config(folder: Path) -> Path:
    """The p5-training preset with a long ScaledownIdletime (same file name: same cluster)."""
    from toolkit.paths import preset_path

    text = preset_path("p5-training").read_text()
    assert "  SlurmSettings:\n" in text
    path = folder / "p5-training.yaml"
    path.write_text(text.replace("  SlurmSettings:\n",
                                 "  SlurmSettings:\n    ScaledownIdletime: 600\n", 1))
    return path


@pytest.fixture(scope="session")
def twin() -> Iterator[TwinHandle]:
    """The p5-training preset as a running twin (gpu: gpu-st-p5-[1-4], cpu: cpu-dy-c5-[1-4]).

    SLURM_CONF is exported for the whole session so sbatch, sacct and submitit reach it.
    The dynamic cpu nodes start powered down, as on ParallelCluster; the session powers them
    up once and keeps them up (ScaledownIdletime 600 min in its copy of the preset), so tests
    about jobs do not each wait for a boot. tests/twin/test_power.py tests power saving.
    """
    # short path: munge and MariaDB sockets live inside it
    state = Path(tempfile.mkdtemp(prefix="pctk-twin-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pctk-jobs-", dir="/tmp"))
    config = session_config(work)
    t = Twin(state)
    t.up(config, nodes=4)
    t.power_up([f"cpu-dy-c5-{i}" for i in range(1, 5)])
    mp = pytest.MonkeyPatch()
    for k, v in t.env().items():
        mp.setenv(k, v)
    try:
        yield TwinHandle(twin=t, env=dict(os.environ), workdir=work, config=str(config))
    finally:
        mp.undo()
        t.down(purge=True)


@pytest.fixture(autouse=True)
def _session_twin_env(request: pytest.FixtureRequest,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that asks for the session twin sees that twin's environment.

    Modules with a twin of their own export its SLURM_CONF for the module and restore the
    previous environment afterwards; when the session twin was first started inside such a
    module, that restore wiped the session twin's variables for every later test.
    """
    if "twin" in request.fixturenames:
        handle: TwinHandle = request.getfixturevalue("twin")
        _restart_dead_daemons(handle)
        for k, v in handle.twin.env().items():
            monkeypatch.setenv(k, v)
    yield


def _last_line(log: str) -> str:
    try:
        lines = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "empty log"


def _restart_dead_daemons(handle: TwinHandle) -> None:
    """Start again, and say so, a session-twin daemon that died between tests.

    No test stops the session twin's daemons on purpose, but Slurm's own can die: the slurmd of
    Debian's Slurm 22.05.8 has been seen to abort ("double free or corruption") just after two
    batch jobs started on its node at once. Its node then stays down and every later test that
    needs it waits out its timeout. `pctk local up` starts the dead daemons again in place
    (jobs and node state kept), much as ParallelCluster replaces an unhealthy node; the
    warning names the daemon and its last log line.
    """
    sd = handle.state_dir
    dead = [p for p in state.live_procs(sd, state.load(sd)) if not procs.is_running(p)]
    if not dead:
        return
    what = "; ".join(f"{p.name} (last log line: {_last_line(p.log)})" for p in dead)
    handle.twin.up(handle.config, nodes=4)
    # a controller that started again may have powered the session's dynamic nodes down
    asleep = [n for n, (st, _) in node_states(env=handle.twin.env()).items()
              if n.startswith("cpu-dy-") and st.endswith("~")]
    handle.twin.power_up(asleep)
    warnings.warn(f"the session twin's {what} had died; started again", stacklevel=1)

