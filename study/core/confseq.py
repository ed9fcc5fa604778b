"""Anytime-valid confidence sequences (CSs) for the debiased estimator: intervals that hold at
every time simultaneously, so that one may look after every judgment and stop whenever one likes.

The construction (derived in docs/core.md, "Confidence sequences") is Robbins' two-sided
normal-mixture boundary (Robbins, Ann. Math. Statist. 1970; Howard, Ramdas, McAuliffe & Sekhon,
Ann. Statist. 2021, its mixture boundaries) applied, as Waudby-Smith, Arbour, Sinha, Kennedy &
Ramdas (Ann. Statist. 2024, "Time-uniform central limit theory and asymptotic confidence
sequences", Section 2) do for asymptotically linear estimators, to N_t (a'theta_d(t) - a'theta*), which is asymptotically a
Brownian motion in the intrinsic time V_t = N_t^2 se_t^2 (N_t comparisons told, se_t the
standard error of a'theta_d(t), model-based or sandwich).  For a standard Brownian motion S(V),

    P( |S(V)| >= sqrt((V + rho) log((V + rho) / (rho alpha^2)))  for some V > 0 ) = alpha,

(Ville's inequality for the mixture martingale sqrt(rho / (V + rho)) exp(S^2 / (2 (V + rho))), an
equality for continuous paths).  Dividing by N_t, with rho = sigma^2 / r^2 on the scale of the
per-comparison variance sigma^2 = N_t se_t^2 and eta = N_t r^2, the CS is

    a'theta_d(t) -/+ se_t g(eta_t),   g(eta) = sqrt((1 + 1/eta) (log(1 + eta) + 2 log(1/alpha))).

g is smallest at eta* = -W_{-1}(-alpha^2 / e) - 1 (Lambert's W, lower branch), where it equals
sqrt(1 + eta*) (3.035 for alpha = 0.05, 1.55 z_0.975).  Choosing the time of the tightest width
``tightest_at`` = N* comparisons fixes r^2 = eta* / N*, so eta_t = eta* N_t / N*.  The tuning
must be fixed before the data are seen (a tuning chosen from the data at each look is a fixed-time
interval again).

Assumptions.  This is the i.i.d. form of the asymptotic CS: the comparison count N_t is the clock
and sigma_t^2 = N_t se_t^2 a plug-in for the per-comparison variance, as if the comparisons were
i.i.d.  For the debiased estimator on adaptively collected comparisons it needs a stable design,
N_t Phi_t -> Sigma (a fixed limit given the graph), besides the conditions of the paper's Theorem
"BT" and outcomes whose variance the SE estimates; docs/core.md states them with the evidence on
this design (``python -m benchmarks.design_stability``).
"""
from __future__ import annotations

import numpy as np
from scipy.special import lambertw

from . import _validate as check


def _alpha(level) -> float:
    return 1.0 - check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)


def tightest_eta(level: float = 0.95) -> float:
    """eta* (dimensionless intrinsic time, eta = N r^2) at which g is smallest: the root of
    eta = log(1 + eta) + 2 log(1/alpha), i.e. 1 + eta* = -W_{-1}(-alpha^2 / e)."""
    alpha = _alpha(level)
    return float(-lambertw(-alpha * alpha / np.e, k=-1).real - 1.0)


def width_factor(eta, level: float = 0.95):
    """g(eta): the CS half-width in standard errors at dimensionless intrinsic time ``eta`` > 0
    (array or number)."""
    alpha = _alpha(level)
    eta = np.asarray(eta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(eta > 0, np.sqrt((1.0 + 1.0 / eta) * (np.log1p(np.maximum(eta, 0.0)) - 2.0 * np.log(alpha))),
                         np.inf)
    return float(value) if value.ndim == 0 else value


def mixture_boundary(intrinsic_time, rho, level: float = 0.95):
    """Robbins' two-sided normal-mixture boundary u(V) = sqrt((V + rho) log((V + rho) / (rho alpha^2))):
    a standard Brownian motion (or a continuous martingale with quadratic variation V) leaves
    [-u(V), u(V)] at some V > 0 with probability alpha = 1 - level (at most alpha for a martingale
    observed at discrete times).  ``rho`` > 0 is the mixture's precision (in units of V)."""
    alpha = _alpha(level)
    rho = check.real("rho", rho, low=0.0, low_open=True)
    v = np.asarray(intrinsic_time, dtype=float)
    return np.sqrt((v + rho) * (np.log((v + rho) / rho) - 2.0 * np.log(alpha)))


def check_tightest_at(tightest_at) -> float:
    """``tightest_at`` (a number of comparisons > 0), or ValueError."""
    if tightest_at is None:
        raise ValueError("tightest_at is required: the number of comparisons at which the confidence sequence "
                         "should be tightest, fixed before looking at the data (e.g. the horizon T x M)")
    return check.real("tightest_at", tightest_at, low=0.0, low_open=True)


def cs_factor(comparisons, tightest_at, level: float = 0.95):
    """The CS half-width in standard errors after ``comparisons`` comparisons (array or number),
    tuned to be tightest after ``tightest_at``: g(eta* comparisons / tightest_at)."""
    tightest_at = check_tightest_at(tightest_at)
    eta = tightest_eta(level) * np.asarray(comparisons, dtype=float) / tightest_at
    return width_factor(eta, level)


def fixed_factor(level: float = 0.95) -> float:
    """z_{(1+level)/2}: the fixed-time CI's half-width in standard errors."""
    from scipy.stats import norm
    return float(norm.ppf(1.0 - _alpha(level) / 2.0))
