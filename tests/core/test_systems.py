"""The core's linear algebra against explicit dense computations: the Helmert transforms, the
row-space products, both Newton-system solvers (uniform and per-item weights, one and many
right-hand sides) and both routes to the reduced Hessian."""
from __future__ import annotations

import numpy as np
import pytest

from study.core import contrasts, systems
from study.core.contrasts import from_reduced, sum_zero_basis, to_reduced
from study.core.likelihood import ComparisonData


@pytest.mark.parametrize("dense_max_flops", [0, None])
@pytest.mark.parametrize("n", [2, 3, 7, 47, 48, 130])
def test_helmert_transforms_match_the_explicit_basis(monkeypatch, n, dense_max_flops):
    if dense_max_flops is not None:  # the cumulative-sum transforms wherever n >= DENSE_BELOW
        monkeypatch.setattr(contrasts, "DENSE_MAX_FLOPS", dense_max_flops)
    q = sum_zero_basis(n)
    assert np.allclose(q.T @ q, np.eye(n - 1)) and np.allclose(q.sum(axis=0), 0)
    rng = np.random.default_rng(n)
    v, w = rng.normal(size=(n, 3, 2)), rng.normal(size=(n - 1, 4))
    assert np.allclose(to_reduced(v), np.einsum("ia,ide->ade", q, v), atol=1e-12)
    assert np.allclose(from_reduced(w), q @ w, atol=1e-12)
    assert np.allclose(from_reduced(to_reduced(v - v.mean(axis=0))), v - v.mean(axis=0), atol=1e-12)


def random_data(n=6, d=3, rows=14, seed=0, edges_only=None):
    rng = np.random.default_rng(seed)
    data = ComparisonData(n, d, rows + 5)
    for _ in range(rows):
        a, b = rng.choice(n, 2, replace=False) if edges_only is None else edges_only[rng.integers(len(edges_only))]
        data.append(int(a), int(b), rng.normal(size=d), float(rng.integers(0, 6)), 5.0)
    theta = rng.normal(size=(n, d))
    return data, theta - theta.mean(axis=0), rng


def item_design(data):
    """R, (t, nd): row k is (e_b - e_a) (x) x_k."""
    n, d, t = data.n_items, data.dim, data.t
    R = np.zeros((t, n * d))
    for k in range(t):
        R[k, data.b[k] * d:(data.b[k] + 1) * d] += data.X[k]
        R[k, data.a[k] * d:(data.a[k] + 1) * d] -= data.X[k]
    return R


def test_row_space_products_match_the_item_design():
    data, theta, rng = random_data()
    R = item_design(data)
    n, d = data.n_items, data.dim
    assert np.allclose(data.row_products(), data.X[: data.t] @ data.X[: data.t].T)
    assert np.allclose(data.row_gram(), R @ R.T)
    q = rng.uniform(0.5, 3.0, n)
    assert np.allclose(data.weighted_row_gram(1 / q), R @ np.diag(np.repeat(1 / q, d)) @ R.T)
    v = rng.normal(size=(n, d, 2))
    assert np.allclose(data.design_times(v), R @ v.reshape(n * d, 2))
    assert np.allclose(data.design_times(v[:, :, 0]), R @ v[:, :, 0].ravel())
    s = rng.normal(size=(data.t, 3))
    assert np.allclose(data.design_transpose_times(s).reshape(n * d, 3), R.T @ s)
    assert np.allclose(data.design_transpose_times(s[:, 1]).ravel(), R.T @ s[:, 1])


def explicit_reduced(data, theta, quad):
    n, d = data.n_items, data.dim
    C = np.kron(sum_zero_basis(n), np.eye(d))
    return C.T @ (data.hessian(theta) + np.diag(np.repeat(quad, d))) @ C


@pytest.mark.parametrize("uniform", [True, False])
def test_both_solvers_solve_the_reduced_newton_system(uniform):
    data, theta, rng = random_data(rows=9)  # 9 rows < 15 parameters: the row-space regime
    n, d = data.n_items, data.dim
    quad = np.full(n, 0.7) if uniform else rng.uniform(0.2, 2.0, n)
    K = explicit_reduced(data, theta, quad)
    u = data.margins(theta)
    assert np.allclose(systems.reduced_hessian(data, u, quad), K)
    rhs = rng.normal(size=((n - 1) * d, 4))
    expected = np.linalg.solve(K, rhs)
    for factor in (systems.PrimalFactor(systems.reduced_hessian(data, u, quad)),
                   systems.RowSpaceFactor(data, u, quad)):
        assert np.allclose(factor.solve(rhs), expected, rtol=1e-9, atol=1e-10)
        assert np.allclose(factor.solve(rhs[:, 0]), expected[:, 0], rtol=1e-9, atol=1e-10)
    # the bordered system of paper eq. deb gives the same step in item form
    Psi = np.block([[data.hessian(theta) + np.diag(np.repeat(quad, d)), np.kron(np.ones((n, 1)), np.eye(d))],
                    [np.kron(np.ones((1, n)), np.eye(d)), np.zeros((d, d))]])
    C = np.kron(sum_zero_basis(n), np.eye(d))
    item_rhs = C @ rhs[:, 0]
    bordered = np.linalg.solve(Psi, np.concatenate([item_rhs, np.zeros(d)]))[: n * d]
    assert np.allclose(C @ systems.RowSpaceFactor(data, u, quad).solve(rhs[:, 0]), bordered, atol=1e-9)


def test_a_factor_of_fewer_rows_stays_valid_when_the_data_grow():
    data, theta, rng = random_data(rows=6)
    n, d = data.n_items, data.dim
    quad = np.full(n, 1.3)
    u = data.margins(theta)
    factor = systems.RowSpaceFactor(data, u, quad)
    K = explicit_reduced(data, theta, quad)
    data.append(0, 1, rng.normal(size=d), 2.0, 5.0)
    rhs = rng.normal(size=(n - 1) * d)
    assert np.allclose(factor.solve(rhs), np.linalg.solve(K, rhs))


def test_reduced_hessian_routes_agree_on_a_large_graph(monkeypatch):
    n, d = 60, 2
    rng = np.random.default_rng(4)
    edges = [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 7) % n) for i in range(n)]
    data, theta, _ = random_data(n=n, d=d, rows=200, seed=4, edges_only=edges)
    u = data.margins(theta)
    quad = rng.uniform(0.1, 1.0, n)
    expected = explicit_reduced(data, theta, quad)
    assert np.allclose(systems.reduced_hessian(data, u, quad), expected)
    monkeypatch.setattr(systems, "SMALL_GRAPH_ENTRIES", 0)  # the item-block route with the Helmert transform
    assert np.allclose(systems.reduced_hessian(data, u, quad), expected)
    monkeypatch.setattr(contrasts, "DENSE_MAX_FLOPS", 0)
    assert n >= contrasts.DENSE_BELOW  # the fast (cumulative-sum) transform is the one exercised
    assert np.allclose(systems.reduced_hessian(data, u, quad), expected)


def test_factorize_picks_the_row_space_only_where_it_pays():
    data, theta, _ = random_data(n=40, d=5, rows=30)  # 195 parameters, 30 rows
    u = data.margins(theta)
    assert isinstance(systems.factorize(data, u, np.full(40, 0.5)).base, systems.RowSpaceFactor)
    quad = np.full(40, 0.5)
    quad[3] = 0.0  # the Woodbury form needs every weight positive
    assert isinstance(systems.factorize(data, u, quad).base, systems.PrimalFactor)
    small, theta_small, _ = random_data(n=5, d=3, rows=4)  # 12 parameters: dense is cheaper
    assert isinstance(systems.factorize(small, small.margins(theta_small), np.full(5, 0.5)).base,
                      systems.PrimalFactor)
