"""A user policy from a module outside the package (examples/my_policy.py) through the Ray engine,
end to end: plan (the import path is resolved before Ray is touched), remote replications, Parquet,
and the stored rows equal to study.run_replication in this process."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import study
from study import runner
from study.results import storage

REPO = str(Path(__file__).resolve().parents[2])
USER = "examples.my_policy:Boltzmann"


def test_bad_import_path_fails_before_ray():
    with pytest.raises(ValueError, match="cannot import module 'no_such_pkg_xyz.mod'"):
        runner.make_plan("regret", methods=["RB", "no_such_pkg_xyz.mod:Policy"])


def _workers_can_import(ray, module: str) -> bool:
    import importlib.util

    probe = ray.remote(num_cpus=0)(lambda name: importlib.util.find_spec(name.partition(".")[0]) is not None)
    return bool(ray.get(probe.remote(module)))


def test_user_policy_runs_through_the_ray_engine(ray_session, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(REPO)  # the driver
    # Ray puts the driver's working directory on the workers' path: pytest run from the repository
    # root (as the README says) makes ``examples`` importable there, as a user's cluster must
    if not _workers_can_import(ray_session, USER):
        pytest.skip("the Ray workers cannot import 'examples' (run pytest from the repository root)")
    plan = runner.make_plan("regret", settings=["A"], methods=["RB", USER], reps=2, overrides={"T": 30, "T0": 10})
    report = runner.run_study(plan, tmp_path, progress=False, log=lambda message: None)
    assert report.ok, report.failures
    df = storage.load(tmp_path, "regret")
    assert sorted(set(df["method"])) == sorted(["RB", USER]) and len(df) == 2 * 2 * 30
    for (method, rep), rows in df.groupby(["method", "rep"]):
        direct = study.run_replication("A", method, int(rows["seed"].iloc[0]), T=30, T0=10, ci_every=0)
        assert np.array_equal(rows.sort_values("t")["major"].to_numpy(), direct.trajectory["major"])
        assert np.allclose(rows.sort_values("t")["avg_regret"].to_numpy(), direct.trajectory["avg_regret"])
