"""The twin's files in its state folder: rendered configuration, stand-in GPU devices, the
munge key, and the runtime files (pid files, sockets) a crashed run leaves behind.

What the files say is decided by :mod:`toolkit.local.render` (pure functions of the plan);
this module writes them, atomically and with the modes the daemons insist on.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path

from toolkit.fsutil import PASSAGE_DIR, PRIVATE_DIR, atomic_write_bytes, atomic_write_text
from toolkit.local import mariadb, nodeaddr
from toolkit.local.plan import TwinPlan, check_plan
from toolkit.local.render import (
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
    render_task_prolog,
)

# Private by default (toolkit.fsutil): what holds logs, job state, passwords or power records
# only the twin's user may enter; what Slurm's clients and jobs of any user need (slurm.conf,
# the munge socket, a node's spool where slurmd keeps each job's script) others may pass
# through without listing. The state folder itself is such a passage (toolkit.local.state).
FOLDER_MODES = {
    "etc": PASSAGE_DIR,  # slurm.conf, gres.conf (0644, no secrets); slurmdbd.conf is 0600
    "munge": PASSAGE_DIR,  # the socket; the key is 0400
    "ctld": PRIVATE_DIR,  # slurmctld's state (job scripts, environments) and log
    "ctld/state": PRIVATE_DIR,
    "dbd": PRIVATE_DIR,
    "mysql": PRIVATE_DIR,
    "nodes": PASSAGE_DIR,
    "lib": PASSAGE_DIR,  # the library every task preloads (toolkit.local.nodeaddr)
    "log": PRIVATE_DIR,  # the daemons' own output
    "bin": PRIVATE_DIR,  # power programs, run by slurmctld as the twin's user
    "power": PRIVATE_DIR,
}

RUNTIME_FILES = ("munge/munge.socket.2", "munge/munge.socket.2.lock", "munge/munged.pid",
                 "ctld/slurmctld.pid", "dbd/slurmdbd.pid")


def make_placeholder_device(path: Path) -> None:
    """A stand-in GPU device file that Slurm accepts: a character device like /dev/null.

    gres.conf ``File=`` must name character devices (else no CUDA_VISIBLE_DEVICES); where
    mknod is not allowed, a symlink to /dev/null serves the same purpose.
    """
    if path.is_char_device():
        return
    if path.exists() or path.is_symlink():
        path.unlink()
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        path.symlink_to("/dev/null")


def clean_runtime_files(state_dir: Path) -> None:
    """Pid files and sockets of daemons that are no longer running."""
    for rel in RUNTIME_FILES:
        (state_dir / rel).unlink(missing_ok=True)
    db = mariadb.layout(state_dir)
    db.socket.unlink(missing_ok=True)
    db.pid_file.unlink(missing_ok=True)
    nodes = state_dir / "nodes"
    if nodes.is_dir():
        for pid in nodes.glob("*/slurmd.pid"):
            pid.unlink(missing_ok=True)


def clean_spools(state_dir: Path) -> None:
    """Empty every node's slurmd spool (job state of a slurmd of another Slurm release)."""
    for spool in (state_dir / "nodes").glob("*/spool"):
        if spool.is_dir() and not spool.is_symlink():
            shutil.rmtree(spool)
            spool.mkdir()


def write_files(plan: TwinPlan, db_password: str | None) -> None:
    """Every file the daemons read (slurmdbd.conf only with accounting)."""
    check_plan(plan)  # nothing a user gave reaches a daemon's file unchecked
    s = plan.state_dir
    for sub, mode in FOLDER_MODES.items():
        (s / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(s / sub, mode)  # every start: a folder an older pctk left open is closed
    plan.ctld_state.mkdir(mode=PRIVATE_DIR, exist_ok=True)  # a built release's own state
    atomic_write_text(plan.slurm_conf, render_slurm_conf(plan), 0o644)
    atomic_write_text(plan.etc / "gres.conf", render_gres_conf(plan), 0o644)
    atomic_write_text(plan.etc / "cgroup.conf", render_cgroup_conf(), 0o644)
    if any(n.addr != "127.0.0.1" for n in plan.nodes):
        lib = nodeaddr.build(s / "lib")
        atomic_write_text(plan.etc / "task_prolog.sh", render_task_prolog(plan, str(lib)), 0o755)
    if db_password is not None:
        atomic_write_text(plan.etc / "slurmdbd.conf", render_slurmdbd_conf(plan, db_password),
                          0o600)
    for n in plan.nodes:
        nd = plan.node_dir(n.name)
        (nd / "spool").mkdir(parents=True, exist_ok=True)
        os.chmod(nd, PASSAGE_DIR)  # its slurmd.log is Slurm's own 0600
        if n.gpu_count:
            (nd / "dev").mkdir(exist_ok=True)
            for f in plan.gpu_files(n):
                make_placeholder_device(f)
    key = s / "munge" / "munge.key"
    if not key.exists():
        atomic_write_bytes(key, secrets.token_bytes(1024), 0o400)
