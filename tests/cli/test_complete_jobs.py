"""Every job is a complete result (figures and summary), a refusal offers another --out before
--fresh and names what differs, failures say where their tracebacks are, and named settings beyond
A and B label every output."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import study
from study import cli
from study.results import storage
from study.results.__main__ import main as results_main

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--set", "T=40", "--set", "T0=16"]


def test_regret_job_alone_leaves_figures_and_summary_then_refuses_another_configuration(tmp_path):
    """As the issue ran it: the user-policy command leaves figures and a summary; the same --out
    with other methods is refused with exit 2, suggesting another --out before --fresh and naming
    the methods that differ; nothing stored is deleted.  The job runs as a user's would, with
    RAY_AUTH_MODE unset (the suite disables it): the embedded Ray keeps token authentication (the
    token is created in this HOME) and prints no advice to disable it."""
    out, home = tmp_path / "out", tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT), HOME=str(home))
    command = [sys.executable, str(ROOT / "jobs" / "regret.py"), "--settings", "A", "--reps", "1", "--no-progress",
               "--out", str(out), *SHORT]
    first = subprocess.run(command + ["--methods", "RB", "examples.my_policy:Boltzmann"], capture_output=True,
                           text=True, timeout=300, env=env, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert (out / "figures" / "regret_A.png").stat().st_size > 10_000
    assert (out / "figures" / "regret_A.pdf").exists()
    summary = (out / "summary.md").read_text()
    assert "examples.my_policy:Boltzmann" in summary and summary.endswith("\n") and "Made at commit" in summary
    assert "figures (1, .pdf and .png)" in first.stderr and "summary:" in first.stderr
    assert (home / ".ray" / "auth_token").exists()  # authentication was on
    assert "RAY_AUTH_MODE=disabled" not in first.stderr and "opt out" not in first.stderr

    second = subprocess.run(command + ["--methods", "RB", "ETA"], capture_output=True, text=True, timeout=120,
                            env=env, cwd=ROOT)
    assert second.returncode == 2
    message = second.stderr
    assert "methods: stored RB examples.my_policy:Boltzmann, requested RB ETA" in message
    assert message.index("choose another --out") < message.index("--fresh")
    assert len(message) < 800, message  # what differs, in words: not a dump of the fingerprints
    assert "Traceback" not in message
    assert len(storage.load(out, "regret")) == 2 * 40  # nothing deleted


def test_named_settings_from_a_file_label_every_output(ray_session, tmp_path, clean_registry, capsys):
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text('[B20]\nbase = "B"\nn_items = 20\ndim = 20\n\n[tiny]\nn_items = 3\ndim = 2\n'
                             'truth = "normal"\nM = 5\np = 1.0\n')
    out = tmp_path / "out"
    status = cli.main("regret", ["--settings-file", str(settings_file), "--settings", "B20", "tiny", "--methods",
                                 "RB", "--reps", "2", "--out", str(out), "--no-progress", *SHORT])
    assert status == 0, capsys.readouterr().err
    df = storage.load(out, "regret")
    assert sorted(set(df["setting"])) == ["B20", "tiny"]
    manifest = json.loads((out / "regret" / "_manifest.json").read_text())
    resolved = {c["setting"]: c["resolved_setting"] for c in manifest["fingerprint"]["cells"]}
    assert resolved["B20"]["n_items"] == 20 and resolved["B20"]["name"] == "B20" and resolved["tiny"]["M"] == 5
    assert (out / "figures" / "regret_B20.png").exists() and (out / "figures" / "regret_tiny.png").exists()
    assert "| B20 | RB |" in (out / "summary.md").read_text()
    # the stored rows are the library's, from the same seeds
    rows = df[(df["setting"] == "tiny") & (df["rep"] == 1)].sort_values("t")
    direct = study.run_replication("tiny", "RB", int(rows["seed"].iloc[0]), T=40, T0=16, ci_every=0)
    assert np.allclose(rows["avg_regret"].to_numpy(), direct.trajectory["avg_regret"])


def test_named_setting_errors_are_clear(tmp_path, clean_registry, capsys):
    with pytest.raises(ValueError, match="built in"):
        study.register_setting(study.SETTINGS["B"].replace(name="A"))
    with pytest.raises(ValueError, match="setting name"):
        study.register_setting(study.SETTINGS["B"].replace(name="a b/c"))
    study.register_setting(study.SETTINGS["B"].replace(name="mine", M=10))
    study.register_setting(study.SETTINGS["B"].replace(name="mine", M=10))  # the same again: fine
    with pytest.raises(ValueError, match="already registered"):
        study.register_setting(study.SETTINGS["B"].replace(name="mine", M=11))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"C1": {"base": "B", "n_item": 20}}))
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", ["--settings-file", str(bad), "--settings", "C1", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "bad.json, [C1]" in err and "n_item" in err
    with pytest.raises(ValueError, match="T0 must lie in .*T0=24"):
        study.SETTINGS["A"].replace(T=60)


def test_setting_by_import_path_is_labelled_by_its_name(clean_registry):
    plan = study.runner.make_plan("regret", settings=["engine_support:NAMED_SETTING"], methods=["RB"], reps=1)
    assert [c.setting for c in plan.cells] == ["A-small"]
    assert plan.cells[0].resolve().T == 30


def test_failure_message_points_to_the_traceback(ray_session, tmp_path, capsys):
    out = tmp_path / "out"
    status = cli.main("regret", ["--settings", "A", "--methods", "engine_support:FailingPolicy", "--reps", "1",
                                 "--out", str(out), "--no-progress", "--verbose", *SHORT])
    assert status == 1
    err = capsys.readouterr().err
    assert f"tracebacks are stored in {out.resolve() / 'regret_failures'}" in err
    assert f"python -m study.results failures {out.resolve()} regret" in err
    assert "--- traceback of A/engine_support:FailingPolicy" in err and "deliberate failure at step" in err
    assert results_main(["failures", str(out), "regret"]) == 1
    printed = capsys.readouterr().out
    assert "regret: 1 failed replications" in printed and "Traceback (most recent call last)" in printed
    assert "deliberate failure at step" in printed
