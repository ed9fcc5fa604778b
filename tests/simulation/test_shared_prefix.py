"""run_environment_methods: methods known to choose identically for a first stretch (RB and ERA up
to T0) share its computation, and every result equals a separate run value for value."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.policies import make_policy
from study.simulation.environment import BTLEnvironment
from study.simulation.replication import (run_environment, run_environment_methods, shared_prefix,
                                          shares_until_phi)


def test_only_rb_and_era_are_known_to_share_a_prefix():
    setting = study.SETTINGS["A"]
    policies = {m: make_policy(m, setting) for m in study.ALL_METHODS}
    assert shared_prefix(policies["RB"], policies["ERA"]) == setting.T0
    for a in study.ALL_METHODS:
        for b in study.ALL_METHODS:
            if a != b and {a, b} != {"RB", "ERA"}:
                assert shared_prefix(policies[a], policies[b]) == 0, (a, b)


def test_ucb_policies_with_the_greedy_warmup_share_the_greedy_run_until_phi():
    setting = study.SETTINGS["A"]
    policies = {m: make_policy(m, setting) for m in study.ALL_METHODS}
    pairs = {(a, b) for a in study.ALL_METHODS for b in study.ALL_METHODS
             if a != b and shares_until_phi(policies[a], policies[b])}
    assert pairs == {("RB", "BT-UCB2"), ("BT-UCB2", "RB"), ("ETA", "BT-UCB1"), ("BT-UCB1", "ETA")}
    random_warmup = setting.replace(warmup="random")
    assert not shares_until_phi(make_policy("RB", random_warmup), make_policy("BT-UCB2", random_warmup))


@pytest.mark.parametrize("name, methods, overrides", [
    ("A", ("ERA", "ETA", "RB"), {}),
    ("B", ("RB", "ERA", "BT-UCB2"), {}),
    ("A", ("RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2"), {}),
    ("B", ("BT-UCB2", "RB", "BT-UCB1", "ETA"), {"M": 5}),  # the Phi-asking policy leads
    ("A", ("RB", "BT-UCB2"), {"graph": "raw", "p": 0.1}),  # Phi never available: forked at T
    ("B", ("ETA", "BT-UCB1"), {"T": 30, "T0": 10}),  # T ends before Phi
])
def test_shared_runs_equal_separate_runs(name, methods, overrides):
    setting = study.SETTINGS[name].replace(**{"T": 120, "T0": 50, "ci_every": 20, **overrides})
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
    five = runner.make_plan("regret", settings=["A"], reps=2, overrides={"T": 30, "T0": 10})
    assert [tuple(c.method for c in g) for g in batching.cell_groups(five, shared=True)] == [
        ("RB", "ERA", "BT-UCB2"), ("ETA", "BT-UCB1")]
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


def test_a_forked_run_records_its_shared_steps_and_the_same_work_as_alone():
    """The cost of a replication that continued another's run (ERA from RB at T0) counts the shared
    prefix (``shared_steps``), so its record is the run's cost as if alone: the same work counts."""
    setting = study.SETTINGS["A"].replace(T=60, T0=24, ci_every=0)
    env = BTLEnvironment(setting, 3)
    shared = run_environment_methods(env, ("RB", "ERA"), setting, seed=3)
    alone = run_environment(env, "ERA", setting, seed=3)
    assert shared["RB"].cost["shared_steps"] == 0 and shared["ERA"].cost["shared_steps"] == setting.T0
    for key in ("newton_systems", "factorisations", "dual_steps", "steps_tie_break", "steps_stage2"):
        assert shared["ERA"].cost[key] == alone.cost[key], key
    assert sum(alone.cost[f"steps_{r}"] for r in ("tie_break", "exact_balls", "identified", "stage2")) == setting.T
    assert alone.cost["cpu_seconds"] > 0 and alone.cost["slowest_refit_t"] >= 1
