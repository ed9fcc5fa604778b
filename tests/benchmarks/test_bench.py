"""The benchmarks' helpers compute what they claim (their timings are not asserted)."""
import numpy as np
import pytest

from benchmarks import bench, cores


def test_breakdown_accounts_for_every_step_and_debias_call():
    seconds, steps = bench.breakdown("A", "BT-UCB2", seeds=[1])
    setting = bench.SETTINGS["A"]
    stage1 = sum(steps[r] for r in bench.REGIMES if r.startswith("stage 1"))
    assert stage1 == setting.T0 and steps["stage 2"] == setting.T - setting.T0
    # the UCB index needs the debiased fit at every exploitation step (all t > T0); it is computed
    # once per step, on request, and shared with the CI grid, so exploration steps cost none
    assert setting.T - setting.T0 <= steps["debias"] <= setting.T
    assert 0 < sum(seconds[r] for r in bench.REGIMES) <= seconds["total"]


def test_batched_chord_iteration_computes_the_same_step():
    loop, batched, diff = bench.chord_batching(replications=3, rows=40, params=12, repeats=2)
    assert diff < 1e-10 and loop > 0 and batched > 0


def test_row_space_fit_is_stationary_on_its_affine_set():
    # independent check: at the returned point the gradient of L is orthogonal to the row space
    rng = np.random.default_rng(4)
    design = rng.normal(size=(6, 10))  # 6 rows, 10 parameters: unidentified
    m = np.full(6, 20.0)
    wins = rng.integers(3, 18, 6).astype(float)
    start = rng.normal(size=10)
    beta, steps = bench.row_space_fit(design, m, wins, start, 1e-10)
    margins = design @ beta
    assert np.allclose(margins, np.log(wins / (m - wins)), atol=1e-8)  # full row rank: saturated fit
    assert np.allclose(np.linalg.lstsq(design, design @ (beta - start), rcond=None)[0], beta - start, atol=1e-8)
    assert 0 < steps < 100


@pytest.mark.skipif(not cores.has_history(), reason=cores.NO_HISTORY)
def test_long_horizon_case_runs_both_cores_on_the_same_replication():
    current = bench._timed_in_child(6, 40, 2, "current")
    previous = bench._timed_in_child(6, 40, 2, "previous")
    assert current[0] > 0 and current[2] > 0  # CPU seconds, peak RSS
    assert np.array_equal(current[5], previous[5])  # the same choices (6 items: the direct solver in both)
    assert bench.long_setting(100, 10_000).T0 == 4000


def test_paper_study_estimate_counts_every_computed_replication():
    from benchmarks import paper_study
    jobs = paper_study.paper_jobs()
    groups = [j for j in jobs if len(j["methods"]) > 1]
    assert {(j["setting"], j["M"]) for j in groups} == {("A", 20), ("A", 1), ("A", 10), ("A", 30), ("B", 50),
                                                        ("B", 20), ("B", 80)}
    for j in jobs:  # one CPU second per replication of each method: the estimate counts replications
        j["cpu"] = float(len(j["methods"]))
    est = paper_study.study_cpu(jobs)
    assert est["regret"] == 2 * 200 * 5 and est["coverage"] == 2 * 500 and est["msweep"] == 5 * 200 * 5
    assert est["total"] == 2000 + 1000 + 5000  # the 8,000 computed replications of jobs/paper.py


def test_paper_study_child_measures_the_tree_it_runs_in():
    from benchmarks import paper_study
    job = {"setting": "A", "M": 20, "ci_every": 0, "methods": ["RB"]}
    (out,) = paper_study.run_child(paper_study.ROOT, [job], [3])
    assert out["cpu"] > 0 and len(out["digest"]) == 16 and out["methods"] == ["RB"]


@pytest.mark.skipif(not cores.has_history(), reason=cores.NO_HISTORY)
def test_paired_replications_summarise_both_cores():
    from benchmarks import paired
    setting, rows = paired.paired(6, 40, [2], ci_every=20)
    (old, new, differ, old_cpu, new_cpu), = rows
    assert set(old) == set(new) == {"R(T)", "error(T0)", "error(T)", "CP(T0)", "CP(T)"}
    assert differ == 0 and abs(old["R(T)"] - new["R(T)"]) < 1e-9  # 6 items: the direct solver in both
    assert old_cpu > 0 and new_cpu > 0 and setting.T0 == 16


def test_trajectories_of_two_runs_compare_choice_by_choice(tmp_path, capsys):
    from benchmarks import trajectories
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    trajectories.run(6, 40, [3, 4], str(first))
    trajectories.run(6, 40, [3], str(second))
    capsys.readouterr()
    trajectories.compare(str(first), str(second))  # the seeds both hold: one
    out = capsys.readouterr().out
    assert "1 seeds; identical choices at every step in 1" in out
    assert "from T0 on max 0.0e+00" in out  # the same code: the same numbers
    data = np.load(first)
    assert data["major3"].shape == (40,) and int(data["T0"]) == 16


def test_regime_table_divides_each_regimes_cpu_by_its_steps():
    from benchmarks import regimes
    (total,) = [regimes.run_child(regimes.ROOT, "A", ["RB"], [3])]
    setting = bench.SETTINGS["A"]
    assert sum(total[f"steps_{r}"] for r in regimes.STAGE1) == setting.T0
    assert total["steps_stage2"] == setting.T - setting.T0
    rates = regimes.per_step(total)
    stage1 = sum(total[f"cpu_{r}"] for r in regimes.STAGE1) / setting.T0
    assert abs(rates["stage1"] - 1e6 * stage1) <= 1e-9 * rates["stage1"]
    assert rates["stage2"] == 1e6 * total["cpu_stage2"] / total["steps_stage2"] > 0


def test_regime_children_take_the_settings_overrides():
    from benchmarks import regimes
    total = regimes.run_child(regimes.ROOT, "A", ["RB"], [3], {"T": 40, "T0": 15, "tie_break": "exact"})
    assert sum(total[f"steps_{r}"] for r in regimes.STAGE1) == 15
    assert total["steps_stage2"] == 25


def test_exact_replay_pairs_each_refit_with_the_reference_trees(tmp_path):
    from benchmarks import exact_replay
    reference = exact_replay.import_reference(str(exact_replay.ROOT), tmp_path, name="study_replay_test")
    assert reference[0].__name__ == "study_replay_test.core.mle"
    calls = exact_replay.capture("A", ["RB"], [1], T=30, T0=12)
    assert len(calls) == 12 and all(data.t == k + 1 for k, (data, _, _) in enumerate(calls))
    rows = exact_replay.replay(calls, reference, reps=1)
    assert {path for path, *_ in rows} <= set(exact_replay.PATHS) and "balls" in {path for path, *_ in rows}
    assert all(apart == 0.0 and ref > 0 and cur > 0 for _, ref, cur, apart in rows)  # the same code: the same answers


def test_exact_replay_refuses_an_unknown_commit_before_any_work(capsys):
    from benchmarks import exact_replay
    with pytest.raises(SystemExit):
        exact_replay.main(["--ref", "no-such-commit"])
    assert "--ref: 'no-such-commit' is neither a commit" in capsys.readouterr().err


def test_long_horizon_case_under_a_commits_package_is_the_same_replication():
    cpu, wall, error, major = bench.timed_commit(bench.ROOT, 6, 40, 2)  # the tree itself as the "commit"
    current = bench._timed_in_child(6, 40, 2, "current")
    assert cpu > 0 and np.array_equal(major, current[5]) and abs(error - current[4]) < 1e-12


def test_confined_policy_saturated_mode_times_every_variant_each_round():
    from benchmarks import confined_policy
    from study.policies import confine
    if not confine.status()["available"]:
        pytest.skip("no kernel confinement here")
    spans = confined_policy.saturated("A", 30, 1, 2, ["polling", "blocking"], workers=1)
    assert sorted(spans) == ["RB", "blocking", "polling"]
    assert all(len(v) == 2 and min(v) > 0 for v in spans.values())
