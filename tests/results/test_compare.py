"""Paired differences of any study (study.results.compare, ``python -m study.results compare``): on
hand-made final values (the paired SE, the verdict rule, CP paired only where both have intervals),
and end to end on a two-method user study, checked against the differences computed directly from
the stored trajectories and intervals."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study import cli
from study.results import compare as C
from study.results import storage
from study.results.__main__ import main as results_main


def _values(means, reps=50, noise=0.01, seed=0, cp=None):
    """Per-replication values mean + a shared environment effect + small noise."""
    rng = np.random.default_rng(seed)
    env = rng.normal(0, 0.2, reps)
    rows = []
    for method, m in means.items():
        v = m + env + rng.normal(0, noise, reps)
        cov = np.full(reps, np.nan) if cp is None else cp[method](rng, reps)
        rows += [{"setting": "A", "method": method, "M": 20, "rep": r, "seed": 100 + r, "avg_regret": v[r],
                  "avg_pair_regret": v[r] + 0.5, "rel_error": 2 * v[r], "cp": cov[r]} for r in range(reps)]
    return pd.DataFrame(rows)


def test_paired_differences_and_the_verdict_rule():
    values = _values({"RB": 0.20, "ETA": 0.10, "ERA": 0.201})
    table = C.differences(values)
    assert set(table["method"]) == {"ETA", "ERA"} and (table["reference"] == "RB").all()
    eta = table[(table.method == "ETA") & (table.metric == "avg_regret")].iloc[0]
    wide = values.pivot(index="rep", columns="method", values="avg_regret")
    direct = wide["ETA"] - wide["RB"]
    assert eta["diff"] == pytest.approx(direct.mean()) and eta["diff_se"] == pytest.approx(direct.std(ddof=1) / np.sqrt(50))
    assert eta["diff_se"] < eta["se"] / 5  # the SE of the paired differences, not of the means
    assert eta["verdict"] == "lower" and eta["pairs"] == 50
    era = table[(table.method == "ERA") & (table.metric == "avg_regret")].iloc[0]
    assert abs(era["diff"]) < 3 * era["diff_se"] and era["verdict"] == "not separated"
    assert "cp" not in set(table["metric"])  # no intervals anywhere: no CP row
    # another reference
    other = C.differences(values, reference="ETA")
    assert other[(other.method == "RB") & (other.metric == "avg_regret")]["verdict"].iloc[0] == "higher"
    assert C.differences(values, reference="TS").empty
    # the z of the rule
    loose = C.differences(values, z=0.0)
    assert loose[(loose.method == "ERA") & (loose.metric == "avg_regret")]["verdict"].iloc[0] in ("lower", "higher")


def test_cp_is_paired_over_the_replications_with_intervals_in_both():
    def some(rng, reps):  # intervals in the first 30 replications only
        return np.where(np.arange(reps) < 30, rng.uniform(0.8, 1.0, reps), np.nan)

    def all_(rng, reps):
        return rng.uniform(0.8, 1.0, reps)

    values = _values({"RB": 0.2, "ETA": 0.1}, cp={"RB": all_, "ETA": some})
    row = C.differences(values).query("metric == 'cp'").iloc[0]
    wide = values.pivot(index="rep", columns="method", values="cp")
    assert row["pairs"] == 30 and row["diff"] == pytest.approx((wide["ETA"] - wide["RB"]).dropna().mean())
    lines = C.differences_markdown(C.differences(values))
    assert lines[0].startswith("| setting | method | R(T) − RB | pair R(T) − RB | relative error − RB | CP − RB | pairs")
    assert "| 50 / 30 |" in lines[2] and "**−0.10" in lines[2] and "lower R(T)" in lines[2]


def test_two_runs_pair_by_seed_and_refuse_other_seeds():
    a, b = _values({"RB": 0.2, "ETA": 0.1}), _values({"RB": 0.3, "ETA": 0.12}, seed=1)
    table = C.across(a, b)
    row = table[(table.method == "RB") & (table.metric == "avg_regret")].iloc[0]
    direct = a[a.method == "RB"].set_index("rep")["avg_regret"] - b[b.method == "RB"].set_index("rep")["avg_regret"]
    assert row["diff"] == pytest.approx(direct.mean()) and row["pairs"] == 50
    with pytest.raises(ValueError, match="not paired: replication 0 of A/RB has seed 100 in one and 7"):
        C.across(a, b.assign(seed=7))


def test_compare_a_two_method_user_study_end_to_end(ray_session, tmp_path, capsys):
    """The issue's researcher: RB against a policy of one's own module, then `compare`: the printed
    differences and summary.md's equal those computed from the stored tables directly."""
    out = tmp_path / "mine"
    rc = cli.main("regret", ["--out", str(out), "--reps", "4", "--methods", "RB", "examples.my_policy:Boltzmann",
                             "--set", "T=100", "--set", "T0=40", "--set", "ci_every=25", "--no-progress"])
    assert rc == 0
    capsys.readouterr()
    assert results_main(["compare", str(out)]) == 0
    printed = capsys.readouterr().out
    traj = storage.load(out, "regret")
    final = traj[traj["t"] == traj["T"]].pivot_table(index=["setting", "rep"], columns="method", values="avg_regret")
    ints = storage.load(out, "regret", "intervals")
    assert (ints.t < 100).any()  # intervals before T too: CP must be read at T only
    cp = ints[ints.t == 100].groupby(["setting", "method", "rep"])["covered"].mean().unstack("method")
    checked_cp = 0
    for setting in ("A", "B"):
        d = final.loc[setting]["examples.my_policy:Boltzmann"] - final.loc[setting]["RB"]
        cell = f"{d.mean():+.3f} ± {d.std(ddof=1) / 2:.3f}".replace("-", "−")
        row = next(line for line in printed.splitlines() if line.startswith(f"| {setting} | examples.my_policy:Boltzmann"))
        assert cell in row, (cell, row)
        if setting in cp.index.get_level_values(0):
            c = (cp.loc[setting]["examples.my_policy:Boltzmann"] - cp.loc[setting]["RB"]).dropna()
            if len(c) > 1:
                assert f"{c.mean():+.3f}".replace("-", "−") in row.split("|")[6]
                checked_cp += 1
    assert checked_cp  # Setting A has intervals at T = 100 in both methods' replications
    summary = (out / "summary.md").read_text()
    assert "Paired differences from RB" in summary and "| A | examples.my_policy:Boltzmann |" in summary
    assert "pair R(T)" in summary.split("Paired differences")[0]  # pair regret in every study's table
    # another reference, and what fails
    assert results_main(["compare", str(out), "--reference", "examples.my_policy:Boltzmann"]) == 0
    assert "| A | RB |" in capsys.readouterr().out
    assert results_main(["compare", str(out), "--reference", "TS"]) == 2
    assert "holds 'TS' beside another method" in capsys.readouterr().err
    assert results_main(["compare", str(out), "--against", str(out)]) == 0
    assert "+0.000 ± 0.000" in capsys.readouterr().out
    assert results_main(["verdicts", str(out)]) == 2  # one warm-up: no verdict, and where to look instead
    assert f"python -m study.results compare {out}" in capsys.readouterr().err
