"""Anchored ratings (``--anchor MODEL=R``, LMArena's convention): R_i = R + c (s_i - s_a), c = 400/ln 10,
so the error of R_i is that of the difference s_i - s_a -- zero for the anchor itself -- not that of
the sum-to-zero score s_i.

The coverage is checked in a seeded simulation, with model-based SEs on Bernoulli comparisons and
with the sandwich on comparisons 20% of which are ties: 1,500 boards of 6 models (every pair
compared 60 times), each rating's 95% interval against its true anchored value R + c (theta_i - theta_a), 7,500
intervals of the five other models pooled.  At a true 0.95 the pooled share has SE about 0.0025
(less than 0.003 with the within-board correlation), so it must be at least 0.94 -- a method with a
true coverage of 0.93 passes that with probability below 0.001.  The intervals the leaderboard gave
before (the anchored estimate -/+ the sum-to-zero half width) fail the same test."""
import json

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from study.leaderboard import leaderboard
from study.leaderboard.__main__ import main
from test_leaderboard_formats import battles, write
from test_leaderboard_ranks import simulated

ELO = 400 / np.log(10)
BOARDS = 1500


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def with_ties(truth, rng, per_pair=60, tie_share=0.2):
    """Every pair compared ``per_pair`` times, a share of the comparisons tied; a tie is half a win,
    so that j's expected score is the BTL probability p, the decisive ones are won by j with
    probability (p - tie_share / 2) / (1 - tie_share) (ties with no regard to p would move the
    scores' target toward 0)."""
    battles = simulated(truth, rng, per_pair)
    battles.ties = rng.binomial(per_pair, tie_share, len(battles.m)).astype(float)
    p = 1 / (1 + np.exp(-(truth[battles.j] - truth[battles.i])))
    decisive = (p - tie_share / 2) / (1 - tie_share)
    battles.wins = rng.binomial((battles.m - battles.ties).astype(int), decisive).astype(float)
    return battles


@pytest.mark.parametrize("se, design", [("model", simulated), ("sandwich", with_ties)])
def test_anchored_intervals_cover_as_stated_and_the_anchor_has_zero_width(se, design):
    truth = np.array([0.6, 0.3, 0.0, 0.0, -0.2, -0.7])
    anchor, rating = 3, 1200.0
    true_rating = rating + ELO * (truth - truth[anchor])
    rng = np.random.default_rng(42)
    covered, old_covered = [], []
    for rep in range(BOARDS):
        board = leaderboard(design(truth, rng), se=se, draws=100, seed=rep)
        table = board.table(scale="elo", anchor=(f"m{anchor}", rating)).set_index("model").loc[board.models]
        lower, upper, score = table.lower.to_numpy(), table.upper.to_numpy(), table.score.to_numpy()
        assert lower[anchor] == upper[anchor] == score[anchor] == rating and table.se.iloc[anchor] == 0.0
        others = np.arange(6) != anchor
        covered.append(((lower <= true_rating) & (true_rating <= upper))[others])
        root = board.covariance_root(board.default_context)  # the sum-to-zero half width, as before
        half = board.half_width() * ELO * np.sqrt((root ** 2).sum(axis=0))
        old_covered.append((np.abs(score - true_rating) <= half)[others])
    assert np.mean(covered) >= 0.94, np.mean(covered)
    assert np.mean(old_covered) < 0.94, np.mean(old_covered)  # the test can fail: the former intervals do


def test_the_anchored_se_is_that_of_the_difference():
    board = leaderboard(battles(seed=6))
    table = board.table(scale="elo", anchor=("delta", 1114.0)).set_index("model")
    root = board.covariance_root(board.default_context)
    a = board.models.index("delta")
    for k, name in enumerate(board.models):
        diff = root[:, k] - root[:, a]
        assert table.se[name] == pytest.approx(ELO * np.sqrt(diff @ diff), rel=1e-12, abs=1e-12)
    with pytest.raises(ValueError, match="elo scale"):
        board.table(anchor=("delta", 1114.0))


def test_the_anchor_is_written_in_every_output(tmp_path, capsys):
    path = write(battles(rows=600, seed=2), tmp_path / "votes.csv")
    assert main([str(path), "--out", str(tmp_path / "b"), "--anchor", "delta=1100", "--no-figures"]) == 0
    stdout = capsys.readouterr().out
    assert "Anchored: `delta` = 1100; each rating's interval is that of its difference from `delta`" in stdout
    assert "Elo-style scale" in stdout  # --anchor implies the elo scale
    csv = pd.read_csv(tmp_path / "b" / "leaderboard.csv")
    assert (csv.anchor == "delta=1100").all()
    row = csv.set_index("model").loc["delta"]
    assert row.score == row.lower == row.upper == 1100
    meta = json.loads((tmp_path / "b" / "leaderboard.json").read_text())["leaderboard"]
    assert meta["anchor"] == {"model": "delta", "rating": 1100.0}
    assert "Anchored: `delta` = 1100" in (tmp_path / "b" / "leaderboard.md").read_text()
    assert main([str(path), "--out", str(tmp_path / "c"), "--anchor", "delta=1100", "--scale", "logit"]) == 2
    assert "cannot be used with --scale logit" in capsys.readouterr().err
