"""The pair-choice rules of study.votes against independent computations: fisher's choice is the
brute-force D-optimal pair, arena_active's probabilities are Chiang et al.'s eq. (9) computed
directly, lucb's choice is the brute-force c-optimal pair for its target."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from study.votes.arenas import build_episode
from study.votes.engine import Replay
from study.votes.rules import ArenaActive


def _brute_information(rows, theta, n, d) -> np.ndarray:
    """sum over rows of m sigma'(u) r r', r = (e_i - e_j) (x) x, by explicit loops."""
    J = np.zeros((n * d, n * d))
    for i, j, x, m in zip(rows["i"], rows["j"], rows["X"], rows["m"]):
        u = x @ (theta[j] - theta[i])
        r = np.zeros(n * d)
        r[i * d:(i + 1) * d] += x
        r[j * d:(j + 1) * d] -= x
        J += m * expit(u) * expit(-u) * np.outer(r, r)
    return J


def _reduced(n, d):
    """A basis (n d, (n-1) d) of the sum-zero space: contrasts e_k - e_{n-1} (x) I_d (not orthonormal:
    the argmax of a determinant ratio does not depend on the basis)."""
    B = np.zeros((n, n - 1))
    B[np.arange(n - 1), np.arange(n - 1)] = 1.0
    B[n - 1, :] = -1.0
    return np.kron(B, np.eye(d))


def _pair_vector(a, b, x, n, d):
    r = np.zeros(n * d)
    r[a * d:(a + 1) * d] += x
    r[b * d:(b + 1) * d] -= x
    return r


def _drive_to_look(replay, looks, ready):
    """Step (looking on the grid) until ``looks`` looks after the first at which ``ready()`` holds."""
    first = None
    while first is None or replay.looks < first + looks:
        assert not replay.done(), "the run ended before the rule had an estimate"
        replay.step()
        if replay.t in replay._look_set:
            replay.look()
            if first is None and ready():
                first = replay.looks


def _capture(replay):
    chosen = []
    select = replay.policy.select

    def spy(step):
        choice = select(step)
        chosen.append((int(choice[0]), int(choice[1]), np.array(step.x, dtype=float)))
        return choice
    replay.policy.select = spy
    return chosen


@pytest.mark.parametrize("arena", ["arena10", "categories", "A"])
def test_fisher_choice_is_the_brute_force_d_optimal_pair(arena):
    replay = Replay(arena, "fisher", np.random.SeedSequence(11), budget=40_000)
    _drive_to_look(replay, 3, lambda: replay.policy.P is not None)
    ep = replay.episode
    n, d, M = ep.n_items, ep.dim, ep.M
    theta = replay.theta
    J = _brute_information(replay.rows(), theta, n, d)
    C = _reduced(n, d)
    chosen = _capture(replay)
    for _ in range(6):  # the first steps after the look: J grows by each chosen pair
        replay.step()
        a, b, x = chosen[-1]
        base = np.linalg.slogdet(C.T @ J @ C)[1]
        gains = []
        for lo, hi in ep.edges:
            u = x @ (theta[hi] - theta[lo])
            r = _pair_vector(lo, hi, x, n, d)
            gains.append(np.linalg.slogdet(C.T @ (J + M * expit(u) * expit(-u) * np.outer(r, r)) @ C)[1] - base)
        gains = np.array(gains)
        k = [e for e, pair in enumerate(ep.edges.tolist()) if set(pair) == {a, b}][0]
        assert gains[k] >= gains.max() - 1e-9 * abs(gains.max())  # the chosen pair maximises det (to rounding)
        assert gains.max() > 0
        u = x @ (theta[b] - theta[a])
        r = _pair_vector(a, b, x, n, d)
        J = J + M * expit(u) * expit(-u) * np.outer(r, r)


def test_lucb_choice_is_the_brute_force_c_optimal_pair():
    replay = Replay("arena30", "lucb", np.random.SeedSequence(5), budget=100_000)
    policy = replay.policy
    _drive_to_look(replay, 5, lambda: policy.scores_d is not None)
    ep = replay.episode
    n, d, M = ep.n_items, ep.dim, ep.M
    theta = replay.theta
    J = _brute_information(replay.rows(), theta, n, d)
    C = _reduced(n, d)
    chosen = _capture(replay)
    assert len(policy.undecided) == 3
    for _ in range(4):
        targets = policy.targets()
        criterion = policy.criterion(np.ones(1))  # arena30: x = 1 at every step
        replay.step()
        a, b, x = chosen[-1]
        Jr = C.T @ J @ C
        total = np.zeros(len(ep.edges))
        for c, i, j in targets.values():  # each undecided k's contrast: its relative variance reduction
            g = C.T @ _pair_vector(i, j, ep.decision_contexts[c], n, d)
            before = g @ np.linalg.solve(Jr, g)
            for e, (lo, hi) in enumerate(ep.edges):
                u = x @ (theta[hi] - theta[lo])
                r = C.T @ _pair_vector(lo, hi, x, n, d)
                total[e] += 1.0 - g @ np.linalg.solve(Jr + M * expit(u) * expit(-u) * np.outer(r, r), g) / before
        assert np.allclose(criterion, total, rtol=1e-7, atol=1e-12)
        k = [e for e, pair in enumerate(ep.edges.tolist()) if set(pair) == {a, b}][0]
        assert total[k] >= total.max() * (1 - 1e-9) and total.max() > 0
        u = x @ (theta[b] - theta[a])
        r = _pair_vector(a, b, x, n, d)
        J = J + M * expit(u) * expit(-u) * np.outer(r, r)


def test_lucb_targets_are_the_smallest_standardised_lower_bounds():
    replay = Replay("categories", "lucb", np.random.SeedSequence(6), budget=40_000)
    policy = replay.policy
    _drive_to_look(replay, 2, lambda: policy.scores_d is not None)
    P = policy.P.reshape(replay.episode.n_items * replay.episode.dim, -1)
    n, d = replay.episode.n_items, replay.episode.dim
    for k, (c, i, j) in policy.targets().items():
        xc = replay.episode.decision_contexts[c]
        best = None
        for cc, x in enumerate(replay.episode.decision_contexts):
            s = policy.scores_d[:, cc]
            top = set(np.argsort(-s, kind="stable")[:k].tolist())
            for a in top:
                for b in set(range(n)) - top:
                    g = _pair_vector(a, b, x, n, d)
                    z = (s[a] - s[b]) / np.sqrt(g @ P @ g) - policy.factor[k]
                    best = z if best is None else min(best, z)
        g = _pair_vector(i, j, xc, n, d)
        assert np.isclose((policy.scores_d[i, c] - policy.scores_d[j, c]) / np.sqrt(g @ P @ g) - policy.factor[k], best)


def _eq9(battles, hi_wins, votes):
    """Chiang et al. (2024) eq. (9) with the study's Sigma (docstring of study.votes.rules), pair by pair."""
    out = []
    for c, w, m in zip(battles, hi_wins, votes):
        p = (w + 1.0) / (m + 2.0)
        sigma = p * (1.0 - p)
        out.append(np.sqrt(sigma / c) - np.sqrt(sigma / (c + 1.0)))
    out = np.array(out)
    return out / out.sum()


def test_arena_active_probabilities_are_equation_9():
    ep = build_episode("arena10", np.random.SeedSequence(2), 100)
    rule = ArenaActive(ep)
    E = len(ep.edges)
    assert np.allclose(rule.probabilities(), np.full(E, 1.0 / E))  # nothing played: uniform over the unplayed
    rng = np.random.default_rng(0)
    rule.battles = rng.integers(1, 50, size=E).astype(float)
    rule.votes = rule.battles * ep.M
    rule.hi_wins = np.floor(rng.random(E) * rule.votes * 2) / 2  # ties make halves
    assert np.allclose(rule.probabilities(), _eq9(rule.battles, rule.hi_wins, rule.votes), rtol=1e-12)
    rule.battles[3] = 0  # one unplayed pair: its weight is infinite, so it is chosen
    assert rule.probabilities()[3] == 1.0


def test_arena_active_draws_follow_its_probabilities():
    ep = build_episode("arena10", np.random.SeedSequence(2), 100)
    rule = ArenaActive(ep)
    rng = np.random.default_rng(1)
    E = len(ep.edges)
    rule.battles = rng.integers(1, 30, size=E).astype(float)
    rule.votes = rule.battles * ep.M
    rule.hi_wins = np.floor(rng.random(E) * rule.votes)
    p = rule.probabilities()

    class _Step:
        end = 0.3
    hits = np.zeros(E)
    index = {tuple(e): k for k, e in enumerate(ep.edges.tolist())}
    draws = 20_000
    for u in (np.arange(draws) + 0.5) / draws:  # a uniform grid: the inverse CDF gives each pair its share
        step = _Step()
        step.edge = u
        choice = rule.select(step)
        hits[index[(min(choice[0], choice[1]), max(choice[0], choice[1]))]] += 1
    assert np.allclose(hits / draws, p, atol=2.0 / draws)


def test_arena_active_counts_follow_the_votes():
    ep = build_episode("arena10", np.random.SeedSequence(2), 100)
    rule = ArenaActive(ep)
    a, b = (int(v) for v in ep.edges[4])

    class _Choice(tuple):
        major = property(lambda self: self[0])
        other = property(lambda self: self[1])
    rule.update(None, _Choice((b, a)), 3.5)  # the other item, a (the pair's lo end), won 3.5 of 10
    assert rule.battles[4] == 1 and rule.votes[4] == ep.M and rule.hi_wins[4] == ep.M - 3.5
