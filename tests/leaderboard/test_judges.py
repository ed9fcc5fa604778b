"""The judge report: Wilson intervals and Krippendorff's alpha against independent computations,
the two score tests by hand, the side of a vote read the right way round, the flags on planted
panels (fixed seeds), and bad input refused in one line."""
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.judges import simulate_panel
from study.leaderboard.__main__ import main
from study.leaderboard.judges import judge_report, krippendorff_alpha, null_pvalues, wilson


@pytest.mark.parametrize("k, n", [(0, 10), (7, 20), (55, 100), (300, 301)])
def test_wilson_matches_scipy(k, n):
    lower, upper = wilson(k, n, 0.9)
    ci = stats.binomtest(k, n).proportion_ci(0.9, method="wilson")
    assert lower == pytest.approx(ci.low, abs=1e-12) and upper == pytest.approx(ci.high, abs=1e-12)


def test_alpha_of_krippendorffs_published_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 observers x 12 units
    # nominal example: alpha = 0.743 (None: no value)
    A = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    B = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    C = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    D = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    units = [[v - 1 for v in column if v is not None] for column in zip(A, B, C, D)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)


def _alpha_by_pairs(units):
    """alpha = 1 - D_o / D_e with both disagreements counted pair by pair (no coincidence matrix)."""
    units = [u for u in units if len(u) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    observed = sum(sum(x != y for x, y in itertools.permutations(u, 2)) / (len(u) - 1) for u in units) / n
    expected = sum(x != y for x, y in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - observed / expected


def test_alpha_equals_the_pairwise_definition_on_random_units():
    rng = np.random.default_rng(3)
    for _ in range(20):
        units = [list(rng.integers(0, 4, rng.integers(1, 5))) for _ in range(int(rng.integers(3, 15)))]
        if len({v for u in units if len(u) > 1 for v in u}) < 2:
            continue
        assert krippendorff_alpha(units) == pytest.approx(_alpha_by_pairs(units), abs=1e-12)
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1]]))  # no variation: undefined


def test_the_two_score_tests_by_hand():
    scores = {"x": 0.7, "y": 0.0, "z": -0.4}
    rows = [("x", "y", "model_a", "a"), ("y", "x", "model_a", "b"), ("x", "z", "model_b", "a"),
            ("z", "y", "model_a", "b"), ("y", "z", "model_b", "b"), ("x", "z", "tie", "a")] * 5
    frame = pd.DataFrame(rows, columns=["model_a", "model_b", "winner", "side"]).assign(judge="j")
    report = judge_report(frame, scores=scores, min_decisive=1)
    resid = var = score = info = 0.0
    for a, b, winner, side in rows:
        if winner.startswith("tie"):
            continue
        left, right = (a, b) if side == "a" else (b, a)
        p = 1 / (1 + math.exp(scores[right] - scores[left]))
        y = 1.0 if (winner == "model_a") == (side == "a") else 0.0
        eta = math.log(p / (1 - p))
        resid, var, score, info = resid + y - p, var + p * (1 - p), score + (y - p) * eta, info + p * (1 - p) * eta ** 2
    row = report.judges.iloc[0]
    assert row["side_z"] == pytest.approx(resid / math.sqrt(var), rel=1e-12)
    assert row["misfit_z"] == pytest.approx(score / math.sqrt(info), rel=1e-12)
    assert row["decisive"] == 25 and row["tie_share"] == pytest.approx(1 / 6)


@pytest.mark.parametrize("how", ["left", "side", "none"])
def test_a_judge_who_always_picks_the_left_response_has_left_share_one(how):
    rng = np.random.default_rng(0)
    a = rng.choice(["m1", "m2", "m3"], 200)
    b = np.where(a == "m1", "m2", np.where(a == "m2", "m3", "m1"))
    b_left = rng.random(200) < 0.5 if how != "none" else np.zeros(200, bool)
    frame = pd.DataFrame({"model_a": a, "model_b": b, "judge": "j",
                          "winner": np.where(b_left, "model_b", "model_a")})  # the left one, whichever it is
    if how == "left":
        frame["left"] = np.where(b_left, b, a)
    elif how == "side":
        frame["side"] = np.where(b_left, "b", "a")
    report = judge_report(frame, scores={"m1": 0.0, "m2": 0.0, "m3": 0.0})
    assert report.judges["left_share"].iloc[0] == 1.0 and report.flagged == ["j"]
    assert report.judges["reason"].iloc[0] == "left bias"
    assert report.overall["left_share"] == 1.0


def test_agreement_per_judge_and_times_by_hand():
    frame = pd.DataFrame({
        "model_a": ["p", "q", "p", "p", "q", "p"], "model_b": ["q", "p", "q", "r", "r", "r"],
        # q1 (p, q): j1 says p, j2 says p (model_b = p), j3 says q -> pairs: j1-j2 agree, j1-j3, j2-j3 not
        "winner": ["model_a", "model_b", "model_b", "tie", "tie", "tie (bothbad)"],
        "judge": ["j1", "j2", "j3", "j1", "j2", "j3"], "question_id": ["q1", "q1", "q1", "q2", "q3", "q4"],
        "tstamp": [0.0, 5.0, 9.0, 10.0, 25.0, 30.0]})
    report = judge_report(frame, scores={"p": 0.0, "q": 0.0, "r": 0.0})
    judges = report.judges.set_index("judge")
    assert report.agreement["battles"] == 1 and report.agreement["pairs"] == 3
    assert report.agreement["agree_share"] == pytest.approx(1 / 3)
    assert judges.loc["j1", "agree_share"] == 0.5 and judges.loc["j3", "agree_share"] == 0.0
    assert judges.loc["j1", "median_seconds"] == 10.0 and judges.loc["j2", "median_seconds"] == 20.0
    assert judges.loc["j3", "bothbad_share"] == 0.5 and judges.loc["j1", "tie_share"] == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_a_planted_panel_flags_the_three_and_no_honest_judge(seed):
    report = judge_report(simulate_panel(seed), draws=50, seed=seed)
    assert sorted(report.flagged) == ["judge-00", "judge-01", "judge-02"]
    reasons = report.judges.set_index("judge")["reason"]
    assert "left bias" in reasons["judge-00"] and "disagrees with the model" in reasons["judge-02"]
    assert 0.45 < report.overall["left_share"] < 0.56


def test_honest_panels_are_rarely_flagged():
    # Holm's bound: a judge of an honest panel flagged with probability <= 0.05 (the benchmark
    # measures 0.025 over 200 panels); 30 panels, fixed seeds: at most 3 with a flag
    alarms = sum(bool(judge_report(simulate_panel(100 + seed, votes=150, biased=(), random=()), draws=10).flagged)
                 for seed in range(30))
    assert alarms <= 3


def test_the_command_prints_the_report_and_refuses_bad_files(tmp_path, capsys):
    path = tmp_path / "log.csv"
    simulate_panel(0, votes=60, judges=4).to_csv(path, index=False)
    assert main(["judges", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["judges"]) == 4 and out["agreement"]["battles"] >= 1
    assert main(["judges", str(path)]) == 0 and "| judge | votes |" in capsys.readouterr().out
    bad = pd.read_csv(path)
    bad.loc[3, "winner"] = "left"
    bad.to_csv(path, index=False)
    assert main(["judges", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"study.leaderboard judges: error: {path}: row 4 (file line 5), column 'winner': unknown winner "
                   "value 'left'; expected 'model_a', 'model_b', 'tie' or 'tie (bothbad)'"]


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns="judge"), "no column 'judge'"),
    (lambda f: f.assign(left=["nobody"] * len(f)), "row 1, column 'left': 'nobody' is neither model_a nor model_b"),
    (lambda f: f.assign(seconds=[-1.0] * len(f)), "row 1, column 'seconds': expected a finite number"),
])
def test_bad_frames_are_refused_in_one_line(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        judge_report(change(simulate_panel(0, votes=30, judges=3)))


def test_the_two_statistics_are_standard_normal_for_honest_judges():
    # 10 honest panels of 20 judges (fixed seeds): 200 side z's and 200 misfit z's against N(0, 1).
    # The SD's standard error is 0.05, so z's scaled by 1.2 (a false-alarm rate of 0.09 instead of
    # 0.05 at a two-sided 1.96) fail the SD bounds. (Scores fitted with ties as half a win gave the
    # misfit z's a mean of +1.4: the fit now uses the decisive votes the tests are about.)
    side, misfit = [], []
    for seed in range(10):
        judges = judge_report(simulate_panel(200 + seed, votes=200, biased=(), random=()), draws=10).judges
        side += judges["side_z"].tolist()
        misfit += judges["misfit_z"].tolist()
    for z in (np.array(side), np.array(misfit)):
        assert stats.kstest(z, "norm").pvalue > 0.01
        assert abs(z.mean()) < 3 / np.sqrt(len(z)) and 0.85 < z.std() < 1.15


def test_the_p_values_against_exact_enumeration():
    # 14 decisive votes: every one of the 2^14 outcomes, its exact probability; the saddlepoint
    # p-values within 20% of the exact ones down to 1e-6 (the side's whole-number S: 35% at the very
    # end, conservative), where the normal approximation is off by factors
    rng = np.random.default_rng(1)
    n = 14
    p = rng.uniform(0.1, 0.9, n)
    eta = np.log(p / (1 - p))
    Y = np.array(list(itertools.product([0.0, 1.0], repeat=n)))
    prob = np.prod(np.where(Y == 1, p, 1 - p), axis=1)
    order = np.argsort(Y @ eta)
    for k in (3, 40, 400, 4000, 12000):  # outcomes from the far lower tail to the bulk
        y = Y[order[k]]
        m = y @ eta
        exact_misfit = prob[Y @ eta <= m + 1e-12].sum()
        s = y.sum()
        exact_side = min(1.0, 2 * min(prob[Y.sum(1) >= s].sum(), prob[Y.sum(1) <= s].sum()))
        side, misfit = null_pvalues(p, eta, y)
        assert misfit == pytest.approx(exact_misfit, rel=0.2), (k, misfit, exact_misfit)
        assert side == pytest.approx(exact_side, rel=0.35) and side >= 0.95 * exact_side, (k, side, exact_side)


def test_a_log_of_ties_only_is_described_and_not_tested():
    frame = pd.DataFrame({"model_a": ["x", "y"] * 15, "model_b": ["y", "z"] * 15, "winner": "tie", "judge": "j"})
    report = judge_report(frame, min_decisive=1)
    row = report.judges.iloc[0]
    assert row["tie_share"] == 1.0 and row["decisive"] == 0 and math.isnan(row["side_p"]) and report.flagged == []
