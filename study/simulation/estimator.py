"""The estimator every policy shares: theta(t) refitted at every step, and its debiased version.

Estimator schedule (the same for every policy, as the paper's Algorithm 1 and section
"Numerical Studies" use one estimation procedure for all methods): for t <= T0 the constrained
MLE (label ``opt1``, radius gamma, tie-break per ``setting.tie_break``); for t > T0 the ridge MLE
(label ``opt``, lambda_t = c_lambda sqrt(t M log T / n)).  Both are warm-started from theta(t-1).
"""
from __future__ import annotations

import numpy as np

from ..core import costs
from ..core.inference import DebiasResult, debias_data
from ..core.likelihood import ComparisonData
from ..core.mle import identified, new_row_term, solve


class Estimate:
    """theta(t), refitted every step, and (when needed) its debiased version."""

    def __init__(self, setting, env):
        self.setting = setting
        self.data = ComparisonData(env.n_items, env.dim, env.T, edges=env.edges)
        self.theta = env.theta0 - env.theta0.mean(axis=0)
        self.multipliers = None
        self.debiased: DebiasResult | None = None
        self.newton_steps = 0
        self.factor = None  # last Cholesky factor, reused for chord steps at the next refit
        self.identified = False  # do the data identify theta (reduced Hessian of L well conditioned)?

    def update(self, t: int, major: int, other: int, x: np.ndarray, wins: float, m: float) -> None:
        s = self.setting
        self.data.append(major, other, x, wins, m)
        if self.factor is not None:  # fold the new row into the warm-start factor (Woodbury)
            self.factor = self.factor.add(new_row_term(self.data, self.theta))
        if t <= s.T0:
            # rows only add information: once identified, always identified; the rank bound
            # settles the early steps without a factorisation, and so does an exact null vector
            # (an item whose rows span fewer than d contexts: ComparisonData.null_pair)
            if not self.identified and self.data.rank_bound() >= self.data.n_parameters:
                if self.data.null_pair() is None:
                    self.identified = identified(self.data, self.theta, np.zeros(self.data.n_items))
                else:
                    costs.add("null_vector_shortcuts")
            reference = self.theta if s.tie_break == "nearest" else None
            fit = solve(self.data, self.theta, radius=s.gamma, reference=reference, multipliers=self.multipliers,
                        factor_hint=self.factor, prox=0.0 if self.identified else None)
            if not fit.converged and self.identified:  # near-separable data: fall back on the tie-break term
                fit = solve(self.data, self.theta, radius=s.gamma, reference=reference)
            self.multipliers = fit.multipliers
        else:
            ridge = s.lambda_t(t)
            reference = self.theta if (ridge == 0.0 and s.tie_break == "nearest") else None
            fit = solve(self.data, self.theta, ridge=ridge, reference=reference, factor_hint=self.factor)
        self.factor = fit.factor
        self.theta = fit.theta
        self.newton_steps += fit.newton_steps

    def debias(self) -> DebiasResult:
        self.debiased = debias_data(self.data, self.theta)
        return self.debiased
