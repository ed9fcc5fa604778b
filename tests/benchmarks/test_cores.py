"""The older cores the agreement tests and benchmarks compare with are read from git at named commits
(benchmarks/cores.py), imported from memory beside the current package, never copied into the tree."""
from __future__ import annotations

import subprocess

import pytest

from benchmarks import cores
from study.simulation.estimator import Estimate

needs_history = pytest.mark.skipif(not cores.has_history(), reason=cores.NO_HISTORY)


@needs_history
@pytest.mark.parametrize("name", sorted(cores.CORES))
def test_a_core_is_its_commits_files_imported_beside_the_current_one(name):
    core = cores.CORES[name]
    older = cores.estimator(name)
    assert older is not Estimate and older.__module__ == f"_core_{core.commit}.estimator"
    modules = cores.sources(name)
    # each module's source is the commit's file (up to the stated import rewrites), found by git independently
    for module, text in modules.items():
        path = f"{core.path}/{module}.py" if module != "estimator" or core.path != "study/core" \
            else "study/simulation/estimator.py"
        original = subprocess.run(["git", "-C", str(cores.ROOT), "show", f"{core.commit}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
        strip = lambda s: [line for line in s.splitlines() if not line.startswith("from ")]  # noqa: E731
        assert strip(text) == strip(original), (name, module)
    # imported once, from memory: nothing was written into the tree
    assert cores.estimator(name) is older
    assert not (cores.ROOT / "benchmarks" / "previous").exists() and not (cores.ROOT / "benchmarks" / "legacy").exists()


def test_without_history_the_tests_skip_and_a_load_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(cores, "ROOT", tmp_path)
    assert not cores.has_history()
    monkeypatch.setitem(cores.CORES, "nowhere", cores.Core("0123456", "study/core", "a core of no commit"))
    with pytest.raises(RuntimeError, match="commit 0123456 of the repository's history, which is not at hand"):
        cores.load("nowhere")
