"""jobs/baselines.py: every method on Settings A and B under both warm-ups and on the LLM replay,
through the engine, with the verdict table; user policies by import path; bad names refused before Ray."""
from __future__ import annotations

import pandas as pd
import pytest

import study
from study import cli
from study import runner
from study.results import storage

TINY = ["--set", "T=30", "--set", "T0=10", "--no-progress"]


@pytest.mark.parametrize("methods, message", [
    (["nonexistent_module_xyz:Policy"], "nonexistent_module_xyz"),
    (["study.policies:NoSuchPolicy"], "NoSuchPolicy"),
    (["UCB"], "unknown method"),
])
def test_bad_methods_fail_before_ray_naming_them(methods, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main_baselines(["--out", str(tmp_path), "--methods", *methods, *TINY])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "baselines").exists()


def test_user_policies_enter_the_fingerprint():
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", "examples.my_policy:Boltzmann"], reps=1)
    policies = plan.fingerprint()["policies"]
    assert list(policies) == ["examples.my_policy:Boltzmann"]
    record = policies["examples.my_policy:Boltzmann"]
    assert record["kind"] == "import" and len(record["source_sha256"]) == 64
    assert "policies" not in runner.make_plan("regret", settings=["A"], methods=["RB", "TS"], reps=1).fingerprint()


def test_registered_policy_runs_on_the_workers(ray_session, tmp_path):
    study.register_policy("test-eta-copy", lambda setting: study.policies.make_policy("ETA", setting), replace=True)
    try:
        rc = cli.main("regret", ["--out", str(tmp_path), "--reps", "2", "--settings", "A", "--methods", "ETA",
                                 "test-eta-copy", *TINY])
    finally:
        study.policies.unregister_policy("test-eta-copy")
    assert rc == 0
    df = storage.load(tmp_path, "regret")
    copy, eta = (df[df.method == m].drop(columns="method").reset_index(drop=True) for m in ("test-eta-copy", "ETA"))
    pd.testing.assert_frame_equal(copy, eta)  # same policy, same seeds: the same table


def test_baselines_job_end_to_end_reuses_the_regret_cells(ray_session, tmp_path):
    out = str(tmp_path)
    assert cli.main("regret", ["--out", out, "--reps", "2", *TINY]) == 0
    rc = cli.main_baselines(["--out", out, "--reps", "2", "--studies", "baselines", *TINY])
    assert rc == 0
    base = storage.load(out, "baselines")
    assert set(base.method) == set(study.ALL_METHODS) and base.rep.nunique() == 2
    assert base["avg_pair_regret"].notna().all() and (base["avg_pair_regret"] >= 0).all()
    manifest = storage.read_manifest(out, "baselines")
    assert manifest["runs"][-1]["reused"]["replications"] == 2 * 5 * 2  # the paper's five methods, copied from regret
    regret = storage.load(out, "regret").drop(columns="study")
    same = base[base.method.isin(study.METHODS)].drop(columns="study").reset_index(drop=True)
    pd.testing.assert_frame_equal(same, regret.reset_index(drop=True))
    figures = {p.name for p in (tmp_path / "figures").glob("*.png")}
    assert {"baselines_A.png", "baselines_B.png"} <= figures
    summary = (tmp_path / "summary.md").read_text()
    assert "pair R(T)" in summary and "CoLSTIM" in summary
    assert not (tmp_path / "verdicts.md").exists()  # one warm-up only: no verdict


def test_baselines_job_runs_both_warmups_the_replay_and_writes_the_verdicts(ray_session, tmp_path):
    """A, B and the LLM replay under both warm-ups (before issue 24 the replay ran under each method's
    own warm-up only); the verdicts cover the replay by the same rule."""
    out = str(tmp_path)
    assert cli.main_baselines(["--out", out, "--reps", "3", *TINY]) == 0
    names = ("baselines_random", "baselines_greedy", "llm_baselines_random", "llm_baselines_greedy")
    runs = {name: storage.load(out, name) for name in names}
    for frame in runs.values():
        assert set(frame.method) == set(study.ALL_METHODS) and frame["before_phi"].notna().all()
    random, greedy = runs["baselines_random"], runs["baselines_greedy"]
    # same environments: RB (which never asks for Phi) is the same table under both warm-ups
    keep = ["setting", "rep", "t", "major", "other", "regret", "rel_error"]
    pd.testing.assert_frame_equal(random[random.method == "RB"][keep].reset_index(drop=True),
                                  greedy[greedy.method == "RB"][keep].reset_index(drop=True))
    assert not random[random.method == "RB"]["before_phi"].any()
    ts = random[random.method == "MaxInP"]
    assert ts["before_phi"].any() and (ts["explored"] == ts["before_phi"]).all()  # random warm-up steps
    assert not greedy[greedy.method == "MaxInP"]["explored"].any()  # greedy ones
    llm_random, llm_greedy = runs["llm_baselines_random"], runs["llm_baselines_greedy"]
    pd.testing.assert_frame_equal(llm_random[llm_random.method == "RB"][keep].reset_index(drop=True),
                                  llm_greedy[llm_greedy.method == "RB"][keep].reset_index(drop=True))
    assert not llm_greedy[llm_greedy.method == "MaxInP"]["explored"].any()
    text = (tmp_path / "verdicts.md").read_text()
    assert "| A | R(T) |" in text and "Steps spent before Φ" in text and "random: " in text and "greedy: " in text
    assert "| llm | R(T) |" in text and "| llm | pair R(T) |" in text and "stored under" not in text
    assert "## Pairs" in text and "| RB-UA − RB | A | R(T) |" in text and "| RB-UA − RB | llm | R(T) |" in text
    figures = {p.name for p in (tmp_path / "figures").glob("*.png")}
    assert {"baselines_random_A.png", "baselines_greedy_B.png", "llm_baselines_random_llm.png",
            "llm_baselines_greedy_llm.png"} <= figures


def test_one_warmup_with_set(ray_session, tmp_path):
    out = str(tmp_path)
    rc = cli.main_baselines(["--out", out, "--reps", "1", "--settings", "A", "--methods", "TS", "RB",
                             "--set", "warmup=greedy", *TINY])
    assert rc == 0
    assert {p.name for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(("figures", "_"))} \
        >= {"baselines_greedy", "llm_baselines_greedy"} and not (tmp_path / "baselines_random").exists()
    llm = storage.read_manifest(out, "llm_baselines_greedy")["fingerprint"]["cells"][0]["resolved_setting"]
    assert llm["warmup"] == "greedy"
