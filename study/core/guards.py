"""Refusals of the public estimators' inputs before any work: a fit or a debiasing whose memory or
time is clearly out of reach (with the estimate), and a theta for :func:`study.debias` of the wrong
shape or off the sum-zero space.
"""
from __future__ import annotations

import warnings

import numpy as np

from .limits import FLOPS_PER_SECOND, MEMORY_LIMIT_BYTES, TIME_LIMIT_SECONDS

NEWTON_FACTORISATIONS = 30  # a fit's typical number of factorisations (measured 5-60)
SUM_ZERO_TOL = 1e-8
# Every fit holds item vectors (n d floats each: theta, gradients, CG directions, preconditioner columns) and
# iterates over them.  Measured on 200 rows of 50 compared items with d = 2 (one core): peak memory 288, 514,
# 736 MB at n = 100,000, 300,000, 500,000 (about 1.1 kB per item); CPU 0.75, 3.1, 15.2, 104 s at n = 100,000,
# 200,000, 300,000, 500,000 -- like (n d)^4 (the conjugate gradients' iterations grow with the items that no
# row identifies): about 28 CPU-minutes at n = 1,000,000.
ITEM_VECTORS = 80
ITEM_SECONDS = 1.05e-22  # times (n d)^4
WARN_SECONDS = 300.0  # a call estimated above this many CPU seconds (but within the limits) warns first


def fit_cost(n_items: int, dim: int, rows: int, factorisations: int = NEWTON_FACTORISATIONS,
             fits: int = 1, dense: bool = False) -> tuple:
    """(bytes, seconds): rough memory and single-core time of ``fits`` fits of ``rows`` comparison
    rows, each with ``factorisations`` refits: the stored rows (x, vec(x x'), indices), the
    row-space or dense reduced Hessian, per refit its assembly (rows x d^2) and factorisation, and
    the item vectors of n d floats the solver holds and iterates over (n included).  ``dense``: the
    dense p x p reduced Hessian, its factor and a copy (debias), once the rows can identify theta."""
    n, d = float(n_items), float(dim)
    p = (n - 1) * d
    small = min(rows, p)
    memory = 8.0 * (rows * (d * d + 3 * d + 5) + 3.0 * small * small + 2.0 * p + ITEM_VECTORS * n * d)
    flops = factorisations * (small ** 3 / 3.0 + rows * d * d + (p * p * 2.0 if rows >= p else rows * small))
    if dense and rows * d >= p:
        memory += 8.0 * 3 * p * p
        flops += p ** 3 / 3.0 + rows * d * d * 2
    return memory, fits * (flops / FLOPS_PER_SECOND + ITEM_SECONDS * (n * d) ** 4)


def check_fit_size(n_items: int, dim: int, rows: int, what: str, factorisations: int = NEWTON_FACTORISATIONS,
                   fits: int = 1, extra_bytes: float = 0.0, dense: bool = False, compared=None):
    """ValueError naming ``what`` and the estimate when the work is clearly out of reach; a
    RuntimeWarning with the estimate when it is within reach but long (above :data:`WARN_SECONDS`).

    ``compared``: the rows' item indices ``(i, j)``.  A long fit (above :data:`WARN_SECONDS`) with
    items that no row compares is refused rather than warned of: those items' estimates are set by
    the tie-break alone, and they are what makes it long (the (n d)^4 term of :func:`fit_cost`), so
    the same fit over the compared items only is the one to run."""
    memory, seconds = fit_cost(n_items, dim, rows, factorisations, fits, dense)
    memory += extra_bytes
    sizes = f"{what} with {rows:,} rows, n_items={n_items:,}, d={dim}"
    advice = ("use fewer rows (aggregate identical comparisons into one row with m > 1), a smaller d, or fewer items "
              "(only the items the rows compare)")
    if memory > MEMORY_LIMIT_BYTES or seconds > TIME_LIMIT_SECONDS:
        raise ValueError(
            f"{sizes} is out of reach: it would need about {memory / 2 ** 30:.3g} GiB of memory and "
            f"{seconds / 3600:.3g} CPU-hours (limits {MEMORY_LIMIT_BYTES / 2 ** 30:g} GiB, "
            f"{TIME_LIMIT_SECONDS / 3600:g} h); {advice}")
    if seconds > WARN_SECONDS and compared is not None:
        seen = np.unique(np.concatenate([np.ravel(compared[0]), np.ravel(compared[1])])).size
        if seen < n_items:
            raise ValueError(
                f"{sizes} would take about {seconds / 60:.3g} CPU-minutes and {memory / 2 ** 30:.3g} GiB of memory, "
                f"and {n_items - seen:,} of its {n_items:,} items appear in no row (their estimates would be set by "
                f"the tie-break alone, and they are what makes it long): fit the {seen:,} compared items only "
                "(renumber them 0, 1, ...)")
    if seconds > WARN_SECONDS:
        warnings.warn(f"{sizes} will take about {seconds / 60:.3g} CPU-minutes and {memory / 2 ** 30:.3g} GiB of memory "
                      f"(an estimate); to be quicker, {advice}", RuntimeWarning, stacklevel=3)


def check_theta_for_debias(theta: np.ndarray, i, j, X) -> None:
    """ValueError when ``theta`` (already a finite 2-d array) cannot be the estimate of these
    comparisons: its shape does not match them (naming both, and a transposition), or its rows do
    not sum to zero (refused, not re-centred: the intervals would be for another
    parametrisation)."""
    n_rows, d = theta.shape
    X = np.asarray(X)
    width = X.shape[1] if X.ndim == 2 else None
    try:
        largest = max(int(np.max(i)), int(np.max(j)))
    except (TypeError, ValueError):  # empty or not integers: check.comparisons names it
        largest = -1
    if (width is not None and width != d) or largest >= n_rows:
        transposed = width == n_rows and largest < d
        hint = f"; it looks transposed: theta.T has shape {theta.T.shape}" if transposed else ""
        raise ValueError(
            f"theta has shape {theta.shape}, but these comparisons need (n_items, d) with d = {width} (X's "
            f"columns) and n_items > {largest} (the largest item index in i, j){hint}")
    sums = theta.sum(axis=0)
    offset = float(np.abs(sums).max()) / n_rows
    if offset > SUM_ZERO_TOL * max(1.0, float(np.abs(theta).max())):
        raise ValueError(
            f"theta's rows do not sum to zero (their mean is off zero by up to {offset:.3g}, e.g. a reference-item "
            "fit); debias works in the sum-zero parametrisation of the paper and does not re-centre silently: "
            "pass theta - theta.mean(axis=0), which has the same likelihood, and compare intervals in that "
            "parametrisation")
