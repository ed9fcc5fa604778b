"""The top-k stopping rule against a brute-force computation from the explicit Phi_11 (the online
ranker's use of it: tests/online/test_online_anytime.py)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import study
from study.core import confseq
from study.core.stopping import first_separation, separation


def _result(seed=0, rows=1500, n=4, d=2, gaps=(1.5, 0.5, 0.0, -0.6)):
    rng = np.random.default_rng(seed)
    truth = np.zeros((n, d))
    truth[:, 0] = gaps
    truth[:, 1] = rng.normal(0, 0.3, n)
    truth -= truth.mean(axis=0)
    i = rng.integers(0, n, rows)
    j = (i + 1 + rng.integers(0, n - 1, rows)) % n
    X = np.column_stack([np.ones(rows), rng.normal(0, 1, rows)])
    wins = rng.binomial(3, 1 / (1 + np.exp(-np.einsum("kd,kd->k", X, truth[j] - truth[i]))))
    theta = study.fit_btl(i, j, X, wins, 3, n_items=n)
    return study.debias(theta, i, j, X, wins, 3), truth


def _brute_force(result, x, top, level, factor_of):
    """The rule from the explicit (nd x nd) Phi_11 and the explicit contrast vectors."""
    n, d = result.theta_d.shape
    score = result.theta_d @ x
    order = np.argsort(-score, kind="stable")
    pairs = [(i, j) for i in order[:top] for j in order[top:]]
    pair_level = 1 - (1 - level) / len(pairs)
    lows = []
    for i, j in pairs:
        a = np.zeros((n, d))
        a[i], a[j] = x, -x
        sd = np.sqrt(a.ravel() @ result.phi11 @ a.ravel())
        lows.append(score[i] - score[j] - factor_of(pair_level) * sd)
    return min(lows) > 0, min(lows), pair_level


@pytest.mark.parametrize("top", [1, 2])
@pytest.mark.parametrize("anytime", [False, True])
def test_separation_matches_a_brute_force_computation(top, anytime):
    result, _ = _result()
    x = np.array([1.0, 0.3])
    tightest = 2 * result.comparisons
    factor_of = ((lambda lv: confseq.cs_factor(result.comparisons, tightest, lv)) if anytime
                 else (lambda lv: norm.ppf(1 - (1 - lv) / 2)))
    decided, margin, pair_level = _brute_force(result, x, top, 0.95, factor_of)
    verdict = separation(result, x, top=top, level=0.95, anytime=anytime, tightest_at=tightest)
    assert verdict.decided == decided and verdict.margin == pytest.approx(margin, rel=1e-9, abs=1e-12)
    assert verdict.pair_level == pytest.approx(pair_level) == 1 - 0.05 / (top * (4 - top))
    assert len(verdict.top) == top and verdict.anytime == anytime


def test_sequences_decide_later_than_fixed_time_intervals():
    """The same data: the sequence's margin is smaller (its intervals are wider); at the horizon
    where it is tightest the width ratio is g(eta*) / z at the pair level."""
    result, truth = _result()
    x = np.array([1.0, 0.0])
    fixed = separation(result, x, anytime=False)
    anytime = separation(result, x, anytime=True, tightest_at=result.comparisons)
    assert fixed.top == anytime.top == (int(np.argmax(truth @ x)),)
    assert anytime.margin < fixed.margin


def test_first_separation_is_the_first_decided_look():
    looks = []
    rng = np.random.default_rng(3)
    for rows in (30, 100, 300, 1000, 3000):
        looks.append((rows, _result(seed=int(rng.integers(1 << 30)), rows=rows)[0]))
    x = np.array([1.0, 0.0])
    verdicts = [separation(r, x, anytime=True, tightest_at=9000).decided for _, r in looks]
    t, verdict = first_separation(looks, x, anytime=True, tightest_at=9000)
    assert any(verdicts) and t == looks[verdicts.index(True)][0] and verdict.decided
    none, last = first_separation(looks[:1], x, anytime=True, tightest_at=9000)
    assert none is None and not last.decided
    assert first_separation([], x, tightest_at=10) == (None, None)


def test_separation_refusals():
    result, _ = _result()
    with pytest.raises(ValueError, match="top"):
        separation(result, np.ones(2), top=4, tightest_at=10)
    with pytest.raises(ValueError, match="x"):
        separation(result, np.ones(3), tightest_at=10)
    with pytest.raises(ValueError, match="tightest_at is required"):
        separation(result, np.ones(2))
