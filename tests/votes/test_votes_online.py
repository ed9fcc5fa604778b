"""The lucb rule as an online ranker's policy (by import path), with its stopping target: the
choices are the c-optimal pair for the most ambiguous contrast, and a ranker asked and told with
BTL outcomes decides its top k, the right one."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from study.online import Ranker
from study.votes.online import LUCBPolicy

THETA = np.array([0.9, 0.6, 0.3, -0.3, -0.6, -0.9])


def _answer(ranker, rng, asks):
    for _ in range(asks):
        ticket = ranker.ask([1.0])
        p_other = expit(THETA[ticket.other] - THETA[ticket.major])
        ranker.tell(ticket, int(np.sum(rng.random(5) < p_other)), 5)


@pytest.mark.parametrize("top", [1, 3])
def test_a_ranker_with_lucb_decides_its_target(tmp_path, top):
    rng = np.random.default_rng(top)
    with Ranker(tmp_path / "r.sqlite", n_items=len(THETA), dim=1, policy=f"study.votes.online:lucb_top{top}", T=1000,
                T0=40, M=5, seed=5) as ranker:
        asked = 0
        while not ranker.decided(top=top) and asked < 1000:
            _answer(ranker, rng, 20)
            asked += 20
        decision = ranker.decision(top=top)
        assert decision.decided, f"not decided after {asked} asks"
        assert set(decision.top) == set(np.argsort(-THETA)[:top].tolist())


def test_the_online_choice_is_the_brute_force_c_optimal_pair(tmp_path):
    rng = np.random.default_rng(0)
    with Ranker(tmp_path / "r.sqlite", n_items=len(THETA), dim=1, policy="study.votes.online:lucb_top1", T=1000,
                T0=40, M=5, seed=5) as ranker:
        _answer(ranker, rng, 100)
        result = ranker.debiased(se="model")
        theta = ranker.theta
        assert result.available
        class _Setting:
            n_items, dim, T, M = len(THETA), 1, 1000, 5
        policy = LUCBPolicy(_Setting(), top=1)
        x = np.ones(1)
        i, j = policy.target(result, x)
        Phi = result.phi11
        edges = np.array([(a, b) for a in range(len(THETA)) for b in range(a + 1, len(THETA))])
        g = np.zeros(len(THETA))
        g[i], g[j] = 1.0, -1.0
        best, score = None, -np.inf
        for a, b in edges:
            r = np.zeros(len(THETA))
            r[a], r[b] = 1.0, -1.0
            w = 5 * expit(theta[b, 0] - theta[a, 0]) * expit(theta[a, 0] - theta[b, 0])
            reduction = w * (g @ Phi @ r) ** 2 / (1.0 + w * r @ Phi @ r)
            if reduction > score + 1e-15:
                best, score = (a, b), reduction
        ticket = ranker.ask([1.0])
        assert {ticket.major, ticket.other} == set(best)
        assert not ticket.explored


def test_a_bad_target_is_refused():
    class _Setting:
        n_items, dim, T, M = 3, 1, 10, 1
    with pytest.raises(ValueError, match=r"top must lie in \[1, n_items - 1 = 2\]"):
        LUCBPolicy(_Setting(), top=3)
