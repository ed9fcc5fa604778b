"""run_environment_methods: methods known to choose identically for a first stretch (RB and ERA up
to T0) share its computation, and every result equals a separate run value for value."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.simulation.environment import BTLEnvironment
from study.policies import make_policy
from study.simulation.replication import run_environment, run_environment_methods, shared_prefix


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


def test_engine_batches_group_rb_and_era_and_split_what_is_partly_stored():
    from study.runner import batching
    from study import runner
    from study.runner import worker

    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "ETA", "ERA"], reps=5,
                            overrides={"T": 30, "T0": 10})
    rb, eta, era = plan.cells
    assert batching.cell_groups(plan, shared=True) == [(rb, era), (eta,)]
    assert batching.cell_groups(plan, shared=False) == [(rb,), (eta,), (era,)]
    done = {("A", "RB", rb.M, 1), ("A", "ERA", era.M, 3)}
    batches = list(batching.batches(plan, done, lambda: 100, shared=True))
    grouped = [(cells, [r for r, _ in items]) for cells, items in batches]
    assert grouped[0] == ((rb, era), [0, 2, 4])
    assert (rb, [3]) in grouped and (era, [1]) in grouped and (eta, [0, 1, 2, 3, 4]) in grouped
    keys = {(c.method, r) for cells, reps in grouped for c in worker.as_cells(cells) for r in reps}
    assert len(keys) == 3 * 5 - len(done)


def test_engine_shared_batches_store_the_same_table(ray_session, tmp_path):
    from study import runner
    from study.results import storage

    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "ERA"], reps=3,
                            overrides={"T": 40, "T0": 15})
    shared = runner.run_study(plan, tmp_path / "shared", progress=False)
    alone = runner.run_study(plan, tmp_path / "alone", progress=False, replicate=study.run_replication)
    assert shared.ok and alone.ok and shared.computed == alone.computed == 6
    import pandas.testing as pdt
    pdt.assert_frame_equal(storage.load(tmp_path / "shared", "regret"), storage.load(tmp_path / "alone", "regret"))
