"""The five policies of the paper's section "Numerical Studies", one small object each.

Every policy picks a major item i_t and an opponent j_t along an edge of the comparison graph:

* exploration step (probability t^-alpha while t <= ``explore_until``): a uniformly random edge,
  the major item a uniformly random end of it;
* otherwise i_t = argmax_i index_i(X_t) and j_t a uniform neighbour of i_t, where the index is
  X_t' theta_i(t-1) (greedy, paper eq. ``it``) or, for the UCB methods,
  X_t' theta_d_i(t-1) + sqrt(X_t' (Phi_11)_ii X_t) sqrt(2 log(nT)) once Phi is available
  (greedy before).

RB (Algorithm 1) explores for t <= T0; ERA always; ETA never; BT-UCB1 never (UCB index);
BT-UCB2 explores for t <= T0 and uses the UCB index otherwise.  The randomness comes in as four
uniforms per step (exploration coin, edge, end, neighbour) so that methods share it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Policy:
    name: str
    explore_until: int  # explore with probability t^-alpha for t <= explore_until
    alpha: float
    ucb: bool
    ucb_width: float  # sqrt(2 log(nT))

    def explores(self, t: int, coin: float) -> bool:
        return t <= self.explore_until and coin < t ** (-self.alpha)

    def index(self, x: np.ndarray, estimate) -> np.ndarray:
        """Scores of all items for context x."""
        if self.ucb and estimate.debiased is not None and estimate.debiased.available:
            db = estimate.debiased
            spread = db.spread(x)
            return db.theta_d @ x + np.sqrt(np.maximum(spread, 0.0)) * self.ucb_width
        return estimate.theta @ x

    def select(self, t: int, x: np.ndarray, estimate, graph, uniforms: np.ndarray):
        """Returns (major, other, explored)."""
        coin, u_edge, u_end, u_nbr = uniforms
        if self.explores(t, coin):
            a, b = graph.edges[min(int(u_edge * len(graph.edges)), len(graph.edges) - 1)]
            return (int(a), int(b), True) if u_end < 0.5 else (int(b), int(a), True)
        major = int(np.argmax(self.index(x, estimate)))
        nbrs = graph.neighbours[major]
        return major, int(nbrs[min(int(u_nbr * len(nbrs)), len(nbrs) - 1)]), False


def make_policy(method: str, setting) -> Policy:
    width = float(np.sqrt(2.0 * np.log(setting.n_items * setting.T)))
    explore_until = {"RB": setting.T0, "ERA": setting.T, "ETA": 0, "BT-UCB1": 0, "BT-UCB2": setting.T0}[method]
    return Policy(name=method, explore_until=explore_until, alpha=setting.alpha,
                  ucb=method in ("BT-UCB1", "BT-UCB2"), ucb_width=width)
