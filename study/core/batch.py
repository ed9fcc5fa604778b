"""The estimator on many rows at once (offline data): Newton's method over arrays, and the debiased
estimator with its three covariances (model-based, per-comparison sandwich, cluster-robust).

The online estimator (:mod:`study.core.likelihood`, :mod:`study.core.mle`) keeps a growing row
store built for one more row per step (each row's x x', flat indices, a warm-start factor).  A
file of a million judgments is a different problem: one fit, O(t d) memory.  This module solves
the same problems -- the sum-zero MLE (paper eq. ``lik``) and its ridge version (eq. ``opt``),
where the data identify theta -- with the same stopping rule (KKT residual ||Q' grad F||_inf <= tol
(1 + total comparisons)), so it computes the same estimator (an estimator is its optimisation
problem; tests/core/test_batch.py checks the two against each other):

* rows are grouped by edge once (a stable sort), so each Newton step forms the edge Grams
  G_e = sum_{k on e} w_k x_k x_k' by one BLAS product per edge (one bincount when d = 1), the
  reduced Hessian K = C'HC from them (H = sum_e L_e (x) G_e, the Helmert transform on both item
  axes), and the gradient by d bincounts: O(t d^2) per step, nothing of size t d^2 stored;
* Newton steps in reduced coordinates beta (theta = Q beta) with Armijo backtracking along the
  direction (the margins are affine along it: O(t) per trial), from theta = 0;
* the data fail to identify theta (no ridge) when K is singular or its reciprocal condition number
  is below 1e-10 at the start: :func:`fit` returns None and the caller uses the general solver
  (tie-break, balls).

:func:`study.core.inference.debias_rows` gives the :class:`study.DebiasResult` of eq. ``deb``
at theta from these rows, with the model-based Phi_11, the sandwich (each comparison a unit,
:mod:`study.core.sandwich`) or the cluster-robust sandwich (each cluster a unit: the meat
:func:`cluster_meat`, sum_g s_g s_g' with s_g the sum of the score contributions of cluster g's
comparisons, times G/(G - 1)).
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import LinAlgError, lapack
from scipy.special import expit

from .contrasts import from_reduced, to_reduced
from .sandwich import comparison_variance

RCOND = 1e-10  # as study.core.inference.RCOND: K counts as singular below this reciprocal condition number

MAX_STEPS = 100
ARMIJO = 1e-4


class Rows:
    """Comparison rows prepared for repeated passes: row k compares i[k] with j[k] under X[k],
    j scored ``score[k]`` of ``m[k]`` (a tie half)."""

    def __init__(self, i, j, X, score, m, n_items: int):
        self.i, self.j = np.asarray(i, dtype=np.intp), np.asarray(j, dtype=np.intp)
        self.X = np.asarray(X, dtype=float)
        self.score, self.m = np.asarray(score, dtype=float), np.asarray(m, dtype=float)
        self.n, self.d = int(n_items), self.X.shape[1]
        lo, hi = np.minimum(self.i, self.j), np.maximum(self.i, self.j)
        keys, self.edge = np.unique(lo.astype(np.int64) * self.n + hi, return_inverse=True)
        self.edge = self.edge.ravel()
        self.edge_lo, self.edge_hi = (keys // self.n).astype(np.intp), (keys % self.n).astype(np.intp)
        self.total = float(self.m.sum())
        self._order = None
        # with one context for every row (d = 1 votes), margins are a difference of two items
        self.constant = bool(np.all(self.X == self.X[0]))

    @property
    def n_edges(self) -> int:
        return len(self.edge_lo)

    def margins(self, theta: np.ndarray) -> np.ndarray:
        """u_k = x_k'(theta_j - theta_i)."""
        if self.constant:
            scores = theta @ self.X[0]
            return scores[self.j] - scores[self.i]
        return np.einsum("kd,kd->k", self.X, theta[self.j] - theta[self.i])

    def transpose_times(self, s: np.ndarray) -> np.ndarray:
        """R's in item form (n, d): sum_k s_k x_k into item j_k, minus into i_k (d bincounts)."""
        n = self.n
        if self.constant:
            per_item = np.bincount(self.j, s, n) - np.bincount(self.i, s, n)
            return per_item[:, None] * self.X[0][None, :]
        out = np.empty((n, self.d))
        for c in range(self.d):
            sx = s * self.X[:, c]
            out[:, c] = np.bincount(self.j, sx, n) - np.bincount(self.i, sx, n)
        return out

    def grams(self, w: np.ndarray) -> np.ndarray:
        """G_e = sum_{k on edge e} w_k x_k x_k', shape (E, d, d)."""
        E, d = self.n_edges, self.d
        if self.constant:
            return np.bincount(self.edge, w, E)[:, None, None] * np.outer(self.X[0], self.X[0])[None]
        if d == 1:
            return np.bincount(self.edge, w * self.X[:, 0] ** 2, E).reshape(E, 1, 1)
        if self._order is None:  # rows grouped by edge once: one BLAS product X_e' diag(w_e) X_e per edge
            order = np.argsort(self.edge, kind="stable")
            bounds = np.zeros(E + 1, dtype=np.intp)
            np.cumsum(np.bincount(self.edge, minlength=E), out=bounds[1:])
            self._order = (order, bounds, self.X.take(order, axis=0))
        order, bounds, rows = self._order
        scaled = rows * w.take(order)[:, None]
        out = np.empty((E, d, d))
        for e in range(E):
            np.dot(rows[bounds[e]:bounds[e + 1]].T, scaled[bounds[e]:bounds[e + 1]], out=out[e])
        return out

    def reduced(self, grams: np.ndarray) -> np.ndarray:
        """C'(sum_e L_e (x) G_e)C, ((n-1)d, (n-1)d): the item blocks, then Q' on both item axes."""
        return reduce_blocks(laplacian_blocks(grams, self.edge_lo, self.edge_hi, self.n))

    def loss(self, u: np.ndarray) -> float:
        return float(np.dot(self.m, np.logaddexp(0.0, u)) - np.dot(self.score, u))


def laplacian_blocks(grams, lo, hi, n: int) -> np.ndarray:
    """sum_e L_e (x) G_e as an (n, n, d, d) block array."""
    d = grams.shape[1]
    blocks = np.zeros((n, n, d, d))
    diagonal = np.zeros((n, d, d))
    np.add.at(diagonal, lo, grams)
    np.add.at(diagonal, hi, grams)
    items = np.arange(n)
    blocks[items, items] = diagonal
    blocks[lo, hi] = -grams
    blocks[hi, lo] = -grams
    return blocks


def reduce_blocks(blocks: np.ndarray) -> np.ndarray:
    """(Q (x) I)' M (Q (x) I) for M given as (n, n, d, d) item blocks: ((n-1)d, (n-1)d)."""
    n, _, d, _ = blocks.shape
    half = np.ascontiguousarray(to_reduced(blocks).transpose(1, 0, 2, 3))
    red = to_reduced(half).transpose(1, 0, 2, 3)
    k = n - 1
    return np.ascontiguousarray(red.transpose(0, 2, 1, 3)).reshape(k * d, k * d)


def cholesky_factor(matrix: np.ndarray, rcond: float):
    """(upper Cholesky factor, condition number), or (None, inf) when not positive definite or
    worse conditioned than 1/rcond."""
    factor, info = lapack.dpotrf(matrix, lower=0, clean=1)
    if info != 0:
        return None, np.inf
    value = float(lapack.dpocon(factor, float(np.abs(matrix).sum(axis=0).max()))[0])
    if not value > rcond:
        return None, (np.inf if value <= 0 else 1.0 / value)
    return factor, 1.0 / value


def solve(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    out, info = lapack.dpotrs(factor, rhs, lower=0)
    if info != 0:
        raise LinAlgError(f"dpotrs failed (info={info})")
    return out


class Fit:
    """A batch fit: ``theta`` (n, d), ``steps``, ``kkt_residual``, ``converged`` (the stopping rule met)."""

    def __init__(self, theta, steps, residual, converged):
        self.theta, self.steps, self.kkt_residual, self.converged = theta, steps, residual, converged


def fit(rows: Rows, *, ridge: float = 0.0, tol: float | None = None, progress=None) -> Fit | None:
    """Newton's method for argmin L(theta) + ridge/2 ||theta||^2 over the sum-zero space (module
    docstring); None where the data do not identify theta (no ridge); ``converged`` False where the
    stopping rule is not met within ``MAX_STEPS`` steps (separable or badly scaled data).
    ``progress(residual, target)`` is called after every step."""
    n, d = rows.n, rows.d
    tol = (1e-11 if ridge == 0.0 else 1e-10) if tol is None else tol
    target = tol * (1.0 + rows.total)
    beta = np.zeros((n - 1) * d)
    theta = np.zeros((n, d))
    u = np.zeros(len(rows.i))
    value = rows.loss(u)  # F(beta) = L + ridge/2 ||beta||^2 (= ||theta||^2: Q is orthonormal)
    for step in range(MAX_STEPS + 1):
        p = expit(u)
        gradient = to_reduced(rows.transpose_times(rows.m * p - rows.score)).ravel() + ridge * beta
        residual = float(np.abs(gradient).max())
        if progress is not None:
            progress(residual, target)
        if residual <= target or step == MAX_STEPS:
            return Fit(theta, step, residual, residual <= target)
        hessian = rows.reduced(rows.grams(rows.m * p * (1.0 - p)))
        if ridge:
            hessian[np.diag_indices_from(hessian)] += ridge
        upper, _ = cholesky_factor(hessian, RCOND if step == 0 and ridge == 0.0 else 0.0)
        if upper is None:  # at the start (all weights m/4 > 0): the data do not identify theta
            return None if step == 0 else Fit(theta, step, residual, False)
        direction = -solve(upper, gradient)
        du = rows.margins(from_reduced(direction.reshape(n - 1, d)))
        slope = float(gradient @ direction)
        size = 1.0
        while True:  # Armijo backtracking; the margins are affine along the direction
            trial_u = u + size * du
            trial_beta = beta + size * direction
            trial = rows.loss(trial_u) + 0.5 * ridge * float(trial_beta @ trial_beta)
            if trial <= value + ARMIJO * size * slope or size < 1e-12:
                break
            if size == 1.0 and -slope <= 1e-12 * (1.0 + abs(value)):  # the decrease is below the loss's
                break  # rounding: near the minimiser, where the full Newton step is right
            size *= 0.5
        beta, u, value = trial_beta, trial_u, trial
        theta = from_reduced(beta.reshape(n - 1, d))
    return Fit(theta, MAX_STEPS, residual, False)


def cluster_meat(rows: Rows, residual: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """C'(sum_g s_g s_g')C G/(G - 1), s_g = sum over cluster g's rows of residual_k r_k (the rows'
    score contributions; r_k = (e_j - e_i) (x) x_k): ((n-1)d, (n-1)d)."""
    n, d = rows.n, rows.d
    G = int(clusters.max()) + 1 if len(clusters) else 0
    keys = np.concatenate([clusters.astype(np.int64) * n + rows.j, clusters.astype(np.int64) * n + rows.i])
    cells, index = np.unique(keys, return_inverse=True)
    index = index.ravel()
    signed = np.concatenate([residual, -residual])
    X2 = np.concatenate([rows.X, rows.X])
    values = np.stack([np.bincount(index, signed * X2[:, c], len(cells)) for c in range(d)], axis=1)
    columns = ((cells % n)[:, None] * d + np.arange(d)).ravel()
    S = sparse.csr_matrix((values.ravel(), (np.repeat(cells // n, d), columns)), shape=(max(G, 1), n * d))
    meat = (S.T @ S).toarray().reshape(n, d, n, d).transpose(0, 2, 1, 3)
    used = len(np.unique(clusters))  # G/(G - 1): the usual small-sample factor (CR1 without (N-1)/(N-K))
    return reduce_blocks(np.ascontiguousarray(meat)) * (used / (used - 1.0))
