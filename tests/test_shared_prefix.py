"""run_environment_methods: methods known to choose identically for a first stretch (RB and ERA up
to T0) share its computation, and every result equals a separate run value for value."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.environment import BTLEnvironment
from study.policies import make_policy
from study.replication import run_environment, run_environment_methods, shared_prefix


def test_only_rb_and_era_are_known_to_share_a_prefix():
    setting = study.SETTINGS["A"]
    policies = {m: make_policy(m, setting) for m in study.ALL_METHODS}
    assert shared_prefix(policies["RB"], policies["ERA"]) == setting.T0
    for a in study.ALL_METHODS:
        for b in study.ALL_METHODS:
            if a != b and {a, b} != {"RB", "ERA"}:
                assert shared_prefix(policies[a], policies[b]) == 0, (a, b)


@pytest.mark.parametrize("name, methods", [("A", ("ERA", "ETA", "RB")), ("B", ("RB", "ERA", "BT-UCB2"))])
def test_shared_runs_equal_separate_runs(name, methods):
    setting = study.SETTINGS[name].replace(T=120, T0=50, ci_every=20)
    env = BTLEnvironment(setting, 11)
    shared = run_environment_methods(env, methods, setting, seed=11)
    assert list(shared) == list(methods)
    for method in methods:
        alone = run_environment(env, method, setting, seed=11)
        assert shared[method].method == method
        for what in ("trajectory", "intervals"):
            a, b = getattr(alone, what), getattr(shared[method], what)
            assert set(a) == set(b)
            for column in a:
                assert np.array_equal(a[column], b[column]), (method, what, column)
        assert np.array_equal(alone.theta_final, shared[method].theta_final)
