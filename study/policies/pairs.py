"""Pieces shared by the baselines that choose from the debiased estimate: the major item of a
chosen edge, the optimistic neighbour (the upper confidence bound of a neighbour's advantage), and
:class:`EdgeRule`, the rules that score every edge and compare the best one."""
from __future__ import annotations

import numpy as np

from ..core import decisions
from .base import Choice, Step, argmax_neighbour
from .warmup import PhiRule


def higher_end(utility: np.ndarray, a: int, b: int) -> Choice:
    """The edge (a, b) as a Choice whose major item is the end with the larger utility (ties: the
    lower index)."""
    a, b = min(a, b), max(a, b)
    decisions.note("major end", decisions.gap(float(utility[a]), float(utility[b])))
    return Choice(a, b, False) if utility[a] >= utility[b] else Choice(b, a, False)


def optimistic_neighbour(step: Step, db, utility: np.ndarray, major: int, width: float) -> int:
    """argmax_{j in N(major)} X_t'theta_d_j + width sd_{j, major}: the neighbour whose advantage over
    ``major`` has the largest upper confidence bound (sd^2 = Var X_t'(theta_d_j - theta_d_major))."""
    nbrs = step.graph.neighbours[major]
    pairs = np.column_stack([nbrs, np.full(len(nbrs), major)])
    sd = np.sqrt(np.maximum(db.pair_spread(step.x, pairs), 0.0))
    return argmax_neighbour(step, major, utility[nbrs] + width * sd)


class EdgeRule(PhiRule):
    """A rule that scores every edge from the debiased estimate (``edge_scores``) and compares the
    ends of the best one (ties: the first edge), the end with the larger X_t'theta_d as the major item."""

    def edge_scores(self, db, x: np.ndarray, edges: np.ndarray, utility: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def choose(self, step: Step, db) -> Choice:
        edges = step.graph.edges
        utility = db.theta_d @ step.x
        a, b = (int(v) for v in edges[decisions.argmax("edge", self.edge_scores(db, step.x, edges, utility))])
        return higher_end(utility, a, b)
