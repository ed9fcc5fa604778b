"""study.leaderboard reads what teams have: LMArena battle logs as they are (both kinds of tie, under
a stated and selectable rule), the project's judgments files, counts (a ranker's export), in CSV,
Parquet, JSON and JSON Lines -- the same judgments give the same leaderboard in every format --
with contexts from columns (a category one-hot, numeric features, vectors) or from prompt text, and
a table at any context x."""
import json

import numpy as np
import pandas as pd
import pytest

import study
from study.leaderboard import leaderboard, read_battles

MODELS = ["alpha", "beta", "gamma", "delta"]
STRENGTH = {"alpha": 1.0, "beta": 0.4, "gamma": 0.0, "delta": -0.9}


def battles(rows=400, seed=0, judges=12, categories=("code", "math")):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(rows):
        a, b = rng.choice(MODELS, 2, replace=False)
        category = categories[k % len(categories)]
        shift = 0.8 if (category == "math" and a == "gamma") else 0.0
        p = 1 / (1 + np.exp(STRENGTH[b] - STRENGTH[a] - shift))
        u = rng.random()
        winner = ("tie" if u < 0.1 else "tie (bothbad)" if u < 0.15 else
                  "model_a" if rng.random() < p else "model_b")
        out.append({"model_a": a, "model_b": b, "winner": winner, "judge": f"user{k % judges}",
                    "category": category, "length": float(rng.normal())})
    return pd.DataFrame(out)


def write(frame, path):
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json", ".jsonl"])
def test_every_format_gives_the_same_leaderboard(tmp_path, suffix):
    frame = battles()
    reference = leaderboard(frame).table()
    table = leaderboard(write(frame, tmp_path / f"votes{suffix}")).table()
    pd.testing.assert_frame_equal(table, reference, check_exact=False, rtol=1e-12)
    assert table.attrs["se_method"] == "cluster" and table.attrs["judges"] == 12


def test_the_lmarena_table_is_the_btl_fit_of_its_votes():
    frame = battles(seed=1)
    board = leaderboard(frame, se="sandwich")
    index = {m: k for k, m in enumerate(sorted(MODELS))}
    i, j = frame.model_a.map(index).to_numpy(), frame.model_b.map(index).to_numpy()
    wins = (frame.winner == "model_b").to_numpy(float)
    ties = frame.winner.str.startswith("tie").to_numpy(float)
    theta = study.fit_btl(i, j, np.ones((len(i), 1)), wins, 1, n_items=4, ties=ties)
    np.testing.assert_allclose(board.theta, theta, atol=1e-9)
    expected = study.debias(theta, i, j, np.ones((len(i), 1)), wins, 1, ties=ties, se="sandwich")
    table = board.table().set_index("model").loc[sorted(MODELS)]
    np.testing.assert_allclose(table.se, expected.se[:, 0], rtol=1e-9)
    assert list(board.table().model[:1]) == ["alpha"]
    stats = table[["judgments", "wins", "ties"]]
    assert stats.judgments.sum() == 2 * len(frame) and stats.ties.sum() == 2 * ties.sum()


def test_the_tie_rule_is_stated_and_selectable():
    frame = battles(seed=2)
    bothbad = (frame.winner == "tie (bothbad)").sum()
    ties = frame.winner.str.startswith("tie").sum()
    half = leaderboard(frame).table()
    no_bothbad = leaderboard(frame, tie_rule="drop-bothbad").table()
    decisive = leaderboard(frame, tie_rule="drop").table()
    assert half.attrs["comparisons"] == len(frame) and half.attrs["tie_rule"] == "half"
    assert no_bothbad.attrs["comparisons"] == len(frame) - bothbad
    assert decisive.attrs["comparisons"] == len(frame) - ties and decisive.ties.sum() == 0
    assert f"{bothbad} rows of ties left out by the tie rule 'drop-bothbad'" in no_bothbad.attrs["notes"][0]
    assert not half.attrs["notes"]


def test_the_projects_judgments_files_and_counts_read_back(tmp_path):
    rng = np.random.default_rng(3)
    rows = []
    for q in range(40):
        for _ in range(6):
            a, b = rng.choice(MODELS, 2, replace=False)
            rows.append({"question_id": q, "model_a": a, "model_b": b,
                         "winner": rng.choice(["a", "b", "tie"], p=[0.5, 0.4, 0.1]),
                         "context": json.dumps([1.0, round(float(q % 5) / 4, 2)])})
    frame = pd.DataFrame(rows)
    path = write(frame, tmp_path / "judgments.csv")
    board = leaderboard(path, min_judgments=5)
    assert board.battles.form == "judgments" and board.battles.contexts.shape == (5, 2)
    # the same judgments as counts, one row per (pair, context): the same leaderboard
    frame["wins_a"] = (frame.winner == "a").astype(int)
    frame["wins_b"] = (frame.winner == "b").astype(int)
    frame["ties"] = (frame.winner == "tie").astype(int)
    counts = frame.groupby(["model_a", "model_b", "context"], as_index=False)[["wins_a", "wins_b", "ties"]].sum()
    again = leaderboard(write(counts, tmp_path / "counts.parquet"), min_judgments=5)
    assert again.battles.form == "counts" and again.battles.rows < len(frame)
    np.testing.assert_allclose(again.theta, board.theta, atol=1e-9)
    np.testing.assert_allclose(again.result.phi11, board.result.phi11, rtol=1e-9, atol=1e-14)


def test_contexts_from_a_category_features_and_prompt_text():
    frame = battles(rows=800, seed=4)
    by_category = leaderboard(frame, category="category")
    assert by_category.battles.context_names == ["category=code", "category=math"]
    code, math = by_category.table("code"), by_category.table("math")
    assert code.attrs["context"] == [1.0, 0.0] and math.attrs["context"] == [0.0, 1.0]
    gamma = {name: t.set_index("model").score["gamma"] for name, t in (("code", code), ("math", math))}
    assert gamma["math"] > gamma["code"] + 0.3  # gamma is better at math, as drawn
    # one-hot categories: each category's ranking is that category's own BTL fit
    math_only = frame[frame.category == "math"]
    alone = leaderboard(math_only).table().set_index("model").score
    np.testing.assert_allclose(math.set_index("model").score.loc[alone.index], alone, atol=1e-8)
    mean = by_category.table()
    np.testing.assert_allclose(mean.attrs["context"], [0.5, 0.5])
    by_feature = leaderboard(frame, features=["length"])
    assert by_feature.battles.context_names == ["1", "length"] and by_feature.theta.shape == (4, 2)
    assert by_feature.at([1.0, 2.0]).attrs["context"] == [1.0, 2.0]
    both = leaderboard(frame, category="category", features=["length"])
    assert both.battles.context_names == ["category=code", "category=math", "length"]
    texts = frame.assign(prompt=[f"prompt {k % 30}" for k in range(len(frame))])
    fake = lambda items: np.random.default_rng(len(items)).normal(size=(len(items), 16))  # noqa: E731
    embedded = leaderboard(texts, embed="prompt", dim=3, embedder=fake)
    assert embedded.battles.contexts.shape == (30, 3) and np.all(embedded.battles.contexts[:, 0] == 1)


def test_several_files_merge_by_model_name(tmp_path):
    frame = battles(rows=600, seed=5)
    first = write(frame.iloc[:250], tmp_path / "first.csv")
    second = write(frame.iloc[250:], tmp_path / "second.parquet")
    merged = leaderboard([first, second])
    whole = leaderboard(frame)
    np.testing.assert_allclose(merged.theta, whole.theta, atol=1e-10)
    np.testing.assert_allclose(merged.result.phi11, whole.result.phi11, rtol=1e-9, atol=1e-14)
    assert merged.battles.source == f"{first} + {second}"


def test_elo_scale_and_anchor():
    board = leaderboard(battles(seed=6))
    logit, elo = board.table(), board.table(scale="elo")
    np.testing.assert_allclose(elo.score, 1000 + 400 / np.log(10) * logit.score)
    np.testing.assert_allclose(elo.upper - elo.lower, 400 / np.log(10) * (logit.upper - logit.lower))
    anchored = board.table(scale="elo", anchor=("delta", 1114.0)).set_index("model")
    assert anchored.score["delta"] == pytest.approx(1114.0)
    np.testing.assert_array_equal(anchored.rank_lower.loc[logit.model], logit.rank_lower)
    with pytest.raises(ValueError, match="not on the leaderboard"):
        board.table(scale="elo", anchor=("omega", 1000.0))


def test_anytime_intervals_are_wider_and_said_so():
    board = leaderboard(battles(seed=7), anytime=True, tightest_at=400)
    table = board.table()
    fixed = leaderboard(battles(seed=7)).table()
    ratio = (table.upper - table.lower) / (fixed.upper - fixed.lower)
    np.testing.assert_allclose(ratio, 3.04 / 1.96, rtol=0.01)  # g(eta*) / z at the tightest point
    assert "anytime-valid" in table.attrs["interval"]
    unset = leaderboard(battles(seed=7), anytime=True)
    assert "fix tightest_at" in unset.table().attrs["notes"][-1]


def test_read_battles_keeps_every_row_and_its_judge():
    frame = battles(seed=8)
    b = read_battles(frame)
    assert b.rows == len(frame) and b.judge_count == 12 and b.models == sorted(MODELS)
    assert read_battles(frame, judge=None).judges is None


def test_progress_follows_the_stages_and_the_fit():
    seen = []
    leaderboard(battles(seed=9), progress=lambda *args: seen.append(args))
    stages = [args[0] for args in seen]
    assert stages[:4] == ["read", "aggregate", "check", "fit"] and stages[-1] == "covariance"
    residuals = [args[1] for args in seen if len(args) == 3]
    assert len(residuals) >= 2 and residuals[-1] <= seen[-2][2]  # Newton steps down to the stopping rule
