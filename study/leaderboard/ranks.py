"""Rank intervals with a simultaneous guarantee: the confidence sets for all ranks of Mogstad,
Romano, Shaikh and Wilhelm ("Inference for ranks with applications to mobility across
neighbourhoods and academic achievement across countries", Review of Economic Studies 91, 2024,
section 3, "simultaneous" confidence sets), computed from the covariance of the scores behind the
leaderboard's intervals.

The rank of model i at the context x is r_i = 1 + #{j : x'theta_j > x'theta_i} (tied models share
the best rank).  The procedure:

1. simultaneous confidence intervals for every difference of scores,
   s_i - s_j -/+ c se_ij, with c the ``level`` quantile of max over the pairs of |Z_i - Z_j| / se_ij
   for Z ~ N(0, Sigma) (Sigma the scores' estimated covariance, se_ij^2 = Var(s_i - s_j)), by
   ``draws`` seeded Gaussian draws; with ``stepdown`` (the default) the critical value is
   recomputed over the pairs not yet separated until no more separate (Romano and Wolf 2005;
   Mogstad et al., section 3.3), which keeps the family-wise guarantee and separates more pairs;
2. i is *better* than j where the interval of s_i - s_j lies above 0;
3. the rank interval of i is [1 + #{j better than i}, n - #{j worse than i}].

**Guarantee.** If the scores' estimation error is asymptotically N(0, Sigma) and Sigma is estimated
consistently, then, asymptotically, P(r_i in [lower_i, upper_i] for every i at once) >= ``level``:
an interval misses only if some pair is declared in the wrong order, and the simultaneous intervals
make that happen with probability at most 1 - level.  Here the normality is that of the debiased
estimator (the paper's Theorem "inf" and Corollary "inf"; the sandwich and the cluster-robust
covariances where comparisons are not Bernoulli draws or are correlated within judges); the number
of models is fixed as the comparisons grow; the critical value carries a Monte Carlo error of about
sqrt(level (1 - level) / draws) in coverage (0.002 at 10,000 draws).  Models whose true scores tie
make the intervals conservative; the guarantee is tight when all scores are equal.
(tests/leaderboard/test_ranks.py checks the simultaneous coverage in a seeded simulation.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DRAWS = 10_000


@dataclass
class RankIntervals:
    """Simultaneous rank intervals (module docstring).

    Attributes
    ----------
    lower, upper : ndarray of int
        The rank interval of each model (1 = best).
    better : ndarray of bool, shape (n, n)
        ``better[a, b]``: a's score is above b's by the simultaneous intervals.
    critical : float
        The critical value c of the last step.
    level : float
        The simultaneous coverage.
    draws, steps : int
        Gaussian draws behind c; steps of the step-down.
    """

    lower: np.ndarray
    upper: np.ndarray
    better: np.ndarray
    critical: float
    level: float
    draws: int
    steps: int


def _maxima(Z: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """max over the pairs i < j of |Z_i - Z_j| inverse[i, j] for every draw (a row of Z); pairs with
    ``inverse`` 0 drop out (the maximum is at least 0).  One contiguous block per i, in single
    precision (the quantile needs no more; a third of the time of gathering the pairs)."""
    out = np.zeros(len(Z), dtype=np.float32)
    for i in range(Z.shape[1] - 1):
        weights = inverse[i, i + 1:]
        active = np.flatnonzero(weights)
        if active.size == 0:
            continue
        if 2 * active.size < weights.size:  # late steps of the step-down: few pairs left, gathered
            block = np.abs(Z[:, i + 1 + active] - Z[:, i, None])
            block *= weights[active]
        else:
            block = np.abs(Z[:, i + 1:] - Z[:, i, None])
            block *= weights
        np.maximum(out, block.max(axis=1), out=out)
    return out


def rank_intervals(scores, root, *, level: float = 0.95, draws: int = DRAWS, seed: int = 0,
                   stepdown: bool = True) -> RankIntervals:
    """Simultaneous rank intervals of ``scores`` (n,) whose covariance is ``root' root`` (``root``
    of shape (p, n): for the leaderboard, the rows of U^{-T} (Q' (x) x) for the factor U of the
    reduced precision)."""
    scores = np.asarray(scores, dtype=float)
    root = np.asarray(root, dtype=float)
    n = len(scores)
    first, second = np.triu_indices(n, 1)
    diff_root = root[:, first] - root[:, second]
    se = np.sqrt(np.einsum("pk,pk->k", diff_root, diff_root))
    se = np.maximum(se, 1e-300)
    t = (scores[first] - scores[second]) / se
    Z = (np.random.default_rng(np.random.SeedSequence(seed)).standard_normal((draws, root.shape[0])) @ root)
    Z = Z.astype(np.float32)
    inverse = np.zeros((n, n), dtype=np.float32)
    inverse[first, second] = 1.0 / se
    separated = np.zeros(len(first), dtype=bool)
    steps, critical = 0, np.inf
    while not separated.all():
        steps += 1
        critical = float(np.quantile(_maxima(Z, inverse), level, method="higher"))
        new = ~separated & (np.abs(t) > critical)
        if not new.any():
            break
        separated |= new
        inverse[first[new], second[new]] = 0.0
        if not stepdown:
            break
    better = np.zeros((n, n), dtype=bool)
    better[first[separated & (t > 0)], second[separated & (t > 0)]] = True
    better[second[separated & (t < 0)], first[separated & (t < 0)]] = True
    lower = 1 + better.sum(axis=0)
    upper = n - better.sum(axis=1)
    return RankIntervals(lower=lower, upper=upper, better=better, critical=critical, level=level, draws=draws,
                         steps=steps)
