"""Slurm releases other than the system's, for the twin: built once into a prefix, then kept.

Debian 12 ships Slurm 22.05; ParallelCluster has shipped newer releases since 3.6 (docs/twin.md,
"Which Slurm"). ``pctk local up --slurm 24.11`` runs the twin's daemons, and every Slurm command
pctk runs for it, from a build of that release:

* **Source**: the upstream tarball as Debian packages it (``slurm-wlm_<v>.orig.tar.gz`` of a
  Debian release, :data:`SOURCES`), fetched from a Debian mirror (``PCTK_DEBIAN_MIRROR``,
  default deb.debian.org) and checked against the sha256 Debian's ``Sources`` index lists. A
  copy put in ``<images>/downloads/`` by hand is used as it is (machines without network).
* **Build**: ``configure --prefix=<images>/slurm-<v>`` and ``make`` with this machine's compiler
  against its munge and MariaDB client libraries, so the daemons, ``slurmstepd`` (which slurmd
  runs from its compiled-in prefix) and the plugins all come from the one prefix; nothing of
  the system's Slurm is touched. About 3 to 5 minutes on 2 cores (179 s measured beside the
  test suite), 58 MB installed.
* **Cache**: ``$PCTK_SLURM_IMAGES`` or ``<state home>/slurm``. An image is complete when its
  ``pctk-image.json`` exists (written last); a build installs into a staging folder and moves
  it into place, so a stopped build leaves nothing that looks usable.

Why not Debian's binary packages in a root file system: they need trixie's C library, and
slurmd starts ``slurmstepd`` by its compiled-in path (/usr/sbin), the system's 22.05 one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from toolkit.errors import PctkError, visible
from toolkit.fsutil import atomic_write_json, private_dirs
from toolkit.paths import slurm_images_dir

Progress = Callable[[str], None]

IMAGE_FILE = "pctk-image.json"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
NEEDED_SPACE = 1_500_000_000  # source + objects + install (about 1.1 GB measured), in bytes
SYSTEM = "system"
# how pctk builds (configure flags): an image of another recipe is built again
RECIPE = 2


@dataclass(frozen=True)
class Source:
    """One Slurm release's source as a Debian release packages it."""

    series: str  # "24.11": what --slurm takes
    version: str  # "24.11.5"
    debian: str  # the Debian package it comes from
    pool_path: str  # under the mirror
    sha256: str  # from that Debian release's Sources index
    top: str  # the folder the tarball unpacks to

    @property
    def file_name(self) -> str:
        return self.pool_path.rsplit("/", 1)[-1]


# Debian 13 "trixie" (stable: its pool keeps this file for the release's life):
# Sources entry slurm-wlm 24.11.5-4+deb13u1, Checksums-Sha256 of slurm-wlm_24.11.5.orig.tar.gz.
# 24.11.5 is the Slurm of ParallelCluster 3.14.0. Debian testing/unstable carry 26.05; no
# Debian release has 25.11 (ParallelCluster 3.16's), so it cannot be built from here.
SOURCES: dict[str, Source] = {
    "24.11": Source(
        series="24.11",
        version="24.11.5",
        debian="Debian 13 (trixie) slurm-wlm 24.11.5-4+deb13u1",
        pool_path="pool/main/s/slurm-wlm/slurm-wlm_24.11.5.orig.tar.gz",
        sha256="e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332",
        top="slurm-slurm-24-11-5-1",
    ),
}

# ParallelCluster release -> the Slurm it ships: aws-parallelcluster's CHANGELOG.md
# ("Upgrade Slurm to version ...") up to 3.11, the cookbook's changelog and release pages
# after it. docs/twin.md ("Which Slurm") shows the same table.
PARALLELCLUSTER_SLURM: tuple[tuple[str, str], ...] = (
    ("3.0", "20.11.8"), ("3.1", "21.08.8-2"), ("3.2", "21.08.8-2"), ("3.3", "22.05.5"),
    ("3.4", "22.05.7"), ("3.5", "22.05.8"), ("3.6", "23.02.2"), ("3.7", "23.02.6"),
    ("3.8", "23.02.7"), ("3.9", "23.11.7"), ("3.10", "23.11.7"), ("3.11", "23.11.10"),
    ("3.13", "24.05.8"), ("3.14", "24.11.5"), ("3.16", "25.11.8"),
)


def slurm_of_parallelcluster(pc_version: str) -> str | None:
    """The Slurm release a ParallelCluster ``3.x[.y]`` ships (its newest patch), None unknown."""
    minor = ".".join(pc_version.split(".")[:2])
    return dict(PARALLELCLUSTER_SLURM).get(minor)


def series_of(version: str) -> str:
    """``24.11.5`` -> ``24.11``."""
    return ".".join(version.split(".")[:2])


# --------------------------------------------------------------------- where images live
def images_dir() -> Path:
    """``$PCTK_SLURM_IMAGES`` or ``<state home>/slurm`` (not created here), absolute and plain:
    it becomes ``configure --prefix``, a PATH entry and paths in slurm.conf."""
    path = slurm_images_dir().absolute()
    if not re.fullmatch(r"/[A-Za-z0-9._/+@~-]*", str(path)):
        raise PctkError(f"the Slurm images folder {visible(str(path))!r} has characters a "
                        "prefix on PATH and in slurm.conf cannot carry (blanks, ':', quotes, "
                        "'#', '%', ',', '=')", "point PCTK_SLURM_IMAGES (or PCTK_HOME) at a "
                        "folder with a plain name")
    return path


@dataclass(frozen=True)
class Image:
    """A built Slurm release: its prefix holds bin/, sbin/ and lib/slurm/."""

    version: str
    prefix: Path
    source: str = ""
    built: float | None = None

    @property
    def series(self) -> str:
        return series_of(self.version)

    @property
    def bin_dirs(self) -> tuple[Path, Path]:
        return self.prefix / "bin", self.prefix / "sbin"

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.prefix.rglob("*")
                   if p.is_file() and not p.is_symlink())

    def to_json(self) -> dict[str, object]:
        return {"series": self.series, "version": self.version, "prefix": str(self.prefix),
                "source": self.source, "built": self.built, "recipe": RECIPE}


def _prefix(root: Path, src: Source) -> Path:
    return root / f"slurm-{src.version}"


def _read_image(prefix: Path) -> Image | None:
    try:
        d = json.loads((prefix / IMAGE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("prefix") != str(prefix) \
            or d.get("recipe") != RECIPE or not (prefix / "sbin" / "slurmctld").is_file() \
            or not re.fullmatch(r"\d+\.\d+\.\d+", str(d.get("version"))):
        return None  # moved since it was built (the prefix is compiled in), built by another
        # recipe, incomplete, or a version that is no release number (it names the
        # controller's state folder and the accounting database)
    return Image(version=str(d.get("version")), prefix=prefix, source=str(d.get("source", "")),
                 built=d.get("built") if isinstance(d.get("built"), int | float) else None)


def installed(root: Path | None = None) -> list[Image]:
    """Every complete image under the images folder, oldest release first (none in a folder
    that no build could use: the default's look-up does not fail on it, a build does)."""
    if root is None:
        try:
            root = images_dir()
        except PctkError:
            return []
    found = [img for p in sorted(root.glob("slurm-*")) if (img := _read_image(p))]
    return sorted(found, key=lambda i: [int(x) for x in re.findall(r"\d+", i.version)])


def find(series: str, root: Path | None = None) -> Image | None:
    """The built image of a series (``24.11``) or exact version (``24.11.5``), if any."""
    for img in reversed(installed(root)):
        if series in (img.series, img.version):
            return img
    return None


def source_for(series: str) -> Source:
    """The known source of ``--slurm SERIES``; a one-line error naming those there are."""
    src = SOURCES.get(series) or next((s for s in SOURCES.values() if s.version == series),
                                      None)
    if src is None:
        known = ", ".join(sorted(SOURCES))
        raise PctkError(f"no build of Slurm {visible(series)} is known to pctk",
                        f"choose --slurm {SYSTEM} (this machine's) or one of: {known}")
    return src


# --------------------------------------------------------------------- building
def _check_tools() -> None:
    missing = [what for what, ok in (
        ("a C compiler (gcc)", shutil.which("cc") or shutil.which("gcc")),
        ("make", shutil.which("make")),
        ("munge's headers (libmunge-dev)", Path("/usr/include/munge.h").exists()),
        ("MariaDB's client library (libmariadb-dev)",
         shutil.which("mariadb_config") or shutil.which("mysql_config")),
    ) if not ok]
    if missing:
        raise PctkError(f"cannot build Slurm here: missing {', '.join(missing)}",
                        "apt-get install -y build-essential libmunge-dev libmariadb-dev "
                        "(or `make deps`)")


def _check_space(root: Path) -> None:
    free = shutil.disk_usage(root).free
    if free < NEEDED_SPACE:
        raise PctkError(f"not enough space to build Slurm in {visible(str(root))}: "
                        f"{free / 1e9:.1f} GB free, about {NEEDED_SPACE / 1e9:.1f} GB needed",
                        "free some space or set PCTK_SLURM_IMAGES to a folder on a larger disk")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(src: Source, downloads: Path, progress: Progress) -> Path:
    """The source tarball, checked; fetched from the mirror unless a good copy is here."""
    target = downloads / src.file_name
    if target.is_file():
        if _sha256(target) == src.sha256:
            return target
        progress(f"{target} is not the file Debian lists (wrong sha256): downloading it")
    mirror = os.environ.get("PCTK_DEBIAN_MIRROR", DEFAULT_MIRROR).rstrip("/")
    url = f"{mirror}/{src.pool_path}"
    progress(f"downloading {url}")
    partial = downloads / f".{src.file_name}.{os.getpid()}"
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, partial.open("wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
        digest = _sha256(partial)
        if digest != src.sha256:
            raise PctkError(f"{url} is not the file Debian lists (sha256 {digest[:16]}..., "
                            f"expected {src.sha256[:16]}...)",
                            "try another mirror with PCTK_DEBIAN_MIRROR")
        os.replace(partial, target)
    except (urllib.error.URLError, OSError, TimeoutError, ValueError,
            http.client.HTTPException) as exc:  # ValueError, InvalidURL: a malformed mirror
        reason = getattr(exc, "reason", None) or exc
        raise PctkError(f"cannot download Slurm {src.version}'s source from {url}: "
                        f"{visible(str(reason))}",
                        f"check the network, set PCTK_DEBIAN_MIRROR to a Debian mirror you "
                        f"reach, or put {src.file_name} in {visible(str(downloads))}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target


@contextlib.contextmanager
def _build_lock(root: Path, progress: Progress) -> Iterator[None]:
    with (root / ".build.lock").open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("another Slurm build runs in this images folder: waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _run_step(argv: list[str], cwd: Path, log: Path, what: str, progress: Progress,
              count: Callable[[str], None] | None = None) -> None:
    """One build step in its own process group (stopped with the group on any exception)."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if count:
                    count(line)
            rc = proc.wait()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if rc != 0:
        tail = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        last = tail[-1] if tail else f"exit {rc}"
        raise PctkError(f"building Slurm failed while {what}: {visible(last[:200])}",
                        f"the whole output is in {visible(str(log))}")


def build(series: str, progress: Progress, root: Path | None = None,
          jobs: int | None = None) -> Image:
    """Build ``series`` into the images folder (or return the image already there)."""
    src = source_for(series)
    root = root or images_dir()
    private_dirs(root)
    with _build_lock(root, progress):
        prefix = _prefix(root, src)
        done = _read_image(prefix)
        if done:
            return done
        _check_tools()
        _check_space(root)
        downloads = private_dirs(root / "downloads")
        tarball = _download(src, downloads, progress)
        work = root / f".build-{src.version}-{os.getpid()}"
        log = root / f"build-{src.version}.log"
        log.write_text(f"# pctk: build of Slurm {src.version} from {src.debian}\n")
        started = time.monotonic()
        try:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            progress(f"unpacking {src.file_name}")
            with tarfile.open(tarball) as tar:
                tar.extractall(work, filter="data")
            tree = work / src.top
            if not tree.is_dir():
                raise PctkError(f"{src.file_name} does not hold {src.top}/",
                                f"delete {visible(str(tarball))} and build again")
            _remove_stale(root, src, prefix)
            progress(f"configuring Slurm {src.version} for {prefix}")
            _run_step(["./configure", f"--prefix={prefix}", f"--sysconfdir={prefix}/etc",
                       # many slurmd on one host (slurmd -N), as Debian's own build: their
                       # one munged sees a forwarded launch credential more than once
                       "--enable-multiple-slurmd",
                       "--disable-debug", "--disable-static", "--without-hdf5",
                       "--disable-dependency-tracking"],
                      tree, log, "configuring", progress)
            n_sources = max(1, sum(1 for _ in (tree / "src").rglob("*.c")))
            compiled = [0, 0.0]

            def count(line: str) -> None:
                if " -c " in line and line.startswith(("gcc", "libtool: compile")):
                    compiled[0] += 1
                    now = time.monotonic()
                    if now - compiled[1] >= 15:
                        compiled[1] = now
                        pct = min(99, 100 * compiled[0] // n_sources)
                        progress(f"compiling Slurm {src.version}: about {pct}% "
                                 f"({now - started:.0f} s)")

            progress(f"compiling Slurm {src.version} (about 3-5 minutes on 2 cores)")
            n = jobs or max(1, os.cpu_count() or 1)
            _run_step(["make", f"-j{n}"], tree, log, "compiling", progress, count)
            staging = work / "root"
            progress("installing")
            _run_step(["make", "install", f"DESTDIR={staging}"], tree, log, "installing",
                      progress)
            built = staging / str(prefix).lstrip("/")
            for junk in built.rglob("*.la"):
                junk.unlink()  # libtool's files: unused
            os.rename(built, prefix)
            image = Image(version=src.version, prefix=prefix,
                          source=f"{src.debian}: {src.file_name}", built=time.time())
            atomic_write_json(prefix / IMAGE_FILE, image.to_json())
        finally:
            shutil.rmtree(work, ignore_errors=True)
        progress(f"built Slurm {src.version} in {time.monotonic() - started:.0f} s: {prefix}")
        return image


def _remove_stale(root: Path, src: Source, prefix: Path) -> None:
    """A prefix that is no usable image (a build stopped while moving, an older recipe) and
    old build folders of dead builders go before a new build."""
    if prefix.exists():
        busy = users(prefix)
        if busy:
            raise PctkError(f"an older build of Slurm {src.version} is in use by a running "
                            f"twin (pids {', '.join(map(str, busy[:5]))})",
                            "`pctk local down` it, then build again")
        shutil.rmtree(prefix)
    for old in root.glob(f".build-{src.version}-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)


def users(prefix: Path) -> list[int]:
    """Pids of the processes (of any twin) running a program of this prefix."""
    pids = []
    real = prefix.resolve()  # /proc/<pid>/exe is the resolved path of the program
    for exe in Path("/proc").glob("[0-9]*/exe"):
        with contextlib.suppress(OSError):
            if Path(os.readlink(exe)).is_relative_to(real):
                pids.append(int(exe.parent.name))
    return sorted(pids)


def remove(series: str, root: Path | None = None) -> Image:
    """Delete a built image; refused while a twin runs on it (its slurmd starts slurmstepd
    from the prefix for every job)."""
    img = find(series, root)
    if img is None:
        raise PctkError(f"no image of Slurm {visible(series)} is built here",
                        "`pctk local image list` shows those there are")
    busy = users(img.prefix)
    if busy:
        raise PctkError(f"Slurm {img.version} is in use by a running twin (pids "
                        f"{', '.join(map(str, busy[:5]))})", "`pctk local down` it first")
    (img.prefix / IMAGE_FILE).unlink()
    shutil.rmtree(img.prefix)
    return img


# --------------------------------------------------------------------- the system's Slurm
def system_version() -> str | None:
    """The version of the Slurm on PATH outside any image (``22.05.8``), None if none."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not _is_image_dir(p))
    exe = shutil.which("slurmctld", path=path) or shutil.which("sinfo", path=path)
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=20,
                           env={**os.environ, "SLURM_CONF": "/dev/null"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"slurm(?:-wlm)?\s+(\d+\.\d+\.\d+\S*)", r.stdout + r.stderr)
    return m.group(1) if m else None


def _is_image_dir(path: str) -> bool:
    p = Path(path)
    return p.name in ("bin", "sbin") and (p.parent / IMAGE_FILE).exists()


def path_with(image: Image | None, path: str | None = None) -> str:
    """``PATH`` with ``image``'s bin and sbin first and no other image's folders."""
    path = os.environ.get("PATH", "") if path is None else path
    kept = [p for p in path.split(os.pathsep) if p and not _is_image_dir(p)]
    first = [str(d) for d in image.bin_dirs] if image else []
    return os.pathsep.join(first + [p for p in kept if p not in first])


# --------------------------------------------------------------------- which one a twin runs
def parallelcluster_version() -> str | None:
    """The ParallelCluster release configs are checked against (its package installed)."""
    try:
        return metadata.version("aws-parallelcluster")
    except metadata.PackageNotFoundError:
        return None


def choose(requested: str | None, progress: Progress) -> Image | None:
    """The image a twin runs (None: the system's Slurm).

    ``requested``: ``--slurm`` (else ``$PCTK_SLURM``): ``system``, a series (``24.11``) or a
    version (``24.11.5``); a series not built yet is built now (once). Neither given: the
    Slurm of the ParallelCluster release pctk checks configs against, when an image of its
    series is built here; else the system's, with a line saying how far that is from it.
    """
    for given, what in ((requested, "--slurm"), (os.environ.get("PCTK_SLURM"), "PCTK_SLURM")):
        if given is not None and not given.strip():
            raise PctkError(f"{what} is empty",
                            f"give 'system' or a release pctk builds ({', '.join(SOURCES)}), "
                            "or leave it out for the default")
    requested = requested or os.environ.get("PCTK_SLURM") or None
    if requested == SYSTEM:
        return None
    if requested:
        found = find(requested)
        if found:
            return found
        src = source_for(requested)
        progress(f"Slurm {src.version} is not built here yet: building it once "
                 f"(cached in {images_dir()})")
        return build(requested, progress)
    pc = parallelcluster_version()
    ships = slurm_of_parallelcluster(pc) if pc else None
    if ships:
        found = find(series_of(ships))
        if found:
            progress(f"Slurm {found.version}: the release ParallelCluster {pc} ships")
            return found
        here = system_version()
        buildable = ", ".join(sorted(SOURCES))
        if here:  # none: the missing programs are what `up` says next
            progress(f"ParallelCluster {pc} ships Slurm {ships}; no build of it is here, so "
                     f"the twin runs this machine's Slurm {here} (`--slurm {buildable}` for a "
                     "newer one; docs/twin.md: Which Slurm)")
    return None
