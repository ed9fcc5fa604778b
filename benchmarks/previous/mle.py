"""Maximum-likelihood estimators of the contextual BTL model.

* Stage 1 (paper label ``opt1``): argmin L_t(theta) subject to sum_i theta_i = 0 and
  ||theta_i||_2 <= gamma.
* Stage 2 (paper label ``opt``): argmin L_t(theta) + lambda_t/2 ||theta||^2 (its minimiser is
  automatically sum-to-zero, because L_t is invariant to adding one vector to every theta_i).

Both are solved by one routine: safeguarded Newton (Armijo backtracking) in reduced coordinates
on the sum-zero subspace, theta = Q beta (Q orthonormal Helmert contrasts, applied by the fast
transforms of :mod:`study.core.contrasts`; margins and gradients in item form, O(t d)), each Newton
system solved exactly by :func:`study.core.systems.factorize` (the t x t row-space system while rows
are fewer than parameters, the dense reduced Hessian otherwise), warm-started from theta(t-1)
and from the previous step's factor with the new row folded in by a Woodbury update (chord
steps, undone and refactorised when they do not cut the residual tenfold); the ball
constraints are handled by per-item Lagrange multipliers nu_i >= 0 found by projected Newton
ascent on the (concave) dual, each dual point solved by the inner Newton.  The dual Newton step
is taken on the secular form
1/||theta_i|| - 1/gamma (More & Sorensen), its line search starts from twice the last accepted
step, and a projected scaled-gradient step is the fallback when projection leaves Newton no
move.  Stopping rule: the KKT residual ||Q'(grad F)||_inf <= tol * (1 + total comparisons) with
tol = 1e-11 (1e-10 with a ridge), and ball violation/complementarity below ``BALL_TOL * gamma^2``
(BALL_TOL = 1e-5).

Tie-break.  Early on the data leave directions of theta unidentified (items or directions not yet
compared) and stage-1's argmin is a whole affine set.  We pick a point of it explicitly: add the
proximal term eps/2 ||theta - theta_ref||^2 with eps = ``TIE_BREAK_WEIGHT`` (1 + sum_k m_k) / n,
TIE_BREAK_WEIGHT = 1e-4 of the data's average curvature per item; its minimiser tends, as
eps -> 0, to the point of the argmin set nearest theta_ref, and a final polish (chord steps on
the loss without the term, see ``_polish``) removes its pull in identified directions.
``tie_break='nearest'`` uses the previous estimate as theta_ref (data-silent directions keep
their value from theta(0)); ``'min_norm'`` uses 0 (the minimum-norm argmin).  The term is used
only when the objective has no ridge and is dropped (``prox=0``) once the argmin is unique: the
data identify theta, or active balls do (the reduced Hessian of L plus the multipliers' curvature
is well conditioned), in which case opt1 is re-solved exactly and the tie-broken point kept only
if that near-separable exact problem fails to converge.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, lapack
from scipy.special import expit

from study.core import _validate as check
from . import decisions
from .contrasts import from_reduced, to_reduced
from .guards import check_fit_size
from .iterative import IterativeFactor, iterative
from .likelihood import ComparisonData
from .separation import nonconvergence_advice, refuse_if_separable
from .systems import cholesky, factorize, reduced_hessian, reduced_weights

TIE_BREAK_WEIGHT = 1e-4
DEFAULT_TOL = 1e-11
RIDGE_TOL = 1e-10
BALL_TOL = 1e-5  # relative slack allowed on ||theta_i||^2 <= gamma^2
FORCING = 1e-3  # inexact Newton (iterative solver): the step solves K d = -g to FORCING * ||g||_inf


@dataclass
class FitResult:
    theta: np.ndarray
    multipliers: np.ndarray  # nu_i >= 0 of the ball constraints (zeros without a radius)
    newton_steps: int
    kkt_residual: float  # ||Q' grad F||_inf of the solved objective (proximal term included)
    converged: bool
    factor: object = None  # Cholesky factor of the last reduced Hessian (a warm start for the next fit)


class _Objective:
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

    def gradient(self, beta, u):
        """Q' grad F, flat."""
        grad = self.data.reduced_gradient(u) + self._penalty_gradient(beta)
        if self.lin_r is not None:
            grad = grad - self.lin_r
        return grad


def _line_minimum(objective, beta, u, direction, slope, max_iterations=30) -> float:
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


def _newton(objective: _Objective, theta: np.ndarray, tol: float, max_steps: int, factor_hint=None):
    """Minimise ``objective`` over theta = Q beta from ``theta`` (assumed sum-zero).

    Safeguarded Newton: Armijo backtracking while the predicted decrease is visible in floating
    point; once it is below 1e-10 |F| (the quadratic model is then exact to working precision)
    the full step is taken, and the loop stops if the KKT residual no longer falls.
    ``factor_hint``, a Cholesky factor of a nearby reduced Hessian (the previous time step's), is
    tried first for chord steps: full steps, each kept only if it cuts the KKT residual tenfold
    (otherwise undone, and the factor refreshed).  Returns theta (not beta) and its margins."""
    data = objective.data
    n, d = theta.shape
    factor = factor_hint
    # chord steps reuse an old factor; the iterative solver reuses its preconditioner instead
    chord = factor_hint is not None and not objective.iterative
    beta = to_reduced(theta).ravel()
    u = objective.margins(beta)
    value = None  # F(beta), computed only when a line search needs it (chord steps never do)
    previous = np.inf
    hessians = 0
    precise = False  # True once steps are taken in the "model exact to working precision" regime
    before_chord = None  # the point a chord step started from, to return to if it fails
    strictly_convex = objective.strictly_convex

    def done(ok):
        return from_reduced(beta.reshape(n - 1, d)), hessians, residual, ok, factor, u

    for _ in range(3 * max_steps + 3):
        grad = objective.gradient(beta, u)
        residual = float(np.abs(grad).max())
        if chord and not residual <= 0.1 * previous:  # the old factor is not good enough here: undo, refresh
            chord = False
            beta, u, value, grad, residual = before_chord
        if residual <= tol:
            return done(True)
        if precise and residual >= previous:  # stalled at working precision
            return done(residual <= 1e3 * tol)
        if not chord:
            if hessians >= max_steps:
                break
            factor = objective.factor(u)
            hessians += 1
        previous = residual
        # the iterative solver's forcing term: an inexact Newton step, accurate to a small part of
        # the residual and well below the stopping tolerance
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
        size = _line_minimum(objective, beta, u, direction, slope) if strictly_convex else 1.0
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


def solve(data: ComparisonData, theta_start: np.ndarray, *, ridge: float = 0.0, radius: float | None = None,
          reference: np.ndarray | None = None, prox: float | None = None, multipliers: np.ndarray | None = None,
          tol: float | None = None, max_steps: int = 100, max_dual_steps: int = 100, factor_hint=None) -> FitResult:
    """Minimise L(theta) + ridge/2 ||theta||^2 [+ prox/2 ||theta - reference||^2] over the sum-zero
    space, with ||theta_i|| <= radius if given.  ``prox`` defaults to ``TIE_BREAK_WEIGHT`` when
    ridge == 0 (the tie-break, see module docstring) and to 0 otherwise."""
    n, d = theta_start.shape
    theta = theta_start - theta_start.sum(axis=0) / n  # = mean, without np.mean's call overhead
    if prox is None:
        prox = TIE_BREAK_WEIGHT * (1.0 + data.total_comparisons) / n if ridge == 0.0 else 0.0
    if tol is None:  # the tie-break's tiny curvature needs a tight residual; a ridge does not
        tol = DEFAULT_TOL if prox > 0.0 else RIDGE_TOL
    lin = None
    if prox > 0.0 and reference is not None:
        ref = reference - reference.sum(axis=0) / n
        lin = prox * ref
    lin_r = None if lin is None else to_reduced(lin).ravel()
    base_quad = np.full(n, ridge + prox)
    abs_tol = tol * (1.0 + data.total_comparisons)

    if radius is None:
        theta, steps, residual, ok, factor, _ = _newton(_Objective(data, base_quad, lin), theta, abs_tol,
                                                        max_steps, factor_hint)
        if prox > 0.0:
            theta, residual = _polish(data, theta, ridge, factor, abs_tol)
        return _finish(theta, theta_start, np.zeros(n), steps, residual, ok, factor)

    # Ball constraints: projected Newton ascent on the dual over nu >= 0.
    gamma2 = float(radius) ** 2
    feas_tol = BALL_TOL * gamma2
    nu = np.zeros(n) if multipliers is None else np.maximum(np.asarray(multipliers, float), 0.0)
    if not nu.any():
        # cheap start: shrink theta into the ball (keeps warm starts feasible-ish)
        norms = np.sqrt((theta * theta).sum(axis=1))  # = np.linalg.norm(theta, axis=1), without its overhead
        theta = theta * np.minimum(1.0, radius / np.maximum(norms, 1e-300))[:, None]
        theta -= theta.sum(axis=0) / n
    total_steps = 0

    def inner(nu_value, start, hint):
        objective = _Objective(data, base_quad + nu_value, lin, lin_r)
        sol, steps, res, ok, inner_factor, u = _newton(objective, start, abs_tol, max_steps, hint)
        dual = objective.value(to_reduced(sol).ravel(), u) - 0.5 * gamma2 * float(nu_value.sum())
        slack = 0.5 * (np.einsum("id,id->i", sol, sol) - gamma2)  # the dual gradient
        return sol, steps, res, ok, dual, slack, inner_factor

    def projected(nu_value, slack):
        return np.where(nu_value > 0.0, slack, np.maximum(slack, 0.0))

    theta, steps, residual, ok, dual, slack, last_factor = inner(nu, theta, factor_hint)
    total_steps += steps
    factor = None
    converged = False
    first_size = 1.0  # the dual line search starts from twice the last accepted step size
    for _ in range(max_dual_steps):
        gap = float(np.abs(projected(nu, slack)).max())
        if gap <= feas_tol:
            converged = ok
            break
        # Projected Newton ascent on the concave dual (Bertsekas 1982): multipliers at zero whose
        # constraint is slack stay fixed; the others take a Newton step, then project onto nu >= 0.
        free = np.flatnonzero(~((nu <= 0.0) & (slack < 0.0)))
        quad = base_quad + nu
        objective = _Objective(data, quad, lin, lin_r)
        factor = objective.factor(data.margins(theta))
        total_steps += 1
        # = -(Hessian of the dual); large problems: from the kept factor (exact curvature, by a PCG
        # solve per free item, did not bring the fits closer to a direct solver's: measured 7.5e-5
        # vs 7.0e-5 on the long-horizon agreement test, the ball tolerance, since the starts differ)
        curvature = _dual_curvature(theta, free, factor, objective.iterative, exact=False)
        curvature += 1e-12 * max(float(np.trace(curvature)), 1e-300) * np.eye(free.size)
        newton = np.zeros(n)
        # Newton on the secular form 1/||theta_i|| - 1/gamma (More & Sorensen 1983), which is
        # nearly linear in nu where ||theta_i(nu)|| falls like 1/nu: outside the ball this
        # lengthens the plain Newton step on the slack by 2||theta_i||^2 / (gamma (||theta_i|| + gamma)).
        norms = np.sqrt(2.0 * slack[free] + gamma2)
        scale = np.maximum(1.0, 2.0 * norms ** 2 / (radius * (norms + radius)))
        newton[free] = np.linalg.solve(curvature, scale * slack[free])
        # If projection onto nu >= 0 leaves the Newton step nothing (coupling can point it below
        # zero for a violated ball), fall back on the diagonally scaled projected gradient step.
        scaled_gradient = np.zeros(n)
        scaled_gradient[free] = slack[free] / np.maximum(np.diag(curvature), 1e-300)
        accepted = False
        for step, size in ((newton, first_size), (scaled_gradient, 1.0)):
            for _ in range(40):
                trial_nu = np.maximum(nu + size * step, 0.0)
                if np.array_equal(trial_nu, nu):
                    break
                trial = inner(trial_nu, theta, factor)
                total_steps += trial[1]
                rise = trial[4] - dual
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
        first_size = min(1.0, 2.0 * size) if step is newton else first_size
        nu = trial_nu
        theta, _, residual, ok, dual, slack, last_factor = trial
    if not converged and factor_hint is not None:  # a stale warm start can mislead: retry cold
        return solve(data, theta_start, ridge=ridge, radius=radius, reference=reference, prox=prox,
                     tol=tol, max_steps=max_steps, max_dual_steps=max_dual_steps)
    if converged and prox > 0.0 and not np.any(nu) and last_factor is not None:
        polished, polished_residual = _polish(data, theta, ridge, last_factor, abs_tol)
        # near-separable directions are held only by the tie-break term: keep it there
        if np.all(np.einsum("id,id->i", polished, polished) <= gamma2 + feas_tol):
            theta, residual = polished, polished_residual
    elif (converged and prox > 0.0
          and data.rank_bound() + d * int(np.count_nonzero(nu)) >= data.n_parameters  # else surely not
          and _free_directions_covered(data, nu)  # likewise, on the items without an active ball
          and identified(data, theta, base_quad - prox + nu)):
        # active balls make the argmin unique (the data plus the multipliers' curvature identify
        # theta): the tie-break is moot, so drop its term and solve opt1 exactly; if that exact
        # problem is too ill-conditioned to converge, the tie-broken point is kept
        exact = solve(data, theta, ridge=ridge, radius=radius, prox=0.0, multipliers=nu, tol=tol,
                      max_steps=max_steps, max_dual_steps=max_dual_steps, factor_hint=last_factor)
        if exact.converged:
            return exact
    return _finish(theta, theta_start, nu, total_steps, residual, converged, last_factor)


CHUNK_ENTRIES = 1 << 21  # n d c floats per block of columns (16 MB) in the dual curvature


def _dual_curvature(theta, free, factor, iterative: bool, exact: bool = True) -> np.ndarray:
    """-(Hessian of the dual) over the free multipliers: c_f' K^{-1} c_g with c_f = Q'(e_f (x) theta_f).
    Small problems: all columns at once, exactly.  Large ones, in blocks of columns so that nothing
    of size n^2 d is formed: by PCG if ``exact``, else from the iterative solver's kept factor (a
    quasi-Newton dual step; the dual's stopping rule is unchanged), in item form where it allows."""
    n, d = theta.shape
    if not iterative:
        item_cols = np.zeros((n, d, free.size))  # e_i (x) theta_i for the free items
        item_cols[free, :, np.arange(free.size)] = theta[free]
        cols = to_reduced(item_cols).reshape((n - 1) * d, free.size)
        return cols.T @ factor.solve(cols)
    quadratic = None if exact else factor.approximate_item_quadratic(theta, free)
    if quadratic is not None:  # the row-space factor: in item form, O(t |free| (t + d))
        return 0.5 * (quadratic + quadratic.T)
    solve = factor.solve if exact else factor.approximate_solve
    curvature = np.empty((free.size, free.size))
    width = max(1, CHUNK_ENTRIES // (n * d))
    for start in range(0, free.size, width):
        block = free[start: start + width]
        item_cols = np.zeros((n, d, block.size))
        item_cols[block, :, np.arange(block.size)] = theta[block]
        solved = solve(to_reduced(item_cols).reshape((n - 1) * d, block.size))
        item_solved = from_reduced(solved.reshape(n - 1, d, block.size))  # Phi-like, item form
        curvature[:, start: start + block.size] = np.einsum("fd,fdc->fc", theta[free], item_solved[free])
    return 0.5 * (curvature + curvature.T)


def _free_directions_covered(data, nu) -> bool:
    """Could the data identify the directions no active ball holds (v_i = 0 where nu_i > 0, sum
    v = 0)?  If not, L plus the multipliers' curvature is singular there: a necessary condition
    for :func:`identified`, checked from the rows' edges alone (no factorisation)."""
    bound, needed = data.restricted_rank_bound(nu > 0.0)
    return bound >= needed


def new_row_term(data: ComparisonData, theta: np.ndarray) -> np.ndarray:
    """The last stored row's reduced-Hessian term as a column v (K gains v v')."""
    k = data.t - 1
    x = data.X[k]
    u = float(x @ (theta[data.b[k]] - theta[data.a[k]]))
    s = 1.0 / (1.0 + np.exp(-u))
    weight = data.m[k] * s * (1.0 - s)
    return np.sqrt(weight) * data.reduced_row(k)  # = sqrt(w) kron(Q[b] - Q[a], x)


def identified(data, theta, quad, rcond: float = 1e-10) -> bool:
    """Is the reduced Hessian of L (+ the given per-item quadratic weights) well conditioned?"""
    matrix = reduced_hessian(data, data.margins(theta), quad)
    try:
        factor = cholesky(matrix)
    except LinAlgError:
        return False
    value = float(lapack.dpocon(factor, float(np.abs(matrix).sum(axis=0).max()))[0])
    decisions.threshold("stage 1 identified", value, rcond)
    return value > rcond


def _polish(data, theta, ridge, factor, tol, rounds: int = 4):
    """Remove the tie-break term's O(eps) pull in identified directions: iterate
    theta <- theta - K_eps^{-1} grad(L + ridge/2 ||.||^2) with the factor K_eps of the regularised
    Hessian.  The gradient of L has no component in data-silent directions, so those keep their
    tie-broken values, while identified directions converge to the exact stationary point."""
    n, d = theta.shape
    beta = to_reduced(theta).ravel()
    best, best_residual = beta, np.inf
    for _ in range(rounds + 1):
        reduced_grad = data.reduced_gradient(data.reduced_margins(beta)) + ridge * beta
        residual = float(np.abs(reduced_grad).max())
        if not residual < best_residual:  # diverging (e.g. a near-separable direction): stop
            break
        best, best_residual = beta, residual
        if residual <= tol:
            break
        beta = beta - factor.solve(reduced_grad)
    return from_reduced(best.reshape(n - 1, d)), best_residual


def _finish(theta, fallback, nu, steps, residual, ok, factor=None) -> FitResult:
    if not np.isfinite(theta).all():  # never hand a non-finite estimate to a policy
        theta = fallback - fallback.mean(axis=0)
        ok = False
    return FitResult(theta=theta, multipliers=nu, newton_steps=steps, kkt_residual=residual, converged=ok,
                     factor=factor)


def fit_btl(i, j, X, wins, m, n_items, *, ridge: float = 0.0, radius: float | None = None,
            tie_break: str = "min_norm", reference=None, tol: float | None = None) -> np.ndarray:
    """Sum-to-zero (penalised, constrained) MLE of the contextual BTL model (paper eq. ``lik``).

    Parameters
    ----------
    i, j : array_like of int, shape (K,)
        Row k compares item ``i[k]`` with item ``j[k]`` (0-based, distinct).
    X : array_like, shape (K, d)
        The context of each row.
    wins : array_like, shape (K,)
        How many of row k's ``m`` comparisons ``j[k]`` won (a tie may count as half a win).
    m : int or array_like, shape (K,)
        Comparisons per row.
    n_items : int
        n, the number of items.
    ridge : float
        Adds ridge/2 ||theta||^2 (label ``opt``).
    radius : float, optional
        Bounds every ||theta_i||_2 (label ``opt1``).
    tie_break : {"min_norm", "nearest"}
        Where the data leave theta unidentified: the minimum-norm argmin, or the one nearest
        ``reference``.
    reference : array_like, shape (n_items, d), optional
        For ``tie_break="nearest"``.
    tol : float, optional
        The KKT residual at which the Newton iterations stop (default: relative to the data).

    Returns
    -------
    ndarray, shape (n_items, d)
        theta, rows summing to zero.

    Raises
    ------
    ValueError
        Bad shapes or values (naming the argument), or sizes out of reach (with the estimated
        memory and time).
    study.core.separation.SeparableData
        (a ValueError) Without ``ridge`` or ``radius``, when the comparisons are separable: no
        finite MLE exists (:mod:`study.core.separation`); pass a ridge or a radius.

    Warns
    -----
    RuntimeWarning
        When the stopping rule is not reached; the message tells badly scaled contexts (rescale X)
        from nearly separable data (a ridge or a radius).

    Examples
    --------
    >>> import numpy as np, study
    >>> rng = np.random.default_rng(0)
    >>> i = rng.integers(0, 3, 400); j = (i + 1 + rng.integers(0, 2, 400)) % 3
    >>> X = rng.normal(1.0, 0.5, (400, 2)); truth = np.array([[1., 0.], [0., 1.], [-1., -1.]])
    >>> wins = rng.binomial(5, 1 / (1 + np.exp(-np.einsum("kd,kd->k", X, truth[j] - truth[i]))))
    >>> theta = study.fit_btl(i, j, X, wins, 5, n_items=3)
    >>> theta.shape, bool(np.allclose(theta.sum(axis=0), 0))
    ((3, 2), True)
    """
    i, j, X, wins, m = check.comparisons(i, j, X, wins, m, n_items)
    ridge = check.real("ridge", ridge, low=0.0)
    if radius is not None:
        radius = check.real("radius", radius, low=0.0, low_open=True)
    check_fit_size(n_items, X.shape[1], i.size, "fit_btl")  # issue 18: refusals before any work
    if ridge == 0.0 and radius is None:
        refuse_if_separable(i, j, X, wins, m, n_items)
    if tie_break not in ("min_norm", "nearest"):
        raise ValueError(f"tie_break must be 'min_norm' or 'nearest', got {tie_break!r}")
    d = X.shape[1]
    if tie_break == "nearest":
        if reference is None:
            raise ValueError("tie_break='nearest' needs reference, an (n_items, d) array")
        reference = check.finite_array("reference", reference, ndim=2, shape=(n_items, d))
        start = reference.copy()
    else:
        reference = None
        start = np.zeros((n_items, d))
    data = ComparisonData.from_rows(i, j, X, wins, m, n_items)
    result = solve(data, start, ridge=ridge, radius=radius, reference=reference, tol=tol)
    if not result.converged:
        warnings.warn(f"fit_btl did not reach its stopping rule (KKT residual {result.kkt_residual:.3g}): "
                      f"{nonconvergence_advice(X)}", RuntimeWarning, stacklevel=2)
    return result.theta
