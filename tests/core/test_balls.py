"""The two gamma-ball solvers (study.core.balls) compute the same estimate, the exact re-solve
never restarts cold, and the exact null-vector shortcut is exact.

The estimator is the optimisation problem, not an algorithm: wherever the dual method and Newton on
the KKT system (primal-dual active set) both meet the stopping rule from the same start, they
must agree -- the same active balls (multipliers clearly above zero), theta within 10 BALL_TOL gamma (each stops once its ball
slack is within BALL_TOL gamma^2, which moves theta by about that over gamma; measured: at most
2e-5 here), and the KKT conditions checked independently with the explicit Helmert basis."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import study
from study.core import balls, costs, mle
from study.core.contrasts import sum_zero_basis
from study.core.likelihood import ComparisonData
from study.core.systems import reduced_hessian
from study.simulation import replication
from study.simulation.environment import BTLEnvironment


def exact_problems(setting_name, seeds, T=50, T0=50):
    """(data, theta, nu, radius) of every exact opt1 re-solve (active balls identify theta) met on
    replications of RB, from its start (the tie-broken point and multipliers)."""
    captured = []
    original = mle.active_set_newton

    def capture(data, theta, nu, **kw):
        captured.append((copy.deepcopy(data), theta.copy(), np.array(nu), kw["radius"]))
        return original(data, theta, nu, **kw)

    setting = study.SETTINGS[setting_name].replace(T=T, T0=T0, ci_every=0)
    mle.active_set_newton = capture
    try:
        for seed in seeds:
            replication.run_environment(BTLEnvironment(setting, seed), "RB", setting, seed=seed)
    finally:
        mle.active_set_newton = original
    return captured


def kkt(data, theta, nu, radius):
    """(max |Q'(grad L + nu_i theta_i)|, max projected ball slack), with the explicit basis Q."""
    n, d = theta.shape
    gradient = data.gradient(theta) + nu[:, None] * theta
    residual = float(np.abs(sum_zero_basis(n).T @ gradient).max())
    slack = 0.5 * ((theta * theta).sum(axis=1) - radius ** 2)
    return residual, float(np.abs(np.where(nu > 0, slack, np.maximum(slack, 0.0))).max())


def active(nu):
    """The balls with a multiplier clearly above zero (a ball touched with a multiplier of 1e-20 is
    degenerate: active or not, the point is the same)."""
    return nu > 1e-10 * max(float(nu.max()), 1.0)


@pytest.fixture(scope="module")
def problems():
    return exact_problems("A", seeds=(0, 1, 2, 3, 4, 7))


def test_the_two_ball_solvers_agree_on_captured_exact_problems(problems):
    assert len(problems) >= 20, len(problems)
    compared = 0
    for data, theta, nu, radius in problems:
        n = theta.shape[0]
        ball = dict(radius=radius, base_quad=np.zeros(n), abs_tol=mle.DEFAULT_TOL * (1 + data.total_comparisons),
                    feas_tol=mle.BALL_TOL * radius ** 2)
        dual = balls.dual_ascent(data, theta, nu, lin=None, lin_r=None, max_steps=100, max_dual_steps=100, **ball)
        newton = balls.active_set_newton(data, theta, nu, **ball)
        for fit in (dual, newton):
            if fit.converged:  # the stopping rule, checked independently
                residual, gap = kkt(data, fit.theta, fit.nu, radius)
                assert residual <= 10 * ball["abs_tol"] and gap <= ball["feas_tol"] and (fit.nu >= 0).all()
        # compared where the argmin is unique (L plus the multipliers' curvature positive definite at
        # the dual method's point): elsewhere both may stop at different points of a flat argmin
        if dual.converged and newton.converged and mle._unique(data, dual.theta, dual.nu):
            compared += 1
            assert np.array_equal(active(dual.nu), active(newton.nu))
            assert np.abs(dual.theta - newton.theta).max() <= 10 * mle.BALL_TOL * radius
    assert compared >= 0.6 * len(problems), (compared, len(problems))


def test_active_set_newton_converges_where_the_dual_method_stalls():
    """Captured cases (Setting A, seed 7, T0 = 60; at t = 43 and 49 the data identify theta and the
    warm-started dual method does not converge, so solve falls back on Newton on the KKT system;
    the exact re-solves start with it): every point it calls converged meets the KKT conditions
    (checked independently), and where the identification test holds there (the condition for
    keeping it), the reduced Hessian plus the multipliers' curvature is positive definite."""
    setting = study.SETTINGS["A"].replace(T=60, T0=60, ci_every=0)
    seen = []
    original = balls.active_set_newton

    def watch(data, theta, nu, **kw):
        fit = original(data, theta, nu, **kw)
        seen.append((copy.deepcopy(data), fit, kw["radius"]))
        return fit

    mle.active_set_newton = watch
    try:
        replication.run_environment(BTLEnvironment(setting, 7), "RB", setting, seed=7)
    finally:
        mle.active_set_newton = original
    assert seen, "the dual method converged everywhere: the case no longer exercises the fallback"
    converged = [(data, fit, radius) for data, fit, radius in seen if fit.converged]
    assert converged
    unique = 0
    for data, fit, radius in converged:
        residual, gap = kkt(data, fit.theta, fit.nu, radius)
        assert residual <= 10 * mle.DEFAULT_TOL * (1 + data.total_comparisons) and gap <= mle.BALL_TOL * radius ** 2
        if mle._unique(data, fit.theta, fit.nu):  # the test solve applies before keeping such a point,
            unique += 1                            # checked here by eigenvalues
            assert np.linalg.eigvalsh(reduced_hessian(data, data.margins(fit.theta), fit.nu))[0] > 0
    assert unique


def test_an_exact_problem_that_fails_never_restarts_cold(monkeypatch, problems):
    """Issue 27's tail: a failed exact re-solve used to restart from nu = 0 without the tie-break
    term (an unbounded inner problem on near-separable data: hours of Newton steps, then failure)."""
    data, theta, nu, radius = problems[0]
    calls = []

    def failing(data, theta, nu, **kw):
        calls.append(np.array(nu))
        return balls.BallFit(theta, nu, 1, np.inf, False, None)

    monkeypatch.setattr(mle, "dual_ascent", failing)
    monkeypatch.setattr(mle, "active_set_newton", failing)
    with costs.counting() as work:
        fit = mle.solve(data, theta, radius=radius, prox=0.0, multipliers=nu, tol=mle.DEFAULT_TOL,
                        factor_hint=object())
    assert not fit.converged and len(calls) == 2  # the dual method, then Newton on the KKT system; no restart
    assert all(np.array_equal(c, nu) for c in calls)
    assert work["newton_systems"] == 0


def test_work_budget_stops_a_dual_solve(problems):
    data, theta, nu, radius = problems[0]
    n = theta.shape[0]
    with costs.counting() as work:
        fit = balls.dual_ascent(data, theta, np.zeros(n), radius=radius, base_quad=np.zeros(n), lin=None, lin_r=None,
                                abs_tol=mle.DEFAULT_TOL * (1 + data.total_comparisons), feas_tol=1e-300,
                                max_steps=100, max_dual_steps=100, budget=3)
    assert not fit.converged and work["budget_stops"] == 1


@pytest.mark.parametrize("seed", range(3))
def test_null_pair_finds_only_exact_null_vectors(seed):
    """Whenever it names a pair, the reduced Hessian plus the held items' curvature is singular
    (checked by eigenvalues); on random small problems it fires often."""
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(80):
        n, d = int(rng.integers(3, 8)), int(rng.integers(2, 5))
        rows = int(rng.integers(1, n * d + 4))
        data = ComparisonData(n, d, rows)
        for _ in range(rows):
            a, b = rng.choice(n, 2, replace=False)
            data.append(a, b, rng.normal(size=d), rng.integers(0, 6), 5)
        held = rng.random(n) < 0.3
        theta = rng.normal(size=(n, d))
        witness = data.null_pair(held)
        if witness is not None:
            fired += 1
            eigenvalues = np.linalg.eigvalsh(reduced_hessian(data, data.margins(theta), held.astype(float)))
            assert eigenvalues[0] <= 1e-9 * max(eigenvalues[-1], 1.0), (witness, eigenvalues[0])
            i, j = witness
            assert not held[i] and (j == -1 or not held[j])
    assert fired >= 10


def test_null_pair_on_a_constructed_case():
    """Items 0 and 1 (free) are compared on 2 rows with 3-dimensional contexts: some z is orthogonal
    to both, so e_0 (x) z - e_1 (x) z is a null vector whatever the other items' data."""
    rng = np.random.default_rng(1)
    data = ComparisonData(4, 3, 40)
    data.append(0, 2, rng.normal(size=3), 2, 5)
    data.append(1, 3, rng.normal(size=3), 3, 5)
    for _ in range(30):
        data.append(2, 3, rng.normal(size=3), rng.integers(0, 6), 5)
    assert data.null_pair(np.array([False, False, True, True])) == (0, 1)
    assert data.null_pair(np.array([False, True, True, True])) is None  # one free item: no pair
    assert data.null_pair() == (0, -1)  # nothing held: one item whose rows span < d suffices
