"""The stored tables' schemas and key (one row per replication and step; intervals and failures).

Trajectories::

    study str, setting str, method str, M int32, T0 int32, T int32, rep int32, seed int64,
    t int32, major int32, other int32, explored bool, regret float64, avg_regret float64,
    rel_error float64, pair_regret float64, avg_pair_regret float64, before_phi bool

``setting`` is the base setting name ("A", "B"); overrides given with ``--set`` are recorded in the
manifest.  ``major``/``other`` are the compared items (0-based), ``explored`` marks an exploration
step, ``regret`` the per-step regret, ``avg_regret`` R(t) = (1/t) sum_{s<=t} regret_s,
``rel_error`` max_i ||theta*_i - theta_i(t)|| / max_i ||theta*_i||, ``pair_regret`` the regret of
the compared pair ((x'theta*_best - x'theta*_i) + (x'theta*_best - x'theta*_j)) / 2 and
``avg_pair_regret`` its running average, ``before_phi`` whether the policy asked for Phi at step t
and Psi_t was singular (its warm-up rule chose the pair; null in parts stored before the column
existed, which still load).  Intervals (one row per grid time, item and dimension
from the first grid time the debiased CI exists)::

    study str, setting str, method str, M int32, rep int32, seed int64, t int32, item int32,
    dim int32, estimate float64, se float64, lower float64, upper float64, truth float64,
    covered bool, cs_lower float64, cs_upper float64, cs_covered bool

``lower, upper, covered``: the fixed-time CI (the paper's); ``cs_lower, cs_upper, cs_covered``: the
anytime-valid confidence sequence, tightest at t = T (null in parts stored before the columns
existed, which still load).

Failures: ``study, setting, method, M, rep, seed, error, traceback, run_id``.

Costs (one row per replication; absent from studies stored before the table existed, which still
load: :func:`study.results.storage.load` returns it empty)::

    study str, setting str, method str, M int32, rep int32, seed int64, cpu_seconds float64,
    wall_seconds float64, steps_tie_break int32, steps_exact_balls int32, steps_identified int32,
    steps_stage2 int32, cpu_tie_break float64, cpu_exact_balls float64, cpu_identified float64,
    cpu_stage2 float64, cpu_debias float64, slowest_refit_cpu float64, slowest_refit_t int32,
    newton_systems int64, pcg_iterations int64, factorisations int64, dual_steps int64,
    active_set_iterations int64, identification_tests int64, null_vector_shortcuts int64,
    exact_resolves int64, exact_fallbacks int64, budget_stops int64, shared_steps int32

What each means: :class:`study.simulation.result.ReplicationResult` (``cost``).  A replication made
without a cost record (a replicate hook's) stores nulls.  Its values are timings and work counts,
not results: they differ from run to run and machine to machine.
"""
from __future__ import annotations

import pyarrow as pa

from ..simulation.result import COST_FIELDS

STORAGE_FORMAT = 2  # 2: commit records with checksums, shared seed namespace, pair-regret columns
KEY_COLUMNS = ("setting", "method", "M", "rep")
_INT32 = pa.int32()
TRAJECTORY_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("T0", _INT32), ("T", _INT32), ("rep", _INT32), ("seed", pa.int64()),
    ("t", _INT32), ("major", _INT32), ("other", _INT32), ("explored", pa.bool_()),
    ("regret", pa.float64()), ("avg_regret", pa.float64()), ("rel_error", pa.float64()),
    ("pair_regret", pa.float64()), ("avg_pair_regret", pa.float64()), ("before_phi", pa.bool_()),
])
INTERVAL_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("rep", _INT32), ("seed", pa.int64()),
    ("t", _INT32), ("item", _INT32), ("dim", _INT32), ("estimate", pa.float64()),
    ("se", pa.float64()), ("lower", pa.float64()), ("upper", pa.float64()),
    ("truth", pa.float64()), ("covered", pa.bool_()), ("cs_lower", pa.float64()), ("cs_upper", pa.float64()),
    ("cs_covered", pa.bool_()),
])
FAILURE_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("rep", _INT32), ("seed", pa.int64()), ("error", pa.string()),
    ("traceback", pa.string()), ("run_id", pa.string()),
])
_COST_TYPES = {float: pa.float64(), int: pa.int64()}
_COST_INT32 = {"steps_tie_break", "steps_exact_balls", "steps_identified", "steps_stage2", "slowest_refit_t",
               "shared_steps"}
COST_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("rep", _INT32), ("seed", pa.int64()),
] + [(name, _INT32 if name in _COST_INT32 else _COST_TYPES[kind]) for name, kind in COST_FIELDS.items()])
SCHEMAS = {"trajectory": TRAJECTORY_SCHEMA, "intervals": INTERVAL_SCHEMA, "failures": FAILURE_SCHEMA,
           "costs": COST_SCHEMA}
