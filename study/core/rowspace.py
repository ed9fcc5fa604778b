"""Stage 1's exact nearest argmin where no ball binds, kept row by row.

The estimate is defined in :mod:`study.core.nearest`: among the minimisers of L over
Theta~ = {theta : ||theta_i|| <= gamma}, the one nearest theta_ref.  This module computes the same
point without dense algebra in (n-1) d, in the regime that covers most of stage 1 before the data
identify theta: the rows' margins have a finite minimiser over the design's range and the point so
reached lies inside every ball.  Where either fails it answers None and :func:`study.core.mle.
exact_nearest` solves the problem in general.

The reduced design is kept as D = C Q' (:class:`RowSpace`): Q an orthonormal basis of its row space
(Gram-Schmidt with one reorthogonalisation, a row at a time), C the rows' coordinates.  A row that
opens a new direction is a *pivot*: the pivots' coordinates C_P form a lower-triangular matrix
with a positive diagonal, so the pivots' margins u_P are free coordinates of the design's range and
every other (dependent) row's margin is a fixed combination of them, u_N = A u_P (A = C_N C_P^-1).
Hence

    min over range(D) of L(u) = min over u_P of  sum_P l_k(u_k) + sum_N l_j(A_j u_P),

with l_k(u) = m_k log(1 + e^u) - w_k u.  A pivot that no dependent row involves is minimised on its
own, u_k = logit(w_k / m_k) (finite where 0 < w_k < m_k); the others are grouped by the dependent rows
that couple them (connected components) and each group is minimised by Newton's method with a
backtracking line search, from the margins of theta_ref.  The argmin set of L over the sum-zero space
is then {beta : D beta = u*}, and its point nearest beta_ref is beta_ref + D^+ (u* - D beta_ref) =
beta_ref + Q C_P^-1 (u*_P - D_P beta_ref).  If that point lies in every ball it is the estimate: it
minimises L over Theta~ (it attains L's minimum over the whole space) and is the nearest such point
(it is nearest without the balls).

The result is accepted only where L's stationarity residual ||D'(m s - w)||_inf meets the caller's
tolerance, and the ball slack is <= 0, both checked at the returned point; the rank decisions are
those of :func:`study.core.nearest.split` where the gap is clear (a row's residual off the earlier
rows' span above ``PIVOT_TOL`` or below ``DEPENDENT_TOL`` of its norm); a row in between switches
this shortcut off for the data (the general solver decides by singular values).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import LinAlgError, get_lapack_funcs
from scipy.special import expit, logit

from . import nearest, rangekkt
from .contrasts import from_reduced, to_reduced

PIVOT_TOL = 1e-4  # a row's residual off the span of the earlier rows, relative to its norm: a new direction
DEPENDENT_TOL = 1e-8  # ... at most this: in the span; in between, ambiguous (no shortcut)
COUPLING_TOL = 1e-12  # |A_jk| at most this (relative to 1 + max |A_j|): row j does not involve pivot k
OMEGA_LIMIT = 1e10  # a ball multiplier of the projection beyond this: no point inside the balls (infeasible)
MAX_ITERATIONS = 50  # Newton iterations of one group (a budget: beyond it, no shortcut)
# LAPACK directly: these systems are small and solved at every refit, where scipy's wrappers' checks
# cost more than the solves (a triangular solve at r = 80: 10 us, 44 us through solve_triangular)
_gesv, _trtrs = get_lapack_funcs(("gesv", "trtrs"), dtype=np.float64)


def _lower_solve(lower, b, transposed=False):
    """x with lower x = b (lower' x = b if ``transposed``); ``lower`` triangular with a nonzero diagonal."""
    return _trtrs(lower, b, lower=1, trans=int(transposed))[0]


class RowSpace:
    """D = C Q', kept a row at a time (module docstring).

    Attributes
    ----------
    rows : int
        The rows taken so far.
    rank : int
        r, the number of pivots (the design's numerical rank).
    pivots : list of int
        The row that opened each of Q's columns, in order.
    dependent : list of int
        The other rows.
    ambiguous : bool
        A row was neither clearly in the span nor clearly outside it: no shortcut for these data.
    """

    def __init__(self, n_parameters: int):
        p = int(n_parameters)
        self.basis = np.zeros((p, p))  # Q's columns 0..rank-1
        self.pivot_coords = np.zeros((p, p))  # C_P, lower triangular
        self.pivot_rows = np.zeros((p, p))  # D_P, the pivots' rows
        self.combinations = np.zeros((16, p))  # A's rows, one per dependent row (zero beyond its rank)
        self.rows = self.rank = 0
        self.pivots: list[int] = []
        self.dependent: list[int] = []
        self.ambiguous = False
        # the groups, kept as rows arrive: each group's pivots and dependent rows (by their positions in
        # ``dependent``) under a label; a row that couples groups merges them
        self._label: dict[int, int] = {}  # pivot column -> its group's label (coupled pivots only)
        self._members: dict[int, tuple[list, list]] = {}  # label -> (pivot columns, dependent positions)
        self._groups = None  # groups() as last built (None: a group changed since)
        self._uncoupled: list = []  # dependent rows taken since groups() last ran: (position, support)

    def extend(self, design: np.ndarray) -> "RowSpace":
        """Take the rows ``design[self.rows:]``."""
        for k in range(self.rows, design.shape[0]):
            self._take(k, design[k])
        self.rows = max(self.rows, design.shape[0])
        return self

    def _couple(self, j: int, support: np.ndarray) -> None:
        """Dependent row ``j`` (its position in ``dependent``) couples the pivots of ``support``."""
        if not support.size:
            return
        labels = {self._label[c] for c in support.tolist() if c in self._label}
        label = min(labels) if labels else int(support[0])
        columns, rows = self._members.setdefault(label, ([], []))
        for other in labels - {label}:  # merged into the first
            more_columns, more_rows = self._members.pop(other)
            columns.extend(more_columns)
            rows.extend(more_rows)
            for c in more_columns:
                self._label[c] = label
        for c in support.tolist():
            if c not in self._label:
                self._label[c] = label
                columns.append(c)
        rows.append(j)
        self._groups = None

    def _take(self, k: int, row: np.ndarray) -> None:
        r = self.rank
        q = self.basis[:, :r]
        coords = q.T @ row
        rest = row - q @ coords
        again = q.T @ rest  # one reorthogonalisation ("twice is enough")
        rest -= q @ again
        coords += again
        size, norm = math.sqrt(rest @ rest), math.sqrt(row @ row)  # (np.linalg.norm's own formula, without its checks)
        if norm == 0.0 or size <= DEPENDENT_TOL * norm:
            a = _lower_solve(self.pivot_coords[:r, :r], coords, transposed=True) if r else np.zeros(0)
            j = len(self.dependent)
            if j == self.combinations.shape[0]:
                self.combinations = np.vstack([self.combinations, np.zeros_like(self.combinations)])
            self.combinations[j, :r] = a
            support = np.flatnonzero(np.abs(a) > COUPLING_TOL * (1.0 + float(np.abs(a).max(initial=0.0))))
            self._uncoupled.append((j, support))  # (groups() couples them: only the exact path asks)
            self.dependent.append(k)
        elif size >= PIVOT_TOL * norm and r < self.basis.shape[0]:
            self.basis[:, r] = rest / size
            self.pivot_coords[r, :r] = coords
            self.pivot_coords[r, r] = size
            self.pivot_rows[r] = row
            self.pivots.append(k)
            self.rank = r + 1
        else:
            self.ambiguous = True

    def groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The pivots the dependent rows couple, as connected components: (pivot columns, positions
        in ``dependent``) of each group."""
        for j, support in self._uncoupled:
            self._couple(j, support)
        self._uncoupled.clear()
        if self._groups is None:  # (a new pivot joins no group)
            self._groups = [(np.array(sorted(columns), dtype=np.intp), np.array(sorted(rows), dtype=np.intp))
                            for _, (columns, rows) in sorted(self._members.items())]
        return self._groups


def row_space(data, design: np.ndarray) -> RowSpace:
    """The data's :class:`RowSpace`, kept on ``data`` and extended by the rows added since."""
    kept = getattr(data, "_row_space", None)
    if kept is None or kept.rows > data.t or kept.basis.shape[0] != design.shape[1]:
        kept = RowSpace(design.shape[1])
        data._row_space = kept
    return kept.extend(design[: data.t])


def rank_deficient(data) -> bool:
    """Do the rows surely leave theta unidentified (the kept decomposition's rank below (n-1) d, every
    rank decision clear)?  False where unsure: the caller's identification test decides."""
    if data.n_parameters > nearest.MAX_PARAMETERS:
        return False
    space = row_space(data, nearest.design(data))
    return not space.ambiguous and space.rank < data.n_parameters


def _loss(u, w, m):
    return float(np.sum(m * np.logaddexp(0.0, u) - w * u))


def _minimise_group(u, w_p, m_p, A, w_n, m_n, tol):
    """Newton's method on sum_k l_k(u_k) + sum_j l_j(A_j u) from ``u``, with Armijo backtracking (a
    full step where the predicted decrease is below the loss's rounding: the quadratic regime, where
    the loss cannot tell); None where it does not reach a gradient of at most ``tol`` or a Newton step
    at the rounding of u (no finite minimiser, or not within the budget)."""
    v = A @ u
    value = _loss(u, w_p, m_p) + _loss(v, w_n, m_n)
    for _ in range(MAX_ITERATIONS + 1):
        s_p, s_n = expit(u), expit(v)
        grad = m_p * s_p - w_p + A.T @ (m_n * s_n - w_n)
        if float(np.abs(grad).max(initial=0.0)) <= tol:
            return u
        hess = A.T @ ((m_n * s_n * (1.0 - s_n))[:, None] * A)
        hess.flat[:: hess.shape[0] + 1] += m_p * s_p * (1.0 - s_p)
        _, _, step, info = _gesv(hess, grad, overwrite_a=True)  # LU with partial pivoting (numpy's solve)
        if info != 0:  # exactly singular
            return None
        step = -step
        if float(np.abs(step).max(initial=0.0)) <= 1e-13 * (1.0 + float(np.abs(u).max(initial=0.0))):
            # at the minimiser to the rounding of u: with dependent rows' large combinations (a Hessian
            # conditioned 1e7) the gradient's own rounding can stay above ``tol``; the caller's check of
            # L's stationarity at the returned point decides
            return u
        slope, length = float(grad @ step), 1.0
        quadratic = -slope <= 1e-13 * (1.0 + abs(value))
        for _ in range(40):
            trial = u + length * step
            trial_v = A @ trial
            trial_value = _loss(trial, w_p, m_p) + _loss(trial_v, w_n, m_n)
            if quadratic or trial_value <= value + 1e-4 * length * slope:
                break
            length *= 0.5
        else:
            return None
        if not np.isfinite(trial_value):
            return None
        u, v, value = trial, trial_v, trial_value
    return None


def _into_balls(space, beta, beta_ref, n, d, gamma2):
    """The point of {beta : D beta = D ``beta``} inside the balls nearest ``beta_ref`` (the projection
    of :func:`study.core.nearest.project`, by its dual method), or None where the dual method does not
    meet the ball slack (no such point: the balls then constrain L's minimum too)."""
    r, p = space.rank, beta.size
    complete = np.linalg.qr(space.basis[:, :r], mode="complete")[0]
    null = complete[:, r:]
    fixed = beta - null @ (null.T @ beta)
    E = nearest._selectors(n, d)
    a = E @ fixed
    B = E @ null
    try:
        with np.errstate(all="ignore"):
            c, _, _, ok = nearest._project_dual(null.T @ beta_ref, a, B, gamma2, nearest.FEAS_TOL * max(gamma2, 1.0),
                                               nearest.MAX_ITERATIONS, omega_limit=OMEGA_LIMIT)
    except (LinAlgError, ValueError):  # the multipliers grow without bound: no such point
        return None
    return fixed + null @ c if ok else None


def nearest_without_balls(data, design: np.ndarray, beta_ref: np.ndarray, radius, abs_tol: float, multipliers=None):
    """The exact nearest argmin (module docstring) where it lies inside every ball and L's minimum
    over the design's range is attained; where a ball binds instead (a separated row, or the balls
    hold L's minimiser), by :func:`study.core.rangekkt.solve_separated`; else None.  ``beta_ref``: the
    reference in reduced coordinates; ``multipliers``, the balls' at the reference (a warm start where
    they bind).  Returns (theta, beta, the margins D beta, the loss gradient
    Q' grad L there, L's multipliers of the balls)."""
    space = row_space(data, design)
    r = space.rank
    if space.ambiguous or r >= design.shape[1]:
        return None
    t = data.t
    n, d = data.n_items, data.dim
    w, m = data.wins[:t], data.m[:t]
    pivots = np.asarray(space.pivots, dtype=np.intp)
    dependent = np.asarray(space.dependent, dtype=np.intp)
    w_p, m_p = w[pivots], m[pivots]
    groups = space.groups()
    coupled = np.zeros(r, dtype=bool)
    for columns, _ in groups:
        coupled[columns] = True
    free = ~coupled
    separated = free & ((w_p <= 0.0) | (w_p >= m_p))  # no finite minimiser: the balls decide
    current = space.pivot_rows[:r] @ beta_ref
    target = current.copy()
    finite = free & ~separated
    target[finite] = logit(w_p[finite] / m_p[finite])
    bound = separated.any()
    if groups:
        A = space.combinations[: dependent.size, :r]
        w_n, m_n = w[dependent], m[dependent]
        grad = m_p * expit(current) - w_p + A.T @ (m_n * expit(A @ current) - w_n)  # at theta_ref: groups already
        # ||D'(m s - w)||_inf <= sqrt(r) ||C_P||_1 ||g||_inf for the pivots' gradient g: half the tolerance
        grad_tol = 0.5 * abs_tol / (np.sqrt(r) * float(np.abs(space.pivot_coords[:r, :r]).sum(axis=0).max()))
        for columns, rows in groups:
            if float(np.abs(grad[columns]).max()) <= grad_tol:  # at their minimum (the new row is elsewhere)
                continue
            got = _minimise_group(current[columns], w_p[columns], m_p[columns], A[np.ix_(rows, columns)], w_n[rows],
                                  m_n[rows], grad_tol)
            if got is None:  # no finite minimiser (or not within the budget): the balls decide
                bound = True
                continue
            target[columns] = got
    if bound:
        return _with_balls(space, data, target, beta_ref, radius, abs_tol, multipliers)
    beta = beta_ref + space.basis[:, :r] @ _lower_solve(space.pivot_coords[:r, :r], target - current) \
        if r else beta_ref.copy()
    theta = from_reduced(beta.reshape(n - 1, d))
    if radius is not None and float((theta * theta).sum(axis=1).max()) > float(radius) ** 2:
        inside = _into_balls(space, beta, beta_ref, n, d, float(radius) ** 2)
        if inside is None:  # no point of L's argmin over the range lies in the balls: they bind
            return _with_balls(space, data, target, beta_ref, radius, abs_tol, multipliers)
        beta = inside
        theta = from_reduced(beta.reshape(n - 1, d))
    return _checked(data, theta, beta, np.zeros(n), radius, abs_tol)


def _with_balls(space, data, target, beta_ref, radius, abs_tol, multipliers):
    if radius is None:  # a separated row and no balls: no minimiser
        return None
    got = rangekkt.solve_separated(space, data, target, beta_ref, beta_ref, radius, multipliers)
    if got is None:
        return None
    beta, nu = got
    n, d = data.n_items, data.dim
    return _checked(data, from_reduced(beta.reshape(n - 1, d)), beta, nu, radius, abs_tol)


def _checked(data, theta, beta, nu, radius, abs_tol):
    """(theta, beta, u, Q' grad L, nu) where L's stationarity with the multipliers ``nu`` meets
    ``abs_tol`` and the balls hold at the returned point, else None."""
    u = data.reduced_margins(beta)
    gradient = data.reduced_gradient(u)  # Q' grad L = D'(m s - w)
    if radius is not None:
        slack = 0.5 * ((theta * theta).sum(axis=1) - float(radius) ** 2)
        if float(slack.max()) > nearest.FEAS_TOL * max(float(radius) ** 2, 1.0):
            return None
    stationary = gradient + to_reduced(nu[:, None] * theta).ravel() if nu.any() else gradient
    if float(np.abs(stationary).max(initial=0.0)) > abs_tol:
        return None
    return theta, beta, u, gradient, nu
