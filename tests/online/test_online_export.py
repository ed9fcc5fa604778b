"""Online and offline meet: a store's told rows export as a DataFrame, Parquet, CSV or JSON Lines
that ``study.leaderboard`` reads back (the same counts, the same fit as the rows themselves), and a
ranker can start from a file of earlier judgments (its theta(0) their fit; its clock, asks and
likelihood its own)."""
import json

import numpy as np
import pandas as pd
import pytest

import study
from study.leaderboard import leaderboard
from study.online import Ranker, export_told, ranker_from_judgments, told_rows

SKILL = np.array([1.0, 0.3, -0.2, -1.1])


def play(ranker, rng, asks=120):
    for _ in range(asks):
        ticket = ranker.ask([1.0, float(rng.normal(0, 0.5))])
        p = 1 / (1 + np.exp(SKILL[ticket.major] - SKILL[ticket.other]))
        u = rng.random(ranker.config.M)
        ranker.tell(ticket, wins=int((u < p * 0.9).sum()), m=ranker.config.M, ties=int((u > 0.9).sum()))


def test_told_rows_export_and_read_back(tmp_path):
    rng = np.random.default_rng(0)
    with Ranker(tmp_path / "r.sqlite", items=["w", "x", "y", "z"], dim=2, T=500, M=3, seed=4) as ranker:
        play(ranker, rng)
        frame = told_rows(ranker)
        rows = ranker._read().rows.arrays()
    assert len(frame) == 120 and list(frame.seq) == list(range(1, 121))
    assert (frame.wins_a + frame.wins_b + frame.ties == frame.m).all() and (frame.m == 3).all()
    # the counts are the estimator's rows: j = model_b's score is wins_b + ties / 2
    np.testing.assert_array_equal(frame.wins_b + frame.ties / 2, rows[3])
    np.testing.assert_array_equal(np.vstack(frame.context), rows[2])
    pd.testing.assert_frame_equal(told_rows(tmp_path / "r.sqlite"), frame)  # by path, read-only
    index = {name: k for k, name in enumerate(["w", "x", "y", "z"])}
    i, j = frame.model_a.map(index).to_numpy(), frame.model_b.map(index).to_numpy()
    theta = study.fit_btl(i, j, np.vstack(frame.context), frame.wins_b.to_numpy(float), frame.m.to_numpy(float),
                          n_items=4, ties=frame.ties.to_numpy(float))
    for suffix in (".parquet", ".csv", ".jsonl"):
        path = export_told(tmp_path / "r.sqlite", tmp_path / f"told{suffix}")
        board = leaderboard(path, min_judgments=1)
        assert board.battles.form == "counts" and board.battles.context_names == ["context[0]", "context[1]"]
        order = [board.models.index(name) for name in ["w", "x", "y", "z"]]
        np.testing.assert_allclose(board.theta[order], theta, atol=1e-8)
    assert json.loads(pd.read_csv(tmp_path / "told.csv").context[0])[0] == 1.0
    with pytest.raises(ValueError, match="export to .parquet, .csv or .jsonl"):
        export_told(tmp_path / "r.sqlite", tmp_path / "told.xlsx")


def test_a_ranker_starts_from_earlier_judgments(tmp_path):
    rng = np.random.default_rng(1)
    names = ["w", "x", "y", "z"]
    rows = []
    for _ in range(400):
        a, b = rng.choice(4, 2, replace=False)
        p = 1 / (1 + np.exp(SKILL[b] - SKILL[a]))
        rows.append({"model_a": names[a], "model_b": names[b], "winner": "model_a" if rng.random() < p else "model_b"})
    earlier = pd.DataFrame(rows)
    earlier.to_parquet(tmp_path / "earlier.parquet")
    fitted = leaderboard(earlier, se="model")
    ranker = ranker_from_judgments(tmp_path / "r.sqlite", tmp_path / "earlier.parquet", policy="ETA", T=200, seed=2)
    with ranker:
        assert ranker.config.labels == names and ranker.n_told == 0 and ranker.n_asked == 0
        np.testing.assert_allclose(ranker.theta, fitted.theta, atol=1e-12)
        ticket = ranker.ask([1.0])
        assert ticket.id == 1 and ticket.major_name == "w"  # the earlier leader, exploited at t = 1
    with Ranker(tmp_path / "r.sqlite") as again:  # reopens without the file: theta(0) is stored
        np.testing.assert_allclose(np.asarray(again.config.theta0), fitted.theta, atol=1e-12)
    with pytest.raises(ValueError, match="a store exists already"):
        ranker_from_judgments(tmp_path / "r.sqlite", earlier)
    with pytest.raises(ValueError, match="items comes from the earlier judgments"):
        ranker_from_judgments(tmp_path / "s.sqlite", earlier, items=names)
    lone = pd.concat([earlier, pd.DataFrame([{"model_a": "w", "model_b": "wx", "winner": "model_a"}])])
    with pytest.raises(ValueError, match="`wx`: 1 judgment; did you mean"):
        ranker_from_judgments(tmp_path / "t.sqlite", lone)
    assert not (tmp_path / "t.sqlite").exists()
