"""The layers of ``toolkit/``, read from the code's own imports (every ``import`` statement,
at the top or inside a function):

    base      toolkit/*.py: errors, paths, cliout, cliopts, catalog, fsutil, progress, slurm
    config    toolkit/config/            (cluster configs)
    local     toolkit/local/             (the twin)
    submit    toolkit/submit/            (submission; may find the twin's config)
    bench     toolkit/bench/             (benchmarks, driver side)
    health    toolkit/health/            (node checks and the slow-node finder; use bench)
    results   toolkit/results/           (the store, comparisons, the report)
    observe   toolkit/observe/           (Prometheus, Grafana, the collector)
    plan      toolkit/plan/              (the capacity planner: reads results, writes configs)
    api       toolkit/api/               (the long commands from Python: what the CLI calls)
    cli       toolkit/cli.py, toolkit/demo.py, toolkit/commands/, each package's cli.py and
              every module a command table loads (``"toolkit.catalog_cli:app"``)

A module's layer is its package's (a module directly under ``toolkit/`` is base), not a
name it happens to end with: a helper named ``*_cli.py`` that no command table loads sits in
its package's layer. A module imports its own package or a lower layer, never a higher one;
command modules sit on top and nothing below imports them. A module loaded by name counts as
an import of it: a lazy command's ``"toolkit.x.cli:attr"``, the values of a ``_LAZY`` table
(``toolkit.submit``), and ``importlib.import_module("...")`` or ``__import__("...")`` with a
literal name. A module named only to run it as a program (``python -m``) is no import.
``benchmarks/`` (the node side) imports no toolkit module at all. No two modules import each
other, directly or round a longer circle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("base", "config", "local", "submit", "bench", "health", "results", "observe", "plan",
          "api", "cli")
PACKAGE_LAYER = {"config": "config", "local": "local", "submit": "submit", "bench": "bench",
                 "health": "health", "results": "results", "observe": "observe", "plan": "plan",
                 "api": "api", "commands": "cli"}
TOP_CLI = {"toolkit.cli", "toolkit.demo"}
# the modules of an import circle that stays (sorted), with its reason
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {
    ("toolkit.cli", "toolkit.demo"):
        "`pctk demo` runs pctk commands in its own process through toolkit.cli.main, whose "
        "command table names the demo; both are the top layer, and the table loads the demo "
        "only when `pctk demo` runs (a demo of subprocesses would cost a start-up per step)",
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    path: Path
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``: never runs, so it closes no circle


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(top: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / top).rglob("*.py"))}


TOOLKIT = modules("toolkit")


def command_modules() -> set[str]:
    """The modules the command tables load by name (``"toolkit.x.y:attr"`` in toolkit/cli.py
    and toolkit/bench/cli.py)."""
    out = set()
    for table in (ROOT / "toolkit" / "cli.py", ROOT / "toolkit" / "bench" / "cli.py"):
        for node in ast.walk(ast.parse(table.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and (m := LAZY_TARGET.fullmatch(node.value)):
                out.add(m.group(1))
    return out


def layer_of(mod: str) -> str:
    parts = mod.split(".")
    if mod in TOP_CLI or parts[-1] == "cli" or mod in COMMAND_MODULES:
        return "cli"
    if len(parts) == 1 or (len(parts) == 2 and mod in TOOLKIT and
                           TOOLKIT[mod].name != "__init__.py"):
        return "base"
    return PACKAGE_LAYER[parts[1]]


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """Every node, with whether it sits under ``if TYPE_CHECKING:``."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, typing_only = stack.pop()
        yield node, typing_only
        for child in ast.iter_child_nodes(node):
            inner = typing_only or (isinstance(node, ast.If) and _is_type_checking(node)
                                    and child in node.body)
            stack.append((child, inner))


def imports(mod: str, path: Path) -> Iterator[Import]:
    """The imports of one module, each resolved to the module it loads (``from pkg import
    sub`` loads ``pkg.sub``; ``from pkg import name`` loads ``pkg``)."""
    is_pkg = path.name == "__init__.py"
    for node, type_only in _walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            known = modules_of(source.split(".")[0])
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source
                       for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and (m := LAZY_TARGET.fullmatch(node.value)):
            targets = [m.group(1)]  # importlib.import_module of the module part
        elif isinstance(node, ast.Call) and _loads_by_name(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            targets = [node.args[0].value]  # importlib.import_module("x.y"), __import__("x.y")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
            targets = [v.value for v in node.value.values
                       if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        for target in dict.fromkeys(targets):
            if target.split(".")[0] in ("toolkit", "benchmarks"):
                yield Import(mod, target, path, getattr(node, "lineno", 0), type_only)


# "toolkit.bench.cli:app": a module and an attribute of it, imported by name when used
LAZY_TARGET = re.compile(r"((?:toolkit|benchmarks)(?:\.[a-z_][a-z0-9_]*)+):[A-Za-z_]\w*")
COMMAND_MODULES = command_modules()


def _loads_by_name(func: ast.expr) -> bool:
    """``importlib.import_module`` (or ``import_module`` imported from it) or ``__import__``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


_MODULES: dict[str, dict[str, Path]] = {}


def modules_of(top: str) -> dict[str, Path]:
    if top not in ("toolkit", "benchmarks"):
        return {}
    if top not in _MODULES:
        _MODULES[top] = modules(top)
    return _MODULES[top]


def all_imports(top: str) -> list[Import]:
    return [i for mod, path in modules_of(top).items() for i in imports(mod, path)]


def where(i: Import) -> str:
    return f"{i.path.relative_to(ROOT)}:{i.line}"


def test_every_toolkit_import_names_a_module_that_exists() -> None:
    """A moved module leaves no import of its old name behind (``import a.b`` of a module
    that is gone fails only when that line runs: inside a function, maybe never in tests)."""
    known = modules_of("toolkit") | modules_of("benchmarks")
    stale = [f"{where(i)}: imports {i.target}, no such module"
             for top in ("toolkit", "benchmarks") for i in all_imports(top)
             if i.target not in known]
    assert not stale, "\n".join(stale)


def test_the_map_knows_every_module() -> None:
    for mod in TOOLKIT:
        assert layer_of(mod) in LAYERS, mod


def test_no_module_imports_a_higher_layer() -> None:
    broken = []
    for i in all_imports("toolkit"):
        if not i.target.startswith("toolkit.") or i.target == "toolkit":
            continue
        mine, theirs = layer_of(i.importer), layer_of(i.target)
        if LAYERS.index(theirs) > LAYERS.index(mine):
            broken.append(f"{where(i)}: {i.importer} ({mine}) imports {i.target} ({theirs}); "
                          f"{mine} may import only {' / '.join(LAYERS[:LAYERS.index(mine)])}"
                          f" and its own layer")
    assert not broken, "layering: " + " < ".join(LAYERS) + "\n" + "\n".join(broken)


def test_the_collectives_core_imports_neither_of_its_sources() -> None:
    """``toolkit/bench/comm`` serves nccl-tests (``bench/nccl``) and the torch sweep
    (``bench/collectives``); neither is below it."""
    up = [f"{where(i)}: {i.importer} imports {i.target}" for i in all_imports("toolkit")
          if i.importer.startswith("toolkit.bench.comm")
          and i.target.startswith(("toolkit.bench.nccl", "toolkit.bench.collectives"))]
    assert not up, "\n".join(up)


def test_the_node_side_imports_no_toolkit_module() -> None:
    """``benchmarks/`` runs on compute nodes, where only it is installed."""
    up = [f"{where(i)}: {i.importer} imports {i.target}" for i in all_imports("benchmarks")
          if i.target.split(".")[0] == "toolkit"]
    assert not up, "\n".join(up)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def import_edges() -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    edges: dict[str, set[str]] = {m: set() for m in modules_of("toolkit")}
    first: dict[tuple[str, str], Import] = {}
    for i in all_imports("toolkit"):
        # a submodule's import of its own package is no edge: Python has run (or is running)
        # the package's __init__ before the submodule starts
        if i.type_only or i.target not in edges or i.importer.startswith(i.target + "."):
            continue
        edges[i.importer].add(i.target)
        first.setdefault((i.importer, i.target), i)
    return edges, first


def test_no_import_circles() -> None:
    edges, first = import_edges()
    found = [c for c in circles(edges) if tuple(c) not in ALLOWED_CYCLES]
    report = []
    for comp in found:
        members = set(comp)
        report.append("circle: " + ", ".join(comp))
        report += [f"  {where(first[(a, b)])}: {a} -> {b}"
                   for a in comp for b in sorted(edges[a] & members)]
    assert not found, "\n".join(report)


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(("mod", "layer"), [
    ("toolkit.slurm", "base"), ("toolkit.catalog", "base"), ("toolkit", "base"),
    ("toolkit.local.twin", "local"), ("toolkit.local.faults_cli", "local"),
    ("toolkit.catalog_cli", "cli"), ("toolkit.commands.jobend", "cli"),
    ("toolkit.lazy_cli", "base"),
    ("toolkit.bench.comm.verdict", "bench"), ("toolkit.bench.nccl.cli", "cli"),
    ("toolkit.bench", "bench"), ("toolkit.cli", "cli"), ("toolkit.results.report", "results"),
])
def test_layer_map(mod: str, layer: str) -> None:
    assert layer_of(mod) == layer


def test_modules_named_in_strings_are_imports() -> None:
    """The lazy commands of ``pctk`` and ``pctk bench`` are followed like import lines, so a
    command that names a moved module, or a lower module that loads a command by name, fails
    the tests above."""
    lazy = {i.target for i in imports("toolkit.cli", TOOLKIT["toolkit.cli"])}
    assert {"toolkit.local.cli", "toolkit.bench.cli", "toolkit.plan.cli"} <= lazy
    bench = {i.target for i in imports("toolkit.bench.cli", TOOLKIT["toolkit.bench.cli"])}
    assert "toolkit.bench.inference.cli" in bench
    submit = {i.target for i in imports("toolkit.submit", TOOLKIT["toolkit.submit"])}
    assert {"toolkit.submit.executor", "toolkit.submit.efa"} <= submit
    assert not LAZY_TARGET.fullmatch("toolkit.local.programs")  # run with python -m


def test_a_module_loaded_by_a_literal_name_is_an_import(tmp_path: Path) -> None:
    """``importlib.import_module`` and ``__import__`` with a literal name load that module as
    surely as an import statement: the layering holds for them too."""
    src = tmp_path / "probe.py"
    src.write_text("import importlib\nfrom importlib import import_module\n\n"
                   "def f():\n    importlib.import_module('toolkit.results.store')\n"
                   "    import_module('toolkit.plan.planner')\n"
                   "    __import__('toolkit.api.training')\n"
                   "    importlib.import_module(name_from_elsewhere)\n")
    found = {i.target for i in imports("toolkit.health.probe", src)}
    assert found == {"toolkit.results.store", "toolkit.plan.planner", "toolkit.api.training"}
