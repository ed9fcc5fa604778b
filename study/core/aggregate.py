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


def _dense_groups(key: np.ndarray):
    """(groups, keys of the groups) for small non-negative int64 keys: a lookup table, O(K)."""
    present = np.zeros(int(key.max()) + 1, dtype=bool)
    present[key] = True
    keys = np.flatnonzero(present)
    lookup = np.cumsum(present) - 1
    return lookup[key], keys


def _hashed_groups(key, lo, hi, X, clusters):
    """(groups, first row of each group), exactly by (pair, cluster, context) bits, or None when
    every row is distinct (then nothing more is computed)."""
    with np.errstate(over="ignore"):
        h = _mix(np.full(len(key), _GOLDEN, dtype=np.uint64), key.view(np.uint64))
        bits = np.ascontiguousarray(X + 0.0).view(np.uint64)
        for c in range(bits.shape[1]):
            h = _mix(h, bits[:, c])
    ordered = np.sort(h)
    if not np.any(ordered[1:] == ordered[:-1]):  # distinct hashes: distinct rows
        return None
    _, first, groups = np.unique(h, return_index=True, return_inverse=True)
    groups = groups.ravel()
    rep = first[groups]
    same = (lo[rep] == lo) & (hi[rep] == hi) & np.all(X[rep] == X, axis=1)
    if clusters is not None:
        same &= clusters[rep] == clusters
    if not same.all():  # a hash collision (rare): the exact key, a row-wise unique over the rows' bits
        columns = [lo.astype(np.uint64), hi.astype(np.uint64), np.ascontiguousarray(X + 0.0).view(np.uint64)]
        if clusters is not None:
            columns.insert(0, clusters.astype(np.uint64))
        _, first, groups = np.unique(np.column_stack(columns), axis=0, return_index=True, return_inverse=True)
        groups = groups.ravel()
    return (groups, first) if len(first) < len(key) else None


def aggregate(i, j, X, wins, ties, m, clusters=None) -> Aggregated:
    """Sum the rows that share their pair and context (and cluster, when given) into one row each
    (module docstring).  Inputs are validated arrays: ``i``, ``j`` item indices, ``X`` (K, d),
    ``wins`` and ``ties`` counts (:mod:`study.core.outcomes`), ``m`` per row, ``clusters`` integer
    codes (0..G-1) or None."""
    i = np.asarray(i, dtype=np.intp)
    j = np.asarray(j, dtype=np.intp)
    K = len(i)
    if K == 0:
        return Aggregated(i, j, X, wins, ties, m, clusters, None)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    n = int(hi.max()) + 1
    width = float(n) * n * (1.0 if clusters is None else float(clusters.max()) + 1.0)
    key = lo.astype(np.int64) * n + hi
    if clusters is not None:
        clusters = np.asarray(clusters, dtype=np.int64)
        key += clusters * (n * n)
    if bool(np.all(X == X[0])) and width < 2.0 ** 62:
        # one context for every row (d = 1 votes): the key is exact; the group's pair and cluster
        # are read off it (a lookup table where the keys are few, else a sort)
        if width <= max(4.0 * K, 2.0 ** 22):
            groups, keys = _dense_groups(key)
        else:
            keys, groups = np.unique(key, return_inverse=True)
            groups = groups.ravel()
        if len(keys) == K:
            return Aggregated(i, j, X, wins, ties, m, clusters, None)
        pair = keys % (n * n)
        rep_lo, rep_hi = pair // n, pair % n
        rep_X = np.broadcast_to(X[0], (len(keys), X.shape[1])).copy()
        rep_clusters = None if clusters is None else keys // (n * n)
    else:
        found = _hashed_groups(key, lo, hi, X, clusters)
        if found is None:
            return Aggregated(i, j, X, wins, ties, m, clusters, None)
        groups, first = found
        rep_lo, rep_hi, rep_X = lo[first], hi[first], X[first]
        rep_clusters = None if clusters is None else clusters[first]
    size = len(rep_lo)
    hi_wins = np.where(i < j, wins, m - wins - ties)  # outright wins of the pair's higher index
    return Aggregated(rep_lo.astype(np.intp), rep_hi.astype(np.intp), rep_X, np.bincount(groups, hi_wins, size),
                      np.bincount(groups, ties, size), np.bincount(groups, m, size), rep_clusters, groups)
