"""Stage 1's exact nearest argmin where no ball binds (study.core.rowspace): the kept decomposition
D = C Q' against a direct computation, the coupled groups, and the shortcut's estimate against the
general solver's (study.core.mle.exact_nearest with the shortcut off, itself checked against SLSQP
in test_nearest.py) on stage-1 refits of Setting B replayed step by step."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from study.core import mle, nearest, rowspace
from study.core.contrasts import to_reduced
from study.core.likelihood import ComparisonData
from study.core.threads import one_blas_thread


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with one_blas_thread():
        yield


def _edge_rows(rng, n, d, edges, per_edge, m=50.0):
    a, b, X = [], [], []
    for (i, j), count in zip(edges, per_edge):
        for _ in range(count):
            a.append(i), b.append(j), X.append(rng.normal(1.0, 0.7, d))
    order = rng.permutation(len(a))
    a, b, X = np.array(a)[order], np.array(b)[order], np.array(X)[order]
    wins = rng.integers(5, 46, len(a)).astype(float)
    return ComparisonData.from_rows(a, b, X, wins, np.full(len(a), m), n)


def test_decomposition_reproduces_the_design():
    """Q orthonormal, the pivots' rows C_P Q', every dependent row A_j C_P Q', the rank the
    singular values give (nearest.split), and each dependent row coupling only pivots of its own edge
    (three edges of a tree, the first with more rows than d)."""
    rng = np.random.default_rng(11)
    n, d = 4, 3
    data = _edge_rows(rng, n, d, [(0, 1), (1, 2), (2, 3)], [6, 2, 3])
    D = nearest.design(data)
    space = rowspace.RowSpace(D.shape[1]).extend(D)
    r = space.rank
    Q, CP = space.basis[:, :r], space.pivot_coords[:r, :r]
    np.testing.assert_allclose(Q.T @ Q, np.eye(r), atol=1e-13)
    np.testing.assert_allclose(CP @ Q.T, D[space.pivots], atol=1e-12)
    A = space.combinations[: len(space.dependent), :r]
    np.testing.assert_allclose(A @ CP @ Q.T, D[space.dependent], atol=1e-12)
    assert r == nearest.split(D, D.shape[1])[0].shape[1] == 3 + 2 + 3
    assert len(space.dependent) == 3 and not space.ambiguous
    edge_of = {k: (int(data.a[k]), int(data.b[k])) for k in range(data.t)}
    (columns, rows), = space.groups()
    assert {edge_of[space.pivots[c]] for c in columns} == {edge_of[space.dependent[j]] for j in rows} == {(0, 1)}


def test_rows_taken_one_at_a_time_equal_all_at_once():
    rng = np.random.default_rng(3)
    data = _edge_rows(rng, 5, 2, [(0, 1), (1, 2), (0, 2), (3, 4)], [3, 3, 2, 1])
    D = nearest.design(data)
    whole = rowspace.RowSpace(D.shape[1]).extend(D)
    stepwise = rowspace.RowSpace(D.shape[1])
    for t in range(1, data.t + 1):
        stepwise.extend(D[:t])
    assert stepwise.pivots == whole.pivots and stepwise.dependent == whole.dependent
    np.testing.assert_array_equal(stepwise.basis, whole.basis)


def _components(space):
    """The groups from scratch: connected components of the pivots the dependent rows involve."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    r, A = space.rank, space.combinations[: len(space.dependent), : space.rank]
    edges = []
    for j, a in enumerate(A):
        support = np.flatnonzero(np.abs(a) > rowspace.COUPLING_TOL * (1.0 + np.abs(a).max(initial=0.0)))
        edges += [(j, int(c)) for c in support]
    rows, columns = (np.array(x, dtype=int) for x in zip(*edges)) if edges else (np.zeros(0, int),) * 2
    graph = coo_matrix((np.ones(len(edges)), (rows, len(A) + columns)), shape=(len(A) + r,) * 2)
    _, label = connected_components(graph, directed=False)
    involved = sorted(set(columns.tolist()))
    return {(frozenset(c for c in involved if label[len(A) + c] == g),
             frozenset(j for j in set(rows.tolist()) if label[j] == g)) for g in {label[len(A) + c] for c in involved}}


def test_groups_kept_as_rows_arrive_are_the_connected_components():
    """Rows in an order that makes two groups first (three rows on each of two edges, d = 2) and then
    a row on the edge closing their triangle, which couples both (a merge), and a third group apart;
    groups() asked after every row, as the exact path does, and only at the end, give the
    components computed from scratch."""
    rng = np.random.default_rng(5)
    edges = [(0, 1)] * 3 + [(1, 2)] * 3 + [(3, 4)] * 3 + [(0, 2), (2, 3)]
    a, b = (np.array(e) for e in zip(*edges))
    data = ComparisonData.from_rows(a, b, rng.normal(1.0, 0.7, (len(edges), 2)), rng.integers(5, 46, len(edges)).astype(float),
                                    np.full(len(edges), 50.0), 5)
    D = nearest.design(data)
    asked, once = rowspace.RowSpace(D.shape[1]), rowspace.RowSpace(D.shape[1])
    counts = []
    for t in range(1, data.t + 1):
        asked.extend(D[:t])
        got = {(frozenset(c.tolist()), frozenset(r.tolist())) for c, r in asked.groups()}
        assert got == _components(asked)
        counts.append(len(got))
    once.extend(D)
    assert {(frozenset(c.tolist()), frozenset(r.tolist())) for c, r in once.groups()} == _components(once) == got
    assert counts[5:10] == [2, 2, 2, 3, 2]  # two groups, a third apart, then the (0, 2) row merges the first two


def _general(data, reference, radius, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(rowspace, "nearest_without_balls", lambda *args, **kwargs: None)
        return mle.exact_nearest(data, reference, radius=radius, reference=reference)


@pytest.mark.parametrize("seed, steps", [(1, range(1, 30, 3)), (2, range(20, 200, 15))])
def test_equals_the_general_solver_on_replayed_stage_1(seed, steps, monkeypatch):
    """Setting B's stage 1 (RB, exact), replayed: at the sampled steps where the shortcut answers,
    the general solver from the same reference gives the same estimate (to 1e-6, the independent
    check's tolerance; 6e-9 measured), except where a ball binds with a multiplier below 1e-5 (there
    the general solver's absolute tolerance does not pin the point: tests/core/test_rangekkt.py).  Seed 1's first steps need the balls (theta(0) lies outside
    them), seed 2's later ones the coupled groups (edges with more rows than d)."""
    from study.simulation.replication import run_replication
    from study.simulation.settings import SETTINGS

    seen = []
    original = rowspace.nearest_without_balls

    def record(data, design, beta_ref, radius, abs_tol, multipliers=None):
        got = original(data, design, beta_ref, radius, abs_tol, multipliers)
        if data.t in steps:
            copy = ComparisonData.from_rows(data.a[: data.t], data.b[: data.t], data.X[: data.t],
                                            data.wins[: data.t], data.m[: data.t], data.n_items)
            seen.append((copy, beta_ref.copy(), radius, got, data._row_space.dependent[:]))
        return got

    monkeypatch.setattr(rowspace, "nearest_without_balls", record)
    run_replication(replace(SETTINGS["B"], tie_break="exact"), "RB", seed, T=max(steps) + 1, T0=max(steps) + 1,
                    ci_every=0)
    monkeypatch.setattr(rowspace, "nearest_without_balls", original)
    answered = [s for s in seen if s[3] is not None]
    assert len(answered) >= 0.8 * len(steps)
    compared = 0
    for data, beta_ref, radius, got, _ in answered:
        nu = got[4]
        if nu.any() and nu[nu > 0.0].min() < 1e-5:
            continue  # a ball binds with a small multiplier: the general solver's tolerance does not pin it (test_rangekkt)
        n, d = data.n_items, data.dim
        reference = nearest.from_reduced(beta_ref.reshape(n - 1, d))
        general = _general(data, reference, radius, monkeypatch)
        assert general.converged
        np.testing.assert_allclose(got[0], general.theta, rtol=0, atol=1e-6)
        # and the point is the shortcut's own: inside the balls (to the projection's slack), D beta = its margins
        assert ((got[0] ** 2).sum(axis=1) <= radius ** 2 * (1.0 + 2.0 * nearest.FEAS_TOL)).all()
        np.testing.assert_allclose(nearest.design(data) @ got[1], got[2], atol=1e-10)
        compared += 1
    assert compared >= 0.6 * len(steps)
    if seed == 2:
        assert any(dependent for *_, dependent in answered)  # the groups were exercised


def test_a_separated_row_is_held_by_the_balls():
    """A row won by one side in all its comparisons has no finite margin: the balls bound it, and
    study.core.rangekkt answers (tests/core/test_rangekkt.py checks its point)."""
    rng = np.random.default_rng(8)
    n, d = 3, 2
    X = rng.normal(1.0, 0.5, (2, d))
    data = ComparisonData.from_rows(np.array([0, 1]), np.array([1, 2]), X, np.array([0.0, 3.0]),
                                    np.array([10.0, 10.0]), n)
    reference = rng.normal(size=(n, d))
    beta_ref = to_reduced(reference - reference.mean(axis=0)).ravel()
    got = rowspace.nearest_without_balls(data, nearest.design(data), beta_ref, 5.0, 1e-8)
    assert got is not None and got[4].max() > 0.0  # a ball binds
    result = mle.exact_nearest(data, reference, radius=5.0, reference=reference)
    assert result.converged
    np.testing.assert_array_equal(result.theta, got[0])
    assert ((result.theta ** 2).sum(axis=1) <= 25.0 * (1 + 1e-9)).all()


def test_identified_data_take_the_unique_argmin():
    """prox=0 (the caller knows the data identify theta): the constrained MLE itself."""
    rng = np.random.default_rng(4)
    data = _edge_rows(rng, 3, 2, [(0, 1), (1, 2)], [4, 4])
    start = np.zeros((3, 2))
    exact = mle.exact_nearest(data, start, radius=5.0, reference=start, prox=0.0)
    plain = mle.solve(data, start, radius=5.0, prox=0.0)
    assert exact.converged
    np.testing.assert_allclose(exact.theta, plain.theta, atol=1e-9)
