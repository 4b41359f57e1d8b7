"""``pctk local``: start, inspect and stop the local Slurm twin."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolkit.cliout import FAILED, NOT_RUNNING, JsonOption, emit_json, exit_with
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError, visible
from toolkit.local import capacity, clusters, stack
from toolkit.local import gc as twin_gc
from toolkit.local import replace as replacing
from toolkit.local.power import DEFAULT_BOOT_DELAY
from toolkit.local.twin import Twin, TwinStatus
from toolkit.observe.cli import start_for_twin

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
# ---- Slurm releases (toolkit/local/slurmimage.py)
from toolkit.local.image_cli import app as _image_app  # noqa: E402

app.add_typer(_image_app, name="image")

StateDir = typer.Option(
    None, "--state-dir", envvar="PCTK_TWIN_DIR",
    help="Folder of the twins, one sub-folder per cluster name (default: "
    "~/.local/state/pctk/twin).",
)
ClusterOpt = typer.Option(
    None, "--cluster", help="Which cluster's twin (default: the running one).")


def _status_table(st: TwinStatus, console: Console) -> None:
    if st.config is None and st.cluster is None and not st.daemons:
        # nothing was ever started here (or it was purged): no twin to name
        console.print(f"no twin in {visible(escape(str(st.state_dir.parent)))}: `pctk local "
                      "up` starts one (`--config FILE` for a config of yours)")
        return
    head = st.state
    dead = [d for d in st.dead_daemons if d not in st.missing]
    said = ([f"{', '.join(dead)} down"] if dead else []) + (
        [f"{', '.join(st.missing)} never started"] if st.state == "degraded" and st.missing
        else [])
    if said:
        head += f" ({'; '.join(said)})"
    console.print(f"[bold]twin[/] {st.cluster or '-'}: [bold]{head}[/]  "
                  f"(config {visible(escape(str(st.config or '-')))}, "
                  f"state {visible(escape(str(st.state_dir)))}, "
                  f"accounting {'on' if st.accounting else 'off'}"
                  + (f", Slurm {escape(st.slurm_version)}" if st.slurm_version else "") + ")")
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
    if st.power_events:
        console.print("[bold]power events[/] (latest last)")
        t = Table("time", "node", "event", "detail", box=None, pad_edge=False)
        for e in st.power_events:
            t.add_row(time.strftime("%H:%M:%S", time.localtime(float(e.get("time", 0)))),
                      str(e.get("node", "")), str(e.get("event", "")), str(e.get("detail", "")))
        console.print(t)
    for kind, f in st.faults.items():
        if kind == "ice":
            console.print(f"[yellow]fault armed: ice {', '.join(sorted(f))}[/]")
        else:
            console.print(f"[red]fault[/] {kind} on {f.get('node')}: "
                          + (f"rate {f.get('rate')} to {f.get('addr')}" if kind == "slow-net"
                             else f"{f.get('bytes_per_s')} bytes/s on {f.get('device')} "
                             f"({f.get('cgroup')})" if kind == "slow-storage"
                             else f"{f.get('cpus')} CPU ({f.get('cgroup')})"))
    for note in st.notes:
        console.print(f"[yellow]{note}[/]")
    for m in st.mounts:
        console.print(f"{m['path']}: {m['note']}")
    if (obs := stack.status(st.state_dir)) is not None:
        console.print(f"Prometheus: {obs['prometheus_url']} "
                      f"({'up' if obs['running'] else '[red]down[/]'}; `pctk observe status`)")


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
    accounting: bool = typer.Option(
        None, "--accounting/--no-accounting", show_default=False,
        help="Run MariaDB and slurmdbd (sacct, job history) or not (default: as the config "
        "says: on with Scheduling/SlurmSettings/Database, off without, as on its cluster).",
    ),
    force: bool = typer.Option(
        False, "--force",
        help="Start even though `pctk config check` rejects the config (said on every start); "
        "without it such a config stops nothing and starts nothing (exit 2).",
    ),
    observe: bool = typer.Option(
        False, "--observe", help="Also start Prometheus, node_exporter and the Slurm collector "
        "(as `pctk observe up`); they stop with the twin."),
    boot_delay: float = typer.Option(
        DEFAULT_BOOT_DELAY, "--boot-delay", min=0,
        help="Seconds a powered-down dynamic node takes to boot when a job needs it "
        "(an instance launch on ParallelCluster).",
    ),
    slurm: str = typer.Option(
        None, "--slurm", envvar="PCTK_SLURM", metavar="RELEASE",
        help="The Slurm the twin runs: 'system' (this machine's) or a release pctk builds "
        "once and keeps (24.11, as ParallelCluster 3.14; `pctk local image list`). Default: "
        "what this cluster's twin last ran, else ParallelCluster's own release when it is "
        "built here, else the system's.",
    ),
    state_dir: Path = StateDir,
    json_out: bool = JsonOption,
) -> None:
    """Start the config's twin and wait until every node is idle and sacct answers.

    Each cluster name has its own twin (state, accounting history); starting another
    cluster's stops the running one, whose state is kept.
    """
    console = cli_console(stderr=True)
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

        st = clusters.up(chosen, state_dir, nodes=nodes, accounting=accounting,
                         progress=progress, boot_delay=boot_delay, force=force,
                         slurm_release=slurm)
        obs = None
        if observe:
            obs = start_for_twin(Twin(st.state_dir), progress=progress)
    took = time.monotonic() - t0
    if json_out:
        emit_json({**st.to_json(), "seconds": round(took, 2),
                   **({"observe": obs} if obs else {})}, sort_keys=False)
        return
    out = cli_console()
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
                               "accounting database) and the MountDir folders it created, and "
                               "what deleted twin folders of the same root left (`local gc`)."),
    json_out: bool = JsonOption,
) -> None:
    """Stop exactly the processes `up` started (by pid), cancelling jobs first."""
    console = cli_console(stderr=True)
    twin = clusters.select(state_dir, cluster)
    existed = twin.state_dir.is_dir()
    stopped = twin.down(progress=lambda m: console.log(m), purge=purge)
    removed = purge and existed and not twin.state_dir.exists()
    # the twin root's own leftovers: twins of this root whose folder was deleted
    swept = _sweep(console, twin.root) if purge else None
    if json_out:
        gc_json = {"gc": {**swept[0].to_json(), "not_stopped": swept[1]}} if swept else {}
        emit_json({"stopped": stopped, "state_dir": str(twin.state_dir), "removed": removed,
                   **gc_json}, indent=None, sort_keys=False)
    else:
        name = twin.status().cluster if not purge else None
        gone = (f"; removed {twin.state_dir}" if removed else
                f"; no twin folder {twin.state_dir} to remove")
        print((f"stopped {len(stopped)} processes" if stopped else "the twin was not running")
              + (gone if purge else f" ({name or twin.state_dir})"))


def _sweep(console: Console, under: Path | None) -> tuple[twin_gc.Leftovers, list[int]]:
    """Stop and remove what twins whose state folder is gone left behind (toolkit.local.gc)."""
    found, stubborn = twin_gc.collect(under=under.absolute() if under else None)
    for p in found.daemons:
        console.log(f"stopped {p.name} (pid {p.pid}) of the deleted twin folder {p.log}")
    for home in found.homes:
        console.log(f"removed the MariaDB data of a twin that is gone: {home}")
    for p in stubborn:
        console.log(f"[red]could not stop {p.name} (pid {p.pid})[/]")
    return found, [p.pid for p in stubborn]


@app.command()
def gc(
    under: Path = typer.Option(
        None, "--under", help="Only twins whose state folder was in this folder (default: "
        "every twin on this machine that you may see)."),
    json_out: bool = JsonOption,
) -> None:
    """Clean up after twins whose state folder was deleted: stop daemons, remove MariaDB data.

    Daemons are stopped by pid; root twins keep their MariaDB data in
    /var/lib/pctk/twin-mariadb. Exit 0 when everything found was removed, 1 when a process
    would not stop.
    """
    found, stubborn = _sweep(Console(stderr=True), under)
    if json_out:
        emit_json({**found.to_json(), "not_stopped": stubborn}, indent=None, sort_keys=False)
    else:
        kept = (f"; kept {len(found.unknown)} from before pctk recorded their twin (remove by "
                "hand once no twin uses them)" if found.unknown else "")
        print(f"stopped {len(found.daemons)} orphaned daemons, removed {len(found.homes)} "
              f"MariaDB data folders{kept}")
    if stubborn:
        exit_with(FAILED)


@app.command()
def status(state_dir: Path = StateDir, cluster: str = ClusterOpt,
           json_out: bool = JsonOption) -> None:
    """Show the twin's daemons, partitions and nodes.

    Exit 0 when every daemon runs (slurmctld and every static node's slurmd among them), 1
    when some died or never started (degraded: `pctk local up` restarts the twin), 3 when it
    is stopped.
    """
    st = clusters.select(state_dir, cluster).status()
    if json_out:
        emit_json({**st.to_json(), "observe": stack.status(st.state_dir)}, sort_keys=False)
    else:
        _status_table(st, cli_console())
    if st.state != "running":
        exit_with(FAILED if st.state == "degraded" else NOT_RUNNING)


@app.command()
def env(
    state_dir: Path = StateDir,
    cluster: str = ClusterOpt,
    json_out: bool = JsonOption,
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
        emit_json(values, indent=None, sort_keys=False)
        return
    for k, v in values.items():
        print(f"export {k}={shlex.quote(v)}")


@app.command()
def replace(node: str = typer.Argument(..., help="A static node, e.g. gpu-st-p5-2."),
            state_dir: Path = StateDir, cluster: str = ClusterOpt,
            json_out: bool = JsonOption) -> None:
    """Replace a static node as ParallelCluster's clustermgtd replaces an unhealthy one.

    The node goes DOWN ("Static node maintenance: unhealthy node is being replaced"), its
    jobs are requeued, its slurmd stops, and a new one starts after the boot delay.
    """
    twin = clusters.select(state_dir, cluster)
    _require_running(twin.status())
    replacing.replace(twin.state_dir, node)
    if json_out:
        emit_json({"node": node, "reason": replacing.REASON}, indent=None, sort_keys=False)
    else:
        print(f"{node}: down ({replacing.REASON}); relaunching")


def _require_running(st: TwinStatus) -> None:
    if st.state == "stopped":
        raise PctkError(f"the twin in {st.state_dir} is not running",
                        "start it with `pctk local up`")


# ---------------------------------------------------------------- faults
fault_app = _fault_app  # `fault ice` joins slow-net/slow-cpu/clear


@fault_app.command("ice")
def fault_ice(
    resource: str = typer.Argument(..., help="QUEUE/COMPUTE_RESOURCE, e.g. cpu/c5."),
    timeout: float = typer.Option(
        None, "--timeout", help="Seconds until the failed nodes power down and may launch "
        "again (default: ParallelCluster's insufficient_capacity_timeout, 600 s, divided by 6)."),
    state_dir: Path = StateDir, cluster: str = ClusterOpt, json_out: bool = JsonOption,
) -> None:
    """The next power-up of QUEUE/CR fails with InsufficientInstanceCapacity."""
    twin = clusters.select(state_dir, cluster)
    _require_running(twin.status())
    wait = capacity.DEFAULT_TIMEOUT if timeout is None else timeout
    capacity.arm(twin.state_dir, resource, wait)
    if json_out:
        emit_json({"fault": "ice", "resource": resource, "timeout": wait}, indent=None,
                  sort_keys=False)
    else:
        print(f"armed: the next power-up of {resource} fails with "
              f"(Code:{capacity.CODE}); its nodes power down again after {wait:g} s")
