"""Shared fixtures: one embedded Ray per test session (2 CPUs, no dashboard)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
SUPPORT_DIR = str(TESTS_DIR / "support")  # stand-ins imported by the tests and by Ray workers
sys.path.insert(0, SUPPORT_DIR)
if str(TESTS_DIR.parent) not in sys.path:  # benchmarks/ (not installed) for the agreement tests
    sys.path.insert(1, str(TESTS_DIR.parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def ray_session():
    """Ray started once for the session; workers can import the helpers in tests/support/."""
    import ray

    if ray.is_initialized():  # someone else started it; use as is
        yield ray
        return
    pythonpath = os.pathsep.join(p for p in (SUPPORT_DIR, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    yield ray
    ray.shutdown()
