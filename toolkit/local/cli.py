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
from toolkit.local import clusters
from toolkit.local.twin import TwinStatus

app = typer.Typer(
    help=(
        "The local twin: a real Slurm cluster (munge, MariaDB + slurmdbd, slurmctld, one "
        "slurmd per node) on this machine, shaped like a ParallelCluster config."
    ),
    no_args_is_help=True,
)
# ---- fault injection (toolkit/local/faults.py)
from toolkit.local.faults_cli import app as _fault_app  # noqa: E402

app.add_typer(_fault_app, name="fault")

StateDir = typer.Option(
    None, "--state-dir", envvar="PCTK_TWIN_DIR",
    help="Folder of the twins, one sub-folder per cluster name (default: "
    "~/.local/state/pctk/twin).",
)
ClusterOpt = typer.Option(
    None, "--cluster", help="Which cluster's twin (default: the running one).")
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
    for note in st.notes:
        console.print(f"[yellow]{note}[/]")
    for m in st.mounts:
        console.print(f"{m['path']}: {m['note']}")
    for kind, f in st.faults.items():
        console.print(f"[red]fault[/] {kind} on {f.get('node')}: "
                      + (f"rate {f.get('rate')} to {f.get('addr')}" if kind == "slow-net"
                         else f"{f.get('cpus')} CPU ({f.get('cgroup')})"))


@app.command()
def up(
    config: str = typer.Option(
        None, "--config", "-c",
        help="ParallelCluster YAML file or preset name (default: the config of the running or "
        "last started twin; the p5-training preset at first).",
    ),
    nodes: int = typer.Option(
        None, "--nodes", "-n", min=1,
        help="At most this many nodes per compute resource (default: the config's MaxCount, "
        "cut down evenly when the twin would exceed 64 nodes).",
    ),
    cluster: str = typer.Option(
        None, "--cluster", help="Resume the twin of this cluster with its last config."),
    no_accounting: bool = typer.Option(
        False, "--no-accounting",
        help="Skip MariaDB and slurmdbd (sacct then fails, as on a cluster without a Database).",
    ),
    state_dir: Path = StateDir,
    json_out: bool = JsonOut,
) -> None:
    """Start the config's twin and wait until every node is idle and sacct answers.

    Each cluster name has its own twin (state, accounting history); starting another
    cluster's stops the running one, whose state is kept.
    """
    console = Console(stderr=True)
    chosen: str | None = config
    if not chosen and (cluster or clusters.known(state_dir)):
        # no config named: the running (or last started) twin, as it was started
        meant = clusters.select(state_dir, cluster)
        chosen = clusters.config_of(meant)
        nodes = nodes if nodes is not None else clusters.nodes_of(meant)
    t0 = time.monotonic()
    with console.status("starting the twin", spinner="dots") as spinner:
        def progress(msg: str) -> None:
            spinner.update(msg)
            console.log(msg)

        st = clusters.up(chosen, state_dir, nodes=nodes, accounting=not no_accounting,
                         progress=progress)
    took = time.monotonic() - t0
    if json_out:
        print(json.dumps({**st.to_json(), "seconds": round(took, 2)}, indent=2))
        return
    out = Console()
    _status_table(st, out)
    out.print(f"ready in {took:.1f}s. pctk submit/jobs find it; point Slurm's own commands "
              f"at it with: [bold]eval \"$(pctk local env{_dir_arg(state_dir)})\"[/]")


def _dir_arg(state_dir: Path | None) -> str:
    return f" --state-dir {shlex.quote(str(state_dir))}" if state_dir else ""


@app.command()
def down(
    state_dir: Path = StateDir,
    cluster: str = ClusterOpt,
    purge: bool = typer.Option(False, "--purge", help="Also delete the twin's state (logs, "
                               "accounting database) and the MountDir folders it created."),
    json_out: bool = JsonOut,
) -> None:
    """Stop exactly the processes `up` started (by pid), cancelling jobs first."""
    console = Console(stderr=True)
    twin = clusters.select(state_dir, cluster)
    stopped = twin.down(progress=lambda m: console.log(m), purge=purge)
    if json_out:
        print(json.dumps({"stopped": stopped, "state_dir": str(twin.state_dir)}))
    else:
        name = twin.status().cluster if not purge else None
        print((f"stopped {len(stopped)} processes" if stopped else "the twin was not running")
              + (f"; removed {twin.state_dir}" if purge else f" ({name or twin.state_dir})"))


@app.command()
def status(state_dir: Path = StateDir, cluster: str = ClusterOpt,
           json_out: bool = JsonOut) -> None:
    """Show the twin's daemons, partitions and nodes.

    Exit 0 when every daemon runs, 1 when some died (degraded: `pctk local up` restarts the
    twin), 3 when it is stopped.
    """
    st = clusters.select(state_dir, cluster).status()
    if json_out:
        print(json.dumps(st.to_json(), indent=2))
    else:
        _status_table(st, Console())
    if st.state != "running":
        raise typer.Exit(1 if st.state == "degraded" else 3)


@app.command()
def env(
    state_dir: Path = StateDir,
    cluster: str = ClusterOpt,
    json_out: bool = JsonOut,
) -> None:
    """Print `export` lines that point sbatch/srun/squeue/sacct/submitit at the twin.

    Use as: eval "$(pctk local env)". In Python: os.environ.update(Twin().env())
    (Twin from toolkit.local.twin: the running twin).
    """
    twin = clusters.select(state_dir, cluster)
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
