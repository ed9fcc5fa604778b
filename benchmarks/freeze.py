"""Freeze the core of a commit into ``benchmarks/previous/``, the reference of
``python -m benchmarks.bench --scale --long`` and of the long-horizon agreement tests.

    python -m benchmarks.freeze 549859d      # replaces benchmarks/previous/ (then commit it)

The files are exported from the repository with ``git archive`` (as ``--paper`` exports its
reference, :func:`benchmarks.paper_study.export_reference`; nothing of the working tree is
read): the estimator every policy shares (``study/simulation/estimator.py``) and the core modules
it imports, directly or not, each unchanged except that the estimator's imports of ``..core.X``
become ``.X`` (the core's own imports are relative already).  ``study.core._validate`` stays
shared with the package, as in the earlier frozen cores.
"""
from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "benchmarks" / "previous"
ESTIMATOR = "study/simulation/estimator.py"
SHARED = {"_validate"}  # imported from the package, not copied


def archive(ref: str) -> dict:
    """{path: text} of ``study/core/*.py`` and the estimator at commit ``ref`` (git archive)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "study/core", ESTIMATOR],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def closure(files: dict) -> list:
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


def freeze(ref: str) -> list:
    files = archive(ref)
    modules = closure(files)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True,
                            capture_output=True, text=True).stdout.strip()
    if TARGET.exists():
        shutil.rmtree(TARGET)
    TARGET.mkdir()
    for module in modules:
        text = files[f"study/core/{module}.py"]
        text = re.sub(r"^from \. import _validate as check$", "from study.core import _validate as check", text,
                      flags=re.M)
        (TARGET / f"{module}.py").write_text(text)
    estimator = re.sub(r"from \.\.core(\.| import)", lambda m: "from ." if m.group(1) == "." else "from . import",
                       files[ESTIMATOR])
    (TARGET / "estimator.py").write_text(estimator)
    (TARGET / "__init__.py").write_text(
        f'"""The core as it was at commit {commit}, frozen by ``python -m benchmarks.freeze {ref}`` (git archive of\n'
        "``study/core`` and ``study/simulation/estimator.py``, see :mod:`benchmarks.freeze`): the reference of\n"
        "``python -m benchmarks.bench --scale --long`` (current core against this one in the same run) and of\n"
        "``tests/core/test_agreement.py``'s long-horizon pairing.  ``benchmarks/legacy`` holds an older core\n"
        "(commit 796e5ac).  Nothing in the package imports it.\n\n"
        'Only regenerate it with the command above; its numbers are the point of comparison.\n"""\n'
        f'COMMIT = "{commit}"\n')
    return modules + ["estimator"]


if __name__ == "__main__":
    print("froze", ", ".join(freeze(sys.argv[1] if len(sys.argv) > 1 else "HEAD")), "into", TARGET)
