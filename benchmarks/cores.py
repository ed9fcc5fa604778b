"""Older cores, read from the repository's history at a named commit: the references that the
agreement tests and the benchmarks compare the current core with.  Nothing is copied into the tree
and nothing is written to disk: the files are exported with ``git archive`` (as ``--paper`` exports
its reference, :func:`benchmarks.paper_study.export_reference`) and imported from memory as a
package of their own (``_core_<commit>``), so the current ``study`` is untouched.

=============  =========  ==================================================================
name           core of    what
=============  =========  ==================================================================
``legacy``     796e5ac    the core before the row-space solver (dense reduced design and
                          Hessian), as it was kept in ``benchmarks/legacy/`` (read at
                          ``d93ceff``, the folder's last change): the reference of
                          ``tests/core/test_agreement.py`` and ``python -m benchmarks.bench --scale``
``previous``   549859d    the core before the gamma-ball solvers and cost records: ``study/core``
                          and ``study/simulation/estimator.py`` of 549859d, the estimator's
                          imports of ``..core.X`` made relative: the reference of
                          ``--scale --long``, ``python -m benchmarks.paired`` and the
                          long-horizon agreement tests
=============  =========  ==================================================================

``study.core._validate`` stays shared with the installed package (as in the earlier frozen copies).

    python -m benchmarks.cores previous      # list the modules of a core and check that it imports

Needs the repository's history (a clone has it): :func:`has_history` says whether the tree is a git
checkout at all (tests that compare with an older core skip without one, naming why); in a checkout
whose history lacks the commit (a shallow clone) :func:`load` raises, naming the commit.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import io
import linecache
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ESTIMATOR = "study/simulation/estimator.py"
SHARED = {"_validate"}  # imported from the package, not exported


@dataclass(frozen=True)
class Core:
    commit: str   # the commit whose files are exported
    path: str     # the folder exported: a core package as it was kept, or "study/core" (with the estimator)
    described: str


CORES = {
    "legacy": Core("d93ceff", "benchmarks/legacy", "the core of 796e5ac (before the row-space solver)"),
    "previous": Core("549859d", "study/core", "the core of 549859d (before the gamma-ball solvers)"),
}


def has_history() -> bool:
    """Whether the tree is a git checkout (not an exported or copied tree), whose history holds the cores."""
    return (ROOT / ".git").exists()


NO_HISTORY = ("needs the repository's history: the older core it compares with is read from a named commit by git "
              "archive (benchmarks/cores.py), and this tree is not a git checkout")


def _archive(commit: str, *paths: str) -> dict:
    """{path: text} of the Python files under ``paths`` at ``commit`` (git archive)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, *paths], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()
                if m.isfile() and m.name.endswith(".py")}


def _closure(files: dict) -> list:
    """The core modules the estimator needs, directly or through each other."""
    needed, todo = set(), [files[ESTIMATOR]]
    while todo:
        text = todo.pop()
        for name in re.findall(r"^from \.(?:\.core)?\.?(\w+) import|^from \.(?:\.core)? import ([\w, ]+)", text, re.M):
            for module in (m.strip().split(" as ")[0] for part in name if part for m in part.split(",")):
                path = f"study/core/{module}.py"
                if module not in needed and path in files:
                    needed.add(module)
                    todo.append(files[path])
    return sorted(needed - SHARED)


def sources(name: str) -> dict:
    """{module name: source} of core ``name`` (``"estimator"`` among them), as imported."""
    core = CORES[name]
    if core.path != "study/core":  # a core package kept in the tree at that commit: its files as they were
        files = _archive(core.commit, core.path)
        return {Path(path).stem: text for path, text in files.items() if Path(path).stem != "__init__"}
    files = _archive(core.commit, core.path, ESTIMATOR)
    modules = {m: re.sub(r"^from \. import _validate as check$", "from study.core import _validate as check",
                         files[f"study/core/{m}.py"], flags=re.M) for m in _closure(files)}
    modules["estimator"] = re.sub(r"from \.\.core(\.| import)", lambda m: "from ." if m.group(1) == "." else "from . import",
                                  files[ESTIMATOR])
    return modules


class _MemoryPackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``package`` and ``package.<module>`` from a dict of sources (tracebacks show their lines)."""

    def __init__(self, package: str, modules: dict, origin: str):
        self.package, self.modules, self.origin = package, modules, origin

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.package:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        head, _, module = fullname.rpartition(".")
        if head == self.package and module in self.modules:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__.rpartition(".")[2]
        if module.__name__ == self.package:
            module.__path__ = []
            module.__doc__ = f"{self.origin} (git archive, imported from memory: benchmarks/cores.py)"
            return
        filename = f"<{self.origin}>/{name}.py"
        source = self.modules[name]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), module.__dict__)


def load(name: str):
    """The package of core ``name`` (:data:`CORES`), imported from the commit's files; its
    ``estimator.Estimate`` is what :func:`study.simulation.replication.run_environment` takes.

    Raises
    ------
    RuntimeError
        The repository's history is not at hand (no ``.git``, or a shallow clone without the commit).
    """
    core = CORES[name]
    package = f"_core_{core.commit}"
    if package not in sys.modules:
        found = has_history() and subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{core.commit}^{{commit}}"],
                                                 capture_output=True).returncode == 0
        if not found:
            raise RuntimeError(f"core {name!r} is read from commit {core.commit} of the repository's history, which "
                               f"is not at hand in {ROOT} (a git clone with its full history has it; a shallow clone "
                               "does not: git fetch --unshallow)")
        sys.meta_path.append(_MemoryPackage(package, sources(name), f"{core.commit}:{core.path}"))
    return importlib.import_module(package)


def estimator(name: str):
    """``Estimate`` of core ``name``: the estimator class every policy of that core shared."""
    return importlib.import_module(f"{load(name).__name__}.estimator").Estimate


if __name__ == "__main__":
    for name in sys.argv[1:] or list(CORES):
        core = CORES[name]
        modules = sources(name)
        estimator(name)
        print(f"{name}: {core.described}, git archive {core.commit} {core.path}: {', '.join(sorted(modules))} (imports)")
