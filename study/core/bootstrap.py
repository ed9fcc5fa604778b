"""The nonparametric bootstrap of the BTL fit, for offline data: standard errors and percentile
intervals that assume neither the Bernoulli variance of the model (as Phi_11 does) nor the
normal approximation (as the sandwich does).

Two resampling units:

* ``unit="comparison"`` (default): every comparison is a unit.  Row k's m_k comparisons are
  wins_k outright wins of j, ties_k ties and the rest wins of i; a replicate draws the same total
  number of comparisons from these (row, outcome) cells with replacement (one multinomial draw)
  and refits.  This is LMArena's ``arena-rank`` bootstrap (a multinomial over its unique
  (pair, outcome) rows).
* ``unit="row"``: every row is a unit (its m_k comparisons stay together), for rows whose
  comparisons may be correlated (e.g. one annotator's verdicts on one prompt); a replicate draws
  K rows with replacement.

A replicate whose resampled comparisons do not connect all items leaves theta unidentified and
one whose fit does not reach its stopping rule (separable data) is not used; ``failed`` counts
them.  Randomness comes from ``numpy.random.SeedSequence(seed)`` only.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import norm

from . import _validate as check
from .guards import check_fit_size
from .likelihood import ComparisonData
from .mle import fit_btl, identified
from .outcomes import counted, score

UNITS = ("comparison", "row")
MAX_REPS = 100_000  # resamples; beyond, the Monte Carlo error of a quantile is far below the sampling error


@dataclass
class BootstrapResult:
    """The bootstrap of a BTL fit.

    Attributes
    ----------
    theta : ndarray, shape (n, d)
        The fit on all the data.
    replicates : ndarray, shape (B, n, d)
        The fits on the B usable resamples.
    failed : int
        Resamples not used (theta unidentified or the fit did not converge).
    unit : str
        ``"comparison"`` or ``"row"``.
    seed : int
        The seed of the resampling.
    """

    theta: np.ndarray
    replicates: np.ndarray
    failed: int
    unit: str
    seed: int
    se_method: str = "bootstrap"

    @property
    def se(self) -> np.ndarray:
        """The replicates' standard deviation, shape (n, d)."""
        return self.replicates.std(axis=0, ddof=1)

    def ci(self, level: float = 0.95, kind: str = "percentile"):
        """(lower, upper), each (n, d): the replicates' quantiles (``kind="percentile"``) or
        theta -/+ z se (``kind="normal"``)."""
        level = check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
        if kind == "percentile":
            tail = (1.0 - level) / 2.0
            return (np.quantile(self.replicates, tail, axis=0), np.quantile(self.replicates, 1.0 - tail, axis=0))
        if kind == "normal":
            half = norm.ppf(0.5 + level / 2.0) * self.se
            return self.theta - half, self.theta + half
        raise ValueError(f"kind must be 'percentile' or 'normal', got {kind!r}")


def _connected(i, j, n) -> bool:
    graph = coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    return connected_components(graph, directed=False)[0] == 1


def _fit(i, j, X, wins, ties, m, n, ridge, radius):
    """(theta, usable): the fit, and whether it converged where the data identify theta."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        theta = fit_btl(i, j, X, wins, m, n, ties=ties, ridge=ridge, radius=radius)
    converged = not any(issubclass(w.category, RuntimeWarning) for w in caught)
    if converged and ridge == 0.0:  # with d > 1 a connected graph may still leave directions unidentified
        converged = identified(ComparisonData.from_rows(i, j, X, score(wins, ties), m, n), theta, np.zeros(n))
    return theta, converged


def bootstrap(i, j, X, wins, m, n_items, *, ties=None, reps: int = 200, seed: int = 0, unit: str = "comparison",
              ridge: float = 0.0, radius: float | None = None) -> BootstrapResult:
    """Bootstrap the BTL fit :func:`study.fit_btl` (module docstring).

    Parameters
    ----------
    i, j, X, wins, m, n_items, ties
        The comparisons, as in :func:`study.fit_btl` (``wins[k]`` of ``m`` won outright by
        ``j[k]``, ``ties[k]`` tied: :mod:`study.core.outcomes`).
    reps : int
        Number of resamples B (2 to 100,000; refused, with the estimate, when they would clearly take
        more than a day of CPU or more than the memory limit).
    seed : int
        Seed of the resampling (``numpy.random.SeedSequence(seed)``).
    unit : {"comparison", "row"}
        What is resampled.
    ridge, radius
        As in :func:`study.fit_btl`, for the full fit and every replicate.

    Returns
    -------
    BootstrapResult
        ``theta``, ``replicates``, ``se``, ``ci(level, kind)``, ``failed``.

    Raises
    ------
    ValueError
        Bad input (naming the argument), or fewer than two usable resamples.

    Examples
    --------
    >>> import numpy as np, study
    >>> rng = np.random.default_rng(0)
    >>> i = rng.integers(0, 3, 300); j = (i + 1 + rng.integers(0, 2, 300)) % 3
    >>> X = np.ones((300, 1)); wins = rng.binomial(4, 1 / (1 + np.exp(-(j - i) * 0.5)))
    >>> boot = study.bootstrap(i, j, X, wins, 4, n_items=3, reps=20, seed=1)
    >>> boot.se.shape, boot.failed
    ((3, 1), 0)
    """
    i, j, X, wins, m = check.comparisons(i, j, X, wins, m, n_items)
    n = int(n_items)
    reps = check.integer("reps", reps, low=2, high=MAX_REPS)
    check_fit_size(n, X.shape[1], len(i), f"bootstrap with {reps:,} resamples", fits=reps + 1,
                   extra_bytes=8.0 * reps * n * X.shape[1], compared=(i, j))  # every fit, and the replicates kept
    seed = check.integer("seed", seed, low=0)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    wins, ties = counted(wins, m, ties)
    ridge = check.real("ridge", ridge, low=0.0)
    theta = fit_btl(i, j, X, wins, m, n, ties=ties, ridge=ridge, radius=radius)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    K = len(i)
    if unit == "comparison":
        cells = np.stack([wins, ties, m - wins - ties], axis=1).ravel()  # (row, outcome) counts
        total = int(round(cells.sum()))
        probabilities = cells / cells.sum()
    replicates, failed = [], 0
    for _ in range(reps):
        if unit == "comparison":
            counts = rng.multinomial(total, probabilities).reshape(K, 3).astype(float)
            rows_m = counts.sum(axis=1)
            keep = rows_m > 0
            rows = (i[keep], j[keep], X[keep], counts[keep, 0], counts[keep, 1], rows_m[keep])
        else:
            pick = rng.integers(0, K, K)
            rows = (i[pick], j[pick], X[pick], wins[pick], ties[pick], m[pick])
        if not _connected(rows[0], rows[1], n):
            failed += 1
            continue
        estimate, converged = _fit(*rows, n, ridge, radius)
        if not converged:
            failed += 1
            continue
        replicates.append(estimate)
    if len(replicates) < 2:
        raise ValueError(f"only {len(replicates)} of {reps} resamples identify theta and converge; the data are too "
                         "sparse for the bootstrap (add a ridge, or use se='sandwich')")
    return BootstrapResult(theta=theta, replicates=np.stack(replicates), failed=failed, unit=unit, seed=seed)
