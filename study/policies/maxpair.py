"""MaxPairUCB: the pair with the largest optimistic joint utility, a baseline of the contextual
dueling-bandit literature (VACDB: Di, Jin, Wu, Zhao, Farnoud, Gu, "Variance-Aware Regret Bounds for
Stochastic Contextual Dueling Bandits", ICLR 2024; the authors' code ``uclaml/VACDB``,
``ucb.py:109-119``), adapted to item-specific theta_i and a graph.

The source duels the pair (x, y), over all K^2 ordered pairs of arms (an arm with itself
included), maximising

    x'theta^ + y'theta^ + beta ||x - y||_{Sigma_t^{-1}}

with Sigma_t the (ridge) design matrix of the observed differences and beta = 2 sqrt(d log T)
(``ucb.py:9-26``, "according to COLSTIM reported value").  Here an item's feature is e_i (x) X_t,
so x_i'theta = X_t'theta_i; the estimate is the debiased one and the norm its standard deviation
(Corollary "inf"):

    (a, b) = argmax over edges of X_t'(theta_d_a + theta_d_b) + w sd_ab,
    sd_ab^2 = Var X_t'(theta_d_a - theta_d_b)      (:meth:`study.DebiasResult.pair_spread`)

-- Phi_11's Fisher-weighted local norm (each comparison weighted by M sigma'(.)) in place of the
unweighted design norm.  Adaptations: pairs are the graph's edges (so an item is never dueled with
itself, which the source allows when that maximises the score); the major item is the end with the
larger X_t'theta_d (ties: the lower index; the source has no major item); w = sqrt(2 log(nT)),
the width the paper's BT-UCB uses with the same intervals, in place of beta (a radius of a
self-normalised martingale bound that does not transfer to the debiased Gaussian intervals; see
docs/baselines.md).  Ties between edges go to the first in ``graph.edges``.

Before Phi is available there is no width: the source needs none (its ridge prior, lambda = 0.001,
``db.py:19``, gives Sigma_t^{-1} from t = 1, and its warm-up is switched off, ``db.py:77``, where the
width term dominates and picks the most distant pair); here MaxPairUCB's own rule is a uniformly
random edge, recorded as explored, as for MaxInP and CoLSTIM; ``Setting.warmup`` may replace it
(:mod:`.warmup`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pairs import EdgeRule
from .paper import ucb_width
from .warmup import warmup_rule


@dataclass(frozen=True)
class MaxPairUCB(EdgeRule):
    """The edge maximising X_t'(theta_d_a + theta_d_b) + w sd_ab (module docstring); ``warmup``:
    the rule while Phi does not exist."""

    width: float
    name: str = "MaxPairUCB"
    warmup: str = "random"

    def edge_scores(self, db, x, edges, utility):
        sd = np.sqrt(np.maximum(db.pair_spread(x, edges), 0.0))
        return utility[edges[:, 0]] + utility[edges[:, 1]] + self.width * sd


def max_pair_ucb(setting) -> MaxPairUCB:
    return MaxPairUCB(width=ucb_width(setting), warmup=warmup_rule(setting, "random"))
