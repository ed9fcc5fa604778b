"""User policies confined by the kernel, asked through a channel that carries nothing executable
back (study.policies.sandbox, study.policies.confine): hostile contestants beside RB in one run of
the runner leave RB's stored numbers equal value for value to a clean run's, do not reach what
they attack, and end their own replications as failed, named."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import study
from study import runner
from study.policies import confine, sandbox
from study.results import storage

TINY = {"T": 30, "T0": 10}
VALUES = ["major", "other", "explored", "regret", "avg_regret", "rel_error", "pair_regret", "before_phi"]
pytestmark = pytest.mark.skipif(not confine.status()["available"], reason=f"no kernel confinement here: "
                                                                       f"{confine.status()['reason']}")


def quiet(*_):
    pass


def _rb(out):
    frame = study.load(out, "regret")
    return frame[frame.method == "RB"].sort_values(["rep", "t"]).reset_index(drop=True)


@pytest.fixture
def hostile(tmp_path):
    from evilpol import kernel

    out, marker = tmp_path / "mixed", tmp_path / "planted-by-unpickling"
    names = {"pickle": functools.partial(kernel.SendsAPickle, target=str(marker)),
             "native": functools.partial(kernel.WritesNatively, target=str(out)),
             "processes": kernel.StartsProcesses, "sockets": kernel.OpensSockets,
             "reads": functools.partial(kernel.ReadsOutputs, target=str(out)), "truth": kernel.SeeksTheTruth,
             "listener": kernel.SeeksTheListener}
    if confine.status()["refusals_reported"]:  # elsewhere a refusal it catches goes unseen (docs/baselines.md)
        names["caught"] = kernel.CatchesRefusals
        # its thread's calls begin before its last answer: caught at that answer or at the end (a busy
        # machine may keep the thread waiting), never stored; the end's check alone is tested below
        names["late"] = functools.partial(kernel.RefusesAfterItsLastAnswer, lead=0.05)
    for name, factory in names.items():
        study.register_policy(name, factory, replace=True)
    yield out, marker, list(names)
    for name in names:
        study.policies.unregister_policy(name)


def test_hostile_policies_beside_rb_leave_its_numbers_and_fail_named(ray_session, tmp_path, hostile):
    out, marker, names = hostile
    clean = runner.make_plan("regret", settings=["A"], methods=["RB"], reps=2, overrides=TINY)
    assert runner.run_study(clean, tmp_path / "clean", progress=False, log=quiet).ok
    # RB first, so that its parts exist while the hostile policies run (one replication a task)
    mixed = runner.make_plan("regret", settings=["A"], methods=["RB", *names], reps=2, overrides=TINY)
    report = runner.run_study(mixed, out, batch_size=1, progress=False, log=quiet)
    want, got = _rb(tmp_path / "clean"), _rb(out)
    assert len(got) == len(want) == 2 * TINY["T"]
    for column in VALUES:
        assert np.array_equal(got[column].to_numpy(), want[column].to_numpy()), column
    checked = storage.verify(out, "regret")
    assert not (checked["damaged"] or checked["duplicates"] or checked["uncommitted"] or checked["foreign"])
    assert not marker.exists() and not list(out.rglob("forged*"))
    errors = {}
    for failure in report.failures:
        errors.setdefault(failure["method"], []).append(failure["error"])
    assert report.failed == 2 * len(names) and sorted(errors) == sorted(names), errors
    assert all(e.startswith("ChannelError") and "never objects" in e for e in errors["pickle"])
    for e in errors["native"]:  # refused by the kernel (errno 13), each route
        assert e.startswith("PermissionError: refused: ") and all(f"{r}: PermissionError 13" in e
                                                                   for r in ("pyarrow", "tofile", "mmap", "ctypes"))
    for e in errors["processes"]:
        assert "STARTED" not in e and all(f"{r} refused" in e for r in ("os.fork", "subprocess", "posix_spawn",
                                                                         "system", "thread"))
    assert all(e.startswith("PermissionError: [Errno 1]") for e in errors["sockets"])
    assert all(e.startswith("PermissionError: [Errno 13]") for e in errors["reads"])
    assert all(e.startswith("LookupError: theta* is nowhere in this process") for e in errors["truth"]), errors["truth"]
    assert all(e.startswith("LookupError: no listener in this process") for e in errors["listener"]), errors["listener"]
    for e in errors.get("caught", []):  # each call it caught, named and counted by the trusted side's listener
        assert e.startswith("PolicyRefused: the kernel refused socket (3 times), ") and "while select at t=2" in e, e
        assert "caught the refusal" in e
    for e in errors.get("late", []):  # the refusals of the thread it starts at its last step
        assert re.match(r"PolicyRefused: the kernel refused socket( \(\d+ times\))? (after the policy's last answer|"
                        r"while select at t=30)", e), e
    stored = storage.load(out, "regret", "failures")
    assert sorted(set(stored["method"])) == sorted(names)
    run = storage.read_manifest(out, "regret")["runs"][-1]
    confinement = run["user_code"]["confinement"]
    assert confinement["kernel"] and confinement["landlock_abi"] >= 1 and not confinement["trust_policy_code"]
    assert run["user_code"]["tainted_cells"] == []


def test_a_clean_user_policy_through_the_channel_equals_the_builtin(ray_session, tmp_path):
    """RB's rule as a user policy, asked step by step in its confined process (the debiased
    estimate crosses on request), gives RB's trajectory value for value."""
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "evilpol.kernel:Clean"], reps=2,
                            overrides={"T": 60, "T0": 24})
    assert runner.run_study(plan, tmp_path, progress=False, log=quiet).ok
    frame = study.load(tmp_path, "regret").sort_values(["method", "rep", "t"])
    rb, clean = (frame[frame.method == m].reset_index(drop=True) for m in ("RB", "evilpol.kernel:Clean"))
    for column in VALUES:
        assert np.array_equal(rb[column].to_numpy(), clean[column].to_numpy(), equal_nan=True), column


def test_the_channel_refuses_anything_but_its_format():
    """Messages written straight into the channel: an old-protocol pickle, an unknown kind, a
    choice whose flag is not 0/1, an oversized error text; each is refused, named, unread."""
    import os
    import threading

    from study.simulation.replication import run_replication

    for payload, expected in ((b"\x20" + b"\x00" * 7 + b"\x80\x04", "ChannelError"),
                              (b"X", "ChannelError"),
                              (b"C" + sandbox.CHOICE.pack(0, 1, 7), "explored=7"),
                              (b"E" + sandbox.TEXT.pack(1 << 20), f"at most {sandbox.MAX_TEXT}")):
        read, write = os.pipe()
        os.write(write, payload)
        os.close(write)
        process = sandbox._Process.__new__(sandbox._Process)
        process.owner = sandbox.ConfinedFactory("crafted")
        process.up, process.down, process.pidfd, process.deadline = read, None, None, None
        process.expired, process.watchdog, process._kill_lock, process.refusals = False, None, threading.Lock(), None
        process.reader = sandbox._Buffered(read)
        process.scratch = confine.scratch_dir()
        policy = sandbox.RemotePolicy(process, False)
        policy._first = False
        policy._process.send = lambda frames: None
        with pytest.raises(sandbox.PolicyProcessError, match=expected):
            run_replication("A", "crafted", 1, T=5, T0=2, policy=lambda setting: policy)


@pytest.mark.skipif(not confine.status()["refusals_reported"], reason="refusals are not reported on this machine")
def test_a_refusal_caught_while_the_policy_is_built_fails_it():
    """A policy that catches the kernel's refusals in its constructor is not built: the trusted
    side's listener saw them (study.policies.refusals)."""
    from study.simulation.replication import run_replication

    factory = sandbox.ConfinedFactory("evilpol.kernel:CatchesWhenBuilt")
    try:
        with pytest.raises(sandbox.PolicyRefused, match=r"^PolicyRefused: the kernel refused socket \(3 times\), "
                                                        r"\w+ while building the policy; the policy caught"):
            run_replication("A", "caught", 1, T=5, T0=2, policy=factory)
    finally:
        factory.close()


def test_a_task_stores_no_replication_whose_policy_was_refused_after_its_last_answer(monkeypatch):
    """The worker asks ``late_refusal`` when a confined replication is done: one it reports (here
    for each replication of a clean policy) ends that replication as failed, with its message, and
    stores nothing of it."""
    from study.runner.worker import run_batch

    late = "PolicyRefused: the kernel refused socket after the policy's last answer (test)"
    monkeypatch.setattr(sandbox.ConfinedFactory, "late_refusal", lambda self: late)
    (cell,) = runner.make_plan("regret", settings=["A"], methods=["evilpol.kernel:Clean"], reps=2,
                               overrides=TINY).cells
    result = run_batch("regret", cell, [(0, 7), (1, 8)])
    assert [f["error"] for f in result["failures"]] == [late, late]
    assert result["trajectory"].num_rows == 0


@pytest.mark.skipif(not confine.status()["refusals_reported"], reason="refusals are not reported on this machine")
def test_a_refusal_after_the_last_answer_fails_the_replication():
    """A thread the policy starts at its last step goes on making refused calls after the answer:
    the check at the replication's end (``late_refusal``, before its process is ended) names them;
    a clean policy's replication has none.  (Which check sees the first call is a race: the one at
    the last answer may.)"""
    import time

    from study.simulation.replication import run_replication

    clean = sandbox.ConfinedFactory("evilpol.kernel:Clean")
    try:
        run_replication("A", "clean", 1, T=5, T0=2, policy=clean)
        assert clean.processes[0].refusals is not None and clean.late_refusal() is None
    finally:
        clean.close()
    factory = sandbox.ConfinedFactory("evilpol.kernel:RefusesAfterItsLastAnswer", needs=("threads",))
    try:
        try:
            run_replication("A", "late", 1, T=5, T0=2, policy=factory)
        except sandbox.PolicyRefused as exc:
            assert "while select at t=5" in str(exc)
            return
        deadline, late = time.monotonic() + 30, None
        while late is None and time.monotonic() < deadline:
            late = factory.late_refusal()
        assert re.match(r"PolicyRefused: the kernel refused socket( \(\d+ times\))? after the policy's last answer "
                        r"\(a thread or process of its own still ran\); its result is not stored \(the confined "
                        r"process of policy 'evilpol.kernel:RefusesAfterItsLastAnswer'\)$", late), late
    finally:
        factory.close()


def test_without_confinement_user_policies_need_trust(monkeypatch, tmp_path):
    monkeypatch.setattr(confine, "status", lambda: {"available": False, "reason": "no Landlock (test)",
                                                    "landlock_abi": None, "seccomp": None,
                                                    "refusals_reported": False})
    plan = runner.make_plan("regret", settings=["A"], methods=["evilpol.kernel:Clean"], reps=1, overrides=TINY)
    with pytest.raises(ValueError, match="--trust-policy-code"):
        runner.run_study(plan, tmp_path, progress=False, log=quiet)
    assert not any(tmp_path.iterdir())


def test_trust_policy_code_runs_without_the_kernel_and_says_so(monkeypatch):
    """Where the kernel cannot confine, a replication of a user policy is refused, named, unless
    trusted; trusted, it runs through the same channel (audit hooks only)."""
    from study.simulation.replication import run_replication

    monkeypatch.setattr(confine, "status", lambda: {"available": False, "reason": "no Landlock (test)",
                                                    "landlock_abi": None, "seccomp": None,
                                                    "refusals_reported": False})
    refused = sandbox.ConfinedFactory("evilpol.kernel:Clean")
    with pytest.raises(sandbox.PolicyProcessError, match="ConfinementUnavailable.*--trust-policy-code"):
        run_replication("A", "evilpol.kernel:Clean", 3, T=20, T0=8, policy=refused)
    trusted = sandbox.ConfinedFactory("evilpol.kernel:Clean", trust=True)
    try:
        got = run_replication("A", "evilpol.kernel:Clean", 3, T=20, T0=8, policy=trusted)
    finally:
        trusted.close()
    want = run_replication("A", "RB", 3, T=20, T0=8)
    assert np.array_equal(got.trajectory["major"], want.trajectory["major"])


def test_the_command_line_records_the_confinement(ray_session, tmp_path):
    """``jobs/regret.py``'s entry point: a user policy beside RB, with and without
    --trust-policy-code (accepted where the kernel confines too), recorded per run."""
    from study import cli

    args = ["--out", str(tmp_path), "--reps", "1", "--settings", "A", "--methods", "RB", "evilpol.kernel:Clean",
            "--set", "T=20", "--set", "T0=8", "--no-progress"]
    assert cli.main("regret", args) == 0
    assert cli.main("regret", [*args, "--reps", "2", "--trust-policy-code"]) == 0
    runs = storage.read_manifest(tmp_path, "regret")["runs"]
    assert [r["user_code"]["confinement"]["trust_policy_code"] for r in runs] == [False, True]
    assert all(r["user_code"]["confinement"]["kernel"] for r in runs)
    assert all(r["user_code"]["confinement"]["refusals_reported"] == confine.status()["refusals_reported"]
               for r in runs)


def test_a_confined_check_answering_a_pickle_is_refused():
    """The fresh processes that ran user code (check_policy's) answer in JSON: a pickle there is
    refused, unread."""
    import os
    import pickle

    from study.policies import fresh

    read, write = os.pipe()
    data = pickle.dumps([("ok", {"results": []})])
    os.write(write, fresh._HEADER.pack(len(data)) + data)
    os.close(write)
    with pytest.raises(ValueError, match="not JSON"):
        fresh._read(read, as_json=True)
    os.close(read)


def test_every_message_of_the_channel_gives_the_in_process_run():
    """A policy that asks for the debiased estimate in select and update, draws from its generator
    and keeps state from update: confined, its replication equals the same policy in process."""
    from evilpol.kernel import AsksAndUpdates

    from study.simulation.replication import run_replication

    factory = sandbox.ConfinedFactory("evilpol.kernel:AsksAndUpdates")
    try:
        got = run_replication("A", "asks", 3, T=80, T0=24, policy=factory)
    finally:
        factory.close()
    want = run_replication("A", "asks", 3, T=80, T0=24, policy=AsksAndUpdates)
    for column in ("major", "other", "explored", "regret", "rel_error"):
        assert np.array_equal(got.trajectory[column], want.trajectory[column], equal_nan=True), column
    assert np.asarray(got.trajectory["explored"]).any()


def test_a_reused_process_builds_each_replications_policy_anew():
    """ConfinedFactory(reuse=True): replications one after the other in one policy process (the
    policy built anew for each, 'N'), each equal to its run in a process of its own; a policy
    asking for the debiased estimate and updating, in two settings."""
    from study.simulation.replication import run_replication

    reused = sandbox.ConfinedFactory("evilpol.kernel:AsksAndUpdates", reuse=True)
    try:
        got = [run_replication(setting, "asks", seed, T=60, T0=20, policy=reused)
               for setting, seed in (("A", 3), ("B", 4), ("A", 3))]
        assert len(reused.processes) == 1
    finally:
        reused.close()
    for (setting, seed), run in zip((("A", 3), ("B", 4), ("A", 3)), got):
        alone = sandbox.ConfinedFactory("evilpol.kernel:AsksAndUpdates")
        try:
            want = run_replication(setting, "asks", seed, T=60, T0=20, policy=alone)
        finally:
            alone.close()
        for column in ("major", "other", "explored", "regret"):
            assert np.array_equal(run.trajectory[column], want.trajectory[column], equal_nan=True), (setting, column)


def test_a_slow_policy_is_waited_for_not_polled(monkeypatch):
    """The trusted side polls for an answer for at most SPIN_SECONDS; a policy slower than that is
    not polled for after three misses (only every 32nd wait tries again), and its replication is
    RB's, value for value."""
    import os

    from study.simulation.replication import run_replication

    factory = sandbox.ConfinedFactory("evilpol.kernel:Slow")
    polled = []  # the waits during which the trusted side polled (and yielded the CPU)
    real = os.sched_yield
    monkeypatch.setattr(os, "sched_yield", lambda: (polled.append(factory.processes[0].waits if factory.processes
                                                                  else "ready"), real()))
    try:
        got = run_replication("A", "slow", 3, T=40, T0=12, policy=factory)
        waits, misses = factory.processes[0].waits, factory.processes[0].misses
    finally:
        factory.close()
    assert sandbox.SPIN_SECONDS < 0.005 and waits == 41 and misses >= 3  # the ready message and 40 steps
    # idle: {"ready", 2, 3, 32}. Under load an answer can be there when a wait starts (no poll) or
    # come within a poll (the loop descheduled between its write and its wait), which resets the
    # misses and prolongs that polling: the polled waits are then short runs from the first waits
    # and from the 32nd; never all 40
    numeric = sorted(w for w in set(polled) if w != "ready")
    starts = [w for w in numeric if w - 1 not in numeric]
    assert all(w < 8 or 32 <= w < 36 for w in starts) and len(numeric) <= 12, polled
    want = run_replication("A", "RB", 3, T=40, T0=12)
    for column in ("major", "other", "explored", "regret", "rel_error"):
        assert np.array_equal(got.trajectory[column], want.trajectory[column], equal_nan=True), column


def test_the_driver_never_imports_a_user_module(ray_session, tmp_path):
    """A user module's top-level code (here: it sets an environment variable and writes a marker
    file) runs only in confined processes: the driver finds, hashes and records the policy without
    importing it, and its replications equal RB's."""
    import hashlib
    import os
    import sys
    from pathlib import Path

    source = Path(__file__).resolve().parents[1] / "support" / "toplevel_policy.py"
    marker = Path(os.environ.get("TMPDIR") or "/tmp") / ("study-toplevel-" + hashlib.sha1(str(source).encode()).hexdigest()[:12])
    marker.unlink(missing_ok=True)
    os.environ.pop("STUDY_TOPLEVEL_POLICY_RAN", None)
    method = "toplevel_policy:Clean"
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", method], reps=1, overrides=TINY)
    record = plan.fingerprint()["policies"][method]
    assert record["source_sha256"] == hashlib.sha256(
        f"toplevel_policy.py\0{hashlib.sha256(source.read_bytes()).hexdigest()}\n".encode()).hexdigest()
    out = tmp_path / "out"
    assert runner.run_study(plan, out, progress=False, log=quiet).ok
    assert "toplevel_policy" not in sys.modules
    assert "STUDY_TOPLEVEL_POLICY_RAN" not in os.environ and not marker.exists()
    frame = study.load(out, "regret").sort_values(["method", "rep", "t"])
    rb, own = (frame[frame.method == m].reset_index(drop=True) for m in ("RB", method))
    assert len(own) == TINY["T"]
    for column in VALUES:
        assert np.array_equal(rb[column].to_numpy(), own[column].to_numpy()), column
    manifest = storage.read_manifest(out, "regret")
    assert manifest["fingerprint"]["policies"][method]["source_sha256"] == record["source_sha256"]


def test_hostile_policies_by_import_path_through_the_job_script(ray_session, tmp_path):
    """The issue's Done-when, as a user runs it: ``python jobs/regret.py`` (its own embedded Ray)
    with hostile policies named by import path beside RB stores RB's numbers equal value for value
    to a clean run's; ``python -m study.results verify`` finds the parts sound and ``failures``
    names each hostile policy's failure."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from study import cli

    root = Path(__file__).resolve().parents[2]
    common = ["--settings", "A", "--reps", "1", "--set", "T=20", "--set", "T0=8", "--no-progress"]
    assert cli.main("regret", ["--out", str(tmp_path / "clean"), "--methods", "RB", *common]) == 0
    hostile = ["evilpol.kernel:SendsAPickle", "evilpol.kernel:StartsProcesses"]
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=os.pathsep.join([str(root), str(root / "tests" / "support")]))
    env.pop("RAY_ADDRESS", None)
    out = tmp_path / "mixed"
    run = subprocess.run([sys.executable, str(root / "jobs" / "regret.py"), "--out", str(out), "--num-cpus", "2",
                          "--methods", "RB", *hostile, *common], capture_output=True, text=True, timeout=180,
                         env=env, cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]  # stored what it could; the hostile replications failed
    want, got = _rb(tmp_path / "clean"), _rb(out)
    assert len(got) == len(want) == 20
    for column in VALUES:
        assert np.array_equal(got[column].to_numpy(), want[column].to_numpy()), column
    results = [sys.executable, "-m", "study.results"]
    verified = subprocess.run([*results, "verify", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert verified.returncode == 0 and "regret:" in verified.stdout and ": ok" in verified.stdout, verified.stdout
    failures = subprocess.run([*results, "failures", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert failures.returncode == 1, failures.stderr  # 1: there are failures
    for method in hostile:
        assert method in failures.stdout
    assert "ChannelError" in failures.stdout and "PermissionError" in failures.stdout
