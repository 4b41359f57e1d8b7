"""``pctk local fault``: make one twin node slow (network, CPU or storage), and undo it."""

from __future__ import annotations

from pathlib import Path

import typer

from toolkit.cliout import JsonOption, emit_json
from toolkit.local import clusters, faults

app = typer.Typer(help="Inject faults into the running twin: one slow node (tc shaping, "
                  "cgroup cpu quota) or a failed capacity launch (ice); `pctk local status` "
                  "lists them; `clear` or `local down` undo them.",
                  no_args_is_help=True)

StateDir = typer.Option(None, "--state-dir", envvar="PCTK_TWIN_DIR",
                        help="Folder of the twins (default: ~/.local/state/pctk/twin).")
ClusterOpt = typer.Option(None, "--cluster",
                          help="Which cluster's twin (default: the running one).")


def _dir(state_dir: Path | None, cluster: str | None) -> Path:
    return clusters.select(state_dir, cluster).state_dir


def _show(kind: str, fault: dict[str, object], json_out: bool) -> None:
    if json_out:
        emit_json({"kind": kind, **fault}, indent=None, sort_keys=False)
    elif kind == "slow-net":
        print(f"slow-net: traffic to {fault['node']} ({fault['addr']}) limited to {fault['rate']}")
    elif kind == "slow-storage":
        print(f"slow-storage: {fault['node']}'s jobs limited to {fault['bytes_per_s']:,} "
              f"bytes/s on device {fault['device']} ({fault['path']}; {fault['cgroup']})")
    else:
        print(f"slow-cpu: {fault['node']}'s jobs limited to {fault['cpus']} CPU "
              f"({fault['cgroup']})")


@app.command("slow-net")
def slow_net(node: str = typer.Argument(..., help="Twin node name."),
             rate: str = typer.Option("100mbit", "--rate",
                                      help="tc rate: 100mbit, 5mbps (bytes/s), 1gbit..."),
             state_dir: Path = StateDir, cluster: str = ClusterOpt,
             json_out: bool = JsonOption) -> None:
    """Limit traffic to NODE's own address with an htb class and a u32 filter on `lo`."""
    _show("slow-net", faults.slow_net(_dir(state_dir, cluster), node, rate), json_out)


@app.command("slow-cpu")
def slow_cpu(node: str = typer.Argument(..., help="Twin node name."),
             cpus: float = typer.Option(0.1, "--cpus", help="CPU quota for the node's slurmd "
                                        "and every job process on it (fraction of one CPU)."),
             state_dir: Path = StateDir, cluster: str = ClusterOpt,
             json_out: bool = JsonOption) -> None:
    """Put NODE's slurmd and its jobs in a cgroup with a CFS cpu quota."""
    _show("slow-cpu", faults.slow_cpu(_dir(state_dir, cluster), node, cpus), json_out)


@app.command("slow-storage")
def slow_storage(node: str = typer.Argument(..., help="Twin node name."),
                 rate: str = typer.Option("1m", "--rate", help="Bytes per second for reads "
                                          "and writes, e.g. 1m, 512k."),
                 path: Path = typer.Option(Path("/tmp"), "--path", help="A folder on the "
                                           "disk to slow (the checkpoint folder's disk)."),
                 state_dir: Path = StateDir, cluster: str = ClusterOpt,
                 json_out: bool = JsonOption) -> None:
    """Put NODE's slurmd and its jobs in a block-I/O cgroup limiting the disk under PATH."""
    _show("slow-storage", faults.slow_storage(_dir(state_dir, cluster), node, rate, path),
          json_out)


@app.command("clear")
def clear(state_dir: Path = StateDir, cluster: str = ClusterOpt,
          json_out: bool = JsonOption) -> None:
    """Remove every fault of the twin."""
    kinds = faults.clear(_dir(state_dir, cluster))
    if json_out:
        emit_json({"cleared": kinds}, indent=None, sort_keys=False)
    else:
        print(f"cleared {', '.join(kinds)}" if kinds else "no faults were active")
