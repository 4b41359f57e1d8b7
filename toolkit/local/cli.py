"""``pctk local``: start, inspect and stop the local Slurm twin."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from toolkit.errors import PctkError
from toolkit.local.twin import Twin, TwinStatus

app = typer.Typer(
    help=(
        "The local twin: a real Slurm cluster (munge, MariaDB + slurmdbd, slurmctld, one "
        "slurmd per node) on this machine, shaped like a ParallelCluster config."
    ),
    no_args_is_help=True,
)

StateDir = typer.Option(
    None, "--state-dir", envvar="PCTK_TWIN_DIR",
    help="Folder for the twin's config, logs and data (default: ~/.local/state/pctk/twin).",
)
JsonOut = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _status_table(st: TwinStatus, console: Console) -> None:
    head = st.state
    if st.dead_daemons:
        head += f" ({', '.join(st.dead_daemons)} down)"
    console.print(f"[bold]twin[/] {st.cluster or '-'}: [bold]{head}[/]  "
                  f"(config {st.config or '-'}, state {st.state_dir}, "
                  f"accounting {'on' if st.accounting else 'off'})")
    if st.daemons:
        t = Table("daemon", "pid", "state", "log", box=None, pad_edge=False)
        for d in st.daemons:
            t.add_row(d["name"], str(d["pid"]), "[green]up[/]" if d["running"] else "[red]down[/]",
                      d["log"])
        console.print(t)
    if st.nodes:
        t = Table("node", "partition", "state", "cpus", "gres", "reason", box=None,
                  pad_edge=False)
        for n in sorted(st.nodes, key=lambda n: (st.partitions.index(n["partition"])
                                                 if n["partition"] in st.partitions else 99,
                                                 n["name"])):
            t.add_row(n["name"], n["partition"], n["state"], n["cpus"], n["gres"],
                      "" if n["reason"] == "none" else n["reason"])
        console.print(t)


@app.command()
def up(
    config: str = typer.Option(
        None, "--config", "-c",
        help="ParallelCluster YAML file or preset name (default: the p5-training preset).",
    ),
    nodes: int = typer.Option(
        None, "--nodes", "-n", min=1,
        help="At most this many nodes per compute resource (default: 4).",
    ),
    no_accounting: bool = typer.Option(
        False, "--no-accounting",
        help="Skip MariaDB and slurmdbd (sacct then fails, as on a cluster without a Database).",
    ),
    state_dir: Path = StateDir,
    json_out: bool = JsonOut,
) -> None:
    """Start the twin and wait until every node is idle and sacct answers."""
    console = Console(stderr=True)
    twin = Twin(state_dir)
    t0 = time.monotonic()
    with console.status("starting the twin", spinner="dots") as spinner:
        def progress(msg: str) -> None:
            spinner.update(msg)
            console.log(msg)

        st = twin.up(config, nodes=nodes, accounting=not no_accounting, progress=progress)
    took = time.monotonic() - t0
    if json_out:
        print(json.dumps({**st.to_json(), "seconds": round(took, 2)}, indent=2))
        return
    out = Console()
    _status_table(st, out)
    out.print(f"ready in {took:.1f}s. Point your shell at it with: "
              f"[bold]eval \"$(pctk local env{_dir_arg(state_dir)})\"[/]")


def _dir_arg(state_dir: Path | None) -> str:
    return f" --state-dir {shlex.quote(str(state_dir))}" if state_dir else ""


@app.command()
def down(
    state_dir: Path = StateDir,
    purge: bool = typer.Option(False, "--purge", help="Also delete the state folder (logs, "
                               "accounting database)."),
    json_out: bool = JsonOut,
) -> None:
    """Stop exactly the processes `up` started (by pid), cancelling jobs first."""
    console = Console(stderr=True)
    twin = Twin(state_dir)
    stopped = twin.down(progress=lambda m: console.log(m), purge=purge)
    if json_out:
        print(json.dumps({"stopped": stopped, "state_dir": str(twin.state_dir)}))
    else:
        print(f"stopped {len(stopped)} processes" if stopped else "the twin was not running")


@app.command()
def status(state_dir: Path = StateDir, json_out: bool = JsonOut) -> None:
    """Show the twin's daemons, partitions and nodes.

    Exit 0 when every daemon runs, 1 when some died (degraded: `pctk local up` restarts the
    twin), 3 when it is stopped.
    """
    st = Twin(state_dir).status()
    if json_out:
        print(json.dumps(st.to_json(), indent=2))
    else:
        _status_table(st, Console())
    if st.state != "running":
        raise typer.Exit(1 if st.state == "degraded" else 3)


@app.command()
def env(
    state_dir: Path = StateDir,
    json_out: bool = JsonOut,
) -> None:
    """Print `export` lines that point sbatch/srun/squeue/sacct/submitit at the twin.

    Use as: eval "$(pctk local env)". In a notebook: os.environ.update(Twin().env()).
    """
    twin = Twin(state_dir)
    st = twin.status()
    if st.state == "stopped":
        raise PctkError(f"the twin in {twin.state_dir} is not running",
                        "start it with `pctk local up`")
    if st.state == "degraded":
        print(f"# the twin is degraded ({', '.join(st.dead_daemons)} down): "
              "`pctk local up` restarts it", file=sys.stderr)
    values = twin.env()
    if json_out:
        print(json.dumps(values))
        return
    for k, v in values.items():
        print(f"export {k}={shlex.quote(v)}")
