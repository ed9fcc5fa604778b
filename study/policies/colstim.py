"""CoLSTIM: Bengs, Saha & Huellermeier, "Stochastic Contextual Dueling Bandits under Linear
Stochastic Transitivity Models" (ICML 2022), adapted to item-specific theta_i and a graph, in the
two readings of its coupling coin.

The paper imitates the feedback process: under a linear stochastic transitivity model with link
F, a duel is won by the larger of utility + noise with noise distribution F.  For the logistic
link of the BTL model that noise is standard Gumbel (the difference of two Gumbels is logistic).
Its steps are

    B_t ~ Bernoulli(p_t), p_t = min(1, d log(dT) / sqrt(t))           (the coupling coin)
    eps_i ~ Gumbel(0, 1), one draw shared by all items or one per item (by the coin),
          trimmed to [-c, c];
    i_t = argmax_i  x_i'theta^ + eps_i ||x_i||_{M_t^{-1}};
    j_t = argmax_j  x_j'theta^ + C ||x_j - x_{i_t}||_{M_t^{-1}}   (the UCB of j's advantage over i_t).

**The coin.** The only published implementation that has it, the VACDB authors'
(``uclaml/VACDB``, ``ucb.py:53-82``), draws B_t with p_t = min(1, d log(dT)/sqrt(t))
(``ucb.py:63-64``) and gives every item the *same* perturbation when B_t = 1 (``ucb.py:67-68``);
the trimming threshold is sqrt(d log T) (``ucb.py:62``).  The other implementations read here draw
one perturbation per item at every step and have no coin: ``Healthy-AI/GURO``
(``algorithms.py:378-384``, untrimmed), ``sshivam95/Multi-Dueling-Bandits``
(``algorithms/colstim.py:131-142``, trimmed to sqrt(d log T), ``:74-76``) and
``DOTBielefeld/colstim`` (``surrogates/colstim_surrogate.py:270``).  The paper itself could not be
read here.  So both directions are shipped: ``"CoLSTIM"`` shares the draw when B_t = 1 (VACDB's
reading), ``"CoLSTIM-rev"`` draws independently when B_t = 1 and shares it when B_t = 0.  With
d = (n-1) d_x (the free parameters) p_t = 1 for t < (d log(dT))^2, i.e. at every step of Settings
A and B and the LLM replays: CoLSTIM then shares one draw at every step, and CoLSTIM-rev draws one
per item at every step -- exactly what the coin-less implementations do, and what this project's
CoLSTIM did before the coin (value for value: no coin is drawn while p_t = 1).

Here x_i = e_i (x) X_t, the estimate and its uncertainty are the debiased estimator's
(Corollary "inf"): x_i'theta^ -> X_t'theta_d_i, ||x_i||^2_{M^{-1}} -> X_t'(Phi11)_ii X_t
(:meth:`study.DebiasResult.spread`), ||x_j - x_i||^2_{M^{-1}} -> Var(X_t'(theta_d_j - theta_d_i))
(:meth:`study.DebiasResult.pair_spread`): Phi_11 is the inverse of the Fisher information at
theta(t-1), each comparison weighted by M sigma'(.), where the paper's M_t is the unweighted design
matrix.  The second item is restricted to i_t's neighbours; the first item to items with a
neighbour.

Constants: the paper sets the trimming threshold c and the confidence width C from the radius of
its MLE confidence ellipsoid (of order sqrt(d log T); VACDB: c = sqrt(d log T), ``ucb.py:62``, and
C = 2 sqrt(d log T), ``ucb.py:9-26``), which bounds a self-normalised martingale with design
matrix M_t and does not transfer to the debiased Gaussian intervals.  We use the confidence width
the paper's BT-UCB uses with the same intervals, sqrt(2 log(nT)), for both.  p_t is VACDB's with
d = (n-1) d_x.  The Gumbel draws (n per step while Phi is available) and the coin (one uniform per
step, only while p_t < 1) come from the policy's private generator ``step.rng``, not from the
shared uniforms.

Before Phi is available: CoLSTIM starts with an exploration phase of uniformly random pairs
(length tau in the paper, until its design matrix is well conditioned); here it lasts while
Psi_t is singular, a uniformly random edge per step from the shared ``edge``/``end`` uniforms,
recorded as explored -- its own rule; ``Setting.warmup`` may replace it (:mod:`.warmup`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Choice, Step, argmax_playable
from .pairs import optimistic_neighbour
from .paper import ucb_width
from .warmup import PhiRule, warmup_rule


def coupling_probability(t: int, dimension, horizon) -> float:
    """p_t = min(1, d log(dT) / sqrt(t)) (VACDB ``ucb.py:63``); 1 when ``dimension`` is None."""
    if dimension is None:
        return 1.0
    return float(min(1.0, dimension * np.log(dimension * horizon) / np.sqrt(t)))


@dataclass(frozen=True)
class CoLSTIM(PhiRule):
    """Perturbed first item, optimistic second (module docstring).

    ``shared_on_heads``: whether B_t = 1 means one perturbation shared by all items (VACDB's
    reading, ``"CoLSTIM"``) or one per item (``"CoLSTIM-rev"``).  ``dimension`` and ``horizon``
    are the d and T of p_t (``dimension=None``: p_t = 1, B_t = 1 at every step)."""

    threshold: float  # c: the Gumbel perturbations are trimmed to [-c, c]
    width: float      # C: confidence width of the second item's advantage
    dimension: int | None = None
    horizon: int = 1
    shared_on_heads: bool = True
    name: str = "CoLSTIM"
    warmup: str = "random"

    def perturbations(self, rng, n_items: int, t: int) -> np.ndarray:
        """The trimmed perturbations eps_1..eps_n of step t: n Gumbel draws, then the coin (drawn
        only while p_t < 1) decides whether every item takes the first one."""
        eps = rng.gumbel(size=n_items)
        p = coupling_probability(t, self.dimension, self.horizon)
        heads = True if p >= 1.0 else bool(rng.random() < p)
        if heads == self.shared_on_heads:
            eps[:] = eps[0]
        return np.clip(eps, -self.threshold, self.threshold)

    def choose(self, step: Step, db) -> Choice:
        utility = db.theta_d @ step.x
        noise = self.perturbations(step.rng, len(utility), step.t)
        major = argmax_playable(step, utility + noise * np.sqrt(np.maximum(db.spread(step.x), 0.0)))
        return Choice(major, optimistic_neighbour(step, db, utility, major, self.width), False)


def _colstim(setting, shared_on_heads: bool, name: str) -> CoLSTIM:
    width = ucb_width(setting)
    return CoLSTIM(threshold=width, width=width, dimension=(setting.n_items - 1) * setting.dim, horizon=setting.T,
                   shared_on_heads=shared_on_heads, name=name, warmup=warmup_rule(setting, "random"))


def colstim(setting) -> CoLSTIM:
    """CoLSTIM, VACDB's reading of the coin: one shared perturbation when B_t = 1."""
    return _colstim(setting, True, "CoLSTIM")


def colstim_rev(setting) -> CoLSTIM:
    """CoLSTIM-rev, the coin read the other way: one perturbation per item when B_t = 1."""
    return _colstim(setting, False, "CoLSTIM-rev")
