"""Negative log-likelihood of the contextual BTL model (paper label ``lik``), its gradient and
Hessian, on comparison data stored with per-row sufficient statistics.

A row k compares item ``a[k]`` with item ``b[k]`` under context ``x[k]``; ``wins[k]`` of ``m[k]``
comparisons were won by ``b[k]``, each with probability sigma(u_k), u_k = x_k'(theta_b - theta_a)
(paper eq. ``cBT``).  Then

    L(theta)   = sum_k m_k log(1 + e^{u_k}) - wins_k u_k,
    grad_b     = sum_k (m_k sigma(u_k) - wins_k) x_k,          grad_a = -grad_b,
    Hessian    = sum_k m_k sigma(1 - sigma) (e_b - e_a)(e_b - e_a)' (x) x_k x_k'.

The Hessian is assembled per edge: G_e = sum_{k on e} h_k x_k x_k' (one sparse product over the
stored x_k x_k' rows, O(t d^2)), then scattered into the four (a, b) blocks, O(E d^2); nothing
of size t (nd)^2 is ever formed.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit


class ComparisonData:
    """Growing store of comparison rows with their sufficient statistics.

    Preallocated to ``capacity`` rows; ``append`` is O(d^2).  Edges are registered on first use
    (or given up front) and each row keeps the index of its edge and the +-1 orientation.
    """

    def __init__(self, n_items: int, dim: int, capacity: int, edges=None):
        self.n_items = int(n_items)
        self.dim = int(dim)
        self.capacity = int(capacity)
        self.t = 0
        self.a = np.zeros(capacity, dtype=np.intp)
        self.b = np.zeros(capacity, dtype=np.intp)
        self.X = np.zeros((capacity, dim))
        self.XX = np.zeros((capacity, dim * dim))
        self.wins = np.zeros(capacity)
        self.m = np.zeros(capacity)
        self.edge_id = np.zeros(capacity, dtype=np.intp)
        self.orient = np.zeros(capacity)  # +1 when b is the edge's higher-numbered end
        self._edge_index: dict[tuple[int, int], int] = {}
        self.edge_lo: list[int] = []
        self.edge_hi: list[int] = []
        self._R = None  # reduced-coordinate design rows, built on first use (see _reduced_design)
        self._R_rows = 0
        if edges is not None:
            for lo, hi in np.asarray(edges):
                self._edge(int(lo), int(hi))

    @classmethod
    def from_rows(cls, i, j, X, wins, m, n_items: int) -> "ComparisonData":
        data = cls(n_items, X.shape[1], len(i))
        data.extend(i, j, X, wins, m)
        return data

    def _edge(self, a: int, b: int) -> int:
        key = (a, b) if a < b else (b, a)
        e = self._edge_index.get(key)
        if e is None:
            e = len(self.edge_lo)
            self._edge_index[key] = e
            self.edge_lo.append(key[0])
            self.edge_hi.append(key[1])
        return e

    def append(self, a: int, b: int, x, wins: float, m: float) -> None:
        if self.t >= self.capacity:
            raise ValueError(f"ComparisonData is full (capacity={self.capacity})")
        k = self.t
        self.a[k], self.b[k] = a, b
        self.X[k] = x
        self.XX[k] = np.outer(x, x).ravel()
        self.wins[k], self.m[k] = wins, m
        self.edge_id[k] = self._edge(int(a), int(b))
        self.orient[k] = 1.0 if b > a else -1.0
        self.t = k + 1

    # --- reduced coordinates ------------------------------------------------------------
    # theta = Q beta with Q the (n, n-1) Helmert basis; row k's margin is u_k = r_k' vec(beta) with
    # r_k = (Q[b_k] - Q[a_k]) (x) x_k.  Stacking the r_k once turns margins and the reduced gradient
    # into one matrix-vector product each (no gathers, no basis transforms).
    REDUCED_MAX_ENTRIES = 8_000_000  # above this (capacity x (n-1) d), fall back on the item form

    def _reduced_design(self, basis: np.ndarray):
        """The stored rows r_k, (t, (n-1) d), appending those added since the last call; None
        when the design would be too large (callers then use the item form)."""
        if self._R is None:
            k = (self.n_items - 1) * self.dim
            if self.capacity * k > self.REDUCED_MAX_ENTRIES:
                return None
            self._R = np.zeros((self.capacity, k))
        if self._R_rows < self.t:
            rows = np.arange(self._R_rows, self.t)
            q = basis[self.b[rows]] - basis[self.a[rows]]  # (r, n-1)
            self._R[rows] = (q[:, :, None] * self.X[rows][:, None, :]).reshape(len(rows), -1)
            self._R_rows = self.t
        return self._R[: self.t]

    def reduced_row(self, k: int, basis: np.ndarray) -> np.ndarray:
        """r_k = (Q[b_k] - Q[a_k]) (x) x_k, the reduced-coordinate design row of stored row k."""
        R = self._reduced_design(basis)
        if R is not None:
            return R[k]
        return np.outer(basis[self.b[k]] - basis[self.a[k]], self.X[k]).ravel()

    def reduced_margins(self, beta: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """u for theta = Q beta; ``beta`` flat ((n-1) d,), ``basis`` = Q."""
        R = self._reduced_design(basis)
        if R is not None:
            return R @ beta
        return self.margins(basis @ beta.reshape(-1, self.dim))

    def reduced_gradient(self, u: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """Q' grad L at margins u, flat ((n-1) d,)."""
        R = self._reduced_design(basis)
        if R is not None:
            t = self.t
            return (self.m[:t] * expit(u) - self.wins[:t]) @ R
        return (basis.T @ self.gradient(None, u)).ravel()

    def extend(self, i, j, X, wins, m) -> None:
        for k in range(len(i)):
            self.append(int(i[k]), int(j[k]), X[k], float(wins[k]), float(np.broadcast_to(m, len(i))[k]))

    def rank_bound(self) -> int:
        """An upper bound on the rank of the reduced design (and so of the reduced Hessian):
        the rows stored on edge e are (Q[hi] - Q[lo]) (x) x_k, which span at most min(n_e, d)
        dimensions.  Below (n - 1) d the data cannot identify theta, whatever the margins."""
        counts = np.bincount(self.edge_id[: self.t], minlength=len(self.edge_lo))
        return int(np.minimum(counts, self.dim).sum())

    @property
    def total_comparisons(self) -> float:
        return float(self.m[: self.t].sum())

    # --- loss pieces ---------------------------------------------------------------------
    def margins(self, theta: np.ndarray) -> np.ndarray:
        """u_k = x_k'(theta_b - theta_a) for the stored rows."""
        t = self.t
        diff = theta[self.b[:t]] - theta[self.a[:t]]
        return np.einsum("kd,kd->k", self.X[:t], diff)

    def nll(self, theta: np.ndarray, u: np.ndarray | None = None) -> float:
        """Paper eq. ``lik``."""
        t = self.t
        u = self.margins(theta) if u is None else u
        return float(np.dot(self.m[:t], np.logaddexp(0.0, u)) - np.dot(self.wins[:t], u))

    def gradient(self, theta: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """Gradient of ``nll`` as an (n, d) array; its item blocks sum to zero."""
        t = self.t
        u = self.margins(theta) if u is None else u
        r = self.m[:t] * expit(u) - self.wins[:t]
        self._edge_matrices()
        if self._onehot is not None and self._scatter is not None:
            self._sync_onehot()
            per_edge = (self._onehot[:t].T * (r * self.orient[:t])) @ self.X[:t]  # (E, d), oriented lo -> hi
            return self._incidence @ per_edge
        rx = r[:, None] * self.X[:t]
        grad = np.zeros((self.n_items, self.dim))
        np.add.at(grad, self.b[:t], rx)
        np.subtract.at(grad, self.a[:t], rx)
        return grad

    def _edge_matrices(self):
        """Per-graph constants, rebuilt when a new edge appears: the dense row-to-edge one-hot
        matrix (small graphs) and the (n*n, E) map from edge Grams to Hessian blocks."""
        n_edges = len(self.edge_lo)
        if getattr(self, "_n_edges_built", -1) == n_edges:
            return
        self._n_edges_built = n_edges
        lo = np.asarray(self.edge_lo, dtype=np.intp)
        hi = np.asarray(self.edge_hi, dtype=np.intp)
        self._lo, self._hi = lo, hi
        self._onehot = None
        if self.capacity * n_edges <= 4_000_000:
            self._onehot = np.zeros((self.capacity, n_edges))
            self._onehot[np.arange(self.t), self.edge_id[: self.t]] = 1.0
            self._onehot_rows = self.t
        self._scatter = None
        n = self.n_items
        if n * n * n_edges <= 2_000_000:
            scatter = np.zeros((n, n, n_edges))
            cols = np.arange(n_edges)
            scatter[lo, lo, cols] += 1.0
            scatter[hi, hi, cols] += 1.0
            scatter[lo, hi, cols] -= 1.0
            scatter[hi, lo, cols] -= 1.0
            self._scatter = scatter.reshape(n * n, n_edges)
            incidence = np.zeros((n, n_edges))
            incidence[lo, cols] = -1.0
            incidence[hi, cols] = 1.0
            self._incidence = incidence

    def _sync_onehot(self):
        if self._onehot_rows < self.t:  # rows appended since the one-hot was built
            rows = np.arange(self._onehot_rows, self.t)
            self._onehot[rows, self.edge_id[rows]] = 1.0
            self._onehot_rows = self.t

    def edge_grams(self, theta: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """G_e = sum_{k on edge e} m_k s_k (1 - s_k) x_k x_k', shape (E, d, d)."""
        t = self.t
        u = self.margins(theta) if u is None else u
        s = expit(u)
        h = self.m[:t] * s * (1.0 - s)
        self._edge_matrices()
        n_edges = len(self.edge_lo)
        if self._onehot is not None:
            self._sync_onehot()
            grams = (self._onehot[:t].T * h) @ self.XX[:t]
        elif self.dim == 1:
            grams = np.bincount(self.edge_id[:t], weights=h * self.XX[:t, 0], minlength=n_edges)[:, None]
        else:
            grams = np.zeros((n_edges, self.dim * self.dim))
            np.add.at(grams, self.edge_id[:t], h[:, None] * self.XX[:t])
        return grams.reshape(n_edges, self.dim, self.dim)

    def hessian_blocks(self, theta: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """Hessian of ``nll`` as an (n, n, d, d) block array (block [i, j] = d^2 L / dtheta_i dtheta_j')."""
        grams = self.edge_grams(theta, u)
        n, d = self.n_items, self.dim
        if self._scatter is not None:
            return (self._scatter @ grams.reshape(len(grams), d * d)).reshape(n, n, d, d)
        lo, hi = self._lo, self._hi
        blocks = np.zeros((n, n, d, d))
        np.add.at(blocks, (lo, lo), grams)
        np.add.at(blocks, (hi, hi), grams)
        np.add.at(blocks, (lo, hi), -grams)
        np.add.at(blocks, (hi, lo), -grams)
        return blocks

    def hessian(self, theta: np.ndarray) -> np.ndarray:
        """Full (nd, nd) Hessian, item-major (index i*d + k)."""
        return blocks_to_matrix(self.hessian_blocks(theta))


def blocks_to_matrix(blocks: np.ndarray) -> np.ndarray:
    n, _, d, _ = blocks.shape
    return blocks.transpose(0, 2, 1, 3).reshape(n * d, n * d)


def sum_zero_basis(n_items: int) -> np.ndarray:
    """Orthonormal basis Q (n, n-1) of {v in R^n : sum v = 0} (Helmert contrasts)."""
    q = np.zeros((n_items, n_items - 1))
    for k in range(1, n_items):
        q[:k, k - 1] = 1.0
        q[k, k - 1] = -k
        q[:, k - 1] /= np.sqrt(k * (k + 1))
    return q
