"""Prometheus, node_exporter and the Slurm collector as daemons owned by a twin.

``start(twin)`` runs Debian's ``prometheus`` and ``prometheus-node-exporter`` and
``pctk observe collect --listen`` in the foreground of their own sessions, each on a free
loopback port, with Prometheus' data under ``<twin state>/observe/``. Their pids and start
times go into ``observe/observe.json`` (toolkit.local.procs: a process is pid + start time), so
``stop`` (called by ``Twin.down``) ends exactly those. The collector also rewrites the results
textfile (``pctk results prometheus``) in node_exporter's textfile folder every few seconds,
as a cron job or systemd timer does on a head node.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_json, atomic_write_text
from toolkit.local import procs

PROMETHEUS = "prometheus"
NODE_EXPORTER = "prometheus-node-exporter"
APT_HINT = "apt-get install -y --no-install-recommends prometheus prometheus-node-exporter"
# node_exporter collectors a twin needs: the textfile (pctk's results) and a little of the host
NODE_COLLECTORS = ("textfile", "loadavg", "meminfo", "cpu", "time")

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def state_file(self) -> Path:
        return self.root / "observe.json"

    @property
    def textfile_dir(self) -> Path:
        return self.root / "textfile"

    @property
    def data_dir(self) -> Path:
        return self.root / "prometheus-data"

    @property
    def config(self) -> Path:
        return self.root / "prometheus.yml"

    @property
    def rules(self) -> Path:
        return self.root / "pctk-alerts.yml"


def layout(twin_state_dir: Path) -> Layout:
    return Layout(Path(twin_state_dir) / "observe")


def free_port() -> int:
    """A free loopback port (the kernel's choice; the daemon binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render_prometheus_config(cluster: str, targets: dict[str, str], rules: Path,
                             interval: str) -> str:
    """prometheus.yml: node_exporter (pctk's textfiles) and the Slurm collector."""
    return yaml.safe_dump({
        "global": {"scrape_interval": interval, "evaluation_interval": interval,
                   "scrape_timeout": interval, "external_labels": {"pctk_cluster": cluster}},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": "node", "static_configs": [{"targets": [targets["node"]]}]},
            {"job_name": "pctk-slurm", "static_configs": [{"targets": [targets["slurm"]]}]},
        ],
    }, sort_keys=False)


def _load(lay: Layout) -> dict[str, Any] | None:
    try:
        data = json.loads(lay.state_file.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _procs(state: dict[str, Any] | None) -> list[procs.Proc]:
    try:
        return [procs.Proc.from_json(d) for d in (state or {}).get("procs", [])]
    except (KeyError, TypeError, ValueError):
        return []


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # loopback only
            return bool(r.status == 200)
    except (OSError, ValueError):
        return False


def _wait(url: str, proc: procs.Proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not _http_ok(url):
        if not procs.is_running(proc):
            raise PctkError(f"{proc.name} exited during start-up: {procs.tail(proc.log, 2)}",
                            "read the log", log=proc.log)
        if time.monotonic() > deadline:
            raise PctkError(f"{proc.name} not ready after {timeout:.0f}s ({url})",
                            "read the log", log=proc.log)
        time.sleep(0.2)


def status(twin_state_dir: Path) -> dict[str, Any] | None:
    """The observability stack of a twin: URLs and daemons, or None if never started."""
    state = _load(layout(twin_state_dir))
    if not state or not state.get("procs"):
        return None
    daemons = [{"name": p.name, "pid": p.pid, "running": procs.is_running(p), "log": p.log}
               for p in _procs(state)]
    return {"prometheus_url": state["urls"]["prometheus"], "urls": state["urls"],
            "running": all(d["running"] for d in daemons), "daemons": daemons,
            "textfile_dir": state["textfile_dir"], "rules": state["rules"]}


def start(twin_state_dir: Path, cluster: str, slurm_env: dict[str, str], results_db: Path,
          *, rules: str, interval: str = "5s",
          progress: Progress = _quiet, timeout: float = 60.0) -> dict[str, Any]:
    """Start (or keep) the stack; returns ``status``. ``rules`` is the alert rules file's
    text (:func:`toolkit.observe.rules.render_rules`, the observe layer's)."""
    missing = [b for b in (PROMETHEUS, NODE_EXPORTER) if shutil.which(b) is None]
    if missing:
        raise PctkError(f"missing programs: {', '.join(missing)}", APT_HINT)
    lay = layout(twin_state_dir)
    old = _procs(_load(lay))
    if old and all(procs.is_running(p) for p in old):
        if lay.rules.read_text() != rules:
            # new `for:` durations: rewrite the rules and have Prometheus reload them (SIGHUP)
            atomic_write_text(lay.rules, rules, 0o644)
            for p in old:
                if p.name == "prometheus":
                    os.kill(p.pid, signal.SIGHUP)
            progress("observability already running: alert rules reloaded")
        else:
            progress("observability already running")
        st = status(twin_state_dir)
        assert st is not None
        return st
    procs.stop(old)
    for sub in (lay.root, lay.textfile_dir, lay.data_dir, lay.root / "log"):
        sub.mkdir(parents=True, exist_ok=True)
    lay.root.chmod(0o700)  # Prometheus' data and logs: the twin's user's alone
    lay.textfile_dir.chmod(0o755)
    atomic_write_text(lay.rules, rules, 0o644)
    ports = {"node": free_port(), "slurm": free_port(), "prometheus": free_port()}
    targets = {k: f"127.0.0.1:{v}" for k, v in ports.items()}
    atomic_write_text(lay.config, render_prometheus_config(cluster, targets, lay.rules,
                                                           interval), 0o644)
    urls = {k: f"http://{v}" for k, v in targets.items()}
    record: dict[str, Any] = {"urls": urls, "ports": ports, "procs": [],
                              "textfile_dir": str(lay.textfile_dir), "rules": str(lay.rules),
                              "results_db": str(results_db), "started": time.time()}
    started: list[procs.Proc] = []

    def spawn(name: str, argv: list[str], env: dict[str, str]) -> procs.Proc:
        p = procs.spawn(name, argv, lay.root / "log" / f"{name}.out", env, lay.root)
        started.append(p)
        record["procs"] = [x.to_json() for x in started]
        atomic_write_json(lay.state_file, record)
        return p

    try:
        progress("starting node_exporter")
        p = spawn("node_exporter", [
            NODE_EXPORTER, f"--web.listen-address={targets['node']}",
            "--collector.disable-defaults",
            *[f"--collector.{c}" for c in NODE_COLLECTORS],
            f"--collector.textfile.directory={lay.textfile_dir}",
        ], slurm_env)
        _wait(f"{urls['node']}/metrics", p, timeout)
        progress("starting the Slurm collector")
        p = spawn("pctk-collector", [
            sys.executable, "-m", "toolkit.cli", "observe", "collect",
            "--listen", targets["slurm"], "--cluster", cluster,
            "--results-textfile", str(lay.textfile_dir / "pctk-results.prom"),
            "--db", str(results_db),
        ], slurm_env)
        _wait(f"{urls['slurm']}/metrics", p, timeout)
        progress("starting prometheus")
        p = spawn("prometheus", [
            PROMETHEUS, f"--config.file={lay.config}",
            f"--storage.tsdb.path={lay.data_dir}",
            f"--web.listen-address={targets['prometheus']}",
            "--storage.tsdb.retention.time=15d",
        ], slurm_env)
        _wait(f"{urls['prometheus']}/-/ready", p, timeout)
    except BaseException:
        progress("start failed: stopping what was started")
        procs.stop(started)
        record["procs"] = []
        atomic_write_json(lay.state_file, record)
        raise
    st = status(twin_state_dir)
    assert st is not None
    return st


def stop(twin_state_dir: Path, progress: Progress = _quiet) -> list[str]:
    """Stop the stack's daemons by pid (Twin.down calls this); returns those that ran."""
    lay = layout(twin_state_dir)
    state = _load(lay)
    running = [p for p in _procs(state) if procs.is_running(p)]
    if running:
        progress("stopping prometheus, node_exporter and the Slurm collector")
        left = procs.stop(running)
        if left:
            raise PctkError(
                f"could not stop {', '.join(f'{p.name} (pid {p.pid})' for p in left)}",
                "check the process and its log", log=left[0].log)
    if state is not None and state.get("procs"):
        state["procs"] = []
        state["stopped"] = time.time()
        with contextlib.suppress(OSError):
            atomic_write_json(lay.state_file, state)
    return [p.name for p in running]


__all__ = ["layout", "start", "status", "stop"]
