"""BALD: Bayesian active learning by disagreement (Houlsby, Huszar, Ghahramani & Lengyel, 2011) for
pairwise comparisons, the baseline of GURO's paper (Bergstroem et al., NeurIPS 2024; the authors'
code ``Healthy-AI/GURO``, ``algorithms.py:802-892``), adapted to this model.

BALD compares the pair whose outcome is most informative about the parameter: the mutual
information between the outcome and theta, the marginal entropy of the outcome minus its expected
entropy given theta.  With a Gaussian posterior theta ~ N(theta^, S), for the pair's margin
z'theta ~ N(mu, s^2) (mu = z'theta^, s^2 = z'Sz), GURO's code (``algorithms.py:849-879``) uses

    marginal = h( sigma(mu / sqrt(1 + pi s^2 / 8)) )                      (h: binary entropy, bits)
    expected = C / sqrt(s^2 + C^2) exp(-mu^2 / (2 (s^2 + C^2))),  C = sqrt(4 ln 2)
    score    = marginal - expected

(the first is MacKay's probit approximation of the predictive probability; the second integrates
h(sigma(u)) ~ exp(-u^2 / (8 ln 2)) against N(mu, s^2), the logistic form of Houlsby et al.'s
probit approximation, whence C^2 = 4 ln 2).  GURO's BALD keeps a Laplace posterior updated every 10
comparisons (``algorithms.py:136-197``).

Here the posterior is the one this project's TS draws from, N(theta_d(t-1), Phi_11) (Corollary
"inf"), item i's feature is e_i (x) X_t, so for an edge (a, b): mu = X_t'(theta_d_a - theta_d_b)
and s^2 = Var X_t'(theta_d_a - theta_d_b) (:meth:`study.DebiasResult.pair_spread`).
Adaptations: pairs are the graph's edges; the posterior is refitted every step; the major item is
the end with the larger X_t'theta_d (BALD has none).  Constants: C = sqrt(4 ln 2) and pi/8, from the
source; ``marginal_only`` and ``marginal_priority`` are off (the source's defaults).

Before Phi is available: BALD starts with uniformly random pairs (its first 10 comparisons,
``algorithms.py:815-817``); here a uniformly random edge while Psi_t is singular (recorded as
explored), its own rule; ``Setting.warmup`` may replace it (:mod:`.warmup`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import entr, expit

from .pairs import EdgeRule
from .warmup import warmup_rule

ENTROPY_SCALE = 4.0 * np.log(2.0)  # C^2 of the expected-entropy approximation (GURO algorithms.py:872)


def bald_scores(mu: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Marginal minus expected entropy (bits) of a comparison whose log-odds are N(mu, variance)."""
    p = expit(mu / np.sqrt(1.0 + np.pi * variance / 8.0))
    marginal = (entr(p) + entr(1.0 - p)) / np.log(2.0)
    scale = variance + ENTROPY_SCALE
    expected = np.sqrt(ENTROPY_SCALE / scale) * np.exp(-mu ** 2 / (2.0 * scale))
    return marginal - expected


@dataclass(frozen=True)
class BALD(EdgeRule):
    """The edge whose outcome carries the most information about theta (module docstring);
    ``warmup``: the rule while Phi does not exist."""

    name: str = "BALD"
    warmup: str = "random"

    def edge_scores(self, db, x, edges, utility):
        mu = utility[edges[:, 0]] - utility[edges[:, 1]]
        return bald_scores(mu, np.maximum(db.pair_spread(x, edges), 0.0))


def bald(setting) -> BALD:
    return BALD(warmup=warmup_rule(setting, "random"))
