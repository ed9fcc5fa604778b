"""One replication: a policy run against an environment, with the shared estimator
(:class:`study.estimator.Estimate`) refitted every step."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from .environment import BTLEnvironment, seed_sequence
from .estimator import Estimate
from .graph import neighbours
from .policies import make_policy
from .result import INTERVAL_COLUMNS, INTERVAL_DTYPES, ReplicationResult
from .settings import check_method, resolve_setting


@dataclass
class Graph:
    edges: np.ndarray
    neighbours: list


def run_environment(env, method: str, setting, *, policy_seed=None, snapshot_times=(), seed: int = -1) -> ReplicationResult:
    """Run ``method`` on ``env`` (see :mod:`study.environment`); ``setting`` supplies T0, alpha,
    gamma, c_lambda, tie_break and the CI grid.

    BLAS is limited to one thread for the run: the matrices are small (<= a few hundred rows),
    where OpenBLAS's threading costs far more than it gains (measured 10-40x slower on 2 cores),
    and replications are parallelised across processes instead."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _run(env, method, setting, policy_seed=policy_seed, snapshot_times=snapshot_times, seed=seed)


def _run(env, method, setting, *, policy_seed, snapshot_times, seed) -> ReplicationResult:
    check_method(method)
    started = time.perf_counter()
    T, n = env.T, env.n_items
    policy = make_policy(method, setting)
    graph = Graph(env.edges, neighbours(env.edges, n))
    policy_seed = policy_seed if policy_seed is not None else getattr(env, "policy_seed", None)
    uniforms = np.random.default_rng(policy_seed).random((T, 4))
    estimate = Estimate(setting, env)
    theta_star = env.theta_star
    star_scale = float(np.linalg.norm(theta_star, axis=1).max()) or 1.0
    contexts = env.contexts
    oracle = (contexts @ theta_star.T).max(axis=1)

    major_arr = np.zeros(T, dtype=np.int64)
    other_arr = np.zeros(T, dtype=np.int64)
    explored_arr = np.zeros(T, dtype=bool)
    regret = np.zeros(T)
    rel_error = np.zeros(T)
    ci_rows = {name: [] for name in INTERVAL_COLUMNS}
    items, dims = np.meshgrid(np.arange(n), np.arange(env.dim), indexing="ij")
    ci_from = None
    z = norm.ppf(0.5 + setting.ci_level / 2.0)
    grid = setting.ci_every
    snapshots = {}
    snapshot_set = set(int(s) for s in snapshot_times)

    for t in range(1, T + 1):
        x = contexts[t - 1]
        major, other, explored = policy.select(t, x, estimate, graph, uniforms[t - 1])
        wins = env.compare(t, major, other)
        estimate.update(t, major, other, x, wins, env.M)
        major_arr[t - 1], other_arr[t - 1], explored_arr[t - 1] = major, other, explored
        regret[t - 1] = oracle[t - 1] - x @ theta_star[major]
        rel_error[t - 1] = np.linalg.norm(estimate.theta - theta_star, axis=1).max() / star_scale
        on_grid = grid > 0 and t % grid == 0
        if policy.ucb or on_grid or t in snapshot_set:
            db = estimate.debias()
            if on_grid and db.available:
                ci_from = t if ci_from is None else ci_from
                se = db.se
                truth = theta_star
                lower, upper = db.theta_d - z * se, db.theta_d + z * se
                for name, values in (("t", np.full(n * env.dim, t)), ("item", items.ravel()), ("dim", dims.ravel()),
                                     ("estimate", db.theta_d.ravel()), ("se", se.ravel()),
                                     ("lower", lower.ravel()), ("upper", upper.ravel()), ("truth", truth.ravel()),
                                     ("covered", ((lower <= truth) & (truth <= upper)).ravel())):
                    ci_rows[name].append(values)
            if t in snapshot_set:
                snapshots[t] = (estimate.theta.copy(), db)

    intervals = {}
    for name, dtype in INTERVAL_DTYPES.items():
        intervals[name] = np.concatenate(ci_rows[name]).astype(dtype) if ci_rows[name] else np.zeros(0, dtype=dtype)
    steps = np.arange(1, T + 1)
    trajectory = {"t": steps, "major": major_arr, "other": other_arr, "explored": explored_arr,
                  "regret": regret, "avg_regret": np.cumsum(regret) / steps, "rel_error": rel_error}
    result = ReplicationResult(setting=setting, method=method, seed=seed, trajectory=trajectory,
                               intervals=intervals, edges=np.asarray(env.edges), graph_draws=int(getattr(env, "graph_draws", 0)),
                               seconds=time.perf_counter() - started, theta_final=estimate.theta.copy(),
                               ci_available_from=ci_from)
    result.snapshots = snapshots
    result.newton_steps = estimate.newton_steps
    return result


def run_replication(setting, method, seed, **overrides) -> ReplicationResult:
    """Run one replication of ``method`` ("RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2") in ``setting``
    (a name in :data:`study.SETTINGS` or a :class:`study.Setting`; keyword overrides replace its
    fields) with environment seed ``seed`` (int or SeedSequence).  ``snapshot_times`` (an
    override-like keyword) stores (theta(t), debias result) at those t in ``result.snapshots``."""
    snapshot_times = overrides.pop("snapshot_times", ())
    check_method(method)
    setting = resolve_setting(setting, **overrides)
    ss = seed_sequence(seed)
    env = BTLEnvironment(setting, ss)
    return run_environment(env, method, setting, snapshot_times=snapshot_times,
                           seed=int(seed) if not isinstance(seed, np.random.SeedSequence) else -1)
