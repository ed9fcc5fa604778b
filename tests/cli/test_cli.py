"""Command-line validation: bad flags fail fast (exit 2, one clear line) before Ray starts."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from study import cli

ROOT = Path(__file__).resolve().parents[2]


BAD_FLAGS = [
    ("regret", ["--settings", "C"], "unknown setting 'C'"),
    ("regret", ["--methods", "UCB"], "unknown method 'UCB'"),
    ("coverage", ["--reps", "0"], "positive integer"),
    ("regret", ["--set", "T0=900"], "T0 must lie in"),
    ("regret", ["--set", "T=abc"], "T must be an integer"),
    ("regret", ["--set", "nonsense"], "expected KEY=VALUE"),
    ("regret", ["--set", "bogus=1"], "unknown setting field"),
    ("msweep", ["--set", "M=3"], "--m-values"),
    ("msweep", ["--m-values", "0"], "positive integer"),
    ("regret", ["--quick", "--reps", "5"], "mutually exclusive"),
    ("regret", ["--seed", "x"], "integer seed"),
    ("regret", ["--address", "nowhere"], "--address must be"),
    ("paper", ["--studies", "nope"], "invalid choice"),
]


@pytest.mark.parametrize("job, args, message", BAD_FLAGS)
def test_bad_flags_rejected_in_process(job, args, message, tmp_path, capsys):
    run = cli.main_paper if job == "paper" else (lambda a: cli.main(job, a))
    with pytest.raises(SystemExit) as exc:
        run(["--out", str(tmp_path), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "error:" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("job, args, message", [BAD_FLAGS[1], BAD_FLAGS[3], BAD_FLAGS[7]])
def test_bad_flags_rejected_before_ray(job, args, message, tmp_path):
    """As a user runs it: exit status 2, one clear line, quickly, no Ray started, nothing written."""
    start = time.perf_counter()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), "--out", str(tmp_path), *args],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    elapsed = time.perf_counter() - start
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert "error:" in res.stderr and "Traceback" not in res.stderr
    assert "Ray" not in res.stderr  # no Ray instance was started
    assert elapsed < 30
    assert not any(tmp_path.iterdir())  # nothing written


def test_help_mentions_every_common_flag():
    text = cli.build_parser("regret").format_help()
    for flag in ("--settings", "--methods", "--reps", "--out", "--seed", "--address", "--num-cpus",
                 "--quick", "--fresh", "--set"):
        assert flag in text
    assert "--m-values" in cli.build_parser("msweep").format_help()


def test_relative_out_refused_inside_submitted_job(monkeypatch):
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", ["--out", "relative/dir", "--quick"])
    assert exc.value.code == 2


def test_overrides_are_parsed_as_literals():
    parser = cli.build_parser("regret")
    args = parser.parse_args(["--set", "T=600", "--set", "p=0.2", "--set", "tie_break=min_norm"])
    plan, = cli.make_plans(parser, args, ["regret"])
    setting = plan.cells[0].resolve()
    assert setting.T == 600 and setting.p == 0.2 and setting.tie_break == "min_norm"
