"""What a replication's numbers depend on, on record, and the pin that makes them the same on every
x86-64 machine (study.runner.numerics, docs/core.md "Reproducibility"): the manifest names the BLAS
kernel; with --pin-numerics two different ambient kernels store identical Parquet tables; a resume
that mixes kernels says so and records it; the commit of a copy without .git comes from
STUDY_GIT_COMMIT; verify says what it checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from threadpoolctl import threadpool_info

import study
from study.results import storage
from study.runner import manifest as manifests
from study.runner import numerics

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--settings", "A", "B", "--methods", "RB", "BT-UCB1", "--set", "T=80", "--set", "T0=30",
         "--no-figures", "--no-progress"]


def _kernels_here() -> list:
    sys.path.insert(0, str(ROOT / "tests" / "simulation"))
    from test_kernels import _kernels
    return _kernels()


def test_numerics_names_the_kernel_in_use():
    info = numerics.numerics()
    loaded = {lib["architecture"] for lib in threadpool_info() if lib.get("user_api") == "blas"}
    assert {lib["kernel"] for lib in info["blas"]} == loaded
    assert info["key"] == numerics.numerics_key(info) and len(info["key"]) == 12
    other = dict(info, blas=[dict(lib, kernel="SomethingElse") for lib in info["blas"]])
    assert numerics.numerics_key(other) != info["key"]  # the kernel is part of the key
    assert numerics.numerics_key(dict(info, python="0.0")) == info["key"]  # the Python version is not
    assert all(lib["kernel"] in numerics.describe(info) for lib in info["blas"])


def test_pin_environment_and_its_check():
    if numerics.pin_kernel() is None:
        pytest.skip("no pin on this machine")
    env = numerics.pin_environment()
    assert env[numerics.PIN_VARIABLE] == "1" and env["OPENBLAS_CORETYPE"] == numerics.pin_kernel()
    pinned = {"machine": "x86_64", "numpy_simd": [], "blas": [{"library": "openblas", "kernel": "Nehalem"}] * 2}
    assert numerics.pin_in_effect(pinned)
    assert not numerics.pin_in_effect(dict(pinned, numpy_simd=["X86_V3"]))
    assert not numerics.pin_in_effect(dict(pinned, blas=[{"library": "openblas", "kernel": "Haswell"}]))
    assert not numerics.pin_in_effect(dict(pinned, blas=[{"library": "mkl", "kernel": "Nehalem"}]))


def test_the_pin_cannot_be_applied_from_python_after_numpy_loaded(monkeypatch):
    if numerics.numerics()["pinned"]:
        pytest.skip("this session already runs the pin")
    with pytest.raises(ValueError, match="loaded numpy without the pin"):
        numerics.apply_pin(True, command_line=False)
    numerics.apply_pin(False, command_line=False)  # not asked for: nothing happens
    monkeypatch.setenv(numerics.PIN_VARIABLE, "1")  # asked for through the environment
    with pytest.raises(ValueError, match="STUDY_PIN_NUMERICS"):
        numerics.apply_pin(False, command_line=False)


def _job(out, ambient: dict, *flags, reps=2):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", numerics.PIN_VARIABLE, "RAY_ADDRESS")}
    env.update(ambient)
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "regret.py"), "--out", str(out), "--reps", str(reps),
                          *SHORT, *flags], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stderr, json.loads((Path(out) / "regret" / "_manifest.json").read_text())


def test_pinned_runs_on_two_kernels_store_identical_tables_and_a_mixed_resume_is_recorded(tmp_path):
    if numerics.pin_kernel() is None or not any(lib.get("internal_api") == "openblas" for lib in threadpool_info()):
        pytest.skip("no pin on this machine")
    kernels = _kernels_here() or [None]
    ambient = [{"OPENBLAS_CORETYPE": kernels[0]} if kernels[0] else {},
               {"OPENBLAS_CORETYPE": kernels[-1]} if len(kernels) > 1 else {}]
    _, first = _job(tmp_path / "one", ambient[0], "--pin-numerics")
    _, second = _job(tmp_path / "two", {**ambient[1], numerics.PIN_VARIABLE: "1"})  # the variable, not the flag
    for manifest in (first, second):
        (key, info), = manifest["numerics"].items()
        assert info["pinned"] and info["replications"] == 8 and not info["numpy_simd"]
        assert {lib["kernel"] for lib in info["blas"]} == {numerics.pin_kernel()}
        assert manifest["numerics_mixed"] is False and manifest["runs"][-1]["pinned"] is True
    assert first["numerics"].keys() == second["numerics"].keys()
    one, two = (storage.load(tmp_path / name, "regret") for name in ("one", "two"))
    pd.testing.assert_frame_equal(one.drop(columns="study"), two.drop(columns="study"), check_exact=True)

    # a resume of the pinned study, unpinned: the table now mixes two numerics, and says so
    err, mixed = _job(tmp_path / "two", ambient[1], reps=3)
    assert "warning: these replications are computed with" in err and "mixes BLAS kernels" in err
    assert mixed["numerics_mixed"] is True
    counts = {k: v["replications"] for k, v in mixed["numerics"].items()}
    assert sorted(counts.values()) == [4, 8], counts
    assert mixed["runs"][-1]["pinned"] is False and len(mixed["runs"][-1]["numerics_by_node"]) == 1


def test_the_commit_of_a_copy_without_git_comes_from_the_environment(monkeypatch):
    def no_git(*args, **kwargs):
        raise OSError("no git here")

    monkeypatch.setattr(manifests.subprocess, "run", no_git)
    monkeypatch.delenv(manifests.COMMIT_VARIABLE, raising=False)
    assert manifests.git_commit() is None
    monkeypatch.setenv(manifests.COMMIT_VARIABLE, "0123456789abcdef0123456789abcdef01234567")
    assert manifests.git_commit() == "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv(manifests.COMMIT_VARIABLE, "$(rm -rf /)")  # not a commit: not recorded
    assert manifests.git_commit() is None


def test_verify_says_what_it_checked_or_that_there_is_nothing(tmp_path, capsys):
    from study.results.__main__ import main as results_main

    (tmp_path / "figures").mkdir()
    assert results_main(["verify", str(tmp_path)]) == 1
    assert "no stored study to verify" in capsys.readouterr().err
    plan = study.runner.make_plan("regret", settings=["A"], methods=["RB"], reps=1, overrides={"T": 20, "T0": 8})
    from study.results.storage import commit_batch
    from study.runner.worker import run_batch

    result = run_batch("regret", plan.cells[0], [(0, 5)], record_intervals=False)
    (tmp_path / "regret").mkdir()
    storage.write_manifest({"study": "regret", "runs": [{"run_id": "r"}]}, tmp_path, "regret")  # records belong to runs
    commit_batch(tmp_path, "regret", "part-r-00000.parquet", {"trajectory": result["trajectory"]}, [], "r",
                 numerics={result["numerics"]["key"]: 1})
    assert results_main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "regret: 1 batches, 1 replications" in out and "checked 1 study" in out and "SHA-256" in out
