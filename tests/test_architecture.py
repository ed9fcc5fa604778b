"""The package's architecture, read from its source: imports run one way between the layers, no
module imports itself through a cycle (imports inside functions included), and no module is
over MAX_LINES lines.  The checker is tested on a small fake package first, so that it can fail.

Layers (a module may import its own layer and those below):

    0  study._util, study._version          helpers with one home each
    1  study.core                           the statistical core
    2  study.simulation, study.policies     the simulation layer
    3  study.llm, study.online,             the LLM-ranking application, the online ranker,
       study.leaderboard,                   leaderboards from files of judgments,
       study.votes                          votes to a decision on replayed arenas
    4  study.results                        stored results, figures, summary (never the runner)
    5  study.runner                         the Ray runner
    6  study.cli                            the command line
    7  study (its __init__)                 the public API

Rooms: within a layer, a room sits above the rest of its package, which is a library that never
imports it.  ``study.online.service`` (the HTTP service, its pages and its client) is such a room
over the online ranker; only the package's doors may import it: ``study.online`` (its ``__init__``
exports ``Client``) and the command line (``study.online.__main__``, ``study.online.commands``).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "study"
LAYERS = {"study._util": 0, "study._version": 0, "study.core": 1, "study.simulation": 2, "study.policies": 2,
          "study.llm": 3, "study.online": 3, "study.leaderboard": 3, "study.votes": 3,
          "study.results": 4, "study.runner": 5, "study.cli": 6, "study": 7}
MAX_LINES = 600
# room -> the modules outside it that may import it (its doors)
ROOMS = {"study.online.service": {"study.online", "study.online.__main__", "study.online.commands"}}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(root: Path) -> dict:
    """{module name: path} of every module of the package at ``root``."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set) -> set:
    """The package's modules that ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # "from X import a": the submodule X.a when it is one, else X itself
            targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # "import study.core.mle" -> the deepest known module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path) -> dict:
    mods = modules_of(root)
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def layer_of(name: str, layers: dict):
    while name not in layers:
        if "." not in name:
            return None
        name = name.rpartition(".")[0]
    return layers[name]


def upward_imports(graph: dict, layers: dict) -> list:
    """(importer, imported) pairs that import a higher layer, or a module with no layer."""
    bad = []
    for name, targets in graph.items():
        mine = layer_of(name, layers)
        for target in sorted(targets):
            theirs = layer_of(target, layers)
            if mine is None or theirs is None or theirs > mine:
                bad.append((name, target))
    return bad


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def room_breaches(graph: dict, rooms: dict) -> list:
    """(importer, imported) pairs where a module outside a room, and not one of its doors, imports it."""
    return [(name, target) for room, doors in rooms.items() for name, targets in sorted(graph.items())
            if not in_package(name, room) and name not in doors
            for target in sorted(targets) if in_package(target, room)]


def cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def test_the_checker_finds_a_cycle_and_an_upward_import(tmp_path):
    root = tmp_path / "study"
    for rel, text in {"__init__.py": "", "core/__init__.py": "", "core/a.py": "from . import b\n",
                      "core/b.py": "def f():\n    from .a import g\n", "runner/__init__.py": "",
                      "runner/r.py": "from ..core import a\n", "core/c.py": "from ..runner import r\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    graph = import_graph(root)
    assert graph["study.core.a"] == {"study.core.b"} and graph["study.core.b"] == {"study.core.a"}
    assert cycles(graph) == [["study.core.a", "study.core.b"]]
    assert upward_imports(graph, {"study.core": 1, "study.runner": 5, "study": 7}) == [("study.core.c",
                                                                                        "study.runner.r")]


def test_the_checker_finds_a_library_module_that_imports_its_room(tmp_path):
    root = tmp_path / "study"
    for rel, text in {"__init__.py": "", "online/__init__.py": "from .service.client import Client\n",
                      "online/__main__.py": "from .service import serve\n",
                      "online/ranker.py": "def f():\n    from .service import client\n",
                      "online/store.py": "from . import ranker\n", "online/service/__init__.py": "",
                      "online/service/client.py": "from ..store import f\n",
                      "online/service/serve.py": "from .. import ranker\nfrom . import client\n",
                      "online/services.py": "", "online/report.py": "from . import services\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    graph = import_graph(root)
    assert "study.online.service.client" in graph["study.online.ranker"]
    rooms = {"study.online.service": {"study.online", "study.online.__main__"}}
    # the doors and the room itself may import it; a look-alike name (services) is not the room
    assert room_breaches(graph, rooms) == [("study.online.ranker", "study.online.service.client")]
    assert room_breaches(graph, {"study.online.service": set()}) == [
        ("study.online", "study.online.service.client"), ("study.online.__main__", "study.online.service.serve"),
        ("study.online.ranker", "study.online.service.client")]


def test_the_ranker_never_imports_the_service_room():
    assert set(ROOMS) <= set(modules_of(PACKAGE)), "every room is a package of study"
    bad = room_breaches(import_graph(PACKAGE), ROOMS)
    assert not bad, "a library module imports the room above it (importer -> imported): " + ", ".join(
        f"{a} -> {b}" for a, b in bad)


def test_every_module_has_a_layer():
    unplaced = [name for name in modules_of(PACKAGE) if layer_of(name, LAYERS) is None]
    assert not unplaced, f"modules outside every layer (add their package to LAYERS and the docstring): {unplaced}"


def test_imports_run_one_way():
    bad = upward_imports(import_graph(PACKAGE), LAYERS)
    assert not bad, "imports against the layering (importer -> imported): " + ", ".join(f"{a} -> {b}" for a, b in bad)


def test_no_import_cycle():
    found = cycles(import_graph(PACKAGE))
    assert not found, f"import cycles: {found}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_are_small(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines (at most {MAX_LINES})"
