"""User code cannot reach the stored results (issue 18, item 3): whatever a policy does to what a
step hands it -- the context, theta(t-1), the debiased result, the graph -- a write raises (so
that a policy checker can name it) and the replication's numbers are those of a well-behaved
policy, value for value."""
from __future__ import annotations

import gc
import sys
import types

import numpy as np
import pytest

import study
import study.simulation.environment
import study.simulation.graph
from study.policies import make_policy

RUN = dict(T=150, T0=40, ci_every=10)  # the debiased CI exists from t ~ 100 (Setting A)


class Meddler:
    """RB, except that every step it tries every way of writing into what the step hands it and
    records which ones got through."""

    got_through: list = []
    refused: list = []

    def __init__(self, setting):
        self.inner = make_policy("RB", setting)

    def _try(self, label, action):
        try:
            action()
        except (ValueError, TypeError, AttributeError) as exc:
            type(self).refused.append((label, str(exc)))
        else:
            type(self).got_through.append(label)

    def select(self, step):
        db = step.debiased()

        def scale_x():
            step.x *= 10.0

        def flip_x():
            step.x.flags.writeable = True
            step.x[:] = -step.x

        def via_base_x():
            base = step.x.base
            base.flags.writeable = True
            base[...] = base * 10.0

        def flip_theta():
            step.theta.flags.writeable = True
            step.theta[:] = 0.0

        def write_theta_d():
            db.theta_d[...] = 123.0

        def flip_theta_d():
            db.theta_d.flags.writeable = True
            db.theta_d[...] = 123.0

        def via_base_theta_d():
            base = db.theta_d.base
            base.flags.writeable = True
            base[...] = 123.0

        def write_cov():
            db.cov[...] = 0.0  # computed on demand in the policy's copy

        def write_factor():
            db.factor[...] = 1.0

        def flip_adjacency():
            step.graph.adjacency.flags.writeable = True
            step.graph.adjacency[...] = True

        for label, action in (("x *= 10", scale_x), ("x flag", flip_x), ("x base", via_base_x),
                              ("theta flag", flip_theta), ("theta_d write", write_theta_d),
                              ("theta_d flag", flip_theta_d), ("theta_d base", via_base_theta_d),
                              ("cov write", write_cov), ("factor write", write_factor),
                              ("adjacency flag", flip_adjacency)):
            if label.startswith(("theta_d", "cov", "factor")) and not db.available:
                continue
            self._try(label, action)
        return self.inner.select(step)


@pytest.mark.parametrize("setting, seed", [("A", 3), ("A", 8)])
def test_a_policy_that_writes_into_its_step_changes_nothing_stored(setting, seed):
    Meddler.got_through, Meddler.refused = [], []
    meddled = study.run_replication(setting, "meddler", seed, policy=Meddler, **RUN)
    plain = study.run_replication(setting, "RB", seed, **RUN)
    # the only writes that "got through" are into the policy's own private copies ...
    assert set(Meddler.got_through) <= {"x base", "theta_d base"}, Meddler.got_through
    # ... the plain writes raise a clear error, a policy checker can name them ...
    refused = dict(Meddler.refused)
    assert "read-only" in refused["x *= 10"] and "read-only" in refused["theta_d write"]
    assert "WRITEABLE" in refused["x flag"] and "WRITEABLE" in refused["theta flag"]
    # ... and none reaches the loop: the trajectory and the intervals are RB's, value for value
    frames, expected = meddled.to_frame(), plain.to_frame()
    for what in ("trajectory", "intervals"):
        # (before_phi records that the meddler asks for the debiased estimate, which RB never does)
        drop = ["method", "before_phi"]
        a, b = frames[what].drop(columns=drop, errors="ignore"), expected[what].drop(columns=drop, errors="ignore")
        assert len(b) > 0
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert not (frames["trajectory"]["regret"] < -1e-12).any()


def test_a_shared_debiased_result_is_not_rewritten_through_the_policy():
    """The issue's case: a policy writes into step.debiased() in place, and the CI grid had
    already recorded that result (it is computed at the end of step t-1 and shared)."""

    class Overwrite:
        def __init__(self, setting):
            self.inner = make_policy("RB", setting)

        def select(self, step):
            db = step.debiased()
            if db.available:
                try:
                    db.theta_d += 100.0
                except ValueError:
                    pass
            return self.inner.select(step)

    meddled = study.run_replication("A", "overwrite", 5, policy=Overwrite, **RUN).to_frame()["intervals"]
    plain = study.run_replication("A", "RB", 5, **RUN).to_frame()["intervals"]
    assert len(plain) > 0
    np.testing.assert_array_equal(meddled["estimate"].to_numpy(), plain["estimate"].to_numpy())


@pytest.mark.parametrize("args", [(True, False), (0, True), (1.0, 2), ("0", 1), (0, 1, "yes")])
def test_choice_refuses_what_is_not_an_item(args):
    with pytest.raises(TypeError, match="Choice"):
        study.Choice(*args)
    assert study.Choice(np.int64(2), 3, np.bool_(True)) == (2, 3, True)


def test_loop_refuses_a_bool_item_in_a_plain_tuple():
    class Bools:
        def __init__(self, setting):
            pass

        def select(self, step):
            return (True, False, False)

    with pytest.raises(ValueError, match="expected a Choice"):
        study.run_replication("A", "bools", 0, T=5, T0=2, edges=[(0, 1), (1, 2), (2, 3), (3, 4)], policy=Bools)


# --- issue 24: a policy cannot see the truth, and the record is the loop's -----------------------

def _reachable(*roots) -> list:
    """Every object reachable from ``roots`` by reference (attributes, slots, containers, bound
    methods' ``__self__``, closure cells, defaults), short of modules, classes and functions'
    globals (through which the whole interpreter is reachable)."""
    module_dicts = {id(vars(m)) for m in list(sys.modules.values()) if m is not None and hasattr(m, "__dict__")}
    seen, todo, found = set(), list(roots), []
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)) or id(obj) in module_dicts:
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, types.FunctionType):
            refs = [obj.__closure__, obj.__defaults__, obj.__kwdefaults__]
        else:
            refs = gc.get_referents(obj)
        todo.extend(r for r in refs if r is not None)
    return found


class Spy:
    """RB that keeps what it is handed: the factory's setting and every step."""

    handed: list = []

    def __init__(self, setting):
        type(self).handed.append(setting)
        self.inner = make_policy("RB", setting)

    def select(self, step):
        type(self).handed.append(step)
        step.debiased()  # so that the debiased result is among what it was handed
        return self.inner.select(step)


def _replay_setting():
    from study.llm.runs import Replay, llm_setting
    return llm_setting(T=40, T0=20), Replay("llm")


@pytest.mark.parametrize("which", ["A", "B", "llm"])
def test_a_policy_cannot_obtain_the_truth_through_anything_it_is_handed(which):
    """Before: ``step.setting.theta_star`` (and the factory's setting) handed theta* to the policy
    in A and B (a policy reading it got R(T) = 0); the LLM replay's setting carries it as an array."""
    Spy.handed = []
    if which == "llm":
        setting, replay = _replay_setting()
        replay(setting, "spy", 2, policy=Spy)
        truth = replay.environment(setting, 2).theta_star
    else:
        setting = study.resolve_setting(which, T=80, T0=30)
        study.run_replication(setting, "spy", 2, policy=Spy)
        truth = setting.theta_star_centred
    factory_setting, steps = Spy.handed[0], Spy.handed[1:]
    assert len(steps) == setting.T and all(s.setting is steps[0].setting for s in steps)
    for handed in (factory_setting, steps[0].setting):
        for name in ("truth", "theta_star", "theta_star_centred", "draw_truth"):
            with pytest.raises(AttributeError, match="cannot see the truth"):
                getattr(handed, name)
        assert handed.n_items == setting.n_items and handed.T0 == setting.T0 and handed.warmup == setting.warmup
        assert "truth" not in handed.to_dict()
        with pytest.raises(AttributeError, match="read-only"):
            handed.T0 = 0
    forbidden = (study.Setting, study.simulation.environment.BTLEnvironment)
    for obj in _reachable(factory_setting, *steps[::10]):
        assert not isinstance(obj, forbidden), type(obj)
        if isinstance(obj, np.ndarray) and obj.shape == truth.shape and obj.dtype.kind == "f":
            assert not np.allclose(obj, truth) and not np.allclose(obj, truth + truth.mean(axis=0)), obj
        assert not (isinstance(obj, str) and obj in ("paired", "identity"))


class FalsifiesTheRecord:
    """MaxInP (which asks for the debiased estimate at every step), but marking the copy it is
    handed unavailable (the issue: the stored before_phi became 120 of 120 steps instead of 48,
    the same pairs)."""

    def __init__(self, setting):
        self.inner = make_policy("MaxInP", setting)

    def select(self, step):
        choice = self.inner.select(step)
        step.debiased().available = False
        return choice


def test_before_phi_is_the_loops_record_not_the_policys_copy():
    honest = study.run_replication("A", "MaxInP", 3, T=120, T0=48)
    falsified = study.run_replication("A", "MaxInP", 3, T=120, T0=48, policy=FalsifiesTheRecord)
    assert 0 < honest.trajectory["before_phi"].sum() < 120
    for column in ("major", "other", "explored", "before_phi"):
        np.testing.assert_array_equal(falsified.trajectory[column], honest.trajectory[column])


@pytest.mark.parametrize("explored", ["False", 0, 1, None, np.float64(0.0)])
def test_explored_must_be_a_bool(explored):
    """Before: ``explored="False"`` (a string) was stored as explored at every step."""

    class Stringly:
        def __init__(self, setting):
            self.inner = make_policy("ETA", setting)

        def select(self, step):
            major, other, _ = self.inner.select(step)
            return major, other, explored

    with pytest.raises(ValueError, match="explored=.*must be a bool"):
        study.run_replication("A", "stringly", 0, T=5, T0=2, policy=Stringly)


class RewritesItsGraph:
    """Makes its graph's adjacency writable through ``.base`` (before: it could, and the run then
    stored pairs that are not edges), else swaps the frozen graph's adjacency for its own."""

    outcome: list = []

    def __init__(self, setting):
        self.inner = make_policy("ETA", setting)

    def select(self, step):
        graph = step.graph
        try:
            graph.adjacency.base.flags.writeable = True
            graph.adjacency.base[...] = True
            type(self).outcome.append("written")
        except (ValueError, AttributeError):
            type(self).outcome.append("refused")
        object.__setattr__(graph, "adjacency", np.ones_like(graph.adjacency))  # the policy's own copy only
        return study.Choice(0, 1, False) if step.t > 2 else self.inner.select(step)


def test_the_graph_a_policy_is_handed_is_a_copy_its_writes_cannot_reach_the_run():
    edges = [(0, 2), (2, 1), (1, 3), (3, 4)]  # (0, 1) is not an edge
    RewritesItsGraph.outcome = []
    with pytest.raises(ValueError, match=r"returned \(0, 1\), which is not an edge"):
        study.run_replication("A", "rewrites", 0, T=10, T0=4, edges=edges, policy=RewritesItsGraph)
    assert RewritesItsGraph.outcome and set(RewritesItsGraph.outcome) == {"refused"}
    graph = study.simulation.graph.ComparisonGraph.from_edges(edges, 5)
    for array in (graph.edges, graph.adjacency, graph.playable, *graph.neighbours):
        for target in (array, array.base):
            if isinstance(target, np.ndarray):
                with pytest.raises(ValueError):
                    target.flags.writeable = True
