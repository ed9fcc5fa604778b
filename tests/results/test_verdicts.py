"""The verdict table: paired differences per warm-up, a winner only where it wins under both, on
hand-made final values; and results stored before the before_phi column still load."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import study
from study.results import verdicts as V

STORE = Path(__file__).resolve().parents[1] / "data" / "store_9dce6ce"


def _frame(means, reps=40, noise=0.01, seed=0):
    """Final values of methods whose per-replication values are mean + a shared environment effect
    + small noise (so paired differences are far more precise than the means)."""
    rng = np.random.default_rng(seed)
    env = rng.normal(0, 0.2, reps)  # what the methods of one replication share
    rows = []
    for method, m in means.items():
        values = m + env + rng.normal(0, noise, reps)
        rows += [{"setting": "A", "method": method, "rep": r, "avg_regret": v, "avg_pair_regret": v,
                  "rel_error": v, "before_phi": 5.0} for r, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_a_winner_only_where_it_wins_under_both_warmups():
    clear = _frame({"ETA": 0.10, "TS": 0.15, "RB": 0.20})
    flipped = _frame({"ETA": 0.15, "TS": 0.10, "RB": 0.20}, seed=1)
    close = _frame({"ETA": 0.100, "TS": 0.101, "RB": 0.20}, seed=2)
    w = V.winners(clear)
    row = w[(w.metric == "avg_regret") & (w.method == "TS")].iloc[0]
    assert row.leader == "ETA" and abs(row["diff"] - 0.05) < 0.01 and row.diff_se < 0.005
    # the paired SE is that of the differences, not of the means (which carry the shared effect)
    assert row.diff_se < row.se / 5
    assert w[(w.method == "ETA")]["wins"].all()
    holds = V.verdicts(V.combine({"random": V.winners(clear), "greedy": V.winners(_frame({"ETA": 0.1, "TS": 0.2,
                                                                                          "RB": 0.3}, seed=3))}))
    assert holds[0][:2] == ("A", "R(T)") and holds[0][2] == "**ETA** (holds under random and greedy)"
    depends = V.verdicts(V.combine({"random": V.winners(clear), "greedy": V.winners(flipped)}))
    assert depends[0][2] == "depends on the warm-up: ETA under random, TS under greedy"
    unresolved = V.verdicts(V.combine({"random": V.winners(clear), "greedy": V.winners(close)}))
    assert unresolved[0][2].startswith("ETA leads under random and greedy but is not separated by 3 SE under greedy")
    assert holds[0][3].startswith("random: ETA 0.09") and "next TS +0.04" in holds[0][3]


def test_a_setting_run_under_one_warmup_only_gets_no_verdict():
    """The studies of one warm-up are pooled (A and B with the LLM replay); a setting missing under
    a warm-up (the replay run under 'random' only) gets no verdict, the others theirs."""
    replay = _frame({"ETA": 0.10, "TS": 0.20, "RB": 0.30}, seed=4).assign(setting="llm")
    random = V.winners(pd.concat([_frame({"ETA": 0.1, "TS": 0.2, "RB": 0.3}), replay], ignore_index=True))
    greedy = V.winners(_frame({"ETA": 0.1, "TS": 0.2, "RB": 0.3}, seed=5))
    lines = {(s, m): v for s, m, v, _ in V.verdicts(V.combine({"random": random, "greedy": greedy}))}
    assert lines[("A", "R(T)")] == "**ETA** (holds under random and greedy)"
    assert lines[("llm", "R(T)")] == "stored under random only: no verdict"


def test_results_stored_before_the_column_load_with_nulls():
    for name in ("regret", "baselines"):
        if (STORE / name).is_dir():
            frame = study.load(STORE, name)
            assert "before_phi" in frame.columns and frame["before_phi"].isna().all() and len(frame)
            assert V.study_warmup(STORE, name) == "own"  # what they ran
            values = V.final_values(STORE, name)
            assert values["before_phi"].isna().all() and values["avg_regret"].notna().all()
            break
    else:
        raise AssertionError(f"no regret or baselines study in {STORE}")


def test_pair_verdicts_by_sign():
    assert V._pair_verdict("a", "b", {"random": -1, "greedy": -1}) == "a < b"
    assert V._pair_verdict("a", "b", {"random": 1, "greedy": 1}) == "a > b"
    assert V._pair_verdict("a", "b", {"random": 0, "greedy": 0}) == "not separated"
    assert V._pair_verdict("a", "b", {"random": 1, "greedy": -1}) == \
        "reversed by the warm-up: a > b under random, a < b under greedy"
    assert V._pair_verdict("a", "b", {"random": 0, "greedy": -1}) == \
        "a < b under greedy only (not separated under random)"
