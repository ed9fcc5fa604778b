"""Stage 1's exact nearest argmin where the balls bind (study.core.rangekkt): separated rows, whose
margins only the balls stop and where L's slope is ~1e-11 at the estimate.

Checked against closed forms (a separated row's margin at the balls' limit, the free items at the
reference), against an independent minimality check at the separated rows' own scale (SLSQP in item
coordinates on L's change, summed row by row, divided by the separated rows' loss: a margin 0.1 off
changes that by 10%), against the general solver where the problem is well conditioned, and for
independence of the path (the interior-point path and the barrier path give the same point).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from study.core import mle, nearest, rangekkt, rowspace
from study.core.contrasts import to_reduced
from study.core.likelihood import ComparisonData
from study.core.threads import one_blas_thread

DATA = Path(__file__).resolve().parents[1] / "data" / "stage1_problems.npz"


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with one_blas_thread():
        yield


def _answer(data, reference, radius):
    """exact_nearest's answer, asserting that rangekkt computed it (not the general solver)."""
    beta_ref = to_reduced(reference - reference.mean(axis=0)).ravel()
    got = rowspace.nearest_without_balls(data, nearest.design(data), beta_ref, radius,
                                         mle.DEFAULT_TOL * (1.0 + data.total_comparisons))
    assert got is not None
    result = mle.exact_nearest(data, reference, radius=radius, reference=reference)
    assert result.converged
    np.testing.assert_array_equal(result.theta, got[0])
    return result, got


@pytest.mark.parametrize("radius, atol", [(5.0, 1e-9), (10.0, 1e-9), (12.0, 1e-6)])
def test_one_separated_row_closed_form(radius, atol):
    """n = 3: item 0 won all of its comparisons with item 1 (context x).  L falls as the margin
    (theta_1 - theta_0)'x falls, so the exact minimiser has theta_0 = gamma x/|x|, theta_1 = -theta_0 and
    theta_2 = 0, whatever the reference; margin -2 gamma |x|: -14, -28 and -34 here, L's slope 2e-5,
    1e-11 and 3e-14.  At the last the balls' multipliers are 4e-15 and double precision pins theta
    only to ~3e-7 (measured 2.7e-7): the margin is a flat maximum over the balls, so its rounding,
    4e-15 at |u| = 34, leaves sqrt(2 gamma 4e-15 / |x|) of theta undecided."""
    rng = np.random.default_rng(2)
    x = np.array([1.1, 0.9])
    data = ComparisonData.from_rows(np.array([0]), np.array([1]), x[None, :], np.array([0.0]), np.array([20.0]), 3)
    reference = rng.normal(size=(3, 2))
    result, _ = _answer(data, reference, radius)
    unit = x / np.linalg.norm(x)
    np.testing.assert_allclose(result.theta, np.array([radius * unit, -radius * unit, [0.0, 0.0]]), rtol=0, atol=atol)
    assert result.multipliers[0] > 0.0 and result.multipliers[1] > 0.0


def test_separated_rows_and_free_items_closed_form():
    """n = 5: item 1 won all against item 0 along e1, item 2 all against item 3 along e2: those four
    sit at +-gamma e1, +-gamma e2; item 4 is then 0 by the sum (the reference does not move it)."""
    rng = np.random.default_rng(5)
    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    data = ComparisonData.from_rows(np.array([0, 3, 0]), np.array([1, 2, 1]), np.array([e1, e2, e1]),
                                    np.array([7.0, 0.0, 3.0]), np.array([7.0, 9.0, 3.0]), 5)
    reference = rng.normal(size=(5, 2))
    radius = 6.0
    result, _ = _answer(data, reference, radius)
    expected = np.array([-radius * e1, radius * e1, -radius * e2, radius * e2, [0.0, 0.0]])
    np.testing.assert_allclose(result.theta, expected, rtol=0, atol=1e-9)


def test_free_items_take_the_reference():
    """n = 4, d = 2, one separated row between items 0 and 1 along e1, its contexts spanning one
    direction only: items 0 and 1 are held at the balls along e1 but free along e2 (no row sees e2),
    and items 2, 3 are free.  The estimate is the reference's projection onto that set: closed form
    where it lies inside the balls."""
    e1 = np.array([1.0, 0.0])
    data = ComparisonData.from_rows(np.array([0]), np.array([1]), e1[None, :], np.array([5.0]), np.array([5.0]), 4)
    radius = 3.0
    reference = np.array([[0.2, 0.1], [-0.3, 0.4], [0.5, -0.2], [0.1, 0.3]])
    result, _ = _answer(data, reference, radius)
    theta = result.theta
    # items 0 and 1: theta_0 = -theta_1 along e1 at the largest margin the balls allow with their e2 parts
    np.testing.assert_allclose((theta * theta).sum(axis=1)[:2], radius ** 2, rtol=1e-9)
    assert theta[1, 0] > 0.0 > theta[0, 0]
    # sum zero; the exact answer keeps 0 and 1 at the balls with no e2 part (the largest margin), so
    # items 2 and 3 split the rest: nearest the reference with theta_2 + theta_3 = 0
    np.testing.assert_allclose(theta[:2], [[-radius, 0.0], [radius, 0.0]], rtol=0, atol=1e-9)
    half = 0.5 * (reference[2] - reference[3])
    np.testing.assert_allclose(theta[2:], [half, -half], rtol=0, atol=1e-9)


# --- replayed stage-1 problems (tests/data/stage1_problems.npz, see tests/core/stage1_capture.py)

SEPARATED = ("A8", "A15", "A45", "B80")  # a ball binds at the estimate (a separated row, or the balls hold L)
CONDITIONED = ("A15", "A45")  # every positive multiplier >= 1e-5: the general solver's tolerances pin the point


def problem(name):
    with np.load(DATA) as z:
        return {key[len(name) + 1:]: z[key] for key in z.files if key.startswith(name + "_")}


def _data(p):
    return ComparisonData.from_rows(p["a"], p["b"], p["X"], p["wins"], p["m"], int(p["n"]))


def _item_design(p):
    n, d = int(p["n"]), p["X"].shape[1]
    design = np.zeros((len(p["a"]), n * d))
    for k in range(len(p["a"])):
        design[k, p["b"][k] * d:(p["b"][k] + 1) * d] += p["X"][k]
        design[k, p["a"][k] * d:(p["a"][k] + 1) * d] -= p["X"][k]
    return design


def lower_loss_found(p, theta):
    """The largest relative decrease of L below L(theta) SLSQP finds in the balls, at the scale of the
    rows won all one way (their own loss at theta): L's change is summed row by row from the stable
    form (m - w) softplus(u) + w softplus(-u), so a change of 1e-11 is resolved."""
    n, d = int(p["n"]), p["X"].shape[1]
    radius = float(p["radius"])
    design = _item_design(p)
    wins, m = p["wins"], p["m"]
    u0 = design @ theta.ravel()
    s0, f0 = expit(u0), expit(-u0)
    separated = (wins <= 0.0) | (wins >= m)
    scale = max(float(np.sum(wins[separated] * np.logaddexp(0.0, -u0[separated])
                             + (m - wins)[separated] * np.logaddexp(0.0, u0[separated]))), 1e-300)

    def change(z):
        # each row's change of m log(1 + e^u) - w u = (m - w) softplus(u) + w softplus(-u), as
        # softplus(u + h) - softplus(u) = log1p(sigma(u) expm1(h)): exact to its own rounding, where a
        # difference of two rounded losses would carry 1e-16 of each row's O(1) loss
        h = design @ z - u0
        return float(np.sum((m - wins) * np.log1p(s0 * np.expm1(h)) + wins * np.log1p(f0 * np.expm1(-h)))) / scale

    def grad(z):
        u = design @ z
        return design.T @ ((m - wins) * expit(u) - wins * expit(-u)) / scale

    constraints = [{"type": "eq", "fun": lambda z: z.reshape(n, d).sum(axis=0), "jac": lambda z: np.tile(np.eye(d), n)},
                   {"type": "ineq", "fun": lambda z: radius ** 2 - (z.reshape(n, d) ** 2).sum(axis=1),
                    "jac": lambda z: np.kron(np.eye(n), np.ones((1, d))) * -2.0 * z[None, :]}]
    z = minimize(change, theta.ravel(), jac=grad, constraints=constraints, method="SLSQP",
                 options=dict(ftol=1e-14, maxiter=2000)).x
    feasible = ((z.reshape(n, d) ** 2).sum(axis=1) <= radius ** 2 * (1.0 + 2.0 * nearest.FEAS_TOL)).all()
    return -change(z) if feasible else 0.0


def _fit(p):
    data = _data(p)
    return data, mle.exact_nearest(data, p["reference"], radius=float(p["radius"]), reference=p["reference"])


@pytest.mark.parametrize("name", SEPARATED)
def test_replayed_minimality_at_the_separated_rows_scale(name):
    p = problem(name)
    _, result = _fit(p)
    assert result.converged
    assert lower_loss_found(p, result.theta) <= 1e-6


def _general(p, monkeypatch):
    """exact_nearest's general solver on ``p`` (the row-space paths switched off)."""
    with monkeypatch.context() as patch:
        patch.setattr(rowspace, "nearest_without_balls", lambda *args, **kwargs: None)
        return mle.exact_nearest(_data(p), p["reference"], radius=float(p["radius"]), reference=p["reference"])


def test_the_minimality_check_can_fail(monkeypatch):
    """The general solver's answer on A8 (one separated row, margin ~ -25): its KKT tolerance
    admitted a margin 0.1 short of the balls' limit, and the check sees it."""
    p = problem("A8")
    assert lower_loss_found(p, _general(p, monkeypatch).theta) > 1e-3


@pytest.mark.parametrize("name", CONDITIONED)
def test_equals_the_general_solver_where_conditioned(name, monkeypatch):
    p = problem(name)
    _, result = _fit(p)
    general = _general(p, monkeypatch)
    assert general.converged
    assert result.multipliers[result.multipliers > 0].min() >= 1e-5
    np.testing.assert_allclose(result.theta, general.theta, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", SEPARATED)
def test_the_kkt_rule_holds_and_pins_the_point(name):
    """The rule recomputed at the returned point holds; moving the point by 1e-6 along a separated
    or any other margin's direction breaks it."""
    p = problem(name)
    data, result = _fit(p)
    design = nearest.design(data)
    space = rowspace.row_space(data, design)
    beta = to_reduced(result.theta).ravel()
    rule = rangekkt.kkt_rule(space, data, beta, result.multipliers, float(p["radius"]))
    assert rule["holds"], rule
    moved = beta + 1e-6 * space.basis[:, 0]
    assert not rangekkt.kkt_rule(space, data, moved, result.multipliers, float(p["radius"]))["holds"]


@pytest.mark.parametrize("name", SEPARATED)
def test_the_path_does_not_matter(name, monkeypatch):
    """The interior-point path and the barrier path (with its own budgets) reach the same point."""
    p = problem(name)
    _, one = _fit(p)
    monkeypatch.setattr(rangekkt, "_interior", lambda problem, y, feas: (None, None))
    monkeypatch.setattr(rangekkt, "BARRIER_NEWTON", 200)
    _, two = _fit(p)
    assert one.converged and two.converged
    np.testing.assert_allclose(one.theta, two.theta, rtol=0, atol=1e-8)
