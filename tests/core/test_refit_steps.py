"""The pieces that make a refit cheap (issue 37), each against an independent computation: the new
row's exact first step (newton.rank_one_step and its scalar equation), the kept factor held as its
explicit inverse with Sherman-Morrison rows (systems.DenseInverse), the start point of a refit
extended by one row, the polish started from the tie-broken fit's last pass, and the counts the
store keeps as rows arrive (rank bound, comparisons).

Tolerances: the step is the exact minimiser of its model, whose stationarity condition is a sum of
terms of size |grad| (here < 100), so it holds to 1e-9 of that; the inverse and the point are
products of a few dozen terms, to 1e-12 relative.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from study.core import mle, newton
from study.core.contrasts import basis, to_reduced
from study.core.likelihood import ComparisonData
from study.core.newton import Objective, Point
from study.core.systems import DenseInverse, Factor, PrimalFactor, factorize, reduced_hessian


def small_data(n=5, d=3, rows=40, seed=0, m=20.0):
    rng = np.random.default_rng(seed)
    data = ComparisonData(n, d, rows + 5, row_space_rows=0)
    for _ in range(rows):
        a, b = rng.choice(n, 2, replace=False)
        data.append(int(a), int(b), rng.normal(1.0, 0.6, d), float(rng.integers(0, int(m) + 1)), m)
    theta = rng.normal(size=(n, d))
    return data, theta - theta.mean(axis=0), rng


@pytest.mark.parametrize("wins, quad", [(20.0, 1e-3), (0.0, 1e-3), (7.0, 0.5)])
def test_the_new_rows_step_is_the_minimiser_of_its_model(wins, quad):
    """The step solves g_rest + K0 delta + l'(u_row + r'delta) r = 0 (the quadratic model of the other
    terms plus the new row's exact term), whatever the new row's margin does: a row won by one side
    (wins = m or 0) under a tie-break-sized curvature moves its margin by orders of magnitude."""
    data, theta, rng = small_data()
    n, d = theta.shape
    q = np.full(n, quad)
    old_u = data.margins(theta)
    k0 = reduced_hessian(data, old_u, q)  # the Hessian before the new row, at theta
    data.append(0, 3, np.array([1.5, 0.7, 1.2]), wins, 20.0)
    objective = Objective(data, q, None)
    beta = to_reduced(theta).ravel()
    u = objective.margins(beta)
    grad = objective.gradient(beta, u)
    for factor in (Factor(PrimalFactor(k0)), DenseInverse.from_cholesky(PrimalFactor(k0).cho)):
        step, grown = newton.rank_one_step(objective, factor, u, grad, data.t - 1)
        r = data.reduced_row(data.t - 1)
        u_row = float(u[-1])
        rest = grad - (20.0 * expit(u_row) - wins) * r
        margin = u_row + float(r @ step)
        stationarity = rest + k0 @ step + (20.0 * expit(margin) - wins) * r
        assert np.abs(stationarity).max() <= 1e-9 * max(1.0, np.abs(grad).max()), np.abs(stationarity).max()
        # the factor now holds the row at the weight of its new margin
        weight = 20.0 * expit(margin) * (1.0 - expit(margin))
        exact = np.linalg.inv(k0 + weight * np.outer(r, r))
        probe = rng.normal(size=k0.shape[0])
        np.testing.assert_allclose(grown.solve(probe), exact @ probe, rtol=1e-9, atol=1e-9 * np.abs(exact @ probe).max())


def test_the_new_rows_margin_equation_is_solved_to_the_last_bits_at_every_scale():
    """u + c (m sigma(u) - wins) = b for c over ten decades and margins up to hundreds (a safeguard is
    needed: plain Newton from the old margin oscillates when c m sigma'(u) is large)."""
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(5000):
        c, m = 10 ** rng.uniform(-6, 4), float(rng.choice([1.0, 20.0, 50.0]))
        wins = float(rng.integers(0, int(m) + 1))
        b, start = rng.normal(0.0, 40.0), rng.normal(0.0, 20.0)
        u = newton._new_row_margin(b, c, m, wins, start)
        s = expit(u)
        residual = u + c * (m * s - wins) - b
        # f evaluated at the exact root rounds to about eps times its terms' size: ask 1e3 eps of that
        worst = max(worst, abs(residual) / (1.0 + abs(u) + abs(b) + c * (m + wins)))
    assert worst <= 2e-13, worst


def test_a_dense_inverse_with_rows_folded_in_solves_its_system():
    """The kept factor of a small problem becomes K^{-1} explicitly at its first new row (Factor.add),
    then takes rows by Sherman-Morrison up to the rank budget: against a dense inverse, for vectors
    and blocks; past the budget it asks for a refresh (None)."""
    data, theta, rng = small_data(n=6, d=3)
    q = np.full(6, 0.3)
    u = data.margins(theta)
    k = reduced_hessian(data, u, q)
    factor = factorize(data, u, q)
    assert isinstance(factor, Factor)
    for count in range(Factor.max_rank):
        column = rng.normal(size=k.shape[0])
        factor = factor.add(column)
        k = k + np.outer(column, column)
        assert isinstance(factor, DenseInverse) and factor.rank == count + 1
        exact = np.linalg.inv(k)
        block = rng.normal(size=(k.shape[0], 3))
        np.testing.assert_allclose(factor.solve(block), exact @ block, rtol=1e-12, atol=1e-12 * np.abs(exact @ block).max())
        np.testing.assert_allclose(factor.solve(block[:, 0]), exact @ block[:, 0], rtol=1e-12,
                                   atol=1e-12 * np.abs(exact @ block[:, 0]).max())
    assert factor.add(rng.normal(size=k.shape[0])) is None


def test_a_point_extended_by_one_row_equals_a_fresh_pass():
    """The paper-size path (reduced design rows): one new row's margin and gradient term in O(d)."""
    data, theta, rng = small_data()
    beta = to_reduced(theta).ravel()
    u = data.reduced_margins(beta)
    point = Point(beta, u, data.reduced_gradient(u))
    data.append(2, 4, np.array([0.3, -1.1, 0.8]), 13.0, 20.0)
    grown = point.extended(data)
    fresh_u = data.reduced_margins(beta)
    np.testing.assert_allclose(grown.margins, fresh_u, rtol=0, atol=1e-12 * np.abs(fresh_u).max())
    fresh_gradient = data.reduced_gradient(fresh_u)
    np.testing.assert_allclose(grown.loss_gradient, fresh_gradient, rtol=0, atol=1e-12 * np.abs(fresh_gradient).max() * data.t)
    q = basis(5)
    assert math.isclose(float(grown.margins[-1]), float(np.kron(q[4] - q[2], [0.3, -1.1, 0.8]) @ beta), abs_tol=1e-12)


def test_the_polish_from_the_tie_broken_fits_last_pass_equals_the_polish_without_it():
    """_polish with the tie-broken fit's Point (no first pass) gives the same estimate, residual and
    end point as the polish that computes its first pass itself."""
    data, theta, _ = small_data(rows=30)
    n = theta.shape[0]
    prox = mle.TIE_BREAK_WEIGHT * (1.0 + data.total_comparisons) / n
    objective = Objective(data, np.full(n, prox), prox * theta)
    tol = mle.DEFAULT_TOL * (1.0 + data.total_comparisons)
    fitted, _, _, ok, factor, _, point = newton.newton(objective, theta, tol, 100)
    assert ok and point is not None
    with_point = mle._polish(data, fitted, 0.0, factor, tol, start=point)
    without = mle._polish(data, fitted, 0.0, factor, tol)
    np.testing.assert_allclose(with_point[0], without[0], rtol=0, atol=1e-12)
    assert with_point[1] == pytest.approx(without[1], rel=1e-6, abs=1e-3 * tol)
    end = with_point[2]  # the end point is a pass at the returned estimate: the next refit's start
    np.testing.assert_allclose(end.margins, data.reduced_margins(end.beta), rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_reduced(with_point[0]).ravel(), end.beta, rtol=0, atol=1e-12)


def test_the_rank_bound_and_comparisons_are_counted_as_rows_arrive():
    data, _, rng = small_data(n=7, d=4, rows=60)
    counts = np.bincount(data.edge_id[: data.t], minlength=len(data.edge_lo))
    assert data.rank_bound() == int(np.minimum(counts, data.dim).sum())
    assert data.total_comparisons == float(data.m[: data.t].sum())
