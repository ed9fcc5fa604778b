"""The online ranker's anytime-valid intervals: ``intervals(anytime=True)``, ``ranking(anytime=True)``,
``decision``/``decided`` (the stopping rule) and ``python -m study.online show --anytime``."""
import subprocess
import sys
from pathlib import Path

import numpy as np

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import online_child  # noqa: E402  (tests/support)


def test_ranker_anytime_intervals_ranking_and_decided(tmp_path):
    path = tmp_path / "r.sqlite"
    with online_child.create(path, T=150) as ranker:
        assert not ranker.decided()  # nothing told
        online_child.annotate(ranker, online_child.environment(150))
        tightest = ranker.config.T * ranker.config.M
        result = ranker.debiased()
        lower, upper = result.cs(0.95, tightest_at=tightest)
        table = ranker.intervals(anytime=True)
        np.testing.assert_allclose(table["lower"], lower.ravel(), rtol=1e-12)
        np.testing.assert_allclose(table["upper"], upper.ravel(), rtol=1e-12)
        assert table["anytime"].all() and not ranker.intervals()["anytime"].any()
        # at the horizon the sequences are tightest: 1.55 times the CIs, for both standard errors
        for se in ("model", "sandwich"):
            fixed, seq = ranker.ranking(se=se), ranker.ranking(se=se, anytime=True)
            ratio = (seq["upper"] - seq["lower"]) / (fixed["upper"] - fixed["lower"])
            np.testing.assert_allclose(ratio, 1.5485602863, rtol=1e-8)
        # Setting A: at x = (1, 1, 0, ...) item 0 (theta* = (1, 1, 0, ...)) leads clearly
        x = np.zeros(ranker.config.dim)
        x[:2] = 1.0
        verdict = ranker.decision(x=x)
        assert ranker.decided(x=x) == verdict.decided
        assert verdict.top == (0,) and verdict.decided
        fixed = ranker.decision(x=x, anytime=False)
        assert fixed.margin > verdict.margin
        # at the mean context every item ties in the truth: no decision
        assert not ranker.decided()
    out = subprocess.run([sys.executable, "-m", "study.online", "show", str(path), "--anytime", "--no-png"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "confidence sequences (anytime-valid)" in out.stdout and "Stopping rule" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "study.online", "show", str(path), "--top", "5", "--no-png"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--top" in bad.stderr
