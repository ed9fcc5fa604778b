"""MaxInP: the maximum-informative-pair algorithm of Saha, "Optimal Algorithms for Stochastic
Contextual Preference Bandits" (NeurIPS 2021), adapted to item-specific theta_i and a graph.

The paper keeps the items not beaten with confidence,

    C_t = {i : x_i'theta^ - x_j'theta^ + gamma_t ||x_i - x_j||_{V_t^{-1}} >= 0 for all j},

and duels the pair of C_t whose difference is the least known, argmax_{i, j in C_t}
||x_i - x_j||_{V_t^{-1}} (as implemented by the VACDB authors, ``uclaml/VACDB``: the candidate set
``vdb.py:54-60``, the pair ``ucb.py:28-38``).  Here an item's feature is e_i (x) X_t, so
x_i'theta = X_t'theta_i, and the confidence of a difference comes from the debiased estimator
(Corollary "inf"):

    sd_ij^2 = Var(X_t'(theta_d_i - theta_d_j)) = X_t'[(Phi11)_ii + (Phi11)_jj - 2 (Phi11)_ij] X_t

(:meth:`study.DebiasResult.pair_spread`), with Phi_11 = C (C'H_t C)^{-1} C' and H_t the Fisher
information at theta(t-1), sum_s M sigma'(X_s'(theta_b - theta_a)) r_s r_s': a *Fisher-weighted*
local norm (each comparison weighted by M sigma'(.), its curvature), not the unweighted design norm
||x_i - x_j||_{V_t^{-1}} of the paper, V_t = sum_s r_s r_s'.  Then

    C_t = {i : X_t'(theta_d_i - theta_d_j) + w sd_ij >= 0 for every item j},
    (a, b) = argmax over edges with both ends in C_t of sd_ab^2.

The major item is the end with the larger X_t'theta_d (ties: the lower index).  The radius
gamma_t of the paper bounds a self-normalised martingale around the MLE with design matrix V_t
and involves kappa (the link's smallest slope) and delta (VACDB uses 2 sqrt(d log T),
``ucb.py:9-26``); it does not transfer to the debiased Gaussian intervals, so w = sqrt(2 log(nT)),
the width the paper's BT-UCB uses with the same intervals (a Gaussian bound that holds over n items
and T steps).  The pair choice does not depend on w.

Graph adaptation: pairs are edges.  If no edge joins two candidates (in particular when C_t is a
single item, where the paper duels the item with itself), the step compares a candidate with the
neighbour of widest CI among the edges with one end in C_t (major: the candidate).  The argmax
runs over items with a neighbour.

Before Phi is available: MaxInP starts with an initial phase of uniformly random pairs (length
t_0 in the paper, chosen so that V_{t_0} is well conditioned and the MLE exists); here it lasts
while Psi_t is singular (no confidence set exists yet), a uniformly random edge per step from the
shared ``edge``/``end`` uniforms, recorded as explored -- its own rule; ``Setting.warmup`` may
replace it (:mod:`.warmup`).  Cost: one triangular solve for the pairs (i, j) with
X_t'theta_d_j > X_t'theta_d_i (only those can beat i), at most n(n-1)/2 columns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import decisions
from .base import Choice, Step
from .paper import ucb_width
from .warmup import PhiRule, warmup_rule


def candidates(db, x: np.ndarray, width: float, playable: np.ndarray) -> np.ndarray:
    """(n,) bool: the playable items i with X'(theta_d_i - theta_d_j) + width sd_ij >= 0 for every
    playable j (not beaten with confidence)."""
    utility = db.theta_d @ x
    items = np.flatnonzero(playable)
    i, j = np.meshgrid(items, items, indexing="ij")
    can_beat = utility[j] > utility[i]  # only a better estimate can beat i with confidence
    pairs = np.column_stack([i[can_beat], j[can_beat]])
    beaten = np.zeros(len(utility), dtype=bool)
    if len(pairs):
        sd = np.sqrt(np.maximum(db.pair_spread(x, pairs), 0.0))
        advantage = utility[pairs[:, 1]] - utility[pairs[:, 0]]
        lost = advantage > width * sd
        decisions.note_least("candidate set", advantage, width * sd)
        beaten[pairs[lost, 0]] = True
    return playable & ~beaten


@dataclass(frozen=True)
class MaxInP(PhiRule):
    """The widest edge inside the candidate set C_t (module docstring); ``warmup``: the rule while
    Phi does not exist."""

    width: float
    name: str = "MaxInP"
    warmup: str = "random"

    def choose(self, step: Step, db) -> Choice:
        x, edges = step.x, step.graph.edges
        keep = candidates(db, x, self.width, step.graph.playable)
        pool = keep[edges[:, 0]] & keep[edges[:, 1]]
        if not pool.any():
            pool = keep[edges[:, 0]] | keep[edges[:, 1]]
        pool = edges[pool]
        a, b = (int(v) for v in pool[decisions.argmax("edge", db.pair_spread(x, pool))])
        utility = db.theta_d @ x
        if keep[a] and keep[b]:
            decisions.note("major end", decisions.gap(float(utility[a]), float(utility[b])))
            major = a if utility[a] >= utility[b] else b
        else:
            major = a if keep[a] else b
        return Choice(major, b if major == a else a, False)


def maxinp(setting) -> MaxInP:
    return MaxInP(width=ucb_width(setting), warmup=warmup_rule(setting, "random"))
