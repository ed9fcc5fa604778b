"""The online ranker: ask which pair to compare for a context, tell the outcome, read the ranking
with confidence intervals at any moment, with every ask and tell in a SQLite file.

The loop is the simulations' (:mod:`study.simulation.replication`), step for step: the same
policy objects (:func:`study.policies.make_policy`), the same :class:`study.Step` with the same
shared uniforms (row t-1 of ``default_rng(seed).random((T, 4))``) and the policy's private
generator (:func:`study.simulation.seeds.policy_generator`), the same validation of the choice, the
same shared estimator (:class:`study.simulation.estimator.Estimate`, refitted after every told
outcome, with the debiased estimate computed at most once per estimate).  Asked and told in turn
with the seed and theta(0) of a simulated replication, the ranker makes its choices and reaches
its estimates value for value (tests/online/test_online_equality.py).

Ask t (1-based) is step t of the policy; told outcome k (in the order of the tells) is row k of the
estimator, refitted with the schedule of step k.  Judges who answer out of order simply shift
which estimate a later ask sees; the estimate itself depends only on the told rows and their order.

Resuming.  The estimator is rebuilt on opening by replaying the told rows in order (so a
reopened ranker has bit for bit the estimate of an uninterrupted one; the estimate stored with
the last tell is compared with it).  The shared uniforms are a function of (seed, ask index); the
policy's private generator is saved after every ask (its ``bit_generator.state``, in the ask's
row) and restored before the next one, whoever made it: a policy that draws a varying number of
variates (Thompson sampling) resumes exactly too.  A policy's optional ``update(step, choice,
wins)`` is called as each told row is applied (on every process that applies it, so each
rebuilds the same state), with a step that carries the ask's t, context and uniforms, the estimate
before the row, and no generator (``rng=None``: draws there could not be replayed).
"""
from __future__ import annotations

import dataclasses
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from threadpoolctl import ThreadpoolController

from .._version import __version__
from ..core import _validate as check
from ..core.sandwich import check_se, robust
from ..policies import Choice, Step, make_policy, policy_provenance, resolve_policy
from ..simulation.estimator import Estimate
from ..simulation.graph import ComparisonGraph
from ..simulation.replication import _checked, _SharedDebias
from ..simulation.seeds import policy_generator
from . import report, stopping
from .config import Config
from .store import TIMEOUT, Store, StoreError, pack, unpack


_THREADS: list = []


def _one_blas_thread():
    """BLAS limited to one thread for an operation, as in the simulations' loop: the matrices are small,
    threads cost more than they gain, and a different thread count may round differently."""
    if not _THREADS:
        _THREADS.append(ThreadpoolController())
    return _THREADS[0].limit(limits=1, user_api="blas")


@dataclass(frozen=True)
class Ticket:
    """One handed-out pair: compare ``major`` with ``other`` under context ``x``.

    Attributes
    ----------
    id : int
        The ask index t (1-based), the ticket's number in the store.
    major, other : int
        The items to compare (0-based); ``tell`` records how many comparisons ``other`` won.
    x : tuple of float
        The context the pair was chosen for.
    explored : bool
        Whether the policy explored (a random edge) at this ask.
    told_before : int
        How many told outcomes the estimate behind the choice had.
    asked_at : float
        When (Unix seconds).
    major_name, other_name : str
        The items' names.
    """

    id: int
    major: int
    other: int
    x: tuple
    explored: bool
    told_before: int
    asked_at: float
    major_name: str
    other_name: str

    @property
    def pair(self) -> tuple:
        return self.major, self.other


class _Rows:
    """The told rows as arrays (for the sandwich SEs and the mean context)."""

    def __init__(self, capacity: int, dim: int):
        self.n = 0
        self.i = np.zeros(capacity, dtype=np.intp)
        self.j = np.zeros(capacity, dtype=np.intp)
        self.X = np.zeros((capacity, dim))
        self.wins = np.zeros(capacity)
        self.ties = np.zeros(capacity)
        self.m = np.zeros(capacity)

    def append(self, major, other, x, wins, ties, m):
        k = self.n
        self.i[k], self.j[k], self.X[k], self.wins[k], self.ties[k], self.m[k] = major, other, x, wins, ties, m
        self.n = k + 1

    def arrays(self):
        k = self.n
        return self.i[:k], self.j[:k], self.X[:k], self.wins[:k], self.m[:k], self.ties[:k]


class _State:
    """The loop's state between operations: policy, generator, uniforms, estimator, told rows."""

    def __init__(self, config: Config, factory):
        n, d, T = config.n_items, config.dim, config.T
        self.config = config
        self.setting = config.setting()
        edges = config.edges_array()
        self.graph = ComparisonGraph.from_edges(edges, n)
        env = SimpleNamespace(n_items=n, dim=d, T=T, edges=edges, theta0=config.theta0_array())
        self.estimate = Estimate(self.setting, env)
        self.debiased = _SharedDebias(self.estimate, self.graph)
        self.seed = config.policy_seed()
        self.uniforms = np.random.default_rng(self.seed).random((T, 4))
        self.policy = None if factory is None else make_policy(config.policy, self.setting, factory)
        self.update = getattr(self.policy, "update", None)
        self.rng = policy_generator(self.seed, config.policy)
        self.rng_ask = 0  # the ask after which self.rng's state is (None: unknown, reload)
        self.rows = _Rows(T, d)
        self.applied = 0

    def sync(self, conn) -> None:
        """Apply the rows told (by any process) since the last sync, in order."""
        for seq, ask_id, wins, ties, m, x, major, other, explored in Store.tells_after(conn, self.applied):
            if seq != self.applied + 1:
                raise StoreError(f"told rows are not contiguous: row {seq} follows row {self.applied}")
            self.apply(seq, ask_id, unpack(x), int(major), int(other), bool(explored), int(wins), int(ties), int(m))

    def apply(self, seq, ask_id, x, major, other, explored, wins, ties, m) -> None:
        score = wins + 0.5 * ties  # a tie is half a win for each side, as in the replays
        if self.update is not None:
            step = Step(ask_id, x, self.uniforms[ask_id - 1], self.graph, self.estimate.theta, self.debiased.for_policy,
                        rng=None, setting=self.setting)
            self.update(step, Choice(major, other, explored), score)
        self.estimate.update(seq, major, other, x, score, m)
        self.debiased.invalidate()
        self.rows.append(major, other, x, score, ties, m)
        self.applied = seq

    def restore_rng(self, conn, ask_id: int) -> None:
        """Put the policy's generator in its state after ask ``ask_id`` (0: the initial state)."""
        if self.rng_ask == ask_id:
            return
        if ask_id == 0:
            self.rng = policy_generator(self.seed, self.config.policy)
        else:
            text = conn.execute("SELECT rng_state FROM asks WHERE id = ?", (ask_id,)).fetchone()[0]
            self.rng.bit_generator.state = json.loads(text)
        self.rng_ask = ask_id


class Ranker:
    """An online ranker with a crash-safe store (one SQLite file per ranker).

    Parameters
    ----------
    path : str or Path
        The store.  A new file is created with the arguments below; an existing one is reopened
        and continued.  Arguments given on reopening must equal the stored ones (else
        ``ValueError`` naming each difference); arguments not given are taken from the store.
    n_items : int
        n, the number of items (or give ``items``).
    dim : int
        d, the context dimension.
    policy : str
        A method: built-in (``"RB"``, the default, and the others of :data:`study.ALL_METHODS`),
        registered with :func:`study.register_policy`, or an import path ``"package.module:Name"``.
    T : int
        The horizon: how many pairs the ranker hands out at most (default 10,000).  The policy and
        the estimator use it as the simulations do (exploration, UCB width, lambda_t).
    T0 : int
        End of the first stage (constrained MLE, exploration for RB); default 0.4 T.
    M : int
        Comparisons per ask (default 1); a tell may report fewer.
    alpha, gamma, c_lambda, tie_break
        As in :class:`study.Setting` (defaults 0.25, 5, 0.1, ``"nearest"``).
    seed : int or numpy.random.SeedSequence
        Seed of the shared uniforms and of the policy's generator (default: fresh entropy, stored).
        The policy seed of a simulated replication (``env.policy_seed``) reproduces it.
    edges : array_like, shape (E, 2), optional
        The pairs that may be compared (a connected graph); default every pair.
    items : sequence of str, optional
        Item names (their order is the index order).
    theta0 : array_like, shape (n, d), optional
        The initial estimate theta(0) (default zeros).
    readonly : bool
        Open an existing store for reading only (no policy is resolved; ask, tell, expire refused).
    timeout : float
        Seconds to wait for another process's transaction.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from study.online import Ranker
    >>> path = os.path.join(tempfile.mkdtemp(), "ranker.sqlite")
    >>> ranker = Ranker(path, n_items=3, dim=2, T=50, seed=1)
    >>> ticket = ranker.ask([1.0, 0.2])
    >>> ranker.tell(ticket, wins=1, m=1)
    >>> ranker.n_told, ranker.theta.shape
    (1, (3, 2))
    """

    def __init__(self, path, *, n_items=None, dim=None, policy=None, T=None, T0=None, M=None, alpha=None,
                 gamma=None, c_lambda=None, tie_break=None, seed=None, edges=None, items=None, theta0=None,
                 readonly: bool = False, timeout: float = TIMEOUT):
        given = dict(n_items=n_items, dim=dim, policy=policy, T=T, T0=T0, M=M, alpha=alpha, gamma=gamma,
                     c_lambda=c_lambda, tie_break=tie_break, seed=seed, edges=edges, items=items, theta0=theta0)
        self.path = Path(path)
        self.readonly = bool(readonly)
        self._state = None
        if readonly:
            if any(v is not None for v in given.values()):
                raise ValueError("a read-only ranker takes no creation arguments")
            self._store = Store(self.path, create=False, readonly=True, timeout=timeout)
            with self._store.read() as conn:
                self.config = Config.from_json(self._store.meta(conn)["arguments"])
            self._factory = None
            return
        fresh = None
        if not self.path.exists() or (self.path.is_file() and self.path.stat().st_size == 0):
            fresh = Config.from_arguments(given)  # all checks before the file exists
            resolve_policy(fresh.policy)
        self._store = Store(self.path, create=True, timeout=timeout)
        try:
            self.config = self._open(given, fresh)
            self._factory = resolve_policy(self.config.policy)
        except BaseException:
            self._store.close()
            raise

    def _open(self, given, fresh) -> Config:
        store = self._store
        with store.write() as conn:
            if store.initialised(conn):  # an existing store (perhaps created just now by another process)
                meta = store.meta(conn)
                config = Config.from_json(meta["arguments"])
                differences = config.differences(given)
                if differences:
                    raise ValueError(f"{self.path} was created with other arguments: {'; '.join(differences)}. "
                                     "Open it without them (or with the stored values) to continue it, or use "
                                     "another file")
                sha = policy_provenance(config.policy)["source_sha256"]
                if meta.get("policy_sha256") not in (None, "None", str(sha)):
                    warnings.warn(f"{self.path}: the code of policy {config.policy!r} changed since the store was "
                                  "created; its next choices may differ from an uninterrupted run", RuntimeWarning,
                                  stacklevel=3)
                return config
            config = fresh if fresh is not None else Config.from_arguments(given)
            store.initialise(conn, {"arguments": config.to_json(), "study_version": __version__,
                                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "policy_sha256": str(policy_provenance(config.policy)["source_sha256"])})
            return config

    # --- the loop's state ----------------------------------------------------------------------
    def _synced(self, conn) -> _State:
        if self._state is None:
            state = _State(self.config, self._factory)
            state.sync(conn)
            seq, theta = Store.stored_estimate(conn)
            if seq == state.applied and theta is not None:
                stored = unpack(theta, state.estimate.theta.shape)
                if not np.array_equal(stored, state.estimate.theta):
                    warnings.warn(f"{self.path}: the replayed estimate differs from the stored one by "
                                  f"{np.abs(stored - state.estimate.theta).max():.3g} (the core changed since it was "
                                  "written); continuing with the replayed one", RuntimeWarning, stacklevel=4)
            self._state = state
        else:
            self._state.sync(conn)
        return self._state

    def _read(self) -> _State:
        with _one_blas_thread(), self._store.read() as conn:
            return self._synced(conn)

    def _writable(self):
        if self.readonly:
            raise ValueError(f"{self.path} is open read-only")

    def _guarded(self, operation):
        """Run ``operation(conn, state)`` in one write transaction; any failure forgets the in-memory
        state (it is rebuilt from the store next time), so that memory never runs ahead of the file."""
        self._writable()
        try:
            with _one_blas_thread(), self._store.write() as conn:
                return operation(conn, self._synced(conn))
        except BaseException:
            self._state = None
            raise

    # --- ask and tell --------------------------------------------------------------------------
    def ask(self, x) -> Ticket:
        """The pair to compare for context ``x`` (length d, finite): a :class:`Ticket`."""
        self._writable()
        x = check.finite_array("x", x, ndim=1, shape=(self.config.dim,))
        if np.abs(x).max(initial=0.0) > check.MAX_ABS_CONTEXT:
            raise ValueError(f"x has entries beyond {check.MAX_ABS_CONTEXT:g}; rescale the contexts")

        def operation(conn, state):
            t = Store.last_ask(conn) + 1
            if t > self.config.T:
                raise ValueError(f"{self.path}: all T = {self.config.T} asks of this ranker's horizon are used; "
                                 "create a new ranker with a larger T")
            state.restore_rng(conn, t - 1)
            state.rng_ask = None  # until the ask is stored
            step = Step(t, x, state.uniforms[t - 1], state.graph, state.estimate.theta, state.debiased.for_policy,
                        rng=state.rng, setting=state.setting)
            major, other, explored = _checked(state.policy.select(step), self.config.policy, t, state.graph)
            now = time.time()
            conn.execute("INSERT INTO asks (id, x, major, other, explored, told_before, rng_state, status, asked_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)",
                         (t, pack(x), major, other, int(explored), state.applied,
                          json.dumps(state.rng.bit_generator.state), now))
            state.rng_ask = t
            return self._ticket(t, x, major, other, explored, state.applied, now)

        return self._guarded(operation)

    def tell(self, ticket, wins, m=None, ties=0) -> None:
        """Record the outcome of ``ticket`` (a :class:`Ticket` or its id): ``wins`` of the ``m``
        comparisons (default M) won outright by ``ticket.other``, ``ties`` of them tied (a tie
        counts as half a win for each side).  One transaction: the outcome, the ticket closed and
        the refitted estimate are stored together, or nothing is."""
        self._writable()
        ask_id, pair = self._ticket_id(ticket)
        m = self.config.M if m is None else m
        m = _count("m", m, low=1)
        if m > self.config.M:
            raise ValueError(f"m = {m} exceeds M = {self.config.M}, the comparisons per ask this ranker was "
                             "created with")
        wins, ties = _count("wins", wins, low=0), _count("ties", ties, low=0)
        if wins + ties > m:
            raise ValueError(f"wins + ties = {wins} + {ties} exceeds m = {m}")

        def operation(conn, state):
            row = Store.ask(conn, ask_id)
            if row is None:
                raise ValueError(f"ticket {ask_id} was never asked (this ranker has handed out "
                                 f"{Store.last_ask(conn)} tickets)")
            _, x, major, other, explored, _, status, _, closed_at = row
            if pair is not None and pair != (major, other):
                raise ValueError(f"ticket {ask_id} is for the pair ({major}, {other}), not {pair}")
            if status != "open":
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(closed_at))
                raise ValueError(f"ticket {ask_id} was already {status} ({when}); it cannot be told again")
            seq = state.applied + 1
            now = time.time()
            conn.execute("INSERT INTO tells (seq, ask_id, wins, ties, m, told_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (seq, ask_id, wins, ties, m, now))
            conn.execute("UPDATE asks SET status = 'told', closed_at = ? WHERE id = ?", (now, ask_id))
            state.apply(seq, ask_id, unpack(x), int(major), int(other), bool(explored), wins, ties, m)
            conn.execute("INSERT OR REPLACE INTO estimate (id, seq, theta) VALUES (1, ?, ?)",
                         (seq, pack(state.estimate.theta)))

        self._guarded(operation)

    def expire(self, ticket=None, *, older_than: float | None = None) -> int:
        """Close open tickets without an outcome: ``ticket`` (a :class:`Ticket` or id), or every
        ticket asked more than ``older_than`` seconds ago.  Returns how many were expired."""
        self._writable()
        if (ticket is None) == (older_than is None):
            raise ValueError("give either a ticket or older_than (seconds)")
        if ticket is not None:
            ask_id, pair = self._ticket_id(ticket)
        else:
            older_than = check.real("older_than", older_than, low=0.0)

        def operation(conn, state):
            now = time.time()
            if ticket is None:
                return conn.execute("UPDATE asks SET status = 'expired', closed_at = ? WHERE status = 'open' AND "
                                    "asked_at < ?", (now, now - older_than)).rowcount
            row = Store.ask(conn, ask_id)
            if row is None:
                raise ValueError(f"ticket {ask_id} was never asked")
            if pair is not None and pair != (row[2], row[3]):
                raise ValueError(f"ticket {ask_id} is for the pair ({row[2]}, {row[3]}), not {pair}")
            if row[6] != "open":
                raise ValueError(f"ticket {ask_id} is already {row[6]}")
            return conn.execute("UPDATE asks SET status = 'expired', closed_at = ? WHERE id = ?",
                                (now, ask_id)).rowcount

        return self._guarded(operation)

    def pending(self) -> list:
        """The open tickets (asked, neither told nor expired), oldest first."""
        with self._store.read() as conn:
            rows = conn.execute("SELECT id, x, major, other, explored, told_before, asked_at FROM asks "
                                "WHERE status = 'open' ORDER BY id").fetchall()
        return [self._ticket(r[0], unpack(r[1]), r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows]

    def _ticket(self, t, x, major, other, explored, told_before, asked_at) -> Ticket:
        labels = self.config.labels
        return Ticket(id=int(t), major=int(major), other=int(other), x=tuple(float(v) for v in x),
                      explored=bool(explored), told_before=int(told_before), asked_at=float(asked_at),
                      major_name=labels[major], other_name=labels[other])

    def _ticket_id(self, ticket):
        """(ask id, (major, other) or None) of a Ticket or an id; 'unknown pair' for a ticket whose
        pair is not a pair of this ranker's graph."""
        if isinstance(ticket, Ticket):
            n = self.config.n_items
            major, other = ticket.major, ticket.other
            edges = self.config.edges
            if not (0 <= major < n and 0 <= other < n) or major == other or (
                    edges is not None and (min(major, other), max(major, other)) not in set(edges)):
                raise ValueError(f"unknown pair ({major}, {other}) on ticket {ticket.id}: not a pair of this "
                                 f"ranker's {n} items and their comparison graph")
            return _count("ticket id", ticket.id, low=1), (major, other)
        return _count("ticket", ticket, low=1), None

    # --- reading -------------------------------------------------------------------------------
    @property
    def n_told(self) -> int:
        """How many outcomes have been told (by any process)."""
        return self._read().applied

    @property
    def n_asked(self) -> int:
        """How many tickets have been handed out (told, open or expired)."""
        with self._store.read() as conn:
            return Store.last_ask(conn)

    @property
    def theta(self) -> np.ndarray:
        """The current estimate theta (n, d) (a copy): the estimator of the simulations' schedule."""
        return self._read().estimate.theta.copy()

    def counts(self) -> dict:
        """asked, open, told, expired tickets; comparisons and ties told."""
        with self._store.read() as conn:
            return Store.counts(conn)

    def _snapshot(self, se: str):
        """(theta, debiased result, told rows) of one consistent state; the result is the caller's own
        (a copy: writing into it cannot reach the estimate the policy sees)."""
        se = check_se(se)
        state = self._read()
        theta = state.estimate.theta.copy()
        with _one_blas_thread():
            shared = state.debiased()
            result = dataclasses.replace(shared, theta_d=shared.theta_d.copy(), _cache={},
                                         factor=None if shared.factor is None else shared.factor.copy())
            if se == "sandwich":
                result = robust(result, theta, *state.rows.arrays())
        return theta, result, state.rows

    def debiased(self, se: str = "model"):
        """The debiased estimate at the current theta (:class:`study.DebiasResult`) with the
        model-based (``se="model"``, the paper's Phi_11) or sandwich (``"sandwich"``, robust to
        ties) covariance; ``available`` is False while the told rows do not identify theta."""
        return self._snapshot(se)[1]

    def intervals(self, level: float = 0.95, se: str = "model", anytime: bool = False, tightest_at=None):
        """CIs of every theta_ik (a DataFrame: item, name, dim, estimate, se, lower, upper, level,
        anytime, se_method); ValueError while they are not available.  ``anytime=True``: the
        confidence sequences instead, valid at every look at once (tightest after ``tightest_at``
        comparisons, default T x M: :mod:`study.online.stopping`)."""
        result = self.debiased(se)
        factor = stopping.factor(result, level, True, stopping.tightest(self.config, tightest_at)) if anytime else None
        return report.intervals(result, self.config.labels, level, factor)

    def mean_context(self) -> np.ndarray:
        """The mean context of the told rows (the first context asked if none is told yet)."""
        return self._mean_context(self._read().rows)

    def _mean_context(self, rows) -> np.ndarray:
        X = rows.arrays()[2]
        if len(X):
            return X.mean(axis=0)
        with self._store.read() as conn:
            row = Store.ask(conn, 1)
        if row is None:
            raise ValueError("nothing asked yet: no context to rank at")
        return unpack(row[1])

    def ranking(self, x=None, level: float = 0.95, se: str = "model", anytime: bool = False, tightest_at=None):
        """The items ranked by x'theta_i at context ``x`` (default: the mean told context), with the
        CI of x'theta_i from the debiased estimate (NaN while unavailable): a DataFrame.
        ``anytime=True``: confidence sequences instead of CIs (as in :meth:`intervals`)."""
        if x is not None:
            x = check.finite_array("x", x, ndim=1, shape=(self.config.dim,))
        theta, result, rows = self._snapshot(se)
        x = self._mean_context(rows) if x is None else x
        factor = (stopping.factor(result, level, True, stopping.tightest(self.config, tightest_at))
                  if anytime and result.available else None)
        return report.ranking(theta, result, np.asarray(x, dtype=float), self.config.labels, level, factor)

    def decision(self, level: float = 0.95, top: int = 1, x=None, se: str = "model", anytime: bool = True,
                 tightest_at=None):
        """The stopping rule's verdict (:class:`study.core.stopping.Separation`: ``decided``,
        ``top``, ``margin``, ``closest``): is the top-``top`` set at ``x`` (default: the mean told
        context) separated from the rest by the confidence sequences (``anytime=False``: by
        fixed-time CIs, which do not survive repeated looks)?"""
        if x is not None:
            x = check.finite_array("x", x, ndim=1, shape=(self.config.dim,))
        _, result, rows = self._snapshot(se)
        if x is None:  # nothing told: no estimate, not decided (the context does not matter)
            x = self._mean_context(rows) if rows.n else np.zeros(self.config.dim)
        return stopping.decision(result, np.asarray(x, dtype=float), level=level, top=top, anytime=anytime,
                                 tightest_at=stopping.tightest(self.config, tightest_at))

    def decided(self, level: float = 0.95, top: int = 1, x=None, se: str = "model", tightest_at=None) -> bool:
        """True once the top-``top`` set at ``x`` (default: the mean told context) is separated from
        the rest by the ``level`` confidence sequences: every pair (i in the set, j outside) has its
        sequence of x'(theta_i - theta_j) above 0 (Bonferroni over the pairs).  Looking after every
        tell and stopping the first time it is true names a wrong set with probability at most
        1 - level (asymptotically; docs/online.md, "When to stop")."""
        return self.decision(level, top, x, se, True, tightest_at).decided

    def diagram(self, contexts, path=None, *, uncertainty: bool = True, level: float = 0.95,
                threshold: float = 0.95, se: str = "model"):
        """The paper's ranking diagram over ``contexts`` (Q, d): an arrow i -> j when x'theta_i >
        x'theta_j (``uncertainty=False``) or the ``level`` CI of x'(theta_i - theta_j) lies above 0
        (``uncertainty=True``) for more than ``threshold`` of the contexts; transitive reduction.
        Returns the reduced (n, n) adjacency; draws it to ``path`` (PNG, PDF) when given."""
        contexts = check.finite_array("contexts", contexts, ndim=2, shape=(None, self.config.dim))
        theta, result, rows = self._snapshot(se)
        return report.diagram(theta, result if uncertainty else None, contexts, self.config.labels, path=path,
                              level=level, threshold=threshold, title=f"{self.path.name}: {rows.n} told outcomes")

    def close(self) -> None:
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        c = self.config
        return f"Ranker({str(self.path)!r}, n_items={c.n_items}, dim={c.dim}, policy={c.policy!r}, T={c.T})"


def _count(name: str, value, *, low: int) -> int:
    """A non-negative count: an integer, or a float with an integer value."""
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        value = int(value)
    try:
        return check.integer(name, value, low=low)
    except ValueError:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}") from None
