"""A judge's process imports the client alone: ``from study.online import Client`` imports no
scipy, pandas, matplotlib, Ray or FastAPI (the package's public names are imported when first
used), while every public name of ``study`` and ``study.online`` is still there, in ``dir()``
too.  (Its time is measured by ``python -m benchmarks.client_import``, not here: no timed tests.)"""
import json
import subprocess
import sys
from pathlib import Path

import study
import study.online

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "pandas", "matplotlib", "ray", "fastapi", "uvicorn", "pyarrow")


def imported_after(statement: str) -> list:
    code = (f"import sys\n{statement}\n"
            f"print(__import__('json').dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_client_imports_nothing_heavy():
    assert imported_after("from study.online import Client") == []
    assert imported_after("from study.online import Client, Ticket, TicketError, StoreError; import study") == []
    assert imported_after("from study.online.service.client import Client; Client('http://127.0.0.1:1')") == []


def test_the_rest_is_imported_when_used():
    assert "scipy" in imported_after("from study import fit_btl")
    assert "pandas" in imported_after("from study.online import Ranker")


def test_every_public_name_is_still_there():
    for package in (study, study.online):
        assert set(package.__all__) <= set(dir(package))
        for name in package.__all__:
            assert getattr(package, name) is not None, name
    from study.online.ranker import Ranker
    assert study.online.Ranker is Ranker and study.results.load is study.load
    try:
        study.online.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
