"""Sandwich standard errors on the replays: the uncertainty-aware diagrams of a replication can use
them (``diagram_panels(..., se="sandwich")``, ``jobs/llm_ranking.py --se sandwich``), computed from
the replication's own rows with the ties its draws contained."""
import numpy as np

import study
from study.llm import runs
from study.llm.byo import read_byo
from study.simulation.replication import run_environment
from test_llm_byo import frame


def test_sandwich_diagram_panels_use_the_replications_rows_and_ties(tmp_path):
    path = tmp_path / "judgments.csv"
    frame().to_csv(path, index=False)
    replay = runs.Replay("byo", read_byo(path))
    setting = runs._setting("byo", replay.byo.environment(0, T=1), 300, 100, 3)
    times = (150, 300)
    model = runs.diagram_panels(4, setting, times=times, replay=replay)
    robust = runs.diagram_panels(4, setting, times=times, replay=replay, se="sandwich")
    for t in times:
        np.testing.assert_array_equal(model[0][t], robust[0][t])  # the same replication
        assert model[1][t] is not None and robust[1][t] is not None
        np.testing.assert_array_equal(model[1][t][0], robust[1][t][0])  # the same debiased estimate
    # the rows: the replication's choices with the replay's own outcomes, ties told apart
    env = replay.environment(setting, 4)
    result = run_environment(env, "RB", setting, snapshot_times=times)
    i, j, X, score, m, ties = runs._told_rows(env, result, 300)
    np.testing.assert_array_equal(score, [env.compare(t, a, b) for t, (a, b) in enumerate(zip(i, j), start=1)])
    assert ties.sum() > 30 and np.all(m == 3)
    theta, _ = result.snapshots[300]
    expected = study.debias(theta, i, j, X, score - ties / 2, m, ties=ties, se="sandwich")  # outright wins
    np.testing.assert_allclose(robust[1][300][1], expected.phi11, rtol=1e-9, atol=1e-14)
    # a sixth of the judgments are ties: the robust variances are smaller on the whole
    assert np.trace(robust[1][300][1]) < np.trace(model[1][300][1])
