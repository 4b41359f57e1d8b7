"""``pctk bench fsdp``: parse the flags, call the driver, print the record.

The options that reach ``benchmarks.fsdp.train`` unchanged are not declared here: they are
built from the fields of :class:`benchmarks.fsdp.config.TrainConfig` (flag, help and type from
the field; the driver's own default where it differs), so the node and the driver cannot
drift apart. They show under their own heading in ``--help``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from benchmarks.fsdp.config import settings
from toolkit.api import training as api
from toolkit.bench.fsdp import driver
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption
from toolkit.commands import jobend
from toolkit.submit.longrun import long_command

F = TypeVar("F", bound=Callable[..., Any])
TRAIN_PANEL = "Training (benchmarks.fsdp.train)"
TRAIN_OPTIONS, DRIVER_DEFAULTS = driver.TRAIN_OPTIONS, driver.DRIVER_DEFAULTS


def train_options(names: Sequence[str], overrides: Mapping[str, Mapping[str, Any]],
                  panel: str) -> list[inspect.Parameter]:
    """Keyword parameters with ``typer.Option`` defaults for the TrainConfig fields ``names``.

    Model names are not typer choices: the driver refuses an unknown one in one line.
    """
    spec = settings()
    params = []
    for name in names:
        s, o = spec[name], overrides.get(name, {})
        default, help_text = o.get("default", s.default), o.get("help", s.help)
        flag = s.flag
        if s.is_bool and default is None:  # --x/--no-x, None when neither is given
            flag = f"{s.flag}/--no-{s.flag.removeprefix('--')}"
        elif s.is_bool and default is not False:
            raise ValueError(f"{name}: only off-by-default switches pass through as flags")
        annotation: Any = s.type if default is not None else s.type | None
        option = typer.Option(default, flag, help=help_text, rich_help_panel=panel)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                        annotation=annotation))
    return params


def with_options(extra: list[inspect.Parameter]) -> Callable[[F], F]:
    """Give a command that takes ``**kwargs`` the keyword options ``extra`` in its signature,
    which is what typer reads; their values arrive in the ``**kwargs``."""

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        func.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
        func.__annotations__ = {**get_type_hints(func, include_extras=True),
                                **{p.name: p.annotation for p in extra}}
        return func

    return decorate


@with_options(train_options(TRAIN_OPTIONS, DRIVER_DEFAULTS, TRAIN_PANEL))
def fsdp_command(
    nodes: int = typer.Option(1, "--nodes", "-N", help="Nodes to train on."),
    batch_per_gpu: int | None = typer.Option(
        None, help="Sequences per GPU per step (on GPUs chosen on the node from the shape and "
        "the GPU memory; tiny and small 1)."),
    partition: str | None = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    instance_type: str | None = typer.Option(
        None, help="Instance type in the catalog: GPUs per node and peak TFLOP/s from it."),
    tasks_per_node: int | None = typer.Option(
        None, help="Ranks per node [GPUs of --instance-type, else of the partition's nodes, "
        "1 on nodes without GPUs; 8 when Slurm does not answer]."),
    gpus_per_node: int | None = typer.Option(
        None, help="GPUs to request per node (GRES) [= ranks; 0 on nodes without GPUs]."),
    launcher: str = typer.Option("srun", help="srun (one task per GPU) or torchrun."),
    time_limit: str | None = typer.Option(None, "--time", help="Slurm time limit."),
    run_dir: Annotated[Path | None, typer.Option(
        help="Shared folder for script, logs, checkpoints, record "
        "[<state home>/runs/fsdp-MODEL-TIME].")] = None,
    wait_: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the job and report."),
    timeout: float | None = typer.Option(None, help="Give up waiting after this many seconds."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script only."),
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
    **train: Any,
) -> None:
    """FSDP2 training benchmark (tokens/s, TFLOPs, MFU, checkpoint GB/s) through Slurm.

    --workload sft: packed chat samples; tokens/s and MFU on real tokens, padding saved.
    --workload rl: a GRPO-style loop, time per phase (generation, reward, training, sync)."""
    with long_command():
        job = api.fsdp_job(nodes, batch_per_gpu=batch_per_gpu, partition=partition,
                           instance_type=instance_type, tasks_per_node=tasks_per_node,
                           gpus_per_node=gpus_per_node, launcher=launcher,
                           time_limit=time_limit, run_dir=run_dir, **train)
        if dry_run:
            typer.echo(driver.render_sbatch(job), nl=False)
            return
        done = api.run_fsdp(job, wait=wait_, timeout=timeout, progress=not as_json,
                            store=False)
    jobend.finish(job, done, title="pctk bench fsdp", rows=driver.summary_rows,
                   as_json=as_json, store=store, db=db)
