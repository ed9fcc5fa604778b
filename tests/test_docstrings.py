"""Every example in the package's docstrings runs as written (doctest), and the public API
documents its Parameters/Returns in numpydoc style."""
from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import study

PACKAGE = Path(study.__file__).resolve().parent
MODULES = sorted(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                 for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed"


@pytest.mark.parametrize("obj", [study.fit_btl, study.debias, study.run_replication, study.load,
                                 study.run_environment], ids=lambda f: f.__name__)
def test_public_functions_have_numpydoc_sections(obj):
    doc = inspect.getdoc(obj)
    for section in ("Parameters\n----------", "Returns\n-------"):
        assert section in doc, f"{obj.__qualname__} lacks a {section.splitlines()[0]} section"


def test_examples_exist_where_users_start():
    for obj in (study.fit_btl, study.debias, study.run_replication, study.Policy):
        assert ">>>" in inspect.getdoc(obj), f"{obj.__qualname__} has no example"
