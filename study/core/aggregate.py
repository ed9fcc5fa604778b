"""Exact aggregation of identical comparison rows: one row per (pair, context[, cluster]).

The likelihood (paper eq. ``lik``) depends on a row only through its pair, its context and the
sums ``score = wins + ties / 2`` and ``m``; its gradient and Hessian likewise.  So rows with the
same pair and context (either orientation: (i, j, x) with j's outright wins w is (j, i, x) with
m - w - t) may be summed into one row without changing the estimate, Phi_11 or the debiased
estimator.  The per-comparison sandwich's meat is a sum over comparisons of a function of the
row's outcome counts, so it is unchanged too.  The cluster-robust meat is a sum over clusters of
squared *sums* of score residuals: rows may be merged only within a cluster, so with clusters the
key is (cluster, pair, context) (:mod:`study.core.batch`).  One million raw votes of 100 models
(d = 1) become at most 4,950 rows.

Rows are keyed by a 64-bit hash of their pair, cluster and context bits (-0.0 read as 0.0); every
group is then checked against its first row exactly, and on a collision the exact (slower) key
is used instead.  Where no two rows coincide, the input comes back unchanged (same rows, same
order), so callers whose rows are already distinct get the same numbers as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)


@dataclass
class Aggregated:
    """Comparison rows after aggregation (``groups`` None: the input, unchanged).

    Attributes
    ----------
    i, j, X, wins, ties, m : ndarray
        The rows (aggregated rows have ``i < j``; ``wins`` are j's outright wins, ``ties`` the ties).
    clusters : ndarray or None
        The cluster code of each row (aggregation kept clusters apart).
    groups : ndarray or None
        For each input row, the index of the row it was summed into.
    """

    i: np.ndarray
    j: np.ndarray
    X: np.ndarray
    wins: np.ndarray
    ties: np.ndarray
    m: np.ndarray
    clusters: np.ndarray | None = None
    groups: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.i)


def _mix(h: np.ndarray, column: np.ndarray) -> np.ndarray:
    h = (h ^ column) * _MULTIPLIER
    return h ^ (h >> np.uint64(31))


def _group(key: np.ndarray, lo, hi, X, clusters, constant: bool):
    """(groups, first): each row's group (0..G-1) and each group's first row, exactly by (pair,
    cluster, context); ``key`` an int64 key of the pair and cluster, exact when ``constant``."""
    if not constant:
        with np.errstate(over="ignore"):
            h = _mix(np.full(len(key), _GOLDEN, dtype=np.uint64), key.view(np.uint64))
            bits = np.ascontiguousarray(X + 0.0).view(np.uint64)
            for c in range(bits.shape[1]):
                h = _mix(h, bits[:, c])
        key = h
    _, first, groups = np.unique(key, return_index=True, return_inverse=True)
    groups = groups.ravel()
    if constant:
        return groups, first
    rep = first[groups]
    same = (lo[rep] == lo) & (hi[rep] == hi) & np.all(X[rep] == X, axis=1)
    if clusters is not None:
        same &= clusters[rep] == clusters
    if same.all():
        return groups, first
    # a hash collision (rare): the exact key, a row-wise unique over the rows' bits
    columns = [lo.astype(np.uint64), hi.astype(np.uint64), np.ascontiguousarray(X + 0.0).view(np.uint64)]
    if clusters is not None:
        columns.insert(0, clusters.astype(np.uint64))
    exact = np.column_stack(columns)
    _, first, groups = np.unique(exact, axis=0, return_index=True, return_inverse=True)
    return groups.ravel(), first


def aggregate(i, j, X, wins, ties, m, clusters=None) -> Aggregated:
    """Sum the rows that share their pair and context (and cluster, when given) into one row each
    (module docstring).  Inputs are validated arrays: ``i``, ``j`` item indices, ``X`` (K, d),
    ``wins`` and ``ties`` counts (:mod:`study.core.outcomes`), ``m`` per row, ``clusters`` integer
    codes or None."""
    i = np.asarray(i, dtype=np.intp)
    j = np.asarray(j, dtype=np.intp)
    K = len(i)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    n = int(hi.max()) + 1 if K else 1
    key = lo.astype(np.int64) * n + hi
    if clusters is not None:
        clusters = np.asarray(clusters, dtype=np.int64)
        key = key + clusters * (n * n)
    # one context for every row (d = 1 votes): the int64 key is exact, unless it could overflow
    constant = (bool(np.all(X == X[0])) if K else True) and (
        clusters is None or float(clusters.max(initial=0) + 1) * n * n < 2.0 ** 62)
    groups, first = _group(key, lo, hi, X, clusters, constant)
    size = len(first)
    if size == K:
        return Aggregated(i, j, X, wins, ties, m, clusters, None)
    hi_wins = np.where(i < j, wins, m - wins - ties)  # outright wins of the pair's higher index
    return Aggregated(lo[first], hi[first], X[first], np.bincount(groups, hi_wins, size),
                      np.bincount(groups, ties, size), np.bincount(groups, m, size),
                      None if clusters is None else clusters[first], groups)
