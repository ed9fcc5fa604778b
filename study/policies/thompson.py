"""TS: double Thompson sampling on the Gaussian approximation of the posterior.

After Wu & Liu, "Double Thompson Sampling for Dueling Bandits" (NeurIPS 2016): the first
candidate is the winner of one posterior draw, the second candidate the winner, against it, of a
second, independent draw.  Here the posterior is the debiased estimator's normal approximation
(Theorem "inf" / Corollary "inf" of the paper): theta~ ~ N(theta_d(t-1), Phi_11), drawn as
theta_d + C U^{-1} z with z ~ N(0, I_{(n-1)d}) (:meth:`study.DebiasResult.sample`; C the sum-zero
basis, so every draw keeps sum_i theta~_i = 0).

* i_t = argmax_i X_t' theta~_i over the items with a neighbour (first draw);
* j_t = argmax_{j in N(i_t)} X_t' theta~'_j (second, independent draw, restricted to i_t's
  neighbours: the graph adaptation of D-TS's "second candidate against the first"; among
  neighbours, argmax_j P~(j beats i_t) = argmax_j X_t'(theta~'_j - theta~'_i) = argmax_j X_t' theta~'_j).

Adaptation to item-specific theta_i: the features are e_i (x) x, so the draw is of the whole
(n, d) matrix and the utility of item i is X_t' theta~_i.  D-TS's Beta posteriors of pairwise
probabilities (and its RUCB-style candidate pruning) have no counterpart in a parametric model
and are not used; there is no constant to set.  While Phi is not available (Psi_t singular) there
is no Gaussian to draw from: TS is greedy, i_t = argmax X_t' theta_i(t-1) with a uniform
neighbour (the shared ``neighbour`` uniform), as BT-UCB1 is before Phi exists.  The normal draws
come from the policy's private generator ``step.rng``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Choice, Step, argmax_neighbour, argmax_playable, available, uniform_neighbour


@dataclass(frozen=True)
class DoubleThompson:
    name: str = "TS"

    def select(self, step: Step) -> Choice:
        db = available(step)
        if db is None:
            major = argmax_playable(step, step.theta @ step.x)
            return Choice(major, uniform_neighbour(step, major), False)
        n, d = db.theta_d.shape
        first = db.sample(step.rng.standard_normal((n - 1) * d))
        second = db.sample(step.rng.standard_normal((n - 1) * d))
        major = argmax_playable(step, first @ step.x)
        nbrs = step.graph.neighbours[major]
        return Choice(major, argmax_neighbour(step, major, second[nbrs] @ step.x), False)


def thompson(setting) -> DoubleThompson:
    return DoubleThompson()
