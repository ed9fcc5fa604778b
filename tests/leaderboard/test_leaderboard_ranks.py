"""Simultaneous rank intervals (study.leaderboard.ranks; Mogstad, Romano, Shaikh & Wilhelm 2024).

The guarantee -- all models' true ranks inside their intervals at once with probability >= 0.95 --
is checked in a seeded simulation through the whole leaderboard (fit, covariance, critical value):
600 data sets of 6 models, every pair compared 60 times.  With all six scores equal (the least
favourable case: every rank is 1 and any separated pair is an error) the coverage is 0.95 up to
Monte Carlo error, SE sqrt(0.95 x 0.05 / 600) = 0.0089: it must lie within 3 SE of 0.95 (a marginal
z of 1.96 per pair instead of the max-|t| critical value covers at about 0.6; an interval twice as
wide at about 1.0).  With distinct and tied scores it must be at least 0.95 - 3 SE.
"""
import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from study.leaderboard import Battles, leaderboard, rank_intervals

REPS = 600
SE = np.sqrt(0.95 * 0.05 / REPS)


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def simulated(truth, rng, per_pair=60):
    n = len(truth)
    first, second = np.triu_indices(n, 1)
    p = 1 / (1 + np.exp(-(truth[second] - truth[first])))
    wins = rng.binomial(per_pair, p).astype(float)
    return Battles(models=[f"m{k}" for k in range(n)], i=first, j=second, wins=wins, ties=np.zeros(len(first)),
                   m=np.full(len(first), float(per_pair)), contexts=np.ones((1, 1)),
                   context_of_row=np.zeros(len(first), dtype=np.intp), context_names=["1"], source="simulated")


def coverage(truth, seed):
    rng = np.random.default_rng(seed)
    true_rank = 1 + (truth[None, :] > truth[:, None]).sum(axis=1)  # tied models share the best rank
    covered = []
    for rep in range(REPS):
        board = leaderboard(simulated(truth, rng), se="model", draws=2000, seed=rep)
        table = board.table().set_index("model").loc[board.models]
        covered.append(bool(np.all((table.rank_lower.to_numpy() <= true_rank)
                                   & (true_rank <= table.rank_upper.to_numpy()))))
    return np.mean(covered)


def test_simultaneous_coverage_is_exact_in_the_least_favourable_case():
    assert abs(coverage(np.zeros(6), seed=1) - 0.95) <= 3 * SE


def test_simultaneous_coverage_holds_with_distinct_and_tied_scores():
    assert coverage(np.array([0.8, 0.8, 0.35, 0.0, 0.0, -0.6]), seed=2) >= 0.95 - 3 * SE


def test_rank_intervals_on_clear_and_on_no_evidence():
    root = 0.01 * np.eye(5)  # independent scores, SE 0.01
    clear = rank_intervals(np.array([4.0, 3.0, 2.0, 1.0, 0.0]), root, draws=2000)
    np.testing.assert_array_equal(clear.lower, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(clear.upper, [1, 2, 3, 4, 5])
    none = rank_intervals(np.zeros(5), root, draws=2000)
    np.testing.assert_array_equal(none.lower, [1] * 5)
    np.testing.assert_array_equal(none.upper, [5] * 5)
    # the critical value is the max-|t| quantile: between the marginal z and Bonferroni over 10 pairs
    assert 1.96 < none.critical < 2.81


def test_the_step_down_separates_at_least_what_one_step_does_and_contains_the_point_ranks():
    rng = np.random.default_rng(3)
    scores = np.sort(rng.normal(0, 0.05, 12))[::-1]
    root = 0.01 * rng.normal(size=(11, 12))
    one = rank_intervals(scores, root, stepdown=False, draws=4000)
    down = rank_intervals(scores, root, draws=4000)
    assert np.all(down.better >= one.better) and down.critical <= one.critical and down.better.sum() > one.better.sum()
    # a model declared better has the higher score: the interval holds the rank by score
    assert np.all(down.lower <= np.arange(1, 13)) and np.all(np.arange(1, 13) <= down.upper)


def test_the_table_shows_the_rank_intervals_of_the_same_covariance():
    frame = pd.DataFrame({"model_a": ["a", "b", "c", "a"] * 40, "model_b": ["b", "c", "a", "c"] * 40,
                          "winner": ["model_a", "tie", "model_b", "model_b"] * 40})
    board = leaderboard(frame, se="sandwich")
    table = board.table()
    x = board.default_context
    root = board.covariance_root(x)
    np.testing.assert_allclose(table.se.to_numpy(), np.sqrt((root ** 2).sum(axis=0))[
        [board.models.index(m) for m in table.model]], rtol=1e-12)
    np.testing.assert_allclose(table.se.to_numpy(), np.sqrt(board.result.spread(x))[
        [board.models.index(m) for m in table.model]], rtol=1e-10)
