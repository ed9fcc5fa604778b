"""One tie convention across every API (study.core.outcomes): ``wins`` counts outright wins, ``ties``
the ties, a tie half a win for each side in the likelihood -- in fit_btl, debias, bootstrap,
Ranker.tell / tell_many and judgments files alike; calls in the old form (a tie already counted as
half a win in ``wins``) are refused with the conversion."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import study
from study.core.likelihood import ComparisonData
from study.core.mle import solve
from study.online import Ranker


def outcomes(seed=0, K=300, m=4):
    rng = np.random.default_rng(seed)
    i = rng.integers(0, 3, K)
    j = (i + 1 + rng.integers(0, 2, K)) % 3
    X = np.column_stack([np.ones(K), rng.normal(0, 1, K)])
    p = expit(np.einsum("kd,kd->k", X, np.array([[0.5, 0.2], [0.0, -0.3], [-0.5, 0.1]])[j]
                        - np.array([[0.5, 0.2], [0.0, -0.3], [-0.5, 0.1]])[i]))
    ties = rng.binomial(m, 0.2, K).astype(float)
    wins = rng.binomial((m - ties).astype(int), p).astype(float)
    return i, j, X, wins, ties, float(m)


def test_every_estimator_counts_a_tie_as_half_a_win():
    i, j, X, wins, ties, m = outcomes()
    theta = study.fit_btl(i, j, X, wins, m, n_items=3, ties=ties)
    # the likelihood's rows: score = outright wins + ties / 2
    expected = solve(ComparisonData.from_rows(i, j, X, wins + ties / 2, np.full(len(i), m), 3), np.zeros((3, 2)))
    np.testing.assert_allclose(theta, expected.theta, atol=1e-10)
    # the arrays, built the Ranker's way, are accepted as they are
    single = study.fit_btl([0, 1, 2, 0], [1, 2, 0, 2], np.ones((4, 1)), [0, 1, 1, 0], 1, n_items=3,
                           ties=[1, 0, 0, 1])
    assert np.all(np.isfinite(single))
    result = study.debias(theta, i, j, X, wins, m, ties=ties, se="sandwich")
    assert result.available
    boot = study.bootstrap(i, j, X, wins, m, n_items=3, ties=ties, reps=5, seed=1)
    np.testing.assert_allclose(boot.theta, theta, atol=1e-10)
    # swapping the sides of every row (j's outright wins become i's) changes nothing
    swapped = study.fit_btl(j, i, X, m - wins - ties, m, n_items=3, ties=ties)
    np.testing.assert_allclose(swapped, theta, atol=1e-10)


@pytest.mark.parametrize("call", ["fit_btl", "debias", "bootstrap"])
def test_calls_in_the_old_form_are_refused_with_the_conversion(call):
    i, j, X, wins, ties, m = outcomes(K=60)
    old = wins + ties / 2  # the old form: a tie already counted as half a win
    assert np.any(old != np.round(old))
    theta = study.fit_btl(i, j, X, wins, m, n_items=3, ties=ties)
    run = {"fit_btl": lambda w, t: study.fit_btl(i, j, X, w, m, n_items=3, ties=t),
           "debias": lambda w, t: study.debias(theta, i, j, X, w, m, ties=t, se="sandwich"),
           "bootstrap": lambda w, t: study.bootstrap(i, j, X, w, m, n_items=3, ties=t, reps=2)}[call]
    with pytest.raises(ValueError, match=r"is not a whole number: wins counts the comparisons j won outright.*"
                                         r"convert with wins=wins - ties / 2, ties=ties"):
        run(old, ties)
    with pytest.raises(ValueError, match=r"is not a whole number"):
        run(old, None)
    # even ties leave whole numbers; the halves then overfill the row
    even = np.array([4.0]), np.array([2.0])
    if call == "fit_btl":
        with pytest.raises(ValueError, match=r"row 0: wins \+ ties = 4 \+ 2 exceeds m = 4.*convert with"):
            study.fit_btl([0], [1], [[1.0]], even[0], 4, n_items=2, ties=even[1])


def test_the_ranker_and_a_judgments_file_count_the_same_way(tmp_path):
    with Ranker(tmp_path / "r.sqlite", n_items=3, dim=1, T=50, seed=1, M=4) as ranker:
        ticket = ranker.ask([1.0])
        with pytest.raises(ValueError, match="a tie is told as ties=1, not as half a win"):
            ranker.tell(ticket, wins=0.5, m=1)
        ranker.tell(ticket, wins=1, m=4, ties=2)
        rows = ranker._read().rows.arrays()
        assert rows[3][0] == 2.0 and rows[5][0] == 2.0  # the row's score (1 + 2/2) and its ties
    from study.leaderboard import read_battles
    frame = pd.DataFrame({"question_id": [1, 1, 1], "model_a": ["x", "x", "y"], "model_b": ["y", "y", "x"],
                          "winner": ["b", "tie", "a"], "context": ["[1.0]"] * 3})
    battles = read_battles(frame)
    np.testing.assert_array_equal(battles.wins, [1, 0, 0])
    np.testing.assert_array_equal(battles.ties, [0, 1, 0])
