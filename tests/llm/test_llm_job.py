"""The LLM-ranking job (jobs/llm_ranking.py -> study.cli.main_llm): the llm replay end to end on the
Ray engine at a tiny size, bring-your-own judgments end to end (the parsed file travels with the
tasks), and bad input rejected with exit status 2 before Ray starts."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import study
from study import cli
from study.results import figures
from study import runner
from study.results import storage
from study.llm import runs
from test_llm_byo import ROWS, frame  # the same tiny judgments file as the BYO loader tests

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "T=60", "--set", "T0=20", "--no-progress"]

def write_judgments(path, rows=ROWS):
    frame(rows).to_csv(path, index=False)
    return path


def figure_files(out, stems):
    return {stem: [(Path(out) / "figures" / f"{stem}.{ext}") for ext in ("pdf", "png")] for stem in stems}


# ---------------------------------------------------------------------------------------------
# Plans (no Ray)
# ---------------------------------------------------------------------------------------------

def test_llm_plan_has_the_paper_configuration():
    plan = runner.make_plan("llm")
    assert plan.reps == 50 and [c.method for c in plan.cells] == list(study.METHODS)
    setting = plan.cells[0].resolve()
    assert (setting.T, setting.T0, setting.M, setting.init_var, setting.n_items, setting.dim) == (5000, 3000, 1, 5.0, 5, 10)
    fingerprint = plan.fingerprint()
    assert fingerprint["replay"]["replay"] == "llm" and len(fingerprint["replay"]["data_sha256"]) == 64
    assert isinstance(plan.replicate, runs.Replay) and plan.replicate.name == "llm"
    # the paper's simulation studies are unchanged: no replay provenance, not in jobs/paper.py
    assert "replay" not in runner.make_plan("regret").fingerprint()
    paper_help = cli.build_parser("paper").format_help()
    assert "llm" not in paper_help.split("--studies")[1].split("\n")[0]
    with pytest.raises(ValueError, match="fixed by the 'llm' replay"):
        runner.make_plan("llm", overrides={"init_var": 1.0})
    with pytest.raises(ValueError, match="needs a judgments file"):
        runner.make_plan("byo")


# ---------------------------------------------------------------------------------------------
# End to end on the session Ray
# ---------------------------------------------------------------------------------------------

def test_llm_job_end_to_end(ray_session, tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = ["--out", str(out), "--reps", "2", *TINY]
    assert cli.main_llm(args) == 0
    df = storage.load(out, "llm")
    assert len(df) == 5 * 2 * 60
    assert set(df.study) == {"llm"} and set(df.setting) == {"llm"} and set(df.method) == set(study.METHODS)
    assert (df["T0"] == 20).all() and (df["M"] == 1).all()
    assert (df.groupby("rep")["seed"].nunique() == 1).all()  # common random numbers across methods
    manifest = storage.read_manifest(out, "llm")
    assert manifest["status"] == "complete" and manifest["overrides"] == {"T": 60, "T0": 20}
    assert manifest["fingerprint"]["replay"]["replay"] == "llm"
    # a stored row is reproduced by the replay hook with its seed
    row = df[(df.method == "ERA") & (df.rep == 1)]
    again = runs.Replay("llm")(runs.llm_setting(T=60, T0=20), "ERA", int(row.seed.iloc[0]))
    np.testing.assert_array_equal(row["avg_regret"].to_numpy(), again.trajectory["avg_regret"])
    # figures: regret with bands, ranking diagrams (point and CI) at the diagram times
    files = figure_files(out, ["llm_regret", "llm_diagrams", "llm_diagrams_ci"])
    for paths in files.values():
        assert all(p.stat().st_size > 1000 for p in paths)
    with np.load(out / "llm" / "_diagrams.npz") as z:
        assert tuple(z["times"]) == runs.diagram_times(60) and z["point"].shape == (8, 5, 10)
        assert [str(x) for x in z["labels"]] == ["LLaMA-1", "LLaMA-2", "Alpaca", "GPT-3.5", "GPT-4o mini"]
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.study) == {"llm"} and len(summary) == 5
    assert "GENERATED judgments" in (out / "summary.md").read_text()
    # a rerun resumes (nothing to compute); --figures-only redraws from the stored results
    assert cli.main_llm(args + ["--no-figures"]) == 0
    assert storage.read_manifest(out, "llm")["runs"][-1]["computed"] == 0
    for paths in files.values():
        for p in paths:
            p.unlink()
    assert cli.main_llm(["--out", str(out), "--reps", "2", *TINY, "--figures-only"]) == 0
    assert all(p.exists() for paths in files.values() for p in paths)
    # jobs/figures.py draws the replay's figures, too
    drawn = []
    monkeypatch.setattr(figures, "replay_figures", lambda out, study: drawn.append(study) or [])
    assert cli.main_figures(["--out", str(out)]) == 0
    assert drawn == ["llm"]


def test_byo_job_end_to_end(ray_session, tmp_path, monkeypatch):
    path = write_judgments(tmp_path / "judgments.csv")
    out = tmp_path / "out"
    args = ["--judgments", str(path), "--out", str(out), "--methods", "RB", "ETA", "--set", "T=40",
            "--set", "T0=15", "--no-progress"]
    assert cli.main_llm(args + ["--reps", "2"]) == 0
    df = storage.load(out, "byo")
    assert len(df) == 2 * 2 * 40 and set(df.study) == {"byo"}
    assert df["major"].between(0, 2).all() and df["other"].between(0, 2).all()
    replay = storage.read_manifest(out, "byo")["fingerprint"]["replay"]
    assert replay["n_models"] == 3 and replay["n_judgments"] == len(ROWS)
    for paths in figure_files(out, ["byo_regret", "byo_diagrams", "byo_diagrams_ci"]).values():
        assert all(p.stat().st_size > 1000 for p in paths)
    # the diagrams' standard errors are stored and stated; --se sandwich recomputes them (judgments with ties)
    assert str(np.load(figures.diagrams_path(out, "byo"))["se_method"]) == "model"
    assert cli.main_llm(args + ["--reps", "2", "--figures-only", "--se", "sandwich"]) == 0
    assert str(np.load(figures.diagrams_path(out, "byo"))["se_method"]) == "sandwich"
    assert figures.load_diagram_panels(out, "byo")[2]["se_method"] == "sandwich"

    # the workers never read the file: the parsed judgments travel with the tasks
    plan = runner.make_plan("byo", reps=3, methods=["RB", "ETA"], overrides={"T": 40, "T0": 15},
                            source={"judgments": str(path)})
    path.rename(tmp_path / "moved.csv")
    monkeypatch.delenv(runs.BYO_ENV_VAR, raising=False)
    monkeypatch.setattr(runs, "_BYO", {})
    report = runner.run_study(plan, out, progress=False)
    assert report.ok and report.computed == 2 and report.stored_before == 4
    assert storage.load(out, "byo")["rep"].nunique() == 3

    # other judgments in the same --out are refused (exit 2) unless --fresh
    changed = [r if k != 3 else (r[0], r[1], r[2], "a") for k, r in enumerate(ROWS)]
    write_judgments(path, changed)
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(args + ["--reps", "2"])
    assert exc.value.code == 2


# ---------------------------------------------------------------------------------------------
# Bad input: exit status 2, nothing written, no Ray
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, message", [
    (["--judgments", "{bad}"], "row 3 (file line 4), column 'winner': expected one of 'a', 'b', 'tie'"),
    (["--judgments", "{missing}"], "no such file"),
    (["--arena", "--judgments", "{bad}"], "not allowed with argument"),
    (["--dim", "3"], "--dim and --ridge apply to --judgments only"),
    (["--set", "init_var=1"], "fixed by the 'llm' replay"),
    (["--set", "T0=9000"], "T0 must lie in"),
    (["--figures-only", "--fresh"], "mutually exclusive"),
    (["--arena", "--se", "sandwich"], "--se applies to the ranking diagrams of the llm and byo replays"),
    (["--se", "robust"], "invalid choice: 'robust'"),
])
def test_bad_input_rejected_in_process(tmp_path, capsys, extra, message):
    bad = write_judgments(tmp_path / "bad.csv", [r if k != 2 else (r[0], r[1], r[2], "x") for k, r in enumerate(ROWS)])
    extra = [a.format(bad=bad, missing=tmp_path / "none.csv") for a in extra]
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(["--out", str(out), *extra])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_judgments_file_rejected_before_ray(tmp_path):
    """As a user runs it: exit status 2 naming row and column, quickly, no Ray started, nothing written."""
    bad = write_judgments(tmp_path / "bad.csv", [r if k != 2 else (r[0], r[1], r[2], "x") for k, r in enumerate(ROWS)])
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "llm_ranking.py"), "--judgments", str(bad),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, env=env,
                         cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"{bad}: row 3 (file line 4), column 'winner'" in res.stderr
    assert "Traceback" not in res.stderr and "Ray" not in res.stderr
    assert time.perf_counter() - start < 30
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Issue 35: sizes checked before parsing, no traceback from any input
# ---------------------------------------------------------------------------------------------

def test_a_judgments_file_above_the_stated_size_is_refused_before_parsing(tmp_path, capsys):
    """A 5 GB file was read whole (5.6 GB RSS, MemoryError traceback, exit 1); now a file above
    MAX_JUDGMENTS_BYTES is refused from its size alone, with the estimate (a sparse file here)."""
    import tracemalloc
    from study.llm.byo import MAX_JUDGMENTS_BYTES

    huge = tmp_path / "huge.csv"
    with open(huge, "wb") as handle:
        handle.truncate(5 * 2 ** 30)
    tracemalloc.start()
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(["--out", str(tmp_path / "out"), "--judgments", str(huge)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and peak < 50 * 2 ** 20
    assert f"{huge}: 5,120 MiB; judgments files above {MAX_JUDGMENTS_BYTES // 2 ** 20} MiB" in err
    assert "GiB); aggregate" in err and "Traceback" not in err


def test_a_parquet_file_declaring_too_many_rows_is_refused_from_its_footer(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from study.llm import byo

    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"question_id": ["q"] * 20, "model_a": ["a"] * 20, "model_b": ["b"] * 20,
                             "winner": ["a"] * 20, "context": [[1.0, 0.5]] * 20}), path)
    monkeypatch.setattr(byo, "MAX_JUDGMENT_ROWS", 10)
    with pytest.raises(ValueError, match=f"{path}: 20 rows; judgments files above"):
        byo.read_judgments(path)


@pytest.mark.parametrize("context, message", [
    ("[" * 100_000 + "1" + "]" * 100_000, "expected a flat JSON list of numbers"),
    ("[1.0, 1e999]", "NaN or infinite"),
])
def test_a_pathological_context_is_one_line_naming_the_row(tmp_path, capsys, context, message):
    table = frame()
    table.loc[2, "context"] = context
    bad = tmp_path / "deep.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(["--out", str(tmp_path / "out"), "--judgments", str(bad)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "row 3 (file line 4), column 'context'" in err and message in err
    assert "Traceback" not in err and "RecursionError" not in err


@pytest.mark.parametrize("content", [b"PAR1" + bytes(range(256)) * 4 + b"PAR1", b"\x00" * 1000])
def test_a_file_that_is_not_parquet_is_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(content)
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(["--out", str(tmp_path / "out"), "--judgments", str(bad)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"{bad}: cannot be read as Parquet" in err and "Traceback" not in err
