"""docs/cluster.md's recipe, run as written with token authentication on: a `ray start` head on
loopback, a job joining it with --address and a user package through --py-modules, the same study
through `ray job submit --working-dir .`, and the head stopped by its PID (never `ray stop`).

Only HOME differs from the page (a temporary home, so that the token Ray creates never touches the
user's ~/.ray); the page itself picks free ports and a session directory of the head's own.  The
head runs in a session of its own, so that whatever happens, only its processes are killed at the
end.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mdblocks import ROOT, blocks
from study.results import storage

PAGE = ROOT / "docs" / "cluster.md"


def _session_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _recipe() -> str:
    recipe = [b for b in blocks(PAGE) if b.directive == "cluster-recipe"]
    assert [b.language for b in recipe] == ["bash"] * 4, "the page's recipe is four bash blocks"
    start, address, submit, stop = (b.code for b in recipe)
    # between the jobs and the stop: the job API refuses a request without the token
    check = ("python -c \"import sys, urllib.error, urllib.request\n"
             "try:\n    urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/api/jobs/', timeout=10); print('AUTH 200')\n"
             "except urllib.error.HTTPError as e:\n    print(f'AUTH {e.code}')\" $DASHBOARD_PORT\n")
    return ("set -u\n" + start + "echo RECIPE-STARTED\n" + address + "echo ADDRESS-EXIT=$?\n" + submit
            + "echo SUBMIT-EXIT=$?\n" + check + "echo RAY-TMPDIR=$RAY_TMPDIR\n" + stop + "echo RECIPE-STOPPED\n")


def _run_in_session(code: str, script: Path, home: Path) -> tuple:
    """(exit status, output, processes left) of ``code`` run by bash from the repository root in a
    session of its own, with HOME ``home`` and no RAY_ variable; whatever happens, only that session's
    processes are killed at the end (after a minute for the heads to drain)."""
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]))
    script.write_text(code)
    proc = subprocess.Popen(["bash", str(script)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=480)
        deadline = time.monotonic() + 60
        while _session_alive(proc.pid) and time.monotonic() < deadline:  # the head drains, then exits
            time.sleep(0.5)
        leftover = _session_alive(proc.pid)
    finally:
        if proc.poll() is None or _session_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)  # our session only
            proc.wait(timeout=30)
    return proc.returncode, output, leftover


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the recipe is checked on Linux")
def test_cluster_recipe_with_token_authentication(tmp_path):
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists() and shutil.which("ray") is None:
        pytest.skip("the ray command line is not installed")
    home = tmp_path / "home"
    returncode, output, leftover = _run_in_session(_recipe(), tmp_path / "recipe.sh", home)
    tail = output[-6000:]
    tmpdir = re.search(r"^RAY-TMPDIR=(.*)$", output, flags=re.M)
    if tmpdir and tmpdir.group(1).startswith("/tmp/ray-"):
        leftover_dir = Path(tmpdir.group(1)).exists()
        shutil.rmtree(tmpdir.group(1), ignore_errors=True)
        assert not leftover_dir or returncode != 0, "the recipe leaves its session directory behind"
    assert returncode == 0, tail
    assert "RECIPE-STARTED" in output and "RECIPE-STOPPED" in output, tail
    assert "ADDRESS-EXIT=0" in output and "SUBMIT-EXIT=0" in output, tail
    assert "AUTH 401" in output or "AUTH 403" in output, tail  # the job API demands the token
    assert (home / ".ray" / "auth_token").exists()
    assert not leftover, "processes of the head are still running after `kill $HEAD_PID`"

    runs = home / "study-runs"
    tables = {}
    for name, mode in (("address", "cluster"), ("job", "RAY_ADDRESS")):
        out = runs / name
        assert (out / "figures" / "regret_A.png").exists() and (out / "summary.md").exists()
        manifest = json.loads((out / "regret" / "_manifest.json").read_text())
        assert manifest["runs"][-1]["ray_mode"] == mode and manifest["runs"][-1]["failed"] == 0
        tables[name] = storage.load(out, "regret")
        assert sorted(set(tables[name]["method"])) == ["RB", "examples.my_policy:Boltzmann"]
    commits = {name: json.loads((runs / name / "regret" / "_manifest.json").read_text())["git_commit"]
               for name in ("address", "job")}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # the submitted copy has no .git: the commit reached it in STUDY_GIT_COMMIT
        assert commits["job"] == head.stdout.strip() and commits["address"].startswith(commits["job"]), commits
    columns = ["setting", "method", "rep", "t", "major", "other", "avg_regret", "rel_error"]
    a, b = (tables[k][columns].reset_index(drop=True) for k in ("address", "job"))
    assert a[columns[:6]].equals(b[columns[:6]])
    assert np.array_equal(a["avg_regret"].to_numpy(), b["avg_regret"].to_numpy())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the recipe is checked on Linux")
def test_two_nodes_on_one_machine_as_written(tmp_path):
    """Issue 35: the one-machine recipe could not start a second node as written (Ray refuses a
    second node while RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0); the page's two-node recipe starts two
    nodes, runs a study on both and stops them by their PIDs."""
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists() and shutil.which("ray") is None:
        pytest.skip("the ray command line is not installed")
    start, job, stop = (b.code for b in blocks(PAGE) if b.directive == "cluster-two-nodes")
    home = tmp_path / "home"
    returncode, output, leftover = _run_in_session(
        "set -u\n" + start + "echo NODES-STARTED\n" + job + "echo JOB-EXIT=$?\n" + "echo RAY-TMPDIR=$RAY_TMPDIR\n"
        + stop + "echo NODES-STOPPED\n", tmp_path / "two-nodes.sh", home)
    tmpdir = re.search(r"^RAY-TMPDIR=(.*)$", output, flags=re.M)
    if tmpdir and tmpdir.group(1).startswith("/tmp/ray-"):
        shutil.rmtree(tmpdir.group(1), ignore_errors=True)
    tail = output[-6000:]
    assert returncode == 0 and "NODES-STARTED" in output and "NODES-STOPPED" in output, tail
    assert "JOB-EXIT=0" in output, tail
    assert not leftover, "processes of the two nodes are still running after their kill"
    run = json.loads((home / "study-runs" / "two-nodes" / "regret" / "_manifest.json").read_text())["runs"][-1]
    assert run["failed"] == 0 and run["computed"] == 16 and len(run["nodes_used"]) == 2, run
