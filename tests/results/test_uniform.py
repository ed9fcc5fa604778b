"""Time-uniform coverage from the stored intervals (study.results.uniform): crafted frames with
known answers, parts stored before the confidence sequences existed (nulls), and a real study's
summary columns and figure."""
import numpy as np
import pandas as pd

from study import cli
from study.results import uniform
from study.results.summary import summary_table


def _frame(covered, cs_covered, times=(10, 20, 30)):
    """covered[rep][coord] = list over times (coordinates are (item, 0))."""
    rows = []
    for rep, (ci_rep, cs_rep) in enumerate(zip(covered, cs_covered)):
        for item, (ci_seq, cs_seq) in enumerate(zip(ci_rep, cs_rep)):
            for t, c, s in zip(times, ci_seq, cs_seq):
                rows.append({"setting": "A", "method": "RB", "M": 20, "rep": rep, "item": item, "dim": 0, "t": t,
                             "covered": c, "cs_covered": s})
    return pd.DataFrame(rows)


def test_time_uniform_coverage_of_crafted_frames():
    # rep 0: coordinate 0's CI misses at t = 20 only, its CS never; coordinate 1 covered throughout
    # rep 1: coordinate 0 covered throughout; coordinate 1's CI and CS miss at t = 10
    frame = _frame([[[1, 0, 1], [1, 1, 1]], [[1, 1, 1], [0, 1, 1]]],
                   [[[1, 1, 1], [1, 1, 1]], [[1, 1, 1], [0, 1, 1]]])
    per = uniform.per_replication(frame)
    assert len(per) == 4 and (per["looks"] == 3).all()
    coords = uniform.coordinate_table(per).set_index("item")
    assert coords.loc[0, "tu_ci"] == 0.5 and coords.loc[0, "tu_cs"] == 1.0
    assert coords.loc[1, "tu_ci"] == 0.5 and coords.loc[1, "tu_cs"] == 0.5
    assert coords.loc[0, "tu_ci_se"] == np.sqrt(0.25 / 2)
    cell = uniform.cell_table(per).iloc[0]
    assert cell["tu_ci"] == 0.5 and cell["tu_cs"] == 0.75 and cell["tu_reps"] == 2
    assert cell["tu_cs_se"] == np.std([1.0, 0.5], ddof=1) / np.sqrt(2) and cell["tu_ci_min"] == 0.5
    # from t = 20 on, rep 1's misses at t = 10 no longer count
    late = uniform.cell_table(uniform.per_replication(frame, start=20)).iloc[0]
    assert late["tu_ci"] == 0.75 and late["tu_cs"] == 1.0


def test_parts_without_sequences_give_nan_not_a_miss():
    frame = _frame([[[1, 1, 1]]], [[[1, 1, 1]]])
    frame["cs_covered"] = pd.Series([None] * len(frame), dtype=object)
    cell = uniform.cell_table(uniform.per_replication(frame)).iloc[0]
    assert cell["tu_ci"] == 1.0 and np.isnan(cell["tu_cs"])


def test_real_study_summary_and_figure(ray_session, tmp_path):
    rc = cli.main("coverage", ["--out", str(tmp_path), "--reps", "3", "--settings", "A", "--set", "T=150",
                               "--set", "T0=60", "--set", "ci_every=10", "--no-progress"])
    assert rc == 0
    row = summary_table(tmp_path).iloc[0]
    assert 0 <= row["tu_ci"] <= row["tu_cs"] <= 1 and row["tu_reps"] == 3
    assert abs(row["cs_ci_ratio_T"] - 1.5486) < 1e-3
    md = (tmp_path / "summary.md").read_text()
    assert "uniform CS" in md and "CS/CI" in md
    assert (tmp_path / "figures" / "uniform_A.png").stat().st_size > 10_000
