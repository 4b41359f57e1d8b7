"""Slurm releases built for the twin: what a build refuses, what a stopped build leaves, PATH.

The build itself (5 minutes) runs once per machine through `pctk local image build` (make test
starts it beside the suite); tests/twin/test_slurm_release.py runs a twin on it, building it
first if it is missing.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.errors import PctkError
from toolkit.local import slurmimage
from toolkit.paths import slurm_images_dir

SRC = slurmimage.SOURCES["24.11"]


def _pctk(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *argv], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _leftovers(root: Path) -> list[str]:
    """What a build that did not finish must not leave: a prefix, a build folder, a part file."""
    found = [p.name for p in root.glob("slurm-*")] + [p.name for p in root.glob(".build-*")]
    return found + [p.name for p in (root / "downloads").glob(".*")]


def test_an_unknown_release_is_one_line_naming_those_there_are(tmp_path):
    r = _pctk("local", "image", "build", "23.02", env={"PCTK_SLURM_IMAGES": str(tmp_path)})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no build of Slurm 23.02" in lines[0] and "24.11" in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["local", "image", "build", "[/x]"], {}, "no build of Slurm [/x] is known"),
    (["local", "image", "build", "24.11"], {"PCTK_DEBIAN_MIRROR": "deb.debian.org/debian"},
     "cannot download Slurm 24.11.5's source from deb.debian.org/debian/pool"),
    (["local", "image", "build", "24.11"], {"PCTK_SLURM_IMAGES": "/tmp/pctk a:b"},
     "the Slurm images folder '/tmp/pctk a:b' has characters"),
    (["local", "up", "--slurm", "", "-c", "p5-training"], {}, "--slurm is empty"),
    (["local", "up", "-c", "p5-training"], {"PCTK_SLURM": ""}, "PCTK_SLURM is empty"),
])
def test_a_release_mirror_or_folder_that_cannot_work_is_one_line(tmp_path, argv, env, message):
    r = _pctk(*argv, env={"PCTK_SLURM_IMAGES": str(tmp_path / "images"),
                          "PCTK_HOME": str(tmp_path / "home"), **env})
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert message in last and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "home" / "twin" / "twin.json").exists()  # no twin was started


def test_no_network_is_one_line_and_leaves_nothing(tmp_path):
    env = {"PCTK_SLURM_IMAGES": str(tmp_path),
           "PCTK_DEBIAN_MIRROR": f"http://127.0.0.1:{_closed_port()}/debian"}
    r = _pctk("local", "image", "build", "24.11", env=env)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("pctk: error: cannot download Slurm 24.11.5's source from "
                           "http://127.0.0.1")
    assert "PCTK_DEBIAN_MIRROR" in last and "Traceback" not in r.stderr
    assert _leftovers(tmp_path) == []


def test_a_file_that_is_not_debians_is_refused_and_not_kept(tmp_path):
    served = tmp_path / "mirror"
    (served / Path(SRC.pool_path).parent).mkdir(parents=True)
    (served / SRC.pool_path).write_bytes(b"not slurm\n" * 1000)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        images = tmp_path / "images"
        env = {"PCTK_SLURM_IMAGES": str(images),
               "PCTK_DEBIAN_MIRROR": f"http://127.0.0.1:{server.server_address[1]}"}
        r = _pctk("local", "image", "build", "24.11", env=env)
    finally:
        server.shutdown()
    assert r.returncode == 2
    assert "is not the file Debian lists (sha256" in r.stderr.strip().splitlines()[-1]
    assert _leftovers(images) == [] and list((images / "downloads").iterdir()) == []


def test_too_little_space_is_refused_before_anything_is_fetched(tmp_path, monkeypatch):
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(slurmimage, "NEEDED_SPACE", free + 10**12)
    monkeypatch.setenv("PCTK_DEBIAN_MIRROR", "http://127.0.0.1:9/never-asked")
    with pytest.raises(PctkError) as err:
        slurmimage.build("24.11", lambda _m: None, root=tmp_path)
    assert "not enough space to build Slurm" in str(err.value)
    assert "PCTK_SLURM_IMAGES" in err.value.one_line()
    assert not (tmp_path / "downloads").exists()


def _seed(images: Path) -> None:
    """The source tarball, from this machine's image cache when a build fetched it before."""
    cached = slurm_images_dir() / "downloads" / SRC.file_name
    if cached.is_file():
        (images / "downloads").mkdir(parents=True)
        shutil.copy(cached, images / "downloads" / SRC.file_name)


def _group_alive(pgid: int) -> bool:
    """A process of the group still runs (a zombie, killed and not yet reaped, does not)."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            f = _stat_fields(int(p.name))
            if f and int(f[2]) == pgid and f[0] != "Z":
                return True
    return False


@pytest.mark.parametrize(("sig", "stage", "code"), [
    (signal.SIGTERM, "configuring", 143),
    (signal.SIGINT, "compiling", 130),
])
def test_a_build_stopped_by_a_signal_stops_its_compilers_and_leaves_nothing(
        tmp_path, sig, stage, code):
    images = tmp_path / "images"
    _seed(images)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit.cli", "local", "image", "build", "24.11"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PCTK_SLURM_IMAGES": str(images)})
    seen = []
    assert proc.stderr is not None
    deadline = time.monotonic() + 240
    for line in proc.stderr:
        seen.append(line)
        if stage in line or time.monotonic() > deadline:
            break
    assert any(stage in ln for ln in seen), "".join(seen)
    # the step runs in its own process group (configure or make and their compilers)
    time.sleep(2)
    groups = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
              and _pgid(int(p.name)) == int(p.name) and _parent(int(p.name)) == proc.pid}
    assert groups, "the build step should run in a process group of its own"
    proc.send_signal(sig)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == code, rest
    assert "Traceback" not in rest
    time.sleep(0.5)
    assert not any(_group_alive(g) for g in groups)
    assert _leftovers(images) == []


def _stat_fields(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _parent(pid: int) -> int:
    f = _stat_fields(pid)
    return int(f[1]) if f else -1


def _pgid(pid: int) -> int:
    f = _stat_fields(pid)
    return int(f[2]) if f else -1


def test_path_puts_one_image_first_and_drops_the_others(tmp_path):
    def image(version: str) -> slurmimage.Image:
        prefix = tmp_path / f"slurm-{version}"
        (prefix / "bin").mkdir(parents=True)
        (prefix / "sbin").mkdir()
        (prefix / slurmimage.IMAGE_FILE).write_text("{}")
        return slurmimage.Image(version=version, prefix=prefix)

    a, b = image("24.11.5"), image("26.05.5")
    base = "/usr/local/bin:/usr/bin"
    with_a = slurmimage.path_with(a, base)
    assert with_a == f"{a.prefix}/bin:{a.prefix}/sbin:{base}"
    assert slurmimage.path_with(b, with_a) == f"{b.prefix}/bin:{b.prefix}/sbin:{base}"
    assert slurmimage.path_with(None, with_a) == base  # back to the system's Slurm


def test_image_list_shows_the_system_release_and_what_can_be_built(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setenv("PCTK_SLURM_IMAGES", str(tmp_path))
    assert main(["local", "image", "list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    system = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True).stdout.split()
    assert out["system"] == system[-1]
    assert out["built"] == [] and [b["series"] for b in out["buildable"]] == ["24.11"]
    assert out["parallelcluster"]["slurm"] == slurmimage.slurm_of_parallelcluster(
        out["parallelcluster"]["version"])
    assert main(["local", "image", "rm", "24.11"]) == 2


def test_the_parallelcluster_table_names_the_slurm_each_release_ships():
    # aws-parallelcluster's CHANGELOG: 3.3.0 "Upgrade Slurm to version 22.05.5", 3.9.0
    # "Upgrade Slurm to 23.11.4 (from 23.02.7)", 3.9.2 "... 23.11.7"; 3.16.1 "25.11.8"
    assert slurmimage.slurm_of_parallelcluster("3.3.1") == "22.05.5"
    assert slurmimage.slurm_of_parallelcluster("3.9.2") == "23.11.7"
    assert slurmimage.slurm_of_parallelcluster("3.14.0") == SRC.version
    assert slurmimage.slurm_of_parallelcluster("3.16.1") == "25.11.8"
    assert slurmimage.slurm_of_parallelcluster("4.0.0") is None
