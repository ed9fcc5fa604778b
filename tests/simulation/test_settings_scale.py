"""Settings for any n and d (a drawn truth, a log(n)/n graph density) and the refusal of sizes that
are clearly out of reach, before any work starts."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.simulation.environment import BTLEnvironment
from study.core.limits import replication_cost


def test_normal_truth_is_drawn_per_replication_from_its_seed():
    setting = study.SETTINGS["B"].replace(n_items=30, truth="normal", truth_scale=2.0, p="2log(n)/n", T=5, T0=2)
    a, b, again = BTLEnvironment(setting, 1), BTLEnvironment(setting, 2), BTLEnvironment(setting, 1)
    assert np.array_equal(a.theta_star, again.theta_star) and not np.allclose(a.theta_star, b.theta_star)
    assert np.allclose(a.theta_star.sum(axis=0), 0.0)
    # entries N(0, truth_scale^2 / d): E||theta_i||^2 = 4 (centring removes a factor (n-1)/n)
    norms = np.concatenate([np.sum(BTLEnvironment(setting, s).theta_star ** 2, axis=1) for s in range(20)])
    assert abs(norms.mean() - 4.0 * 29 / 30) < 4 * norms.std() / np.sqrt(len(norms))
    with pytest.raises(ValueError, match="drawn per replication"):
        setting.theta_star
    # the fixed-truth settings' environments are unchanged by the extra seed child
    fixed = BTLEnvironment(study.SETTINGS["A"], 5)
    assert np.allclose(fixed.theta_star, study.SETTINGS["A"].theta_star_centred)


@pytest.mark.parametrize("p, expected", [("2log(n)/n", 2 * np.log(40) / 40), ("log(n)/n", np.log(40) / 40),
                                         ("0.5*log(n)/n", 0.5 * np.log(40) / 40), (0.3, 0.3), ("30log(n)/n", 1.0)])
def test_log_density(p, expected):
    assert study.SETTINGS["B"].replace(n_items=40, truth="normal", p=p).edge_probability == pytest.approx(expected)


@pytest.mark.parametrize("p", ["2 log n", "-1log(n)/n", 0.0, 1.5, "abc"])
def test_bad_density_is_refused(p):
    with pytest.raises(ValueError, match="p must|multiple of log"):
        study.SETTINGS["B"].replace(p=p)


@pytest.mark.parametrize("overrides, message", [
    ({"dim": 2000, "truth": "normal"}, "GiB of memory"),
    ({"T": 10 ** 9, "T0": 10}, "out of reach"),
    ({"n_items": 400, "dim": 50, "T": 20_000, "truth": "normal"}, "CPU-hours"),
])
def test_sizes_out_of_reach_are_refused_with_the_estimate(overrides, message):
    with pytest.raises(ValueError, match=message):
        study.SETTINGS["B"].replace(**overrides)


def test_study_sizes_are_within_reach():
    for n, d, T in ((5, 10, 500), (10, 10, 500), (200, 10, 300), (129, 1, 10_000)):
        memory, seconds = replication_cost(n, d, T)
        assert memory < 2 ** 30 and seconds < 600


def test_huge_contexts_are_refused_instead_of_overflowing():
    rng = np.random.default_rng(0)
    i = rng.integers(0, 3, 50)
    j = (i + 1) % 3
    X = rng.normal(size=(50, 2))
    wins = rng.integers(0, 3, 50)
    theta = study.fit_btl(i, j, X, wins, 2, 3, ridge=1.0)
    with pytest.raises(ValueError, match="rescale the contexts"):
        study.fit_btl(i, j, X * 1e160, wins, 2, 3, ridge=1.0)
    # a large but representable scale is fitted, not zeroed: the fit scales inversely
    scaled = study.fit_btl(i, j, X * 1e6, wins, 2, 3, ridge=1e12)
    assert np.allclose(scaled * 1e6, theta, rtol=1e-6, atol=1e-9)
