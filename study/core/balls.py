"""The gamma-ball constraints of stage 1 (paper label ``opt1``: ||theta_i||_2 <= gamma): two solvers of

    min F(theta)  subject to  s_i(theta) = (||theta_i||^2 - gamma^2) / 2 <= 0  (every item i)

over the sum-zero space, F = L + sum_i quad_i/2 ||theta_i||^2 - <lin, theta> (:class:`study.core.newton.Objective`).
Both stop on the same rule, the KKT conditions to the stated tolerances: the residual
||Q'(grad F + sum_i nu_i grad s_i)||_inf <= ``abs_tol`` and the projected ball slack (|s_i| where
nu_i > 0, max(s_i, 0) elsewhere) <= ``feas_tol`` = BALL_TOL gamma^2, with nu >= 0.  Any point meeting
them is the estimate (the problem is strictly convex wherever it is solved: F has a tie-break term,
or the data and the active balls identify theta), so the two are interchangeable up to those
tolerances; they differ in cost and in robustness.

* :func:`dual_ascent` -- projected Newton ascent on the concave dual over nu >= 0, each dual point
  solved by the inner Newton (cheap where a warm start from the previous step is good: the
  tie-break problems of stage 1, whose F is strictly convex whatever nu).  The dual curvature of
  small problems comes from the inner solve's last factor (at the current multipliers, near
  theta: a quasi-Newton dual step, one factorisation per dual step fewer); for large problems from
  the kept PCG preconditioner, corrected by BFGS updates along the dual steps taken
  (:func:`_secant`), and each trial point's inner Newton starts from the first-order prediction of
  its minimiser (:meth:`study.core.iterative.IterativeFactor.predict`).
* :func:`active_set_newton` -- Newton's method on the KKT system in (theta, nu) with a primal-dual
  active set (Hintermueller, Ito & Kunisch 2002, with the ball constraints linearised): one linear
  KKT solve per iteration, no inner minimisation.  Used for the exact opt1 problems (no tie-break
  term), where nu = 0 on a free item can leave the dual's inner problem without a minimiser
  (near-separable data) and the dual method stalls or diverges.

Both report their work to :mod:`study.core.costs` and stop after a stated budget (``DUAL_BUDGET``
inner Newton steps, ``ACTIVE_SET_ITERATIONS`` iterations) as not converged; the caller then states
its fallback (:func:`study.core.mle.solve`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import costs
from .contrasts import from_reduced, to_reduced
from .iterative import iterative
from .newton import Objective, newton

CHUNK_ENTRIES = 1 << 21  # n d c floats per block of columns (16 MB) in the dual curvature
# Work budgets (a fit that exceeds one stops, not converged): measured on the long-horizon runs
# (docs/benchmarks.md), a converging dual solve takes at most a few hundred inner Newton steps
# and the active-set method at most ~15 iterations; without a budget a stalled dual loop could
# take 100 dual steps x 80 trial points x 100 Newton steps.
DUAL_BUDGET = 2000
ACTIVE_SET_ITERATIONS = 40


@dataclass
class BallFit:
    theta: np.ndarray
    nu: np.ndarray
    steps: int  # Newton systems solved (inner Newton steps, dual or active-set iterations)
    residual: float
    converged: bool
    factor: object = None
    point: object = None  # newton.Point at theta (its margins and loss gradient), where the last pass was there


def _slack(theta, gamma2):
    return 0.5 * (np.einsum("id,id->i", theta, theta) - gamma2)


def projected(nu, slack):
    """The projected ball slack: |s_i| where nu_i > 0, max(s_i, 0) elsewhere."""
    return np.where(nu > 0.0, slack, np.maximum(slack, 0.0))


def dual_ascent(data, theta, nu, *, radius, base_quad, lin, lin_r, abs_tol, feas_tol, max_steps, max_dual_steps,
                factor_hint=None, budget: int = DUAL_BUDGET, start=None, pending=None) -> BallFit:
    """Projected Newton ascent on the dual (Bertsekas 1982) from (theta, nu); ``start`` (a
    :class:`study.core.newton.Point` at theta) and ``pending`` (a row not yet in ``factor_hint``)
    are handed to the first inner solve (:func:`study.core.newton.newton`)."""
    n = theta.shape[0]
    gamma2 = float(radius) ** 2
    total_steps = 0

    def inner(nu_value, start, hint, point=None, pending=None):
        objective = Objective(data, base_quad + nu_value, lin, lin_r)
        sol, steps, res, ok, inner_factor, u, end = newton(objective, start, abs_tol, max_steps, hint, point, pending)

        def dual():  # the dual function at nu_value (needed only once the dual loop moves nu)
            beta = to_reduced(sol).ravel() if end is None else end.beta
            return objective.value(beta, u) - 0.5 * gamma2 * float(nu_value.sum())

        return sol, steps, res, ok, dual, _slack(sol, gamma2), inner_factor, end  # slack: the dual gradient

    theta, steps, residual, ok, dual, slack, last_factor, point = inner(nu, theta, factor_hint, start, pending)
    total_steps += steps
    converged = False
    first_size = 1.0  # the dual line search starts from twice the last accepted step size
    secant = None  # (free items, curvature model updated by BFGS), large problems
    # only where every inner problem is strictly convex (a tie-break or ridge weight on every item):
    # in the exact opt1 problems (near-separable data, nu = 0 on free items) the slack's changes are
    # too erratic for a secant model, which there made single refits up to 20x slower (measured at
    # n = 50: 1,724 dual-loop steps instead of about 140 at one step of an L replication)
    learn_curvature = iterative(data) and bool(np.all(base_quad > 0.0))
    for _ in range(max_dual_steps):
        gap = float(np.abs(projected(nu, slack)).max())
        if gap <= feas_tol:
            converged = ok
            break
        if callable(dual):
            dual = dual()
        if total_steps > budget:
            costs.add("budget_stops")
            break
        costs.add("dual_steps")
        # Multipliers at zero whose constraint is slack stay fixed; the others take a Newton
        # step, then are projected onto nu >= 0.
        free = np.flatnonzero(~((nu <= 0.0) & (slack < 0.0)))
        objective = Objective(data, base_quad + nu, lin, lin_r)
        if objective.iterative or last_factor is None:
            factor = objective.factor(data.margins(theta))
        else:  # small problems: the inner solve's last factor (at these multipliers, near theta)
            factor = last_factor
        total_steps += 1
        # = -(Hessian of the dual); large problems: from the kept factor (exact curvature, by a PCG
        # solve per free item, did not bring the fits closer to a direct solver's: measured 7.5e-5
        # vs 7.0e-5 on the long-horizon agreement test, the ball tolerance, since the starts differ)
        if secant is not None and np.array_equal(secant[0], free):
            curvature = secant[1]
        else:
            curvature = dual_curvature(theta, free, factor, objective.iterative, exact=False)
            curvature += 1e-12 * max(float(np.trace(curvature)), 1e-300) * np.eye(free.size)
        step_newton = np.zeros(n)
        # Newton on the secular form 1/||theta_i|| - 1/gamma (More & Sorensen 1983), which is
        # nearly linear in nu where ||theta_i(nu)|| falls like 1/nu: outside the ball this
        # lengthens the plain Newton step on the slack by 2||theta_i||^2 / (gamma (||theta_i|| + gamma)).
        norms = np.sqrt(2.0 * slack[free] + gamma2)
        scale = np.maximum(1.0, 2.0 * norms ** 2 / (radius * (norms + radius)))
        step_newton[free] = np.linalg.solve(curvature, scale * slack[free])
        # If projection onto nu >= 0 leaves the Newton step nothing (coupling can point it below
        # zero for a violated ball), fall back on the diagonally scaled projected gradient step.
        scaled_gradient = np.zeros(n)
        scaled_gradient[free] = slack[free] / np.maximum(np.diag(curvature), 1e-300)
        accepted = False
        predict = factor.predict if objective.iterative else None  # an IterativeFactor
        for step, size in ((step_newton, first_size), (scaled_gradient, 1.0)):
            for _ in range(40):
                trial_nu = np.maximum(nu + size * step, 0.0)
                if np.array_equal(trial_nu, nu):
                    break
                # large problems: the inner solve starts from the first-order prediction of its
                # minimiser, theta - K^{-1} P(diag(d nu) (x) I) theta (d theta / d nu_i = -K^{-1} P(e_i (x)
                # theta_i)), with the kept factor for K^{-1}: a Newton system fewer where it is good
                start = theta if not predict else predict(theta, trial_nu - nu)
                trial = inner(trial_nu, start, factor)
                total_steps += trial[1]
                trial_dual = trial[4]()
                rise = trial_dual - dual
                if rise >= 1e-4 * float(slack @ (trial_nu - nu)) or (
                        abs(rise) <= 1e-12 * (1.0 + abs(dual))
                        and float(np.abs(projected(trial_nu, trial[5])).max()) < gap):
                    accepted = True
                    break
                size *= 0.5
            if accepted:
                break
        if not accepted:
            break
        first_size = min(1.0, 2.0 * size) if step is step_newton else first_size
        secant = _secant(curvature, free, trial_nu - nu, slack - trial[5]) if learn_curvature else None
        nu = trial_nu
        theta, _, residual, ok, _, slack, last_factor, point = trial
        dual = trial_dual
    return BallFit(theta, nu, total_steps, residual, converged, last_factor, point)


def _secant(curvature, free, step, fall):
    """The BFGS update of the dual curvature model on ``free`` from an accepted dual step (its
    multipliers' change ``step`` and the slack's fall, -(change of the dual gradient)), or None
    where the pair carries no curvature.  The kept factor's curvature is that of an earlier K (other
    weights, other multipliers), so the dual Newton steps built on it converge only linearly (6-8x
    per step measured at n = 100); the secant pairs correct it along the steps taken."""
    s, y = step[free], fall[free]
    sy = float(s @ y)
    bs = curvature @ s
    sbs = float(s @ bs)
    if not (sy > 1e-12 * float(np.sqrt((s @ s) * (y @ y))) and sbs > 0.0):
        return None
    return free, curvature - np.outer(bs, bs) / sbs + np.outer(y, y) / sy


def _columns(theta, items) -> np.ndarray:
    """c_i = Q'(e_i (x) theta_i), the reduced gradients of s_i, one column per item of ``items``."""
    n, d = theta.shape
    item_cols = np.zeros((n, d, items.size))
    item_cols[items, :, np.arange(items.size)] = theta[items]
    return to_reduced(item_cols).reshape((n - 1) * d, items.size)


def active_set_newton(data, theta, nu, *, radius, base_quad, abs_tol, feas_tol, lin=None, lin_r=None,
                      max_iterations: int = ACTIVE_SET_ITERATIONS) -> BallFit:
    """Newton's method on the KKT system of the ball-constrained problem from (theta, nu).

    The active set A holds the items with nu_i > 0 or a violated ball (s_i > ``feas_tol``).  On A
    the constraints are equalities s_i = 0, off A nu_i = 0, and a Newton step solves

        [ K    C ] [ d_beta ]     [ g   ]        K = Q'(H_L + diag(quad + nu) (x) I) Q,
        [ C'   0 ] [ d_nu_A ] = - [ s_A ],       C = [c_i]_{i in A},  c_i = Q'(e_i (x) theta_i),

    g the reduced gradient of the Lagrangian F + sum_A nu_i s_i (which is the gradient of F with
    nu added to its quadratic weights, so K is that objective's Newton matrix), through the Schur
    complement S = C'K^{-1}C: d_nu = S^{-1}(s_A - C'K^{-1}g), d_beta = -K^{-1}(g + C d_nu).  S is
    exact for small problems and comes from the kept factor for large ones (a quasi-Newton step:
    the iteration's fixed point is still the KKT point, since g and s are exact).  The step is
    damped until the scaled KKT residual ||g / abs_tol||^2 + ||s_A / feas_tol||^2 falls (at most 30
    halvings); afterwards an item leaves A if its multiplier is no longer positive and joins it
    if its ball is violated.  Converged: the stopping rule of the module docstring.
    """
    n, d = theta.shape
    gamma2 = float(radius) ** 2
    beta = to_reduced(theta - theta.sum(axis=0) / n).ravel()
    nu = np.maximum(np.asarray(nu, dtype=float), 0.0)
    slack = _slack(from_reduced(beta.reshape(n - 1, d)), gamma2)
    active = (nu > 0.0) | (slack > feas_tol)

    def state(beta, nu):
        objective = Objective(data, base_quad + nu, lin, lin_r)
        u = objective.margins(beta)
        point = from_reduced(beta.reshape(n - 1, d))
        return objective, u, objective.gradient(beta, u), point, _slack(point, gamma2)

    nu = np.where(active, nu, 0.0)
    objective, u, grad, theta, slack = state(beta, nu)
    factor = None
    residual = float(np.abs(grad).max())
    for iteration in range(max_iterations + 1):
        residual = float(np.abs(grad).max())
        if residual <= abs_tol and float(np.abs(projected(nu, slack)).max()) <= feas_tol:
            return BallFit(theta, nu, iteration, residual, True, factor)
        if iteration == max_iterations:
            break
        costs.add("active_set_iterations")
        factor = objective.factor(u)
        items = np.flatnonzero(active)

        def solve(rhs):
            return factor.solve(rhs, atol=0.0) if objective.iterative else factor.solve(rhs)

        if items.size:
            cols = _columns(theta, items)
            if objective.iterative:  # S from the kept factor; two PCG solves
                y = solve(grad)
                schur = dual_curvature(theta, items, factor, True, exact=False)
                solved = None
            else:  # small problems: S exactly, every column in one solve
                solved = solve(np.column_stack([grad, cols]))
                y = solved[:, 0]
                schur = cols.T @ solved[:, 1:]
                schur = 0.5 * (schur + schur.T)
            schur = schur + 1e-12 * max(float(np.trace(schur)), 1e-300) * np.eye(items.size)
            step_nu = np.linalg.solve(schur, slack[items] - cols.T @ y)
            step_beta = -(y + (solved[:, 1:] @ step_nu if solved is not None else solve(cols @ step_nu)))
        else:
            step_beta, step_nu = -solve(grad), np.zeros(0)

        def merit(grad, slack):  # the scaled KKT residual: every ball's violation, the active ones' slack
            violation = np.where(active, slack, np.maximum(slack, 0.0))
            return float(np.sum((grad / abs_tol) ** 2) + np.sum((violation / feas_tol) ** 2))

        before = merit(grad, slack)
        size = 1.0
        for _ in range(30):
            trial_beta = beta + size * step_beta
            trial_nu = nu.copy()
            trial_nu[items] += size * step_nu
            trial = state(trial_beta, trial_nu)
            after = merit(trial[2], trial[4])
            if math.isfinite(after) and after <= (1.0 - 1e-4 * size) * before:
                break
            size *= 0.5
        else:
            break
        beta = trial_beta
        active = (active & (trial_nu > 0.0)) | (~active & (trial[4] > feas_tol))
        nu = np.where(active, np.maximum(trial_nu, 0.0), 0.0)
        objective, u, grad, theta, slack = state(beta, nu)
    return BallFit(theta, nu, max_iterations, residual, False, factor)


def dual_curvature(theta, free, factor, iterative: bool, exact: bool = True) -> np.ndarray:
    """-(Hessian of the dual) over the free multipliers: c_f' K^{-1} c_g with c_f = Q'(e_f (x) theta_f).
    Small problems: all columns at once, exactly.  Large ones, in blocks of columns so that nothing
    of size n^2 d is formed: by PCG if ``exact``, else from the iterative solver's kept factor (a
    quasi-Newton dual step; the dual's stopping rule is unchanged), in item form where it allows."""
    n, d = theta.shape
    if not iterative:
        cols = _columns(theta, free)
        return cols.T @ factor.solve(cols)
    quadratic = None if exact else factor.approximate_item_quadratic(theta, free)
    if quadratic is not None:  # the row-space factor: in item form, O(t |free| (t + d))
        return 0.5 * (quadratic + quadratic.T)
    solve = factor.solve if exact else factor.approximate_solve
    curvature = np.empty((free.size, free.size))
    width = max(1, CHUNK_ENTRIES // (n * d))
    for start in range(0, free.size, width):
        block = free[start: start + width]
        solved = solve(_columns(theta, block))
        item_solved = from_reduced(solved.reshape(n - 1, d, block.size))  # Phi-like, item form
        curvature[:, start: start + block.size] = np.einsum("fd,fdc->fc", theta[free], item_solved[free])
    return 0.5 * (curvature + curvature.T)
