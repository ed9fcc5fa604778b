"""GURO: greedy uncertainty reduction for ordering items, Bergstroem, Carlsson, Dubhashi &
Johansson, "Active Preference Learning for Ordering Items In- and Out-of-Sample" (NeurIPS 2024;
the authors' code ``Healthy-AI/GURO``, ``algorithms.py:446-582``), adapted to this model.

The closest published setting to ours (item-specific plus contextual).  GURO compares the pair
whose outcome is the most uncertain under the current model: over all pairs (i, j) of items with
features x_i,

    argmax_{i<j}  ||z_ij||^2_{M^{-1}} sigma'(z_ij' theta^),   z_ij = x_i - x_j

(``algorithms.py:499-529``), with M = I + sum_s sigma'(z_s'theta^) z_s z_s' the Fisher information
of the logistic model, kept by Sherman-Morrison updates (``algorithms.py:540-564``) -- the variance
of the predicted log-odds of the pair times the slope of the link there.  ``personal_coefs`` (GURO
Hybrid, ``algorithms.py:459-464, 507-518``) appends one indicator per item to the features, the
item-specific part of the model.

Here an item's feature is e_i (x) X_t (an item-specific theta_i for a shared context, the limit of
GURO Hybrid with no shared part), the estimate is the debiased one and M^{-1} is Phi_11, the
inverse Fisher information at theta(t-1) (each comparison weighted by M sigma'(.), the same
weighting as GURO's M; Corollary "inf"):

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
