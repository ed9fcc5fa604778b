"""Fixtures of the command-line tests."""
from __future__ import annotations

import pytest

import study
from study.simulation.named import registered_settings


@pytest.fixture
def clean_registry():
    """The named settings a test registers (a settings file registers its tables) are removed after it."""
    before = set(registered_settings())
    yield
    for name in set(registered_settings()) - before:
        study.unregister_setting(name)
