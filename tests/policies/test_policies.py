"""The policy interface (study.Policy / Step / Choice, the registry) and the four baselines from
the dueling-bandit literature: each choice rule against a small hand-worked case, then runs of the
whole loop (edges only, RB-UA = RB where it must be, determinism, user policies, graph='raw')."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import study
from study.simulation.environment import BTLEnvironment
from study.simulation.graph import ComparisonGraph, is_connected
from study.policies import (CoLSTIM, DoubleThompson, EpsilonGreedy, MaxInP, UncertaintyAwareRB, policy_generator,
                            resolve_methods)
from policy_stubs import GRAPH, UNAVAILABLE, FixedGumbel, StubDebias, step  # tests/support

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Hand-worked choices
# ---------------------------------------------------------------------------------------------

def test_thompson_two_independent_draws_by_hand():
    # first draw [0.1, 0.2, 0.8, 0.5]: i_t = 2.  Second draw [0.7, 0.1, 0.9, 0.4]: among 2's
    # neighbours {0, 1, 3} the largest is item 0 (0.7); item 2's own 0.9 does not count.
    db = StubDebias(np.zeros(4), np.eye(4), draws=[[0.1, 0.2, 0.8, 0.5], [0.7, 0.1, 0.9, 0.4]])
    choice = DoubleThompson().select(step(db))
    assert tuple(choice) == (2, 0, False)
    assert len(db.z) == 2 and all(z.shape == (3,) for z in db.z)  # (n-1) d standard normals each
    assert not np.array_equal(db.z[0], db.z[1])  # independent draws from the private generator


def test_thompson_is_greedy_without_phi():
    # theta(t-1) = [0.3, 0.1, 0.2, -0.6]: greedy i_t = 0; neighbours {1, 2}, uniform 0.7 -> index
    # floor(0.7 * 2) = 1 -> item 2.  ETA (greedy, uniform neighbour) picks the same.
    s = step(UNAVAILABLE, theta=[0.3, 0.1, 0.2, -0.6])
    assert tuple(DoubleThompson().select(s)) == (0, 2, False)
    assert tuple(EpsilonGreedy("ETA", 0, 0.25).select(s)) == (0, 2, False)


def test_rb_ua_widest_difference_ci_by_hand():
    # theta(t-1) = [0.3, 0.1, 0.5, -0.9]: i_t = 2, neighbours {0, 1, 3}.  Phi_11 = diag(0.1, 0.4,
    # 0.2, 0.3) with Phi_21 = Phi_12 = 0.25.  Var(theta_2 - theta_j) = Phi_22 + Phi_jj - 2 Phi_2j:
    # j = 0: 0.2 + 0.1 = 0.3; j = 1: 0.2 + 0.4 - 0.5 = 0.1; j = 3: 0.2 + 0.3 = 0.5 -> j_t = 3.
    # (Without the covariance, j = 1 (0.6) would win.)  RB: uniform 0.5 -> floor(0.5 * 3) = 1 -> item 1.
    phi = np.diag([0.1, 0.4, 0.2, 0.3])
    phi[1, 2] = phi[2, 1] = 0.25
    db = StubDebias([0.3, 0.1, 0.5, -0.9], phi)
    theta = [0.3, 0.1, 0.5, -0.9]
    ua = UncertaintyAwareRB("RB-UA", 200, 0.25)
    u = (0.99, 0.6, 0.7, 0.5)
    assert tuple(ua.select(step(db, theta=theta, t=300, uniforms=u))) == (2, 3, False)
    assert tuple(EpsilonGreedy("RB", 200, 0.25).select(step(db, theta=theta, t=300, uniforms=u))) == (2, 1, False)
    # without Phi: RB's uniform neighbour
    assert tuple(ua.select(step(UNAVAILABLE, theta=theta, t=300, uniforms=u))) == (2, 1, False)
    # exploration step (t = 1 explores with probability 1): edge floor(0.6 * 4) = 2 -> (1, 2), end 0.2 -> major 1
    explore = step(db, theta=theta, t=1, uniforms=(0.5, 0.6, 0.2, 0.7))
    assert tuple(ua.select(explore)) == tuple(EpsilonGreedy("RB", 200, 0.25).select(explore)) == (1, 2, True)


def test_maxinp_candidates_and_widest_pair_by_hand():
    # theta_d = [0.5, 1.0, 0.9, -2.4], Phi_11 = diag(0.25, 0.01, 0.09, 0.01), w = 2.
    # Item 0: beaten by 1? 1.0 - 0.5 = 0.5 > 2 sqrt(0.26) = 1.02: no; by 2? 0.4 > 2 sqrt(0.34): no.
    # Item 2: by 1? 0.1 > 2 sqrt(0.10) = 0.63: no.  Item 3: by 1? 3.4 > 2 sqrt(0.02) = 0.28: yes.
    # C = {0, 1, 2}; edges inside: 0-1 (Var 0.26), 0-2 (0.34), 1-2 (0.10) -> 0-2; major = the end
    # with the larger estimate: 2 (0.9 > 0.5).
    db = StubDebias([0.5, 1.0, 0.9, -2.4], np.diag([0.25, 0.01, 0.09, 0.01]))
    assert tuple(MaxInP(width=2.0).select(step(db))) == (2, 0, False)


def test_maxinp_single_candidate_and_no_phi_by_hand():
    # theta_d = [0, 2, -0.5, -1.5], Phi_11 = diag(0.01, 0.01, 0.04, 0.01), w = 2: item 1 beats
    # every other item with confidence (2 > 2 sqrt(0.02), 2.5 > 2 sqrt(0.05), 3.5 > 2 sqrt(0.02)),
    # C = {1}: no edge inside C, so the widest edge with one end in C: 0-1 (0.02) vs 1-2 (0.05)
    # -> (1, 2) with the candidate 1 as the major item.
    db = StubDebias([0.0, 2.0, -0.5, -1.5], np.diag([0.01, 0.01, 0.04, 0.01]))
    assert tuple(MaxInP(width=2.0).select(step(db))) == (1, 2, False)
    # without Phi: a uniformly random edge: floor(0.6 * 4) = 2 -> 1-2, end 0.7 >= 0.5 -> major 2
    assert tuple(MaxInP(width=2.0).select(step(UNAVAILABLE))) == (2, 1, True)


def test_colstim_perturbed_first_and_optimistic_second_by_hand():
    # theta_d = [0.5, 0.4, 0.0, -0.9], sd_i = sqrt(Phi_ii) = [0.1, 0.5, 0.2, 0.3]; Gumbel draws
    # [0, 1, 5, 0] trimmed at c = 2 -> [0, 1, 2, 0]; perturbed utilities
    # [0.5, 0.4 + 0.5, 0.0 + 0.4, -0.9] = [0.5, 0.9, 0.4, -0.9] -> i_t = 1 (untrimmed, item 2 would
    # score 1.0 and win).  Second, among 1's neighbours {0, 2}, with C = 2 and Phi_01 = 0.1:
    # j = 0: 0.5 + 2 sqrt(0.01 + 0.25 - 0.2) = 0.5 + 0.49 = 0.99;
    # j = 2: 0.0 + 2 sqrt(0.04 + 0.25) = 1.077 -> j_t = 2.
    phi = np.diag([0.01, 0.25, 0.04, 0.09])
    phi[0, 1] = phi[1, 0] = 0.1
    db = StubDebias([0.5, 0.4, 0.0, -0.9], phi)
    # (one perturbation per item: CoLSTIM-rev while p_t = 1, the coin-less implementations)
    rev = CoLSTIM(threshold=2.0, width=2.0, shared_on_heads=False)
    choice = rev.select(step(db, rng=FixedGumbel([0.0, 1.0, 5.0, 0.0])))
    assert tuple(choice) == (1, 2, False)
    assert tuple(rev.select(step(UNAVAILABLE))) == (2, 1, True)


def test_isolated_item_is_never_the_major_item():
    # raw graph: item 3 has no neighbour; the argmax runs over items with one (rule in docs/baselines.md)
    graph = ComparisonGraph.from_edges([(0, 1), (1, 2)], 4)
    assert list(graph.playable) == [True, True, True, False] and not graph.connected
    s = step(UNAVAILABLE, theta=[0.1, 0.3, 0.2, 5.0], graph=graph)
    assert tuple(EpsilonGreedy("ETA", 0, 0.25).select(s)) == (1, 2, False)  # neighbours {0, 2}, u 0.7 -> 2
    assert DoubleThompson().select(s).major == 1


# ---------------------------------------------------------------------------------------------
# Whole runs
# ---------------------------------------------------------------------------------------------

SHORT = dict(T=150, T0=50, ci_every=0)


@pytest.mark.parametrize("method", study.ALL_METHODS)
def test_every_policy_compares_only_edges(method):
    r = study.run_replication("A", method, 3, **SHORT)
    allowed = {tuple(e) for e in r.edges.tolist()}
    pairs = {tuple(sorted(p)) for p in zip(r.trajectory["major"].tolist(), r.trajectory["other"].tolist())}
    assert pairs <= allowed
    if method in ("MaxInP", "CoLSTIM"):  # random edges only until Phi exists, then their own rule
        explored = r.trajectory["explored"]
        assert explored[0] and not explored[-20:].any()


def test_rb_ua_is_rb_in_exploration_steps_and_before_phi():
    rb, ua = (study.run_replication("A", m, 3, **SHORT) for m in ("RB", "RB-UA"))
    explored = rb.trajectory["explored"]
    assert np.array_equal(explored, ua.trajectory["explored"]) and explored.any()
    for col in ("major", "other"):
        assert np.array_equal(rb.trajectory[col][explored], ua.trajectory[col][explored])
    assert not np.array_equal(rb.trajectory["other"], ua.trajectory["other"])  # they do differ once Phi exists
    # Setting B at T = 40: 40 rows cannot identify (n-1)d = 90 parameters, Phi never exists, so
    # RB-UA is RB and TS is greedy (= ETA) at every step
    tiny = dict(T=40, T0=20, ci_every=10)
    runs = {m: study.run_replication("B", m, 1, **tiny) for m in ("RB", "RB-UA", "ETA", "TS")}
    assert runs["RB"].ci_available_from is None
    for a, b in (("RB", "RB-UA"), ("ETA", "TS")):
        for col in ("major", "other", "explored", "regret"):
            assert np.array_equal(runs[a].trajectory[col], runs[b].trajectory[col])


def test_randomised_policies_are_deterministic_given_the_seed():
    for method in ("TS", "CoLSTIM"):
        a, b = (study.run_replication("A", method, 5, **SHORT) for _ in range(2))
        for col in ("major", "other", "regret", "rel_error"):
            assert np.array_equal(a.trajectory[col], b.trajectory[col])
    ss = BTLEnvironment(study.SETTINGS["A"].replace(T=5, T0=2), 5).policy_seed
    draws = [policy_generator(ss, name).random(3) for name in ("TS", "TS", "CoLSTIM")]
    assert np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[0], draws[2])
    shared = np.random.default_rng(ss).random(3)  # the shared uniforms' stream is a different one
    assert not np.array_equal(shared, draws[0])


def test_pair_regret_columns():
    r = study.run_replication("A", "ETA", 2, T=60, T0=20, ci_every=0)
    env = BTLEnvironment(r.setting, 2)
    utility = env.contexts @ env.theta_star.T  # (T, n)
    best = utility.max(axis=1)
    t = np.arange(60)
    expected = ((best - utility[t, r.trajectory["major"]]) + (best - utility[t, r.trajectory["other"]])) / 2
    assert np.allclose(r.trajectory["pair_regret"], expected)
    assert np.allclose(r.trajectory["avg_pair_regret"], np.cumsum(expected) / (t + 1))
    assert np.allclose(r.trajectory["regret"], best - utility[t, r.trajectory["major"]])
    frame = r.to_frame()["trajectory"]
    assert list(frame.columns)[-4:] == ["rel_error", "pair_regret", "avg_pair_regret", "before_phi"]
    assert frame["pair_regret"].dtype == np.float64 and frame["avg_pair_regret"].dtype == np.float64


# ---------------------------------------------------------------------------------------------
# User policies and names
# ---------------------------------------------------------------------------------------------

class CountingGreedy:
    """A registered user policy: greedy with the lowest-index neighbour; counts its updates."""

    def __init__(self, setting):
        self.updates = []

    def select(self, step):
        major = int(np.argmax(step.theta @ step.x))
        return study.Choice(major, int(step.graph.neighbours[major][0]), False)

    def update(self, step, choice, wins):
        self.updates.append((step.t, choice.major, choice.other, wins))


def test_registered_and_import_path_policies_run(monkeypatch):
    made = []

    def factory(setting):
        made.append(CountingGreedy(setting))
        return made[-1]

    study.register_policy("counting-greedy", factory)
    try:
        r = study.run_replication("A", "counting-greedy", 4, T=30, T0=10, ci_every=0)
        assert study.policies.check_method("counting-greedy") == "counting-greedy"
    finally:
        study.policies.unregister_policy("counting-greedy")
    assert len(made) == 1 and [u[0] for u in made[0].updates] == list(range(1, 31))
    assert [u[1] for u in made[0].updates] == r.trajectory["major"].tolist()
    assert all(0 <= u[3] <= 20 for u in made[0].updates)  # wins of the opponent out of M = 20
    monkeypatch.syspath_prepend(str(REPO))
    path = "examples.my_policy:Boltzmann"
    a, b = (study.run_replication("A", path, 4, T=30, T0=10, ci_every=0) for _ in range(2))
    assert np.array_equal(a.trajectory["major"], b.trajectory["major"])
    assert {tuple(sorted(p)) for p in zip(a.trajectory["major"], a.trajectory["other"])} <= set(map(tuple, a.edges.tolist()))
    prov = study.policy_provenance(path)
    assert prov["kind"] == "import" and prov["import_path"] == path
    # the hash covers every module of the policy's package (examples/), each recorded by its own hash
    assert prov["files"] == {f.relative_to(REPO).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
                             for f in (REPO / "examples").rglob("*.py")}
    assert {"examples/__init__.py", "examples/my_policy.py"} <= set(prov["files"])
    assert study.policy_provenance("TS")["kind"] == "builtin"


class OffGraph:
    def __init__(self, setting, answer):
        self.answer = answer

    def select(self, step):
        return self.answer


@pytest.mark.parametrize("answer, message", [
    ((0, 3, False), r"policy 'bad' at step t=1 returned \(0, 3\), which is not an edge"),
    ((1, 1, False), "compared item 1 with itself"),
    ((0, 7, False), r"outside \[0, 4\]"),
    ((0.5, 1, False), "expected a Choice"),
    (None, "expected a Choice"),
])
def test_loop_rejects_bad_choices(answer, message):
    with pytest.raises(ValueError, match=message):
        study.run_replication("A", "bad", 0, T=5, T0=2, edges=[(0, 1), (1, 2), (2, 3), (3, 4)],
                              policy=lambda setting: OffGraph(setting, answer))


def test_bad_method_names_are_refused_up_front():
    with pytest.raises(ValueError, match="unknown method 'UCB'"):
        study.policies.check_method("UCB")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        resolve_methods(["RB", "no_such_module_xyz:Policy"])
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        resolve_methods(["study.policies:Nope"])
    with pytest.raises(ValueError, match="unknown method 'missing'"):
        resolve_methods(["RB", "missing", "ETA"])
    assert list(resolve_methods(["RB", "study.policies.thompson:DoubleThompson"])) == [
        "RB", "study.policies.thompson:DoubleThompson"]
    with pytest.raises(ValueError, match="built-in"):
        study.register_policy("RB", CountingGreedy)
    with pytest.raises(ValueError, match="import path"):
        study.register_policy("a:b", CountingGreedy)


# ---------------------------------------------------------------------------------------------
# graph = "raw"
# ---------------------------------------------------------------------------------------------

def test_raw_graph_disconnected_gives_unavailable_cis_and_edges_only():
    setting = study.SETTINGS["B"].replace(graph="raw", T=80, T0=30, ci_every=10)
    # the first seed whose single G(10, 0.15) draw leaves an item without a neighbour
    seed = next(s for s in range(50) if not ComparisonGraph.from_edges(BTLEnvironment(setting, s).edges, 10).playable.all())
    env = BTLEnvironment(setting, seed)
    assert not is_connected(env.edges, 10) and env.graph_draws >= 1
    playable = ComparisonGraph.from_edges(env.edges, 10).playable
    assert not playable.all()
    for method in study.ALL_METHODS:
        r = study.run_replication(setting, method, seed)
        assert r.ci_available_from is None and len(r.intervals["t"]) == 0
        allowed = {tuple(e) for e in r.edges.tolist()}
        assert {tuple(sorted(p)) for p in zip(r.trajectory["major"], r.trajectory["other"])} <= allowed
        assert playable[r.trajectory["major"]].all()
    # the first raw draw is the connected protocol's first draw: same graph when that one is connected
    connected = study.SETTINGS["A"]
    for s in range(20):
        first = BTLEnvironment(connected, s)
        if first.graph_draws == 1:
            assert np.array_equal(BTLEnvironment(connected.replace(graph="raw"), s).edges, first.edges)
            break
    else:
        pytest.fail("no seed with a connected first draw")


def test_raw_graph_settings_and_the_core_on_a_disconnected_graph():
    edges = [(0, 1), (2, 3)]
    with pytest.raises(ValueError, match="connected"):
        study.SETTINGS["A"].replace(edges=edges)
    with pytest.raises(ValueError, match="graph must be one of"):
        study.SETTINGS["A"].replace(graph="tree")
    r = study.run_replication("A", "RB", 0, graph="raw", edges=edges, T=40, T0=10, ci_every=10)
    assert set(r.trajectory["major"].tolist()) <= {0, 1, 2, 3} and r.ci_available_from is None
    # the estimator's own debias (not the loop's shortcut) also reports Psi_t singular
    rng = np.random.default_rng(0)
    i = np.array([0, 2] * 200)
    j = i + 1
    X = rng.normal(size=(400, 2)) + 1.0
    wins = rng.binomial(10, 0.5, 400).astype(float)
    theta = study.fit_btl(i, j, X, wins, 10, 5, ridge=1.0)
    assert not study.debias(theta, i, j, X, wins, 10).available
