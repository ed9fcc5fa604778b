"""--style follows the board's rows: under --min-votes (models and their rows dropped), --aliases
(names merged), --at CATEGORY and --by (a category's rows), the style fit is that of exactly the
board's rows, checked against the independent GLM of test_leaderboard_style on a frame filtered by
hand."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard, read_battles
from study.leaderboard.__main__ import main
from study.leaderboard.files import LeaderboardInputError
from study.leaderboard.style import StyleFeatures, fit_style, read_style

from test_leaderboard_style import independent_glm, style_log


def run_style(tmp_path, capsys, frame, *options, folder=""):
    path = tmp_path / "votes.parquet"
    frame.to_parquet(path)
    out = tmp_path / "board"
    code = main([str(path), "--out", str(out), "--style", "--no-figures", "--quiet", *options])
    assert code == 0, capsys.readouterr().err
    section = json.loads((out / folder / "style.json").read_text())["style_control"]
    return out, section


def coefficients(section):
    return np.array([c["coefficient"] for c in section["coefficients"]])


def scores(section):
    return {r["model"]: r["score"] for r in section["models"]}


def test_min_votes_drops_the_same_rows_from_the_style_fit(tmp_path, capsys):
    frame = style_log(rows=2000, seed=11)
    rare = style_log(rows=30, seed=12).assign(model_a="rare")  # 30 votes: under --min-votes 100
    both = pd.concat([rare.iloc[:15], frame, rare.iloc[15:]], ignore_index=True)  # rows before and after
    _, section = run_style(tmp_path, capsys, both, "--min-votes", "100")
    theta, coef, _ = independent_glm(frame)
    np.testing.assert_allclose(coefficients(section), coef, rtol=1e-6, atol=1e-9)
    got = scores(section)
    assert "rare" not in got
    models = sorted(set(frame.model_a) | set(frame.model_b))
    np.testing.assert_allclose([got[m] for m in models], theta, rtol=1e-6, atol=1e-9)


def test_aliases_merge_names_and_the_style_fit_follows(tmp_path, capsys):
    frame = style_log(rows=2000, seed=13)
    dirty = frame.copy()
    odd = np.arange(len(frame)) % 2 == 1
    dirty.loc[odd & (frame.model_a == "m01"), "model_a"] = "M01 (old name)"
    dirty.loc[odd & (frame.model_b == "m02"), "model_b"] = "m-02"
    aliases = tmp_path / "aliases.json"
    aliases.write_text(json.dumps({"M01 (old name)": "m01", "m-02": "m02"}))
    _, section = run_style(tmp_path, capsys, dirty, "--aliases", str(aliases))
    theta, coef, _ = independent_glm(frame)  # the clean names
    np.testing.assert_allclose(coefficients(section), coef, rtol=1e-6, atol=1e-9)
    got = scores(section)
    assert set(got) == set(frame.model_a) | set(frame.model_b)
    np.testing.assert_allclose([got[m] for m in sorted(got)], theta, rtol=1e-6, atol=1e-9)


def with_categories(frame, seed):
    labels = np.random.default_rng(seed).choice(["coding", "math"], len(frame), p=[0.6, 0.4])
    return frame.assign(category=labels)


def test_at_category_fits_style_on_that_categorys_rows(tmp_path, capsys):
    frame = with_categories(style_log(rows=3000, seed=14), 15)
    _, section = run_style(tmp_path, capsys, frame, "--category", "category", "--at", "coding")
    coding = frame[frame.category == "coding"].reset_index(drop=True)
    theta, coef, _ = independent_glm(coding)
    np.testing.assert_allclose(coefficients(section), coef, rtol=1e-6, atol=1e-9)
    got = scores(section)
    np.testing.assert_allclose([got[m] for m in sorted(got)], theta, rtol=1e-6, atol=1e-9)


def test_by_gives_every_board_its_own_style_fit(tmp_path, capsys):
    frame = with_categories(style_log(rows=3000, seed=16), 17)
    out, whole = run_style(tmp_path, capsys, frame, "--by", "category", "--audit")
    np.testing.assert_allclose(coefficients(whole), independent_glm(frame)[1], rtol=1e-6, atol=1e-9)
    for label in ("coding", "math"):
        section = json.loads((out / label / "style.json").read_text())["style_control"]
        own = frame[frame.category == label].reset_index(drop=True)
        np.testing.assert_allclose(coefficients(section), independent_glm(own)[1], rtol=1e-6, atol=1e-9)
        written = sorted(p.name for p in (out / label).iterdir())
        assert written == ["arena.md", "audit.json", "leaderboard.csv", "leaderboard.json", "leaderboard.md",
                           "style.csv", "style.json", "style.md"]
        text = (out / label / "leaderboard.md").read_text()
        assert "## Style control" in text and "## Board audit" in text


def test_features_of_other_rows_are_refused_and_hand_made_ones_line_up_by_order():
    frame = style_log(rows=1500, seed=18)
    features = read_style(frame)
    board = leaderboard(frame)
    by_ids = fit_style(board.battles, features, se="model")
    hand = StyleFeatures(raw=features.raw, names=features.names)  # one row per battle, in their order
    battles = read_battles(frame)
    battles.row_ids = None
    np.testing.assert_allclose(fit_style(battles, hand, se="model").coef, by_ids.coef, rtol=1e-12)
    with pytest.raises(LeaderboardInputError, match="read from other files"):
        fit_style(battles, features, se="model")  # no row ids: cannot tell which rows are which
    with pytest.raises(LeaderboardInputError, match="rows of style features for"):
        fit_style(battles, StyleFeatures(raw=features.raw[1:], names=features.names), se="model")
