"""The figures: the predicted win-probability and battle-count matrices equal their definitions,
the rank figure stays one row per model at 100 models, and model names never reach matplotlib's
mathtext parser (a name such as ``$\\foo$`` is drawn as written)."""
import io

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard
from study.leaderboard import figures


def votes(n=6, rows=3000, seed=0, names=None):
    rng = np.random.default_rng(seed)
    names = names or [f"m{k}" for k in range(n)]
    skill = np.linspace(1, -1, n)
    a = rng.integers(0, n, rows)
    b = (a + rng.integers(1, n, rows)) % n
    won = rng.random(rows) < 1 / (1 + np.exp(-(skill[a] - skill[b])))
    return pd.DataFrame({"model_a": np.array(names, object)[a], "model_b": np.array(names, object)[b],
                         "winner": np.where(won, "model_a", "model_b")})


def test_battle_counts_and_win_probabilities_are_their_definitions(monkeypatch):
    frame = votes()
    board = leaderboard(frame)
    counts = figures.battle_counts(board)
    expected = pd.crosstab(frame.model_a, frame.model_b).reindex(index=board.models, columns=board.models, fill_value=0)
    np.testing.assert_array_equal(counts, expected.to_numpy() + expected.to_numpy().T)
    seen = {}
    monkeypatch.setattr(figures, "_matrix_figure",
                        lambda table, matrix, title, **kw: seen.setdefault(title[:9], matrix))
    for scale in ("logit", "elo"):
        table = board.table(scale=scale)
        seen.clear()
        figures.win_probability_figure(table)
        s = board.table()["score"].to_numpy()
        want = 1 / (1 + np.exp(s[None, :] - s[:, None]))
        np.fill_diagonal(want, np.nan)
        np.testing.assert_allclose(seen["Predicted"], want, rtol=1e-12)


def test_names_with_dollars_are_drawn_as_text(monkeypatch):
    import matplotlib.mathtext
    names = ["$\\foo$", "a$b$c", "plain", "x_{1}^2", "$$", "q"]
    board = leaderboard(votes(names=names, seed=1))
    table = board.table()

    parsed, parse = [], matplotlib.mathtext.MathTextParser.parse

    def record(self, text, *args, **kwargs):  # the colour bar's 10^k ticks are mathematics; names never
        parsed.append(text)
        return parse(self, text, *args, **kwargs)
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", record)
    drawn = figures.draw(board, table)
    assert parsed and not [text for text in parsed if "foo" in text or "b$c" in text or "$$" in text], parsed
    assert sorted(drawn) == ["battle_counts.png", "ranks.png", "scores.png", "win_probabilities.png", "win_rates.png"]
    assert figures.label("$\\foo$") == "\\$\\foo\\$"


def test_the_rank_figure_is_one_row_per_model_at_100_models():
    from PIL import Image
    board = leaderboard(votes(n=100, rows=40_000, seed=2), draws=500)
    png = figures.rank_figure(board.table())
    width, height = Image.open(io.BytesIO(png)).size
    assert width < 1000 and 1500 < height < 2200  # 100 rows of ~16 px, not a 3168-px-wide diagram
    assert figures.DIAGRAM_MAX_MODELS <= 12
