"""The inner solver of both MLEs: safeguarded Newton on a penalised likelihood over the sum-zero space.

F(theta) = L(theta) + sum_i quad_i/2 ||theta_i||^2 - <lin, theta> (quad: ridge, tie-break and ball
multipliers; lin: the tie-break's pull towards its reference) is minimised in reduced coordinates
theta = Q beta (:mod:`study.core.contrasts`), each Newton system solved exactly by
:func:`study.core.systems.factorize` or, from 300 parameters, by PCG (:mod:`study.core.iterative`).
The stopping rule, line searches and chord steps are described in :mod:`study.core.mle`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from . import costs
from .contrasts import from_reduced, to_reduced
from .iterative import IterativeFactor, iterative
from .likelihood import ComparisonData
from .systems import factorize, reduced_weights

FORCING = 1e-3  # inexact Newton (iterative solver): the step solves K d = -g to FORCING * ||g||_inf


class Objective:
    """F(theta) = L(theta) + sum_i quad_i/2 ||theta_i||^2 - <lin, theta> on the sum-zero space, in
    reduced coordinates theta = Q beta (beta flat, length (n-1) d): since Q'Q = I the quadratic
    term is beta' (Q' diag(quad) Q (x) I) beta / 2 and the linear one <Q' lin, beta>.  Margins
    and gradients are computed in item form (O(t d)) and moved by the fast Helmert transform."""

    def __init__(self, data: ComparisonData, quad: np.ndarray, lin: np.ndarray | None, lin_r=None):
        self.data, self.quad, self.lin = data, quad, lin
        self.k, self.d = data.n_items - 1, data.dim
        # ndarray methods, not np.all: this object is built several times a step, where the
        # module-level functions' dispatch is a measurable part of the cost
        self.uniform = bool((quad == quad[0]).all())
        self.strictly_convex = bool((quad > 0.0).all())
        self.iterative = iterative(data)
        # Q' diag(quad) Q: explicitly ((n-1)^2) for small n, by the Helmert transform (O(n d)) for large
        self.small = None if self.uniform or self.iterative else reduced_weights(quad)
        if lin_r is None and lin is not None:  # Q' lin, flat (may be passed in: the dual loop reuses it)
            lin_r = to_reduced(lin).ravel()
        self.lin_r = lin_r
        self._last_penalty = None
        self.last_loss = None

    def margins(self, beta):
        return self.data.reduced_margins(beta)

    def _penalty_gradient(self, beta):
        if self.uniform:
            return self.quad[0] * beta
        if self.small is None:  # two Helmert transforms: kept for the last beta (value and gradient share it)
            if self._last_penalty is None or self._last_penalty[0] is not beta:
                self._last_penalty = (beta, to_reduced(self.quad[:, None] * from_reduced(beta.reshape(self.k, self.d)))
                                      .ravel())
            return self._last_penalty[1]
        return (self.small @ beta.reshape(self.k, self.d)).ravel()

    def factor(self, u):
        """The Newton system at margins u: factorised, or (large problems) solved by PCG."""
        if self.iterative:
            return IterativeFactor(self.data, u, self.quad)
        return factorize(self.data, u, self.quad)

    def value(self, beta, u):
        val = self.data.nll(None, u) + 0.5 * float(beta @ self._penalty_gradient(beta))
        if self.lin_r is not None:
            val -= float(self.lin_r @ beta)
        return val

    def gradient(self, beta, u, loss_gradient=None):
        """Q' grad F, flat; ``loss_gradient``, Q' grad L at margins u, if known.  The last loss
        gradient computed is kept with its margins (``self.last_loss``): the point a fit ends at."""
        if loss_gradient is None:
            loss_gradient = self.data.reduced_gradient(u)
        self.last_loss = (u, loss_gradient)
        grad = loss_gradient + self._penalty_gradient(beta)
        if self.lin_r is not None:
            grad = grad - self.lin_r
        return grad

def line_minimum(objective, beta, u, direction, slope, max_iterations=30) -> float:
    """argmin over s > 0 of F(beta + s direction) to 1e-3 of the initial slope: safeguarded
    Newton on the derivative, which costs O(t) per evaluation because the margins are affine in s
    (u + s a with a the direction's margins).  Far from the optimum of a near-separable fit the
    Newton step's length is badly off while its direction is sound; the exact length saves outer
    iterations, each of which needs a new factorisation.  Falls back on 1 (the Newton step)."""
    a = objective.margins(direction)
    data = objective.data
    t = data.t
    m, wins = data.m[:t], data.wins[:t]
    penalty = objective._penalty_gradient(direction)
    curvature_pen, offset = float(direction @ penalty), float(beta @ penalty)
    if objective.lin_r is not None:
        offset -= float(objective.lin_r @ direction)

    def derivatives(step):
        sig = expit(u + step * a)
        return (float((m * sig - wins) @ a) + offset + step * curvature_pen,
                float((m * sig * (1.0 - sig)) @ (a * a)) + curvature_pen)

    lo, hi = 0.0, None
    step = 1.0
    for _ in range(max_iterations):
        first, second = derivatives(step)
        if not math.isfinite(first):
            return 1.0
        if abs(first) <= 1e-3 * abs(slope):
            return step
        if first < 0.0:
            lo = step
        else:
            hi = step
        trial = step - first / second if second > 0.0 else np.inf
        if hi is None:
            step = trial if math.isfinite(trial) and trial > step else 2.0 * step
        elif lo < trial < hi:
            step = trial
        else:
            step = 0.5 * (lo + hi)
    return step if lo > 0.0 else 1.0


@dataclass(frozen=True)
class Point:
    """A point of a fit in reduced coordinates with what a pass over the rows computes there: its
    margins u and the loss gradient Q' grad L.  Handed to the next refit (one row more), it saves
    that refit's first pass: the new row's margin and gradient term are O(d) (:meth:`extended`)."""

    beta: np.ndarray
    margins: np.ndarray
    loss_gradient: np.ndarray

    def extended(self, data: ComparisonData) -> "Point":
        """The same point after ``data`` gained rows (their margins and gradient terms added)."""
        u, grad = self.margins, self.loss_gradient
        old = len(u)
        if old == data.t:
            return self
        if old + 1 == data.t:  # one new row (every refit): scalar arithmetic, no stacking
            row = data.reduced_row(old)
            margin = float(row @ self.beta)
            residual = float(data.m[old]) * float(expit(margin)) - float(data.wins[old])
            grown = np.empty(old + 1)
            grown[:old] = u
            grown[old] = margin
            return Point(self.beta, grown, grad + residual * row)
        rows = np.stack([data.reduced_row(k) for k in range(old, data.t)])
        new_u = rows @ self.beta
        residual = data.m[old:data.t] * expit(new_u) - data.wins[old:data.t]
        return Point(self.beta, np.concatenate([u, new_u]), grad + residual @ rows)


def _sigmoid(u: float) -> float:
    return 1.0 / (1.0 + math.exp(-u)) if u > -700.0 else 0.0


def _new_row_margin(b: float, c: float, m: float, wins: float, u: float) -> float:
    """The root of f(u) = u + c (m sigma(u) - wins) - b (c > 0: f increasing, one root in
    [b - c (m - wins), b + c wins]): Newton's method safeguarded by bisection (a Newton step is
    taken only if it stays inside the bracket and at least halves the step before last, as in
    Numerical Recipes' rtsafe), to the last bit of the bracket or of Newton's step."""
    lo, hi = b - c * (m - wins), b + c * wins
    u = min(max(u, lo), hi)  # the new row's margin before the step: the root is near it or near b
    before = last = hi - lo
    for _ in range(200):
        s = _sigmoid(u)
        f = u + c * (m * s - wins) - b
        if f > 0.0:
            hi = u
        elif f < 0.0:
            lo = u
        else:
            return u
        step = f / (1.0 + c * m * s * (1.0 - s))
        if lo < u - step < hi and abs(step) <= 0.5 * before:
            before, last = last, abs(step)
            u -= step
            if last <= 2e-16 * (1.0 + abs(u)):
                return u
        else:
            before, last = last, 0.5 * (hi - lo)
            u = lo + 0.5 * (hi - lo)
        if hi - lo <= 2e-16 * (1.0 + abs(u)):
            return u
    return u


def rank_one_step(objective: Objective, factor, u: np.ndarray, grad: np.ndarray, row: int):
    """The first step of a refit whose factor K0 does not yet hold the new row ``row``: the minimiser
    of the quadratic model of the other terms (gradient grad - l'(u_row) r, Hessian K0) plus the new
    row's exact term l(r'beta) (l(v) = m log(1 + e^v) - wins v, r its reduced design row).  Its
    stationarity condition is one scalar equation in the new row's margin v = r'beta,

        v + c l'(v) = u_row - r'K0^{-1}(grad - l'(u_row) r),    c = r'K0^{-1}r,

    solved exactly (:func:`_new_row_margin`); the step is -K0^{-1}(grad + (l'(v) - l'(u_row)) r).
    A new comparison can move a margin far on near-separable data (a tie-break curvature of 1e-4):
    the row's curvature at its old margin, which a Woodbury term at theta(t-1) would hold, is then
    wrong by orders of magnitude, and chord steps with it fail.  Returns the step and the factor with
    the row folded in at its new margin's weight (None once the factor's rank budget is used up)."""
    data = objective.data
    r = data.reduced_row(row)
    m, wins = float(data.m[row]), float(data.wins[row])
    u0 = float(u[row])
    slope0 = m * _sigmoid(u0) - wins
    rhs = np.empty((r.size, 2))
    rhs[:, 0] = grad
    rhs[:, 1] = r
    solved = factor.solve(rhs)  # K0^{-1} grad, K0^{-1} r
    r_solved = r @ solved
    c = float(r_solved[1])
    if not c > 0.0:  # cannot happen for a positive definite K0; a plain chord step then
        return -solved[:, 0], None
    margin = _new_row_margin(u0 - float(r_solved[0]) + slope0 * c, c, m, wins, u0)
    s = _sigmoid(margin)
    direction = solved[:, 1] * (slope0 - (m * s - wins))
    direction -= solved[:, 0]
    root_weight = math.sqrt(m * s * (1.0 - s))
    return direction, factor.add(root_weight * r, solved=root_weight * solved[:, 1])


class _Preconditioner:
    """An :class:`study.core.iterative.IterativeFactor`'s kept preconditioner as a factor of K0 (the
    Hessian before the new row) for :func:`rank_one_step`: its solve, and the row folded into it."""

    def __init__(self, factor):
        self.factor = factor

    def solve(self, rhs):
        return self.factor.approximate_solve(rhs)

    def add(self, column, solved=None):
        return self.factor.add(column)


def newton(objective: Objective, theta: np.ndarray, tol: float, max_steps: int, factor_hint=None,
           start: Point | None = None, pending: int | None = None):
    """Minimise ``objective`` over theta = Q beta from ``theta`` (assumed sum-zero).

    Safeguarded Newton: Armijo backtracking while the predicted decrease is visible in floating
    point; once it is below 1e-10 |F| (the quadratic model is then exact to working precision)
    the full step is taken, and the loop stops if the KKT residual no longer falls.
    ``factor_hint``, a Cholesky factor of a nearby reduced Hessian (the previous time step's), is
    tried first for chord steps: full steps, each kept only if it cuts the KKT residual tenfold
    (otherwise undone, and the factor refreshed).  ``start``, a :class:`Point` on the same rows,
    replaces ``theta`` and the first pass over the rows.  Returns theta (not beta), its margins,
    and the final :class:`Point` (None where the last pass was not at the returned point)."""
    data = objective.data
    n, d = theta.shape
    factor = factor_hint
    # chord steps reuse an old factor; the iterative solver reuses its preconditioner instead
    chord = factor_hint is not None and not objective.iterative
    if start is None:
        beta = to_reduced(theta).ravel()
        u = objective.margins(beta)
        known = None
    else:
        beta, u, known = start.beta, start.margins, start.loss_gradient
    value = None  # F(beta), computed only when a line search needs it (chord steps never do)
    previous = np.inf
    hessians = 0
    precise = False  # True once steps are taken in the "model exact to working precision" regime
    before_chord = None  # the point a chord step started from, to return to if it fails
    strictly_convex = objective.strictly_convex
    refresh_once = False  # the factor lacks the new row (rank budget): refresh it after the first step
    predicted = False  # the last step was the new row's step on the kept preconditioner (large problems)

    def done(ok):
        last = objective.last_loss
        point = Point(beta, u, last[1]) if last is not None and last[0] is u else None
        return from_reduced(beta.reshape(n - 1, d)), hessians, residual, ok, factor, u, point

    for _ in range(3 * max_steps + 3):
        grad = objective.gradient(beta, u, known)
        known = None
        residual = float(np.abs(grad).max())
        if chord and before_chord is not None and not residual <= 0.1 * previous:  # the old factor is not good enough here: undo, refresh
            chord = False
            beta, u, value, grad, residual = before_chord
        if residual <= tol:
            return done(True)
        if refresh_once and chord:
            refresh_once = False
            factor = objective.factor(u)
            hessians += 1
            costs.add("newton_systems")
        if precise and residual >= previous:  # stalled at working precision
            return done(residual <= 1e3 * tol)
        if predicted:  # the new row's step on the kept preconditioner (large problems): kept if it helped
            predicted = False
            if not residual <= 0.5 * previous:
                beta, u, value, grad, residual = before_chord
        if pending is not None and objective.iterative and factor_hint is not None:
            # large problems: the same step as rank_one_step's, with the kept preconditioner for K0^{-1}
            # (an approximation: judged by the residual, like a chord step); the row joins it at its new weight
            direction, _ = rank_one_step(objective, _Preconditioner(factor_hint), u, grad, pending)
            pending = None
            if math.isfinite(float(direction @ grad)) and float(direction @ grad) < 0.0:
                previous, predicted = residual, True
                before_chord = (beta, u, value, grad, residual)
                beta = beta + direction
                u, value = objective.margins(beta), None
                continue
        if not chord:
            if hessians >= max_steps:
                break
            factor = objective.factor(u)
            hessians += 1
            costs.add("newton_systems")
        previous = residual
        # the iterative solver's forcing term: an inexact Newton step, accurate to a small part of
        # the residual and well below the stopping tolerance
        if pending is not None and chord:
            direction, grown = rank_one_step(objective, factor, u, grad, pending)
            pending = None
            # past the rank budget the factor lacks the new row: refresh it where the step lands
            refresh_once = grown is None
            if grown is not None:
                factor = grown
        else:
            direction = -(factor.solve(grad, atol=max(0.2 * tol, FORCING * residual)) if objective.iterative
                      else factor.solve(grad))
        slope = float(grad @ direction)
        if not math.isfinite(slope) or slope >= 0:  # not a descent direction: refresh, else steepest descent
            if chord:
                chord = False
                previous = np.inf
                continue
            direction = -grad
            slope = float(grad @ direction)
        if chord:  # a full chord step, judged by the residual at the next iteration
            before_chord = (beta, u, value, grad, residual)
            beta = beta + direction
            u, value = objective.margins(beta), None
            continue
        if value is None:
            value = objective.value(beta, u)
        if -slope < 1e-10 * (1.0 + abs(value)):
            precise = True
            beta = beta + direction
            u, value = objective.margins(beta), None
            continue
        # exact line search only where the minimiser is unique whatever the path (every weight
        # positive): the exact opt1 re-solve's success, and so the estimate, depends on its path
        size = line_minimum(objective, beta, u, direction, slope) if strictly_convex else 1.0
        for _ in range(60):
            trial = beta + size * direction
            trial_u = objective.margins(trial)
            trial_value = objective.value(trial, trial_u)
            if math.isfinite(trial_value) and trial_value <= value + 1e-4 * size * slope:
                break
            size *= 0.5
        else:
            return done(residual <= 1e3 * tol)
        beta, u, value = trial, trial_u, trial_value
    return done(False)
