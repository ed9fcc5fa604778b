"""The votes study's driver (study.runner.votes) and its table (study.results.votes), on a stand-in
engine (tests/support/fake_votes.py) whose numbers are a known function of the seed: every task
stored once with its checksum, a resume computes nothing, a damaged part is recomputed, a failed
task is recorded and retried, another configuration is refused, bad arguments fail before Ray
starts, and the table's paired ratios equal a direct computation."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.results import votes as stored
from study.runner import votes
import fake_votes

SEED = 4242


def plan(**kw):
    return votes.make_votes_plan(engine="fake_votes", seed=kw.pop("seed", SEED), **kw)


def run(p, out, **kw):
    return votes.run_votes(p, out, progress=False, log=lambda m: None, **kw)


def test_every_task_is_stored_once_and_a_resume_computes_nothing(ray_session, tmp_path):
    p = plan(methods=["fast"], reps=7)
    assert p.methods == ("uniform", "fast")  # the reference is always run
    units = p.units()
    assert len(units) == 2 * 2 * 2  # 2 arenas x 2 methods x chunks of 5 (7 reps: 5 + 2)
    first = run(p, tmp_path)
    assert (first.computed, first.reused, first.failed, first.exit_status) == (8, 0, [], 0)
    decisions, view, manifest = stored.load(tmp_path / "votes")
    assert len(decisions) == 2 * 2 * 7 * 2 and not decisions.duplicated(["arena", "method", "rep", "top"]).any()
    # common random numbers: replication r of an arena has one seed for every method
    d = decisions.set_index(["arena", "method", "rep", "top"])["votes"]
    seed = votes.seed_of(SEED, "tiny", 4)
    assert d[("tiny", "uniform", 4, 1)] == fake_votes.base_votes(seed, 1000)
    assert d[("tiny", "fast", 4, 1)] == int(fake_votes.base_votes(seed, 1000) * 0.5)
    assert "git_commit" in manifest["runs"][0] and manifest["runs"][0]["plan"]["reps"] == {"tiny": 7, "small": 7}
    again = run(p, tmp_path)
    assert (again.computed, again.reused) == (0, 8)
    assert len(stored.load(tmp_path / "votes")[0]) == len(decisions)


def test_a_damaged_part_is_recomputed_and_loading_it_names_it(ray_session, tmp_path):
    p = plan(arenas=["tiny"], methods=["uniform"], reps=3)
    run(p, tmp_path)
    part = next((tmp_path / "votes" / "decisions").glob("part-*.parquet"))
    before = part.read_bytes()
    part.write_bytes(before[:-10] + b"0123456789")
    with pytest.raises(stored.StorageError, match=part.name):
        stored.load(tmp_path / "votes")
    again = run(p, tmp_path)
    assert again.computed == 1 and part.read_bytes() == before


def test_a_failed_task_is_recorded_then_retried(ray_session, tmp_path):
    marker = Path(fake_votes.fail_marker(SEED + 1))
    marker.write_text("fail")
    try:
        p = plan(arenas=["small"], methods=["flaky"], reps=5, seed=SEED + 1)
        first = run(p, tmp_path)
    finally:
        marker.unlink()
    assert first.exit_status == 1 and len(first.failed) == 1
    failure = first.failed[0]
    assert (failure["arena"], failure["method"], failure["reps"]) == ("small", "flaky", (0, 1, 2, 3, 4))
    assert "replication 3 fails" in failure["error"]
    manifest = stored.read_manifest(tmp_path / "votes")
    assert manifest["runs"][-1]["status"] == "failed" and manifest["runs"][-1]["failures"][0]["error"] == failure["error"]
    assert set(stored.load(tmp_path / "votes")[0]["method"]) == {"uniform"}  # nothing of the failed task stored
    second = run(p, tmp_path)
    assert (second.computed, second.reused, second.exit_status) == (1, 1, 0)


def test_another_configuration_is_refused_and_fresh_discards(ray_session, tmp_path):
    run(plan(arenas=["tiny"], methods=["uniform"], reps=2), tmp_path)
    with pytest.raises(votes.ConfigMismatch, match="budgets"):
        run(plan(arenas=["tiny"], methods=["uniform"], reps=2, budget=999), tmp_path)
    report = run(plan(arenas=["tiny"], methods=["uniform"], reps=2, budget=999), tmp_path, fresh=True)
    assert report.computed == 1
    assert set(stored.load(tmp_path / "votes")[0]["budget"]) == {999}


@pytest.mark.parametrize("kwargs, message", [
    ({"arenas": ["nowhere"]}, "unknown arena 'nowhere'; allowed: \\['tiny', 'small'\\]"),
    ({"methods": ["best"]}, "unknown method 'best'"),
    ({"reps": 0}, "--reps must be a positive integer"),
    ({"budget": -5}, "--budget must be a positive integer"),
    ({"level": 1.5}, "--level must lie in"),
    ({"tops": [0]}, "--top must be a positive integer"),
])
def test_bad_arguments_fail_before_any_work(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan(**kwargs)


def test_the_command_line_rejects_bad_input_with_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        votes.main(["--out", str(tmp_path), "--arenas", "nowhere"])
    assert exc.value.code == 2 and "unknown arena 'nowhere'" in capsys.readouterr().err
    assert not (tmp_path / "votes").exists()


def test_a_planted_link_is_refused(ray_session, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "votes")
    with pytest.raises(stored.StorageError, match="symbolic link"):
        run(plan(arenas=["tiny"], methods=["uniform"], reps=1), tmp_path / "out")
    assert not any((tmp_path / "elsewhere").iterdir())


def test_the_summary_equals_a_direct_computation():
    rng = np.random.default_rng(7)
    rows = []
    for rep in range(40):
        base = int(rng.integers(100, 1000))
        for method, factor in (("uniform", 1.0), ("a", 0.6), ("b", 1.3)):
            votes_ = min(int(base * factor * rng.uniform(0.8, 1.2)), 1000)
            rows.append({"arena": "x", "top": 1, "method": method, "rep": rep, "votes": votes_, "budget": 1000,
                         "decided": votes_ < 1000, "wrong": method == "b" and rep < 3, "n_items": 5})
    decisions = pd.DataFrame(rows)
    summary = stored.summarise(decisions).set_index("method")
    u = decisions[decisions.method == "uniform"].set_index("rep")["votes"]
    a = decisions[decisions.method == "a"].set_index("rep")["votes"]
    log_ratio = np.log(a / u)
    assert summary.loc["a", "ratio"] == pytest.approx(np.exp(log_ratio.mean()), rel=1e-12)
    assert summary.loc["a", "ratio_se"] == pytest.approx(np.exp(log_ratio.mean()) * log_ratio.std(ddof=1) / np.sqrt(40),
                                                         rel=1e-12)
    assert summary.loc["a", "ratio"] < 0.75 < 1.2 < summary.loc["b", "ratio"]
    assert summary.loc["b", "error_paid"] == pytest.approx(3 / 40)
    # Clopper-Pearson: the upper bound u solves P(Binomial(40, u) <= 3) = 0.05
    from scipy.stats import binom
    assert binom.cdf(3, 40, summary.loc["b", "error_upper"]) == pytest.approx(0.05, abs=1e-9)
    assert summary.loc["a", "votes_median"] == pytest.approx(np.median(a))
    assert np.isnan(summary.loc["uniform", "ratio"])


def test_the_report_is_written_from_the_stored_runs(ray_session, tmp_path):
    p = plan(reps=3)
    run(p, tmp_path)
    written = stored.write_report(tmp_path / "votes", plan_arenas=p.arenas, plan_methods=p.methods)
    names = {Path(w).name for w in written}
    assert {"votes.md", "votes_to_decision.png", "votes_fixed_budget.png", "votes_summary.csv"} <= names
    text = (tmp_path / "votes" / "votes.md").read_text()
    assert "### tiny (4 items, budget 1,000 votes)" in text and "(reference)" in text
    summary = pd.read_csv(tmp_path / "votes" / "votes_summary.csv")
    assert set(summary["method"]) == set(p.methods) and (summary["runs"] == 3).all()


def test_a_smoke_run_of_the_real_engine_through_the_command_line(ray_session, tmp_path, capsys):
    """jobs/votes.py's entry point on the real engine: two arenas, the reference and one adaptive
    method, one replication each at a small budget; the table and both figures are written."""
    status = votes.main(["--out", str(tmp_path), "--arenas", "arena10", "A", "--methods", "lucb", "--reps", "1",
                         "--budget", "3000", "--no-progress"])
    assert status == 0, capsys.readouterr()
    decisions, view, manifest = stored.load(tmp_path / "votes")
    assert set(decisions["method"]) == {"uniform", "lucb"} and set(decisions["arena"]) == {"arena10", "A"}
    assert (decisions["votes"] <= 3000).all() and not decisions["wrong"].any()
    text = (tmp_path / "votes" / "votes.md").read_text()
    assert "### arena10 (10 items, budget 3,000 votes)" in text
    assert (tmp_path / "votes" / "votes_to_decision.png").stat().st_size > 10_000
