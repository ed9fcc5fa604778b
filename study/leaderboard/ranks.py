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
   ``draws`` seeded Gaussian draws; with ``stepdown`` (the default) the step-down of Mogstad et
   al., section 3.3 (after Romano and Wolf 2005): the family is the one-sided hypotheses
   s_i <= s_j over the ordered pairs, and at each step the critical value is the ``level`` quantile
   of the max over those not yet rejected of (Z_i - Z_j) / se_ij; a hypothesis is rejected where
   t_ij = (s_i - s_j) / se_ij exceeds it.  Once i is found above j, s_i <= s_j leaves the family
   but its reverse, s_j <= s_i, stays (a true null once the pair is ordered): the critical value
   keeps it, as the family-wise proof needs.  Rejections stop when a step adds none;
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
(tests/leaderboard/test_leaderboard_ranks.py and test_leaderboard_rank_coverage.py check the simultaneous
coverage in seeded simulations; test_leaderboard_stepdown.py the step-down against the paper.)
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


def _maxima(Z: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """max over the hypotheses left of their t statistic under the null, for every draw (a row of Z):
    for i < j, ``up[i, j]`` weighs (Z_i - Z_j) (the hypothesis s_i <= s_j) and ``down[i, j]`` weighs
    (Z_j - Z_i) (s_j <= s_i); a weight 0 drops the hypothesis (the maximum is at least 0, which moves
    no quantile above 1/2).  One contiguous block per i, in single precision (the quantile needs no
    more; a third of the time of gathering the pairs)."""
    out = np.zeros(len(Z), dtype=np.float32)
    for i in range(Z.shape[1] - 1):
        w_up, w_down = up[i, i + 1:], down[i, i + 1:]
        active = np.flatnonzero((w_up != 0) | (w_down != 0))
        if active.size == 0:
            continue
        if 2 * active.size < w_up.size:  # late steps of the step-down: few pairs left, gathered
            w_up, w_down = w_up[active], w_down[active]
            block = Z[:, i + 1 + active] - Z[:, i, None]
        else:
            block = Z[:, i + 1:] - Z[:, i, None]  # Z_j - Z_i
        both = (w_up == w_down).all()  # the first step: every pair two-sided, |Z_i - Z_j| / se
        if both:
            np.abs(block, out=block)
            block *= w_up
        else:  # max(d w_down, -d w_up), in place: one temporary
            other = block * w_down
            block *= -w_up
            np.maximum(block, other, out=block)
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
    cov = root.T @ root  # n x n: Var(s_i - s_j) = S_ii + S_jj - 2 S_ij, no (p, n^2 / 2) differences
    variance = np.diag(cov)[first] + np.diag(cov)[second] - 2.0 * cov[first, second]
    se = np.sqrt(np.maximum(variance, 0.0))
    se = np.maximum(se, 1e-300)
    t = (scores[first] - scores[second]) / se
    Z = (np.random.default_rng(np.random.SeedSequence(seed)).standard_normal((draws, root.shape[0])) @ root)
    Z = Z.astype(np.float32)
    up = np.zeros((n, n), dtype=np.float32)  # the hypotheses s_i <= s_j (i < j) still in the family
    up[first, second] = 1.0 / se
    down = up.copy()  # and s_j <= s_i
    separated = np.zeros(len(first), dtype=bool)
    steps, critical = 0, np.inf
    while not separated.all():
        steps += 1
        critical = float(np.quantile(_maxima(Z, up, down), level, method="higher"))
        new = ~separated & (np.abs(t) > critical)
        if not new.any():
            break
        separated |= new
        # s_i <= s_j rejected (t > c) leaves the family; its reverse s_j <= s_i stays (Mogstad et al.
        # section 3.3): once the pair is ordered it is a true null whose error must still be bounded
        above, below = new & (t > 0), new & (t < 0)
        up[first[above], second[above]] = 0.0
        down[first[below], second[below]] = 0.0
        if not stepdown:
            break
    better = np.zeros((n, n), dtype=bool)
    better[first[separated & (t > 0)], second[separated & (t > 0)]] = True
    better[second[separated & (t < 0)], first[separated & (t < 0)]] = True
    lower = 1 + better.sum(axis=0)
    upper = n - better.sum(axis=1)
    return RankIntervals(lower=lower, upper=upper, better=better, critical=critical, level=level, draws=draws,
                         steps=steps)
