"""The ``lucb`` identification rule of :mod:`study.votes.rules` as a policy of the online ranker
(and so of the service), with its stopping target: the top 1, 3 or 10.

Name it by import path when creating a ranker, e.g.
``Ranker(path, n_items=8, dim=1, policy="study.votes.online:lucb_top3", T=5000, M=1)`` (or the
service's ``policy`` field), and stop when ``ranker.decided(top=3)``.

At each ask the policy reads the ranker's current debiased estimate (``step.debiased()``: refitted
after every tell, so no look grid is needed here) and its Phi_11 (= J^+, the inverse Fisher
information on the sum-zero space at the estimate), takes the candidate set S (top k by
x'theta_d at the decision context) and its most ambiguous pair (i, j) -- the smallest
standardised lower bound x'(theta_d_i - theta_d_j) / sd_ij - f, f the rule's confidence-sequence
factor (level 0.95 split over the k (n - k) pairs, tightest at T x M comparisons: the ranker's
defaults) -- and asks for the allowed pair (a, b) that most reduces the variance of that contrast
at the asked context x_t, w_ab (g'Phi r)^2 / (1 + w_ab r'Phi r) with r = (e_a - e_b) (x) x_t, g =
(e_i - e_j) (x) x and w_ab = M sigma'(x_t'(theta_b - theta_a)) at the ranker's theta.  The decision
context is the asked context (for a ranker with d = 1, x = 1: the context of ``decided()``); a
contextual ranker should pass the same x to ``decided(x=...)``.  While Phi does not exist: a
uniformly random edge, recorded as explored.  The policy keeps no state between asks, so a
reopened ranker continues it exactly.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..core.confseq import cs_factor
from ..policies.base import Choice, random_edge

LEVEL = 0.95


class LUCBPolicy:
    """The ``lucb`` rule for one stopping target ``top`` (module docstring).

    Parameters
    ----------
    setting : study.Setting
        The ranker's setting (n_items, dim, T, M).
    top : int
        k, the size of the top set the ranker is to decide (1 <= k < n_items).
    """

    def __init__(self, setting, top: int = 1):
        self.n, self.d, self.M = int(setting.n_items), int(setting.dim), int(setting.M)
        if not 1 <= int(top) < self.n:
            raise ValueError(f"top must lie in [1, n_items - 1 = {self.n - 1}], got {top!r}")
        self.top = int(top)
        self.tightest_at = float(setting.T * setting.M)
        self.pair_level = 1.0 - (1.0 - LEVEL) / (self.top * (self.n - self.top))

    def target(self, result, x) -> tuple:
        """(i, j): the pair of S x (not S) with the smallest standardised lower bound at x."""
        s = np.asarray(result.theta_d) @ x
        order = np.argsort(-s, kind="stable")
        inside, outside = order[: self.top], order[self.top:]
        pairs = np.array([(i, j) for i in inside for j in outside], dtype=np.intp)
        sd = np.sqrt(np.maximum(result.pair_spread(x, pairs), 1e-300))
        factor = float(cs_factor(max(float(result.comparisons or 1.0), 1.0), self.tightest_at, self.pair_level))
        z = (s[pairs[:, 0]] - s[pairs[:, 1]]) / sd - factor
        i, j = pairs[int(np.argmin(z))]
        return int(i), int(j)

    def reductions(self, result, theta, edges, x, i, j) -> np.ndarray:
        """w_ab (g'Phi r)^2 / (1 + w_ab r'Phi r) for every edge (module docstring)."""
        P = np.asarray(result.phi11).reshape(self.n, self.d, self.n, self.d)
        u = (P[:, :, i, :] @ x - P[:, :, j, :] @ x) @ x  # (Phi g)_item . x_t, g at the decision context x
        Q = np.einsum("iajb,a,b->ij", P, x, x)
        a, b = edges[:, 0], edges[:, 1]
        gpr = u[a] - u[b]
        rpr = Q[a, a] + Q[b, b] - 2.0 * Q[a, b]
        margin = theta[b] @ x - theta[a] @ x
        w = self.M * expit(margin) * expit(-margin)
        return w * gpr * gpr / (1.0 + w * rpr)

    def select(self, step):
        result = step.debiased()
        if not result.available:
            return random_edge(step)
        x = np.asarray(step.x, dtype=float)
        i, j = self.target(result, x)
        edges = np.asarray(step.graph.edges)
        e = int(np.argmax(self.reductions(result, np.asarray(step.theta), edges, x, i, j)))
        return Choice(int(edges[e, 0]), int(edges[e, 1]), False)


def lucb_top1(setting) -> LUCBPolicy:
    """``lucb`` aimed at deciding the top 1 (``ranker.decided(top=1)``)."""
    return LUCBPolicy(setting, top=1)


def lucb_top3(setting) -> LUCBPolicy:
    """``lucb`` aimed at deciding the top 3 (``ranker.decided(top=3)``)."""
    return LUCBPolicy(setting, top=3)


def lucb_top10(setting) -> LUCBPolicy:
    """``lucb`` aimed at deciding the top 10 (``ranker.decided(top=10)``)."""
    return LUCBPolicy(setting, top=10)
