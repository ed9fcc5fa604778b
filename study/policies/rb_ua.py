"""RB-UA: the paper's RB with an uncertainty-aware opponent (the paper's own inference put to work).

Exactly RB (Algorithm 1: explore with probability t^-alpha for t <= T0, the same shared coins,
edges and ends; i_t = argmax_i X_t' theta_i(t-1), eq. ``it``), except how an exploitation step picks
the opponent: instead of a uniform neighbour of i_t, the neighbour j whose difference
X_t'(theta_i - theta_j) has the widest 95% confidence interval,

    j_t = argmax_{j in N(i_t)} Var(X_t'(theta_d_i - theta_d_j)) = X_t'[(Phi11)_ii + (Phi11)_jj - 2 (Phi11)_ij] X_t

(the CI of a difference of the debiased estimator, Theorem "inf" / Corollary "inf"; its width
2 z_0.975 sd is monotone in the variance, so z_0.975 does not change the choice).  While Phi is
not available, and in exploration steps, RB-UA is RB step for step.  Ties go to the lowest item.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Choice, Step, argmax_neighbour, argmax_playable, available, random_edge, uniform_neighbour
from .paper import EpsilonGreedy


@dataclass(frozen=True)
class UncertaintyAwareRB(EpsilonGreedy):
    """RB with the widest-CI neighbour as the opponent of an exploitation step (module docstring)."""

    def select(self, step: Step) -> Choice:
        if self.explores(step.t, step.coin):
            return random_edge(step)
        major = argmax_playable(step, self.index(step))
        nbrs = step.graph.neighbours[major]
        db = available(step) if len(nbrs) > 1 else None  # one neighbour: nothing to choose
        if db is None:
            return Choice(major, uniform_neighbour(step, major), False)
        variance = db.pair_spread(step.x, np.column_stack([np.full(len(nbrs), major), nbrs]))
        return Choice(major, argmax_neighbour(step, major, variance), False)


def rb_ua(setting) -> UncertaintyAwareRB:
    return UncertaintyAwareRB(name="RB-UA", explore_until=setting.T0, alpha=setting.alpha)
