"""TS: this project's two-draw linear Thompson sampling on the debiased estimate's Gaussian
approximation -- modelled on double Thompson sampling (D-TS), not a published method.

Wu & Liu, "Double Thompson Sampling for Dueling Bandits" (NeurIPS 2016; the authors' code
``HuasenWu/DuelingBandits``, ``DuelingBandit/Alg_DTS.cpp``) is a method for K arms without context:
Beta posteriors of every pairwise probability; the first candidate is drawn only among the arms of
largest *upper* Copeland score (arms j with RUCB(i, j) >= 1/2 counted, Alg_DTS.cpp:56-69, 93); the
second among the arms whose *lower* confidence bound of beating the first is at most 1/2
(Alg_DTS.cpp:116-121).  No linear or contextual D-TS has been published.  This TS keeps D-TS's two
independent posterior draws and drops the rest:

* the posterior is the debiased estimator's normal approximation (Theorem "inf" / Corollary
  "inf" of the paper): theta~ ~ N(theta_d(t-1), Phi_11), drawn as theta_d + C U^{-1} z with
  z ~ N(0, I_{(n-1)d}) (:meth:`study.DebiasResult.sample`; C the sum-zero basis, so every draw keeps
  sum_i theta~_i = 0);
* i_t = argmax_i X_t' theta~_i over the items with a neighbour (first draw);
* j_t = argmax_{j in N(i_t)} X_t' theta~'_j (second, independent draw, restricted to i_t's
  neighbours; among neighbours, argmax_j P~(j beats i_t) = argmax_j X_t'(theta~'_j - theta~'_i)
  = argmax_j X_t' theta~'_j).

What it omits, and their counterparts in a parametric model: the upper-confidence pruning of the
first candidate (under BTL the arms of largest upper Copeland score are those no arm beats with
confidence: MaxInP's candidate set C_t, :func:`.maxinp.candidates`) and the lower-bound filter on
the second (the neighbours j with X_t'(theta_d_j - theta_d_i) - w sd_ij <= 0, not known to beat
i_t).  Neither is used: TS draws over all items and all neighbours, and has no constant.

Adaptation to item-specific theta_i: the features are e_i (x) x, so the draw is of the whole
(n, d) matrix and the utility of item i is X_t' theta~_i.  While Phi is not available (Psi_t
singular) there is no Gaussian to draw from: TS follows ``Setting.warmup`` (its own rule: greedy,
i_t = argmax X_t' theta_i(t-1) with a uniform neighbour, as BT-UCB1 is before Phi exists;
:mod:`.warmup`).  The normal draws come from the policy's private generator ``step.rng``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Choice, Step, argmax_neighbour, argmax_playable
from .warmup import PhiRule, warmup_rule


@dataclass(frozen=True)
class DoubleThompson(PhiRule):
    """Two independent draws from N(theta_d, Phi_11): the first picks i_t, the second its
    opponent among i_t's neighbours (module docstring).  ``warmup``: the rule while Phi does not
    exist."""

    name: str = "TS"
    warmup: str = "greedy"

    def choose(self, step: Step, db) -> Choice:
        n, d = db.theta_d.shape
        first = db.sample(step.rng.standard_normal((n - 1) * d))
        second = db.sample(step.rng.standard_normal((n - 1) * d))
        major = argmax_playable(step, first @ step.x)
        nbrs = step.graph.neighbours[major]
        return Choice(major, argmax_neighbour(step, major, second[nbrs] @ step.x), False)


def thompson(setting) -> DoubleThompson:
    return DoubleThompson(warmup=warmup_rule(setting, "greedy"))
