"""The baselines added from the literature (MaxPairUCB, MaxFirstUCBNext, GURO, BALD, CoLSTIM's
coupling coin in its two readings) against hand-worked cases, and the warm-up protocol
(``Setting.warmup``) with its record, ``before_phi``, on whole runs."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.special import entr, expit

import study
from policy_stubs import UNAVAILABLE, FixedGumbel, StubDebias, step  # tests/support
from study.policies import (BALD, GURO, CoLSTIM, DoubleThompson, EpsilonGreedy, MaxFirstUCBNext, MaxInP, MaxPairUCB,
                            NEEDS_PHI, warmup_rule)
from study.policies.bald import bald_scores
from study.policies.colstim import colstim, colstim_rev, coupling_probability

# theta_d = [0.5, 0.4, 0.0, -0.9]; Phi_11 = diag(0.01, 0.25, 0.04, 0.09) with Phi_01 = 0.1.
# Var X'(theta_d_a - theta_d_b) on the edges: 0-1: 0.01 + 0.25 - 0.2 = 0.06; 0-2: 0.05; 1-2: 0.29;
# 2-3: 0.13 (sd 0.245, 0.224, 0.539, 0.361).
PHI = np.diag([0.01, 0.25, 0.04, 0.09])
PHI[0, 1] = PHI[1, 0] = 0.1
DB = StubDebias([0.5, 0.4, 0.0, -0.9], PHI)


def test_max_pair_ucb_by_hand():
    # scores u_a + u_b + 2 sd_ab: 0-1: 0.9 + 0.49 = 1.39; 0-2: 0.5 + 0.447 = 0.947;
    # 1-2: 0.4 + 1.077 = 1.477; 2-3: -0.9 + 0.721 = -0.18 -> edge 1-2, major 1 (0.4 > 0.0).
    assert tuple(MaxPairUCB(width=2.0).select(step(DB))) == (1, 2, False)
    # w = 0: the largest sum, 0-1 (0.9), major 0
    assert tuple(MaxPairUCB(width=0.0).select(step(DB))) == (0, 1, False)
    # without the covariance Phi_01, Var(0-1) = 0.26: 0.9 + 1.02 = 1.92 would win
    no_cov = StubDebias([0.5, 0.4, 0.0, -0.9], np.diag([0.01, 0.25, 0.04, 0.09]))
    assert tuple(MaxPairUCB(width=2.0).select(step(no_cov))) == (0, 1, False)
    # before Phi: its own rule, a random edge: floor(0.6 * 4) = 2 -> 1-2, end 0.7 -> major 2
    assert tuple(MaxPairUCB(width=2.0).select(step(UNAVAILABLE))) == (2, 1, True)


def test_max_first_ucb_next_by_hand():
    # first: the greedy item 0 (0.5); second among {1, 2}: 1: 0.4 + 2 sqrt(0.06) = 0.890;
    # 2: 0.0 + 2 sqrt(0.05) = 0.447 -> (0, 1).  It is CoLSTIM with every perturbation 0.
    assert tuple(MaxFirstUCBNext(width=2.0).select(step(DB))) == (0, 1, False)
    zero = CoLSTIM(threshold=2.0, width=2.0).select(step(DB, rng=FixedGumbel([0.0, 0.0, 0.0, 0.0])))
    assert tuple(zero) == (0, 1, False)
    # a wide second item wins when w is large: w = 5: 1: 0.4 + 1.22 = 1.62; 2: 1.12 -> still 1;
    # theta_d_1 = -0.5: 1: -0.5 + 1.22 = 0.72 < 2: 1.12 -> (0, 2)
    low = StubDebias([0.5, -0.5, 0.0, -0.9], PHI)
    assert tuple(MaxFirstUCBNext(width=5.0).select(step(low))) == (0, 2, False)


def test_colstim_coin_two_readings_by_hand():
    # Gumbel draws [1, 0, 5, 0], c = 2.  Shared (VACDB, B_t = 1): eps = 1 for all ->
    # [0.5 + 0.1, 0.4 + 0.5, 0.0 + 0.2, -0.9 + 0.3] = [0.6, 0.9, 0.2, -0.6] -> i_t = 1; second
    # among {0, 2}: 0: 0.5 + 2 sqrt(0.06) = 0.99; 2: 0.0 + 2 sqrt(0.29) = 1.077 -> (1, 2).
    # Independent: eps = [1, 0, 2, 0] -> [0.6, 0.4, 0.4, -0.9] -> i_t = 0, second 1 (see above).
    draws = [1.0, 0.0, 5.0, 0.0]
    shared = CoLSTIM(threshold=2.0, width=2.0, shared_on_heads=True)
    rev = CoLSTIM(threshold=2.0, width=2.0, shared_on_heads=False)
    assert tuple(shared.select(step(DB, rng=FixedGumbel(draws)))) == (1, 2, False)
    assert tuple(rev.select(step(DB, rng=FixedGumbel(draws)))) == (0, 1, False)
    # p_t < 1: d = 1, T = e^5, t = 100 -> p_t = 5 / 10 = 0.5; the coin's uniform 0.3 is heads, 0.7 tails
    assert coupling_probability(100, 1, np.exp(5.0)) == pytest.approx(0.5)
    coin = dict(threshold=2.0, width=2.0, dimension=1, horizon=float(np.exp(5.0)))
    for uniform, heads in ((0.3, True), (0.7, False)):
        for shared_on_heads in (True, False):
            policy = CoLSTIM(shared_on_heads=shared_on_heads, **coin)
            eps = policy.perturbations(FixedGumbel(draws, uniforms=[uniform]), 4, 100)
            expected = [1.0] * 4 if heads == shared_on_heads else [1.0, 0.0, 2.0, 0.0]
            assert eps.tolist() == expected
    # the factories: d = (n - 1) d_x, T; p_t = 1 at every step of A and B, so no coin is drawn
    for name in ("A", "B"):
        setting = study.SETTINGS[name]
        policy = colstim(setting)
        assert (policy.dimension, policy.horizon) == ((setting.n_items - 1) * setting.dim, setting.T)
        assert all(coupling_probability(t, policy.dimension, policy.horizon) == 1.0 for t in (1, 10, setting.T))
        assert policy.shared_on_heads and not colstim_rev(setting).shared_on_heads
        eps = policy.perturbations(FixedGumbel(draws), 4, setting.T)  # FixedGumbel has no uniforms: no coin
        assert eps.tolist() == [1.0] * 4


def test_guro_by_hand():
    # score sd_ab^2 sigma'(u_a - u_b): 0-1: 0.06 x 0.2494 = 0.0150; 0-2: 0.05 x 0.2350 = 0.0118;
    # 1-2: 0.29 x 0.2403 = 0.0697; 2-3: 0.13 x 0.2055 = 0.0267 -> (1, 2), major 1.
    assert tuple(GURO().select(step(DB))) == (1, 2, False)
    # theta_d_2 = 3.5: 1-2's margin -3.1 gives sigma' = 0.0413 -> 0.0120 < 0-1's 0.0150 -> (0, 1),
    # where the widest CI alone (1-2) would not
    assert tuple(GURO().select(step(StubDebias([0.5, 0.4, 3.5, -0.9], PHI)))) == (0, 1, False)


def _mutual_information(mu, variance):
    """I(outcome; theta) for log-odds ~ N(mu, variance), by quadrature (bits)."""
    sd = np.sqrt(variance)
    density = lambda z: np.exp(-(z - mu) ** 2 / (2 * variance)) / np.sqrt(2 * np.pi * variance)
    h = lambda q: (entr(q) + entr(1 - q)) / np.log(2)
    p = integrate.quad(lambda z: expit(z) * density(z), mu - 12 * sd, mu + 12 * sd)[0]
    return h(p) - integrate.quad(lambda z: h(expit(z)) * density(z), mu - 12 * sd, mu + 12 * sd)[0]


def test_bald_scores_against_the_mutual_information_and_by_hand():
    # mu = 0, s^2 = C^2 = 4 ln 2: marginal 1 bit, expected sqrt(1/2) -> 1 - 0.7071
    assert bald_scores(np.array([0.0]), np.array([4 * np.log(2)]))[0] == pytest.approx(1 - np.sqrt(0.5))
    assert bald_scores(np.array([0.0]), np.array([0.0]))[0] == pytest.approx(0.0, abs=1e-12)
    # the approximation (MacKay's probit; Gaussian-shaped entropy) against quadrature: within 15%
    for mu, variance in [(0.0, 0.05), (0.0, 1.0), (1.0, 1.0), (0.4, 0.29), (2.0, 4.0)]:
        exact = _mutual_information(mu, variance)
        assert bald_scores(np.array([mu]), np.array([variance]))[0] == pytest.approx(exact, rel=0.15)
    # on the stub: 0-1 (mu 0.1, s^2 0.06): 0.0106; 0-2 (0.5, 0.05): 0.0089; 1-2 (0.4, 0.29): 0.0476;
    # 2-3 (0.9, 0.13): 0.0233 -> (1, 2)
    assert tuple(BALD().select(step(DB))) == (1, 2, False)


# ---------------------------------------------------------------------------------------------
# The warm-up protocol
# ---------------------------------------------------------------------------------------------

def test_warmup_rules_by_hand():
    own = study.SETTINGS["A"]
    assert warmup_rule(own, "greedy") == "greedy" and warmup_rule(own, "random") == "random"
    for chosen in ("random", "greedy"):
        assert warmup_rule(own.replace(warmup=chosen), "greedy") == chosen == warmup_rule(
            own.replace(warmup=chosen), "random")
    with pytest.raises(ValueError, match="warmup must be one of"):
        own.replace(warmup="bogus")
    # theta(t-1) = [0.3, 0.1, 0.2, -0.6], no Phi: greedy = (0, 2) (neighbours {1, 2}, uniform 0.7 -> 2);
    # random = edge floor(0.6 * 4) = 2 -> 1-2, end 0.7 -> (2, 1), explored
    s = step(UNAVAILABLE, theta=[0.3, 0.1, 0.2, -0.6])
    for policy in (MaxInP(width=2.0, warmup="greedy"), DoubleThompson(), MaxPairUCB(2.0, warmup="greedy"),
                   GURO(warmup="greedy"), CoLSTIM(2.0, 2.0, warmup="greedy")):
        assert tuple(policy.select(s)) == (0, 2, False)
    for policy in (MaxInP(width=2.0), DoubleThompson(warmup="random"), BALD(), MaxFirstUCBNext(2.0)):
        assert tuple(policy.select(s)) == (2, 1, True)
    # BT-UCB: an exploitation step (coin 0.99 > t^-alpha at t = 50) before Phi follows the warm-up
    assert tuple(EpsilonGreedy("BT-UCB1", 0, 0.25, 4.0).select(s)) == (0, 2, False)
    assert tuple(EpsilonGreedy("BT-UCB1", 0, 0.25, 4.0, warmup="random").select(s)) == (2, 1, True)


RUN = dict(T=120, T0=50, ci_every=0)


def _run(method, warmup, setting="B"):
    return study.run_replication(setting, method, 2, warmup=warmup, **RUN).trajectory


def test_warmup_applies_to_the_methods_that_need_phi_only():
    for method in ("RB", "ERA", "ETA", "RB-UA"):  # their rule needs no Phi (RB-UA is RB before it)
        runs = [_run(method, w) for w in ("own", "random", "greedy")]
        for run in runs[1:]:
            for column in ("major", "other", "explored", "regret", "before_phi"):
                assert np.array_equal(run[column], runs[0][column])
    assert not any(_run(m, "random")["before_phi"].any() for m in ("RB", "ERA", "ETA"))
    own_rule = {"TS": "greedy", "BT-UCB1": "greedy", "MaxInP": "random", "CoLSTIM": "random", "GURO": "random"}
    for method, rule in own_rule.items():  # "own" is the method's own rule, value for value
        a, b = _run(method, "own"), _run(method, rule)
        assert all(np.array_equal(a[c], b[c]) for c in ("major", "other", "explored", "before_phi"))
    for method in NEEDS_PHI:
        random, greedy = _run(method, "random"), _run(method, "greedy")
        assert random["before_phi"].any() and greedy["before_phi"].any()
        if method != "BT-UCB2":  # (BT-UCB2 also explores by its own coins up to T0, without asking for Phi)
            assert random["before_phi"][0] and greedy["before_phi"][0]  # Phi never exists at t = 1
            # random warm-up steps are exactly the steps before Phi, all explored; greedy ones never are
            assert np.array_equal(random["explored"], random["before_phi"])
            assert not greedy["explored"].any()
        assert not np.array_equal(random["major"], greedy["major"])


def test_steps_before_phi_are_recorded():
    # B at T = 40: 40 rows never identify (n-1)d = 90 parameters: every step of a method that asks is before Phi
    r = study.run_replication("B", "MaxPairUCB", 1, T=40, T0=20, ci_every=10)
    assert r.trajectory["before_phi"].all() and r.ci_available_from is None
    # A at T = 150, random warm-up: Phi exists after a few dozen steps and here never goes away again
    for method in ("TS", "GURO"):
        flags = study.run_replication("A", method, 3, T=150, T0=60, ci_every=0, warmup="random").trajectory["before_phi"]
        first = int(np.argmin(flags))
        assert 10 < first < 150 and flags[:first].all() and not flags[first:].any()
    frame = study.run_replication("A", "RB", 3, T=30, T0=10).to_frame()["trajectory"]
    assert frame["before_phi"].dtype == bool and not frame["before_phi"].any()
