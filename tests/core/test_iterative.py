"""The iterative Newton solver (PCG with a kept, possibly stale, factor as preconditioner) against
independent computations: dense solves of the explicit reduced Hessian, the direct solver's fits,
KKT residuals, and the dense dual curvature."""
from __future__ import annotations

import numpy as np
import pytest

from study.core import balls, iterative, mle, systems
from study.core.contrasts import sum_zero_basis
from study.core.iterative import IterativeFactor, conjugate_gradients, reduced_product
from study.core.likelihood import ComparisonData


def random_data(n=8, d=3, rows=40, seed=0):
    rng = np.random.default_rng(seed)
    data = ComparisonData(n, d, rows + 20)
    for _ in range(rows):
        a, b = rng.choice(n, 2, replace=False)
        data.append(int(a), int(b), rng.normal(0.5, 1.0, size=d), float(rng.integers(0, 6)), 5.0)
    theta = rng.normal(size=(n, d))
    return data, theta - theta.mean(axis=0), rng


def explicit_reduced(data, theta, quad):
    n, d = data.n_items, data.dim
    C = np.kron(sum_zero_basis(n), np.eye(d))
    return C.T @ (data.hessian(theta) + np.diag(np.repeat(quad, d))) @ C


def test_conjugate_gradients_solves_an_spd_system_with_several_columns():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(30, 30))
    A = A @ A.T + 0.1 * np.eye(30)
    rhs = rng.normal(size=(30, 3))
    diagonal = 1.0 / np.diag(A)
    x, iterations, ok = conjugate_gradients(lambda v: A @ v, lambda r: diagonal[:, None] * r, rhs,
                                            max_iterations=200)
    assert ok and np.allclose(A @ x, rhs, atol=1e-9) and iterations <= 200
    exact, iterations, ok = conjugate_gradients(lambda v: A @ v, lambda r: np.linalg.solve(A, r), rhs)
    assert ok and iterations <= 2 and np.allclose(exact, np.linalg.solve(A, rhs))


@pytest.mark.parametrize("uniform", [True, False])
def test_hessian_vector_products_match_the_explicit_reduced_hessian(uniform):
    data, theta, rng = random_data()
    n, d = data.n_items, data.dim
    quad = np.full(n, 0.4) if uniform else rng.uniform(0.1, 2.0, n)
    K = explicit_reduced(data, theta, quad)
    weights = data.weights(data.margins(theta))
    v = rng.normal(size=((n - 1) * d, 4))
    assert np.allclose(reduced_product(data, weights, quad, v), K @ v)
    assert np.allclose(reduced_product(data, weights, quad, v[:, 1]), K @ v[:, 1])


@pytest.mark.parametrize("rows", [10, 40])  # row-space (10 < 21 parameters) and dense preconditioners
def test_a_stale_preconditioner_still_gives_the_exact_solution(rows):
    data, theta, rng = random_data(rows=rows, seed=rows)
    n, d = data.n_items, data.dim
    old_quad = rng.uniform(0.2, 1.0, n)
    IterativeFactor(data, data.margins(0.5 * theta), old_quad).solve(rng.normal(size=(n - 1) * d))  # builds it
    kept = data.preconditioner
    for _ in range(3):  # the data grow, the margins and the weights move
        data.append(0, 1, rng.normal(size=d), 3.0, 5.0)
    quad = old_quad * rng.uniform(0.5, 2.0, n)
    factor = IterativeFactor(data, data.margins(theta), quad)
    rhs = rng.normal(size=((n - 1) * d, 2))
    K = explicit_reduced(data, theta, quad)
    assert np.allclose(factor.solve(rhs), np.linalg.solve(K, rhs), rtol=1e-8, atol=1e-10)
    assert np.allclose(factor.solve(rhs[:, 0]), np.linalg.solve(K, rhs[:, 0]), rtol=1e-8, atol=1e-10)
    assert data.preconditioner is kept or factor.iterations > 0
    # an inexact solve (the Newton forcing term) meets its absolute tolerance
    loose = factor.solve(rhs[:, 0], atol=1e-3)
    assert np.abs(K @ loose - rhs[:, 0]).max() <= 1e-3


def iterative_everywhere(monkeypatch):
    monkeypatch.setattr(iterative, "ITERATIVE_MIN_PARAMETERS", 1)


@pytest.mark.parametrize("ridge, radius", [(2.0, None), (0.0, 1.0), (0.0, None)])
def test_iterative_fits_match_the_direct_solver(monkeypatch, ridge, radius):
    data, theta, rng = random_data(n=10, d=3, rows=60, seed=3)
    start = rng.normal(size=(10, 3))
    direct = mle.solve(data, start, ridge=ridge, radius=radius)
    iterative_everywhere(monkeypatch)
    data.preconditioner = None
    fitted = mle.solve(data, start, ridge=ridge, radius=radius)
    assert direct.converged and fitted.converged
    # with a ball the dual stops at slack <= BALL_TOL gamma^2, reached along another path (the
    # iterative solver's dual steps use the kept factor's curvature): agreement to that tolerance
    tolerance = 1e-8 if radius is None else mle.BALL_TOL * radius ** 2
    assert np.abs(fitted.theta - direct.theta).max() < tolerance
    assert np.allclose(fitted.multipliers, direct.multipliers, atol=10 * tolerance)
    # KKT: the reduced gradient of the solved objective vanishes (proximal term included)
    tol = mle.DEFAULT_TOL if ridge == 0.0 else mle.RIDGE_TOL
    assert fitted.kkt_residual <= tol * (1 + data.total_comparisons)


def test_dual_curvature_in_blocks_matches_the_dense_one(monkeypatch):
    data, theta, rng = random_data(n=9, d=2, rows=30, seed=5)
    quad = rng.uniform(0.3, 1.5, 9)
    free = np.array([0, 2, 3, 7])
    u = data.margins(theta)
    iterative_everywhere(monkeypatch)
    monkeypatch.setattr(balls, "CHUNK_ENTRIES", 2 * 9 * 2)  # two columns per block
    data.preconditioner = None
    factor = IterativeFactor(data, u, quad)
    blocked = balls.dual_curvature(theta, free, factor, iterative=True, exact=False)  # a fresh factor: exact
    assert np.allclose(balls.dual_curvature(theta, free, factor, iterative=True, exact=True), blocked, atol=1e-9)
    K = explicit_reduced(data, theta, quad)
    Q = np.kron(sum_zero_basis(9), np.eye(2))
    cols = np.zeros((18, free.size))
    for c, i in enumerate(free):
        cols[i * 2:(i + 1) * 2, c] = theta[i]
    reduced = Q.T @ cols
    assert np.allclose(blocked, reduced.T @ np.linalg.solve(K, reduced), atol=1e-9)


def test_restricted_rank_bound_is_necessary_for_identification():
    rng = np.random.default_rng(7)
    n, d = 6, 2
    data = ComparisonData(n, d, 40)
    for _ in range(5):  # rows only on edges (0, 1) and (2, 3): items 4, 5 never compared
        data.append(0, 1, rng.normal(size=d), 2.0, 5.0)
        data.append(2, 3, rng.normal(size=d), 2.0, 5.0)
    theta = np.zeros((n, d))
    for held, singular in (([4, 5], True), ([1, 3, 4, 5], False)):
        mask = np.zeros(n, bool)
        mask[held] = True
        bound, needed = data.restricted_rank_bound(mask)
        K = explicit_reduced(data, theta, np.where(mask, 1.0, 0.0))
        smallest = np.linalg.eigvalsh(K)[0]
        if bound < needed:
            assert singular and smallest < 1e-10
        else:
            assert not singular and smallest > 1e-6


@pytest.mark.parametrize("uniform", [True, False])
def test_item_form_dual_curvature_of_the_row_space_factor(uniform):
    data, theta, rng = random_data(n=12, d=3, rows=15, seed=9)  # 15 rows < 33 parameters
    n, d = 12, 3
    quad = np.full(n, 0.6) if uniform else rng.uniform(0.2, 2.0, n)
    factor = systems.Factor(systems.RowSpaceFactor(data, data.margins(theta), quad))
    factor = factor.add(rng.normal(size=(n - 1) * d)).add(rng.normal(size=(n - 1) * d))  # Woodbury terms
    free = np.array([1, 4, 5, 9, 11])
    Q = np.kron(sum_zero_basis(n), np.eye(d))
    cols = np.zeros((n * d, free.size))
    for c, i in enumerate(free):
        cols[i * d:(i + 1) * d, c] = theta[i]
    reduced = Q.T @ cols
    assert np.allclose(factor.item_quadratic(theta, free), reduced.T @ factor.solve(reduced), atol=1e-10)


def test_diagonal_blocks_of_phi11_without_the_inverse(monkeypatch):
    from study.core import inference
    data, theta, rng = random_data(n=9, d=3, rows=80, seed=11)
    result = inference.debias_data(data, theta)
    assert result.available
    expected = np.einsum("iide->ide", result._phi_blocks())  # from the explicit inverse
    fresh = inference.DebiasResult(theta_d=result.theta_d, available=True, condition=result.condition,
                                   factor=result.factor)
    monkeypatch.setattr(inference, "BLOCK_ENTRIES", 2 * 8 * 3 * 3)  # blocks of two items
    monkeypatch.setattr(inference, "DIAGONAL_BLOCKS_FROM_PARAMETERS", 1)
    assert np.allclose(fresh.cov, expected, atol=1e-12)
    # and the explicit Phi_11 of paper eq. deb: the (nd x nd) block of the inverse of Psi
    n, d = 9, 3
    psi = np.block([[data.hessian(theta), np.kron(np.ones((n, 1)), np.eye(d))],
                    [np.kron(np.ones((1, n)), np.eye(d)), np.zeros((d, d))]])
    phi11 = np.linalg.inv(psi)[: n * d, : n * d]
    assert np.allclose(fresh.cov, np.array([phi11[i * d:(i + 1) * d, i * d:(i + 1) * d] for i in range(n)]),
                       atol=1e-9)


def test_a_row_that_breaks_the_kept_factors_woodbury_term_is_left_to_cg():
    # coverage run (family L, n = 50, seed 2162297530993465288): the single-precision inverse of an
    # ill-conditioned K made I + V'Z indefinite; the kept factor must stay as it is, not raise
    data, theta, rng = random_data(n=8, d=3, rows=40, seed=13)

    class Indefinite:
        def solve(self, rhs):
            return -rhs

    data.preconditioner = systems.Factor(Indefinite())
    factor = IterativeFactor(data, data.margins(theta), np.full(8, 0.5))
    assert factor.add(10.0 * np.ones(21)) is factor
    assert data.preconditioner.V is None
