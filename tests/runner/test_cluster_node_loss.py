"""Issue 35: a two-node cluster on loopback in the test suite, a node killed mid-study: the study
completes (exit status 0, nothing failed) with the table of an uninterrupted run, value for value.
The cluster runs in a process of its own (the session's Ray is another), in a session of its own
that is killed at the end whatever happens (never `ray stop`)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def test_a_node_killed_mid_study_loses_nothing(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # its own session files (short: Unix socket paths)
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=ray_tmp,
               PYTHONPATH=os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH", "")])))
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, str(SUPPORT / "cluster_child.py"), str(tmp_path / "out")], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # this test's session only: raylets, GCS, workers
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, stderr[-4000:]
    seen = json.loads(lines[-1])
    assert seen["address"].startswith("127.0.0.1:")  # on loopback
    assert seen["killed_node"] in seen["nodes_used"] and 12 <= seen["killed_at"] < 48  # it worked, then died
    assert seen["ok"] and seen["failed"] == 0 and seen["whole_ok"]
    assert seen["equal"], seen  # the uninterrupted table, value for value
