"""One replication: a policy (:class:`study.Policy`) run against an environment, with the shared
estimator (:class:`study.estimator.Estimate`) refitted every step.

Each step t the loop builds a :class:`study.Step` (t, X_t, the four shared uniforms, the graph,
theta(t-1), the debiased estimate on demand, the policy's private generator), asks the policy for a
:class:`study.Choice`, validates it (items in range, distinct, an edge), draws the M comparisons,
calls the policy's optional ``update(step, choice, wins)`` and refits the estimator.  The debiased
estimate at theta(t-1) is computed at most once per step, on first request (by the policy or by
the CI grid at the end of step t-1), and shared.  On a disconnected graph (``graph="raw"``)
cross-component contrasts are never identified, Psi_t is singular at every t, and the debiased
estimate is reported as unavailable without a factorisation.
"""
from __future__ import annotations

import operator
import time

import numpy as np
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from .environment import BTLEnvironment, seed_sequence
from .estimator import Estimate
from .graph import ComparisonGraph
from .inference import DebiasResult
from .policies import Choice, Step, make_policy, policy_generator
from .result import INTERVAL_COLUMNS, INTERVAL_DTYPES, ReplicationResult
from .settings import check_method, resolve_setting


def run_environment(env, method: str, setting, *, policy_seed=None, snapshot_times=(), seed: int = -1,
                    policy=None) -> ReplicationResult:
    """Run ``method`` on ``env`` (see :mod:`study.environment`); ``setting`` supplies T0, alpha,
    gamma, c_lambda, tie_break and the CI grid.  ``policy`` (a factory, i.e. a class or callable
    taking the setting) replaces the factory that ``method`` names; ``method`` is then the label
    (and keys the policy's private generator).

    BLAS is limited to one thread for the run: the matrices are small (<= a few hundred rows),
    where OpenBLAS's threading costs far more than it gains (measured 10-40x slower on 2 cores),
    and replications are parallelised across processes instead."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _run(env, method, setting, policy_seed=policy_seed, snapshot_times=snapshot_times, seed=seed,
                    factory=policy)


class _SharedDebias:
    """The debiased estimate at the estimator's current theta, computed on first request and kept
    until the estimator is refitted (:meth:`invalidate`)."""

    def __init__(self, estimate, graph):
        self.estimate = estimate
        self.result = None
        self.structurally_singular = not graph.connected
        self.shape = (graph.n_items, estimate.theta.shape[1])

    def __call__(self) -> DebiasResult:
        if self.result is None:
            if self.structurally_singular:
                self.result = DebiasResult(theta_d=np.full(self.shape, np.nan), available=False, condition=np.inf)
            else:
                self.result = self.estimate.debias()
        return self.result

    def invalidate(self) -> None:
        self.result = None


def _checked(choice, method: str, t: int, graph) -> tuple:
    """(major, other, explored) of a policy's choice, or ValueError naming the policy and the step."""
    try:
        major, other, explored = choice
        major, other = operator.index(major), operator.index(other)
    except (TypeError, ValueError):
        raise ValueError(f"policy {method!r} at step t={t} returned {choice!r}; expected a Choice(major, other, "
                         "explored) with integer items") from None
    n = graph.n_items
    if not (0 <= major < n and 0 <= other < n):
        raise ValueError(f"policy {method!r} at step t={t} returned items ({major}, {other}) outside [0, {n - 1}]")
    if major == other:
        raise ValueError(f"policy {method!r} at step t={t} compared item {major} with itself")
    if not graph.adjacency[major, other]:
        raise ValueError(f"policy {method!r} at step t={t} returned ({major}, {other}), which is not an edge of the "
                         "comparison graph")
    return major, other, bool(explored)


def _run(env, method, setting, *, policy_seed, snapshot_times, seed, factory=None) -> ReplicationResult:
    if factory is None:
        check_method(method)
    started = time.perf_counter()
    T, n = env.T, env.n_items
    policy = make_policy(method, setting, factory)
    update = getattr(policy, "update", None)
    graph = ComparisonGraph.from_edges(env.edges, n)
    policy_seed = policy_seed if policy_seed is not None else getattr(env, "policy_seed", None)
    uniforms = np.random.default_rng(policy_seed).random((T, 4))
    rng = policy_generator(policy_seed, method)
    estimate = Estimate(setting, env)
    debiased = _SharedDebias(estimate, graph)
    theta_star = env.theta_star
    star_scale = float(np.linalg.norm(theta_star, axis=1).max()) or 1.0
    contexts = env.contexts
    oracle = (contexts @ theta_star.T).max(axis=1)

    major_arr = np.zeros(T, dtype=np.int64)
    other_arr = np.zeros(T, dtype=np.int64)
    explored_arr = np.zeros(T, dtype=bool)
    regret = np.zeros(T)
    pair_regret = np.zeros(T)
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
        step = Step(t, x, uniforms[t - 1], graph, estimate.theta, debiased, rng=rng, setting=setting)
        choice = policy.select(step)
        major, other, explored = _checked(choice, method, t, graph)
        wins = env.compare(t, major, other)
        if update is not None:
            update(step, Choice(major, other, explored), wins)
        estimate.update(t, major, other, x, wins, env.M)
        debiased.invalidate()
        major_arr[t - 1], other_arr[t - 1], explored_arr[t - 1] = major, other, explored
        utility = x @ theta_star[major], x @ theta_star[other]
        regret[t - 1] = oracle[t - 1] - utility[0]
        pair_regret[t - 1] = oracle[t - 1] - 0.5 * (utility[0] + utility[1])
        rel_error[t - 1] = np.linalg.norm(estimate.theta - theta_star, axis=1).max() / star_scale
        on_grid = grid > 0 and t % grid == 0
        if on_grid or t in snapshot_set:
            db = debiased()  # at theta(t): step t+1's policy reuses it
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
                  "regret": regret, "avg_regret": np.cumsum(regret) / steps, "rel_error": rel_error,
                  "pair_regret": pair_regret, "avg_pair_regret": np.cumsum(pair_regret) / steps}
    result = ReplicationResult(setting=setting, method=method, seed=seed, trajectory=trajectory,
                               intervals=intervals, edges=np.asarray(env.edges), graph_draws=int(getattr(env, "graph_draws", 0)),
                               seconds=time.perf_counter() - started, theta_final=estimate.theta.copy(),
                               ci_available_from=ci_from)
    result.snapshots = snapshots
    result.newton_steps = estimate.newton_steps
    return result


def run_replication(setting, method, seed, **overrides) -> ReplicationResult:
    """Run one replication of ``method`` in ``setting`` (a name in :data:`study.SETTINGS` or a
    :class:`study.Setting`; keyword overrides replace its fields) with environment seed ``seed``
    (int or SeedSequence).  ``method`` is a name of :data:`study.settings.ALL_METHODS` ("RB", "ERA",
    "ETA", "BT-UCB1", "BT-UCB2", "TS", "MaxInP", "CoLSTIM", "RB-UA"), a name registered with
    :func:`study.register_policy`, or an import path ``"package.module:Name"``.  Two
    override-like keywords: ``snapshot_times`` stores (theta(t), debias result) at those t in
    ``result.snapshots``; ``policy`` (a factory) replaces the one ``method`` names (the engine
    ships registered factories to its workers this way)."""
    snapshot_times = overrides.pop("snapshot_times", ())
    factory = overrides.pop("policy", None)
    if factory is None:
        check_method(method)
    setting = resolve_setting(setting, **overrides)
    ss = seed_sequence(seed)
    env = BTLEnvironment(setting, ss)
    return run_environment(env, method, setting, snapshot_times=snapshot_times, policy=factory,
                           seed=int(seed) if not isinstance(seed, np.random.SeedSequence) else -1)
