"""A stopping rule: is the top-k set at a context separated from the rest?

At context x, the k items with the highest debiased scores x'theta_d_i form the candidate set S.
It is *separated* when, for every i in S and j outside, the interval of the contrast
x'(theta_i - theta_j) lies above 0.  The intervals are the debiased estimator's, with the standard
error of the contrast (x'[(Phi_11)_ii + (Phi_11)_jj - 2 (Phi_11)_ij] x, :meth:`DebiasResult.pair_spread`),
each at level 1 - alpha / (k (n - k)) (Bonferroni over the k (n - k) pairs): a wrong set S needs a
pair (i in S, j in the true top k, not in S) whose true contrast is <= 0 while its interval lies
above 0, so

* with ``anytime=True`` (confidence sequences, :mod:`.confseq`), P(the rule ever names a wrong
  top-k set, at any look, however often one looks) <= alpha, asymptotically;
* with ``anytime=False`` (fixed-time CIs), that holds at one look fixed in advance only; stopping
  at the first look where the set is separated inflates it (measured in docs/benchmarks.md,
  "Stopping when the leader is separated").

The rule claims more than a right set: that S is *strictly* better than the rest.  When items tie
in the truth across the boundary (x'theta*_i = x'theta*_j), that claim is false whichever tied item
is named; for k = 1 and n tied items, P(a false claim) <= n / (n - 1) (1 - level) (each candidate
i needs the interval of its own pair (i, j_i) to miss).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _validate as check
from .confseq import cs_factor, fixed_factor


@dataclass(frozen=True)
class Separation:
    """The stopping rule's verdict at one look.

    Attributes
    ----------
    decided : bool
        Whether every pair (i in ``top``, j outside) is separated (False while Phi is unavailable).
    top : tuple of int
        The candidate top-k set, best first (by the debiased score x'theta_d_i).
    margin : float
        The smallest lower bound of x'(theta_i - theta_j) over the pairs (> 0 iff ``decided``).
    closest : tuple of int
        The pair (i, j) with that smallest lower bound.
    pair_level : float
        The level of each pair's interval, 1 - (1 - level) / (k (n - k)).
    anytime : bool
        Whether the intervals were confidence sequences.
    """

    decided: bool
    top: tuple
    margin: float
    closest: tuple
    pair_level: float
    anytime: bool


def separation(result, x, *, top: int = 1, level: float = 0.95, anytime: bool = True, tightest_at=None,
               comparisons=None) -> Separation:
    """The verdict of the stopping rule (module docstring) for a :class:`study.DebiasResult`.

    Parameters
    ----------
    result : DebiasResult
    x : array_like, shape (d,)
        The context at which items are ranked.
    top : int
        k, the size of the set to separate (1 <= k < n).
    level : float
        The guarantee: the rule names a wrong set with probability at most 1 - level.
    anytime : bool
        Confidence sequences (valid at any looks) or fixed-time CIs.
    tightest_at, comparisons
        As in :meth:`study.DebiasResult.cs` (used with ``anytime=True``).
    """
    n, d = result.theta_d.shape
    top = check.integer("top", top, low=1, high=n - 1)
    level = check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    x = check.finite_array("x", x, ndim=1, shape=(d,))
    pairs_count = top * (n - top)
    pair_level = 1.0 - (1.0 - level) / pairs_count
    if anytime:
        comparisons = result.comparisons if comparisons is None else comparisons
        if comparisons is None:
            raise ValueError("the number of comparisons behind the estimate is unknown: pass comparisons=")
        factor = cs_factor(check.real("comparisons", comparisons, low=0.0), tightest_at, pair_level)
    else:
        factor = fixed_factor(pair_level)
    if not result.available:
        return Separation(False, (), float("nan"), (), pair_level, bool(anytime))
    score = result.theta_d @ x
    order = np.argsort(-score, kind="stable")
    best, rest = order[:top], order[top:]
    pairs = np.array([(i, j) for i in best for j in rest], dtype=np.intp)
    se = np.sqrt(np.maximum(result.pair_spread(x, pairs), 0.0))
    lower = score[pairs[:, 0]] - score[pairs[:, 1]] - factor * se
    k = int(np.argmin(lower))
    margin = float(lower[k])
    return Separation(bool(margin > 0), tuple(int(i) for i in best), margin,
                      (int(pairs[k, 0]), int(pairs[k, 1])), pair_level, bool(anytime))


def first_separation(looks, x, *, top: int = 1, level: float = 0.95, anytime: bool = True, tightest_at=None):
    """The first look at which the stopping rule decides: ``looks`` is an iterable of (t,
    DebiasResult) in time order; returns (t, Separation) of the first decided look, or (None, the
    last look's Separation) if none decides (None, None for no looks)."""
    verdict = None
    for t, result in looks:
        verdict = separation(result, x, top=top, level=level, anytime=anytime, tightest_at=tightest_at)
        if verdict.decided:
            return t, verdict
    return None, verdict
