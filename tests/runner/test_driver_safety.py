"""Results that cannot be corrupted (issue 11), driver side, with a real driver in a subprocess on
its own embedded Ray (tests/support/engine_driver.py: the regret command line with the cheap stand-in
replication): a second driver on the same --out is refused, the embedded Ray listens on loopback
only, and two SIGINTs 0.05 s apart still store every finished replication and say how many."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from study import cli
from study.results import storage
from engine_support import fake_replicate

SUPPORT_DIR = Path(__file__).resolve().parents[1] / "support"
ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--settings", "A", "--methods", "RB", "ETA", "--reps", "150", "--set", "T=30", "--set", "T0=10",
        "--num-cpus", "1", "--batch-size", "1", "--no-progress"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """A running driver (about 30 s of work at 0.1 s per replication on 1 CPU; each batch's write
    takes 0.3 s longer, so that the second SIGINT below arrives during a write)."""
    out = tmp_path_factory.mktemp("driven")
    ray_tmp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Unix socket paths are limited
    env = dict(os.environ, RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
               STUDY_TEST_SLOW_COMMIT="0.3", PYTHONPATH=os.pathsep.join([str(SUPPORT_DIR), str(ROOT)]))
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, str(SUPPORT_DIR / "engine_driver.py"), "regret", "0.1",
                             "--out", str(out), *ARGS], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((out / "regret" / "_commits").glob("*.json")):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the driver stored nothing within 120 s"
        time.sleep(0.1)
    yield proc, out
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_second_driver_on_the_same_out_is_refused(ray_session, driver, capsys):
    proc, out = driver
    assert proc.poll() is None
    rc = cli.main("regret", ["--out", str(out), *ARGS[:-5], "--no-progress"], replicate=fake_replicate)
    assert rc == 2
    err = capsys.readouterr().err
    assert f"pid {proc.pid}" in err and "engine_driver.py" in err and "one writer per study directory" in err
    assert len(storage.read_manifest(out, "regret")["runs"]) == 1  # nothing of the refused run recorded


def _descendants(pid: int) -> set:
    children: dict = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        todo.extend(children.get(p, []))
    return found


def test_embedded_ray_listens_on_loopback_only(driver):
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    proc, _ = driver
    assert proc.poll() is None
    pids = _descendants(proc.pid)
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    ours = [line for line in lines if any(int(p) in pids for p in re.findall(r"pid=(\d+),", line))]
    assert len(ours) >= 3, lines  # GCS, raylet, workers, agents
    local = [line.split()[3] for line in ours]
    exposed = [(addr, line) for addr, line in zip(local, ours)
               if not re.match(r"^(127\.\d+\.\d+\.\d+|\[::ffff:127\.\d+\.\d+\.\d+\]|\[::1\]):\d+$", addr)]
    assert not exposed, exposed


def test_double_sigint_stores_finished_work_and_says_so(driver):
    """Two SIGINTs: the second sent as soon as the first is acknowledged (so it arrives while the
    driver writes or shuts down, not coalesced with the first)."""
    proc, out = driver
    assert proc.poll() is None
    lines, acknowledged = [], threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line)
            if "SIGINT: stopping" in line:
                acknowledged.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.send_signal(signal.SIGINT)
    assert acknowledged.wait(30), "".join(lines)[-3000:]
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=30)
    err = "".join(lines)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Check failed" not in err
    match = re.search(r"interrupted by SIGINT: (\d+) replications computed and stored by this run, 0 failed; "
                      r"(\d+) of 300 are now stored", err)
    assert match, err[-3000:]
    stored = len(storage.stored_keys(out, "regret"))
    assert int(match.group(1)) == int(match.group(2)) == stored > 0
    manifest = storage.read_manifest(out, "regret")
    assert manifest["status"] == "interrupted"
    assert manifest["runs"][-1]["status"] == "interrupted" and manifest["runs"][-1]["computed"] == stored
    assert manifest["runs"][-1]["signals"][:2] == ["SIGINT", "SIGINT"], err[-3000:]
    assert "SIGINT again: still writing" in err
    assert not list(out.rglob("_tmp-*"))
    assert storage.verify(out, "regret")["uncommitted"] == []
    assert len(storage.load(out, "regret")) == stored * 30
