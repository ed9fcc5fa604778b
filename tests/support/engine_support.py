"""Stand-in replication functions for the engine tests (importable on Ray workers: the session
fixture in conftest.py puts tests/ on the workers' PYTHONPATH).  No tests here."""
from __future__ import annotations

import time

import numpy as np

from study.simulation.seeds import stable_int
from study.simulation.result import INTERVAL_COLUMNS, ReplicationResult


def fake_replicate(setting, method, seed, sleep=0.0):
    """A deterministic, cheap ReplicationResult shaped like the core's (depends on seed, method, M)."""
    if sleep:
        time.sleep(sleep)
    T, n, d = setting.T, setting.n_items, setting.dim
    rng = np.random.default_rng([int(seed), stable_int(method), int(setting.M)])
    t = np.arange(1, T + 1)
    regret = rng.exponential(1.0 / np.sqrt(t))
    pair = regret + rng.exponential(1.0 / np.sqrt(t))
    traj = {"t": t, "major": rng.integers(0, n, T), "other": rng.integers(0, n, T),
            "explored": rng.random(T) < 0.2, "regret": regret, "avg_regret": np.cumsum(regret) / t,
            "rel_error": 2.0 / np.sqrt(t) * rng.uniform(0.5, 1.5, T),
            "pair_regret": pair, "avg_pair_regret": np.cumsum(pair) / t}
    grid = [s for s in range(1, T + 1) if setting.ci_every and s % setting.ci_every == 0][1:]
    rows = {name: [] for name in INTERVAL_COLUMNS}
    truth = setting.theta_star
    for s in grid:
        est = truth + rng.normal(0, 1 / np.sqrt(s), truth.shape)
        se = np.full(truth.shape, 1 / np.sqrt(s))
        items, dims = np.meshgrid(np.arange(n), np.arange(d), indexing="ij")
        lower, upper = est - 1.96 * se, est + 1.96 * se
        for name, v in (("t", np.full(n * d, s)), ("item", items.ravel()), ("dim", dims.ravel()),
                        ("estimate", est.ravel()), ("se", se.ravel()), ("lower", lower.ravel()),
                        ("upper", upper.ravel()), ("truth", truth.ravel()),
                        ("covered", ((lower <= truth) & (truth <= upper)).ravel())):
            rows[name].append(v)
    intervals = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in rows.items()}
    return ReplicationResult(setting=setting, method=method, seed=int(seed), trajectory=traj,
                             intervals=intervals, edges=np.zeros((0, 2), int), graph_draws=1,
                             seconds=0.0)


class FailingReplicate:
    """fake_replicate, except that the listed seeds raise."""

    def __init__(self, fail_seeds, sleep=0.0):
        self.fail_seeds = set(int(s) for s in fail_seeds)
        self.sleep = sleep

    def __call__(self, setting, method, seed):
        if int(seed) in self.fail_seeds:
            raise RuntimeError(f"injected failure for seed {seed}")
        return fake_replicate(setting, method, seed, self.sleep)


class FailingPolicy:
    """A user policy that raises at step 3 (the failure-report tests)."""

    def __init__(self, setting):
        pass

    def select(self, step):
        if step.t >= 3:
            raise RuntimeError(f"deliberate failure at step {step.t}")
        from study.policies import random_edge
        return random_edge(step)


def _named_setting():
    from study.simulation.settings import SETTINGS
    return SETTINGS["A"].replace(name="A-small", T=30, T0=12)


NAMED_SETTING = _named_setting()  # a Setting given by import path (--settings engine_support:NAMED_SETTING)
