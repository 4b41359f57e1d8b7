"""Rewrite the committed golden files after an intended change; the tests only compare.

    .venv/bin/python tests/regen_golden.py           # rewrite what changed, list it
    .venv/bin/python tests/regen_golden.py --check   # list what differs, exit 1 if any

Each module below has ``golden_files()``: every golden file it checks and what the code
renders now. The shipped Grafana dashboard (toolkit/observe/dashboard.json, built with the
grafana-foundation-sdk of the dev extra) is rewritten here too. Presets: ``pctk config regen``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = ("tests/test_twin_render.py", "tests/submit/test_jobspec.py",
           "tests/fsdp/test_driver.py")


def _load(relpath: str) -> dict[Path, str]:
    name = relpath.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    files: dict[Path, str] = module.golden_files()
    return files


def generated_files() -> dict[Path, str]:
    from toolkit.observe.dashboard import DASHBOARD_FILE, build_dashboard_text

    files = {DASHBOARD_FILE: build_dashboard_text()}
    for relpath in MODULES:
        files.update(_load(relpath))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only list what differs")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    differ = []
    for path, text in generated_files().items():
        if path.is_file() and path.read_text() == text:
            continue
        differ.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(("differs: " if args.check else "wrote: ") + str(path.relative_to(REPO)))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
