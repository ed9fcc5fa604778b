"""When no MLE exists, say so (issue 18, item 5): separable comparisons are refused with the remedy;
badly scaled contexts are told apart from separability; sizes out of reach are refused with the
estimate; debias refuses a theta off the sum-zero space and names theta's shape.  The separability
check (a linear program) is compared with a direct computation: along the direction it returns the
log-likelihood rises to 0 (every comparison predicted with certainty)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import study


def separating_direction(*args):
    from study.core.separation import separating_direction as direction  # new in issue 18
    return direction(*args)


def comparisons(rng, n=5, rows=400, d=3, m=10, deterministic=False):
    i = rng.integers(0, n, rows)
    j = (i + 1 + rng.integers(0, n - 1, rows)) % n
    X = rng.normal(1.0, 0.5, (rows, d))
    truth = np.array([[-float(k)] * d for k in range(n)])  # item 0 best, then 1, ...: a total order
    u = np.einsum("kd,kd->k", X, truth[j] - truth[i])
    wins = np.where(u > 0, m, 0) if deterministic else rng.binomial(m, 1 / (1 + np.exp(-u)))
    return i, j, X, wins, m, n


def loglik(theta, i, j, X, wins, m):
    s = np.einsum("kd,kd->k", X, theta[j] - theta[i])
    return float(np.sum(wins * s - m * np.logaddexp(0.0, s)))


def test_separable_total_order_is_refused_with_the_remedy():
    """The issue's case: item 0 wins all of its comparisons, the others form a total order."""
    i, j, X, wins, m, n = comparisons(np.random.default_rng(0), deterministic=True)
    with pytest.raises(ValueError, match="does not exist.*separable.*item 0 won all.*ridge=.*radius="):
        study.fit_btl(i, j, X, wins, m, n)
    # the direction is a certificate: no row's margin points against its outcome, so the
    # log-likelihood keeps rising along it (checked directly)
    direction = separating_direction(i, j, X, wins, m, n)
    margins = np.einsum("kd,kd->k", X, direction[j] - direction[i])
    sign = np.where(wins == m, 1.0, -1.0)
    assert np.all(sign * margins >= -1e-9) and np.any(sign * margins > 1e-6)
    values = [loglik(s * direction, i, j, X, wins, m) for s in (1.0, 10.0, 100.0, 1000.0)]
    assert values[0] < values[1] < values[2] < values[3] <= 0.0
    # with a ridge or a radius a finite estimate exists and is returned
    assert np.all(np.isfinite(study.fit_btl(i, j, X, wins, m, n, ridge=1.0)))
    assert np.all(np.isfinite(study.fit_btl(i, j, X, wins, m, n, radius=3.0)))


def test_a_single_item_that_always_wins_is_separable():
    rng = np.random.default_rng(1)
    i, j, X, wins, m, n = comparisons(rng)
    wins = np.where(i == 0, 0, np.where(j == 0, m, wins))  # item 0 never loses: no finite theta_0
    with pytest.raises(ValueError, match="separable"):
        study.fit_btl(i, j, X, wins, m, n)


def test_overlapping_data_are_not_separable_and_fit_as_before():
    i, j, X, wins, m, n = comparisons(np.random.default_rng(2))
    assert separating_direction(i, j, X, wins, m, n) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        theta = study.fit_btl(i, j, X, wins, m, n)
    assert np.allclose(theta.sum(axis=0), 0.0)


def test_a_scale_problem_is_told_apart_from_separability():
    """Contexts scaled by 1e50 are not separable (separability is scale-free): the advice is to
    rescale, not to add a penalty."""
    i, j, X, wins, m, n = comparisons(np.random.default_rng(3))
    with pytest.warns(RuntimeWarning) as record:
        study.fit_btl(i, j, X * 1e50, wins, m, n)
    message = str(record[0].message)
    assert "rescale X" in message and "not separable" in message
    assert separating_direction(i, j, X * 1e50, wins, m, n) is None


@pytest.mark.parametrize("rows, d", [(200_000, 100), (2_000, 3_000)])
def test_fit_and_debias_sizes_out_of_reach_are_refused_with_the_estimate(rows, d):
    i = np.zeros(rows, dtype=int)
    j = np.ones(rows, dtype=int)
    X = np.broadcast_to(np.ones(d), (rows, d))  # no memory: a broadcast view
    wins = np.ones(rows)
    with pytest.raises(ValueError, match=r"fit_btl with .* out of reach.*GiB of memory.*CPU-hours"):
        study.fit_btl(i, j, X, wins, 2, 2, ridge=1.0)
    with pytest.raises(ValueError, match=r"debias with .* out of reach.*GiB"):
        study.debias(np.zeros((2, d)), i, j, X, wins, 2)


def test_debias_refuses_theta_off_the_sum_zero_space():
    i, j, X, wins, m, n = comparisons(np.random.default_rng(4))
    theta = study.fit_btl(i, j, X, wins, m, n)
    reference_item = theta - theta[0]  # another package's fit: item 0 pinned at zero
    with pytest.raises(ValueError, match="do not sum to zero.*theta - theta.mean"):
        study.debias(reference_item, i, j, X, wins, m)
    # re-centred by the user, as the message says: the same intervals as from the sum-zero fit
    a = study.debias(reference_item - reference_item.mean(axis=0), i, j, X, wins, m)
    b = study.debias(theta, i, j, X, wins, m)
    np.testing.assert_allclose(a.theta_d, b.theta_d, atol=1e-9)


def test_debias_names_thetas_shape_when_it_is_transposed():
    i, j, X, wins, m, n = comparisons(np.random.default_rng(5), d=2)
    theta = study.fit_btl(i, j, X, wins, m, n)
    with pytest.raises(ValueError, match=r"theta has shape \(2, 5\).*transposed.*\(5, 2\)"):
        study.debias(theta.T, i, j, X, wins, m)
