"""What the code imports is what pyproject.toml declares, in the right place: the head node's
install (the core dependencies) carries every package toolkit/ imports and never torch or NVML;
the node extra adds what benchmarks/ imports on a compute node; constraints.txt pins each one.
The install itself is tried in tests/test_packaging.py."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# what only a GPU node has; toolkit/ must run without it
NODE_ONLY = {"torch", "pynvml"}
# a development dependency imported by one function that builds a shipped file
DEV_ONLY = {"grafana_foundation_sdk": "toolkit/observe/dashboard.py"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


CORE = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
NODE = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["node"]}
# the serving benchmark's server and load generator (benchmarks/serving/ only)
SERVING = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["serving"]}


def _distributions(module: str) -> set[str]:
    names = importlib.metadata.packages_distributions().get(module, [])
    assert names, f"no installed distribution provides {module}"
    return {_name(n) for n in names}


def _sources(root: str) -> list[Path]:
    return sorted((REPO / root).rglob("*.py"))


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, *, module_level_only: bool) -> set[str]:
    """Absolute module names imported by a file (module level: also inside if/try, not in
    functions and not under TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if module_level_only and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef
                                                | ast.Lambda):
                continue
            if module_level_only and isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.add(child.module)
                found.update(f"{child.module}.{a.name}" for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def _third_party(root: str) -> dict[str, set[str]]:
    """Top-level third-party module -> the files under ``root`` that import it anywhere."""
    users: dict[str, set[str]] = {}
    for path in _sources(root):
        for name in _imports(path, module_level_only=False):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in ("toolkit", "benchmarks"):
                users.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return users


def test_toolkit_imports_only_core_dependencies() -> None:
    undeclared = {}
    for module, files in _third_party("toolkit").items():
        assert module not in NODE_ONLY, f"toolkit/ imports {module} ({sorted(files)})"
        if module in DEV_ONLY:
            assert files == {DEV_ONLY[module]}, (module, files)
            continue
        if not _distributions(module) <= CORE:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported by toolkit/ but not a core dependency: {undeclared}"


def test_benchmarks_import_only_core_and_node_dependencies() -> None:
    """benchmarks/serving/ may also import the serving extra; nothing else may."""
    undeclared = {}
    for m, files in _third_party("benchmarks").items():
        allowed = CORE | NODE
        if all(f.startswith("benchmarks/serving/") for f in files):
            allowed = allowed | SERVING
        if not _distributions(m) <= allowed:
            undeclared[m] = sorted(files)
    assert not undeclared, f"imported by benchmarks/ but not declared: {undeclared}"
    assert _third_party("benchmarks").keys() >= NODE_ONLY
    assert {"aiohttp", "transformers", "tokenizers"} <= _third_party("benchmarks").keys()


def test_the_node_only_and_dev_only_packages_stay_out_of_the_core() -> None:
    dev = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}
    assert {"torch", "nvidia-ml-py"} == NODE
    assert not (NODE | {"grafana-foundation-sdk"}) & CORE
    assert {"pctk", "grafana-foundation-sdk"} <= dev  # dev holds pctk[node] and the SDK


def test_toolkit_never_loads_torch_through_a_module_level_import() -> None:
    """toolkit/ also imports benchmarks/ modules: none it reaches at import time may pull
    torch or NVML (they load it inside the functions that run on a node)."""
    files = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
             for root in ("toolkit", "benchmarks") for p in _sources(root)}
    seen: dict[str, str] = {}
    stack = [(m, m) for m in files if m.startswith("toolkit")]
    while stack:
        module, via = stack.pop()
        if module in seen:
            continue
        seen[module] = via
        for name in _imports(files[module], module_level_only=True):
            parts = name.split(".")
            assert parts[0] not in NODE_ONLY, f"{module} imports {name} (reached from {via})"
            # the module itself and each package on the way are imported
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in files:
                    stack.append((target, via))
    assert any(m.startswith("benchmarks") for m in seen)


def test_constraints_pin_every_declared_package() -> None:
    pinned = {_name(line.split("==")[0]) for line in
              (REPO / "constraints.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    # torch is installed by the Makefile (the CPU build without a GPU): not pinned there
    missing = sorted((CORE | NODE | SERVING) - {"torch"} - pinned)
    assert not missing, f"constraints.txt does not pin: {missing}"
