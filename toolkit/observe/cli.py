"""``pctk observe``: Slurm and cost metrics, the twin's Prometheus, alert rules, dashboard."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from toolkit.cliout import FAILED, NOT_RUNNING, JsonOption, emit_json, exit_with
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text
from toolkit.local import clusters, stack
from toolkit.observe.dashboard import dashboard_text
from toolkit.observe.headnode import render_scrape_config
from toolkit.observe.rules import render_rules
from toolkit.paths import results_db
from toolkit.results.compare import DEFAULT_THRESHOLD
from toolkit.results.store import ResultStore

if TYPE_CHECKING:
    from toolkit.local.twin import Twin

app = typer.Typer(
    help="Observability: Slurm and cost metrics for Prometheus, the twin's own Prometheus and "
    "node_exporter, alert rules and a Grafana dashboard.",
    no_args_is_help=True,
)
StateDir = typer.Option(
    None, "--state-dir", envvar="PCTK_TWIN_DIR",
    help="Folder of the twins (default: ~/.local/state/pctk/twin).")
ClusterOpt = typer.Option(None, "--cluster", help="Which cluster's twin (default: the running "
                          "one).")


def _listen_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise PctkError(f"bad --listen {value!r}", "give HOST:PORT, e.g. 127.0.0.1:9877")
    return host or "127.0.0.1", int(port)


def _refresh_results(db: Path, out: Path) -> None:
    """Rewrite the results textfile (what `pctk results prometheus -o` does)."""
    from toolkit.results.prometheus import write_textfile  # prometheus_client: ~45 ms

    store = ResultStore(db, writer=False)
    try:
        write_textfile(store, out, DEFAULT_THRESHOLD)
    finally:
        store.close()


def _stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


@app.command()
def collect(
    out: Path = typer.Option(None, "--out", "-o", help="Write a textfile for node_exporter's "
                             "textfile collector (atomically) instead of printing."),
    listen: str = typer.Option(None, "--listen", help="Serve /metrics on HOST:PORT (a tiny "
                               "exporter that reads Slurm on every scrape) until stopped."),
    window: float = typer.Option(24.0, "--window", min=0.01, help="Hours of ended jobs that "
                                 "GPU hours and cost cover."),
    cluster: str = typer.Option(None, "--cluster", help="Add cluster=NAME to every sample."),
    results_textfile: Path = typer.Option(
        None, "--results-textfile", help="With --listen: also rewrite the results textfile "
        "(as `pctk results prometheus -o`) here every --every seconds."),
    db: Path = typer.Option(None, "--db", envvar="PCTK_RESULTS_DB",
                            help="Results database for --results-textfile."),
    every: float = typer.Option(5.0, "--every", min=0.5, help="Seconds between rewrites."),
    json_out: bool = JsonOption,
) -> None:
    """Nodes by state, jobs and pending reasons, GPU hours and list-price cost per user.

    Reads sinfo, squeue and (where accounting exists) sacct once per scrape. Without
    accounting it says so once and exports node and job counts only.
    """
    # prometheus_client (~45 ms) and the collector only for the commands that export
    from prometheus_client import generate_latest, start_http_server

    from toolkit.observe.collect import registry
    from toolkit.results.prometheus import check_textfile_path, write_registry

    if out is not None:
        check_textfile_path(out)
    reg = registry(window, cluster)
    if listen:
        host, port = _listen_address(listen)
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        try:
            start_http_server(port, addr=host, registry=reg)
        except OSError as exc:
            raise PctkError(f"cannot listen on {host}:{port}: {exc.strerror}",
                            "choose another --listen port") from None
        print(f"serving Slurm metrics on http://{host}:{port}/metrics", file=sys.stderr,
              flush=True)

        db_path = db or results_db()
        while True:
            if results_textfile is not None and db_path.exists():
                try:
                    _refresh_results(db_path, results_textfile)
                except (PctkError, OSError) as exc:
                    print(f"pctk observe: results textfile not written: {exc}",
                          file=sys.stderr, flush=True)
            time.sleep(every)
    t0 = time.monotonic()
    if out is None:
        sys.stdout.write(generate_latest(reg).decode())
        return
    write_registry(out, reg)
    took = time.monotonic() - t0
    if json_out:
        emit_json({"path": str(out), "seconds": round(took, 3)}, indent=None,
                  sort_keys=False)
    else:
        print(f"wrote {out} in {took:.2f}s")


def _twin(state_dir: Path | None, cluster: str | None) -> Twin:
    return clusters.select(state_dir, cluster)


def start_for_twin(twin: Twin, alert_for: str | None = None, interval: str = "5s",
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Start the observability stack of a running twin (``pctk local up --observe`` too)."""
    st = twin.status()
    if st.state != "running":
        raise PctkError(f"the twin in {twin.state_dir} is not running",
                        "start it with `pctk local up` (or `pctk local up --observe`)")
    env = dict(os.environ)
    env.update(twin.env())
    return stack.start(twin.state_dir, st.cluster or "twin", env, results_db(),
                       rules=render_rules(alert_for), interval=interval,
                       progress=progress or (lambda m: print(m, file=sys.stderr)))


@app.command()
def up(
    state_dir: Path = StateDir,
    cluster: str = ClusterOpt,
    alert_for: str = typer.Option(None, "--alert-for", help="Give every alert this `for:` "
                                  "(e.g. 10s to see alerts fire on the twin)."),
    interval: str = typer.Option("5s", "--interval", help="Scrape and rule interval."),
    json_out: bool = JsonOption,
) -> None:
    """Start Prometheus, node_exporter and the Slurm collector for the running twin.

    Loopback ports chosen free, data under the twin's state folder; `pctk local down` stops
    them with the twin.
    """
    st = start_for_twin(_twin(state_dir, cluster), alert_for, interval)
    if json_out:
        emit_json(st, sort_keys=False)
    else:
        print(f"Prometheus: {st['prometheus_url']}  (node_exporter {st['urls']['node']}, "
              f"Slurm collector {st['urls']['slurm']}; textfiles in {st['textfile_dir']})")


@app.command()
def down(state_dir: Path = StateDir, cluster: str = ClusterOpt,
         json_out: bool = JsonOption) -> None:
    """Stop the twin's observability daemons (the twin keeps running)."""
    stopped = stack.stop(_twin(state_dir, cluster).state_dir)
    if json_out:
        emit_json({"stopped": stopped}, indent=None, sort_keys=False)
    else:
        print(f"stopped {', '.join(stopped)}" if stopped else "observability was not running")


@app.command()
def status(state_dir: Path = StateDir, cluster: str = ClusterOpt,
           json_out: bool = JsonOption) -> None:
    """The Prometheus URL and daemons of the twin's observability (exit 3 when stopped)."""
    st = stack.status(_twin(state_dir, cluster).state_dir)
    if json_out:
        emit_json(st, sort_keys=False)
    elif st:
        print(f"Prometheus: {st['prometheus_url']}")
        for d in st["daemons"]:
            print(f"  {d['name']:<16} pid {d['pid']:<8} {'up' if d['running'] else 'down'}")
    else:
        print("observability is not running (pctk observe up)")
    if not st or not st["running"]:
        exit_with(NOT_RUNNING if not st or not any(d["running"] for d in st["daemons"])
                  else FAILED)


@app.command()
def rules(
    out: Path = typer.Option(None, "--out", "-o", help="Copy the rules file here."),
    alert_for: str = typer.Option(None, "--alert-for", help="Replace every alert's `for:`."),
) -> None:
    """Print (or copy) pctk's Prometheus alert rules."""
    text = render_rules(alert_for)
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text, 0o644)
        print(f"wrote {out}")


@app.command()
def dashboard(
    out: Path = typer.Option(None, "--out", "-o", help="Write the dashboard JSON here."),
) -> None:
    """The Grafana dashboard (JSON, generated from code) for pctk's metrics."""
    text = dashboard_text()
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text, 0o644)
        print(f"wrote {out}")


@app.command("scrape-config")
def scrape_config(
    config: str = typer.Argument(..., help="ParallelCluster YAML file or preset name."),
    region: str = typer.Option(None, "--region", help="AWS region (default: the config's)."),
    out: Path = typer.Option(None, "--out", "-o", help="Write prometheus.yml here."),
) -> None:
    """prometheus.yml for a real cluster's head node: EC2 discovery by cluster-name tag."""
    text = render_scrape_config(config, region)
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text, 0o644)
        print(f"wrote {out}")
