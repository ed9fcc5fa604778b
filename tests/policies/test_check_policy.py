"""``study.check_policy``: every built-in policy passes; a policy that breaks the contract fails the
check named for what it breaks (and only that one, or checks skipped because of it)."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import study
from study.policies import argmax_playable, uniform_neighbour
from study.policies.checks import CHECKS

REPO = Path(__file__).resolve().parents[2]


def test_the_example_policy_passes(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    assert study.check_policy("examples.my_policy:Boltzmann").passed


@pytest.mark.parametrize("method", study.ALL_METHODS)
def test_every_builtin_policy_passes(method):
    report = study.check_policy(method)
    assert report.passed and [r.status for r in report.results] == ["passed"] * len(CHECKS)
    assert [r.name for r in report.results] == list(CHECKS)


class Greedy:
    def __init__(self, setting):
        pass

    def select(self, step):
        major = argmax_playable(step, step.theta @ step.x)
        return study.Choice(major, uniform_neighbour(step, major), False)


class ScalesTheta(Greedy):
    """Flips step.theta writeable and scales it: without protection this changes its own run
    (regret 0.378 -> 0.405 on A at T = 100, seed 3, in the issue)."""

    def select(self, step):
        theta = step.theta
        theta.flags.writeable = True
        theta *= 1.5
        return super().select(step)


class WritesReadOnly(Greedy):
    def select(self, step):
        step.theta[0, 0] = 1.0  # raises: the array is read-only
        return super().select(step)


class FlipsAdjacency(Greedy):
    def select(self, step):
        adjacency = step.graph.adjacency
        adjacency.flags.writeable = True
        adjacency[:] = True
        return super().select(step)


class WritesInUpdate(Greedy):
    def update(self, step, choice, wins):
        x = step.x
        x.flags.writeable = True
        x[:] = 0.0


class NonEdge(Greedy):
    def select(self, step):
        adjacency = step.graph.adjacency
        a, b = next((a, b) for a in range(len(adjacency)) for b in range(len(adjacency))
                    if a != b and not adjacency[a, b])
        return study.Choice(a, b, False)


class GlobalRandom(Greedy):
    def select(self, step):
        a, b = step.graph.edges[np.random.randint(len(step.graph.edges))]
        return study.Choice(int(a), int(b), False)


class NotAChoice(Greedy):
    def select(self, step):
        return "edge 0-1"


class IgnoresIsolatedItems(Greedy):
    """argmax over every item, isolated or not: fails only where an item has no neighbour."""

    def select(self, step):
        major = int(np.argmax(step.theta @ step.x))
        return study.Choice(major, uniform_neighbour(step, major), False)


class FailsUnderGreedyWarmup(Greedy):
    def select(self, step):
        if step.setting.warmup == "greedy":
            raise RuntimeError("no rule for warm-up 'greedy'")
        return super().select(step)


class Slow(Greedy):
    def select(self, step):
        time.sleep(0.01)
        return super().select(step)


class Unpicklable:
    """A factory holding a lock: neither pickle nor cloudpickle can ship it to a Ray worker."""

    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, setting):
        return Greedy(setting)


# A writer is caught either way: its write reaches the copies it was handed (compared afterwards), or,
# where the loop's protection makes the arrays impossible to flip back to writeable, the write raises.
RAISED = "read-only array"


@pytest.mark.parametrize("factory, check, detail", [
    (ScalesTheta, "no_writes", ("wrote into step.theta", RAISED)),
    (WritesReadOnly, "no_writes", RAISED),
    (FlipsAdjacency, "no_writes", ("wrote into graph.adjacency", RAISED)),
    (WritesInUpdate, "no_writes", ("update at t=1 wrote into step.x", RAISED)),
    (NonEdge, "only_edges", "not an edge of the graph"),
    (GlobalRandom, "deterministic", "two runs with the same seed"),
    (NotAChoice, "returns_a_choice", "returned 'edge 0-1'"),
    (IgnoresIsolatedItems, "disconnected_graph", "'graph': 'raw'"),
    (FailsUnderGreedyWarmup, "valid_before_phi", "no rule for warm-up 'greedy'"),
    (Unpicklable(), "picklable", ""),
])
def test_a_broken_policy_fails_the_check_named_for_it(factory, check, detail):
    report = study.check_policy(factory, raise_on_failure=False)
    assert check in report.failed
    assert any(d in report[check].detail for d in ((detail,) if isinstance(detail, str) else detail))
    # nothing else fails, except 'runs' when the first run cannot finish (the other checks are then skipped)
    assert set(report.failed) - {check, "runs"} == set()
    with pytest.raises(study.PolicyCheckError, match=check) as raised:
        study.check_policy(factory)
    assert isinstance(raised.value, AssertionError) and raised.value.report.failed == report.failed


def test_stopped_runs_skip_the_checks_that_need_them_and_time_is_checked():
    report = study.check_policy(NonEdge, raise_on_failure=False)
    assert report.failed == ["runs", "only_edges"]
    assert {r.status for r in report.results if r.name not in ("runs", "returns_a_choice", "only_edges",
                                                               "no_writes")} == {"skipped"}
    slow = study.check_policy(Slow, time_limit=0.2, raise_on_failure=False)  # 60 steps sleep >= 0.6 s
    assert slow.failed == ["finishes_in_time"] and "took" in slow["finishes_in_time"].detail
    assert "check_policy(Slow)" in str(slow) and "failed  finishes_in_time" in str(slow)
    with pytest.raises(ValueError, match="time_limit"):
        study.check_policy(Greedy, time_limit=0)
    with pytest.raises(ValueError, match="unknown method"):
        study.check_policy("NoSuchMethod")


def test_the_guard_hands_copies_so_a_writer_cannot_change_the_run_checking_it():
    from study.policies.checks import _Guard, _Record

    record = _Record()
    plain = study.run_replication("A", "guarded", 3, T=60, T0=24, ci_every=10, policy=Greedy)
    try:
        guarded = study.run_replication("A", "guarded", 3, T=60, T0=24, ci_every=10,
                                        policy=lambda setting: _Guard(ScalesTheta(setting), record))
    except ValueError:  # the Step's arrays cannot be flipped back to writeable: the write raised
        assert RAISED in record.violations["no_writes"]
        return
    assert "wrote into step.theta" in record.violations["no_writes"]
    for column in ("major", "other", "regret", "rel_error"):
        assert np.array_equal(plain.trajectory[column], guarded.trajectory[column])
    assert np.array_equal(plain.theta_final, guarded.theta_final)
