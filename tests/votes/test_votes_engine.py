"""The votes engine: its verdicts are the stopping rule's on a fresh fit of the same counts, runs
are deterministic and share their votes across methods (common random numbers), the frames keep
the contract, bad names are refused naming the allowed values, and every method runs on every arena."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import study
from study.core.stopping import separation
from study.votes import ARENAS, LEVEL, METHODS, TOPS, check_arena, check_method, default_budget, default_reps, replay
from study.votes.arenas import build_episode, votes_per_step
from study.votes.engine import Replay, look_steps


def _fresh_result(rows, n, se):
    """The debiased estimate recomputed from scratch on the rows (fit_btl + debias); None without one."""
    try:
        theta = study.fit_btl(rows["i"], rows["j"], rows["X"], rows["wins"], rows["m"], n, ties=rows["ties"])
    except ValueError:
        return None
    result = study.debias(theta, rows["i"], rows["j"], rows["X"], rows["wins"], rows["m"], ties=rows["ties"], se=se)
    return result if result.available else None


def _fresh_verdicts(result, contexts, k, budget):
    """The stopping rule at every decision context, the level split over the contexts."""
    level = 1.0 - (1.0 - LEVEL) / len(contexts)
    return [separation(result, x, top=k, level=level, anytime=True, tightest_at=float(budget)) for x in contexts]


@pytest.mark.parametrize("arena, method, budget, seed", [("llm", "uniform", 3_000, 4), ("categories", "lucb", 24_000, 4),
                                                         ("A", "lucb", 20_000, 9)])  # A: k = 3 decided, k = 1 not
def test_the_verdict_at_each_look_is_the_rule_on_a_fresh_fit(arena, method, budget, seed):
    run = Replay(arena, method, np.random.SeedSequence(seed), budget=budget)
    ep = run.episode
    first_decided = {}
    while not run.done():
        run.step()
        if run.t in run._look_set:
            rows = {key: np.array(value, copy=True) for key, value in run.rows().items()}
            run.look()
            result = _fresh_result(rows, ep.n_items, ep.se)
            for k in run.tops:
                if k in first_decided or result is None:
                    continue
                verdicts = _fresh_verdicts(result, ep.decision_contexts, k, budget)
                if all(v.decided for v in verdicts):
                    first_decided[k] = (run.votes(), [frozenset(v.top) for v in verdicts])
    decisions, _ = run.frames()
    assert first_decided, "nothing was decided: the test checks nothing"
    for row in decisions.itertuples():
        if row.top in first_decided:
            votes, sets = first_decided[row.top]
            assert row.decided and row.votes == votes
            assert row.declared == ";".join(",".join(str(i) for i in sorted(s)) for s in sets)
            assert row.wrong == (sets != ep.true_tops(row.top))
        else:
            assert not row.decided and row.votes == budget and row.declared == "" and not row.wrong


def test_same_seed_same_run_and_every_field_of_the_contract():
    seed = np.random.SeedSequence(99, spawn_key=(2, 3))
    one = replay("A", "MaxPairUCB", seed, budget=4_000)
    two = replay("A", "MaxPairUCB", np.random.SeedSequence(99, spawn_key=(2, 3)), budget=4_000)
    pd.testing.assert_frame_equal(one.decisions, two.decisions)
    pd.testing.assert_frame_equal(one.fixed_budget, two.fixed_budget)
    assert (one.votes_told, one.looks) == (two.votes_told, two.looks)
    assert (one.arena, one.method, one.n_items, one.budget) == ("A", "MaxPairUCB", 5, 4_000)
    assert one.cpu_seconds > 0
    d = one.decisions
    assert list(d.columns[:5]) == ["top", "decided", "votes", "wrong", "declared"]
    assert d.top.tolist() == [1, 3]  # k < n = 5 only
    assert d.dtypes["top"] == np.int64 and d.dtypes["decided"] == bool and d.dtypes["votes"] == np.int64
    assert d.dtypes["wrong"] == bool and all(isinstance(v, str) for v in d.declared)
    f = one.fixed_budget
    assert list(f.columns[:3]) == ["votes", "top", "right"]
    _, checkpoints = look_steps(5, 10, 20, 4_000)
    assert f.votes.tolist() == [s * 20 for s in checkpoints for _ in (1, 3)] and f.top.tolist() == [1, 3] * len(
        checkpoints)
    assert f.votes.max() == 4_000 and f.dtypes["right"] == bool


def test_one_seed_object_serves_every_method_alike():
    """spawn() counts children on the SeedSequence: a seed reused across replays must not drift."""
    seed = np.random.SeedSequence(5, spawn_key=(1, 2))
    runs = []
    for method in ("uniform", "fisher", "uniform"):
        run = Replay("categories", method, seed, budget=600)
        run.run()
        runs.append(run)
    assert np.array_equal(runs[0].counts, runs[2].counts) and runs[0].counts.sum() == 600
    assert np.array_equal(runs[0].episode.context_ids, runs[1].episode.context_ids)
    assert seed.n_children_spawned == 0


def test_a_decided_set_is_held_at_later_checkpoints():
    run = replay("llm", "lucb", np.random.SeedSequence(8), budget=4_000)
    decided = run.decisions.set_index("top")
    for row in run.fixed_budget.itertuples():
        if decided.decided[row.top] and row.votes >= decided.votes[row.top]:
            assert row.decided and row.right == (not decided.wrong[row.top])


@pytest.mark.parametrize("arena", list(ARENAS))
def test_common_random_numbers_across_methods(arena):
    """Two methods on one seed see the same vote behind the same (pair, vote index), whichever end
    is the major item, and the same contexts, theta(0) and truth."""
    M = votes_per_step(arena)
    seen = {}
    for method in ("uniform", "fisher"):
        run = Replay(arena, method, np.random.SeedSequence(21), budget=200 * M)
        draw = run.episode.source.draw
        log = {}

        def spy(t, a, b, draw=draw, log=log):
            codes = draw(t, a, b)
            lo_view = codes if a < b else np.where(codes == 2, 2, 1 - codes)  # as if lo were the major item
            log[(t, min(a, b), max(a, b))] = lo_view.copy()
            return codes
        run.episode.source = type("Spy", (), {"draw": staticmethod(spy)})()
        run.run()
        seen[method] = (log, run.episode)
    (log_u, ep_u), (log_f, ep_f) = seen["uniform"], seen["fisher"]
    assert np.array_equal(ep_u.contexts, ep_f.contexts) and np.array_equal(ep_u.theta0, ep_f.theta0)
    assert np.array_equal(ep_u.theta_star, ep_f.theta_star) and np.array_equal(ep_u.edges, ep_f.edges)
    # every pair at every step, from a fresh episode: the same codes in both orientations
    ep = build_episode(arena, np.random.SeedSequence(21), 200)
    for (t, lo, hi), codes in list(log_u.items())[:50] + list(log_f.items())[:50]:
        assert np.array_equal(ep.draw(t, lo, hi), codes)
        swapped = ep.draw(t, hi, lo)
        assert np.array_equal(np.where(swapped == 2, 2, 1 - swapped), codes)
    common = set(log_u) & set(log_f)
    for key in common:
        assert np.array_equal(log_u[key], log_f[key])


def test_bad_names_and_arguments_are_refused_naming_the_allowed_values():
    with pytest.raises(ValueError, match=r"unknown arena 'arena7'; allowed: \['arena10'"):
        replay("arena7", "uniform", np.random.SeedSequence(1), budget=100)
    with pytest.raises(ValueError, match=r"unknown method 'greedy'; allowed: \['uniform', 'arena_active'"):
        replay("arena10", "greedy", np.random.SeedSequence(1), budget=100)
    with pytest.raises(ValueError, match="allowed"):
        check_arena(None)
    with pytest.raises(ValueError, match="allowed"):
        check_method("RB ")
    with pytest.raises(ValueError, match="budget must be a positive multiple of M = 10, the votes per step of arena 'arena10'"):
        replay("arena10", "uniform", np.random.SeedSequence(1), budget=105)
    with pytest.raises(ValueError, match="level"):
        replay("arena10", "uniform", np.random.SeedSequence(1), budget=100, level=1.5)
    with pytest.raises(ValueError, match="tops"):
        replay("arena10", "uniform", np.random.SeedSequence(1), budget=100, tops=(0,))
    with pytest.raises(ValueError, match="seed"):
        replay("arena10", "uniform", "seed", budget=100)


def test_the_public_names():
    assert METHODS[0] == "uniform" and {"arena_active", "fisher", "lucb", "RB", "ETA", "MaxPairUCB"} <= set(METHODS)
    assert TOPS == (1, 3, 10) and LEVEL == 0.95
    assert list(ARENAS)[:4] == ["arena10", "arena30", "arena30-btl", "arena129"]
    for arena in ARENAS:
        for quick in (False, True):
            budget = default_budget(arena, quick=quick)
            assert budget % votes_per_step(arena) == 0 and budget > 0 and default_reps(arena, quick=quick) >= 1
        assert default_budget(arena, quick=True) <= default_budget(arena)
    with pytest.raises(ValueError, match="allowed"):
        default_budget("nope")


def test_the_look_grid_is_geometric_and_shared():
    looks, checkpoints = look_steps(30, 1, 10, 100_000)
    votes = np.array(looks) * 10
    assert votes[0] == 60 and votes[-1] == 100_000  # 2 n d votes first
    assert set(checkpoints) <= set(looks) and [c * 10 for c in checkpoints] == [6250, 12500, 25000, 50000, 100000]
    grid = votes[~np.isin(looks, checkpoints)]
    assert np.all(grid[1:] / grid[:-1] <= 1.05 + 10 / grid[:-1] + 1e-12)  # every 5% more votes (whole steps)


@pytest.mark.parametrize("arena", list(ARENAS))
def test_every_method_runs_on_every_arena(arena):
    M = votes_per_step(arena)
    budget = {"arena129": 3_000, "llm": 300}.get(arena, 60 * M)
    for method in METHODS:
        run = replay(arena, method, np.random.SeedSequence(3, spawn_key=(1,)), budget=budget)
        assert run.votes_told <= budget and run.looks >= 1
        assert len(run.decisions) == len([k for k in TOPS if k < run.n_items])
        assert not run.decisions.wrong.any() or run.decisions.decided[run.decisions.wrong].all()
