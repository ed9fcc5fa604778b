"""The offline path of the core: exact aggregation of identical rows (study.core.aggregate), Newton
over arrays (study.core.batch) and the judge-clustered sandwich (debias(..., se="cluster")).

* Aggregated and unaggregated rows give the same estimate and every covariance: model-based,
  sandwich, and clustered (where rows are merged only within a cluster); a forced hash collision
  still groups exactly.
* The batch solver computes the row store's estimator (the same problem, the same stopping rule):
  with and without a ridge, d = 1 votes and distinct contexts; fit_btl takes it from BATCH_MIN_ROWS.
* The clustered meat equals an independent computation (explicit per-cluster score sums of the full
  design, the Hessian's pseudo-inverse), and with one comparison per cluster it is the
  per-comparison sandwich times G/(G - 1).
"""
import numpy as np
import pytest
from scipy.special import expit
from threadpoolctl import threadpool_limits

import study
from study.core import aggregate as aggregate_module
from study.core import batch, mle
from study.core.aggregate import aggregate
from study.core.likelihood import ComparisonData
from study.core.mle import solve


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def votes(seed=0, n=6, K=4000, d=2, distinct=False, judges=40):
    """K single comparisons (m = 1) of n items, a tie in about 15%, contexts from a few values or
    all distinct, a judge per row."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(0, 0.7, (n, d))
    truth -= truth.mean(axis=0)
    i = rng.integers(0, n, K)
    j = (i + 1 + rng.integers(0, n - 1, K)) % n
    if distinct:
        X = np.column_stack([np.ones(K), rng.normal(0, 1, (K, d - 1))])
    else:
        X = np.column_stack([np.ones(K), rng.choice([-1.0, 0.0, 0.5], (K, d - 1))])
    p = expit(np.einsum("kd,kd->k", X, truth[j] - truth[i]))
    u = rng.random(K)
    ties = (u < 0.15).astype(float)
    wins = ((u >= 0.15) & (rng.random(K) < p)).astype(float)
    return i, j, X, wins, ties, np.ones(K), rng.integers(0, judges, K)


def test_aggregation_sums_identical_rows_exactly_and_keeps_distinct_ones():
    i, j, X, wins, ties, m, judges = votes(K=3000)
    rows = aggregate(i, j, X, wins, ties, m)
    assert rows.size < 6 * 5 // 2 * 3 + 1 and rows.groups is not None  # at most pairs x contexts
    assert np.all(rows.i < rows.j)
    np.testing.assert_array_equal([rows.m.sum(), rows.ties.sum()], [m.sum(), ties.sum()])
    # j's outright wins, seen from the pair's higher index: i's outright wins where i > j
    hi_wins = np.where(i < j, wins, m - wins - ties)
    np.testing.assert_array_equal(np.bincount(rows.groups, hi_wins), rows.wins)
    by_cluster = aggregate(i, j, X, wins, ties, m, judges)
    assert by_cluster.size > rows.size and len(np.unique(by_cluster.clusters)) == 40
    distinct = votes(distinct=True, K=500)
    unchanged = aggregate(*distinct[:6])
    assert unchanged.groups is None and unchanged.i is distinct[0]  # the input itself: same rows, same order


def test_a_hash_collision_still_groups_exactly(monkeypatch):
    i, j, X, wins, ties, m, _ = votes(K=2000)
    expected = aggregate(i, j, X, wins, ties, m)
    monkeypatch.setattr(aggregate_module, "_mix", lambda h, column: np.zeros_like(h))  # every row collides
    collided = aggregate(i, j, X, wins, ties, m)
    order = np.lexsort((collided.X[:, 1], collided.j, collided.i))
    reference = np.lexsort((expected.X[:, 1], expected.j, expected.i))
    for name in ("i", "j", "wins", "ties", "m"):
        np.testing.assert_array_equal(getattr(collided, name)[order], getattr(expected, name)[reference])


@pytest.mark.parametrize("se", ["model", "sandwich", "cluster"])
def test_aggregated_rows_give_the_same_estimate_and_covariance(se):
    i, j, X, wins, ties, m, judges = votes(seed=3, K=3000)
    theta = study.fit_btl(i, j, X, wins, m, n_items=6, ties=ties)
    clusters = judges if se == "cluster" else None
    result = study.debias(theta, i, j, X, wins, m, ties=ties, se=se, clusters=clusters)
    # unaggregated: every row its own row of the estimator (the row store and, for the covariance,
    # batch.Rows over all 3,000 rows in their own order and orientation)
    data = ComparisonData.from_rows(i, j, X, wins + ties / 2, m, 6)
    direct = solve(data, np.zeros((6, 2)))
    np.testing.assert_allclose(theta, direct.theta, atol=1e-9)
    rows = batch.Rows(i, j, X, wins, ties, m, 6, None if clusters is None else judges)
    unaggregated = study.core.inference.debias_rows(rows, theta, se=se)
    assert result.se_method == se and result.available
    np.testing.assert_allclose(result.theta_d, unaggregated.theta_d, atol=1e-12)
    np.testing.assert_allclose(result.phi11, unaggregated.phi11, rtol=1e-10, atol=1e-14)
    # and against the row store's debiasing of the unaggregated rows (the simulations' code)
    store = study.core.inference.debias_data(data, theta)
    if se == "sandwich":
        store = study.core.sandwich.robust(store, theta, i, j, X, wins + ties / 2, m, ties)
    if se != "cluster":
        np.testing.assert_allclose(result.phi11, store.phi11, rtol=1e-9, atol=1e-14)


def test_the_batch_solver_computes_the_row_stores_estimator():
    for distinct in (False, True):
        i, j, X, wins, ties, m, _ = votes(seed=5, K=2500, d=3, distinct=distinct)
        data = ComparisonData.from_rows(i, j, X, wins + ties / 2, m, 6)
        rows = batch.Rows(i, j, X, wins, ties, m, 6)
        for ridge in (0.0, 4.0):
            fitted = batch.fit(rows, ridge=ridge)
            reference = solve(data, np.zeros((6, 3)), ridge=ridge)
            assert fitted.converged and reference.converged
            np.testing.assert_allclose(fitted.theta, reference.theta, atol=2e-9)
            assert fitted.kkt_residual <= (1e-11 if ridge == 0 else 1e-10) * (1 + m.sum())


def test_fit_btl_uses_the_batch_solver_from_batch_min_rows_with_the_same_result(monkeypatch):
    i, j, X, wins, ties, m, _ = votes(seed=7, K=6000, d=2, distinct=True)
    assert aggregate(i, j, X, wins, ties, m).groups is None and len(i) >= mle.BATCH_MIN_ROWS
    calls = []
    original = batch.fit
    monkeypatch.setattr(batch, "fit", lambda *a, **k: calls.append(1) or original(*a, **k))
    theta = study.fit_btl(i, j, X, wins, m, n_items=6, ties=ties)
    assert calls
    reference = solve(ComparisonData.from_rows(i, j, X, wins + ties / 2, m, 6), np.zeros((6, 2))).theta
    np.testing.assert_allclose(theta, reference, atol=1e-9)
    few = study.fit_btl(i[:2000], j[:2000], X[:2000], wins[:2000], 1, n_items=6, ties=ties[:2000])
    assert len(calls) == 1 and few.shape == (6, 2)  # below BATCH_MIN_ROWS: the row store


def test_the_batch_solver_leaves_unidentified_data_to_the_general_solver():
    i = np.array([0, 1, 0, 1])
    j = np.array([1, 2, 1, 2])
    X = np.array([[1.0, 0.0]] * 4)  # the second context coordinate never varies: unidentified
    rows = batch.Rows(i, j, X, np.array([1.0, 0, 0, 1]), np.zeros(4), np.ones(4), 3)
    assert batch.fit(rows) is None
    assert batch.fit(rows, ridge=1.0).converged  # a ridge identifies it


def laplacian_kron(i, j, X, weights, n):
    d = X.shape[1]
    H = np.zeros((n * d, n * d))
    for a, b, x, w in zip(i, j, X, weights):
        r = np.zeros(n * d)
        r[b * d:(b + 1) * d] += x
        r[a * d:(a + 1) * d] -= x
        H += w * np.outer(r, r)
    return H


def test_the_clustered_meat_equals_an_independent_computation():
    i, j, X, wins, ties, m, judges = votes(seed=11, n=4, K=600, judges=25)
    theta = study.fit_btl(i, j, X, wins, m, n_items=4, ties=ties)
    result = study.debias(theta, i, j, X, wins, m, ties=ties, se="cluster", clusters=judges.astype(str))
    n, d = 4, 2
    p = expit(np.einsum("kd,kd->k", X, theta[j] - theta[i]))
    residual = wins + ties / 2 - m * p  # j's score minus its expectation, per row
    S = np.zeros((25, n * d))
    for g, a, b, x, e in zip(judges, i, j, X, residual):
        S[g, b * d:(b + 1) * d] += e * x
        S[g, a * d:(a + 1) * d] -= e * x
    bread = np.linalg.pinv(laplacian_kron(i, j, X, m * p * (1 - p), n))
    covariance = bread @ (S.T @ S) @ bread * 25 / 24
    np.testing.assert_allclose(result.phi11, covariance, rtol=1e-8, atol=1e-12 * np.abs(covariance).max())


def test_one_comparison_per_cluster_is_the_per_comparison_sandwich():
    i, j, X, wins, ties, m, _ = votes(seed=2, K=800)
    theta = study.fit_btl(i, j, X, wins, m, n_items=6, ties=ties)
    sandwich = study.debias(theta, i, j, X, wins, m, ties=ties, se="sandwich")
    clustered = study.debias(theta, i, j, X, wins, m, ties=ties, se="cluster", clusters=np.arange(800))
    np.testing.assert_allclose(clustered.phi11, sandwich.phi11 * 800 / 799, rtol=1e-10, atol=1e-15)


def test_clustered_standard_errors_widen_for_judges_who_repeat_themselves():
    """Judges with a private bias (each prefers the higher index a little, or not): votes are
    correlated within a judge, which the per-comparison sandwich ignores."""
    rng = np.random.default_rng(4)
    n, K, G = 5, 6000, 30
    i = rng.integers(0, n, K)
    j = (i + 1 + rng.integers(0, n - 1, K)) % n
    judges = rng.integers(0, G, K)
    bias = rng.normal(0, 1.0, (G, n))[judges]  # each judge's own taste for each item
    p = expit(bias[np.arange(K), j] - bias[np.arange(K), i])
    wins = (rng.random(K) < p).astype(float)
    X = np.ones((K, 1))
    theta = study.fit_btl(i, j, X, wins, 1, n_items=n)
    per_comparison = study.debias(theta, i, j, X, wins, 1, se="sandwich").se
    clustered = study.debias(theta, i, j, X, wins, 1, se="cluster", clusters=judges).se
    assert np.all(clustered > 1.5 * per_comparison)


def test_bad_clusters_are_refused():
    i, j, X, wins, ties, m, judges = votes(K=100)
    theta = study.fit_btl(i, j, X, wins, m, n_items=6, ties=ties)
    with pytest.raises(ValueError, match="needs clusters="):
        study.debias(theta, i, j, X, wins, m, ties=ties, se="cluster")
    with pytest.raises(ValueError, match="one label per row"):
        study.debias(theta, i, j, X, wins, m, se="cluster", clusters=judges[:-1])
    with pytest.raises(ValueError, match="single cluster"):
        study.debias(theta, i, j, X, wins, m, se="cluster", clusters=np.zeros(100))
    bad = judges.astype(float)
    bad[7] = np.nan
    with pytest.raises(ValueError, match=r"clusters\[7\] is NaN"):
        study.debias(theta, i, j, X, wins, m, se="cluster", clusters=bad)


def test_large_separable_data_are_refused_after_the_fit_without_a_certificate(monkeypatch):
    """Beyond SEPARATION_BEFORE_FIT design entries the linear program runs after the batch fit unless
    the fit certifies that the data are not separable: separable data (item 0 wins every
    comparison) are still refused, data that are not separable need no program."""
    i, j, X, wins, ties, m, _ = votes(seed=12, K=24000, d=10, distinct=True)
    assert X.size > batch.SEPARATION_BEFORE_FIT
    wins = np.where(j == 0, 1.0, np.where(i == 0, 0.0, wins))
    ties = np.where((i == 0) | (j == 0), 0.0, ties)
    calls = []
    original = batch.certify
    monkeypatch.setattr(batch, "certify", lambda *a, **k: calls.append(original(*a, **k)) or calls[-1])
    with pytest.raises(study.core.separation.SeparableData, match="item 0 won all"):
        study.fit_btl(i, j, X, wins, m, n_items=6, ties=ties)
    assert calls == [False]
    fine = votes(seed=12, K=24000, d=10, distinct=True)
    study.fit_btl(fine[0], fine[1], fine[2], fine[3], fine[5], n_items=6, ties=fine[4])
    assert calls[-1] is True  # certified: no program


def test_a_meat_without_variance_in_some_direction_leaves_the_covariance_unavailable():
    """Item 3 judged only by cluster 0: its score sum is one cluster's, zero at the MLE, so the
    clustered meat is singular; whether a factor exists must not be left to rounding."""
    i, j, X, wins, ties, m, judges = votes(seed=6, n=4, K=1200, d=1)
    judges = np.where((i == 3) | (j == 3), 0, judges % 7 + 1)
    theta = study.fit_btl(i, j, X, wins, m, n_items=4, ties=ties)
    result = study.debias(theta, i, j, X, wins, m, ties=ties, se="cluster", clusters=judges)
    assert not result.available and np.isnan(result.theta_d).all()
    assert study.debias(theta, i, j, X, wins, m, ties=ties, se="sandwich").available
