"""Maximum-likelihood estimators of the contextual BTL model.

* Stage 1 (paper label ``opt1``): argmin L_t(theta) subject to sum_i theta_i = 0 and
  ||theta_i||_2 <= gamma.
* Stage 2 (paper label ``opt``): argmin L_t(theta) + lambda_t/2 ||theta||^2 (its minimiser is
  automatically sum-to-zero, because L_t is invariant to adding one vector to every theta_i).

Both are solved by one routine: safeguarded Newton (Armijo backtracking) in reduced coordinates
on the sum-zero subspace, theta = Q beta (Q orthonormal Helmert contrasts, applied by the fast
transforms of :mod:`study.core.contrasts`; margins and gradients in item form, O(t d);
:mod:`study.core.newton`), each Newton system solved exactly by :func:`study.core.systems.factorize`
(the t x t row-space system while rows are fewer than parameters, the dense reduced Hessian
otherwise) or, from 300 parameters, by PCG (:mod:`study.core.iterative`), warm-started from the
previous fit's ``point`` (theta(t-1) with its margins and loss gradient, extended by the new row:
:class:`study.core.newton.Point`, which saves a pass over the rows) and from the previous fit's
factor.  The refit's first step takes the new row exactly (:func:`study.core.newton.rank_one_step`:
the quadratic model of the other terms plus the new row's likelihood, one scalar equation in its
margin), and folds it into the factor at the weight of its new margin; chord steps follow (undone
and refactorised when they do not cut the residual tenfold).  Below 150 parameters the kept factor
is held as its explicit inverse, new rows folded in by Sherman-Morrison
(:class:`study.core.systems.DenseInverse`).  The ball
constraints (:mod:`study.core.balls`) are handled by per-item Lagrange multipliers nu_i >= 0,
found by projected Newton ascent on the (concave) dual, each dual point solved by the inner
Newton (the dual Newton step on the secular form 1/||theta_i|| - 1/gamma (More & Sorensen), its
line search from twice the last accepted step, a projected scaled-gradient step where projection
leaves Newton no move), or by Newton's method on the KKT system with a primal-dual active set:
the exact opt1 problems (no tie-break term) start with it, and fall back on it where the dual
method fails; a failed exact problem is never restarted from nu = 0 (issue 27: on near-separable
data that restart took hours and failed).  Stopping rule: the KKT residual ||Q'(grad F)||_inf <=
tol * (1 + total comparisons) with tol = 1e-11 (1e-10 with a ridge), and ball
violation/complementarity below ``BALL_TOL * gamma^2`` (BALL_TOL = 1e-5); either solver meeting it
computes the estimate (tests/core/test_balls.py checks that they agree).

Tie-break.  Early on the data leave directions of theta unidentified (items or directions not yet
compared) and stage-1's argmin is a whole affine set.  We pick a point of it explicitly: add the
proximal term eps/2 ||theta - theta_ref||^2 with eps = ``TIE_BREAK_WEIGHT`` (1 + sum_k m_k) / n,
TIE_BREAK_WEIGHT = 1e-4 of the data's average curvature per item; its minimiser tends, as
eps -> 0, to the point of the argmin set nearest theta_ref, and a final polish (chord steps on
the loss without the term, see ``_polish``; its first pass is the tie-broken fit's last one)
removes its pull in identified directions.
``tie_break='nearest'`` uses the previous estimate as theta_ref (data-silent directions keep
their value from theta(0)); ``'min_norm'`` uses 0 (the minimum-norm argmin).  The term is used
only when the objective has no ridge and is dropped (``prox=0``) once the argmin is unique: the
data identify theta, or active balls do (the reduced Hessian of L plus the multipliers' curvature
is well conditioned), in which case opt1 is re-solved exactly and the tie-broken point kept only
if that near-separable exact problem fails to converge.  Before the dense identification test
(a Cholesky factor of the (n-1)d reduced Hessian) two exact shortcuts settle most steps that are
surely not identified: the rank bound over the rows' edges, and an exact null vector e_i (x) z -
e_j (x) z of two items without an active ball whose rows span fewer than d contexts
(:meth:`study.core.likelihood.ComparisonData.null_pair`, where the argument is given).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, lapack

from . import _validate as check
from . import batch, costs, decisions, nearest, outcomes, rowspace
from .aggregate import aggregate
from .balls import active_set_newton, dual_ascent
from .contrasts import from_reduced, to_reduced
from .guards import check_fit_size
from .likelihood import ComparisonData
from .newton import Objective, Point, newton
from .separation import nonconvergence_advice, refuse_if_separable
from .systems import cholesky, reduced_hessian

TIE_BREAK_WEIGHT = 1e-4
DEFAULT_TOL = 1e-11
RIDGE_TOL = 1e-10
BALL_TOL = 1e-5  # relative slack allowed on ||theta_i||^2 <= gamma^2
# the exact opt1 re-solve starts with Newton on the KKT system (primal-dual active set) from the
# tie-broken point, for at most this many iterations (measured on the long-horizon runs: it converges
# within them in ~85% of re-solves and costs 15% less than the dual method there), then the dual method
EXACT_ACTIVE_SET_ITERATIONS = 25
# fit_btl solves problems of at least this many (aggregated) rows without a radius by Newton over the
# arrays (study.core.batch): the row store's per-row x x' and row-by-row appends cost more there
# (4,950 rows of 100 items: 0.2-0.45 s against 10 ms).  Below it the row store's path is kept, so that
# the derived data of study.llm.prepare (at most 3,460 rows) stay byte-identical.
BATCH_MIN_ROWS = 4096
# proximal-point rounds of the exact nearest argmin's first stage (exact_nearest); measured on Settings
# A and B (RB, stage 1): at most 8 needed
EXACT_PROX_ROUNDS = 20


@dataclass
class FitResult:
    theta: np.ndarray
    multipliers: np.ndarray  # nu_i >= 0 of the ball constraints (zeros without a radius)
    newton_steps: int
    kkt_residual: float  # ||Q' grad F||_inf of the solved objective (proximal term included)
    converged: bool
    factor: object = None  # Cholesky factor of the last reduced Hessian (a warm start for the next fit)
    point: object = None  # newton.Point at theta, without ball constraints (a warm start for the next fit)


def solve(data: ComparisonData, theta_start: np.ndarray, *, ridge: float = 0.0, radius: float | None = None,
          reference: np.ndarray | None = None, prox: float | None = None, multipliers: np.ndarray | None = None,
          tol: float | None = None, max_steps: int = 100, max_dual_steps: int = 100, factor_hint=None,
          start=None, pending=None, exact: bool = False) -> FitResult:
    """Minimise L(theta) + ridge/2 ||theta||^2 [+ prox/2 ||theta - reference||^2] over the sum-zero
    space, with ||theta_i|| <= radius if given.  ``prox`` defaults to ``TIE_BREAK_WEIGHT`` when
    ridge == 0 (the tie-break, see module docstring) and to 0 otherwise.  ``start``, a
    :class:`study.core.newton.Point` on ``data`` (the previous fit's ``point``, extended by the new
    rows), replaces ``theta_start`` without ball constraints: the first pass over the rows is saved.
    ``exact`` (without a ridge, up to ``nearest.MAX_PARAMETERS`` parameters; larger problems keep the
    tie-broken point): the exact nearest argmin (:func:`exact_nearest`; ``reference`` None is 0)."""
    if exact and ridge == 0.0 and data.n_parameters <= nearest.MAX_PARAMETERS:
        return exact_nearest(data, theta_start, radius=radius, reference=reference, prox=prox, multipliers=multipliers,
                             tol=tol, max_steps=max_steps, max_dual_steps=max_dual_steps, factor_hint=factor_hint,
                             start=start, pending=pending)
    return _solve(data, theta_start, ridge=ridge, radius=radius, reference=reference, prox=prox,
                  multipliers=multipliers, tol=tol, max_steps=max_steps, max_dual_steps=max_dual_steps,
                  factor_hint=factor_hint, start=start, pending=pending)


def _solve(data: ComparisonData, theta_start: np.ndarray, *, ridge: float = 0.0, radius: float | None = None,
           reference: np.ndarray | None = None, prox: float | None = None, multipliers: np.ndarray | None = None,
           tol: float | None = None, max_steps: int = 100, max_dual_steps: int = 100, factor_hint=None,
           start=None, pending=None, ball_tol: float | None = None) -> FitResult:
    """:func:`solve` without ``exact``; ``ball_tol``: the ball slack allowed, relative to radius^2
    (default ``BALL_TOL``)."""
    n, d = theta_start.shape
    # a start point is at theta_start (the previous fit's, which sums to zero): no centring
    theta = theta_start if start is not None else theta_start - theta_start.sum(axis=0) / n  # = mean, cheaper
    comparisons = data.total_comparisons
    if prox is None:
        prox = TIE_BREAK_WEIGHT * (1.0 + comparisons) / n if ridge == 0.0 else 0.0
    if tol is None:  # the tie-break's tiny curvature needs a tight residual; a ridge does not
        tol = DEFAULT_TOL if prox > 0.0 else RIDGE_TOL
    lin = lin_r = None
    if prox > 0.0 and reference is not None:
        if start is not None and reference is theta_start:  # Q' reference is the start point's beta
            lin, lin_r = prox * theta, prox * start.beta
        else:
            lin = prox * (reference - reference.sum(axis=0) / n)
            lin_r = to_reduced(lin).ravel()
    base_quad = np.full(n, ridge + prox)
    abs_tol = tol * (1.0 + comparisons)

    if radius is None:
        theta, steps, residual, ok, factor, _, point = newton(Objective(data, base_quad, lin), theta, abs_tol,
                                                              max_steps, factor_hint, start, pending)
        if prox > 0.0:
            theta, residual, point = _polish(data, theta, ridge, factor, abs_tol, start=point)
        fit = _finish(theta, theta_start, np.zeros(n), steps, residual, ok, factor)
        fit.point = point if fit.converged else None
        return fit

    # Ball constraints: projected Newton ascent on the dual over nu >= 0 (study.core.balls).
    gamma2 = float(radius) ** 2
    feas_tol = (BALL_TOL if ball_tol is None else ball_tol) * gamma2
    nu = np.zeros(n) if multipliers is None else np.maximum(np.asarray(multipliers, float), 0.0)
    if not nu.any():
        # cheap start: shrink theta into the ball (keeps warm starts feasible-ish)
        norms = np.sqrt((theta * theta).sum(axis=1))  # = np.linalg.norm(theta, axis=1), without its overhead
        if (norms > radius).any():
            theta = theta * np.minimum(1.0, radius / np.maximum(norms, 1e-300))[:, None]
            theta -= theta.sum(axis=0) / n
            start = None  # the point was at the unshrunk theta
    ball = dict(radius=radius, base_quad=base_quad, abs_tol=abs_tol, feas_tol=feas_tol)
    fit = dual_ascent(data, theta, nu, lin=lin, lin_r=lin_r, max_steps=max_steps, max_dual_steps=max_dual_steps,
                      factor_hint=factor_hint, start=start, pending=pending, **ball)
    if not fit.converged and prox == 0.0 and multipliers is not None:
        # an exact opt1 problem from a warm start (the data identify theta, or the active balls of a
        # tie-broken point do): where the dual method stalls or fails (nu = 0 on an item can leave its
        # inner problem without a minimiser), Newton on the KKT system from the dual's last iterate;
        # if that fails too, the caller's fallback (never a cold restart from nu = 0, which on
        # near-separable data takes up to hours and fails: issue 27)
        # Its point is kept only where the second-order condition holds there (L plus the new
        # multipliers' curvature identifies theta): on separable data a point with |margins| ~ 25
        # meets the KKT tolerance without being the unique argmin the exact problem presumes.
        exact = active_set_newton(data, fit.theta, fit.nu, **ball)
        if exact.converged and _unique(data, exact.theta, base_quad + exact.nu):
            return _finish(exact.theta, theta_start, exact.nu, fit.steps + exact.steps, exact.residual, True,
                           exact.factor)
    elif not fit.converged and factor_hint is not None:  # a stale warm start can mislead: retry cold
        return _solve(data, theta_start, ridge=ridge, radius=radius, reference=reference, prox=prox,
                      tol=tol, max_steps=max_steps, max_dual_steps=max_dual_steps, ball_tol=ball_tol)
    theta, nu, residual, converged, last_factor = fit.theta, fit.nu, fit.residual, fit.converged, fit.factor
    point = fit.point
    if converged and prox > 0.0 and not np.any(nu) and last_factor is not None:
        polished, polished_residual, polished_point = _polish(data, theta, ridge, last_factor, abs_tol, start=point)
        # near-separable directions are held only by the tie-break term: keep it there
        if np.all(np.einsum("id,id->i", polished, polished) <= gamma2 + feas_tol):
            theta, residual, point = polished, polished_residual, polished_point
    elif converged and prox > 0.0 and _unique(data, theta, base_quad - prox + nu):
        # active balls make the argmin unique (the data plus the multipliers' curvature identify
        # theta): the tie-break is moot, so drop its term and solve opt1 exactly from the tie-broken
        # point and multipliers (Newton on the KKT system, then the dual method, then Newton on the
        # KKT system from the dual's last point); if that near-separable exact problem does not
        # converge, the tie-broken point is kept
        costs.add("exact_resolves")
        first = active_set_newton(data, theta, nu, **dict(ball, base_quad=base_quad - prox),
                                  max_iterations=EXACT_ACTIVE_SET_ITERATIONS)
        # kept only where the identification test holds at its own point with its own multipliers:
        # the tie-broken point's multipliers can make the test pass where the exact problem's argmin
        # is flat (an early step, theta(0) outside the balls), and a point of that flat set is no estimate
        if first.converged and _unique(data, first.theta, base_quad - prox + first.nu):
            return _finish(first.theta, theta_start, first.nu, fit.steps + first.steps, first.residual, True,
                           first.factor)
        exact = _solve(data, theta, ridge=ridge, radius=radius, prox=0.0, multipliers=nu, tol=tol,
                       max_steps=max_steps, max_dual_steps=max_dual_steps, factor_hint=last_factor, ball_tol=ball_tol)
        if exact.converged:
            return exact
        costs.add("exact_fallbacks")
    fit = _finish(theta, theta_start, nu, fit.steps, residual, converged, last_factor)
    fit.point = point if fit.converged else None
    return fit


def exact_nearest(data: ComparisonData, theta_start: np.ndarray, *, radius: float | None = None,
                  reference: np.ndarray | None = None, prox: float | None = None, multipliers=None,
                  tol: float | None = None, max_steps: int = 100, max_dual_steps: int = 100, factor_hint=None,
                  start=None, pending=None, rounds: int = EXACT_PROX_ROUNDS) -> FitResult:
    """Stage 1's estimate as its optimisation problem: the minimiser of L over Theta~ nearest
    ``reference`` (0 if None), to the KKT tolerances of :mod:`study.core.nearest`.

    1. A minimiser of L over Theta~ (the balls to the slack ``nearest.FEAS_TOL`` gamma^2): the
       tie-broken fit (``prox``: None the tie-break weight, 0 where the caller knows the data identify
       theta), then, until L's KKT residual (with the best nonnegative multipliers of the active
       balls) meets the tolerance, proximal-point rounds theta <- argmin L + eps/2 ||. - theta||^2
       over Theta~ with eps shrinking tenfold a round (at most ``rounds``): each a strictly convex
       problem :func:`_solve` computes; any minimiser has the margins u* of all of them.
    2. The projection of ``reference`` onto {theta in Theta~ : R theta = u*}
       (:func:`study.core.nearest.project`).

    ``converged`` is the KKT rule of the result, ``kkt_residual`` L's stationarity residual and
    ``multipliers`` L's multipliers of the balls there."""
    n, d = theta_start.shape
    comparisons = data.total_comparisons
    if tol is None:
        tol = DEFAULT_TOL
    abs_tol = tol * (1.0 + comparisons)
    reference = np.zeros((n, d)) if reference is None else reference
    if prox is None:  # not known to be identified: the shortcut where no ball binds (study.core.rowspace)
        design = nearest.design(data)
        got = rowspace.nearest_without_balls(data, design, to_reduced(reference - reference.mean(axis=0)).ravel(),
                                             radius, abs_tol, multipliers=multipliers)
        if got is not None:
            theta, beta, u, gradient, nu = got
            out = _finish(theta, theta_start, nu, 0, 0.0, True)
            out.point = Point(beta, u, gradient)
            return out
    fit = _solve(data, theta_start, radius=radius, reference=reference, prox=prox, multipliers=multipliers, tol=tol,
                 max_steps=max_steps, max_dual_steps=max_dual_steps, factor_hint=factor_hint, start=start,
                 pending=pending)
    if prox == 0.0 and fit.converged:  # the caller knows the data identify theta: the argmin is unique
        return fit
    steps = fit.newton_steps
    D = nearest.design(data)
    U, N = nearest.split(D, data.n_parameters)
    theta, nu, factor = fit.theta, fit.multipliers, fit.factor
    # the tie-broken fit's balls and multipliers are a start for Newton's method on L's KKT system
    # (nearest.refine: the balls exact, the range part b* with them); where that fails, proximal rounds
    # first (each a strictly convex problem _solve computes), then again
    refined, refined_nu, ok = nearest.refine(data, theta, nu, radius, abs_tol=abs_tol, basis=(D, U, N))
    eps = TIE_BREAK_WEIGHT * (1.0 + comparisons) / n
    for _ in range(rounds if not ok else 0):
        eps *= 0.1
        fit = _solve(data, theta, radius=radius, reference=theta, prox=eps, multipliers=nu if nu.any() else None,
                     tol=tol, max_steps=max_steps, max_dual_steps=max_dual_steps, factor_hint=factor)
        steps += fit.newton_steps
        theta, nu = fit.theta, fit.multipliers
        factor = fit.factor if fit.factor is not None else factor
        refined, refined_nu, ok = nearest.refine(data, theta, nu, radius, abs_tol=abs_tol, basis=(D, U, N))
        if ok:
            break
    theta = refined if ok else theta
    result = nearest.project(data, theta, reference, radius, abs_tol=abs_tol, basis=(D, U, N),
                             nu=refined_nu if ok else None)
    out = _finish(result.theta, theta_start, result.multipliers, steps + result.iterations,
                  result.residuals["stationarity"], result.converged, factor)
    if out.converged:
        beta = to_reduced(out.theta).ravel()
        u = data.reduced_margins(beta)
        out.point = Point(beta, u, data.reduced_gradient(u))
    return out


def _unique(data, theta, quad) -> bool:
    """Does L plus the per-item curvatures ``quad`` (ridge and ball multipliers) identify theta at
    ``theta``: the cheap necessary conditions first, then the dense test (:func:`identified`)."""
    held = quad > 0.0
    return (data.rank_bound() + data.dim * int(np.count_nonzero(held)) >= data.n_parameters  # else surely not
            and _free_directions_covered(data, quad)  # likewise, on the items without an active ball
            and identified(data, theta, quad))


def _free_directions_covered(data, nu) -> bool:
    """Could the data identify the directions no active ball holds (v_i = 0 where nu_i > 0, sum
    v = 0)?  If not, L plus the multipliers' curvature is singular there: necessary conditions
    for :func:`identified`, checked from the rows' edges alone (no factorisation): the rank bound
    over the edges that touch a free item, and no two free items whose rows together span fewer
    than d contexts (:meth:`ComparisonData.null_pair`: an exact null vector e_i (x) z - e_j (x) z)."""
    held = nu > 0.0
    bound, needed = data.restricted_rank_bound(held)
    if bound < needed:
        return False
    if data.null_pair(held) is not None:
        costs.add("null_vector_shortcuts")
        return False
    return True


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
    costs.add("identification_tests")
    matrix = reduced_hessian(data, data.margins(theta), quad)
    try:
        factor = cholesky(matrix)
    except LinAlgError:
        return False
    value = float(lapack.dpocon(factor, float(np.abs(matrix).sum(axis=0).max()))[0])
    decisions.threshold("stage 1 identified", value, rcond)
    return value > rcond


def _polish(data, theta, ridge, factor, tol, rounds: int = 4, start: Point | None = None):
    """Remove the tie-break term's O(eps) pull in identified directions: iterate
    theta <- theta - K_eps^{-1} grad(L + ridge/2 ||.||^2) with the factor K_eps of the regularised
    Hessian.  The gradient of L has no component in data-silent directions, so those keep their
    tie-broken values, while identified directions converge to the exact stationary point.
    ``start``, a :class:`Point` at theta (the tie-broken fit's last pass), saves the first pass.
    Returns theta, its residual, and the :class:`Point` there (its last pass, for the next refit)."""
    n, d = theta.shape
    if start is None:
        beta = to_reduced(theta).ravel()
        u = data.reduced_margins(beta)
        loss_gradient = data.reduced_gradient(u)
    else:
        beta, u, loss_gradient = start.beta, start.margins, start.loss_gradient
    best, best_residual = Point(beta, u, loss_gradient), np.inf
    for round_ in range(rounds + 1):
        reduced_grad = loss_gradient + ridge * beta if ridge else loss_gradient
        residual = float(np.abs(reduced_grad).max())
        if not residual < best_residual:  # diverging (e.g. a near-separable direction): stop
            break
        best, best_residual = Point(beta, u, loss_gradient), residual
        if residual <= tol or round_ == rounds:
            break
        beta = beta - factor.solve(reduced_grad)
        u = data.reduced_margins(beta)
        loss_gradient = data.reduced_gradient(u)
    return from_reduced(best.beta.reshape(n - 1, d)), best_residual, best


def _finish(theta, fallback, nu, steps, residual, ok, factor=None) -> FitResult:
    if not np.isfinite(theta).all():  # never hand a non-finite estimate to a policy
        theta = fallback - fallback.mean(axis=0)
        ok = False
    return FitResult(theta=theta, multipliers=nu, newton_steps=steps, kkt_residual=residual, converged=ok,
                     factor=factor)


def fit_btl(i, j, X, wins, m, n_items, *, ties=None, ridge: float = 0.0, radius: float | None = None,
            tie_break: str = "min_norm", reference=None, tol: float | None = None, exact: bool = False) -> np.ndarray:
    """Sum-to-zero (penalised, constrained) MLE of the contextual BTL model (paper eq. ``lik``).

    Parameters
    ----------
    i, j : array_like of int, shape (K,)
        Row k compares item ``i[k]`` with item ``j[k]`` (0-based, distinct).
    X : array_like, shape (K, d)
        The context of each row.
    wins : array_like, shape (K,)
        How many of row k's ``m`` comparisons ``j[k]`` won outright (whole numbers).
    m : int or array_like, shape (K,)
        Comparisons per row.
    n_items : int
        n, the number of items.
    ties : array_like, shape (K,), optional
        How many of row k's comparisons were ties (default none); a tie counts as half a win for
        each side (:mod:`study.core.outcomes`, the convention of every API).
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
        The KKT residual at which the Newton iterations stop, relative to the data: a number in
        (0, 1] (default 1e-11, 1e-10 with a ridge).
    exact : bool
        Without a ridge: the exact nearest argmin (the minimiser of L, over the balls if
        ``radius``, nearest ``reference``, or 0 with ``tie_break="min_norm"``;
        :func:`exact_nearest`, docs/core.md "Exact nearest argmin") instead of the tie-broken point.
        Up to 300 parameters ((n_items - 1) d).

    Returns
    -------
    ndarray, shape (n_items, d)
        theta, rows summing to zero.

    Raises
    ------
    ValueError
        Bad shapes or values (naming the argument), outcomes in the old form (halves in ``wins``:
        the message says how to convert), or sizes out of reach (with the estimated memory and time).
    study.core.separation.SeparableData
        (a ValueError) Without ``ridge`` or ``radius``, when the comparisons are separable: no
        finite MLE exists (:mod:`study.core.separation`); pass a ridge or a radius.

    Warns
    -----
    RuntimeWarning
        When the stopping rule is not reached; the message tells badly scaled contexts (rescale X)
        from nearly separable data (a ridge or a radius).

    Notes
    -----
    Rows with the same pair and context are summed into one first (exact:
    :mod:`study.core.aggregate`).  Without a radius, where the data (or the ridge) identify theta
    and at least ``BATCH_MIN_ROWS`` rows remain, the problem is solved by Newton's method over the
    arrays (:mod:`study.core.batch`, O(K d) memory) with the same stopping rule.

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
    wins, ties = outcomes.counted(wins, m, ties)
    ridge = check.real("ridge", ridge, low=0.0)
    if not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True or False, got {exact!r}")
    if exact and (n_items - 1) * X.shape[1] > nearest.MAX_PARAMETERS:
        raise ValueError(f"exact=True solves up to {nearest.MAX_PARAMETERS} parameters ((n_items - 1) d), "
                         f"got {(n_items - 1) * X.shape[1]}")
    if radius is not None:
        radius = check.real("radius", radius, low=0.0, low_open=True)
    if tol is not None:
        tol = check.tolerance("tol", tol)
    check_fit_size(n_items, X.shape[1], i.size, "fit_btl", compared=(i, j))  # issue 18: refusals before any work
    rows = aggregate(i, j, X, wins, ties, m)
    i, j, X, m = rows.i, rows.j, rows.X, rows.m
    wins = outcomes.score(rows.wins, rows.ties)  # what the row store takes: a tie half a win
    use_batch = radius is None and i.size >= BATCH_MIN_ROWS
    # separable data are refused up front (one linear program), or, for large batch fits, after the
    # fit unless it certifies that they are not (study.core.batch.not_separable): the program costs
    # seconds to minutes at 10^5 rows x 10
    separation_first = ridge == 0.0 and radius is None and (not use_batch or X.size <= batch.SEPARATION_BEFORE_FIT)
    if separation_first:
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
    result = None
    if use_batch:  # identified: the unique minimiser, whatever the tie-break
        prepared = batch.Rows(i, j, X, rows.wins, rows.ties, m, n_items)
        result = batch.fit(prepared, ridge=ridge, tol=tol)
        if result is not None and ridge == 0.0 and not separation_first and not batch.certify(result, prepared):
            refuse_if_separable(i, j, X, wins, m, n_items)
    if result is None:
        if ridge == 0.0 and radius is None and not separation_first:
            refuse_if_separable(i, j, X, wins, m, n_items)
        data = ComparisonData.from_rows(i, j, X, wins, m, n_items)
        result = solve(data, start, ridge=ridge, radius=radius, reference=reference, tol=tol, exact=exact)
    if not result.converged:
        warnings.warn(f"fit_btl did not reach its stopping rule (KKT residual {result.kkt_residual:.3g}): "
                      f"{nonconvergence_advice(X)}", RuntimeWarning, stacklevel=2)
    return result.theta
