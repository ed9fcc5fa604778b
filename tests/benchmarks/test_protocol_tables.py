"""The statistical scripts of benchmarks/ compute what they claim, on tiny stored studies:
graph_protocols' stage regrets and protocol effects, design_stability's plug-in variances."""
from __future__ import annotations

import numpy as np
import pytest

import study
from benchmarks import design_stability, graph_protocols
from study import cli

TINY = ["--reps", "3", "--set", "T=40", "--set", "T0=16", "--no-progress", "--no-figures"]


@pytest.fixture(scope="module")
def protocols(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("protocols")
    for g in graph_protocols.PROTOCOLS:
        assert cli.main("regret", ["--out", str(root / g), "--set", f"graph={g}", "--set", "ci_every=20", *TINY]) == 0
    return root


def test_stage_regrets_are_the_mean_regret_per_step_before_and_after_T0(protocols):
    stages = graph_protocols.stage_regret(protocols / "raw").set_index(["setting", "method", "rep"])
    traj = study.load(protocols / "raw", "regret")
    for (setting, method, rep), steps in traj.groupby(["setting", "method", "rep"], observed=True):
        regret = steps.sort_values("t")["regret"].to_numpy()
        row = stages.loc[(setting, method, rep)]
        assert row["stage1"] == pytest.approx(regret[:16].mean()) and row["stage2"] == pytest.approx(regret[16:].mean())


def test_the_tables_pair_each_method_with_itself_across_protocols(protocols):
    text = graph_protocols.tables(protocols)
    final = {g: study.load(protocols / g, "regret").query("t == 40").set_index(["setting", "method", "rep"])
             for g in graph_protocols.PROTOCOLS}
    d = (final["no_isolated"]["avg_regret"] - final["connected"]["avg_regret"]).loc[("B", "ETA")]
    expected = f"{d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f}".replace("-", "−")
    row = next(line for line in text.splitlines() if line.startswith("| B | ETA |") and "/" in line.split("|")[-2])
    assert expected in row.split("|")[3], (expected, row)
    assert "| A | connected |" in text and "| B | raw |" in text


def test_plug_in_variance_is_t_M_se_squared_relative_to_T(ray_session, tmp_path):
    out = tmp_path / "cs"
    assert cli.main("coverage", ["--out", str(out), "--settings", "A", "--reps", "2", "--set", "T=120",
                                 "--set", "T0=48", "--set", "ci_every=20", "--no-progress", "--no-figures"]) == 0
    v = design_stability.plug_in_variance(out)
    ints = study.load(out, "coverage", "intervals")
    row = ints[(ints["t"] == 80)].iloc[0]
    mine = v[(v["t"] == 80) & (v["rep"] == row["rep"]) & (v["item"] == row["item"]) & (v["dim"] == row["dim"])].iloc[0]
    assert mine["v"] == pytest.approx(80 * 20 * row["se"] ** 2)
    at_T = ints[(ints["t"] == 120) & (ints["rep"] == row["rep"]) & (ints["item"] == row["item"]) & (ints["dim"] == row["dim"])]
    assert mine["ratio"] == pytest.approx(80 * row["se"] ** 2 / (120 * at_T["se"].iloc[0] ** 2))
    table = design_stability.stability(v, fractions=(1.0,))
    assert (table["median"] == 1.0).all() and (table["within_20pct"] == 1.0).all()
