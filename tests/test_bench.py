"""The benchmark's timing breakdown accounts for every step (its numbers are not asserted)."""
from study import bench


def test_breakdown_accounts_for_every_step_and_debias_call():
    seconds, steps = bench.breakdown("A", "BT-UCB2", seeds=[1])
    setting = bench.SETTINGS["A"]
    stage1 = sum(steps[r] for r in bench.REGIMES if r.startswith("stage 1"))
    assert stage1 == setting.T0 and steps["stage 2"] == setting.T - setting.T0
    assert steps["debias"] == setting.T  # the UCB index needs the debiased fit at every step
    assert 0 < sum(seconds[r] for r in bench.REGIMES) <= seconds["total"]


def test_batched_chord_iteration_computes_the_same_step():
    loop, batched, diff = bench.chord_batching(replications=3, rows=40, params=12, repeats=2)
    assert diff < 1e-10 and loop > 0 and batched > 0
