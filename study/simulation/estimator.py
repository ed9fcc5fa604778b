"""The estimator every policy shares: theta(t) refitted at every step, and its debiased version.

Estimator schedule (the same for every policy, as the paper's Algorithm 1 and section
"Numerical Studies" use one estimation procedure for all methods): for t <= T0 the constrained
MLE (label ``opt1``, radius gamma, tie-break per ``setting.tie_break``); for t > T0 the ridge MLE
(label ``opt``, lambda_t = c_lambda sqrt(t M log T / n)).  Both are warm-started from the last fit's
point (theta(t-1) with its margins and loss gradient: :class:`study.core.newton.Point`) and factor,
the new row taken exactly in the refit's first step (:func:`study.core.newton.rank_one_step`).

The estimator also keeps what its refits cost (:meth:`Estimate.cost`): CPU seconds and steps in
each regime -- stage 1 at the tie-broken point (the data leave theta unidentified), stage 1 with
the exact opt1 once active balls identify theta, stage 1 once the data identify theta, stage 2 --
the debiased fits' CPU seconds, the slowest refit, and the core's work counters
(:mod:`study.core.costs`).
"""
from __future__ import annotations

import time

import numpy as np

from ..core import costs, rowspace
from ..core.inference import DebiasResult, debias_data
from ..core.likelihood import ComparisonData
from ..core.mle import identified, new_row_term, solve
from ..core.newton import Point
from ..core.systems import ROW_SPACE_MIN_PARAMETERS


REGIMES = ("tie_break", "exact_balls", "identified", "stage2")
LARGE_FACTOR_RANK = 32


class Estimate:
    """theta(t), refitted every step, and (when needed) its debiased version."""

    def __init__(self, setting, env):
        self.setting = setting
        # the row-space products (x_k'x_l) only where the row-space solver may be used
        small = (env.n_items - 1) * env.dim < ROW_SPACE_MIN_PARAMETERS
        self.data = ComparisonData(env.n_items, env.dim, env.T, edges=env.edges, row_space_rows=0 if small else None)
        self.theta = env.theta0 - env.theta0.mean(axis=0)
        self.multipliers = None
        self.debiased: DebiasResult | None = None
        self.newton_steps = 0
        self.factor = None  # last Cholesky factor, reused for chord steps at the next refit
        self.identified = False  # do the data identify theta (reduced Hessian of L well conditioned)?
        self.work = costs.new()  # the core's counters over every refit and debiased fit
        self.regime_steps = dict.fromkeys(REGIMES, 0)
        self.regime_cpu = dict.fromkeys(REGIMES, 0.0)
        self.debias_cpu = 0.0
        self.slowest = (0.0, 0)  # (CPU s, t) of the most expensive refit
        # Every refit starts from the previous fit's last point (newton.Point: beta with its margins
        # and loss gradient), extended by the new row in O(d) instead of a first pass over the rows,
        # and takes the new row exactly in its first step (newton.rank_one_step).  The point's beta is
        # state; its margins and gradient a cache that one pass recomputes (a reopened online ranker's).
        # Large problems (no reduced design) keep stage 2's new rows in their kept preconditioner
        # instead, whose warm-start factor takes more rank-one terms before it is refreshed: a refresh
        # (the Hessian, O(t d^2)) then costs more than the Woodbury terms (O(p^2) each); measured at
        # n = 5, t = 19,000: 2.02 ms per step with 8, 1.42 with 32, 1.32 with 64
        self.reuse_point = True  # (a switch for the benchmarks and tests that measure what the point saves)
        self.large = self.data.design is None
        self.factor_rank = LARGE_FACTOR_RANK if self.large else None
        self.point_beta = None
        self._point = None

    def update(self, t: int, major: int, other: int, x: np.ndarray, wins: float, m: float) -> None:
        started = time.process_time()
        work = self.work
        exact_before = work["exact_resolves"] - work["exact_fallbacks"]
        with costs.counting(work):
            self._update(t, major, other, x, wins, m)
        if t > self.setting.T0:
            regime = "stage2"
        elif self.identified:
            regime = "identified"
        else:
            regime = "exact_balls" if work["exact_resolves"] - work["exact_fallbacks"] > exact_before else "tie_break"
        seconds = time.process_time() - started
        self.regime_steps[regime] += 1
        self.regime_cpu[regime] += seconds
        if seconds > self.slowest[0]:
            self.slowest = (seconds, t)

    def cost(self) -> dict:
        """CPU seconds and steps by regime (``cpu_<regime>``, ``steps_<regime>``), ``cpu_debias``,
        ``slowest_refit_cpu`` and its step ``slowest_refit_t``, and the counters of
        :data:`study.core.costs.COUNTERS`."""
        out = {f"steps_{r}": self.regime_steps[r] for r in REGIMES}
        out.update({f"cpu_{r}": self.regime_cpu[r] for r in REGIMES})
        out.update(cpu_debias=self.debias_cpu, slowest_refit_cpu=self.slowest[0], slowest_refit_t=self.slowest[1])
        out.update(self.work)
        return out

    def _update(self, t: int, major: int, other: int, x: np.ndarray, wins: float, m: float) -> None:
        s = self.setting
        if self.point_beta is not None and self._point is None:  # the cache, on the rows it was made with
            u = self.data.reduced_margins(self.point_beta)
            self._point = Point(self.point_beta, u, self.data.reduced_gradient(u))
        self.data.append(major, other, x, wins, m)
        pending = None
        if self.factor is not None and t > s.T0 and self.large:
            # large problems' stage 2: the new row into the kept preconditioner at theta(t-1)'s weight
            self.factor = self.factor.add(new_row_term(self.data, self.theta), self.factor_rank)
        elif self.factor is not None:
            pending = self.data.t - 1  # the refit's first step takes it exactly (newton.rank_one_step)
        start = None if (self._point is None or not self.reuse_point) else self._point.extended(self.data)
        if t <= s.T0:
            # rows only add information: once identified, always identified; the rank bound
            # settles the early steps without a factorisation, and so does an exact null vector
            # (an item whose rows span fewer than d contexts: ComparisonData.null_pair)
            # (and, for the exact estimate, its kept row space: study.core.rowspace)
            if (not self.identified and self.data.rank_bound() >= self.data.n_parameters
                    and not (s.tie_break == "exact" and rowspace.rank_deficient(self.data))):
                if self.data.null_pair() is None:
                    self.identified = identified(self.data, self.theta, np.zeros(self.data.n_items))
                else:
                    costs.add("null_vector_shortcuts")  # counted into self.work (update's block)
            reference = self.theta if s.tie_break in ("nearest", "exact") else None
            fit = solve(self.data, self.theta, radius=s.gamma, reference=reference, multipliers=self.multipliers,
                        factor_hint=self.factor, prox=0.0 if self.identified else None, start=start,
                        pending=pending, exact=s.tie_break == "exact")
            if not fit.converged and self.identified:  # near-separable data: fall back on the tie-break term
                fit = solve(self.data, self.theta, radius=s.gamma, reference=reference)
            self.multipliers = fit.multipliers
        else:
            ridge = s.lambda_t(t)
            reference = self.theta if (ridge == 0.0 and s.tie_break == "nearest") else None
            fit = solve(self.data, self.theta, ridge=ridge, reference=reference, factor_hint=self.factor, start=start,
                        pending=pending)
        point = fit.point if self.reuse_point else None
        self._point = point
        self.point_beta = None if point is None else point.beta
        self.factor = fit.factor
        self.theta = fit.theta
        self.newton_steps += fit.newton_steps

    def debias(self) -> DebiasResult:
        started = time.process_time()
        with costs.counting(self.work):
            self.debiased = debias_data(self.data, self.theta)
        self.debias_cpu += time.process_time() - started
        return self.debiased
