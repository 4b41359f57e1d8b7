"""One job description, rendered as sbatch options or ``#SBATCH`` lines.

Every launcher (``pctk submit``'s command jobs, ``bench fsdp``, ``bench collectives``, ``bench
storage``, the health sweep and the slow-node pairs, the executor's ``--test-only`` probe)
describes its job as a :class:`JobSpec`; :func:`sbatch_options` turns it into ``--key=value``
arguments in one fixed order and :func:`sbatch_header` into the ``#SBATCH`` lines of a script,
as submitit's ``_make_sbatch_string`` does for its jobs. The rendered forms are checked against
golden files (tests/golden/).

Values are written as given: a value with whitespace cannot sit on an ``#SBATCH`` line (sbatch
splits it), so :func:`sbatch_header` refuses one; on the command line each option is one
argument and needs no quoting.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

from benchmarks.distenv import LAUNCHER_VARIABLES, RDZV_PORT_BASE, RDZV_PORT_SPAN
from toolkit.errors import PctkError


@dataclass(frozen=True)
class JobSpec:
    """What Slurm needs to know about a batch job; None/False leaves an option out."""

    job_name: str | None = None
    nodes: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    gres: str | None = None  # e.g. gpu:8, where --exclusive alone does not hand out GRES
    mem: str | None = None
    exclusive: bool = False
    partition: str | None = None
    nodelist: str | None = None
    reservation: str | None = None
    time: str | int | None = None
    requeue: bool | None = None  # True --requeue, False --no-requeue, None Slurm's default
    open_mode: str | None = None
    output: str | None = None
    error: str | None = None
    chdir: str | None = None
    export: str | None = None
    array: str | None = None
    dependency: str | None = None
    extra: tuple[str, ...] = field(default=())  # further options, verbatim ("--key=value")


# torchrun's rendezvous port on the job's first node, as a shell expression: derived from the
# job id so two jobs sharing a node do not collide (torch's fixed default, 29500, would); in
# 20000-31999, below the kernel's ephemeral ports (32768 up), which an outgoing connection may
# hold as its source port (the span of benchmarks/distenv.py)
RDZV_PORT_SHELL = f"$(({RDZV_PORT_BASE} + SLURM_JOB_ID % {RDZV_PORT_SPAN}))"

_FLAG = {"exclusive": "--exclusive"}


def _options(spec: JobSpec) -> Iterator[str]:
    for f in fields(spec):
        value = getattr(spec, f.name)
        if f.name == "extra":
            yield from value
        elif f.name == "requeue":
            if value is not None:
                yield "--requeue" if value else "--no-requeue"
        elif f.name in _FLAG:
            if value:
                yield _FLAG[f.name]
        elif value is not None and value != "":
            yield f"--{f.name.replace('_', '-')}={value}"


def sbatch_options(spec: JobSpec) -> list[str]:
    """The job as sbatch command-line options, in the order of :class:`JobSpec`'s fields."""
    return list(_options(spec))


def env_exports(env: Mapping[str, str]) -> list[str]:
    """``export NAME=value`` lines (values shell-quoted) for a generated batch script: the
    EFA/NCCL environment of :func:`toolkit.submit.efa.efa_env` and a job's own variables, the
    same lines whichever launcher writes the script (``pctk submit``, ``bench fsdp``)."""
    for name in env:
        if not name.isidentifier():
            raise PctkError(f"environment variable name {name!r} is not valid",
                            "use letters, digits and _ only")
    return [f"export {k}={shlex.quote(v)}" for k, v in env.items()]


def unset_launcher_variables() -> list[str]:
    """Batch-script lines that drop RANK, WORLD_SIZE, MASTER_ADDR... (the variables torchrun
    gives its ranks). sbatch exports the submitting shell's environment into the job, and
    values a torchrun session or a notebook inside another job left there describe another
    run: ranks started by srun would all take that rank and address. Without them each rank
    reads its own from Slurm (benchmarks.distenv) and torchrun sets fresh ones."""
    return ["# rank, world and rendezvous come from this job, not from the submitting shell",
            f"unset {' '.join(LAUNCHER_VARIABLES)}"]


def sbatch_header(spec: JobSpec) -> list[str]:
    """The job as ``#SBATCH`` lines for the top of a batch script."""
    lines = []
    for opt in _options(spec):
        if any(c.isspace() for c in opt):
            raise PctkError(f"sbatch option {opt!r} has whitespace, which #SBATCH lines cannot "
                            "carry", "pick names and folders without whitespace")
        lines.append(f"#SBATCH {opt}")
    return lines
