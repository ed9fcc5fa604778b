"""Newton systems solved by preconditioned conjugate gradients, for problems too large to factorise
at every step (issue 16: a per-step cost that does not grow with T).

K = C'(H_L + diag(q) (x) I)C is applied exactly, in O(t d) per product: theta-form v = Q w, then
H_L v = R'(w * R v) by a gather and two bincounts over the stored rows
(:meth:`study.core.likelihood.ComparisonData.design_times`), and the quadratic weights by the
Helmert transform.  The preconditioner is a factor of an earlier K (:func:`study.core.systems.preconditioner`:
the dense reduced Hessian or the t x t row-space system), kept on the data store and reused from
step to step, with each new comparison row folded in by a Woodbury term
(:class:`study.core.systems.Factor`).  Between steps K changes by the new rows and by a slow drift
of the weights, ridge and tie-break, so CG converges in a few iterations; the factor is rebuilt at the
current K by the ski-rental rule of :class:`IterativeFactor` (so its cost, one dense or row-space
factorisation, is paid every few dozen steps instead of several times a step).  The dense inverse
is kept in single precision where every item has a positive weight (its gemv is memory-bound).

Stopping rule of CG: ||K x - b||_2 <= ``RTOL`` ||b||_2 per column (an exact solve for the Newton
iterations above it, whose own stopping rule is the KKT residual), or ``MAX_ITERATIONS``, after
which the factor is rebuilt and the solve repeated (then one or two iterations suffice).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import LinAlgError

from . import costs
from .contrasts import from_reduced, items_from_reduced, reduced_from_items, to_reduced
from .likelihood import ComparisonData
from .systems import ExplicitInverse, Factor, preconditioner

# From this many free parameters on, Newton systems are solved by PCG with a reused factor
# (measured: below it a fresh factor costs less than the iterations' numpy calls).
ITERATIVE_MIN_PARAMETERS = 300
RTOL = 1e-12
MAX_ITERATIONS = 40
REBUILD_PER_ROW = 0.1  # stale CG iterations allowed per row of the kept factor before a rebuild
MIN_REBUILD_ITERATIONS = 4


def reduced_product(data: ComparisonData, weights: np.ndarray, quad: np.ndarray, v: np.ndarray) -> np.ndarray:
    """K v for reduced v ((n-1) d,) or ((n-1) d, c), K = C'(R'WR + diag(quad) (x) I)C."""
    n, d = data.n_items, data.dim
    shape = (n - 1, d) if v.ndim == 1 else (n - 1, d, v.shape[1])
    item = from_reduced(v.reshape(shape))
    margins = data.design_times(item)
    scaled = weights * margins if margins.ndim == 1 else weights[:, None] * margins
    out = data.design_transpose_times(scaled)
    out += quad.reshape((n,) + (1,) * (item.ndim - 1)) * item
    return to_reduced(out).reshape(v.shape)


def item_product(data: ComparisonData, weights: np.ndarray, quad: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Q K Q' v for sum-zero item-form v ((n d,) or (n d, c), flattened item vectors): P(H_L +
    diag(quad) (x) I)v with P the projection onto sum zero (H_L v sums to zero already)."""
    n, d = data.n_items, data.dim
    item = v.reshape((n, d) + v.shape[1:])
    margins = data.design_times(item)
    scaled = weights * margins if margins.ndim == 1 else weights[:, None] * margins
    out = data.design_transpose_times(scaled)
    out += quad.reshape((n,) + (1,) * (item.ndim - 1)) * item
    out -= out.sum(axis=0) / n
    return out.reshape(v.shape)


def conjugate_gradients(product, precondition, rhs: np.ndarray, rtol: float = RTOL, atol: float = 0.0,
                        max_iterations: int = MAX_ITERATIONS, max_norm=None):
    """Solve K x = rhs (one or several columns, each its own CG) for SPD K given as ``product``,
    with the SPD preconditioner ``precondition`` ~ K^{-1}.  Returns (x, iterations, converged).
    ``max_norm(r, norms)``, if given (``norms``: the columns' 2-norms, already computed), is the
    max-norm ``atol`` bounds (default ``|r|``'s): the item-form solves bound the reduced residual Q'r,
    as the reduced ones do."""
    if rhs.ndim == 1:
        return _conjugate_gradients_vector(product, precondition, rhs, rtol, atol, max_iterations, max_norm)
    x = np.zeros_like(rhs)
    r = rhs.copy()
    target = rtol * np.sqrt(np.einsum("i...,i...->...", rhs, rhs))
    z = precondition(r)
    direction = z.copy()
    rz = np.einsum("i...,i...->...", r, z)
    for iteration in range(1, max_iterations + 1):
        kd = product(direction)
        curvature = np.einsum("i...,i...->...", direction, kd)
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.where(curvature > 0.0, rz / curvature, 0.0)
        x += step * direction
        r -= step * kd
        norms = np.sqrt(np.einsum("i...,i...->...", r, r))
        if np.all(norms <= target) or (
                atol > 0.0 and float(np.abs(r).max() if max_norm is None else max_norm(r, norms)) <= atol):
            return x, iteration, True
        z_new = precondition(r)
        rz_new = np.einsum("i...,i...->...", r, z_new)
        # flexible (Polak-Ribiere) beta: robust to a preconditioner applied in single precision
        with np.errstate(invalid="ignore", divide="ignore"):
            beta = np.where(rz > 0.0, (rz_new - np.einsum("i...,i...->...", r, z)) / rz, 0.0)
        z = z_new
        direction = z + beta * direction
        rz = rz_new
    return x, max_iterations, False


def _conjugate_gradients_vector(product, precondition, rhs, rtol, atol, max_iterations, max_norm):
    """:func:`conjugate_gradients` for one column, its scalars as Python floats and its inner
    products BLAS dots (a Newton step's solve: a few iterations, where numpy's per-call overhead on
    0-d arrays was a fifth of an iteration)."""
    dot = np.dot
    x = np.zeros_like(rhs)
    r = rhs.copy()
    target = rtol * math.sqrt(float(dot(rhs, rhs)))
    z = precondition(r)
    direction = z.copy()
    rz = float(dot(r, z))
    for iteration in range(1, max_iterations + 1):
        kd = product(direction)
        curvature = float(dot(direction, kd))
        step = rz / curvature if curvature > 0.0 else 0.0
        x += step * direction
        r -= step * kd
        norm = math.sqrt(float(dot(r, r)))
        if norm <= target or (atol > 0.0 and (float(np.abs(r).max()) if max_norm is None
                                              else max_norm(r, norm)) <= atol):
            return x, iteration, True
        z_new = precondition(r)
        rz_new = float(dot(r, z_new))
        # flexible (Polak-Ribiere) beta: robust to a preconditioner applied in single precision
        beta = (rz_new - float(dot(r, z))) / rz if rz > 0.0 else 0.0
        z = z_new
        direction = z + beta * direction
        rz = rz_new
    return x, max_iterations, False


class IterativeFactor:
    """The Newton system K(u, quad) of the current margins and weights, solved by PCG with the
    factor kept on ``data`` (``data.preconditioner``) as preconditioner; same interface as
    :class:`study.core.systems.Factor` (``solve``, ``add``).

    When to rebuild the kept factor (ski rental, deterministic): every CG iteration beyond the
    first of a solve is counted as the factor's staleness; once the count exceeds the cost of a
    rebuild in iterations (``REBUILD_PER_ROW`` times the factor's order: a dense reduced Hessian
    of order (n-1)d, a row-space system of order t) the factor is rebuilt at the current K."""

    def __init__(self, data: ComparisonData, u: np.ndarray, quad: np.ndarray):
        self.data, self.u, self.quad = data, u, np.asarray(quad, dtype=float)
        self.weights = data.weights(u)
        self.iterations = 0

    def _base(self, fresh: bool = False):
        data = self.data
        if fresh or data.preconditioner is None:
            # single precision only where every item has a positive weight (ridge or tie-break),
            # which bounds the condition number; without one (identified opt1) it can be 1e8
            base = preconditioner(data, self.u, self.quad, single=bool(np.all(self.quad > 0.0)))
            order = data.n_parameters if isinstance(base, ExplicitInverse) else data.t
            data.preconditioner = Factor(base, item=hasattr(base, "solve_item"))
            data.preconditioner_budget = max(MIN_REBUILD_ITERATIONS, REBUILD_PER_ROW * order)
            data.preconditioner_stale = 0
        return data.preconditioner

    def _product(self, v):
        return reduced_product(self.data, self.weights, self.quad, v)

    def _item_product(self, v):
        return item_product(self.data, self.weights, self.quad, v)

    def _reduced_max_norm(self, r, norms, atol):
        """max |Q'r| of an item-form residual r (its columns' 2-norms ``norms``), or a bound on it that
        decides the comparison with ``atol``: Q'r is transformed only where neither bound does
        (2 max|r| >= max|Q'r| >= |r|_2 / sqrt(p))."""
        if 2.0 * float(np.abs(r).max()) <= atol:  # each |(Q'r)_k| <= 2 max|r| (a Helmert contrast)
            return 0.0
        if float(np.max(norms)) > atol * np.sqrt(self.data.n_parameters):
            return np.inf
        return float(np.abs(reduced_from_items(r, self.data.n_items, self.data.dim)).max())

    def _cg(self, base, rhs, atol):
        if not base.item:
            return conjugate_gradients(self._product, base.solve, rhs, atol=atol)
        # conjugate gradients in item coordinates: the same iterates times Q (Q orthonormal), without
        # the four Helmert transforms per iteration of the reduced ones (product and preconditioner)
        n, d = self.data.n_items, self.data.dim
        x, iterations, ok = conjugate_gradients(self._item_product, base.solve_item, items_from_reduced(rhs, n, d),
                                                atol=atol,
                                                max_norm=lambda r, norms: self._reduced_max_norm(r, norms, atol))
        return reduced_from_items(x, n, d), iterations, ok

    def solve(self, rhs: np.ndarray, atol: float = 0.0) -> np.ndarray:
        """K^{-1} rhs to ``RTOL`` (relative, 2-norm), or to ``atol`` (max-norm of the residual) if
        that is looser: an inexact Newton step (its forcing term) needs no more."""
        data = self.data
        base = self._base(fresh=data.preconditioner_stale > data.preconditioner_budget)
        x, iterations, ok = self._cg(base, rhs, atol)
        self.iterations += iterations
        data.preconditioner_stale += iterations - 1
        if not ok:  # the kept factor has gone stale: rebuild it here and solve again
            base = self._base(fresh=True)
            x, more, ok = self._cg(base, rhs, atol)
            self.iterations += more
            iterations += more
        costs.add("pcg_iterations", iterations)
        return x

    def predict(self, theta: np.ndarray, change: np.ndarray) -> np.ndarray:
        """theta - M P(diag(change) (x) I) theta with the kept factor M ~ K^{-1} (item form): the
        first-order change of the minimiser when the per-item weights change by ``change``."""
        base = self._base()
        if not base.item:
            return theta
        n, d = theta.shape
        v = change[:, None] * theta
        v -= v.sum(axis=0) / n
        moved = theta - base.solve_item(v.ravel()).reshape(n, d)
        return moved - moved.sum(axis=0) / n

    def approximate_solve(self, rhs: np.ndarray) -> np.ndarray:
        """The preconditioner alone: K^{-1} rhs up to its staleness (for curvature estimates)."""
        return self._base().solve(rhs)

    def approximate_item_quadratic(self, theta: np.ndarray, free: np.ndarray):
        """c_f' M c_g for the preconditioner M ~ K^{-1} and c_f = Q'(e_f (x) theta_f), by the
        kept factor's item-form route where it has one (row space), else None."""
        return self._base().item_quadratic(theta, free)

    def add(self, column: np.ndarray, max_rank: int | None = None) -> "IterativeFactor":
        """Fold a new row's term into the kept factor (Woodbury; kept as is once its rank budget
        is used up, CG absorbing the difference).  ``max_rank`` is the direct solvers' (unused)."""
        data = self.data
        if data.preconditioner is not None:
            try:
                grown = data.preconditioner.add(column)
            except LinAlgError:  # a single-precision inverse of an ill-conditioned K need not keep
                grown = None     # I + V'K0^{-1}V positive definite: keep the factor, CG absorbs the row
            if grown is not None:
                data.preconditioner = grown
        return self


def iterative(data: ComparisonData) -> bool:
    """Are this store's Newton systems solved by PCG (large problems) rather than factorised?"""
    return data.n_parameters >= ITERATIVE_MIN_PARAMETERS
