"""The online ranker runs the simulations' loop: asked and told in turn by a simulated judge, with
the seed and theta(0) of a simulated replication, its choices and estimates equal
study.run_replication's (and the replays') value for value, for every built-in method, also when
the ranker is closed and reopened half way."""
import numpy as np
import pytest

import study
from study.llm import ArenaReplay, LLMReplay
from study.llm.runs import Replay, arena_setting, llm_setting
from study.online import Ranker
from study.simulation.environment import BTLEnvironment
from study.simulation.seeds import seed_sequence
from study.simulation.settings import resolve_setting


def open_like(path, setting, env, method, **extra):
    return Ranker(path, n_items=setting.n_items, dim=setting.dim, policy=method, T=setting.T, T0=setting.T0,
                  M=setting.M, alpha=setting.alpha, gamma=setting.gamma, c_lambda=setting.c_lambda,
                  tie_break=setting.tie_break, edges=env.edges, theta0=env.theta0, seed=env.policy_seed, **extra)


def drive(path, setting, env, method, outcome, reopen_at=None):
    """Ask and tell every step; returns the tickets and the ranker (reopened at ``reopen_at``)."""
    ranker, tickets = open_like(path, setting, env, method), []
    for t in range(1, setting.T + 1):
        ticket = ranker.ask(env.contexts[t - 1])
        wins, ties = outcome(env, ticket)
        ranker.tell(ticket, wins, setting.M, ties=ties)
        tickets.append(ticket)
        if t == reopen_at:
            ranker.close()
            ranker = Ranker(path)
    return tickets, ranker


def simulated(env, ticket):
    return env.compare(ticket.id, ticket.major, ticket.other), 0


def replayed(env, ticket):
    codes = env.draw(ticket.id, ticket.major, ticket.other)  # 0: major won, 1: other won, 2: tie
    return int(np.sum(codes == 1)), int(np.sum(codes == 2))


def assert_same_run(tickets, ranker, result, T):
    assert [tk.id for tk in tickets] == list(range(1, T + 1))
    np.testing.assert_array_equal([tk.major for tk in tickets], result.trajectory["major"])
    np.testing.assert_array_equal([tk.other for tk in tickets], result.trajectory["other"])
    np.testing.assert_array_equal([tk.explored for tk in tickets], result.trajectory["explored"])
    np.testing.assert_array_equal(ranker.theta, result.theta_final)
    assert ranker.n_told == T


@pytest.mark.parametrize("method", study.ALL_METHODS)
def test_online_ranker_equals_run_replication(tmp_path, method):
    setting = resolve_setting("A", T=60, T0=24)
    result = study.run_replication(setting, method, seed=7, snapshot_times=(60,))
    env = BTLEnvironment(setting, seed_sequence(7))
    tickets, ranker = drive(tmp_path / "r.sqlite", setting, env, method, simulated, reopen_at=31)
    assert_same_run(tickets, ranker, result, setting.T)
    theta, db = result.snapshots[60]
    online = ranker.debiased()
    assert online.available == db.available  # (not yet at T = 60 for the greedy ETA, BT-UCB1, TS)
    np.testing.assert_array_equal(online.theta_d, db.theta_d)
    np.testing.assert_allclose(online.se, db.se, rtol=1e-13)  # the same factor; se is computed later, BLAS may round


@pytest.mark.parametrize("method", ["RB", "TS"])
def test_online_ranker_equals_the_llm_replay(tmp_path, method):
    setting = llm_setting(T=300, T0=120)
    result = Replay("llm")(setting, method, 3)
    env = LLMReplay(3, T=setting.T)
    tickets, ranker = drive(tmp_path / "r.sqlite", setting, env, method, replayed, reopen_at=150)
    assert_same_run(tickets, ranker, result, setting.T)


def test_online_ranker_equals_the_arena_replay_with_ties(tmp_path):
    """129 models, M = 10 votes per ask, ties told apart (the replay counts them as half wins)."""
    setting = arena_setting(T=120, T0=50)
    result = Replay("arena")(setting, "RB", 5)
    env = ArenaReplay(5, T=setting.T)
    tickets, ranker = drive(tmp_path / "r.sqlite", setting, env, "RB", replayed, reopen_at=70)
    assert_same_run(tickets, ranker, result, setting.T)
    assert ranker.counts()["ties"] > 100
