"""Shared fixtures: one embedded Ray per test session (2 CPUs, no dashboard), and a session that
neither reads nor writes the checkout's state: it runs in a temporary working directory (so a
default ``--out outputs`` or any relative path lands there, not in the checkout), and the
checkout's ``outputs/`` (where a user's runs go) must be the same after the session as before."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
SUPPORT_DIR = str(TESTS_DIR / "support")  # stand-ins imported by the tests and by Ray workers
sys.path.insert(0, SUPPORT_DIR)
if str(TESTS_DIR.parent) not in sys.path:  # benchmarks/ (not installed) for the agreement tests
    sys.path.insert(1, str(TESTS_DIR.parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _snapshot(folder: Path) -> dict:
    """{relative path: (size, modification time)} of everything under ``folder``."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="session", autouse=True)
def _outside_the_checkout(tmp_path_factory):
    """The session's working directory is a temporary one; the checkout's outputs/ is untouched."""
    before = _snapshot(ROOT / "outputs")
    previous = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(previous)
    after = _snapshot(ROOT / "outputs")
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"the test session changed the checkout's outputs/: {[name for name, _ in changed][:10]}"


@pytest.fixture(scope="session")
def ray_session():
    """Ray started once for the session; workers can import the helpers in tests/support/."""
    import ray

    if ray.is_initialized():  # someone else started it; use as is
        yield ray
        return
    # the repository root too: the session's working directory is a temporary one, and the workers
    # import ``examples`` (a user's module next to the checkout) as a user's would from the root
    pythonpath = os.pathsep.join(p for p in (SUPPORT_DIR, str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    yield ray
    ray.shutdown()

