"""Categories done right (study.leaderboard.categories): a category's board is its rows' own fit --
its counts, its separability, its models -- and ``--by COLUMN`` writes every category's board and
the whole log's, with an overview, in one pass; a category that cannot be ranked is refused alone."""
import json

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard
from study.leaderboard.__main__ import main
from study.leaderboard.categories import one_category
from test_leaderboard_formats import battles, write


def counts(frame, model):
    mine = frame[(frame.model_a == model) | (frame.model_b == model)]
    won = ((mine.model_a == model) & (mine.winner == "model_a")) | ((mine.model_b == model) & (mine.winner == "model_b"))
    ties = mine.winner.str.startswith("tie")
    return len(mine), int(won.sum()), int(ties.sum())


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_counts_are_the_categorys_under_at(tmp_path, capsys):
    frame = battles(rows=800, seed=3)
    board = leaderboard(frame, category="category", se="sandwich")
    api = board.table("math").set_index("model")
    path = write(frame, tmp_path / "votes.csv")
    code, _, err = run(capsys, path, "--out", tmp_path / "o", "--category", "category", "--at", "math", "--no-figures")
    assert code == 0, err
    cli = pd.read_csv(tmp_path / "o" / "leaderboard.csv").set_index("model")
    math = frame[frame.category == "math"]
    for model in api.index:
        expected = counts(math, model)
        assert (api.judgments[model], api.wins[model], api.ties[model]) == expected
        assert (cli.judgments[model], cli.wins[model], cli.ties[model]) == expected
        assert api.win_rate[model] == pytest.approx((expected[1] + expected[2] / 2) / expected[0])
    # the whole-log counts at the mean context, as before
    assert board.table().judgments.sum() == 2 * len(frame)


def test_a_categorys_board_is_its_rows_own_fit_with_the_joint_fits_numbers():
    frame = battles(rows=800, seed=4)
    joint = leaderboard(frame, category="category", se="sandwich").table("code").set_index("model")
    alone_battles = one_category(leaderboard(frame, category="category").battles, "code")
    alone = leaderboard(alone_battles, se="sandwich").table().set_index("model").loc[joint.index]
    np.testing.assert_allclose(alone.score, joint.score, atol=1e-8)
    np.testing.assert_allclose(alone.se, joint.se, rtol=1e-8)


def separable_in_math(seed=5):
    """gamma never loses in math (it wins or the row is dropped), and a newcomer judged only on math."""
    frame = battles(rows=1200, seed=seed)
    math_gamma = (frame.category == "math") & ((frame.model_a == "gamma") | (frame.model_b == "gamma"))
    frame.loc[math_gamma, "winner"] = np.where(frame.model_a[math_gamma] == "gamma", "model_a", "model_b")
    rng = np.random.default_rng(seed)
    newbie = pd.DataFrame({"model_a": "newbie", "model_b": rng.choice(["alpha", "beta", "delta"], 60),
                           "winner": rng.choice(["model_a", "model_b", "tie"], 60), "judge": "user1",
                           "category": "math", "length": 0.0})
    newbie["judge"] = [f"user{k % 12}" for k in range(60)]
    return pd.concat([frame, newbie], ignore_index=True)


def test_another_categorys_separability_does_not_block_a_board(tmp_path, capsys):
    path = write(separable_in_math(), tmp_path / "votes.csv")
    code, out, err = run(capsys, path, "--out", tmp_path / "code", "--category", "category", "--at", "code",
                         "--no-figures")
    assert code == 0, err
    assert "Note: `newbie`: no battle at category=code, so not identified there; left out of this board." in out
    assert "newbie" not in pd.read_csv(tmp_path / "code" / "leaderboard.csv").model.tolist()
    code, out, err = run(capsys, path, "--out", tmp_path / "math", "--category", "category", "--at", "math")
    assert code == 2 and "the data are separable: `gamma` never lost against the rest" in err


def test_a_model_without_battles_in_a_category_is_not_identified_there_not_separable(tmp_path, capsys):
    frame = battles(rows=1200, seed=6)
    rng = np.random.default_rng(6)
    newbie = pd.DataFrame({"model_a": "newbie", "model_b": rng.choice(["alpha", "beta", "delta"], 60),
                           "winner": rng.choice(["model_a", "model_b", "tie"], 60),
                           "judge": [f"user{k % 12}" for k in range(60)], "category": "math", "length": 0.0})
    path = write(pd.concat([frame, newbie], ignore_index=True), tmp_path / "votes.csv")
    code, out, err = run(capsys, path, "--out", tmp_path / "o", "--category", "category")
    assert code == 2 and err.count("\n") == 1
    assert "`newbie` has no battle at category=code, so its score is not identified there" in err
    assert "separable" not in err


def test_by_writes_every_category_and_refuses_one_alone(tmp_path, capsys):
    path = write(separable_in_math(), tmp_path / "votes.parquet")
    out = tmp_path / "by"
    code, stdout, err = run(capsys, path, "--out", out, "--by", "category", "--no-figures")
    assert code == 0, err
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["arena.json", "arena.md", "code/arena.md", "code/leaderboard.csv", "code/leaderboard.json",
                       "code/leaderboard.md", "leaderboard.csv", "leaderboard.json", "leaderboard.md", "overview.md"]
    overview = (out / "overview.md").read_text()
    assert stdout.startswith(overview)
    math_line = [line for line in overview.splitlines() if line.startswith("| math |")][0]
    assert "refused:" in math_line and "`gamma` never lost against the rest" in math_line
    assert "| code | [code/leaderboard.md](code/leaderboard.md) | 4 |" in overview
    catalog = json.loads((out / "arena.json").read_text())
    assert sorted(catalog) == ["code", "full"] and "newbie" in catalog["full"] and "newbie" not in catalog["code"]
    code_board = pd.read_csv(out / "code" / "leaderboard.csv").set_index("model")
    frame = pd.read_parquet(path)
    assert code_board.judgments["alpha"] == counts(frame[frame.category == "code"], "alpha")[0]
    assert run(capsys, path, "--out", tmp_path / "x", "--by", "category", "--category", "category")[0] == 2


def test_by_keeps_every_file_inside_out_whatever_the_category_names(tmp_path, capsys):
    frame = battles(rows=1600, seed=7, judges=37, categories=("../../escape", "(all)", "Math", "math "))
    path = write(frame, tmp_path / "votes.csv")
    out = tmp_path / "nested" / "by"
    code, stdout, err = run(capsys, path, "--out", out, "--by", "category", "--no-figures")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nested", "votes.csv"]  # nothing escaped, no leftovers
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(folders) == 4 and len({f.lower() for f in folders}) == 4
    catalog = json.loads((out / "arena.json").read_text())
    assert sorted(catalog) == sorted(["full", "../../escape", "(all)", "Math", "math "])
