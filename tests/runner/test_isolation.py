"""Issue 35: user code never shares a process with a built-in method's replications.

A policy module that patches the environment's ``expit`` when imported changed every RB replication
of the study it ran in (its cells ran in the same Ray worker as RB's); the RB cells were then reused
as "identical" by another study.  Now a user policy's cells run in processes of their own, the
manifest records per run whether a worker had imported user code, and only cells of runs recorded
clean are reused."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest

import study
from study import runner
from study.results import storage
from engine_support import fake_replicate

TINY = {"T": 60, "T0": 24}
PATCHER = "evilpol.patch:Patcher"
VALUES = ["major", "other", "explored", "regret", "avg_regret", "rel_error", "pair_regret", "before_phi"]


def quiet(*_):
    pass


@pytest.fixture(autouse=True)
def unpatched():
    """The driver (this process) imports a policy named by an import path to check and hash it: the
    patcher patches this process's environment module then; undone after each test."""
    import sys

    import study.simulation.environment as env

    expit = env.expit
    yield
    env.expit = expit
    for name in [m for m in sys.modules if m.startswith("evilpol")]:
        del sys.modules[name]


def test_a_patching_policy_leaves_every_builtin_number_equal_to_a_clean_runs(ray_session, tmp_path):
    clean = runner.make_plan("regret", settings=["A"], methods=["RB"], reps=4, overrides=TINY)
    assert runner.run_study(clean, tmp_path / "clean", batch_size=1, progress=False, log=quiet).ok
    mixed = runner.make_plan("regret", settings=["A"], methods=[PATCHER, "RB"], reps=4, overrides=TINY)
    # the patcher's cells are submitted first, one replication a task: on 2565cad both workers had
    # imported it by the time RB's tasks ran, and every RB replication differed
    assert runner.run_study(mixed, tmp_path / "mixed", batch_size=1, progress=False, log=quiet).ok
    want = study.load(tmp_path / "clean", "regret")
    got = study.load(tmp_path / "mixed", "regret")
    got = got[got.method == "RB"].reset_index(drop=True)
    assert len(got) == len(want) == 4 * TINY["T"]
    for column in VALUES:
        assert np.array_equal(got[column].to_numpy(), want[column].to_numpy()), column
    patched = study.load(tmp_path / "mixed", "regret")
    assert (patched.method == PATCHER).sum() == 4 * TINY["T"]
    run = storage.read_manifest(tmp_path / "mixed", "regret")["runs"][-1]
    assert run["user_code"]["tainted_cells"] == [] and PATCHER in run["user_code"]["policies"]


@pytest.fixture
def planted(tmp_path):
    """A registered factory (shipped to the workers as bytes) that plants files into ``target``."""
    from evilpol.hostile import DeclaresFiles, PlantsFiles

    target = tmp_path / "target"
    target.mkdir()
    study.register_policy("plants", functools.partial(PlantsFiles, target=str(target)), replace=True)
    study.register_policy("declares", functools.partial(DeclaresFiles, target=str(target)), replace=True)
    yield target
    study.policies.unregister_policy("plants")
    study.policies.unregister_policy("declares")


def test_a_policy_writing_files_is_refused_in_its_process(ray_session, tmp_path, planted):
    plan = runner.make_plan("regret", settings=["A"], methods=["plants", "evilpol.hostile:CatchesAndReads"],
                            reps=2, overrides=TINY)
    report = runner.run_study(plan, tmp_path / "out", progress=False, log=quiet)
    assert report.failed == 4 and not list(planted.iterdir())
    errors = {f["method"]: f["error"] for f in report.failures}
    assert errors["plants"].startswith("PolicyRefused: policy 'plants' is not allowed writing files")
    assert "caught the refusal" in errors["evilpol.hostile:CatchesAndReads"]
    assert "walking the interpreter's stack" in errors["evilpol.hostile:CatchesAndReads"]


def test_a_declared_need_is_allowed_and_recorded(ray_session, tmp_path, planted):
    plan = runner.make_plan("regret", settings=["A"], methods=["declares"], reps=1, overrides={"T": 20, "T0": 8})
    report = runner.run_study(plan, tmp_path / "out", progress=False, log=quiet)
    assert report.ok and len(list(planted.iterdir())) == 20
    run = storage.read_manifest(tmp_path / "out", "regret")["runs"][-1]
    assert run["user_code"]["policies"] == {"declares": {"needs": ["files"]}}


def _set_user_code(out, study_name, value):
    path = storage.manifest_path(out, study_name)
    manifest = json.loads(path.read_text())
    for run in manifest["runs"]:
        if value is None:
            run.pop("user_code", None)
        else:
            run["user_code"] = value
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("record, reused", [
    (None, 0),  # a run stored before runs recorded it: not trusted
    ({"policies": {}, "tainted_cells": [["A", "RB", 20]]}, 0),  # RB computed beside user code
    ({"policies": {}, "tainted_cells": []}, 2),
])
def test_reuse_takes_only_cells_computed_in_clean_processes(ray_session, tmp_path, record, reused):
    out = tmp_path / "out"
    kwargs = dict(settings=["A"], methods=["RB"], reps=2, overrides={"T": 30, "T0": 10})
    run = functools.partial(runner.run_study, out=out, replicate=fake_replicate, progress=False, log=quiet)
    assert run(runner.make_plan("regret", **kwargs)).ok
    _set_user_code(out, "regret", record)
    report = run(runner.make_plan("baselines", **kwargs))
    assert report.ok and report.reused == reused and report.computed == 2 - reused
