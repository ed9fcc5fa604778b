"""``--set warmup=...`` on every job: "random" and "greedy" resolve into every cell, a bad value
fails before Ray with exit status 2, and jobs/baselines.py picks its studies by the warm-up."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from study import cli

ROOT = Path(__file__).resolve().parents[2]
JOBS = ["regret", "coverage", "msweep", "paper", "baselines", "llm"]


def _plans(job, args, tmp_path):
    name = {"llm": "llm"}.get(job, job)
    parser = cli.build_parser(name)
    parsed = parser.parse_args(["--out", str(tmp_path), *args])
    if job == "paper":
        studies = parsed.studies
    elif job == "baselines":
        studies = cli._baseline_studies(parser, parsed)
    else:
        studies = [job]
    return cli.make_plans(parser, parsed, studies, check=False)


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("warmup", ["random", "greedy"])
def test_warmup_reaches_every_cell_of_every_job(job, warmup, tmp_path):
    plans = _plans(job, ["--set", f"warmup={warmup}"], tmp_path)
    assert plans and all(cell.resolve().warmup == warmup for plan in plans for cell in plan.cells)
    if job == "baselines":
        assert [p.study for p in plans] == [f"baselines_{warmup}", f"llm_baselines_{warmup}"]


def test_baselines_job_default_studies_and_conflicts(tmp_path, capsys):
    plans = _plans("baselines", [], tmp_path)
    assert [p.study for p in plans] == ["baselines_random", "baselines_greedy", "llm_baselines_random",
                                        "llm_baselines_greedy"]
    warmups = {p.study: {c.resolve().warmup for c in p.cells} for p in plans}
    assert warmups == {"baselines_random": {"random"}, "baselines_greedy": {"greedy"},
                       "llm_baselines_random": {"random"}, "llm_baselines_greedy": {"greedy"}}
    assert [p.study for p in _plans("baselines", ["--set", "warmup=own"], tmp_path)] == ["baselines", "llm_baselines"]
    with pytest.raises(SystemExit) as exc:  # a study defined by one warm-up refuses another
        cli.main_baselines(["--out", str(tmp_path), "--studies", "baselines_random", "--set", "warmup=greedy"])
    assert exc.value.code == 2 and "runs warm-up 'random'" in capsys.readouterr().err


@pytest.mark.parametrize("job", JOBS)
def test_bad_warmup_fails_in_process(job, tmp_path, capsys):
    run = {"paper": cli.main_paper, "baselines": cli.main_baselines, "llm": cli.main_llm}.get(job, lambda a: cli.main(job, a))
    with pytest.raises(SystemExit) as exc:
        run(["--out", str(tmp_path), "--quick", "--set", "warmup=bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "warmup must be one of ('own', 'random', 'greedy'), got 'bogus'" in err
    assert not any(tmp_path.iterdir())


def test_bad_warmup_fails_before_ray(tmp_path):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "baselines.py"), "--out", str(tmp_path), "--quick",
                          "--set", "warmup=bogus"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert res.returncode == 2 and "warmup must be one of" in res.stderr
    assert "Ray" not in res.stderr and "Traceback" not in res.stderr and not any(tmp_path.iterdir())
