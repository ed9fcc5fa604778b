"""Results stored before the package was split by layer (commit 9dce6ce, tests/data/store_9dce6ce:
a tiny regret and coverage study written by that commit's code) keep loading and drawing; a resume
of them is refused, naming the changed core, since the core source hash is now defined by
directory."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import study
from study import runner
from study.results.figures import draw_all
from study.results.stored import stored_studies
from study.results.summary import write_summary

STORE = Path(__file__).resolve().parents[1] / "data" / "store_9dce6ce"


@pytest.fixture
def out(tmp_path):
    target = tmp_path / "out"
    shutil.copytree(STORE, target)
    return target


def test_old_results_load_and_draw(out):
    regret = study.load(out, "regret")
    assert len(regret) == 2 * 2 * 30 and set(regret["method"]) == {"RB", "ETA"}
    intervals = study.load(out, "coverage", "intervals")
    assert len(intervals) > 0 and intervals["covered"].dtype == bool
    assert stored_studies(out) == [("regret", "regret"), ("coverage", "coverage")]
    # stored before the confidence sequences: their columns load as nulls
    assert intervals["cs_lower"].isna().all() and intervals["cs_covered"].isna().all()
    # stored before costs were recorded: the table loads empty, with its columns
    costs = study.load(out, "coverage", "costs")
    assert len(costs) == 0 and "cpu_seconds" in costs.columns
    names = {p.name for p in draw_all(out)}
    assert {"regret_A.png", "coverage_A.png"} <= names and "uniform_A.png" not in names
    csv, md = write_summary(out)
    assert "Regret study (paper Figure 1)" in md.read_text()
    coverage = pd.read_csv(csv).query("study == 'coverage'").iloc[0]
    assert 0 <= coverage["tu_ci"] <= 1 and np.isnan(coverage["tu_cs"])  # the CIs' still computed


def test_resuming_old_results_is_refused_naming_the_core(out):
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "ETA"], reps=2, overrides={"T": 30, "T0": 10})
    with pytest.raises(runner.ConfigMismatch, match="core's source code changed"):
        runner.check_stored(plan, out)
