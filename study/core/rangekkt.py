"""Stage 1's exact nearest argmin where the balls bind: Newton's method on the KKT system in the
coordinates of the design's range.

The estimate is defined in :mod:`study.core.nearest`: among the minimisers of L over
Theta~ = {theta : ||theta_i|| <= gamma}, the one nearest theta_ref.  :mod:`study.core.rowspace`
computes it where the point it reaches lies inside every ball; this module computes it where a
ball binds, in particular where a row is *separated* (all of its m comparisons won by one side):
L keeps falling as that row's margin grows, so the balls stop it, and L's slope there,
m e^-|u|, is of the order of 1e-11 at the estimate.

**Why these coordinates.**  With the kept decomposition D = C Q' (:class:`study.core.rowspace.
RowSpace`: C_P the pivots' lower-triangular coordinates, A the dependent rows' combinations of the
pivots' margins), write beta = W u + N c with W = Q C_P^-1 and N an orthonormal basis of the
directions the rows leave free.  Then the pivots' margins are u itself, L depends on u alone,

    L(u) = sum_P l_k(u_k) + sum_dep l_j(A_j u),   l_k(u) = m_k log(1 + e^u) - w_k u,

and the balls are ellipsoids in y = (u, c): theta_i = G_i y with G = E [W N].  A separated pivot
that no dependent row involves has the gradient component l_k'(u_k) = (m_k - w_k) sigma(u_k) -
w_k sigma(-u_k) *alone*, computed without cancellation: its margin is resolved to relative
precision, where in beta coordinates the other rows' rounding (1e-16 of O(1) terms) would swamp
its 1e-11.

**The KKT tolerance** is stated so that it pins the estimate whatever the scale of L's slope: the
Newton step of the KKT system (L's stationarity over the active balls, their slack) at the
returned point moves no margin by more than ``STEP_TOL`` (1 + ||u||_inf) and no coordinate c by
more than ``STEP_TOL`` (1 + ||c||_inf) (Newton's step is the distance to the solution to second
order, and it is invariant to the scale of L); the multipliers are >= 0 and every ball holds to
``nearest.FEAS_TOL`` gamma^2.  An absolute stationarity tolerance does not pin it: at |u| ~ 25 a
whole range of margins passes 1e-9, across which theta moves by O(1) (docs/core.md).  Double
precision sets a floor where the balls' multipliers fall to ~1e-15 (margins beyond ~30): there the
rule holds at points up to ~3e-7 apart (tests/core/test_rangekkt.py measures it), and beyond it
(margins ~37, a multiplier of 1e-16 that ``ZERO_MULTIPLIER`` counts as 0) the rule evaluated again at
the returned point can fail (docs/core.md).

**The nearest point.**  Every minimiser of L over Theta~ minimises the Lagrangian L + sum nu_i
(||theta_i||^2 - gamma^2) / 2, which is strictly convex in (u, theta_i for nu_i > 0): those are the
same at every minimiser.  So the estimate is: u = u*, each item with nu_i > 0 at its theta_i*, and
c the projection of N' beta_ref onto the rest of the balls within the directions that move no such
item (``nearest._project_dual``).  A multiplier below ``ZERO_MULTIPLIER`` of the largest is 0 (its
rounding); one between that and ``DEGENERATE`` of the largest leaves the set of fixed items
undecided: no answer.

The method: Newton's method on the KKT system from the previous estimate with its active balls and
multipliers (``WARM_ITERATIONS`` for each active set); where that fails, a primal-dual
interior-point path (:func:`_interior`) from the finite margins at their
minimiser over the range (or the reference's, where those leave a ball), scaled into the balls;
once every ball is clearly active or not, Newton's method on the KKT system with the active balls
as equalities (:func:`_active_set_newton`) finishes to the KKT rule.  Where the interior-point path
does not get there, a log-barrier path with the same finish (:func:`_barrier_path`, slower and
sure: every stage centred); where neither does, no answer (the caller's general solver).
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import LinAlgError, LinAlgWarning, cho_factor, cho_solve, lu_factor, lu_solve, solve_triangular
from scipy.special import expit

from . import nearest

STEP_TOL = 1e-9  # the KKT rule: Newton's step at the estimate, relative to 1 + the coordinates' size
ZERO_MULTIPLIER = 1e-10  # a multiplier within this of 0, relative to the largest: 0 (its rounding)
DEGENERATE = 1e-6  # a multiplier in (ZERO_MULTIPLIER, DEGENERATE] times the largest: active or not is undecided
MAX_ITERATIONS = 80  # Newton iterations for each active set (a budget: beyond it, no answer)
MAX_CHANGES = 12  # active-set changes (likewise)
IPM_ITERATIONS = 200  # interior-point iterations (a budget)
STALL_WINDOW = 20  # ... ended early where these many iterations did not cut the complementarity tenfold
CLASSIFIED = 1e-3  # every ball's min(s_i / gamma^2, nu_i / max nu) below this: a finish is tried (again at each tenfold)
POLISH_ATTEMPTS = 6  # active-set finishes tried along the interior path
BARRIER_STAGES = 40  # the barrier path's stages, mu cut tenfold each
BARRIER_NEWTON = 50  # Newton iterations to centre one stage
POLISH_ITERATIONS = 12  # Newton iterations of an active-set finish
WARM_ITERATIONS = 8  # ... from the previous estimate's active set


def row_terms(u, w, m):
    """l'(u) = m sigma(u) - w (without cancellation) and l''(u) = m sigma(u) sigma(-u) of each row."""
    s, f = expit(u), expit(-u)
    return (m - w) * s - w * f, m * s * f


class Problem:
    """L over the balls in the coordinates y = (u, c) of the module docstring."""

    @classmethod
    def of(cls, space, data, radius):
        t = data.t
        return cls(space, data.wins[:t].astype(float), data.m[:t].astype(float), data.n_items, data.dim,
                   float(radius) ** 2)

    def __init__(self, space, w, m, n, d, gamma2):
        r, p = space.rank, space.basis.shape[0]
        q = space.basis[:, :r]
        self.r, self.p, self.n, self.d, self.gamma2 = r, p, n, d, gamma2
        # W' = C_P^-T Q': W = Q C_P^-1 maps pivot margins to beta
        self.W = solve_triangular(space.pivot_coords[:r, :r], q.T, lower=True, trans="T").T if r else np.zeros((p, 0))
        self.N = np.linalg.qr(q, mode="complete")[0][:, r:] if r else np.eye(p)
        E = nearest._selectors(n, d)
        self.G = E @ np.hstack([self.W, self.N])  # theta_i = G_i y
        self.GtG = self.G.swapaxes(1, 2) @ self.G
        pivots = np.asarray(space.pivots, dtype=np.intp)
        dependent = np.asarray(space.dependent, dtype=np.intp)
        self.w_p, self.m_p = w[pivots], m[pivots]
        self.w_n, self.m_n = w[dependent], m[dependent]
        self.A = space.combinations[: dependent.size, :r]

    def beta(self, y):
        return self.W @ y[: self.r] + self.N @ y[self.r:]

    def thetas(self, y):
        return self.G @ y

    def slack(self, y):
        v = self.thetas(y)
        return 0.5 * ((v * v).sum(axis=1) - self.gamma2)

    def loss_terms(self, u, hessian=True):
        """L's gradient and Hessian in u (the Hessian None unless ``hessian``)."""
        g_p, h_p = row_terms(u, self.w_p, self.m_p)
        v = self.A @ u
        g_n, h_n = row_terms(v, self.w_n, self.m_n)
        g = g_p + self.A.T @ g_n
        return (g, np.diag(h_p) + self.A.T @ (h_n[:, None] * self.A)) if hessian else (g, None)

    def residual(self, y, nu, active, hessian=True):
        """F = (grad_y of the Lagrangian, slack of the ``active`` balls with multipliers ``nu``) and
        its Jacobian (if ``hessian``)."""
        r, p = self.r, self.p
        g, H = self.loss_terms(y[:r], hessian)
        v = self.thetas(y)
        cols = nearest.adjoint(self.G[active], v[active]).T  # grad of each active slack, (p, |A|)
        F = np.concatenate([np.concatenate([g, np.zeros(p - r)]) + cols @ nu,
                            0.5 * ((v[active] ** 2).sum(axis=1) - self.gamma2)])
        if not hessian:
            return F, None
        curvature = np.tensordot(nu, self.GtG[active], axes=1)
        curvature[:r, :r] += H
        k = len(nu)
        J = np.zeros((p + k, p + k))
        J[:p, :p] = curvature
        J[:p, p:] = cols
        J[p:, :p] = cols.T
        return F, J


def _factor(J):
    """A solver x = J^-1 b for the Newton system (symmetric equilibration first: the separated
    margins' rows are ~1e-11 next to O(1) rows); a pseudo-inverse where LU finds it singular (the
    directions of c no active ball reaches: the minimum-norm step leaves them)."""
    s = 1.0 / np.sqrt(np.maximum(np.abs(J).max(axis=1), 1e-300))
    Js = s[:, None] * J * s[None, :]
    if not np.all(np.isfinite(Js)):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", LinAlgWarning)
            factors = lu_factor(Js, check_finite=False)
        diagonal = np.abs(np.diag(factors[0]))
        if diagonal.min(initial=1.0) <= 1e-13 * diagonal.max(initial=1.0):
            raise LinAlgWarning("near-singular")
        return lambda b: s * lu_solve(factors, s * b, check_finite=False)
    except (LinAlgError, LinAlgWarning, ValueError):
        try:
            inverse = np.linalg.pinv(Js, rcond=1e-14)
        except np.linalg.LinAlgError:
            return None
        return lambda b: s * (inverse @ (s * b))


def _small(step, y, r):
    """The KKT rule's step test (module docstring)."""
    u, c = y[:r], y[r:]
    return (float(np.abs(step[:r]).max(initial=0.0)) <= STEP_TOL * (1.0 + float(np.abs(u).max(initial=0.0)))
            and float(np.abs(step[r:]).max(initial=0.0)) <= STEP_TOL * (1.0 + float(np.abs(c).max(initial=0.0))))


def _active_set_newton(problem, y, active_mask, feas, nu_start=None, max_iterations=MAX_ITERATIONS):
    """Newton's method on the KKT system with the balls of ``active_mask`` as equalities, from ``y``
    (the other balls feasible there): each step damped by the natural monotonicity test (Deuflhard
    2004, NLEQ-ERR: the simplified Newton correction at the trial point shorter than the step by the
    factor 1 - length / 4; affine invariant, so blind to the 1e-11 scale of separated rows), then cut
    where it would leave another ball (which joins); at a solution with a negative multiplier the
    most negative leaves.  ``max_iterations`` Newton steps for each active set, at most
    ``MAX_CHANGES`` changes.  Returns y and the multipliers where the KKT rule holds (module
    docstring), else (None, None)."""
    p, n = problem.p, problem.n
    nu_full = np.zeros(n) if nu_start is None else np.where(active_mask, nu_start, 0.0)
    changes = iterations = 0
    while iterations < max_iterations:
        iterations += 1
        active = np.flatnonzero(active_mask)
        F, J = problem.residual(y, nu_full[active], active)
        solver = _factor(J)
        if solver is None:
            return None, None
        step = -solver(F)
        if not np.all(np.isfinite(step)):
            return None, None
        if _small(step[:p], y, problem.r) and float(np.abs(F[p:]).max(initial=0.0)) <= feas:
            y = y + step[:p]
            nu_full[active] += step[p:]
            largest = float(nu_full[active].max(initial=0.0))
            zero = np.abs(nu_full[active]) <= ZERO_MULTIPLIER * largest  # rounding of a multiplier that is 0
            if zero.any():
                active_mask[active[zero]] = False
                nu_full[active[zero]] = 0.0
            if np.any(nu_full[active] < 0.0):
                changes += 1
                active_mask[active[np.argmin(nu_full[active])]] = False
                nu_full[~active_mask] = 0.0
                if changes > MAX_CHANGES:
                    return None, None
                iterations = 0
                continue
            slack = problem.slack(y)
            if np.any(slack[~active_mask] > feas):
                return None, None
            return y, nu_full
        size = float(np.abs(step[:p]).max(initial=0.0))
        length = 1.0
        for _ in range(40):
            trial_F = problem.residual(y + length * step[:p], nu_full[active] + length * step[p:], active,
                                       hessian=False)[0]
            correction = -solver(trial_F)
            if np.all(np.isfinite(correction)) and float(np.abs(correction[:p]).max(initial=0.0)) <= \
                    (1.0 - 0.25 * length) * size:
                break
            length *= 0.5
        else:
            return None, None
        # the ratio test: the first inactive ball the step would leave stops it, and joins
        move = problem.G @ step[:p]
        limits = np.where(active_mask, np.inf, _ball_limits(problem.thetas(y), move, problem.gamma2))
        blocking = int(np.argmin(limits))
        if limits[blocking] < length:
            length = float(limits[blocking])
            active_mask[blocking] = True
            changes += 1
            if changes > MAX_CHANGES:
                return None, None
            iterations = 0
        y = y + length * step[:p]
        nu_full[active] += length * step[p:]
    return None, None


def _loss_change(problem, u, du):
    """L(u + du) - L(u), each row's change of l(u) = (m - w) softplus(u) + w softplus(-u) as
    (m - w) log1p(sigma(u) expm1(h)) + w log1p(sigma(-u) expm1(-h)) (h its margin's change): exact to
    its own rounding, where a difference of two rounded losses would carry 1e-16 of each row's O(1)
    loss and hide a separated row's change of 1e-14."""
    total = 0.0
    for margins, change, w, m in ((u, du, problem.w_p, problem.m_p),
                                  (problem.A @ u, problem.A @ du, problem.w_n, problem.m_n)):
        total += float(np.sum((m - w) * np.log1p(expit(margins) * np.expm1(change))
                              + w * np.log1p(expit(-margins) * np.expm1(-change))))
    return total


def _ball_limits(theta, move, gamma2):
    """The largest t >= 0 with ||theta_i + t move_i|| <= gamma, per item (inf where move_i = 0)."""
    a = (move * move).sum(axis=1)
    b = (theta * move).sum(axis=1)
    c = (theta * theta).sum(axis=1) - gamma2
    limits = np.full(theta.shape[0], np.inf)
    moving = a > 1e-300
    limits[moving] = (-b[moving] + np.sqrt(np.maximum(b[moving] ** 2 - a[moving] * c[moving], 0.0))) / a[moving]
    return np.maximum(limits, 0.0)


def _inward(problem, y, fraction):
    """``y`` scaled so that every item lies within ``fraction`` of gamma^2 (theta is linear in y: one
    scaling moves every item inward), and its thetas."""
    theta = problem.thetas(y)
    largest = float((theta * theta).sum(axis=1).max())
    if largest > fraction * problem.gamma2:
        y = y * np.sqrt(fraction * problem.gamma2 / largest)
        theta = problem.thetas(y)
    return y, theta


def _tapia(slack_before, nu_before, slack, nu):
    """The active set by Tapia's indicators (El-Bakry, Tapia and Zhang 1994): along a path to the
    solution an active ball's slack shrinks with mu while its multiplier settles, an inactive ball's
    the other way round.  None unless every ball is clearly one or the other (the larger ratio at
    least 0.5, the smaller at most 0.3)."""
    rs, rn = slack / slack_before, nu / nu_before
    if np.all((np.maximum(rs, rn) >= 0.5) & (np.minimum(rs, rn) <= 0.3)):
        return rs < rn
    return None


def _interior(problem, y, feas):
    """A primal-dual interior-point path to the minimiser from ``y`` (scaled into the balls): Newton's
    method on grad L + sum_i nu_i G_i' theta_i = 0, nu_i s_i = mu (s_i = (gamma^2 - ||theta_i||^2) / 2 > 0),
    the multipliers eliminated, steps cut to keep s and nu positive (fraction 0.995 to the boundary),
    mu a tenth of the mean complementarity a step (half where the last step was short).  Once every
    ball is clearly active or not (s_i / gamma^2 or nu_i / max nu below ``CLASSIFIED``),
    :func:`_active_set_newton` finishes from there with those balls and multipliers.  Returns (y, nu)
    where the KKT rule holds, else (None, None)."""
    r, p, gamma2 = problem.r, problem.p, problem.gamma2
    y, theta = _inward(problem, y, 0.9)
    slack = 0.5 * (gamma2 - (theta * theta).sum(axis=1))
    g = problem.loss_terms(y[:r], hessian=False)[0]
    cols = nearest.adjoint(problem.G, theta).T
    force = float(np.sqrt((cols * cols).sum(axis=0)).max())
    mu = max(float(np.abs(g).max(initial=0.0)) * float(slack.min()) / max(force, 1e-300), 1e-300)
    nu = mu / slack
    sigma = 0.1
    attempts, next_attempt = 0, CLASSIFIED
    previous = None
    history = []  # the mean complementarity at each iteration
    for iteration in range(IPM_ITERATIONS):
        history.append(float(np.mean(nu * slack)))
        if iteration >= STALL_WINDOW and history[-1] > 0.1 * history[-1 - STALL_WINDOW]:
            return None, None  # jammed at a ball (short steps, mu barely falling): the barrier path answers
        largest_nu = float(nu.max())
        classified = np.minimum(slack / gamma2, nu / largest_nu)
        if float(classified.max()) <= next_attempt and attempts < POLISH_ATTEMPTS:
            attempts += 1
            next_attempt = 0.1 * float(classified.max())
            active = slack / gamma2 < nu / largest_nu
            got = _active_set_newton(problem, y, active, feas, nu_start=nu, max_iterations=POLISH_ITERATIONS)
            if got[0] is not None:
                return got
        if attempts < POLISH_ATTEMPTS and previous is not None and float(classified.max()) <= 0.05:
            active = _tapia(*previous, slack, nu)
            if active is not None:  # e.g. no ball binds: every multiplier falls with mu, none is ever "largest"
                attempts += 1
                got = _active_set_newton(problem, y, active, feas, nu_start=nu, max_iterations=POLISH_ITERATIONS)
                if got[0] is not None:
                    return got
        g, H = problem.loss_terms(y[:r])
        target = sigma * history[-1]
        M = np.tensordot(nu, problem.GtG, axes=1) + (cols * (nu / slack)) @ cols.T
        M[:r, :r] += H
        rhs = -(np.concatenate([g, np.zeros(p - r)]) + cols @ (target / slack))
        scale = 1.0 / np.sqrt(np.maximum(np.diag(M), 1e-300))
        try:
            dy = scale * cho_solve(cho_factor(scale[:, None] * M * scale[None, :]), scale * rhs)
        except (LinAlgError, ValueError):
            return None, None
        dnu = (target - nu * slack + nu * (cols.T @ dy)) / slack
        if not (np.all(np.isfinite(dy)) and np.all(np.isfinite(dnu))):
            return None, None
        # fraction to the boundary: s(a) = s - a c'dy - a^2 ||G dy||^2 / 2 >= 0.005 s
        move = problem.G @ dy
        a2 = 0.5 * (move * move).sum(axis=1)
        b = (theta * move).sum(axis=1)
        c = -0.995 * slack
        roots = np.full(len(slack), np.inf)
        quad = a2 > 1e-300
        disc = np.maximum(b * b - 4.0 * a2 * c, 0.0)
        roots[quad] = (-b[quad] + np.sqrt(disc[quad])) / (2.0 * a2[quad])
        linear = ~quad & (b > 0.0)
        roots[linear] = -c[linear] / b[linear]
        step_p = min(1.0, float(roots.min()))
        shrinking = dnu < 0.0
        step_d = min(1.0, float((-0.995 * nu[shrinking] / dnu[shrinking]).min(initial=np.inf)))
        length = min(step_p, step_d)  # one length: the complementarity pairs move together
        # backtracking on the barrier merit L - target sum log s (the primal-dual direction descends on
        # it where M is positive definite), L's change summed row by row (_loss_change)
        slope = -float(rhs @ dy)  # the merit's gradient is g + sum_i target / s_i G_i' theta_i = -rhs
        if slope < 0.0:
            for _ in range(30):
                ds = -length * b - length * length * a2
                change = _loss_change(problem, y[:r], length * dy[:r]) - target * float(np.sum(np.log1p(ds / slack)))
                if change <= 1e-4 * length * slope:
                    break
                length *= 0.5
        step_p = step_d = length
        y = y + step_p * dy
        previous = (slack, nu) if length >= 0.9 and sigma <= 0.1 else None  # mu cut tenfold: indicators apply
        nu = nu + step_d * dnu
        theta = problem.thetas(y)
        slack = 0.5 * (gamma2 - (theta * theta).sum(axis=1))
        if np.any(slack <= 0.0):  # at a ball to its rounding: the finish decides
            active = slack / gamma2 < nu / float(nu.max())
            return _active_set_newton(problem, y, active, feas, nu_start=nu, max_iterations=POLISH_ITERATIONS)
        # a short step: a ball approached with a multiplier far below the path's mu / s_i is run into at
        # the fraction to the boundary, step after step; its multiplier is raised to a tenth of the path's
        # (IPOPT's safeguard, Waechter and Biegler 2006, eq. 16, applied where it binds)
        if step_p < 0.1:
            nu = np.maximum(nu, 0.1 * target / slack)
        cols = nearest.adjoint(problem.G, theta).T
        sigma = 0.1 if step_p > 0.5 else (0.5 if step_p > 0.1 else 0.9)
    return None, None


def _centre(problem, y, mu):
    """Newton's method on L(u) - mu sum_i log s_i(y) (s_i = (gamma^2 - ||theta_i||^2) / 2 > 0) from a
    strictly feasible ``y``, to a Newton decrement of 0.1 mu (centred in the barrier's own units);
    Armijo on the objective's change, summed row by row and ball by ball (see :func:`_loss_change`).
    Returns y, or None where a step fails."""
    r, p, gamma2 = problem.r, problem.p, problem.gamma2
    for _ in range(BARRIER_NEWTON):
        u = y[:r]
        theta = problem.thetas(y)
        slack = 0.5 * (gamma2 - (theta * theta).sum(axis=1))
        g, H = problem.loss_terms(u)
        cols = nearest.adjoint(problem.G, theta).T  # grad of -s_i
        grad = np.concatenate([g, np.zeros(p - r)]) + cols @ (mu / slack)
        hess = np.tensordot(mu / slack, problem.GtG, axes=1) + (cols * (mu / slack ** 2)) @ cols.T
        hess[:r, :r] += H
        scale = 1.0 / np.sqrt(np.maximum(np.diag(hess), 1e-300))
        try:
            step = -scale * cho_solve(cho_factor(scale[:, None] * hess * scale[None, :]), scale * grad)
        except (LinAlgError, ValueError):
            return None
        decrement = -float(grad @ step)
        if not np.isfinite(decrement):
            return None
        if decrement <= 0.1 * mu:
            return y
        move = problem.G @ step
        # the damped Newton step of self-concordant barriers, 1 / (1 + lambda) with lambda^2 = decrement / mu
        # (the barrier's own units), and never past 90% of the way to a ball
        length = min(1.0 / (1.0 + np.sqrt(decrement / mu)), 0.9 * float(_ball_limits(theta, move, gamma2).min()))
        for _ in range(60):
            change = _loss_change(problem, u, length * step[:r])
            dm = length * move
            ds = -(theta * dm).sum(axis=1) - 0.5 * (dm * dm).sum(axis=1)
            change -= mu * float(np.sum(np.log1p(ds / slack)))
            if change <= -0.25 * length * decrement:
                break
            length *= 0.5
        else:
            return y  # no decrease the rounding can see: as centred as it gets
        y = y + length * step
    return y


def _barrier_path(problem, y, feas):
    """A log-barrier path to the minimiser from ``y`` (scaled into the balls), its parameter mu cut
    tenfold a stage; once every ball is clearly active or not (as in :func:`_interior`),
    :func:`_active_set_newton` finishes from there with those balls and multipliers mu / s_i.  Returns (y, nu) where the KKT rule holds, else (None, None)."""
    gamma2 = problem.gamma2
    y, theta = _inward(problem, y, 0.98)
    slack = 0.5 * (gamma2 - (theta * theta).sum(axis=1))
    g = problem.loss_terms(y[: problem.r], hessian=False)[0]
    mu = max(float(np.abs(g).max(initial=0.0)) * gamma2, 1e-300)  # the barrier dominates at first: a centred start
    next_attempt, previous = CLASSIFIED, None
    for _ in range(BARRIER_STAGES):
        y = _centre(problem, y, mu)
        if y is None:
            return None, None
        theta = problem.thetas(y)
        slack = 0.5 * (gamma2 - (theta * theta).sum(axis=1))
        nu = mu / slack
        classified = float(np.minimum(slack / gamma2, nu / nu.max()).max())
        active = _tapia(*previous, slack, nu) if previous is not None else None
        if active is None and classified <= next_attempt:
            next_attempt = 0.1 * classified
            active = slack / gamma2 < nu / nu.max()
        if active is not None:
            got = _active_set_newton(problem, y, active, feas, nu_start=nu, max_iterations=POLISH_ITERATIONS)
            if got[0] is not None:
                return got
        previous = (slack, nu)
        mu *= 0.1
    return None, None


def solve_separated(space, data, start_u, beta_start, beta_ref, radius, multipliers=None):
    """The exact nearest argmin (module docstring) from the pivots' margins ``start_u`` (the finite
    ones at their minimiser over the range) and the free coordinates c of ``beta_start``, or first
    from ``beta_start`` itself with the balls of positive ``multipliers`` active (the previous
    estimate's); None where the KKT rule is not met or the active set is undecided.  Returns (beta, nu)."""
    problem = Problem.of(space, data, radius)
    r, p, gamma2 = problem.r, problem.p, problem.gamma2
    feas = nearest.FEAS_TOL * max(gamma2, 1.0)
    c_start = problem.N.T @ beta_start
    own = np.concatenate([space.pivot_rows[:r] @ beta_start, c_start])  # beta_start itself, in y
    y0 = np.concatenate([start_u, c_start])
    if np.any(problem.slack(y0) > feas):  # the finite margins' minimiser leaves a ball: from beta_start's own
        y0 = own
    y, nu_full = None, None
    if multipliers is not None and np.any(np.asarray(multipliers) > 0.0):
        # the previous estimate's balls and multipliers, from beta_start's own point: consecutive refits
        # where the balls bind differ by one row
        active = np.asarray(multipliers) > 0.0
        if np.all(problem.slack(own)[~active] <= feas):
            y, nu_full = _active_set_newton(problem, own, active.copy(), feas, nu_start=np.asarray(multipliers, float),
                                            max_iterations=WARM_ITERATIONS)
    if y is None:
        y, nu_full = _interior(problem, y0, feas)
    if y is None:  # the slow and sure way
        y, nu_full = _barrier_path(problem, y0, feas)
    if y is None:
        return None
    largest = float(nu_full.max(initial=0.0))
    if np.any((nu_full > 0.0) & (nu_full <= DEGENERATE * largest)):
        return None
    held = nu_full > 0.0
    # the projection: c moves only where no held item moves, within the other balls
    c_star = y[r:]
    if held.any():
        block = problem.G[held][:, :, r:].reshape(-1, p - r)
        _, sv, vt = np.linalg.svd(block, full_matrices=True)
        rank = int(np.count_nonzero(sv > 1e-10 * sv[0])) if sv.size and sv[0] > 0.0 else 0
        free = vt[rank:].T  # (p - r, k) in c coordinates
    else:
        free = np.eye(p - r)
    z_ref = free.T @ (problem.N.T @ beta_ref - c_star)
    theta_star = problem.thetas(y)
    others = ~held
    B = problem.G[others][:, :, r:] @ free
    z = np.zeros(free.shape[1])
    if free.shape[1]:
        reach = np.abs(B).max(axis=(1, 2), initial=0.0) > 1e-12
        if reach.any():
            z, _, _, converged = nearest._project_dual(z_ref, theta_star[others][reach], B[reach], gamma2, feas,
                                                       nearest.MAX_ITERATIONS)
            if not converged:
                return None
        else:
            z = z_ref
    y = np.concatenate([y[:r], c_star + free @ z])
    beta = problem.beta(y)
    return beta, nu_full


def kkt_rule(space, data, beta, nu, radius) -> dict:
    """The KKT rule of the module docstring at ``beta`` with L's multipliers ``nu``: the Newton step of
    the KKT system (the balls of positive ``nu`` as equalities) in the margins relative to
    1 + ||u||_inf (``step_u``) and in c relative to 1 + ||c||_inf (``step_c``), the largest ball slack
    (``feasibility``), the smallest multiplier (``min_nu``), and ``holds``."""
    problem = Problem.of(space, data, radius)
    r, p, gamma2 = problem.r, problem.p, problem.gamma2
    y = np.concatenate([space.pivot_rows[:r] @ beta, problem.N.T @ beta])
    nu = np.asarray(nu, float)
    active = np.flatnonzero(nu > 0.0)
    F, J = problem.residual(y, nu[active], active)
    solver = _factor(J)
    step = -solver(F) if solver is not None else np.full(p + active.size, np.inf)
    out = dict(step_u=float(np.abs(step[:r]).max(initial=0.0)) / (1.0 + float(np.abs(y[:r]).max(initial=0.0))),
               step_c=float(np.abs(step[r:p]).max(initial=0.0)) / (1.0 + float(np.abs(y[r:]).max(initial=0.0))),
               feasibility=float(max(problem.slack(y).max(), 0.0)), min_nu=float(nu.min(initial=0.0)))
    out["holds"] = bool(out["step_u"] <= STEP_TOL and out["step_c"] <= STEP_TOL and out["min_nu"] >= 0.0
                        and out["feasibility"] <= nearest.FEAS_TOL * max(gamma2, 1.0))
    return out
