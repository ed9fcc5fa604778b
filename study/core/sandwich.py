"""Sandwich (robust) standard errors of the debiased estimator: intervals that hold when the
comparisons are not Bernoulli draws, e.g. when a tie is counted as half a win.

The paper's covariance of the debiased estimator (Corollary ``inf``) is model-based,
Phi_11 = C (C'HC)^{-1} C' with H the Hessian of L_t (label ``lik``): it assumes that each comparison
has variance p(1 - p).  A tie counted as half a win has less (a tie at p = 1/2 has none), so on
judgments with many ties those intervals are too wide.  The sandwich (Huber-White) covariance
keeps the Hessian as the "bread" and puts the empirical variance of the score in the middle:

    V = C K^{-1} (C'BC) K^{-1} C',   K = C'HC,   B = sum_k v_k r_k r_k',

with r_k = (e_j - e_i) (x) x_k row k's design vector (C = Q (x) I_d, Q the Helmert contrasts of
:mod:`.contrasts`, as for Phi_11) and v_k the squared residuals of row k's m_k comparisons, each
an independent unit:

    v_k = sum over the comparisons of (y - p_k)^2,   y = 1 (j won), 1/2 (tie), 0 (i won),
        = full_k (1 - p_k)^2 + ties_k (1/2 - p_k)^2 + (m_k - full_k - ties_k) p_k^2,
    p_k = sigma(x_k'(theta_j - theta_i)),   full_k = row k's outright wins of j.

This is the estimator of LMArena's ``arena-rank`` (``BradleyTerry``, ``ci_method="sandwich"``),
which adds a ridge of 1e-5 x (number of votes) to its Hessian and has no sum-zero constraint.
Without ties E v_k = m_k p_k (1 - p_k), the row's curvature, so V and Phi_11 agree asymptotically.
Where comparisons are correlated within clusters (several verdicts of one judge), the meat sums the
clusters' squared score sums instead (``debias(..., se="cluster", clusters=...)``,
:func:`study.core.batch.cluster_meat`).

Representation.  :func:`robust` returns a :class:`study.DebiasResult` whose ``factor`` U_s
satisfies U_s'U_s = V_r^{-1} = K B^{-1} K (V_r = C'VC, the reduced covariance), so every method of
the result (``cov``, ``se``, ``ci``, ``phi11``, ``spread``, ``pair_spread``, ``sample``) gives the
sandwich values; ``theta_d`` is unchanged (the debiasing step uses the Hessian only).  U_s is the
triangular factor of the QR decomposition of L_B^{-1} K (B = L_B L_B'), so K's condition number is
not squared.  B and K are formed here from the rows (dense, ((n-1)d)^2, as Phi_11 is).
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy.linalg import LinAlgError, cholesky, qr, solve_triangular
from scipy.special import expit

from .contrasts import to_reduced

SE_METHODS = ("model", "sandwich")
DEBIAS_SE_METHODS = ("model", "sandwich", "cluster")  # :func:`study.debias` also clusters (study.core.batch)


def check_se(se, allowed=SE_METHODS) -> str:
    """``se`` if it names one of the ``allowed`` standard-error methods."""
    if not isinstance(se, str) or se not in allowed:
        raise ValueError(f"se must be one of {allowed}, got {se!r}")
    return se


def check_clusters(clusters, rows: int) -> np.ndarray:
    """Integer codes 0..G-1 of ``clusters`` (one label per row: judge or annotator ids, numbers or
    text), with at least two clusters; ``ValueError`` naming the problem."""
    if clusters is None:
        raise ValueError("se='cluster' needs clusters=: one label per row (e.g. the judge or annotator of each row)")
    labels = np.asarray(clusters)
    if labels.ndim != 1 or len(labels) != rows:
        raise ValueError(f"clusters must have one label per row ({rows}), got shape {labels.shape}")
    if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
        raise ValueError(f"clusters[{int(np.flatnonzero(~np.isfinite(labels))[0])}] is NaN or infinite: "
                         "every row needs a cluster label")
    if labels.dtype.kind == "O" and any(label is None for label in labels):
        raise ValueError("clusters has a missing label (None): every row needs a cluster label")
    try:
        codes = np.unique(labels, return_inverse=True)[1].ravel()
    except TypeError:
        raise ValueError("clusters must hold labels of one kind (all numbers or all text)") from None
    if rows and codes.max() < 1:
        raise ValueError("clusters holds a single cluster: the cluster-robust covariance needs at least two")
    return codes.astype(np.int64)


def comparison_variance(p: np.ndarray, score: np.ndarray, m: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """v_k, the sum of (y - p_k)^2 over row k's comparisons (module docstring), from the row's score
    (outright wins + ties / 2) and ties."""
    full = score - ties / 2.0
    losses = m - full - ties
    return full * (1.0 - p) ** 2 + ties * (0.5 - p) ** 2 + losses * p ** 2


def reduced_gram(i, j, X, weights, n_items: int) -> np.ndarray:
    """C'(sum_k weights_k r_k r_k')C, ((n-1)d, (n-1)d): the item blocks of the weighted Gram
    matrix, then the Helmert transform on both item axes."""
    d = X.shape[1]
    xx = weights[:, None, None] * X[:, :, None] * X[:, None, :]
    blocks = np.zeros((n_items, n_items, d, d))
    np.add.at(blocks, (i, i), xx)
    np.add.at(blocks, (j, j), xx)
    np.add.at(blocks, (i, j), -xx)
    np.add.at(blocks, (j, i), -xx)
    reduced = to_reduced(to_reduced(blocks).transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    k = n_items - 1
    return np.ascontiguousarray(reduced.transpose(0, 2, 1, 3)).reshape(k * d, k * d)


def precision_factor(hessian: np.ndarray, meat: np.ndarray) -> np.ndarray:
    """Upper triangular U with U'U = K B^{-1} K for K = ``hessian``, B = ``meat`` (both positive
    definite); LinAlgError if B is not."""
    lower = cholesky(meat, lower=True)
    r = qr(solve_triangular(lower, hessian, lower=True), mode="r")[0]
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)  # a positive diagonal, as a Cholesky factor has
    return np.ascontiguousarray(signs[:, None] * r)


def robust(result, theta, i, j, X, score, m, ties):
    """The sandwich version of a debiased result (module docstring), from validated rows whose
    ``score`` counts a tie as half a win (as the estimator's rows do)."""
    if not result.available:
        return dataclasses.replace(result, se_method="sandwich", _cache={})
    n = theta.shape[0]
    p = expit(np.einsum("kd,kd->k", X, theta[j] - theta[i]))
    hessian = reduced_gram(i, j, X, m * p * (1.0 - p), n)
    meat = reduced_gram(i, j, X, comparison_variance(p, score, m, ties), n)
    try:
        factor = precision_factor(hessian, meat)
    except LinAlgError:  # some direction's comparisons have no residual variance (e.g. all ties at p = 1/2)
        return dataclasses.replace(result, theta_d=np.full_like(result.theta_d, np.nan), available=False,
                                   condition=np.inf, factor=None, se_method="sandwich", _cache={})
    return dataclasses.replace(result, factor=factor, se_method="sandwich", _cache={})
