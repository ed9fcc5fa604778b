"""Stage 1's estimate as its optimisation problem: the exact nearest argmin.

Among the minimisers of L over Theta~ = {theta in Theta : ||theta_i|| <= gamma} (Theta the sum-zero
space; no balls without a radius), the one nearest theta_ref.  L depends on theta only through the
margins u = R theta and is strictly convex in u, so the minimisers form the convex set
{theta in Theta~ : R theta = u*} with u* unique, and the estimate is the projection of theta_ref onto
it: unique, with no step count in its definition.

In reduced coordinates theta = Q beta (Q the Helmert contrasts) with the reduced design D (the rows
r_k = (Q[b_k] - Q[a_k]) (x) x_k), split beta = U b + N c by the right singular vectors of D: U spans
the directions the rows identify, N the rest (the numerical rank: singular values above
``sqrt(RANK_RCOND)`` times the largest, i.e. the identification test's reciprocal condition 1e-10
applied to the design's Gram D'D).  Every minimiser has the same b = b*, so the estimate is computed
in two exact stages, each Newton's method on its KKT system with a semismooth (primal-dual active
set) treatment of the balls, steps by least squares (minimum norm: the first problem is singular
where the data leave theta unidentified) and a backtracking line search on the KKT residual:

1. any minimiser beta^ of L over Theta~ (from the caller's start, the tie-broken fit), b* = U' beta^;
2. c* = argmin 1/2 ||c - N' beta_ref||^2 subject to ||E_i (U b* + N c)|| <= gamma (E_i picks theta_i),
   a strictly convex problem (feasible: c = N' beta^).

Its KKT conditions, checked at the returned point (:func:`kkt`): feasibility (||theta_i||^2 <= gamma^2
+ 2 feas_tol); stationarity of L over Theta~, Q'(grad L + sum_i nu_i e_i (x) theta_i) = 0 with
nu >= 0 and nu_i = 0 off the active balls (||.||_inf <= abs_tol, the solver's); stationarity of the
projection, N'(beta - beta_ref + sum_i omega_i E_i' theta_i) = 0 with omega >= 0 likewise
(||.||_inf <= ``NEAREST_TOL`` (1 + ||beta_ref||_inf)); the range part R theta = u* is b = b*.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, LinAlgWarning, cho_factor, cho_solve, solve
from scipy.optimize import nnls
from scipy.special import expit

from .contrasts import basis, from_reduced, to_reduced

RANK_RCOND = 1e-10  # a unit direction v is identified where ||D v||^2 > RANK_RCOND ||D||_2^2
NEAREST_TOL = 1e-10  # the projection's stationarity, relative to 1 + ||beta_ref||_inf
FEAS_TOL = 1e-10  # ball slack (||theta_i||^2 - gamma^2) / 2 allowed, relative to gamma^2
NULL_DAMPING = 1e-9  # the Levenberg term of refine's steps in unidentified directions, relative
MAX_ITERATIONS = 100  # Newton iterations of each stage (a budget: beyond it, not converged)
MAX_PARAMETERS = 300  # dense algebra in (n-1) d: the large problems keep the tie-broken path


@dataclass
class NearestFit:
    theta: np.ndarray
    multipliers: np.ndarray  # nu: L's multipliers of the balls at theta
    nearest_multipliers: np.ndarray  # omega: the projection's multipliers
    rank: int  # numerical rank of the reduced design
    iterations: int
    converged: bool
    residuals: dict


def design(data) -> np.ndarray:
    """The reduced design D, (t, (n-1) d)."""
    if data.design is not None:
        return data.design[: data.t]
    p = data.n_parameters
    return np.array([data.reduced_row(k) for k in range(data.t)]).reshape(data.t, p)


def split(D: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases (U, N) of the identified and the unidentified directions of D."""
    if D.shape[0] == 0:
        return np.zeros((p, 0)), np.eye(p)
    _, s, vt = np.linalg.svd(D, full_matrices=True)
    rank = int(np.count_nonzero(s > np.sqrt(RANK_RCOND) * s[0])) if s[0] > 0.0 else 0
    return vt[:rank].T, vt[rank:].T


def _selectors(n: int, d: int) -> np.ndarray:
    """E, (n, d, (n-1) d): theta_i = E[i] beta."""
    q = basis(n)
    return np.einsum("ij,lm->iljm", q, np.eye(d)).reshape(n, d, (n - 1) * d)


def adjoint(B, v):
    """(n, k): row i is B_i' v_i (B (n, d, k), v (n, d)), as batched products."""
    return np.matmul(v[:, None, :], B)[:, 0, :]


def _projected_slack(omega, h) -> float:
    return float(np.abs(np.where(omega > 0.0, h, np.maximum(h, 0.0))).max(initial=0.0))


def _project_dual(c_ref, a, B, gamma2, feas_tol, max_iterations, omega_limit=np.inf):
    """min 1/2 ||c - c_ref||^2 s.t. h_i(c) = (||a_i + B_i c||^2 - gamma2) / 2 <= 0, by projected Newton
    ascent (Bertsekas 1982) on the concave dual over omega >= 0: c(omega) = M^-1 (c_ref - sum_i
    omega_i B_i' a_i), M = I + sum_i omega_i B_i' B_i, the dual gradient h(c(omega)), its Hessian
    -G' M^-1 G (G's columns B_i' (a_i + B_i c)); Armijo on the dual value.  Stationarity holds
    exactly at every c(omega); it stops on the ball slack, or unconverged where a multiplier passes
    ``omega_limit`` (an infeasible problem's dual is unbounded).  Returns c, omega, iterations, converged."""
    n, _, k = B.shape
    BtB = B.swapaxes(1, 2) @ B
    Bta = adjoint(B, a)

    def at(omega):
        M = np.eye(k) + np.tensordot(omega, BtB, axes=1)
        factor = cho_factor(M)
        c = cho_solve(factor, c_ref - omega @ Bta)
        v = a + B @ c
        h = 0.5 * ((v * v).sum(axis=1) - gamma2)
        value = 0.5 * float((c - c_ref) @ (c - c_ref)) + float(omega @ h)
        return c, h, value, factor, v

    omega = np.zeros(n)
    c, h, value, factor, v = at(omega)
    for iteration in range(max_iterations + 1):
        if np.all(h <= feas_tol) and np.all(np.abs(h[omega > 0.0]) <= feas_tol):
            return c, omega, iteration, True
        if iteration == max_iterations or omega.max(initial=0.0) > omega_limit:
            break
        free = (omega > 0.0) | (h > 0.0)
        G = adjoint(B[free], v[free]).T
        S = G.T @ cho_solve(factor, G)
        step = np.zeros(n)
        step[free] = np.linalg.lstsq(S, h[free], rcond=1e-14)[0]
        length = 1.0
        for _ in range(60):
            trial = np.maximum(omega + length * step, 0.0)
            got = at(trial)
            if got[2] >= value + 1e-4 * float(h @ (trial - omega)) and got[2] > value - 1e-15 * abs(value):
                break
            # near the optimum the dual value is flat to its last bits: then a step that cuts the
            # projected slack (the secular equations' residual) is taken, as Newton's method on them
            if _projected_slack(trial, got[1]) < 0.5 * _projected_slack(omega, h):
                break
            length *= 0.5
        else:
            break
        omega = trial
        c, h, value, factor, v = got
    return c, omega, max_iterations, False


def refine(data, theta, nu, radius, *, abs_tol: float, basis=None, max_iterations: int = 30,
           max_changes: int = 10):
    """Newton's method on L's KKT system over Theta~ with the balls of ``nu`` > 0 as equalities, from
    ``theta`` near a minimiser: (grad L + sum_A nu_i E_i' theta_i, slack_A) = 0, least-squares steps
    (the system is singular where the data leave theta unidentified; the minimum-norm step moves no
    further than needed), halved until the residual falls.  Where the solution has a negative
    multiplier or violates another ball, the active set changes (the most negative multiplier
    leaves, or the most violated ball joins) and Newton continues, at most ``max_changes`` times.
    Returns theta, nu and whether L's KKT conditions hold there (nu >= 0, every ball feasible, the
    residual and slack within ``abs_tol`` and ``FEAS_TOL`` gamma^2)."""
    n, d = theta.shape
    p = (n - 1) * d
    D, _, N = (design(data), *split(design(data), p)) if basis is None else basis
    E = _selectors(n, d) if radius is not None else np.zeros((0, d, p))
    gamma2 = float(radius) ** 2 if radius is not None else 0.0
    feas = FEAS_TOL * max(gamma2, 1.0)
    grad_hess = _loss(data, D)
    beta = to_reduced(theta - theta.mean(axis=0)).ravel()
    full = np.zeros(len(E)) if radius is None else np.maximum(np.asarray(nu, float), 0.0)
    if radius is not None:  # a ball at its radius (to the dual method's slack) starts active
        slack = 0.5 * ((theta * theta).sum(axis=1) - gamma2)
        full = np.where((full == 0.0) & (slack > -1e-4 * gamma2), 1e-300, full)
    ok = False
    for _ in range(max_changes + 1):
        active = np.flatnonzero(full > 0.0)
        for null in (N, None):  # the damped steps first; where they stall, minimum-norm least squares (afresh)
            got = _equality_newton(grad_hess, beta, full[active], E[active], gamma2, abs_tol, feas, max_iterations,
                                   null)
            if got[2]:
                break
        beta, mult, converged = got
        full = np.zeros(len(E))
        full[active] = mult
        th = from_reduced(beta.reshape(n - 1, d))
        slack = 0.5 * ((th * th).sum(axis=1) - gamma2) if radius is not None else np.zeros(0)
        if not converged:
            break
        negative = mult < 0.0
        violated = slack > feas
        if not negative.any() and not violated.any():
            ok = True
            break
        if negative.any():
            full[active[np.argmin(mult)]] = 0.0
        else:
            full[int(np.argmax(slack))] = 1e-300  # joins the active set (its multiplier from Newton)
    return from_reduced(beta.reshape(n - 1, d)), np.maximum(full, 0.0), ok


def _equality_newton(grad_hess, beta, mult, EA, gamma2, abs_tol, feas, max_iterations, N):
    """Newton's method on (grad L + sum_A mult_i E_i' E_i beta, slack_A) = 0.  Its Jacobian is singular
    in the directions of N (no curvature of L) that no active ball bends; there the step's metric is
    ``NULL_DAMPING`` times the largest curvature (a Levenberg term: it changes the steps, not the
    equations they solve), so that a symmetric indefinite solve replaces least squares (6 ms a step
    at 100 unknowns); least squares only where that solve fails (dependent active balls)."""
    p = beta.size
    damping = N @ N.T if N is not None and N.shape[1] else None

    def residual(beta, mult, hessian=True):  # the line search needs no Hessian
        g, H = grad_hess(beta, hessian)
        v = np.einsum("idq,q->id", EA, beta)
        C = np.einsum("idq,id->qi", EA, v)
        return np.concatenate([g + C @ mult, 0.5 * ((v * v).sum(axis=1) - gamma2)]), H, C

    r, H, C = residual(beta, mult)
    q = p + len(mult)
    for _ in range(max_iterations):
        if np.abs(r[:p]).max(initial=0.0) <= 0.1 * abs_tol and np.abs(r[p:]).max(initial=0.0) <= 0.1 * feas:
            return beta, mult, True
        M = np.zeros((q, q))
        M[:p, :p] = H + np.einsum("i,idq,idr->qr", mult, EA, EA)
        M[:p, p:] = C
        M[p:, :p] = C.T
        if damping is not None:
            M[:p, :p] += NULL_DAMPING * max(float(np.abs(np.diag(H)).max(initial=0.0)), 1.0) * damping
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", LinAlgWarning)  # near-singular (dependent active balls)
                step = solve(M, -r, assume_a="sym", check_finite=False)
        except (LinAlgError, LinAlgWarning, ValueError):
            step = None
        if step is None or not np.all(np.isfinite(step)):
            if not np.all(np.isfinite(M)):
                break  # overflowed multipliers: not converged (the caller's next round, or its fallback)
            try:
                step = np.linalg.lstsq(M, -r, rcond=1e-13)[0]
            except np.linalg.LinAlgError:  # LAPACK's SVD did not converge
                break
        norm = float(r @ r)
        length = 1.0
        for _ in range(30):
            got = residual(beta + length * step[:p], mult + length * step[p:], hessian=False)
            if float(got[0] @ got[0]) < norm:
                break
            length *= 0.5
        else:
            break
        beta, mult = beta + length * step[:p], mult + length * step[p:]
        r, _, C = got
        H = grad_hess(beta)[1]
    return beta, mult, bool(np.abs(r[:p]).max(initial=0.0) <= abs_tol and np.abs(r[p:]).max(initial=0.0) <= feas)


def _loss(data, D):
    t = data.t
    m, wins = data.m[:t], data.wins[:t]

    def grad_hess(beta, hessian=True):
        u = D @ beta
        s = expit(u)
        return (m * s - wins) @ D, (D.T @ ((m * s * (1.0 - s))[:, None] * D) if hessian else None)
    return grad_hess


def project(data, theta, reference, radius, *, abs_tol: float, max_iterations: int = MAX_ITERATIONS,
            basis=None, nu=None) -> NearestFit:
    """The point of the argmin set nearest ``reference``, from ``theta``, a minimiser of L over Theta~
    (its stationarity, not checked here, makes the result's): the projection (module docstring,
    stage 2), and the KKT residuals of the result (:func:`kkt`).  ``basis``: (D, U, N) if known.

    ``nu``, L's multipliers of the balls at ``theta``: every minimiser minimises the Lagrangian
    L + sum_i nu_i (||theta_i||^2 - gamma^2) / 2, so the argmin set is theta + {N c : sum_i nu_i
    ||E_i N c||^2 = 0} within the balls: the directions of N that move an item whose multiplier is
    positive are not free (numerically: the eigenvectors of N' (sum_i nu_i E_i' E_i) N with
    eigenvalues lambda above abs_tol / (2 gamma) are dropped: along the others, a move across the
    balls changes L's stationarity residual by at most 2 gamma lambda, within its tolerance).  Without them the projection
    would meet balls tangent to each other, where the slack allowed moves theta by its square root."""
    n, d = theta.shape
    p = (n - 1) * d
    if p > MAX_PARAMETERS:
        raise ValueError(f"the exact nearest argmin is computed densely up to {MAX_PARAMETERS} parameters, got {p}")
    if basis is None:
        D = design(data)
        U, N = split(D, p)
    else:
        D, U, N = basis
    E = _selectors(n, d) if radius is not None else np.zeros((0, d, p))
    gamma2 = float(radius) ** 2 if radius is not None else 0.0
    feas = FEAS_TOL * max(gamma2, 1.0)
    if nu is not None and radius is not None and N.shape[1] and np.any(np.asarray(nu) > 0.0):
        EN = np.einsum("idq,qk->idk", E, N)
        lam, vec = np.linalg.eigh(np.einsum("i,idk,idl->kl", np.maximum(np.asarray(nu, float), 0.0), EN, EN))
        # free where moving an item across its ball (at most 2 gamma) against its multiplier changes
        # L's stationarity residual by less than its tolerance
        free = lam * 2.0 * float(radius) <= abs_tol
        N = N @ vec[:, free]
    beta = to_reduced(theta - theta.mean(axis=0)).ravel()
    fixed = beta - N @ (N.T @ beta)  # U b* and the directions the balls' multipliers hold
    beta_ref = to_reduced(reference - reference.mean(axis=0)).ravel()
    c_ref = N.T @ beta_ref
    k = N.shape[1]
    near_tol = NEAREST_TOL * (1.0 + float(np.abs(beta_ref).max(initial=0.0)))
    iterations, ok, omega = 0, True, np.zeros(len(E))
    if k:
        a = np.einsum("idq,q->id", E, fixed)
        B = np.einsum("idq,qk->idk", E, N)
        # a ball that N does not reach is fixed by b* (and satisfied by theta): no constraint on c
        reach = np.abs(B).max(axis=(1, 2), initial=0.0) > 1e-12 if len(E) else np.zeros(0, bool)
        c, omega_r, iterations, ok = _project_dual(c_ref, a[reach], B[reach], gamma2, feas, max_iterations)
        omega[reach] = omega_r
        beta = fixed + N @ c
    theta_out = from_reduced(beta.reshape(n - 1, d))
    residuals = kkt(data, theta_out, reference, radius, U, N, D, E, omega)
    converged = (ok and residuals["stationarity"] <= abs_tol and residuals["nearest"] <= near_tol
                 and residuals["feasibility"] <= feas)
    return NearestFit(theta_out, residuals.pop("nu"), omega, U.shape[1], iterations, converged, residuals)


def kkt(data, theta, reference, radius, U=None, N=None, D=None, E=None, omega=None) -> dict:
    """The KKT residuals of the nearest argmin at ``theta`` (module docstring): ``stationarity``
    (of L over Theta~, with the nonnegative multipliers nu that fit best on the active balls, by
    NNLS), ``nearest`` (of the projection, with ``omega``; by NNLS too if None), ``feasibility``
    (the largest ball slack (||theta_i||^2 - gamma^2)/2, 0 if none is positive), and ``nu``."""
    n, d = theta.shape
    p = (n - 1) * d
    if D is None:
        D = design(data)
    if U is None:
        U, N = split(D, p)
    if E is None:
        E = _selectors(n, d) if radius is not None else np.zeros((0, d, p))
    beta = to_reduced(theta).ravel()
    grad = _loss(data, D)(beta)[0]
    columns = np.einsum("idq,id->qi", E, np.einsum("idq,q->id", E, beta))  # grad h_i, (p, n)
    slack = 0.5 * ((theta * theta).sum(axis=1) - float(radius) ** 2) if radius is not None else np.zeros(0)
    gamma2 = float(radius) ** 2 if radius is not None else 1.0
    active = slack >= -1e-6 * gamma2
    nu = np.zeros(len(E))
    if active.any():
        nu[active] = nnls(columns[:, active], -grad)[0]
    stationarity = float(np.abs(grad + columns @ nu).max(initial=0.0))
    beta_ref = to_reduced(reference - reference.mean(axis=0)).ravel()
    near = N.T @ (beta - beta_ref)
    if omega is None:
        omega = np.zeros(len(E))
        if active.any() and N.shape[1]:
            omega[active] = nnls(N.T @ columns[:, active], -near)[0]
    near = near + N.T @ (columns @ omega)
    return dict(stationarity=stationarity, nearest=float(np.abs(near).max(initial=0.0)),
                feasibility=float(max(slack.max(initial=0.0), 0.0)), nu=nu)
