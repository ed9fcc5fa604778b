"""The sum-zero parametrisation: theta = Q beta with Q the orthonormal Helmert basis of
{v in R^n : sum v = 0}, and fast products with Q and Q' (O(n) per column instead of O(n^2)).

Column k-1 of Q (k = 1..n-1) is (1, ..., 1, -k, 0, ..., 0) / sqrt(k (k+1)) with k ones, so

    (Q' v)_{k-1} = (v_0 + ... + v_{k-1} - k v_k) / sqrt(k (k+1))          (a cumulative sum)
    (Q w)_i      = sum_{k > i} w_{k-1} / sqrt(k (k+1)) - i w_{i-1} / sqrt(i (i+1))   (a reverse one)

Both act along axis 0, so an (n, d) array of item vectors is transformed in one call; the paper's
C = Q (x) I_d (section "Asymptotic Normality") is this transform applied to the item axis.
"""
from __future__ import annotations

import numpy as np

_SCALES: dict = {}


def _scale(n: int) -> np.ndarray:
    s = _SCALES.get(n)
    if s is None:
        k = np.arange(1, n, dtype=float)
        s = _SCALES[n] = 1.0 / np.sqrt(k * (k + 1.0))
    return s


def sum_zero_basis(n_items: int) -> np.ndarray:
    """Orthonormal basis Q (n, n-1) of {v in R^n : sum v = 0} (Helmert contrasts), explicitly."""
    q = np.zeros((n_items, n_items - 1))
    for k in range(1, n_items):
        q[:k, k - 1] = 1.0
        q[k, k - 1] = -k
        q[:, k - 1] /= np.sqrt(k * (k + 1))
    return q


DENSE_BELOW = 48  # small n: a product with the explicit Q is cheaper than the transform's calls
# ... and for larger n where the columns are few: the product's n^2 w flops cost less than the
# transform's numpy calls up to about this many (measured, one BLAS thread, d = 10: n = 100, one
# column per dimension: 5 against 11-14 us; ten columns per dimension: 38 against 54 us; n = 200:
# 16 against 16-19 us)
DENSE_MAX_FLOPS = 1_000_000


def _dense(n: int, width: int) -> bool:
    return n < DENSE_BELOW or n * n * width <= DENSE_MAX_FLOPS


_BASES: dict = {}


def basis(n: int) -> np.ndarray:
    """The explicit Helmert basis Q (n, n-1), built once per n (do not modify it)."""
    q = _BASES.get(n)
    if q is None:
        q = _BASES[n] = sum_zero_basis(n)
    return q


# numpy's cumsum along axis 0 walks the array column by column: for many columns (a block of
# right-hand sides, the reduced Hessian's n x n d^2 blocks) a loop of row additions is 5-8x faster
# (measured: 0.75 vs 5.5 ms at 100 x 10,000) and adds in the same order, so gives the same bits
ROW_LOOP_FROM = 512


def cumsum0(v: np.ndarray) -> np.ndarray:
    """np.cumsum(v, axis=0), bit for bit, by row additions where rows are long."""
    if v.size < ROW_LOOP_FROM * v.shape[0] or v.shape[0] < 2:
        return np.cumsum(v, axis=0)
    out = np.empty(v.shape, dtype=np.result_type(v.dtype, np.float64) if v.dtype.kind != "f" else v.dtype)
    out[0] = v[0]
    for i in range(1, v.shape[0]):
        np.add(out[i - 1], v[i], out=out[i])
    return out


def to_reduced(v: np.ndarray) -> np.ndarray:
    """Q' v along axis 0: (n, ...) -> (n-1, ...)."""
    n = v.shape[0]
    if _dense(n, v.size // max(n, 1)):
        q = basis(n)
        return (q.T @ v.reshape(n, -1)).reshape((n - 1,) + v.shape[1:])
    scale = _scale(n).reshape((n - 1,) + (1,) * (v.ndim - 1))
    k = np.arange(1, n, dtype=float).reshape(scale.shape)
    return (cumsum0(v[:-1]) - k * v[1:]) * scale


def from_reduced(w: np.ndarray) -> np.ndarray:
    """Q w along axis 0: (n-1, ...) -> (n, ...); the result sums to zero along axis 0."""
    n = w.shape[0] + 1
    if _dense(n, w.size // max(n - 1, 1)):
        q = basis(n)
        return (q @ w.reshape(n - 1, -1)).reshape((n,) + w.shape[1:])
    a = w * _scale(n).reshape((n - 1,) + (1,) * (w.ndim - 1))
    tail = cumsum0(a[::-1])[::-1]  # tail[j] = a[j] + ... + a[n-2]
    out = np.empty((n,) + w.shape[1:])
    out[0] = tail[0]
    out[1:-1] = tail[1:]
    out[-1] = 0.0
    out[1:] -= np.arange(1, n, dtype=float).reshape((n - 1,) + (1,) * (w.ndim - 1)) * a
    return out


def items_from_reduced(w: np.ndarray, n: int, d: int) -> np.ndarray:
    """(Q (x) I_d) w for flat reduced vectors w ((n-1) d,) or ((n-1) d, c): flat item vectors
    (n d,) or (n d, c), each summing to zero over the items."""
    return from_reduced(w.reshape((n - 1, d) + w.shape[1:])).reshape((n * d,) + w.shape[1:])


def reduced_from_items(v: np.ndarray, n: int, d: int) -> np.ndarray:
    """(Q' (x) I_d) v for flat item vectors v (n d,) or (n d, c): flat reduced vectors."""
    return to_reduced(v.reshape((n, d) + v.shape[1:])).reshape(((n - 1) * d,) + v.shape[1:])
