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


@pytest.mark.parametrize("kind", ["row_space", "row_space_uniform", "dense_ridge", "dense_weighted"])
def test_item_form_conjugate_gradients_solve_the_reduced_system(monkeypatch, kind):
    """PCG in item coordinates (row-space and ridge preconditioners) against a dense solve of the
    explicit reduced Hessian, for one and several columns, from a stale kept factor; the reduced
    route (non-uniform weights without row space) is the control."""
    monkeypatch.setattr(systems, "ROW_SPACE_MIN_PARAMETERS", 1)
    rows = 12 if kind.startswith("row_space") else 60  # fewer rows than the 21 parameters: row space
    data, theta, rng = random_data(rows=rows, seed=7)
    n, d = data.n_items, data.dim
    uniform = kind in ("row_space_uniform", "dense_ridge")
    quad = np.full(n, 0.7) if uniform else rng.uniform(0.2, 1.5, n)
    IterativeFactor(data, data.margins(0.5 * theta), quad * 1.3).solve(rng.normal(size=(n - 1) * d))
    kept = data.preconditioner
    expected_base = {"row_space": systems.RowSpaceFactor, "row_space_uniform": systems.RowSpaceFactor,
                     "dense_ridge": systems.ItemInverse, "dense_weighted": systems.ExplicitInverse}[kind]
    assert type(kept.base) is expected_base and kept.item == (kind != "dense_weighted")
    factor = IterativeFactor(data, data.margins(theta), quad)
    K = explicit_reduced(data, theta, quad)
    rhs = rng.normal(size=((n - 1) * d, 3))
    assert np.allclose(factor.solve(rhs), np.linalg.solve(K, rhs), rtol=1e-9, atol=1e-11)
    assert np.allclose(factor.solve(rhs[:, 1]), np.linalg.solve(K, rhs[:, 1]), rtol=1e-9, atol=1e-11)
    assert factor.iterations > 0
    for atol in (1e-2, 1e-5):  # the forcing term bounds the reduced residual, whatever the coordinates
        loose = factor.solve(rhs[:, 0], atol=atol)
        assert np.abs(K @ loose - rhs[:, 0]).max() <= atol


def test_the_item_form_preconditioners_are_the_reduced_ones_seen_through_q(monkeypatch):
    """Q K^{-1} Q' by each item-form base (the row-space factor with unequal weights; the ridge's
    (H + qI)^{-1}, single precision) and by a Factor with Woodbury columns in item form, against
    the explicit reduced inverse; their reduced solves agree with it too."""
    monkeypatch.setattr(systems, "ROW_SPACE_MIN_PARAMETERS", 1)
    n, d = 8, 3
    q_basis = np.kron(sum_zero_basis(n), np.eye(d))
    for rows, quad_kind in ((12, "weighted"), (60, "ridge")):
        data, theta, rng = random_data(rows=rows, seed=11)
        u = data.margins(theta)
        quad = rng.uniform(0.2, 1.5, n) if quad_kind == "weighted" else np.full(n, 0.9)
        base = systems.preconditioner(data, u, quad, single=True)
        assert hasattr(base, "solve_item")
        K = explicit_reduced(data, theta, quad)
        pseudo = q_basis @ np.linalg.inv(K) @ q_basis.T
        v = q_basis @ rng.normal(size=((n - 1) * d, 2))  # sum-zero item-form columns
        rtol = 1e-9 if quad_kind == "weighted" else 1e-4  # the ridge's inverse is held in single precision
        scale = np.abs(pseudo @ v).max()
        assert np.abs(base.solve_item(v) - pseudo @ v).max() <= rtol * scale
        assert np.abs(base.solve(q_basis.T @ v) - np.linalg.solve(K, q_basis.T @ v)).max() <= rtol * scale
        # a Factor in item form with two Woodbury columns: K0 + V V' exactly
        columns = rng.normal(size=((n - 1) * d, 2))
        grown = systems.Factor(base, item=True).add(columns[:, 0]).add(columns[:, 1])
        K_grown = K + columns @ columns.T
        assert grown.V.shape == (n * d, 2)
        r = rng.normal(size=(n - 1) * d)
        assert np.abs(grown.solve(r) - np.linalg.solve(K_grown, r)).max() <= rtol * np.abs(np.linalg.solve(K_grown, r)).max()


def test_the_vector_conjugate_gradients_agree_with_the_block_ones():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(40, 40))
    A = A @ A.T + 0.5 * np.eye(40)
    rhs = rng.normal(size=40)
    inverse = np.linalg.inv(A + 0.3 * np.diag(rng.uniform(0, 1, 40)))  # a stale preconditioner
    single, its, ok = conjugate_gradients(lambda v: A @ v, lambda r: inverse @ r, rhs)
    block, block_its, block_ok = conjugate_gradients(lambda v: A @ v, lambda r: inverse @ r, rhs[:, None])
    assert ok and block_ok and its == block_its
    assert np.allclose(single, block[:, 0], rtol=1e-10, atol=1e-12) and np.allclose(A @ single, rhs, atol=1e-9)
    loose, loose_its, _ = conjugate_gradients(lambda v: A @ v, lambda r: inverse @ r, rhs, atol=1e-3)
    assert np.abs(A @ loose - rhs).max() <= 1e-3 and loose_its <= its


def test_scaled_weighted_row_gram_from_the_sparse_pairs_equals_the_dense_one():
    data, theta, rng = random_data(n=9, d=3, rows=20, seed=2)  # rows kept for the row space: (n - 1) d = 24
    inverse_quad = 1.0 / rng.uniform(0.1, 2.0, 9)
    scale = rng.uniform(0.5, 2.0, data.t)
    dense = scale[:, None] * data.weighted_row_gram(inverse_quad) * scale[None, :]
    assert np.allclose(data.scaled_weighted_row_gram(inverse_quad, scale), dense, rtol=1e-14, atol=1e-14)
    assert np.count_nonzero(dense) < dense.size  # rows sharing no item do not interact


def test_the_first_order_prediction_of_the_inner_minimiser_is_second_order_accurate(monkeypatch):
    """d theta / d nu_i = -K^{-1} P(e_i (x) theta_i): predicted from the minimiser at nu, the
    minimiser at nu + h delta is missed by O(h^2) (starting from theta(nu) misses it by O(h))."""
    iterative_everywhere(monkeypatch)
    monkeypatch.setattr(systems, "ROW_SPACE_MIN_PARAMETERS", 1)
    data, theta0, rng = random_data(n=8, d=3, rows=15, seed=4)
    n = data.n_items
    quad = np.full(n, 0.3)
    nu = rng.uniform(0.0, 1.0, n)
    lin = 0.3 * rng.normal(size=(n, 3))
    lin -= lin.mean(axis=0)

    def minimiser(weights):
        objective = mle.Objective(data, quad + weights, lin)
        fitted = mle.newton(objective, theta0, 1e-13, 100)
        return fitted[0], fitted[4]

    base_theta, factor = minimiser(nu)
    delta = rng.uniform(0.0, 1.0, n)
    errors = []
    for h in (0.05, 0.025):
        exact, _ = minimiser(nu + h * delta)
        data.preconditioner = None  # the kept factor at the base point, fresh
        factor = IterativeFactor(data, data.margins(base_theta), quad + nu)
        predicted = factor.predict(base_theta, h * delta)
        errors.append((np.abs(predicted - exact).max(), np.abs(base_theta - exact).max()))
    (p1, s1), (p2, s2) = errors
    assert p1 < 0.1 * s1 and p2 < 0.1 * s2
    assert 3.0 < p1 / p2 < 5.0  # O(h^2): halving h quarters the error
    assert 1.6 < s1 / s2 < 2.4  # O(h)


def test_the_dual_secant_update_meets_the_secant_equation():
    rng = np.random.default_rng(3)
    B = rng.normal(size=(6, 6))
    B = B @ B.T + np.eye(6)
    free = np.array([0, 2, 3, 5, 7, 8])
    step, fall = np.zeros(10), np.zeros(10)
    step[free] = rng.normal(size=6)
    true = rng.normal(size=(6, 6))
    fall[free] = (true @ true.T + np.eye(6)) @ step[free]  # y = A s for an SPD A: s'y > 0
    kept_free, updated = balls._secant(B, free, step, fall)
    assert np.array_equal(kept_free, free)
    assert np.allclose(updated @ step[free], fall[free]) and np.allclose(updated, updated.T)
    assert np.all(np.linalg.eigvalsh(updated) > 0)
    assert balls._secant(B, free, step, -fall) is None  # no curvature along the step: no update


@pytest.mark.parametrize("uniform", [True, False])
def test_item_form_products_are_the_reduced_hessian_seen_through_q(uniform):
    data, theta, rng = random_data()
    n, d = data.n_items, data.dim
    quad = np.full(n, 0.4) if uniform else rng.uniform(0.1, 2.0, n)
    q_basis = np.kron(sum_zero_basis(n), np.eye(d))
    K = explicit_reduced(data, theta, quad)
    weights = data.weights(data.margins(theta))
    v = q_basis @ rng.normal(size=((n - 1) * d, 3))  # sum-zero item-form columns
    out = iterative.item_product(data, weights, quad, v)
    assert np.allclose(out, q_basis @ K @ q_basis.T @ v)  # hence sums to zero over the items
    assert np.allclose(iterative.item_product(data, weights, quad, v[:, 0]), out[:, 0])


def test_the_item_form_residual_bound_decides_as_the_reduced_max_norm_would():
    """max|Q'r| <= atol is decided by 2 max|r| <= atol, or |r|_2 > sqrt(p) atol, or Q'r itself."""
    data, theta, rng = random_data(n=30, d=2, rows=10)
    n, d = data.n_items, data.dim
    factor = IterativeFactor(data, data.margins(theta), np.full(n, 1.0))
    q_basis = np.kron(sum_zero_basis(n), np.eye(d))
    decided = set()
    for trial in range(400):
        r = q_basis @ (rng.normal(size=(n - 1) * d) * rng.uniform(0.0, 3.0, (n - 1) * d))
        exact = np.abs(q_basis.T @ r).max()
        atol = exact * rng.uniform(0.5, 2.5)
        bound = factor._reduced_max_norm(r, np.array(np.linalg.norm(r)), atol)
        assert (bound <= atol) == (exact <= atol)
        decided.add("cheap" if bound in (0.0, np.inf) else "exact")
    assert decided == {"cheap", "exact"}  # both routes taken


def test_the_dual_learns_its_curvature_only_on_strictly_convex_inner_problems(monkeypatch):
    """BFGS updates of the dual curvature in the tie-break (or ridge) problems, never in the exact
    opt1 ones, where erratic slack changes made single refits up to 20x slower."""
    iterative_everywhere(monkeypatch)
    data, theta, rng = random_data(n=8, d=3, rows=60, seed=6)
    n = data.n_items
    calls = []
    real = balls._secant
    monkeypatch.setattr(balls, "_secant", lambda *a: calls.append(1) or real(*a))
    start = 3.0 * rng.normal(size=(n, 3))
    common = dict(radius=0.5, lin=None, lin_r=None, abs_tol=1e-9, feas_tol=1e-6, max_steps=100, max_dual_steps=100)
    fit = balls.dual_ascent(data, start, np.zeros(n), base_quad=np.full(n, 1e-3), **common)
    assert fit.converged and int(np.count_nonzero(fit.nu)) > 0 and calls  # balls active: dual steps, updates
    calls.clear()
    data.preconditioner = None
    exact = balls.dual_ascent(data, fit.theta, fit.nu, base_quad=np.zeros(n), **common)
    assert exact.steps > 0 and not calls
