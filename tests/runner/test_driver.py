"""The Ray study engine: seeds, plans, end-to-end runs, resume, failures, a two-node cluster,
figures and the summary.  Most tests use a cheap stand-in replication (tests/support/engine_support.py)
so that they exercise the engine, not the bandit core; one runs the real core at a tiny size."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import study
from study import cli
from study.runner import progress
from study.runner import rayconn
from study import runner
from study.simulation import seeds
from study.results import storage
from engine_support import FailingReplicate, fake_replicate

TINY = ["--set", "T=30", "--set", "T0=10", "--no-progress"]
SUPPORT_DIR = str(Path(__file__).resolve().parents[1] / "support")


# ---------------------------------------------------------------------------------------------
# Seeds and plans (no Ray)
# ---------------------------------------------------------------------------------------------

def test_replication_seed_is_stable_and_keyed():
    s = seeds.replication_seed(20250101, "regret", "A", 0)
    assert s == seeds.replication_seed(20250101, "regret", "A", 0)
    assert isinstance(s, int) and 0 <= s < 2 ** 63
    others = {seeds.replication_seed(20250101, "regret", "A", 1),
              seeds.replication_seed(20250101, "regret", "B", 0),
              seeds.replication_seed(20250101, "coverage", "A", 0),
              seeds.replication_seed(20250102, "regret", "A", 0)}
    assert s not in others and len(others) == 4
    # the paper's simulation studies share one namespace; each replay has its own
    assert {runner.seed_namespace(s) for s in runner.STUDY_NAMES} == {"regret"}
    assert runner.seed_namespace("byo") == "byo"
    plan = runner.make_plan("msweep", reps=2)
    assert plan.seed("A", 1) == runner.make_plan("regret", reps=2).seed("A", 1) == \
        seeds.replication_seed(20250101, "regret", "A", 1)
    # the namespace is the regret study's own: its seeds are those of every earlier reference
    assert plan.seed("A", 7) == int(np.random.SeedSequence(20250101, spawn_key=(
        seeds.stable_int("regret"), seeds.stable_int("A"), 7)).generate_state(1, np.uint64)[0]) & (2 ** 63 - 1)
    # sha256-based, so it is the same in every process and Python version
    assert seeds.stable_int("A") == int.from_bytes(__import__("hashlib").sha256(b"A").digest()[:4], "big")


def test_plan_cells_and_msweep_keys():
    plan = runner.make_plan("msweep", reps=3)
    Ms = {(c.setting, c.M) for c in plan.cells}
    assert Ms == {("A", 1), ("A", 10), ("A", 20), ("A", 30), ("B", 20), ("B", 50), ("B", 80)}
    assert len(plan.cells) == 7 * 5 and plan.n_replications == 7 * 5 * 3
    cov = runner.make_plan("coverage")
    assert [c.method for c in cov.cells] == ["RB", "RB"] and cov.reps == 500
    assert all(dict(c.overrides)["ci_every"] == 10 for c in cov.cells)
    reg = runner.make_plan("regret", overrides={"T": 60, "T0": 20})
    assert all(c.resolve().T == 60 for c in reg.cells)
    # reps do not enter the fingerprint (more reps only add keys); overrides do
    assert runner.make_plan("regret", reps=3).fingerprint() == runner.make_plan("regret", reps=9).fingerprint()
    assert reg.fingerprint() != runner.make_plan("regret").fingerprint()


@pytest.mark.parametrize("kwargs, message", [
    ({"settings": ["C"]}, "unknown setting"),
    ({"methods": ["UCB"]}, "unknown method"),
    ({"reps": 0}, "reps must be an integer >= 1"),
    ({"overrides": {"T0": 900}}, "T0 must lie in"),
    ({"overrides": {"bogus": 1}}, "unknown setting field"),
    ({"seed": -1}, "seed must be"),
])
def test_plan_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        runner.make_plan("regret", **kwargs)


def test_msweep_rejects_M_override():
    with pytest.raises(ValueError, match="m-values"):
        runner.make_plan("msweep", overrides={"M": 5})


# ---------------------------------------------------------------------------------------------
# End to end on the session Ray
# ---------------------------------------------------------------------------------------------

def test_end_to_end_tiny_study(ray_session, tmp_path):
    rc = cli.main("regret", ["--out", str(tmp_path), "--reps", "3", *TINY], replicate=fake_replicate)
    assert rc == 0
    df = storage.load(tmp_path, "regret")
    assert len(df) == 2 * 5 * 3 * 30
    assert list(df.columns) == storage.TRAJECTORY_SCHEMA.names
    assert df["M"].dtype == np.int32 and df["seed"].dtype == np.int64 and df["explored"].dtype == bool
    assert not isinstance(df["setting"].dtype, pd.CategoricalDtype)
    # the whole table loads with plain pandas, too
    raw = pd.read_parquet(tmp_path / "regret")
    assert len(raw) == len(df) and set(raw["method"]) == set(study.METHODS)
    # common random numbers: every method of replication r has the same seed
    n_seeds = df.groupby(["setting", "rep"])["seed"].nunique()
    assert (n_seeds == 1).all()
    assert df.loc[df.rep == 1, "seed"].iloc[0] == seeds.replication_seed(runner.DEFAULT_SEED, "regret",
                                                                          df.loc[df.rep == 1, "setting"].iloc[0], 1)
    manifest = storage.read_manifest(tmp_path, "regret")
    assert manifest["status"] == "complete" and manifest["root_seed"] == runner.DEFAULT_SEED
    assert manifest["overrides"] == {"T": 30, "T0": 10}
    assert manifest["runs"][-1]["computed"] == 30 and manifest["runs"][-1]["ray_resources"]["CPU"] >= 1
    # a rerun computes nothing
    rc = cli.main("regret", ["--out", str(tmp_path), "--reps", "3", *TINY], replicate=fake_replicate)
    assert rc == 0 and storage.read_manifest(tmp_path, "regret")["runs"][-1]["computed"] == 0
    assert not list((tmp_path / "regret").glob("_tmp-*"))


def test_manifest_records_how_the_running_ray_was_started(ray_session, tmp_path, monkeypatch):
    # Ray started by someone else (here: the test session) is "existing"; Ray that connect()
    # started itself keeps its mode for every later study on it (jobs/paper.py runs several)
    assert runner.connect(log=lambda m: None).mode == "existing"
    monkeypatch.setitem(rayconn._CONNECTED, rayconn._job_id(ray_session), "embedded")
    rc = cli.main("regret", ["--out", str(tmp_path), "--reps", "1", "--settings", "A", "--methods", "RB", *TINY],
                  replicate=fake_replicate)
    assert rc == 0 and storage.read_manifest(tmp_path, "regret")["runs"][-1]["ray_mode"] == "embedded"


def test_resume_after_interruption_gives_identical_table(ray_session, tmp_path):
    plan = runner.make_plan("coverage", reps=6, overrides={"T": 30, "T0": 10, "ci_every": 5})
    full = runner.run_study(plan, tmp_path / "full", replicate=fake_replicate, batch_size=4,
                            progress=False)
    assert full.ok and full.computed == 12
    # interrupted after two one-replication batches, then resumed with another batch size
    part = runner.run_study(plan, tmp_path / "resumed", replicate=fake_replicate, batch_size=1,
                            flush_seconds=0, stop_after_batches=2, progress=False,
                            max_in_flight=2)
    assert part.interrupted and 2 <= part.computed < 12
    assert storage.read_manifest(tmp_path / "resumed", "coverage")["status"] == "interrupted"
    rest = runner.run_study(plan, tmp_path / "resumed", replicate=fake_replicate, batch_size=3,
                            progress=False)
    assert rest.ok and rest.stored_before == part.computed and rest.computed == 12 - part.computed
    for what in ("trajectory", "intervals"):
        a, b = storage.load(tmp_path / "full", "coverage", what), storage.load(tmp_path / "resumed", "coverage", what)
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b)


def test_different_configuration_is_refused(ray_session, tmp_path):
    args = ["--out", str(tmp_path), "--reps", "2", "--settings", "A", "--methods", "RB", *TINY]
    assert cli.main("regret", args, replicate=fake_replicate) == 0
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", args + ["--set", "p=0.5"], replicate=fake_replicate)
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.main("regret", args + ["--seed", "7"], replicate=fake_replicate)
    # --fresh discards and recomputes
    assert cli.main("regret", args + ["--seed", "7", "--fresh"], replicate=fake_replicate) == 0
    assert storage.read_manifest(tmp_path, "regret")["root_seed"] == 7
    # more replications of the same configuration extend the table
    assert cli.main("regret", args[:2] + ["--reps", "4"] + args[4:] + ["--seed", "7"],
                    replicate=fake_replicate) == 0
    assert storage.load(tmp_path, "regret")["rep"].nunique() == 4


def test_failing_replication_is_recorded_and_retried(ray_session, tmp_path, capsys):
    bad_seed = seeds.replication_seed(runner.DEFAULT_SEED, "regret", "A", 1)
    args = ["--out", str(tmp_path), "--reps", "3", "--methods", "RB", "ETA", *TINY]
    rc = cli.main("regret", args, replicate=FailingReplicate([bad_seed]))
    assert rc == 1
    assert "2 failed" in capsys.readouterr().err
    fails = storage.load(tmp_path, "regret", "failures")
    assert len(fails) == 2  # both methods of replication 1 of setting A share the seed
    assert set(fails["rep"]) == {1} and set(fails["setting"]) == {"A"}
    assert (fails["seed"] == bad_seed).all() and fails["error"].str.contains("injected failure").all()
    assert fails["traceback"].str.contains("RuntimeError").all()
    df = storage.load(tmp_path, "regret")
    assert df.groupby(["setting", "method", "rep"]).ngroups == 2 * 2 * 3 - 2  # the rest finished
    assert storage.read_manifest(tmp_path, "regret")["status"] == "incomplete"
    # the next run retries only the failed ones
    assert cli.main("regret", args, replicate=fake_replicate) == 0
    assert storage.read_manifest(tmp_path, "regret")["runs"][-1]["computed"] == 2
    assert storage.load(tmp_path, "regret", "failures").empty
    assert storage.load(tmp_path, "regret").groupby(["setting", "method", "rep"]).ngroups == 12


def test_figures_and_summary_from_tiny_run(ray_session, tmp_path):
    common = ["--out", str(tmp_path), "--reps", "3", "--no-progress", "--set", "T=40", "--set", "T0=10"]
    rc = cli.main_paper(common + ["--set", "ci_every=5", "--m-values", "1", "10", "20"], replicate=fake_replicate)
    assert rc == 0
    # the M-sweep's A/M=20 cells are the regret study's A cells: copied, not recomputed
    sweep = storage.read_manifest(tmp_path, "msweep")["runs"][-1]
    assert sweep["reused"] == {"replications": 5 * 3, "from": {"regret": 15}}
    assert sweep["computed"] == 2 * 3 * 5 * 3 - 15
    figs = tmp_path / "figures"
    for stem in ("regret_A", "regret_B", "coverage_A", "coverage_B", "msweep_A",
                 "reg_setting_A_T0_10_T_40_M_1", "err_setting_A_T0_10_T_40_M_1",
                 "reg_setting_B_T0_10_T_40_M_10", "err_setting_B_T0_10_T_40_M_10"):
        for ext in ("pdf", "png"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 1000, stem
    table = pd.read_csv(tmp_path / "summary.csv")
    assert set(table["study"]) == {"regret", "coverage", "msweep"}
    reg = table[table.study == "regret"]
    assert len(reg) == 10 and (reg["reps"] == 3).all() and reg["final_regret_se"].notna().all()
    cov = table[table.study == "coverage"]
    assert cov["cp"].between(0, 1).all() and (cov["cp_reps"] == 3).all()
    md = (tmp_path / "summary.md").read_text()
    assert "| A | RB |" in md and "±" in md
    # jobs/figures.py redraws from the Parquet alone (no Ray)
    for f in figs.iterdir():
        f.unlink()
    assert cli.main_figures(["--out", str(tmp_path)]) == 0
    assert (figs / "regret_A.png").exists() and (figs / "coverage_B.pdf").exists()


def test_real_core_tiny_and_seed_reproduces(ray_session, tmp_path):
    """The real bandit core through the engine; a stored row's seed reproduces it."""
    import study

    rc = cli.main("coverage", ["--out", str(tmp_path), "--reps", "2", "--settings", "A",
                               "--set", "T=24", "--set", "T0=8", "--set", "ci_every=8", "--no-progress"])
    assert rc == 0
    df = storage.load(tmp_path, "coverage")
    assert len(df) == 2 * 24
    row = df[df.rep == 1].iloc[0]
    again = study.run_replication("A", row.method, int(row.seed), M=int(row.M), T=24, T0=8, ci_every=8)
    stored = df[df.rep == 1]
    np.testing.assert_array_equal(stored["avg_regret"].to_numpy(), again.trajectory["avg_regret"])
    np.testing.assert_array_equal(stored["major"].to_numpy(), again.trajectory["major"])
    # what each replication cost is stored with it, one row per replication
    costs = storage.load(tmp_path, "coverage", "costs")
    assert list(costs.columns) == storage.COST_SCHEMA.names and len(costs) == 2
    assert (costs["cpu_seconds"] > 0).all() and (costs["newton_systems"] > 0).all()
    steps = costs[["steps_tie_break", "steps_exact_balls", "steps_identified", "steps_stage2"]].sum(axis=1)
    assert (steps == 24).all() and (costs["steps_stage2"] == 24 - 8).all()
    assert set(again.cost) == set(storage.COST_SCHEMA.names) - {"study", "setting", "method", "M", "rep", "seed"}
    from study.results.costs import cost_summary, format_costs
    summary = cost_summary(tmp_path, "coverage")
    assert summary["replications"].tolist() == [2] and summary["max_over_median"].iloc[0] >= 1.0
    assert "A/RB/M=20: 2 replications" in format_costs("coverage", summary)


# ---------------------------------------------------------------------------------------------
# A two-node cluster (in a subprocess, so that the session Ray stays untouched)
# ---------------------------------------------------------------------------------------------

CLUSTER_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from ray.cluster_utils import Cluster
    import ray
    from study.results import figures
    from study.runner import progress
    from study.runner import rayconn
    from study import runner
    from study.simulation import seeds
    from study.results import storage
    from engine_support import FailingReplicate

    out, tests = sys.argv[1], sys.argv[2]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, runtime_env={"env_vars": {"PYTHONPATH": tests}},
                 log_to_driver=False)
        plan = runner.make_plan("regret", reps=4, settings=["A"], methods=["RB", "ERA"],
                                overrides={"T": 30, "T0": 10})
        report = runner.run_study(plan, out, replicate=FailingReplicate([], sleep=0.3), batch_size=1,
                                  progress=False)
        manifest = storage.read_manifest(out, "regret")
        print(json.dumps({"ok": report.ok, "computed": report.computed,
                          "nodes_used": manifest["runs"][-1]["nodes_used"],
                          "nodes": manifest["runs"][-1]["ray_resources"].get("nodes")}))
    finally:
        ray.shutdown()
        cluster.shutdown()
""")


def test_two_node_cluster(ray_session, tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Unix socket paths are limited
    env = dict(os.environ, RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
               PYTHONPATH=os.pathsep.join(p for p in (SUPPORT_DIR, os.environ.get("PYTHONPATH")) if p))
    env.pop("RAY_ADDRESS", None)
    try:
        res = subprocess.run([sys.executable, "-c", CLUSTER_SCRIPT, str(tmp_path / "two"), SUPPORT_DIR],
                             env=env, capture_output=True, text=True, timeout=240)
    finally:
        subprocess.run(["rm", "-rf", ray_tmp])
    assert res.returncode == 0, res.stderr[-3000:]
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["ok"] and info["computed"] == 8 and info["nodes"] == 2
    assert len(info["nodes_used"]) == 2
    # the same plan on the single-node session Ray gives the same table
    plan = runner.make_plan("regret", reps=4, settings=["A"], methods=["RB", "ERA"],
                            overrides={"T": 30, "T0": 10})
    runner.run_study(plan, tmp_path / "one", replicate=fake_replicate, progress=False)
    pd.testing.assert_frame_equal(storage.load(tmp_path / "two", "regret"),
                                  storage.load(tmp_path / "one", "regret"))


def test_interrupt_handler_records_signals_and_restores_handlers():
    """SIGTERM and SIGINT during a run are recorded (the driver then stops cleanly), never raised;
    the previous handlers come back afterwards; the exit status follows the first signal."""
    import signal
    import time

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    messages = []
    with progress.Interrupts("regret", messages.append) as interrupts:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert interrupts.signals == ["SIGTERM", "SIGINT"] and interrupts.requested
    assert "SIGTERM: stopping" in messages[0] and "SIGINT again" in messages[1]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    report = runner.StudyReport("regret", "/o", 10, 0, 3, 0, 1.0, True, [], signal="SIGTERM")
    assert report.exit_status == 143 and "interrupted by SIGTERM: 3 replications" in report.summary()
