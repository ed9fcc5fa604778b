"""Behaviour is unchanged by refactoring, on any machine: every built-in method on Settings A and B
gives the stored golden tables (tests/data/golden_<commit>_*.parquet), its choices identical
wherever their margin is not a near-tie and its values within a stated tolerance.  How the runs
are compared and how the tolerances were chosen: tests/simulation/golden.py.  A change of the core
that alters rounding beyond that must regenerate them (``python tests/simulation/golden.py write``)
after showing statistical agreement (README, "Reference outcome")."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import golden as g
import study


@pytest.fixture(scope="module")
def stored():
    return g.load_golden()


@pytest.mark.parametrize("setting", g.SETTINGS)
@pytest.mark.parametrize("method", study.ALL_METHODS)
def test_same_tables_for_the_same_seeds(stored, setting, method):
    result = g.compare(setting, method, g.run(setting, method), stored)
    for line in result.divergences:  # allowed, and said: which step, which decision, its margin
        warnings.warn(f"golden tables: {line}", stacklevel=1)
    assert not result.failures, "\n".join(result.failures)


# --- the comparison itself: it must catch a change of behaviour and pass rounding ----------------

def _stored_run(stored, setting, method):
    traj, ints = (t[(t.setting == setting) & (t.method == method)].drop(columns=["setting", "method"])
                  .reset_index(drop=True) for t in stored)
    return g.Run(traj.copy(), ints.copy(), {seed: {} for seed in g.SEEDS})


def test_the_comparison_passes_rounding_and_fails_a_change_beyond_the_tolerance(stored):
    fresh = _stored_run(stored, "A", "RB")
    assert not g.compare("A", "RB", fresh, stored).failures
    fresh.trajectory["rel_error"] *= 1 + 0.1 * g.RTOL  # rounding-sized: passes
    fresh.intervals["estimate"] += 1e-3 * g.RTOL
    assert not g.compare("A", "RB", fresh, stored).failures
    fresh.trajectory.loc[30, "rel_error"] *= 1 + 10 * g.RTOL  # one value beyond it: fails, naming the column
    failures = g.compare("A", "RB", fresh, stored).failures
    assert len(failures) == 1 and "'rel_error'" in failures[0] and "seed 3" in failures[0]


def test_a_choice_taken_differently_fails_unless_its_margin_was_a_near_tie(stored):
    fresh = _stored_run(stored, "B", "ETA")
    row = 40  # seed 3, t = 41
    t = int(fresh.trajectory.loc[row, "t"])
    fresh.trajectory.loc[row, "major"], fresh.trajectory.loc[row, "other"] = \
        fresh.trajectory.loc[row, "other"], fresh.trajectory.loc[row, "major"]
    fresh.margins[3] = {t: (0.2, "major item")}  # a clear margin: a change of behaviour
    failures = g.compare("B", "ETA", fresh, stored).failures
    assert len(failures) == 1 and f"t = {t}" in failures[0] and "change of behaviour" in failures[0]
    fresh.margins[3] = {}  # no margin noted at all: also a failure
    assert "no decision margin" in g.compare("B", "ETA", fresh, stored).failures[0]
    fresh.margins[3] = {t - 1: (1e-13, "Psi_t singular"), t: (0.3, "major item")}  # a near-tie just before
    fresh.trajectory.loc[row + 1:59, "rel_error"] += 1.0  # seed 3's path after it differs: not compared
    result = g.compare("B", "ETA", fresh, stored)
    assert not result.failures
    assert len(result.divergences) == 1 and f"t = {t}" in result.divergences[0] and "Psi_t singular" in \
        result.divergences[0]


def test_a_covered_flag_may_differ_only_where_the_truth_is_on_a_bound(stored):
    fresh = _stored_run(stored, "A", "ETA")
    ints = fresh.intervals
    assert len(ints), "the golden A/ETA run has CIs"
    ints.loc[0, "covered"] = not ints.loc[0, "covered"]
    assert "'covered' differs at 1" in g.compare("A", "ETA", fresh, stored).failures[0]
    on_bound = ints.loc[0, "upper"] * (1 + 0.1 * g.RTOL)  # the truth within the tolerance of a bound
    ints.loc[0, "truth"] = on_bound
    traj, golden_ints = stored[0], stored[1].copy()
    golden_ints.loc[golden_ints[(golden_ints.setting == "A") & (golden_ints.method == "ETA")].index[0], "truth"] = on_bound
    assert not g.compare("A", "ETA", fresh, (traj, golden_ints)).failures


def test_margins_are_recorded_for_the_decisions_of_a_run():
    fresh = g.run("A", "RB")
    margins = fresh.margins[3]
    assert set(margins) >= set(range(25, 61)), "RB takes a greedy decision at every step after T0"
    assert {what for _, what in margins.values()} >= {"major item"}
    assert all(np.isfinite(m) or m == np.inf for m, _ in margins.values())
