"""``check_policy``'s verdict on a user policy is the trusted side's: a policy that forges the check
suite's report in its own process -- by patching the suite there, or by writing a report of its own
on the suite's channel -- still fails the checks the calling process judges from what came back
through the policy's channel (study.policies.verdict)."""
from __future__ import annotations

import os
import sys

import pytest

import study
from study.policies import checks, confine, fresh
from study.policies.checks import CHECKS
from study.policies.verdict import DETERMINISTIC, JUDGED, SELF_REPORTED
from test_check_policy import (  # a non-edge once Phi exists; np.random's edges; a module-level cache
    FirstReplicationWins, GlobalRandom, NonEdgeOncePhiExists)


class PatchesTheChecks(NonEdgeOncePhiExists):
    """When built, makes the check suite of its process report every check as passed."""

    def __init__(self, setting):
        from study.policies import checks as suite_module
        from study.policies.guard import Record

        def passed(suite, name, *args, **kwargs):
            suite.results[name] = suite_module.CheckResult(name, "passed")

        def scenario(suite, name, runs, keep=None):
            passed(suite, name)
            return Record()

        suite_module._Suite.set = suite_module._Suite.fail_once = passed
        suite_module._Suite.guarded_scenario = scenario


class PatchesTheChecksAndDrawsGlobally(PatchesTheChecks):
    """Draws its edges from numpy's global generator, and reports every check as passed."""

    select = GlobalRandom.select


FORGED = {"results": [[name, "passed", ""] for name in CHECKS], "again": None, "second": None}


class WritesAForgedReport(NonEdgeOncePhiExists):
    """In the suite's process, writes a report of 14 passed checks on every pipe it may write to,
    in the suite's own format, and ends the process before the suite can answer."""

    def __init__(self, setting):
        import fcntl
        import stat
        here = sys.modules.get("study.policies.fresh")
        if here is None or not here._CONFINED:  # a replication's process: answer through the channel
            return
        for fd in range(3, 256):
            try:
                if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                    continue
                if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                    here._write(fd, (("ok", FORGED),), True)
            except OSError:
                continue
        os._exit(0)


class PatchesTheChecksAndCatchesRefusals(PatchesTheChecks):
    """Reports every check as passed; at each step, hooks off, tries a socket and catches the
    kernel's refusal."""

    def select(self, step):
        import socket

        from evilpol.kernel import hooks_off
        hooks_off()
        try:
            socket.socket()
        except OSError:
            pass
        return super().select(step)


class PatchesTheChecksAndKeepsState(FirstReplicationWins):
    """Keeps the first context it sees in a module-level dict across replications, and reports
    every check as passed."""

    def __init__(self, setting):
        super().__init__(setting)
        PatchesTheChecks.__init__(self, setting)


def _reported(factory) -> dict:
    """What the suite's own (confined) process reports for ``factory``, alone: the self-report."""
    job = [("suite", "checked-policy", 3, 10.0, factory.__qualname__)]
    ((status, value),) = fresh.FreshRuns(fresh.dumps(factory), checks._in_confinement, job, 300.0,
                                         confined={"needs": [], "hidden": []}).outcomes()
    assert status == "ok", value
    return {name: status_ for name, status_, _ in value["results"]}


def test_a_policy_that_patches_the_suite_in_its_process_still_fails():
    forged = _reported(PatchesTheChecks)
    assert set(forged.values()) == {"passed"} and len(forged) == len(CHECKS) - 1  # shared_state: the caller's
    report = study.check_policy(PatchesTheChecks, raise_on_failure=False)
    assert {"only_edges", "valid_with_phi"} <= set(report.failed), str(report)
    assert "not an edge of the graph" in report["only_edges"].detail
    assert not report.passed and report.self_reported == SELF_REPORTED
    assert "self-reported (judged in the policy's process only): no_writes" in str(report)
    honest = study.check_policy(NonEdgeOncePhiExists, raise_on_failure=False)  # the same rule, unforged
    assert set(honest.failed) <= set(report.failed)


def test_a_policy_that_draws_from_the_global_generator_fails_deterministic_here():
    """different_draws is self-reported, but each run's process here has global generators seeded
    differently: a policy drawing from them chooses differently, and deterministic fails."""
    assert _reported(PatchesTheChecksAndDrawsGlobally) == {name: "passed" for name in CHECKS if name != "shared_state"}
    report = study.check_policy(PatchesTheChecksAndDrawsGlobally, raise_on_failure=False)
    assert "deterministic" in report.failed and report["deterministic"].detail.endswith(DETERMINISTIC), str(report)
    assert "different_draws" not in report.failed  # forged: it is self-reported, and the report says so
    assert "different_draws" in report.self_reported


@pytest.mark.skipif(not confine.status()["refusals_reported"], reason="refusals are not reported on this machine")
def test_a_kernel_refusal_the_policy_catches_fails_no_forbidden_calls_here():
    """no_forbidden_calls is self-reported for the audit hook's refusals, but a call the kernel
    refuses is seen by this side's listener even where the policy catches it and forges the rest."""
    report = study.check_policy(PatchesTheChecksAndCatchesRefusals, raise_on_failure=False)
    assert "no_forbidden_calls" in report.failed, str(report)
    assert report["no_forbidden_calls"].detail.startswith("PolicyRefused: the kernel refused socket while select at t=")


def test_state_kept_across_replications_fails_shared_state_here_though_forged():
    """shared_state is judged here: the seeds' runs one after the other in one confined process
    (the policy built anew for each, through the channel) against each run alone."""
    assert _reported(PatchesTheChecksAndKeepsState) == {name: "passed" for name in CHECKS if name != "shared_state"}
    report = study.check_policy(PatchesTheChecksAndKeepsState, raise_on_failure=False)
    assert set(report.failed) == {"shared_state"}, str(report)
    assert "after the other seed's run in one confined process than alone" in report["shared_state"].detail
    assert "shared_state" not in report.self_reported


def test_a_forged_report_on_the_suites_channel_is_not_the_verdict():
    assert _reported(WritesAForgedReport) == {name: "passed" for name in CHECKS}  # the forgery is accepted there
    report = study.check_policy(WritesAForgedReport, raise_on_failure=False)
    assert {"only_edges", "valid_with_phi"} <= set(report.failed), str(report)
    assert "not an edge of the graph" in report["only_edges"].detail
    assert report["shared_state"].status == "skipped"  # its in-process runs were not reported


def test_the_checks_are_split_between_judged_and_self_reported():
    assert sorted(JUDGED + SELF_REPORTED) == sorted(CHECKS) and not set(JUDGED) & set(SELF_REPORTED)
    assert study.check_policy("RB").self_reported == ()  # a built-in: the whole suite ran in this process


def test_a_refusal_after_the_last_answer_fails_no_forbidden_calls_here(monkeypatch):
    """What the listener holds when a run is done (a declared thread's call after the policy's last
    answer: ConfinedFactory.late_refusal, tested in tests/runner/test_confinement.py) fails
    no_forbidden_calls: here every run reports one, for a policy that passes the rest."""
    from study.policies import sandbox
    from test_check_policy import Greedy

    late = ("PolicyRefused: the kernel refused socket after the policy's last answer (a thread or process of its "
            "own still ran); its result is not stored (the confined process of policy 'greedy')")
    monkeypatch.setattr(sandbox.ConfinedFactory, "late_refusal", lambda self: late)
    report = study.check_policy(Greedy, raise_on_failure=False)
    assert report.failed == ["no_forbidden_calls"], str(report)
    assert report["no_forbidden_calls"].detail.startswith("PolicyRefused: the kernel refused socket after the policy's "
                                                          "last answer (a thread or process of its own still ran)")
