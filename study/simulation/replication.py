"""One replication: a policy (:class:`study.Policy`) run against an environment, with the shared
estimator (:class:`study.simulation.estimator.Estimate`) refitted every step.

Each step t the loop builds a :class:`study.Step` (t, X_t, the four shared uniforms, the graph,
theta(t-1), the debiased estimate on demand, the policy's private generator), asks the policy for a
:class:`study.Choice`, validates it (items in range, distinct, an edge), draws the M comparisons,
calls the policy's optional ``update(step, choice, wins)`` and refits the estimator.  The debiased
estimate at theta(t-1) is computed at most once per step, on first request (by the policy or by
the CI grid at the end of step t-1), and shared.  The trajectory's ``before_phi`` marks the steps
at which the policy asked for the debiased estimate and Psi_t was singular (its warm-up rule chose
the pair: :mod:`study.policies.warmup`), read from the loop's own state, never from the copies the
policy was handed.  What is recorded is owned by the loop: the policy gets the setting without its
truth (:class:`study.simulation.settings.PublicSetting`), a graph of its own (the loop checks each
choice against its private one) and read-only copies of x, theta and the debiased estimate.  On a
disconnected graph (``graph="raw"`` or ``"no_isolated"``) cross-component contrasts are never
identified, Psi_t is singular at every t, and the debiased estimate is reported as unavailable
without a factorisation.
"""
from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np
from scipy.stats import norm

from ..core.confseq import cs_factor
from ..core.decisions import at_step
from ..core.inference import DebiasResult
from ..core.threads import one_blas_thread
from ..policies import Choice, Step, check_method, make_policy
from ..policies.base import is_flag, read_only, unpack_choice
from .environment import BTLEnvironment
from .estimator import Estimate
from .graph import ComparisonGraph
from .result import INTERVAL_COLUMNS, INTERVAL_DTYPES, ReplicationResult
from .seeds import policy_generator, seed_sequence
from .settings import resolve_setting


def run_environment(env, method: str, setting, *, policy_seed=None, snapshot_times=(), seed: int = -1,
                    policy=None, estimator=None) -> ReplicationResult:
    """Run ``method`` on an environment.

    Parameters
    ----------
    env : environment
        Any object with the attributes of :mod:`study.simulation.environment` (``n_items, dim, T,
        M, edges, theta_star, theta0, contexts, compare``), e.g. a
        :class:`study.simulation.environment.BTLEnvironment` or an LLM replay.
    method : str
        A method name (built-in, registered or an import path); with ``policy`` only a label (it
        also keys the policy's private generator).
    setting : study.Setting
        Supplies T0, alpha, gamma, c_lambda, tie_break and the CI grid.
    policy_seed : SeedSequence or int, optional
        Seed of the shared uniforms and the policy's generator; default ``env.policy_seed``.
    snapshot_times : iterable of int
        Steps t at which (theta(t), debiased result) are kept in ``result.snapshots``.
    seed : int
        Recorded in the result.
    policy : callable, optional
        A factory (class or callable taking the setting) replacing the one ``method`` names.
    estimator : callable, optional
        ``estimator(setting, env)`` returning the shared estimator (default
        :class:`study.simulation.estimator.Estimate`); the benchmarks pass other ones.

    Returns
    -------
    ReplicationResult

    Notes
    -----
    BLAS is limited to one thread for the run: the matrices are small (<= a few hundred rows),
    where OpenBLAS's threading costs far more than it gains (measured 10-40x slower on 2 cores),
    and replications are parallelised across processes instead.
    """
    with one_blas_thread():
        loop = _Loop(env, method, setting, policy_seed=policy_seed, snapshot_times=snapshot_times, seed=seed,
                     factory=policy, estimator=estimator)
        loop.advance(env.T)
        return loop.result()


class _ReadOnlyCache(dict):
    """A DebiasResult's cache whose arrays, computed on demand, are stored read-only."""

    def __setitem__(self, key, value):
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
            value = value.view()
        super().__setitem__(key, value)


def read_only_result(result: DebiasResult) -> DebiasResult:
    """A copy of ``result`` for a policy: every array (``theta_d``, the factor, and the pieces of
    Phi_11 computed so far or later) read-only, so that a write raises ``ValueError`` and nothing
    the policy does reaches the shared result behind the recorded intervals and snapshots."""
    changes = {f.name: read_only(getattr(result, f.name)) for f in dataclasses.fields(result)
               if isinstance(getattr(result, f.name), np.ndarray)}
    copy = dataclasses.replace(result, **{k: v for k, v in changes.items() if not k.startswith("_")})
    if isinstance(getattr(result, "_cache", None), dict):  # never shared with the original
        cache = _ReadOnlyCache()
        for key, value in result._cache.items():
            cache[key] = np.array(value, copy=True) if isinstance(value, np.ndarray) else value
        object.__setattr__(copy, "_cache", cache)
    return copy


class _SharedDebias:
    """The debiased estimate at the estimator's current theta, computed on first request and kept
    until the estimator is refitted (:meth:`invalidate`).  The policy gets a read-only copy of it
    (:meth:`for_policy`); the CI grid and the snapshots use the original."""

    def __init__(self, estimate, graph):
        self.estimate = estimate
        self.result = None
        self.policy_copy = None
        self.asked = False  # whether the policy asked for it since the last refit (the loop's own record)
        self.structurally_singular = not graph.connected
        self.shape = (graph.n_items, estimate.theta.shape[1])

    def for_policy(self) -> DebiasResult:
        self.asked = True
        if self.policy_copy is None:
            self.policy_copy = read_only_result(self())
        return self.policy_copy

    def __call__(self) -> DebiasResult:
        if self.result is None:
            if self.structurally_singular:
                self.result = DebiasResult(theta_d=np.full(self.shape, np.nan), available=False, condition=np.inf)
            else:
                self.result = self.estimate.debias()
        return self.result

    def invalidate(self) -> None:
        self.result = self.policy_copy = None
        self.asked = False

    def asked_without_phi(self) -> bool:
        """Did the policy ask for the debiased estimate and find Psi_t singular?  From the loop's own
        result, so that nothing the policy does to its copy changes the record."""
        return self.asked and not self.result.available


def _checked(choice, method: str, t: int, graph) -> tuple:
    """(major, other, explored) of a policy's choice, or ValueError naming the policy and the step."""
    try:
        major, other, explored = unpack_choice(choice)
    except TypeError:
        raise ValueError(f"policy {method!r} at step t={t} returned {choice!r}; expected a Choice(major, other, "
                         "explored) with integer items") from None
    if not is_flag(explored):
        raise ValueError(f"policy {method!r} at step t={t} returned explored={explored!r}; it must be a bool")
    n = graph.n_items
    if not (0 <= major < n and 0 <= other < n):
        raise ValueError(f"policy {method!r} at step t={t} returned items ({major}, {other}) outside [0, {n - 1}]")
    if major == other:
        raise ValueError(f"policy {method!r} at step t={t} compared item {major} with itself")
    if not graph.adjacency[major, other]:
        raise ValueError(f"policy {method!r} at step t={t} returned ({major}, {other}), which is not an edge of the "
                         "comparison graph")
    return major, other, bool(explored)


class _Loop:
    """The state of one replication between steps, so that a run can be advanced in stages and
    forked (see :func:`run_environment_methods`)."""

    def __init__(self, env, method, setting, *, policy_seed, snapshot_times, seed, factory=None, estimator=None):
        if factory is None:
            check_method(method)
        self.started = time.perf_counter()
        self.env, self.method, self.setting, self.seed = env, method, setting, seed
        self.public = setting.public()  # what the policy and the estimator see: no truth
        T, n = env.T, env.n_items
        self.policy = make_policy(method, self.public, factory)
        self.graph = ComparisonGraph.from_edges(env.edges, n)  # the loop's own: choices are checked against it
        self.policy_graph = ComparisonGraph.from_edges(env.edges, n)  # the policy's copy
        self.policy_seed = policy_seed if policy_seed is not None else getattr(env, "policy_seed", None)
        self.uniforms = np.random.default_rng(self.policy_seed).random((T, 4))
        self.rng = policy_generator(self.policy_seed, method)
        self.estimate = (estimator or Estimate)(self.public, env)
        self.debiased = _SharedDebias(self.estimate, self.graph)
        self.theta_star = env.theta_star
        self.star_scale = float(np.linalg.norm(self.theta_star, axis=1).max()) or 1.0
        self.oracle = (env.contexts @ self.theta_star.T).max(axis=1)
        self.major = np.zeros(T, dtype=np.int64)
        self.other = np.zeros(T, dtype=np.int64)
        self.explored = np.zeros(T, dtype=bool)
        self.before_phi = np.zeros(T, dtype=bool)
        self.regret = np.zeros(T)
        self.pair_regret = np.zeros(T)
        self.rel_error = np.zeros(T)
        self.ci_rows = {name: [] for name in INTERVAL_COLUMNS}
        self.ci_from = None
        self.snapshots = {}
        self.snapshot_set = set(int(s) for s in snapshot_times)
        self.z = norm.ppf(0.5 + setting.ci_level / 2.0)  # once, not per advance (a fork steps one at a time)
        self.t = 0  # steps done
        self.cpu = 0.0  # CPU seconds spent in advance() (a fork inherits its prefix's)
        self.shared_steps = 0  # first steps computed once for this and another method (a fork's prefix)

    def fork(self, method, factory=None, before_phi: bool = False) -> _Loop:
        """A copy of this loop whose remaining steps are taken by ``method``'s policy; ``before_phi``:
        forked where Phi first decides a step (:func:`shares_until_phi`), no step before having had Phi."""
        twin = copy.deepcopy(self)
        twin.shared_steps = self.t
        twin.method = method
        twin.policy = make_policy(method, self.public, factory)
        twin.rng = policy_generator(self.policy_seed, method)
        if before_phi:  # a policy that asks for Phi asked, and found none, at each step it did not explore
            twin.before_phi[: self.t] = ~self.explored[: self.t] if twin.policy.asks_phi else False
        return twin

    def phi_decides(self, t: int) -> bool:
        """Would a policy of the family of :func:`shares_until_phi` use Phi at step t (the loop being
        at t - 1): the step does not explore and the debiased estimate at theta(t-1) is available?
        (Computed here once and shared with the step, as the policy's own request would be.)"""
        return not self.policy.explores(t, float(self.uniforms[t - 1][0])) and self.debiased().available

    def advance(self, until: int) -> None:
        started = time.process_time()
        try:
            self._advance(until)
        finally:
            self.cpu += time.process_time() - started

    def _advance(self, until: int) -> None:
        env, setting, graph, estimate, debiased = self.env, self.setting, self.graph, self.estimate, self.debiased
        public, policy_graph = self.public, self.policy_graph
        update = getattr(self.policy, "update", None)
        theta_star, contexts = self.theta_star, env.contexts
        n, d = env.n_items, env.dim
        z = self.z
        grid = setting.ci_every
        for t in range(self.t + 1, until + 1):
            at_step(t)  # decision margins noted from here on are step t's (study.core.decisions)
            x = contexts[t - 1]
            step = Step(t, x, self.uniforms[t - 1], policy_graph, estimate.theta, debiased.for_policy, rng=self.rng,
                        setting=public)  # x and theta handed over as read-only copies (Step)
            choice = self.policy.select(step)
            self.before_phi[t - 1] = debiased.asked_without_phi()  # reset by every refit
            major, other, explored = _checked(choice, self.method, t, graph)
            wins = env.compare(t, major, other)
            if update is not None:
                update(step, Choice(major, other, explored), wins)
            estimate.update(t, major, other, x, wins, env.M)
            debiased.invalidate()
            self.major[t - 1], self.other[t - 1], self.explored[t - 1] = major, other, explored
            utility = x @ theta_star[major], x @ theta_star[other]
            self.regret[t - 1] = self.oracle[t - 1] - utility[0]
            self.pair_regret[t - 1] = self.oracle[t - 1] - 0.5 * (utility[0] + utility[1])
            diff = estimate.theta - theta_star  # row norms as np.linalg.norm(diff, axis=1), without its overhead
            self.rel_error[t - 1] = np.sqrt((diff * diff).sum(axis=1)).max() / self.star_scale
            on_grid = grid > 0 and t % grid == 0
            if on_grid or t in self.snapshot_set:
                db = debiased()  # at theta(t): step t+1's policy reuses it
                if on_grid and db.available:
                    self.ci_from = t if self.ci_from is None else self.ci_from
                    self._record_intervals(t, db, z, n, d)
                if t in self.snapshot_set:
                    self.snapshots[t] = (estimate.theta.copy(), db)
            self.t = t

    def _record_intervals(self, t, db, z, n, d):
        se = db.se
        truth = self.theta_star
        lower, upper = db.theta_d - z * se, db.theta_d + z * se
        # the confidence sequence, tightest at the horizon (docs/core.md, "Confidence sequences")
        setting = self.setting
        comparisons = getattr(db, "comparisons", None) or t * setting.M  # (the frozen cores of benchmarks/ lack it)
        half = cs_factor(comparisons, setting.T * setting.M, setting.ci_level) * se
        cs_lower, cs_upper = db.theta_d - half, db.theta_d + half
        items, dims = np.meshgrid(np.arange(n), np.arange(d), indexing="ij")
        for name, values in (("t", np.full(n * d, t)), ("item", items.ravel()), ("dim", dims.ravel()),
                             ("estimate", db.theta_d.ravel().copy()), ("se", se.ravel()),
                             ("lower", lower.ravel()), ("upper", upper.ravel()), ("truth", truth.ravel()),
                             ("covered", ((lower <= truth) & (truth <= upper)).ravel()),
                             ("cs_lower", cs_lower.ravel()), ("cs_upper", cs_upper.ravel()),
                             ("cs_covered", ((cs_lower <= truth) & (truth <= cs_upper)).ravel())):
            self.ci_rows[name].append(values)

    def result(self) -> ReplicationResult:
        T = self.env.T
        intervals = {}
        for name, dtype in INTERVAL_DTYPES.items():
            rows = self.ci_rows[name]
            intervals[name] = np.concatenate(rows).astype(dtype) if rows else np.zeros(0, dtype=dtype)
        steps = np.arange(1, T + 1)
        trajectory = {"t": steps, "major": self.major, "other": self.other, "explored": self.explored,
                      "regret": self.regret, "avg_regret": np.cumsum(self.regret) / steps,
                      "rel_error": self.rel_error, "pair_regret": self.pair_regret,
                      "avg_pair_regret": np.cumsum(self.pair_regret) / steps, "before_phi": self.before_phi}
        return ReplicationResult(setting=self.setting, method=self.method, seed=self.seed, trajectory=trajectory,
                                 intervals=intervals, edges=np.asarray(self.env.edges),
                                 graph_draws=int(getattr(self.env, "graph_draws", 0)),
                                 seconds=time.perf_counter() - self.started,
                                 theta_final=self.estimate.theta.copy(), ci_available_from=self.ci_from,
                                 snapshots=self.snapshots, newton_steps=int(getattr(self.estimate, "newton_steps", 0)),
                                 cost=self._cost())

    def _cost(self) -> dict:
        """The replication's cost (:data:`study.simulation.result.COST_FIELDS`): CPU seconds, wall
        seconds and the estimator's breakdown (:meth:`study.simulation.estimator.Estimate.cost`;
        absent for an estimator without one)."""
        cost = {"cpu_seconds": self.cpu, "wall_seconds": time.perf_counter() - self.started,
                "shared_steps": self.shared_steps}
        breakdown = getattr(self.estimate, "cost", None)
        if callable(breakdown):
            cost.update(breakdown())
        return cost


def shared_prefix(policy_a, policy_b) -> int:
    """How many first steps two policies are known to choose identically (given the same state
    and uniforms): both declare ``prefix_key`` (equal) and ``prefix_until``; 0 otherwise."""
    key_a, key_b = getattr(policy_a, "prefix_key", None), getattr(policy_b, "prefix_key", None)
    if key_a is None or key_a != key_b:
        return 0
    return min(int(policy_a.prefix_until), int(policy_b.prefix_until))


def shares_until_phi(policy_a, policy_b) -> bool:
    """Are two policies known to choose identically until the first step at which one of them uses
    Phi (a non-exploring step with Phi available)?  Both declare ``until_phi_key`` (equal, not None)
    and ``asks_phi``, and at least one of them asks for Phi (e.g. BT-UCB2 and RB, BT-UCB1 and ETA,
    with the greedy warm-up)."""
    key_a, key_b = getattr(policy_a, "until_phi_key", None), getattr(policy_b, "until_phi_key", None)
    return key_a is not None and key_a == key_b and bool(policy_a.asks_phi or policy_b.asks_phi)


def run_environment_methods(env, methods, setting, *, seed: int = -1) -> dict:
    """Run every method of ``methods`` on ``env`` (common random numbers), computing the steps
    that two methods are known to share once: RB and ERA choose identically up to T0 (the same
    exploration coins and greedy rule), so ERA continues from a copy of RB's run at T0 instead of
    recomputing it; BT-UCB2 (BT-UCB1) with the greedy warm-up chooses as RB (ETA) until the first
    step at which it does not explore and Phi is available, and continues from a copy of that run
    there (:func:`shares_until_phi`; its ``before_phi`` column set for the steps before).  The
    results equal separate :func:`run_environment` calls value for value (tested).  Returns
    {method: ReplicationResult}."""
    results = {}
    T = env.T
    with one_blas_thread():
        pending = list(dict.fromkeys(methods))
        while pending:
            leader = pending.pop(0)
            loop = _Loop(env, leader, setting, policy_seed=None, snapshot_times=(), seed=seed)
            followers = []  # (method, fixed prefix, or None: until Phi decides a step)
            for method in list(pending):
                other = make_policy(method, setting)
                prefix = shared_prefix(loop.policy, other)
                if prefix > 0 or shares_until_phi(loop.policy, other):
                    followers.append((method, min(prefix, T) if prefix > 0 else None))
                    pending.remove(method)
            while followers:
                for follower in list(followers):
                    method, prefix = follower
                    due = (loop.t >= prefix) if prefix is not None else (loop.t >= T or loop.phi_decides(loop.t + 1))
                    if due:
                        twin = loop.fork(method, before_phi=prefix is None)
                        twin.advance(T)
                        results[method] = twin.result()
                        followers.remove(follower)
                if followers:  # one step at a time while a follower waits for Phi, else to the next prefix
                    waiting = [p for _, p in followers]
                    loop.advance(loop.t + 1 if None in waiting else min(waiting))
            loop.advance(T)
            results[leader] = loop.result()
    return {method: results[method] for method in dict.fromkeys(methods)}


def run_replication(setting, method, seed, **overrides) -> ReplicationResult:
    """Run one replication of ``method`` in ``setting`` with environment seed ``seed``.

    Parameters
    ----------
    setting : str or study.Setting
        A name in :data:`study.SETTINGS` ("A", "B") or a :class:`study.Setting`.
    method : str
        A built-in method (:data:`study.ALL_METHODS`: "RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2",
        "TS", "MaxInP", "CoLSTIM", "RB-UA"), a name registered with :func:`study.register_policy`,
        or an import path ``"package.module:Name"``.
    seed : int or numpy.random.SeedSequence
        The environment's seed: the same seed gives every method the same graph, theta(0),
        contexts and uniforms (common random numbers).
    **overrides
        Setting fields to replace (e.g. ``M=80, T=1000``), and two more keywords:
        ``snapshot_times`` keeps (theta(t), debiased result) at those t in ``result.snapshots``;
        ``policy`` (a factory) replaces the one ``method`` names (the runner ships registered
        factories to its workers this way).

    Returns
    -------
    ReplicationResult
        ``result.to_frame()`` gives the trajectory and interval tables.

    Raises
    ------
    ValueError
        An unknown setting, method or field, or a value out of range, before any work starts.

    Examples
    --------
    >>> import study
    >>> r = study.run_replication("A", "RB", seed=7, T=40, T0=20)
    >>> r.to_frame()["trajectory"].shape
    (40, 10)
    """
    snapshot_times = overrides.pop("snapshot_times", ())
    factory = overrides.pop("policy", None)
    if factory is None:
        check_method(method)
    setting = resolve_setting(setting, **overrides)
    ss = seed_sequence(seed)
    env = BTLEnvironment(setting, ss)
    return run_environment(env, method, setting, snapshot_times=snapshot_times, policy=factory,
                           seed=int(seed) if not isinstance(seed, np.random.SeedSequence) else -1)
