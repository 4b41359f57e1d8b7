"""``pctk local image``: the Slurm releases the twin can run (toolkit/local/slurmimage.py)."""

from __future__ import annotations

import datetime as dt
import time

import typer
from rich.markup import escape
from rich.table import Table

from toolkit.cliout import JsonOption, emit_json
from toolkit.cliout import console as cli_console
from toolkit.errors import visible
from toolkit.local import slurmimage, stopsignals

app = typer.Typer(
    help="Slurm releases for the twin: this machine's, and newer ones pctk builds from "
    "Debian's sources once and keeps (`pctk local up --slurm 24.11`).",
    no_args_is_help=True,
)

Release = typer.Argument(..., metavar="RELEASE",
                         help="A Slurm release pctk can build: " + ", ".join(slurmimage.SOURCES))


@app.command("list")
def list_images(json_out: bool = JsonOption) -> None:
    """The Slurm releases a twin can run now, and those pctk can build."""
    built = slurmimage.installed()
    system = slurmimage.system_version()
    pc = slurmimage.parallelcluster_version()
    buildable = [s for k, s in slurmimage.SOURCES.items()
                 if not any(i.version == s.version for i in built)]
    if json_out:
        emit_json({
            "system": system,
            "images_dir": str(slurmimage.images_dir()),
            "built": [{**i.to_json(), "bytes": i.size_bytes()} for i in built],
            "buildable": [{"series": s.series, "version": s.version, "source": s.debian}
                          for s in buildable],
            "parallelcluster": {"version": pc,
                                "slurm": slurmimage.slurm_of_parallelcluster(pc) if pc else None},
        }, sort_keys=False)
        return
    out = cli_console()
    t = Table("release", "version", "state", "where", box=None, pad_edge=False)
    t.add_row("system", system or "-", "installed" if system else "[red]not installed[/]",
              "this machine's PATH")
    for img in built:
        when = dt.datetime.fromtimestamp(img.built).strftime("%Y-%m-%d") if img.built else "-"
        t.add_row(img.series, img.version, f"built {when}, {img.size_bytes() / 1e6:.0f} MB",
                  visible(escape(str(img.prefix))))
    for src in buildable:
        t.add_row(src.series, src.version, "not built (`pctk local image build "
                  f"{src.series}`, about 3-5 min)", escape(src.debian))
    out.print(t)
    if pc:
        out.print(f"ParallelCluster {pc} (the release configs are checked against) ships "
                  f"Slurm {slurmimage.slurm_of_parallelcluster(pc) or 'unknown'}.")


@app.command()
def build(release: str = Release, json_out: bool = JsonOption) -> None:
    """Build a Slurm release for the twin (once; kept under the state root).

    Downloads Debian's source of it (checked against its sha256), compiles it with this
    machine's compiler against its munge and MariaDB libraries, and installs it into its own
    prefix. Ctrl-C stops the build and leaves nothing behind.
    """
    console = cli_console(stderr=True)
    t0 = time.monotonic()
    src = slurmimage.source_for(release)  # an unknown release: one line before anything
    with stopsignals.as_exceptions(), \
            console.status(f"building Slurm {src.version}", spinner="dots") as spinner:
        def progress(msg: str) -> None:
            spinner.update(msg)
            console.log(msg)

        img = slurmimage.find(release) or slurmimage.build(release, progress)
    if json_out:
        emit_json({**img.to_json(), "seconds": round(time.monotonic() - t0, 1)},
                  sort_keys=False)
        return
    print(f"Slurm {img.version}: {img.prefix}  (`pctk local up --slurm {img.series}`)")


@app.command("rm")
def remove(release: str = Release, json_out: bool = JsonOption) -> None:
    """Delete a built release (refused while a twin runs on it)."""
    img = slurmimage.remove(release)
    if json_out:
        emit_json({"removed": img.to_json()}, sort_keys=False)
        return
    print(f"removed Slurm {img.version} ({img.prefix})")
