"""The three graph protocols (``Setting.graph``): what each accepts of a G(n, p) draw, that they read
the same draws (so that replication r pairs across protocols), and the no-isolated-item protocol
end to end on a disconnected graph."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.simulation.environment import BTLEnvironment
from study.simulation.graph import GRAPHS, ComparisonGraph, draw_graph, is_connected
from study.simulation.seeds import seed_sequence


def _draws(n, p, seed, count):
    """The first ``count`` G(n, p) draws of a replication's graph stream, computed independently of
    graph.py: the upper-triangle pairs in row-major order, an edge where its uniform is below p."""
    rng = np.random.default_rng(seed_sequence(seed).spawn(6)[0])
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    return [[pairs[k] for k, u in enumerate(rng.random(len(pairs))) if u < p] for _ in range(count)]


def _first(draws, n, rule):
    return next(k for k, edges in enumerate(draws) if rule(edges, n))


def _no_isolated(edges, n):
    return {v for e in edges for v in e} == set(range(n))


def _connected(edges, n):
    return bool(edges) and is_connected(np.array(edges), n)


@pytest.mark.parametrize("name", ["A", "B"])
def test_each_protocol_keeps_the_first_draw_it_accepts_from_the_same_stream(name):
    setting = study.SETTINGS[name]
    n, p = setting.n_items, setting.edge_probability
    kinds = {"raw": 0, "no_isolated": 0, "connected": 0, "no_isolated_disconnected": 0}
    for seed in range(40):
        draws = _draws(n, p, seed, 400)
        expected = {"raw": _first(draws, n, lambda e, n: len(e) > 0), "no_isolated": _first(draws, n, _no_isolated),
                    "connected": _first(draws, n, _connected)}
        for protocol, k in expected.items():
            env = BTLEnvironment(setting.replace(graph=protocol), seed)
            assert env.graph_draws == k + 1, (protocol, seed)
            assert [tuple(e) for e in env.edges.tolist()] == draws[k], (protocol, seed)
        assert expected["raw"] <= expected["no_isolated"] <= expected["connected"]
        kinds["no_isolated_disconnected"] += not _connected(draws[expected["no_isolated"]], n)
        for protocol in GRAPHS:
            kinds[protocol] += expected[protocol] == 0
    # the protocols differ on these seeds: some no-isolated graphs are disconnected
    assert kinds["no_isolated_disconnected"] > 0


def test_protocols_pair_where_the_weaker_draw_meets_the_stronger_rule():
    setting = study.SETTINGS["B"]
    paired = {"connected": 0, "no_isolated": 0}
    for seed in range(60):
        env = {g: BTLEnvironment(setting.replace(graph=g), seed) for g in GRAPHS}
        ni = env["no_isolated"].edges
        if is_connected(ni, 10):  # the first no-isolated draw is connected: the connected protocol keeps it
            assert np.array_equal(ni, env["connected"].edges)
            paired["connected"] += 1
        else:
            assert env["no_isolated"].graph_draws < env["connected"].graph_draws
        if _no_isolated(env["raw"].edges.tolist(), 10):
            assert np.array_equal(env["raw"].edges, ni)
            paired["no_isolated"] += 1
        # theta(0), contexts and outcomes do not depend on the protocol
        assert np.array_equal(env["raw"].contexts, env["connected"].contexts)
        assert np.array_equal(env["no_isolated"].theta0, env["connected"].theta0)
    assert paired["connected"] and paired["no_isolated"]


def test_no_isolated_refuses_what_it_must_and_explains():
    with pytest.raises(ValueError, match=r"items \[4\] without an edge"):
        study.SETTINGS["A"].replace(graph="no_isolated", edges=[(0, 1), (2, 3), (1, 2)])
    ok = study.SETTINGS["A"].replace(graph="no_isolated", edges=[(0, 1), (2, 3), (3, 4)])
    assert not is_connected(np.array(ok.edges), 5)
    with pytest.raises(ValueError, match="graph must be one of"):
        draw_graph(5, 0.3, np.random.default_rng(0), "isolated")
    with pytest.raises(ValueError, match="without an isolated item in max_graph_draws=3"):
        draw_graph(30, 0.01, np.random.default_rng(0), "no_isolated", max_draws=3)
    # out of reach before any draw: the bound is P(item 0 has an edge), not connectivity's
    with pytest.raises(ValueError, match="has no isolated item with probability at most"):
        study.SETTINGS["B"].replace(graph="no_isolated", n_items=40, truth="normal", p=1e-12)
    study.SETTINGS["B"].replace(graph="no_isolated", n_items=40, truth="normal", p="log(n)/n")  # reachable
    # a density at which a connected graph is out of reach but an item with an edge is not
    with pytest.raises(ValueError, match="is connected with probability at most"):
        study.SETTINGS["B"].replace(n_items=40, truth="normal", p=0.01)
    study.SETTINGS["B"].replace(graph="no_isolated", n_items=40, truth="normal", p=0.01)


def test_a_replication_on_a_disconnected_graph_without_isolated_items():
    """Two components, every item comparable: no CIs (cross-component contrasts are never
    identified), choices only along edges, every item can be the major one, and the regret is charged
    against the best item overall."""
    edges = [(0, 1), (2, 3), (3, 4)]
    r = study.run_replication("A", "RB", 0, graph="no_isolated", edges=edges, T=80, T0=30, ci_every=10)
    assert r.ci_available_from is None and len(r.intervals["t"]) == 0
    pairs = {tuple(sorted(p)) for p in zip(r.trajectory["major"], r.trajectory["other"])}
    assert pairs <= {tuple(e) for e in edges}
    env = BTLEnvironment(study.SETTINGS["A"].replace(graph="no_isolated", edges=edges, T=80, T0=30), 0)
    scores = env.contexts @ env.theta_star.T
    expected = scores.max(axis=1) - scores[np.arange(80), r.trajectory["major"]]
    assert np.allclose(r.trajectory["regret"], expected)
    graph = ComparisonGraph.from_edges(np.array(edges), 5)
    assert graph.playable.all() and not graph.connected
