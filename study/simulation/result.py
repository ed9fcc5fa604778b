"""The record of one replication: per-step trajectory, CI records and the graph."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

TRAJECTORY_COLUMNS = ("t", "major", "other", "explored", "regret", "avg_regret", "rel_error", "pair_regret",
                      "avg_pair_regret", "before_phi")
INTERVAL_COLUMNS = ("t", "item", "dim", "estimate", "se", "lower", "upper", "truth", "covered", "cs_lower",
                    "cs_upper", "cs_covered")
INTERVAL_DTYPES = {name: np.int64 if name in ("t", "item", "dim") else (bool if name.endswith("covered") else float)
                   for name in INTERVAL_COLUMNS}


# the cost of a replication (ReplicationResult.cost; the stored ``costs`` table, one row per replication)
COST_FIELDS = {
    "cpu_seconds": float, "wall_seconds": float,
    "steps_tie_break": int, "steps_exact_balls": int, "steps_identified": int, "steps_stage2": int,
    "cpu_tie_break": float, "cpu_exact_balls": float, "cpu_identified": float, "cpu_stage2": float,
    "cpu_debias": float, "slowest_refit_cpu": float, "slowest_refit_t": int,
    "newton_systems": int, "pcg_iterations": int, "factorisations": int, "dual_steps": int,
    "active_set_iterations": int, "identification_tests": int, "null_vector_shortcuts": int,
    "exact_resolves": int, "exact_fallbacks": int, "budget_stops": int, "shared_steps": int,
}


@dataclass
class ReplicationResult:
    """One (setting, method, seed) run.

    ``trajectory`` maps each name in ``TRAJECTORY_COLUMNS`` to a length-T array (t is 1-based):
    ``major, other`` (int, 0-based) the compared items, ``explored`` (bool), ``regret`` the paper's
    per-step regret x'theta*_best - x'theta*_{i_t} (only the major item is charged), ``avg_regret``
    R(t) (``eq:regret``), ``rel_error`` max_i ||theta_i(t) - theta*_i|| / max_i ||theta*_i||,
    ``pair_regret`` the dueling literature's regret of the pair
    ((x'theta*_best - x'theta*_i) + (x'theta*_best - x'theta*_j)) / 2 and ``avg_pair_regret`` its
    running average (all float64), ``before_phi`` (bool) whether the policy asked for the
    debiased estimate at step t and Psi_t was singular (the step was its warm-up rule's; its sum is
    the number of steps the method spent before Phi existed);
    ``intervals`` maps each name in ``INTERVAL_COLUMNS`` to equal-length arrays (one row per
    grid time, item and dimension, from the first grid time the debiased CI is available): the
    fixed-time CI (``lower, upper, covered``) and the anytime-valid confidence sequence
    (``cs_lower, cs_upper, cs_covered``, tightest at t = T: :meth:`study.DebiasResult.cs`);
    ``edges`` is the (E, 2) comparison graph and ``graph_draws`` how many Erdos-Renyi draws it
    took to get a connected one (0 when the edges were given); ``seconds`` the wall time of the
    run, ``theta_final`` theta(T), ``ci_available_from`` the first grid time with a CI (None if
    none), ``snapshots`` {t: (theta(t), DebiasResult)} at the requested snapshot times and
    ``newton_steps`` the estimator's Newton steps over the run; ``cost`` what the replication cost
    (keys of ``COST_FIELDS``; empty for a result made without it, e.g. by a replicate hook):
    ``cpu_seconds`` and ``wall_seconds`` of the run, steps and refit CPU seconds in each estimator
    regime (``tie_break``: stage 1 at the tie-broken point, the data leaving theta unidentified;
    ``exact_balls``: stage 1 with the exact opt1, active balls identifying theta;
    ``identified``: stage 1 once the data identify theta; ``stage2``), ``cpu_debias`` (debiased
    fits), the slowest refit (``slowest_refit_cpu`` at step ``slowest_refit_t``), the core's
    work counters (:mod:`study.core.costs`) and ``shared_steps``, the first steps computed once
    for this and another method (ERA continues RB's run; their cost is in both records).
    """

    setting: object
    method: str
    seed: int
    trajectory: dict
    intervals: dict
    edges: np.ndarray
    graph_draws: int
    seconds: float
    theta_final: np.ndarray = field(repr=False, default=None)
    ci_available_from: int | None = None
    snapshots: dict = field(default_factory=dict, repr=False)
    newton_steps: int = 0
    cost: dict = field(default_factory=dict, repr=False)

    def to_frame(self) -> dict:
        """Tidy frames: ``{"trajectory": DataFrame, "intervals": DataFrame}``."""
        trajectory = pd.DataFrame({name: self.trajectory[name] for name in TRAJECTORY_COLUMNS
                                   if name in self.trajectory})
        rows = len(self.intervals["t"]) if "t" in self.intervals else 0
        intervals = pd.DataFrame({name: self.intervals[name] for name in INTERVAL_COLUMNS  # a hook's result may
                                  if len(self.intervals.get(name, ())) == rows})  # lack the newer columns
        return {"trajectory": trajectory, "intervals": intervals}

    @property
    def final_regret(self) -> float:
        return float(self.trajectory["avg_regret"][-1])

    @property
    def final_error(self) -> float:
        return float(self.trajectory["rel_error"][-1])
