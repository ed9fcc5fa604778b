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

import math

import numpy as np
from scipy import sparse
from scipy.linalg import LinAlgError, lapack
from scipy.special import expit

from .contrasts import from_reduced, to_reduced
from .threads import one_blas_thread

RCOND = 1e-10  # as study.core.inference.RCOND: K counts as singular below this reciprocal condition number

MAX_STEPS = 100
ARMIJO = 1e-4
# Separable data (no finite MLE) are refused by a linear program (study.core.separation), which on
# a million-entry design takes seconds to minutes.  Callers run it before a batch fit only where
# the design has at most this many entries, and otherwise after the fit unless the fit certifies
# that the data are not separable (:func:`not_separable`).
SEPARATION_BEFORE_FIT = 200_000


class Rows:
    """Comparison rows prepared for repeated passes: row k compares ``i[k]`` with ``j[k]`` under
    ``X[k]``; of its ``m[k]`` comparisons ``wins[k]`` were won outright by ``j[k]`` and ``ties[k]``
    tied (:mod:`study.core.outcomes`); ``clusters`` (integer codes) for the cluster-robust meat.

    The rows are stored once in a canonical layout: each oriented from its pair's lower to its
    higher item (u_k = x_k'(theta_hi - theta_lo), ``score`` the higher item's outright wins plus
    half the ties: exact, the likelihood is symmetric) and grouped by edge (a stable sort), so that
    margins, gradients and the edge Grams are one BLAS call per edge, or bincounts where every row
    has the same context (d = 1 votes)."""

    def __init__(self, i, j, X, wins, ties, m, n_items: int, clusters=None):
        i, j = np.asarray(i, dtype=np.intp), np.asarray(j, dtype=np.intp)
        X, m = np.asarray(X, dtype=float), np.asarray(m, dtype=float)
        ties = np.asarray(ties, dtype=float)
        self.n, self.d = int(n_items), X.shape[1]
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        key = lo.astype(np.int64) * self.n + hi
        if self.n * self.n <= max(4 * len(key), 1 << 22):  # a lookup table over the pairs
            present = np.zeros(self.n * self.n, dtype=bool)
            present[key] = True
            keys = np.flatnonzero(present)
            edge = (np.cumsum(present) - 1)[key]
        else:
            keys, edge = np.unique(key, return_inverse=True)
        E = len(keys)
        self.edge_lo, self.edge_hi = (keys // self.n).astype(np.intp), (keys % self.n).astype(np.intp)
        # numpy sorts 16-bit keys by radix (linear time)
        order = np.argsort(edge.astype(np.uint16) if E <= 1 << 16 else edge, kind="stable")
        self.counts = np.bincount(edge, minlength=E)
        self.bounds = np.zeros(E + 1, dtype=np.intp)
        np.cumsum(self.counts, out=self.bounds[1:])
        hi_wins = np.where(i > j, m - np.asarray(wins, dtype=float) - ties, wins)
        self.m, self.ties = m[order], ties[order]
        self.score = hi_wins[order] + 0.5 * self.ties
        self.clusters = None if clusters is None else np.asarray(clusters, dtype=np.int64)[order]
        self.total = float(m.sum())
        # with one context for every row (d = 1 votes) margins are differences of two item scores
        self.constant = bool(np.all(X == X[0]))
        self.x0 = X[0].copy()
        self.X = None if self.constant else X.take(order, axis=0)

    @property
    def n_edges(self) -> int:
        return len(self.edge_lo)

    @property
    def size(self) -> int:
        return len(self.m)

    def items(self):
        """(lo, hi) of every row, in the rows' order."""
        return np.repeat(self.edge_lo, self.counts), np.repeat(self.edge_hi, self.counts)

    def margins(self, theta: np.ndarray) -> np.ndarray:
        """u_k = x_k'(theta_hi - theta_lo)."""
        diff = theta[self.edge_hi] - theta[self.edge_lo]
        if self.constant:
            return np.repeat(diff @ self.x0, self.counts)
        u = np.empty(self.size)
        bounds, X = self.bounds, self.X
        for e in range(self.n_edges):
            np.dot(X[bounds[e]:bounds[e + 1]], diff[e], out=u[bounds[e]:bounds[e + 1]])
        return u

    def per_edge(self, s: np.ndarray) -> np.ndarray:
        """sum_{k on e} s_k x_k, shape (E, d)."""
        if self.constant:
            return np.add.reduceat(s, self.bounds[:-1])[:, None] * self.x0[None, :]
        out = np.empty((self.n_edges, self.d))
        bounds, X = self.bounds, self.X
        for e in range(self.n_edges):
            np.dot(s[bounds[e]:bounds[e + 1]], X[bounds[e]:bounds[e + 1]], out=out[e])
        return out

    def transpose_times(self, s: np.ndarray) -> np.ndarray:
        """R's in item form (n, d): the edges' sums of s_k x_k into their higher item, minus into the lower."""
        per_edge = self.per_edge(s)
        out = np.zeros((self.n, self.d))
        np.add.at(out, self.edge_hi, per_edge)
        np.subtract.at(out, self.edge_lo, per_edge)
        return out

    def grams(self, w: np.ndarray) -> np.ndarray:
        """G_e = sum_{k on edge e} w_k x_k x_k', shape (E, d, d)."""
        E, d = self.n_edges, self.d
        if self.constant:
            return np.add.reduceat(w, self.bounds[:-1])[:, None, None] * np.outer(self.x0, self.x0)[None]
        bounds, X = self.bounds, self.X
        scaled = X * w[:, None]
        out = np.empty((E, d, d))
        for e in range(E):
            np.dot(X[bounds[e]:bounds[e + 1]].T, scaled[bounds[e]:bounds[e + 1]], out=out[e])
        return out

    def reduced(self, grams: np.ndarray) -> np.ndarray:
        """C'(sum_e L_e (x) G_e)C, ((n-1)d, (n-1)d): the item blocks, then Q' on both item axes."""
        return reduce_blocks(laplacian_blocks(grams, self.edge_lo, self.edge_hi, self.n))

    def loss(self, u: np.ndarray) -> float:
        """sum_k m_k log(1 + e^{u_k}) - score_k u_k."""
        softplus = np.maximum(u, 0.0) + np.log1p(np.exp(-np.abs(u)))
        return float(np.dot(self.m, softplus) - np.dot(self.score, u))


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
    """A batch fit: ``theta`` (n, d), ``steps``, ``kkt_residual``, ``converged`` (the stopping rule
    met), ``margin`` (the largest |x_k'(theta_j - theta_i)|: large where the data are nearly separable)."""

    def __init__(self, theta, steps, residual, converged, margin=0.0):
        self.theta, self.steps, self.kkt_residual, self.converged = theta, steps, residual, converged
        self.margin = margin


def fit(rows: Rows, *, ridge: float = 0.0, tol: float | None = None, progress=None) -> Fit | None:
    """:func:`newton` with BLAS on one thread (:func:`one_blas_thread`)."""
    with one_blas_thread():
        return newton(rows, ridge=ridge, tol=tol, progress=progress)


def newton(rows: Rows, *, ridge: float = 0.0, tol: float | None = None, progress=None) -> Fit | None:
    """Newton's method for argmin L(theta) + ridge/2 ||theta||^2 over the sum-zero space (module
    docstring); None where the data do not identify theta (no ridge); ``converged`` False where the
    stopping rule is not met within ``MAX_STEPS`` steps (separable or badly scaled data).
    ``progress(residual, target)`` is called after every step."""
    n, d = rows.n, rows.d
    tol = (1e-11 if ridge == 0.0 else 1e-10) if tol is None else tol
    target = tol * (1.0 + rows.total)
    beta = np.zeros((n - 1) * d)
    theta = np.zeros((n, d))
    u = np.zeros(rows.size)
    value = rows.loss(u)  # F(beta) = L + ridge/2 ||beta||^2 (= ||theta||^2: Q is orthonormal)
    for step in range(MAX_STEPS + 1):
        p = expit(u)
        gradient = to_reduced(rows.transpose_times(rows.m * p - rows.score)).ravel() + ridge * beta
        residual = float(np.abs(gradient).max())
        if progress is not None:
            progress(residual, target)
        if step and (residual <= target or step == MAX_STEPS):
            return Fit(theta, step, residual, residual <= target, float(np.abs(u).max()))
        hessian = rows.reduced(rows.grams(rows.m * p * (1.0 - p)))
        if ridge:
            hessian[np.diag_indices_from(hessian)] += ridge
        upper, _ = cholesky_factor(hessian, RCOND if step == 0 and ridge == 0.0 else 0.0)
        if upper is None:  # at the start (every weight m/4 > 0): the data do not identify theta
            return None if step == 0 else Fit(theta, step, residual, False, float(np.abs(u).max()))
        if residual <= target:  # at the start, identified
            return Fit(theta, step, residual, True, 0.0)
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
    return Fit(theta, MAX_STEPS, residual, False, float(np.abs(u).max()))


DENSE_SCORES_MAX = 20_000_000  # G n d entries of the clusters' score sums held dense (160 MB)


def certify(fitted: Fit, rows: Rows) -> bool:
    """:func:`not_separable` with BLAS on one thread."""
    with one_blas_thread():
        return not_separable(fitted, rows)


def not_separable(fitted: Fit, rows: Rows) -> bool:
    """A certificate that the data are not separable, from an unpenalised fit that met its stopping
    rule: along a separating direction v (unit length) only the separated rows have r_k'v != 0, and
    each pushes the gradient the same way, so at a point with reduced gradient g,

        v'Kv = sum_sep w_k (r_k'v)^2 <= max_k |r_k'v| |grad'v| <= sqrt(2) max_k ||x_k|| ||g||_inf sqrt(p)

    (w_k <= m_k min(p_k, 1 - p_k), |r_k'v| <= sqrt(2) ||x_k||, p = (n-1)d).  So where the smallest
    eigenvalue of the reduced Hessian K at the fit exceeds that bound, no separating direction
    exists: True.  False (no certificate: let the linear program decide) otherwise, or where K is
    too large to take its eigenvalues (p > 2,000)."""
    if not fitted.converged:
        return False
    p_size = (rows.n - 1) * rows.d
    if p_size > 2000:
        return False
    u = rows.margins(fitted.theta)
    prob = expit(u)
    hessian = rows.reduced(rows.grams(rows.m * prob * (1.0 - prob)))
    smallest = float(np.linalg.eigvalsh(hessian)[0])
    largest_x = float(np.linalg.norm(rows.x0)) if rows.constant else float(np.sqrt((rows.X ** 2).sum(axis=1).max()))
    return smallest > math.sqrt(2.0) * largest_x * fitted.kkt_residual * math.sqrt(p_size)


def cluster_meat(rows: Rows, residual: np.ndarray) -> np.ndarray:
    """C'(sum_g s_g s_g')C G/(G - 1) for the rows' clusters, s_g = sum over cluster g's rows of
    residual_k r_k (the rows' score contributions; r_k = (e_hi - e_lo) (x) x_k):
    ((n-1)d, (n-1)d).  The s_g are summed by bincounts into a dense G x nd array (S'S one BLAS
    product) where it fits, else into a sparse one over the (cluster, item) cells that occur."""
    n, d = rows.n, rows.d
    clusters = rows.clusters
    G = int(clusters.max()) + 1
    lo, hi = rows.items()
    cells = np.concatenate([clusters * n + hi, clusters * n + lo])
    signed = np.concatenate([residual, -residual])
    if G * n * d <= DENSE_SCORES_MAX:
        if rows.constant:
            S = np.bincount(cells, signed, G * n)[:, None] * rows.x0[None, :]
        else:
            X2 = np.concatenate([rows.X, rows.X])
            S = np.stack([np.bincount(cells, signed * X2[:, c], G * n) for c in range(d)], axis=1)
        S = S.reshape(G, n * d)
        meat = S.T @ S
    else:
        occurring, index = np.unique(cells, return_inverse=True)
        index = index.ravel()
        if rows.constant:
            values = np.bincount(index, signed, len(occurring))[:, None] * rows.x0[None, :]
        else:
            X2 = np.concatenate([rows.X, rows.X])
            values = np.stack([np.bincount(index, signed * X2[:, c], len(occurring)) for c in range(d)], axis=1)
        columns = ((occurring % n)[:, None] * d + np.arange(d)).ravel()
        S = sparse.csr_matrix((values.ravel(), (np.repeat(occurring // n, d), columns)), shape=(G, n * d))
        meat = (S.T @ S).toarray()
    used = int(np.count_nonzero(np.bincount(clusters)))  # G/(G - 1): CR1's factor without (N-1)/(N-K)
    blocks = np.ascontiguousarray(meat.reshape(n, d, n, d).transpose(0, 2, 1, 3))
    return reduce_blocks(blocks) * (used / (used - 1.0))
