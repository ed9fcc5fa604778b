"""Failures that say what happened (issue 18, item 6), through the Ray engine: a hung policy under
a time limit is recorded as failed; a policy that ends its worker (``os._exit``) or calls
``sys.exit`` is reported with the policy, the setting and the replication, and a deterministic
crash is not retried three times; settings whose cost or range is clearly out of reach are
refused before Ray starts."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from study import cli, runner
from study.results import storage
import rogue_policies

ROOT = Path(__file__).resolve().parents[2]
TINY = {"T": 30, "T0": 10}


@pytest.fixture
def attempts():
    shutil.rmtree(rogue_policies.ATTEMPTS, ignore_errors=True)
    yield rogue_policies.attempts
    shutil.rmtree(rogue_policies.ATTEMPTS, ignore_errors=True)


def run(plan, out, **options):
    return runner.run_study(plan, out, progress=False, log=lambda m: None, **options)


def test_a_hung_policy_under_a_time_limit_is_recorded_as_failed(ray_session, tmp_path, attempts):
    method = "rogue_policies:Hang"
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", method], reps=2,
                            overrides={**TINY, "time_limit": 2})
    start = time.monotonic()
    report = run(plan, tmp_path, batch_size=1)
    assert time.monotonic() - start < 60
    assert report.computed == 2 and report.failed == 2  # RB's two stored, the hung policy's two failed
    failures = storage.load(tmp_path, "regret", "failures")
    assert set(failures["method"]) == {method} and len(failures) == 2
    assert all("exceeded the time limit of 2 s" in e and "rep=" in e for e in failures["error"])
    assert "time_limit" not in str(plan.fingerprint()["cells"])  # it changes no stored number
    # the limit is a setting, given on the command line like any other
    with pytest.raises(SystemExit):
        cli.main("regret", ["--out", str(tmp_path / "x"), "--set", "time_limit=-1", "--no-progress"])


def test_a_policy_that_swallows_the_timeout_is_stopped_hard(ray_session, tmp_path, attempts):
    """The issue: a policy retrying in a loop that swallows exceptions (``except Exception:``) hung
    the run under time_limit (1 of 6 replications stored after 90 s, no failure recorded).  Now its
    replication's process is ended, the replication is recorded as failed with ReplicationTimeout,
    and the other replications of the same task are stored."""
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "rogue_policies:SwallowsTimeouts",
                                                               "rogue_policies:CatchesTimeoutOnce"],
                            reps=3, overrides={**TINY, "time_limit": 1})
    start = time.monotonic()
    report = run(plan, tmp_path, batch_size=3)
    assert time.monotonic() - start < 90
    assert report.computed == 3 and report.failed == 6  # RB's three stored
    failures = storage.load(tmp_path, "regret", "failures")
    assert all(f.startswith("ReplicationTimeout: ") and "time limit of 1 s" in f for f in failures["error"])
    swallowed = failures[failures["method"] == "rogue_policies:SwallowsTimeouts"]["error"]
    assert len(swallowed) == 3 and all("its process was ended" in e for e in swallowed)
    # a user policy is never told: its confined process is ended at the limit, whatever it catches
    caught = failures[failures["method"] == "rogue_policies:CatchesTimeoutOnce"]["error"]
    assert len(caught) == 3 and all("its process was ended" in e for e in caught)
    assert set(storage.load(tmp_path, "regret")["method"]) == {"RB"}


def test_run_batch_stops_a_swallowing_policy_outside_ray_too():
    """The hard stop needs neither Ray nor the main thread (the task's replications run in a process
    of their own); the replications of the task after a stopped one are computed in a new process,
    and they are the replications a run without a time limit stores."""
    from study.runner.plan import make_plan
    from study.runner.worker import run_batch
    from study.simulation.environment import BTLEnvironment

    plan = make_plan("regret", settings=["A"], methods=["rogue_policies:SwallowsSometimes"], reps=6,
                     overrides={**TINY, "time_limit": 1})
    (cell,) = plan.cells
    reps_seeds = [(rep, 100 + rep) for rep in range(6)]
    hangs = {rep for rep, seed in reps_seeds if BTLEnvironment(cell.resolve(), seed).contexts[0][0] > 1.0}
    assert 0 < len(hangs) < 6
    result = {}
    user = {"needs": {cell.method: ["files"]}}  # its attempt files (the driver passes the declared needs)
    worker = threading.Thread(target=lambda: result.update(run_batch("regret", cell, reps_seeds, user=user)))
    start = time.monotonic()
    worker.start()
    worker.join(90)
    assert not worker.is_alive() and time.monotonic() - start < 60
    assert {f["rep"] for f in result["failures"]} == hangs
    assert all(f["error"].startswith("ReplicationTimeout") for f in result["failures"])
    stored = result["trajectory"].to_pandas()
    assert set(stored["rep"]) == set(range(6)) - hangs
    unlimited = make_plan("regret", settings=["A"], methods=["RB"], reps=6, overrides=TINY).cells[0]
    plain = run_batch("regret", unlimited, [rs for rs in reps_seeds if rs[0] not in hangs])["trajectory"].to_pandas()
    for column in ("major", "other", "regret", "rel_error"):  # SwallowsSometimes is RB where it does not hang
        assert stored[column].tolist() == plain[column].tolist()


def test_a_crashing_policy_is_reported_and_not_retried(ray_session, tmp_path, attempts):
    method = "rogue_policies:OsExit"
    plan = runner.make_plan("regret", settings=["A"], methods=[method], reps=2, overrides=TINY)
    report = run(plan, tmp_path, batch_size=2)  # both replications in one task: the crash is isolated
    assert report.computed == 0 and report.failed == 2
    for failure in report.failures:
        error = failure["error"]
        assert method in error and "setting A" in error and f"rep={failure['rep']}" in error
        assert f"seed {failure['seed']}" in error and "not retried" in error
        assert "study.run_replication('A', 'rogue_policies:OsExit'" in error
    # once in the task, once alone for each replication: never Ray's three retries of a crash
    assert attempts("osexit") <= 3
    summary = report.summary()
    assert "rogue_policies:OsExit" in summary and "rep=0" in summary


def test_a_policy_that_always_crashes_stops_being_run(ray_session, tmp_path, attempts):
    """Once three replications of a cell crashed their process (each alone), the rest of the cell
    is recorded as not run instead of starting a process for every replication.  (A user policy's
    replications run in processes of their own, issue 35: a crash ends that process, not a Ray
    worker, and the task's next replication goes on in a new one.)"""
    method = "rogue_policies:OsExit"
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", method], reps=5, overrides=TINY)
    report = run(plan, tmp_path, batch_size=5)
    assert report.computed == 5 and report.failed == 5  # RB stored; every OsExit replication recorded
    errors = [f["error"] for f in report.failures]
    assert sum(e.startswith("WorkerCrashedError") for e in errors) == 3
    assert sum(e.startswith("NotRun") and "in 3 replications" in e for e in errors) == 2
    assert attempts("osexit") == 3  # the task of five, each replication alone in its process, three of them


def test_sys_exit_in_a_policy_is_a_recorded_failure(ray_session, tmp_path, attempts):
    method = "rogue_policies:SysExit"
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", method], reps=2, overrides=TINY)
    report = run(plan, tmp_path, batch_size=2)
    assert report.computed == 2 and report.failed == 2
    assert all("sys.exit(3)" in f["error"] and method in f["error"] for f in report.failures)
    assert attempts("sysexit") == 2  # each replication once: the worker never died


OUT_OF_REACH = [
    (["--set", "M=10000000"], "GiB of memory"),
    (["--set", "p=1e-12", "--set", "max_graph_draws=1000000000000"], "would almost surely all fail"),
    (["--set", "p=1e-5", "--set", "max_graph_draws=1000000000000"], "CPU-hours"),
    (["--set", "init_mean=1e308"], "init_mean must lie in"),
    (["--set", "gamma=1e300"], "gamma must lie in"),
    (["--set", "context_mean=1e50"], "context_mean must lie in"),
    (["--set", "truth_scale=1e40", "--set", "truth=normal"], "truth_scale must lie in"),
    (["--set", "c_lambda=1e300"], "c_lambda must lie in"),
]


@pytest.mark.parametrize("args, message", OUT_OF_REACH)
def test_settings_out_of_reach_are_refused_in_process(args, message, tmp_path, capsys):
    """The command line's validation (cli.make_plans, which runs before Ray) refuses them; nothing
    is run here even where it would not (a setting that spins forever must never start)."""
    parser = cli.build_parser("regret")
    parsed = parser.parse_args(["--out", str(tmp_path), "--settings", "A", *args])
    with pytest.raises(SystemExit) as exc:
        cli.make_plans(parser, parsed, ["regret"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "error:" in err
    assert not any(tmp_path.iterdir())


def _limit_memory():  # a safety net: a run that is not refused must not take the machine down
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2 ** 30, 6 * 2 ** 30))


def _refused_before_ray(args, tmp_path):
    start = time.perf_counter()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "regret.py"), "--out", str(tmp_path), "--reps", "1",
                          "--num-cpus", "1", *args], capture_output=True, text=True, timeout=120, env=env,
                         cwd=tmp_path, preexec_fn=_limit_memory)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "error:" in res.stderr and "Traceback" not in res.stderr
    assert "Ray" not in res.stderr  # no Ray instance was started
    assert time.perf_counter() - start < 60 and not any(tmp_path.iterdir())
    return res.stderr


def test_settings_out_of_reach_are_refused_before_ray(tmp_path):
    err = _refused_before_ray(["--settings", "A", "--set", "M=10000000"], tmp_path)
    assert "out of reach" in err


def test_replications_whose_size_follows_n_are_refused_before_ray():
    """Checked in process, where the CLI validates before Ray: run as a command it would start
    replications of ~18 GiB each (the cost model follows n since issue 16)."""
    with pytest.raises(ValueError, match="out of reach"):
        runner.make_plan("regret", settings=["B"], overrides={"n_items": 20000, "truth": "normal"})
