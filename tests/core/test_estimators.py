"""Checks of the bandit core against independent computations."""
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

import study
from study.simulation.environment import BTLEnvironment
from study.simulation.graph import is_connected
from study.core import likelihood
from study.core.contrasts import sum_zero_basis
from study.core.likelihood import ComparisonData
from study.core.mle import BALL_TOL
from study.core.inference import debias_data


def simulate(n=5, d=3, rows=400, m=10, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    theta = scale * rng.normal(size=(n, d))
    theta -= theta.mean(axis=0)
    i = rng.integers(0, n, rows)
    j = (i + rng.integers(1, n, rows)) % n
    X = rng.normal(size=(rows, d)) + 0.5
    p = expit(np.einsum("kd,kd->k", X, theta[j] - theta[i]))
    wins = rng.binomial(m, p).astype(float)
    return theta, i, j, X, wins, m


def naive_nll(free, i, j, X, wins, m, n, d, ridge=0.0):
    """Independent parametrisation: theta_n = -sum of the others; plain loop over rows."""
    head = free.reshape(n - 1, d)
    theta = np.vstack([head, -head.sum(axis=0)])
    total = 0.0
    for k in range(len(i)):
        u = X[k] @ (theta[j[k]] - theta[i[k]])
        total += m * np.logaddexp(0.0, u) - wins[k] * u
    return total + 0.5 * ridge * np.sum(theta ** 2)


def naive_fit(i, j, X, wins, m, n, d, ridge=0.0):
    res = minimize(naive_nll, np.zeros((n - 1) * d), args=(i, j, X, wins, m, n, d, ridge), method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 10_000})
    head = res.x.reshape(n - 1, d)
    return np.vstack([head, -head.sum(axis=0)])


@pytest.mark.parametrize("ridge", [0.0, 3.0])
def test_fit_btl_matches_independent_solver(ridge):
    theta, i, j, X, wins, m = simulate(rows=150)
    ours = study.fit_btl(i, j, X, wins, m, 5, ridge=ridge)
    reference = naive_fit(i, j, X, wins, m, 5, 3, ridge)
    assert np.allclose(ours.sum(axis=0), 0.0, atol=1e-12)
    assert np.max(np.abs(ours - reference)) < 1e-6


def test_gradient_and_hessian_match_finite_differences():
    theta, i, j, X, wins, m = simulate(rows=60)
    data = ComparisonData.from_rows(i, j, X, wins, np.full(len(i), float(m)), 5)
    point = theta + 0.3
    grad = data.gradient(point)
    hess = data.hessian(point)
    h = 1e-6
    fd_grad = np.zeros_like(point)
    fd_hess = np.zeros((point.size, point.size))
    for idx in range(point.size):
        e = np.zeros(point.size)
        e[idx] = h
        e = e.reshape(point.shape)
        fd_grad.flat[idx] = (data.nll(point + e) - data.nll(point - e)) / (2 * h)
        fd_hess[:, idx] = ((data.gradient(point + e) - data.gradient(point - e)) / (2 * h)).ravel()
    assert np.allclose(grad, fd_grad, rtol=1e-6, atol=1e-5)
    assert np.allclose(hess, fd_hess, rtol=1e-6, atol=1e-5)
    assert np.allclose(hess, hess.T)


def kkt_report(data, theta, radius=None, ridge=0.0):
    """Multipliers recovered from the stationarity conditions by least squares, and residuals."""
    n, d = theta.shape
    grad = data.gradient(theta) + ridge * theta
    if radius is None:
        mu = -grad.mean(axis=0)
        return np.abs(grad + mu).max(), np.zeros(n)
    active = np.linalg.norm(theta, axis=1) > radius * (1 - 1e-4)
    # unknowns: mu (d) and nu_i for active items; equations grad_i + nu_i theta_i + mu = 0
    cols = [np.tile(np.eye(d), (n, 1))]
    for item in np.flatnonzero(active):
        col = np.zeros((n, d))
        col[item] = theta[item]
        cols.append(col.reshape(-1, 1))
    A = np.hstack(cols)
    sol, *_ = np.linalg.lstsq(A, -grad.ravel(), rcond=None)
    residual = np.abs(A @ sol + grad.ravel()).max()
    nu = np.zeros(n)
    nu[active] = sol[d:]
    return residual, nu


def test_kkt_conditions_hold_for_both_stages():
    theta, i, j, X, wins, m = simulate(rows=120, scale=2.5, seed=3)
    data = ComparisonData.from_rows(i, j, X, wins, np.full(len(i), float(m)), 5)
    scale = data.total_comparisons
    # stage 2 (ridge): gradient + lambda theta = 0 on the sum-zero space, and sum-zero holds
    ridge_fit = study.fit_btl(i, j, X, wins, m, 5, ridge=5.0)
    residual, _ = kkt_report(data, ridge_fit, ridge=5.0)
    assert residual < 1e-8 * scale
    # stage 1 (ball): primal feasibility, nu >= 0, complementarity, stationarity
    radius = 1.0
    ball_fit = study.fit_btl(i, j, X, wins, m, 5, radius=radius)
    norms = np.linalg.norm(ball_fit, axis=1)
    assert np.all(norms <= radius * (1 + BALL_TOL))
    assert np.any(norms > radius * (1 - 1e-4)), "the test needs an active constraint"
    residual, nu = kkt_report(data, ball_fit, radius=radius)
    assert residual < 1e-6 * scale
    assert np.all(nu >= -1e-8)
    assert np.allclose(ball_fit.sum(axis=0), 0.0, atol=1e-10)


def test_tie_break_keeps_reference_where_data_are_silent():
    # items 0-1 compared only; items 2-4 never: nearest keeps their reference values exactly
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2)) + 1
    i = np.zeros(30, int)
    j = np.ones(30, int)
    wins = rng.binomial(10, 0.6, 30).astype(float)
    ref = rng.normal(size=(5, 2))
    ref -= ref.mean(axis=0)
    nearest = study.fit_btl(i, j, X, wins, 10, 5, tie_break="nearest", reference=ref)
    min_norm = study.fit_btl(i, j, X, wins, 10, 5)
    # the identified contrast theta_1 - theta_0 is the same for both
    assert np.allclose(nearest[1] - nearest[0], min_norm[1] - min_norm[0], atol=1e-5)
    # silent items: nearest keeps the reference's contrasts, min-norm sets them equal to the pair's mean
    assert np.allclose(nearest[2:] - nearest[2:].mean(0), ref[2:] - ref[2:].mean(0), atol=1e-5)
    assert np.allclose(min_norm[2:], 0.0, atol=1e-5)
    assert np.allclose(min_norm[0] + min_norm[1], 0.0, atol=1e-5)


def test_separable_data_stay_finite_and_feasible():
    X = np.ones((5, 2))
    i = np.zeros(5, int)
    j = np.ones(5, int)
    wins = np.full(5, 20.0)  # item 1 always wins: no finite MLE
    theta = study.fit_btl(i, j, X, wins, 20, 3, radius=2.0)
    assert np.all(np.isfinite(theta))
    assert np.linalg.norm(theta, axis=1).max() <= 2.0 * (1 + BALL_TOL)


def test_debias_at_unpenalised_mle_and_phi_matches_bordered_inverse():
    theta, i, j, X, wins, m = simulate(rows=300)
    mle = study.fit_btl(i, j, X, wins, m, 5)
    result = study.debias(mle, i, j, X, wins, m)
    assert result.available
    assert np.max(np.abs(result.theta_d - mle)) < 1e-7
    data = ComparisonData.from_rows(i, j, X, wins, np.full(len(i), float(m)), 5)
    n, d = mle.shape
    H = data.hessian(mle)
    tM = data.total_comparisons
    J = np.tile(np.eye(d), (n, 1))
    psi = np.block([[H, tM * J], [tM * J.T, np.zeros((d, d))]])
    phi = np.linalg.inv(psi)[: n * d, : n * d]
    C = np.kron(sum_zero_basis(n), np.eye(d))
    explicit = C @ np.linalg.inv(C.T @ H @ C) @ C.T
    assert np.allclose(result.phi11, phi, atol=1e-10 * np.abs(phi).max() + 1e-12)
    assert np.allclose(result.phi11, explicit, atol=1e-10 * np.abs(phi).max() + 1e-12)
    lower, upper = result.ci(0.95)
    assert np.allclose((upper - lower) / 2, 1.959963984540054 * result.se)
    # cov (what the UCB policies use) = the diagonal blocks of Phi_11, computed without forming it
    blocks = explicit.reshape(n, d, n, d)
    assert np.allclose(result.cov, blocks[np.arange(n), :, np.arange(n), :], atol=1e-10 * np.abs(phi).max())
    # the UCB index's x'(Phi_11)_ii x, by a triangular solve, before and after cov is formed
    x = np.linspace(-1.0, 2.0, d)
    expected_spread = np.einsum("d,ide,e->i", x, blocks[np.arange(n), :, np.arange(n), :], x)
    fresh = study.debias(mle, i, j, X, wins, m)
    assert np.allclose(fresh.spread(x), expected_spread, rtol=1e-9, atol=0)
    assert np.allclose(result.spread(x), expected_spread, rtol=1e-9, atol=0)
    # away from the MLE the correction is -Phi_11 grad L
    point = mle + 0.05 * np.arange(n * d).reshape(n, d) / (n * d)
    point -= point.mean(axis=0)
    moved = study.debias(point, i, j, X, wins, m)
    H_point = data.hessian(point)
    phi_point = C @ np.linalg.inv(C.T @ H_point @ C) @ C.T
    expected = point - (phi_point @ data.gradient(point).ravel()).reshape(n, d)
    assert np.allclose(moved.theta_d, expected, atol=1e-9)


def test_debias_reports_unavailable_when_psi_singular():
    theta, i, j, X, wins, m = simulate(rows=4)
    result = study.debias(np.zeros((5, 3)), i, j, X, wins, m)
    assert not result.available
    assert np.all(np.isnan(result.theta_d))
    assert np.all(np.isnan(result.cov)) and np.all(np.isnan(result.spread(np.ones(3))))
    with pytest.raises(ValueError, match="not available"):
        result.ci()


def test_common_random_numbers_across_methods():
    envs = [BTLEnvironment(study.SETTINGS["B"], 7) for _ in range(2)]
    for attr in ("edges", "theta0", "contexts", "theta_star"):
        assert np.array_equal(getattr(envs[0], attr), getattr(envs[1], attr))
    results = {m: study.run_replication("A", m, 11, T=40, T0=20, ci_every=0) for m in study.METHODS}
    edges = {tuple(map(tuple, r.edges)) for r in results.values()}
    assert len(edges) == 1
    # exploration coins are shared: RB, ERA and BT-UCB2 explore at the same steps up to T0
    explored = [results[m].trajectory["explored"][:20] for m in ("RB", "ERA", "BT-UCB2")]
    assert np.array_equal(explored[0], explored[1]) and np.array_equal(explored[0], explored[2])
    # first step: every method explores at t=1 (probability 1) -> identical first action and regret
    firsts = {(int(r.trajectory["major"][0]), int(r.trajectory["other"][0])) for m, r in results.items()
              if m in ("RB", "ERA", "BT-UCB2")}
    assert len(firsts) == 1


def test_policies_pick_graph_edges_and_explore_at_the_right_rate():
    T, alpha = 400, 0.25
    counts = []
    for seed in range(10):
        r = study.run_replication("A", "ERA", seed, T=T, T0=100, ci_every=0)
        allowed = {tuple(sorted(e)) for e in r.edges.tolist()}
        pairs = {tuple(sorted(p)) for p in zip(r.trajectory["major"].tolist(), r.trajectory["other"].tolist())}
        assert pairs <= allowed
        counts.append(r.trajectory["explored"].sum())
    t = np.arange(1, T + 1)
    probs = t ** -alpha
    expected, var = probs.sum() * 10, (probs * (1 - probs)).sum() * 10
    assert abs(sum(counts) - expected) < 4 * np.sqrt(var)  # 4 sd: fails by chance with p < 1e-4
    eta = study.run_replication("A", "ETA", 0, T=50, T0=20, ci_every=0)
    assert not eta.trajectory["explored"].any()


def test_replication_result_frames_and_metrics():
    r = study.run_replication("A", "RB", 3, T=120, T0=60, ci_every=20)
    frames = r.to_frame()
    traj, ints = frames["trajectory"], frames["intervals"]
    assert list(traj.columns) == ["t", "major", "other", "explored", "regret", "avg_regret", "rel_error",
                                  "pair_regret", "avg_pair_regret", "before_phi"]
    assert len(traj) == 120 and (traj["regret"] >= -1e-12).all()
    assert np.allclose(traj["avg_regret"], np.cumsum(traj["regret"]) / traj["t"])
    if len(ints):
        assert set(ints["t"]) <= set(range(20, 121, 20))
        assert ((ints["lower"] <= ints["estimate"]) & (ints["estimate"] <= ints["upper"])).all()
    assert r.graph_draws >= 1 and is_connected(r.edges, 5)


def test_settings_match_the_paper():
    a, b = study.SETTINGS["A"], study.SETTINGS["B"]
    assert (a.n_items, a.dim, a.T, a.T0, a.M, a.p, a.alpha) == (5, 10, 500, 200, 20, 0.3, 0.25)
    assert (b.n_items, b.dim, b.T, b.T0, b.M, b.p, b.alpha) == (10, 10, 500, 200, 50, 0.15, 0.25)
    assert np.array_equal(a.theta_star[2], [0, 0, 0, 0, 1, 1, 0, 0, 0, 0])
    assert np.array_equal(b.theta_star, np.eye(10))
    assert np.allclose(a.theta_star_centred.sum(axis=0), 0)
    env = BTLEnvironment(a, 0)
    assert np.allclose(env.contexts.mean(), 1.0, atol=0.05) and np.allclose(env.contexts.var(), 0.5, atol=0.05)


@pytest.mark.parametrize("overrides, match", [
    ({"n_items": 1}, "n_items"), ({"dim": 0}, "dim"), ({"p": 0.0}, "p"), ({"p": 1.5}, "p"),
    ({"M": 0}, "M"), ({"T0": 600}, "T0"), ({"alpha": 1.0}, "alpha"), ({"alpha": 0.0}, "alpha"),
    ({"truth": np.full((5, 10), np.nan)}, "NaN"), ({"truth": np.ones((4, 10))}, "shape"),
    ({"edges": [(0, 1), (2, 3)]}, "connected"), ({"bogus": 1}, "unknown setting field"),
])
def test_bad_settings_rejected(overrides, match):
    with pytest.raises(ValueError, match=match):
        study.run_replication("A", "RB", 0, **overrides)


def test_bad_names_and_rows_rejected():
    with pytest.raises(ValueError, match="unknown method"):
        study.run_replication("A", "UCB", 0)
    with pytest.raises(ValueError, match="unknown setting"):
        study.run_replication("C", "RB", 0)
    theta, i, j, X, wins, m = simulate(rows=10)
    with pytest.raises(ValueError, match="outside"):
        study.fit_btl(i, j + 5, X, wins, m, 5)
    with pytest.raises(ValueError, match="i == j"):
        study.fit_btl(i, i, X, wins, m, 5)
    with pytest.raises(ValueError, match=r"wins must lie in \[0, m\]"):
        study.fit_btl(i, j, X, wins + 100, m, 5)
    with pytest.raises(ValueError, match="NaN"):
        study.fit_btl(i, j, X * np.nan, wins, m, 5)
    with pytest.raises(ValueError, match="shape"):
        study.fit_btl(i, j, X[:5], wins, m, 5)
    with pytest.raises(ValueError, match="n_items"):
        study.fit_btl(i, j, X, wins, m, 1)


def test_seeded_coverage_near_nominal_in_setting_b():
    """40 seeded replications of Setting B (RB): mean CP over items and dimensions at t = T.

    Replications are independent, so the Monte Carlo standard error of the mean CP is the sample
    sd of per-replication coverage / sqrt(40) (about 0.005 here).  Band: 0.95 +/- (4 SE + 0.01),
    the 0.01 allowing the finite-T bias visible in the paper's own coverage figures at T = 500."""
    per_rep = np.array([study.run_replication("B", "RB", 1000 + r, ci_every=500).intervals["covered"].mean()
                        for r in range(40)])
    se = per_rep.std(ddof=1) / np.sqrt(len(per_rep))
    assert se < 0.01
    assert abs(per_rep.mean() - 0.95) <= 4 * se + 0.01, (per_rep.mean(), se)


def test_reduced_coordinates_match_item_form(monkeypatch):
    """Margins and reduced gradient from the stored design rows (Q[b] - Q[a]) (x) x equal the
    item-form computations, and the item-form path (large problems) gives the same fits."""
    theta, i, j, X, wins, m = simulate(rows=120)
    n, d = theta.shape
    data = ComparisonData.from_rows(i, j, X, wins, np.full(len(i), float(m)), n)
    assert data.design is not None
    q = sum_zero_basis(n)
    point = theta + 0.2
    point -= point.mean(axis=0)
    beta = (q.T @ point).ravel()
    u = data.margins(point)
    assert np.allclose(data.reduced_margins(beta), u, atol=1e-12)
    assert np.allclose(data.reduced_gradient(u), (q.T @ data.gradient(point)).ravel(), atol=1e-9)
    for k in (0, 57, len(i) - 1):
        assert np.allclose(data.reduced_row(k), np.kron(q[j[k]] - q[i[k]], X[k]))
    with_design = study.fit_btl(i, j, X, wins, m, n, radius=1.0)
    ridge_design = study.fit_btl(i, j, X, wins, m, n, ridge=2.0)
    monkeypatch.setattr(likelihood, "REDUCED_DESIGN_MAX_ENTRIES", 0)  # force the item form
    small = ComparisonData.from_rows(i, j, X, wins, np.full(len(i), float(m)), n)
    assert small.design is None
    assert np.allclose(small.reduced_row(57), np.kron(q[j[57]] - q[i[57]], X[57]))
    assert np.allclose(small.reduced_margins(beta), u, atol=1e-12)
    assert np.allclose(small.reduced_gradient(u), (q.T @ data.gradient(point)).ravel(), atol=1e-9)
    without = study.fit_btl(i, j, X, wins, m, n, radius=1.0)
    ridge_without = study.fit_btl(i, j, X, wins, m, n, ridge=2.0)
    assert np.max(np.abs(with_design - without)) < 1e-8
    assert np.max(np.abs(ridge_design - ridge_without)) < 1e-8


def test_rank_bound_bounds_the_reduced_hessian_rank_and_debias_agrees():
    # few edges, so that the per-edge bound min(n_e, d) binds for a long time
    theta, i, j, X, wins, m = simulate(n=4, d=3, rows=40, seed=3)
    i, j = i % 2, 2 + (j % 2)  # items {0, 1} against {2, 3}: four edges
    data = ComparisonData(4, 3, 40)
    basis = sum_zero_basis(4)
    k = 3 * 3
    seen_below = seen_full = False
    for row in range(40):
        data.append(int(i[row]), int(j[row]), X[row], float(wins[row]), float(m))
        H = data.hessian(theta)
        C = np.kron(basis, np.eye(3))
        rank = np.linalg.matrix_rank(C.T @ H @ C)
        bound = data.rank_bound()
        assert rank <= bound
        result = debias_data(data, theta)
        if bound < k:
            seen_below = True
            assert not result.available
        elif rank == k:
            seen_full = True
            assert result.available
    assert seen_below and seen_full
