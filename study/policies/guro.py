"""GURO: greedy uncertainty reduction for ordering items, Bergstroem, Carlsson, Dubhashi &
Johansson, "Active Preference Learning for Ordering Items In- and Out-of-Sample" (NeurIPS 2024;
the authors' code ``Healthy-AI/GURO`` at commit 6c97d3a, ``algorithms.py:446-582``), adapted to
this model.

GURO orders n items with *fixed* features x_i (no context) under the logistic model
P(i beats j) = sigma((x_i - x_j)'theta), and compares the pair whose outcome is the most uncertain
under the current model: over all pairs (i, j),

    argmax_{i<j}  ||z_ij||^2_{M^{-1}} sigma'(z_ij' theta^),   z_ij = x_i - x_j

(``algorithms.py:499-528``), with M = I + sum_s sigma'(z_s'theta^) z_s z_s' the Fisher information
of the logistic model, kept by Sherman-Morrison updates (``algorithms.py:540-564``) -- the variance
of the predicted log-odds of the pair times the slope of the link there.  GURO Hybrid
(``personal_coefs=True``, ``algorithms.py:459-464``) appends one indicator per item to the
features: the model becomes x_i'beta + alpha_i, coefficients shared by all items plus one *scalar*
offset per item; its offsets' block of M^{-1} is taken as diagonal and their covariance with beta
dropped (``algorithms.py:507-516`` when scoring, ``546-560`` in the update).

Here the rule is GURO's own (``personal_coefs=False``: the full M^{-1}, ``algorithms.py:517-528``),
applied to this model's features: item i's feature at step t is e_i (x) X_t, so that
z_ab'theta = X_t'(theta_a - theta_b), an item-specific d-vector theta_i acting on the step's shared
context X_t.  This is not GURO Hybrid, nor a limit of it: Hybrid's item-specific part is one scalar
per item, the same whatever the pair's context (its items have fixed features and no context), and
it approximates the covariance of that part by its diagonal; here every coefficient is
item-specific, the features change with every step's context, and M^{-1} is the full Phi_11, the
inverse Fisher information at theta(t-1) (each comparison weighted by M sigma'(.), the same
weighting as GURO's M, without its identity prior; Corollary "inf"), at the debiased estimate:

    (a, b) = argmax over edges of  sd_ab^2 sigma'(X_t'(theta_d_a - theta_d_b)),
    sd_ab^2 = Var X_t'(theta_d_a - theta_d_b)          (:meth:`study.DebiasResult.pair_spread`).

Adaptations: pairs are the graph's edges; the estimate is refitted every step by the shared
estimator (GURO refits a logistic regression every ``update_every = 10`` comparisons,
``algorithms.py:566-576``, with scikit-learn's default L2 penalty, and updates M at the estimate of
the time); sigma' is evaluated at the debiased estimate; the major item is the end with the larger
X_t'theta_d (GURO orders items and has no major item: its regret here is a by-product).  No
constant: GURO has none besides ``update_every``.

Before Phi is available: GURO starts with uniformly random pairs (its first 10 comparisons,
``algorithms.py:478-480``); here a uniformly random edge while Psi_t is singular (recorded as
explored), its own rule; ``Setting.warmup`` may replace it (:mod:`.warmup`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .pairs import EdgeRule
from .warmup import warmup_rule


@dataclass(frozen=True)
class GURO(EdgeRule):
    """The edge of largest sd_ab^2 sigma'(margin) (module docstring); ``warmup``: the rule while
    Phi does not exist."""

    name: str = "GURO"
    warmup: str = "random"

    def edge_scores(self, db, x, edges, utility):
        p = expit(utility[edges[:, 0]] - utility[edges[:, 1]])
        return np.maximum(db.pair_spread(x, edges), 0.0) * p * (1.0 - p)


def guro(setting) -> GURO:
    return GURO(warmup=warmup_rule(setting, "random"))
