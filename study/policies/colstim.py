"""CoLSTIM: Bengs, Saha & Huellermeier, "Stochastic Contextual Dueling Bandits under Linear
Stochastic Transitivity Models" (ICML 2022), adapted to item-specific theta_i and a graph.

The paper imitates the feedback process: under a linear stochastic transitivity model with link
F, a duel is won by the larger of utility + noise with noise distribution F.  For the logistic
link of the BTL model that noise is standard Gumbel (the difference of two Gumbels is logistic).
Its steps are

    eps_i ~ Gumbel(0, 1), trimmed to [-c, c];
    i_t = argmax_i  x_i'theta^ + eps_i ||x_i||_{M_t^{-1}};
    j_t = argmax_j  x_j'theta^ + C ||x_j - x_{i_t}||_{M_t^{-1}}   (the UCB of j's advantage over i_t).

Here x_i = e_i (x) X_t, the estimate and its uncertainty are the debiased estimator's
(Corollary "inf"): x_i'theta^ -> X_t'theta_d_i, ||x_i||^2_{M^{-1}} -> X_t'(Phi11)_ii X_t
(:meth:`study.DebiasResult.spread`), ||x_j - x_i||^2_{M^{-1}} -> Var(X_t'(theta_d_j - theta_d_i))
(:meth:`study.DebiasResult.pair_spread`).  The second item is restricted to i_t's neighbours;
the first item to items with a neighbour.

Constants: the paper sets the trimming threshold c and the confidence width C from the radius of
its MLE confidence ellipsoid (of order sqrt(d log T)), which bounds a self-normalised martingale
with design matrix M_t and does not transfer to the debiased Gaussian intervals.  We use the
confidence width the paper's BT-UCB uses with the same intervals, sqrt(2 log(nT)), for both (as
the paper uses one radius for both).  The Gumbel draws come from the policy's private generator
``step.rng`` (n per step while Phi is available), not from the shared uniforms.

Before Phi is available: CoLSTIM starts with an exploration phase of uniformly random pairs
(length tau in the paper, until its design matrix is well conditioned); here it lasts while
Psi_t is singular, a uniformly random edge per step from the shared ``edge``/``end`` uniforms,
recorded as explored.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Choice, Step, argmax_neighbour, argmax_playable, available, random_edge
from .paper import ucb_width


@dataclass(frozen=True)
class CoLSTIM:
    threshold: float  # c: the Gumbel perturbations are trimmed to [-c, c]
    width: float      # C: confidence width of the second item's advantage
    name: str = "CoLSTIM"

    def select(self, step: Step) -> Choice:
        db = available(step)
        if db is None:
            return random_edge(step)
        x = step.x
        utility = db.theta_d @ x
        noise = np.clip(step.rng.gumbel(size=len(utility)), -self.threshold, self.threshold)
        major = argmax_playable(step, utility + noise * np.sqrt(np.maximum(db.spread(x), 0.0)))
        nbrs = step.graph.neighbours[major]
        sd = np.sqrt(np.maximum(db.pair_spread(x, np.column_stack([nbrs, np.full(len(nbrs), major)])), 0.0))
        return Choice(major, argmax_neighbour(step, major, utility[nbrs] + self.width * sd), False)


def colstim(setting) -> CoLSTIM:
    width = ucb_width(setting)
    return CoLSTIM(threshold=width, width=width)
