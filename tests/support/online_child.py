"""A process that annotates with an online ranker, for tests/online/test_online_store.py (kill -9, two writers).

    python online_child.py loop PATH                 ask/tell until the horizon, "told k" after each tell
    python online_child.py hang-tell PATH K          ... but hang inside the transaction of tell K
    python online_child.py hang-ask PATH K           ... but hang inside the transaction of ask K
    python online_child.py writer PATH NAME N START  N ask/tell rounds (asks two, tells both) after START exists;
                                                     "ready" first, once the file is open

The judge is a simulated one (Setting A, short): the outcome of ticket t is
``env.compare(t, major, other)`` of a BTLEnvironment with seed SEED, so any process, and a resumed
run, tells the same outcome for the same ticket.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from study.online import Ranker
from study.simulation.environment import BTLEnvironment
from study.simulation.seeds import seed_sequence
from study.simulation.settings import resolve_setting

SEED = 11
SETTING = resolve_setting("A", T=60, T0=24)


def environment(T=SETTING.T):
    return BTLEnvironment(SETTING.replace(T=T), seed_sequence(SEED))


def create(path, method="RB", T=SETTING.T):
    """The ranker a simulated replication of SETTING (horizon T) with seed SEED runs."""
    env = environment()
    s = SETTING
    return Ranker(path, n_items=s.n_items, dim=s.dim, policy=method, T=T, T0=s.T0, M=s.M, alpha=s.alpha,
                  gamma=s.gamma, c_lambda=s.c_lambda, tie_break=s.tie_break, edges=env.edges, theta0=env.theta0,
                  seed=env.policy_seed)


def dump(path) -> list:
    """Every row of every table of a store (its content, independent of its pages), read-only."""
    import sqlite3

    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def sha256(path) -> str:
    """The SHA-256 of a file's bytes (a store left as it was has the same)."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def judge(env, ticket) -> int:
    return env.compare(ticket.id, ticket.major, ticket.other)


def annotate(ranker, env, say=None):
    """Tell the open tickets, then ask and tell until the horizon (what a restarted annotation loop does)."""
    for ticket in ranker.pending():
        ranker.tell(ticket, judge(env, ticket), SETTING.M)
    while ranker.n_asked < ranker.config.T:
        ticket = ranker.ask(env.contexts[ranker.n_asked])
        ranker.tell(ticket, judge(env, ticket), SETTING.M)
        if say:
            say(f"told {ticket.id}")


def say(text):
    print(text, flush=True)


def hang_when(obj, name, index_of, k):
    """Wrap obj.name so that the call whose index is k hangs (after saying so)."""
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if index_of(args) == k:
            say(f"hanging {k}")
            time.sleep(600)
        return result

    setattr(obj, name, wrapper)


def main(argv):
    mode, path = argv[0], Path(argv[1])
    env = environment()
    if mode == "hang-tell":  # inside tell k's transaction, after its rows are inserted
        from study.online import state as module
        hang_when(module.LoopState, "apply", lambda args: args[1], int(argv[2]))
    elif mode == "hang-ask":  # inside ask k's transaction, after the policy chose
        from study.online import ranker as module
        hang_when(module, "_checked", lambda args: args[2], int(argv[2]))
    if mode in ("loop", "hang-tell", "hang-ask"):
        with create(path) as ranker:
            annotate(ranker, env, say)
        return 0
    if mode == "writer":
        name, rounds, start = argv[2], int(argv[3]), Path(argv[4])
        with Ranker(path) as ranker:
            env = environment(ranker.config.T)
            say("ready")  # opened and replayed: the test starts both writers only when both are here
            while not start.exists():
                time.sleep(0.01)
            for _ in range(rounds):
                first = ranker.ask(env.contexts[0])
                second = ranker.ask(env.contexts[1])
                time.sleep(0.01)  # the judges at work (SQLite's lock is not fair: without pauses one writer
                # could take every turn, and the test would see no concurrency)
                ranker.tell(second, judge(env, second), SETTING.M)  # out of order
                ranker.tell(first, judge(env, first), SETTING.M, ties=0)
                say(f"{name} {first.id} {second.id}")
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
