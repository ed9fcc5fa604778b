"""Ranking diagrams: dominance relations and the transitive reduction on hand-made cases."""
import numpy as np
import pytest

from study.llm.diagrams import (dominance, dominance_ci, layers, plot_ranking_diagrams, transitive_reduction)


def adjacency(n, edges):
    adj = np.zeros((n, n), dtype=bool)
    for i, j in edges:
        adj[i, j] = True
    return adj


def edges_of(adj):
    return sorted((int(i), int(j)) for i, j in zip(*np.nonzero(adj)))


def test_chain_closure_reduces_to_the_chain():
    closure = adjacency(4, [(i, j) for i in range(4) for j in range(i + 1, 4)])
    assert edges_of(transitive_reduction(closure)) == [(0, 1), (1, 2), (2, 3)]


def test_diamond():
    diamond = adjacency(4, [(0, 1), (0, 2), (1, 3), (2, 3), (0, 3)])
    assert edges_of(transitive_reduction(diamond)) == [(0, 1), (0, 2), (1, 3), (2, 3)]


def test_already_reduced_graphs_are_unchanged():
    for edges in ([(0, 1), (1, 2), (2, 3)], [(0, 1), (0, 2), (1, 3), (2, 3)], [(0, 2), (1, 2)], []):
        adj = adjacency(4, edges)
        assert edges_of(transitive_reduction(adj)) == sorted(edges)


def test_shortcut_over_a_longer_path_is_removed():
    # not transitively closed: 0 -> 3 is implied by 0 -> 1 -> 2 -> 3
    adj = adjacency(4, [(0, 1), (1, 2), (2, 3), (0, 3)])
    assert edges_of(transitive_reduction(adj)) == [(0, 1), (1, 2), (2, 3)]


def test_cycles_are_rejected():
    with pytest.raises(ValueError, match="cycle"):
        transitive_reduction(adjacency(3, [(0, 1), (1, 2), (2, 0)]))
    with pytest.raises(ValueError, match="cycle"):
        layers(adjacency(2, [(0, 1), (1, 0)]))


def test_layers_put_the_best_on_top():
    adj = adjacency(5, [(4, 3), (4, 1), (3, 0), (1, 0), (3, 2), (1, 2)])
    assert layers(adj).tolist() == [2, 1, 2, 1, 0]


def test_dominance_needs_more_than_95_percent_of_contexts():
    X = np.hstack([np.ones((100, 1)), np.linspace(-1, 1, 100)[:, None]])
    theta = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # item 2 beats 0 only where x1 > 0
    adj = dominance(theta, X)
    assert adj[1, 0] and not adj[0, 1]
    assert not adj[2, 0] and not adj[0, 2]
    # item 3 = item 1 except on 4 of 100 contexts: 96% > 95% gives an edge, 95% does not
    theta2 = np.array([[0.0, 0.0], [1.0, 0.0]])
    X2 = np.ones((100, 2)); X2[:, 1] = 0; X2[:4, 1] = -5
    assert dominance(theta2 + [[0, 0], [0, 0.21]], X2)[1, 0]
    X2[:5, 1] = -5
    assert not dominance(theta2 + [[0, 0], [0, 0.21]], X2)[1, 0]


def test_dominance_ci_uses_the_full_covariance():
    X = np.ones((10, 1))
    theta = np.array([[0.0], [0.3]])
    # per-item variances 1 but correlation 0.99: Var(theta_1 - theta_0) = 0.02, se 0.141 => significant
    phi = np.array([[1.0, 0.99], [0.99, 1.0]])
    assert dominance_ci(theta, phi, X)[1, 0]
    # the same per-item variances without the cross covariance: se 1.41, not significant
    assert not dominance_ci(theta, np.eye(2), X).any()
    # zero covariance: equals the point version
    Xr = np.random.default_rng(0).standard_normal((50, 3)); Xr[:, 0] = 1
    th = np.random.default_rng(1).standard_normal((4, 3))
    assert np.array_equal(dominance_ci(th, np.zeros((12, 12)), Xr), dominance(th, Xr))
    with pytest.raises(ValueError, match="phi11"):
        dominance_ci(th, np.zeros((4, 4)), Xr)


def test_plot_writes_a_figure(tmp_path):
    X = np.ones((5, 1))
    labels = ["A", "B", "C"]
    panels = {200: np.array([[0.0], [1.0], [2.0]]), 400: np.array([[0.0], [0.0], [1.0]])}
    fig, reduced = plot_ranking_diagrams(panels, X, labels, tmp_path / "d.png", caption="generated judgments")
    assert (tmp_path / "d.png").stat().st_size > 0
    assert edges_of(reduced[200]) == [(1, 0), (2, 1)]
    ci_panels = {200: None, 400: (panels[400], np.zeros((3, 3)))}
    fig, reduced = plot_ranking_diagrams(ci_panels, X, labels, tmp_path / "ci.png", uncertainty=True)
    assert reduced[200] is None and edges_of(reduced[400]) == [(2, 0), (2, 1)]
