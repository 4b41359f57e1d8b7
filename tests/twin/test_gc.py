"""What a twin leaves when its state folder is deleted while it runs: `pctk local gc` stops
its daemons by pid and removes its MariaDB data; the database is sized for a twin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolkit.local import clusters, mariadb, procs

pytestmark = pytest.mark.twin


def _du_mib(folder: Path) -> float:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for n in names:
            total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return total / 2**20


def _owner(home: Path) -> str:
    """The state folder a root twin's database belongs to ("" when it says none)."""
    try:
        return (home / mariadb.OWNER_FILE).read_text().strip()
    except OSError:
        return ""


def test_gc_stops_the_daemons_of_a_deleted_twin_folder_and_removes_its_database():
    root = Path(tempfile.mkdtemp(prefix="pctk-gc-", dir="/tmp"))
    st = clusters.up("p5-training", root, nodes=1, accounting=True)
    db = mariadb.layout(st.state_dir)
    recorded = [procs.Proc(d["name"], d["pid"], procs.start_ticks(d["pid"]), "")
                for d in st.daemons]
    try:
        assert {"mariadbd", "slurmdbd", "slurmctld", "munged"} <= {p.name for p in recorded}
        # sized for a twin: MariaDB's defaults (96 MiB redo log, ...) made it ~180 MB
        assert _du_mib(db.datadir) < 60, f"{_du_mib(db.datadir):.0f} MiB"
        if db.home != st.state_dir / "mysql":  # a root twin's database lives outside
            assert (db.home / mariadb.OWNER_FILE).read_text().strip() == str(st.state_dir)
        others = {h.name: _owner(h) for h in mariadb.ROOT_HOMES.iterdir()
                  if h.name != db.home.name} if mariadb.ROOT_HOMES.is_dir() else {}
        shutil.rmtree(root)  # the state folder goes while the twin runs
        assert all(procs.is_running(p) for p in recorded)
        r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "gc", "--json",
                            "--under", str(root)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert {p["pid"] for p in out["daemons"]} >= {p.pid for p in recorded}
        assert not any(procs.is_running(p) for p in recorded)
        assert not db.home.exists()
        if db.home.parent == mariadb.ROOT_HOMES:
            assert str(db.home) in out["homes"]
            # other twins' databases are not touched (but for those their own twin purged
            # meanwhile: tests on the other worker, with their state folder)
            kept = {h.name for h in mariadb.ROOT_HOMES.iterdir()}
            gone = [h for h, owner in others.items() if h not in kept
                    and (not owner or Path(owner).exists())]
            assert gone == []
        again = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "gc", "--json",
                                "--under", str(root)], capture_output=True, text=True)
        assert json.loads(again.stdout)["daemons"] == []
    finally:
        procs.stop(recorded)
        shutil.rmtree(root, ignore_errors=True)
        mariadb.purge(db)


def test_down_purge_also_sweeps_a_deleted_twin_folder_of_its_root():
    root = Path(tempfile.mkdtemp(prefix="pctk-gcd-", dir="/tmp"))
    st = clusters.up("p5-training", root, nodes=1, accounting=True)
    db = mariadb.layout(st.state_dir)
    recorded = [procs.Proc(d["name"], d["pid"], procs.start_ticks(d["pid"]), "")
                for d in st.daemons]
    try:
        shutil.rmtree(st.state_dir)  # the twin's folder goes; the twin root stays
        r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "down", "--purge",
                            "--json"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PCTK_TWIN_DIR": str(root)})
        assert r.returncode == 0, r.stderr
        swept = json.loads(r.stdout)["gc"]
        assert {p["pid"] for p in swept["daemons"]} >= {p.pid for p in recorded}
        assert not any(procs.is_running(p) for p in recorded)
        assert not db.home.exists()
    finally:
        procs.stop(recorded)
        shutil.rmtree(root, ignore_errors=True)
        mariadb.purge(db)
