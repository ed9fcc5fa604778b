"""LMArena's conventions beside the project's (study.leaderboard.published): Rank (UB) from the
marginal CIs, Arena Score with its anchor, the CI as +x/-y, votes, the preliminary mark, --min-votes
(drop with a note; 0 keeps every model), and arena-catalog's JSON."""
import json

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard
from study.leaderboard.__main__ import main
from study.leaderboard.published import drop_below, rank_ub
from test_leaderboard_formats import battles, write


def with_newcomer(votes=12, seed=1):
    frame = battles(rows=3000, seed=seed)
    extra = pd.DataFrame({"model_a": ["newbie"] * votes, "model_b": ["alpha", "beta", "gamma"] * (votes // 3),
                          "winner": ["model_a", "model_a", "tie"] * (votes // 3),
                          "judge": [f"user{k % 12}" for k in range(votes)], "category": "code", "length": 0.0})
    return pd.concat([frame, extra], ignore_index=True)


def test_rank_ub_is_lmarenas_rule_on_the_marginal_intervals():
    rng = np.random.default_rng(5)
    lower = rng.normal(size=30)
    upper = lower + rng.uniform(0.1, 2.0, 30)
    expected = [1 + sum(lower[j] > upper[i] for j in range(30)) for i in range(30)]
    np.testing.assert_array_equal(rank_ub(lower, upper), expected)
    board = leaderboard(with_newcomer(), min_judgments=1)
    table = board.table()
    np.testing.assert_array_equal(table.rank_ub, rank_ub(table.lower, table.upper))
    # the anchor moves the intervals (differences from it), not Rank (UB)
    anchored = board.table(scale="elo", anchor=("beta", 1200.0)).set_index("model").loc[table.model]
    np.testing.assert_array_equal(anchored.rank_ub, table.rank_ub)
    # a 12-vote model: its wide CI reaches above every other's, so its Rank (UB) -- the best rank the
    # marginal CIs allow -- is 1 (the preliminary mark says why)
    newbie = table.set_index("model").loc["newbie"]
    assert newbie.rank_ub == 1 and newbie.upper - newbie.lower > 3 * (table.upper - table.lower).min()


def test_the_arena_board_and_catalog(tmp_path, capsys):
    path = write(with_newcomer(), tmp_path / "votes.csv")
    out = tmp_path / "b"
    assert main([str(path), "--out", str(out), "--no-figures", "--min-judgments", "1", "--anchor", "beta=1200",
                 "--preliminary-below", "1000"]) == 0
    stdout = capsys.readouterr().out
    assert "| Rank (UB) | Rank (simultaneous 95%) | Model | Arena Score | 95% CI | Votes |" in stdout
    arena = (out / "arena.md").read_text()
    assert "marginal CIs" in arena and "anchored at `beta` = 1200" in arena and "fewer than 1,000 votes" in arena
    rows = {line.split(" | ")[2]: line for line in arena.splitlines() if line.startswith("| ") and "†" in line}
    assert list(rows) == ["newbie †"]  # the only model with fewer than 1,000 votes
    table = pd.read_csv(out / "leaderboard.csv").set_index("model")
    assert table.preliminary.to_dict() == {m: m == "newbie" for m in table.index}
    beta = [line for line in arena.splitlines() if "| beta |" in line][0]
    assert "| 1200 | +0/−0 |" in beta
    alpha = table.loc["alpha"]
    assert f"+{alpha.upper - alpha.score:.0f}/−{alpha.score - alpha.lower:.0f}" in arena
    catalog = json.loads((out / "arena.json").read_text())
    assert list(catalog) == ["full"] and set(catalog["full"]) == set(table.index)
    assert catalog["full"]["alpha"] == pytest.approx({"rating": alpha.score, "rating_q025": alpha.lower,
                                                      "rating_q975": alpha.upper})


def test_min_votes_drops_with_a_note_and_zero_keeps_all(tmp_path, capsys):
    path = write(with_newcomer(votes=6), tmp_path / "votes.csv")
    # the default refuses the 6-vote model; --min-votes 10 drops it, --min-votes 0 keeps it
    assert main([str(path), "--out", str(tmp_path / "a"), "--no-figures"]) == 2
    assert "`newbie`: 6 judgments" in capsys.readouterr().err
    assert main([str(path), "--out", str(tmp_path / "b"), "--no-figures", "--min-votes", "10"]) == 0
    stdout = capsys.readouterr().out
    assert "Note: 1 model with fewer than 10 votes left out (--min-votes), with their 6 rows: `newbie` (6)." in stdout
    assert "newbie" not in pd.read_csv(tmp_path / "b" / "leaderboard.csv").model.tolist()
    assert main([str(path), "--out", str(tmp_path / "c"), "--no-figures", "--min-votes", "0"]) == 0
    capsys.readouterr()
    assert "newbie" in pd.read_csv(tmp_path / "c" / "leaderboard.csv").model.tolist()
    assert main([str(path), "--out", str(tmp_path / "d"), "--min-votes", "-1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_drop_below_keeps_the_other_rows_as_they_were():
    board = leaderboard(with_newcomer(votes=6), min_votes=10)
    whole = leaderboard(battles(rows=3000, seed=1))
    assert board.models == whole.models
    np.testing.assert_allclose(board.theta, whole.theta, atol=1e-10)
    with pytest.raises(ValueError, match="every model has fewer than"):
        drop_below(board.battles, 10**9)
