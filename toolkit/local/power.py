"""The twin's power saving: Slurm's ResumeProgram and SuspendProgram, as on ParallelCluster.

On ParallelCluster every node is a cloud node. Dynamic (``-dy-``) nodes start powered down
(``idle~``); when a job needs them slurmctld runs ``slurm_resume``, which launches EC2
instances (``alloc#``/``idle#`` while they boot), and after ``ScaledownIdletime`` of idleness
``slurm_suspend`` terminates them. Static nodes are ``SuspendExcNodes``: never powered down.

The twin does the same with a slurmd per node: ``pctk local up`` writes two small programs
into ``<state>/bin`` (slurmctld runs them with a bare environment, so they carry their own
interpreter and paths); they run :mod:`toolkit.local.programs`, thin entry points over this
module, which starts, stops and records a node's slurmd and imports no other lifecycle module:

* ``resume HOSTLIST``: for each node, unless a capacity fault claims it
  (:mod:`toolkit.local.capacity`), a detached boot process sleeps the boot delay, then starts
  the node's slurmd; slurmd registering is the instance joining the cluster.
* ``suspend HOSTLIST`` (also ResumeFailProgram): stops those nodes' slurmd, by pid.

Every slurmd started here is recorded in ``nodes/<node>/slurmd.json`` (pid + start time, as
:mod:`toolkit.local.procs`), boot processes in ``power/boot-<pid>.json``, so ``pctk local
down`` stops them too. Each step appends one line to ``power/events.jsonl`` (``pctk local
status`` shows them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from toolkit.fsutil import atomic_write_json, atomic_write_text
from toolkit.local import faultfile, hosts, nodeaddr, procs
from toolkit.local.plan import node_host
from toolkit.paths import code_root

CONFIG = "power.json"
# seconds from ResumeProgram to the node's slurmd starting (an instance's boot); ParallelCluster
# takes minutes, the twin seconds so tests stay quick. `pctk local up --boot-delay` changes it.
DEFAULT_BOOT_DELAY = 3.0


def _dir(state_dir: Path) -> Path:
    d = state_dir / "power"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def write_programs(state_dir: Path, slurm_conf: Path, nodes: dict[str, str],
                   env: dict[str, str], boot_delay: float,
                   addrs: dict[str, str] | None = None) -> None:
    """``<state>/bin/pctk-resume``, ``pctk-suspend`` and the settings they read.

    ``nodes``: node name -> ``QUEUE/COMPUTE_RESOURCE``; ``addrs``: node name -> its own
    loopback address (absent: 127.0.0.1, shared).
    """
    keep = ("PATH", "LANG", "PCTK_TWIN_DIR", "PCTK_HOME", "HOME")
    cfg = {
        "boot_delay": boot_delay,
        "slurm_conf": str(slurm_conf),
        "nodes": nodes,
        "addrs": addrs or {},
        "env": {**{k: env[k] for k in keep if k in env}, "SLURM_CONF": str(slurm_conf),
                "PCTK_TWIN_DAEMON": "1"},
    }
    atomic_write_json(state_dir / CONFIG, cfg)
    bin_dir = state_dir / "bin"
    bin_dir.mkdir(mode=0o700, exist_ok=True)
    pkg_root = code_root()
    for name, verb in (("pctk-resume", "resume"), ("pctk-suspend", "suspend")):
        atomic_write_text(bin_dir / name, "\n".join([
            "#!/bin/sh",
            "# Written by `pctk local up`: slurmctld runs it (Resume/SuspendProgram) with the",
            "# node list as $1; see toolkit/local/programs.py.",
            f"PYTHONPATH={shlex.quote(str(pkg_root))} exec {shlex.quote(sys.executable)} "
            f"-m toolkit.local.programs {verb} {shlex.quote(str(state_dir))} \"$1\"",
            "",
        ]), 0o755)


def load_config(state_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir / CONFIG).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def node_addresses(state_dir: Path) -> dict[str, str]:
    """Node name -> the node's own address (127.0.0.1 when nodes share it), as the plan gave
    it to ``pctk local up``: the one source of a twin node's address (slurm.conf's NodeAddr,
    a slurmd's listening and source address, the slow-net fault's filter)."""
    cfg = load_config(state_dir)
    addrs = cfg.get("addrs") or {}
    return {n: str(addrs.get(n, "127.0.0.1")) for n in cfg.get("nodes") or {}}


def set_boot_delay(state_dir: Path, boot_delay: float) -> None:
    """Change the boot delay of a running twin's power programs (read at each power-up)."""
    cfg = load_config(state_dir)
    if cfg and cfg.get("boot_delay") != boot_delay:
        cfg["boot_delay"] = boot_delay
        atomic_write_json(state_dir / CONFIG, cfg)


def event(state_dir: Path, node: str, what: str, detail: str = "") -> None:
    line = json.dumps({"time": round(time.time(), 3), "node": node, "event": what,
                       "detail": detail})
    # one short O_APPEND write per event: lines from concurrent programs do not interleave
    fd = os.open(_dir(state_dir) / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def events(state_dir: Path, limit: int = 20) -> list[dict[str, Any]]:
    try:
        lines = (state_dir / "power" / "events.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines[-limit:]:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _slurmd_record(state_dir: Path, node: str) -> Path:
    return state_dir / "nodes" / node / "slurmd.json"


def start_slurmd(state_dir: Path, node: str, env: dict[str, str], slurm_conf: Path,
                 booted: bool = False) -> procs.Proc:
    """Start the node's slurmd in its own session and record it (pid + start time).

    ``booted``: the node has just "booted" (a power-up or a relaunch). slurmctld accepts a
    powering-up node only once it reports a boot after the request; every twin node shares
    this host's uptime, so slurmd says so itself (``-b``: report a reboot now).
    """
    argv = ["slurmd", "-D", *(["-b"] if booted else []), "-N", node, "-f", str(slurm_conf)]
    addr = node_addresses(state_dir).get(node, "127.0.0.1")
    if addr != "127.0.0.1":
        # its own host name (UTS namespace), hence its own listening address (see
        # plan.node_host), and its own source address (see nodeaddr.py)
        argv = ["unshare", "--uts", "sh", "-c", f'hostname {node_host(addr)} && exec "$@"',
                "sh", *argv]
        # and node names resolved in the twin's own hosts file (nodeaddr.py, hosts.py)
        env = {**env, "PCTK_NODE_ADDR": addr,
               "LD_PRELOAD": str(nodeaddr.build(state_dir / "lib")),
               "PCTK_TWIN_HOSTS": str(hosts.twin_file(state_dir))}
    p = procs.spawn(f"slurmd:{node}", argv, state_dir / "log" / f"slurmd-{node}.out", env,
                    state_dir)
    faultfile.follow_new_slurmd(state_dir, node, p.pid)  # an active slow-cpu fault stays
    rec = _slurmd_record(state_dir, node)
    rec.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(rec, p.to_json())
    return p


def recorded_slurmd(state_dir: Path, node: str) -> procs.Proc | None:
    try:
        return procs.Proc.from_json(json.loads(_slurmd_record(state_dir, node).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stop_slurmd(state_dir: Path, node: str) -> bool:
    """Stop the node's recorded slurmd by pid; True when one was running."""
    p = recorded_slurmd(state_dir, node)
    was = p is not None and procs.is_running(p)
    if p is not None:
        procs.stop([p], timeout=10)
    _slurmd_record(state_dir, node).unlink(missing_ok=True)
    return was


def crash_node(state_dir: Path, node: str, slurmd: procs.Proc | None = None) -> int:
    """The node fails as a machine does: its slurmd, job steps and tasks (every process in
    the slurmd's UTS namespace) are killed at once, so no step reports its job's end to
    slurmctld, which hears of the node from no one until SlurmdTimeout marks it down and its
    jobs NODE_FAIL. Stopping slurmd alone leaves the steps running, and the first step to end
    reports to slurmctld itself: Slurm 24.11 then applies that end to the job it has just
    requeued. Returns how many processes were killed (0: no slurmd ran; where every slurmd
    shares this host's name, slurmd alone). ``slurmd``: the node's, when this module did not
    start it."""
    p = slurmd or recorded_slurmd(state_dir, node)
    if p is None or not procs.is_running(p):
        return 0
    victims = procs.sharing_uts_namespace(p.pid) or [p]
    # frozen before any dies, and frozen again until no new one appears: a process forked
    # between the scan and the signals would live on as part of a machine that is gone
    seen = {v.pid for v in victims}
    procs.freeze(victims)
    while more := [v for v in procs.sharing_uts_namespace(p.pid) if v.pid not in seen]:
        seen.update(v.pid for v in more)
        victims += more
        procs.freeze(more)
    procs.kill(victims)
    _slurmd_record(state_dir, node).unlink(missing_ok=True)
    return len(victims)


def recorded(state_dir: Path) -> list[procs.Proc]:
    """Every process the power programs started that may still run (boot processes first)."""
    out: list[procs.Proc] = []
    for f in sorted((state_dir / "power").glob("boot-*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            out.append(procs.Proc.from_json(json.loads(f.read_text())))
    for f in sorted((state_dir / "nodes").glob("*/slurmd.json")):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            out.append(procs.Proc.from_json(json.loads(f.read_text())))
    return out


def forget_all(state_dir: Path) -> None:
    """After `down` stopped them: no power process is recorded any more."""
    for f in (state_dir / "power").glob("boot-*.json"):
        f.unlink(missing_ok=True)
    for f in (state_dir / "nodes").glob("*/slurmd.json"):
        f.unlink(missing_ok=True)


def spawn_detached(state_dir: Path, verb: str, args: list[str], env: dict[str, str]) -> None:
    """A helper process in its own session (slurmctld kills its programs' process group
    when they outlive their timeout), recorded so `down` can stop it."""
    log = _dir(state_dir) / "power.log"
    p = procs.spawn(f"power:{verb}", [sys.executable, "-m", "toolkit.local.programs", verb,
                                      str(state_dir), *args], log, env, state_dir)
    atomic_write_json(_dir(state_dir) / f"boot-{p.pid}.json", p.to_json())


def forget_self(state_dir: Path) -> None:
    """A detached helper process, done: no longer recorded."""
    (state_dir / "power" / f"boot-{os.getpid()}.json").unlink(missing_ok=True)


def env_of(cfg: dict[str, Any]) -> dict[str, str]:
    env = {k: str(v) for k, v in (cfg.get("env") or {}).items()}
    env["PYTHONPATH"] = str(code_root())
    return env


def boot(state_dir: Path, nodes: list[str]) -> None:
    """The detached boot process: after the boot delay, start each node's slurmd."""
    cfg = load_config(state_dir)
    env = env_of(cfg)
    try:
        time.sleep(float(cfg.get("boot_delay", DEFAULT_BOOT_DELAY)))
        conf = Path(str(cfg.get("slurm_conf") or state_dir / "etc" / "slurm.conf"))
        for n in nodes:
            stop_slurmd(state_dir, n)  # a leftover from a failed earlier boot
            p = start_slurmd(state_dir, n, env, conf, booted=True)
            event(state_dir, n, "slurmd started", f"pid {p.pid}")
    finally:
        forget_self(state_dir)


def power_down(state_dir: Path, nodes: list[str]) -> None:
    """SuspendProgram's work: stop those nodes' slurmd, all at once, by pid."""
    running = {n: p for n in nodes if (p := recorded_slurmd(state_dir, n)) is not None
               and procs.is_running(p)}
    procs.stop(list(running.values()), timeout=10)  # all at once: SuspendTimeout is short
    for n in nodes:
        _slurmd_record(state_dir, n).unlink(missing_ok=True)
        event(state_dir, n, "power-down", "slurmd stopped" if n in running else "no slurmd")
