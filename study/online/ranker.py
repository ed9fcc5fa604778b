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

Resuming without replay: a tell stores the estimate and (when due) a checkpoint of the
estimator's state (:mod:`.snapshot`); reopening verifies the store (:mod:`.verify`), restores the
checkpoint and refits the few tells after it (:mod:`.state`): bit for bit the uninterrupted run.
The policy's generator state is saved with every ask; a policy's ``update`` state is checkpointed
through ``state_dict``/``load_state_dict`` (else the history is refitted).  The horizon:
:mod:`.horizon` (fixed, open, raised).
"""
from __future__ import annotations

import dataclasses
import json
import secrets
import time
import warnings
from pathlib import Path

import numpy as np

from .._version import __version__
from ..core import _validate as check
from ..core.sandwich import robust
from ..core.threads import one_blas_thread
from ..policies import Step, policy_provenance, resolve_policy
from ..simulation.replication import _checked
from . import items, judges, report, snapshot, stopping
from .config import Config, bounded_array
from .raising import Raising
from .state import LoopState, compare_with_stored
from .tickets import Ticket, TicketError, check_batch, count, outcome_fields, ticket_key
from .store import CHECKPOINTED, FORMAT, FORMAT_1, TIMEOUT, Store, StoreError, checkpoint_stride, pack, unpack

from .verify import Ledger, Opened, open_store, read_checkpoint, read_estimate, recheck_schema
MAX_TIMEOUT = 7 * 24 * 3600.0  # seconds waited for another process's transaction, at most


class Ranker(Raising):
    """An online ranker with a crash-safe store (one SQLite file per ranker).

    Parameters
    ----------
    path : str or Path
        The store.  A new file is created with the arguments below; an existing one is verified
        (:mod:`study.online.verify`), reopened and continued.  Arguments given on reopening must
        equal the stored ones (else ``ValueError`` naming each difference); arguments not given
        are taken from the store.
    n_items : int
        n, the number of items (or give ``items``).
    dim : int
        d, the context dimension.
    policy : str
        A method: built-in (``"RB"``, the default, and the others of :data:`study.ALL_METHODS`),
        registered with :func:`study.register_policy`, or an import path ``"package.module:Name"``.
    T : int
        The horizon: how many pairs the ranker hands out at most.  The policy and the estimator use
        it as the simulations do.  Not given on creation: an open horizon (epochs doubling from
        :func:`.horizon.first_epoch`); a larger T on reopening raises it.  ``open_horizon=True``: open from T.
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
        The initial estimate theta(0) (default zeros; entries within +-1e6).
    readonly : bool
        Open an existing store for reading only (no policy is resolved, nothing is refitted or
        written; ask, tell and expire are refused).
    timeout : float
        Seconds to wait for another process's transaction (finite, 0 to a week).

    Raises
    ------
    ValueError
        Bad arguments, or arguments other than the stored ones (nothing is written).
    study.online.StoreError
        (a ValueError) The file is not a ranker store this version reads, or fails its
        verification: the message names the file and the first offending row.
    study.online.StoreFileError
        (an OSError) The file system refused (a read-only file or directory, a full disk, a second
        hard link, ...): one line naming the file; the store is left as it was.

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
                 open_horizon=None, readonly: bool = False, timeout: float = TIMEOUT):
        given = dict(n_items=n_items, dim=dim, policy=policy, T=T, T0=T0, M=M, alpha=alpha, gamma=gamma,
                     c_lambda=c_lambda, tie_break=tie_break, seed=seed, edges=edges, items=items, theta0=theta0,
                     open_horizon=open_horizon)
        self.path = Path(path)
        if not isinstance(readonly, (bool, np.bool_)):
            raise ValueError(f"readonly must be True or False, got {readonly!r}")
        self.readonly = bool(readonly)
        timeout = check.real("timeout", timeout, low=0.0, high=MAX_TIMEOUT)
        self._state = None
        self._factory = None
        self._seen = None  # PRAGMA data_version at the last look: unchanged, no other process committed since
        self._checkpoint = (0, 0)  # (seq, bytes) of the stored checkpoint
        self._after_commit: list = []  # what the ledger learns from this process's transaction once it commits
        if readonly and any(v is not None for v in given.values()):
            raise ValueError("a read-only ranker takes no creation arguments")
        fresh = None
        if not readonly and (not self.path.exists() or (self.path.is_file() and self.path.stat().st_size == 0)):
            fresh = Config.from_arguments(self._creation(given))  # all checks before the file exists
            resolve_policy(fresh.policy)
        self._store = Store(self.path, create=not readonly, readonly=readonly, timeout=timeout)
        try:
            with self._store.read() as conn:  # verified before anything is written
                opened = open_store(conn, self.path)
            if readonly:
                if opened is None:
                    raise StoreError(f"{self.path}: an empty SQLite file, not a ranker store")
                self._opened, self.config = opened, opened.config
                self._read()  # the estimator's state brought up as a writable open brings it, and checked
                return
            if opened is not None:
                self._check_arguments(opened.config, given)
                self._factory = resolve_policy(opened.config.policy)
            self._store.prepare_writes()
            self._open(given, fresh, opened)
        except BaseException:
            self._store.close()
            raise

    def _check_arguments(self, config: Config, given: dict) -> None:
        differences = config.differences(self._reopening(config, given))
        if differences:
            raise ValueError(f"{self.path} was created with other arguments: {'; '.join(differences)}. "
                             "Open it without them (or with the stored values) to continue it, or use another file")

    def _open(self, given, fresh, opened) -> None:
        """Create the store, or bring the verified one's state up (upgrading a format-1 store)."""
        self._after_commit.clear()
        self._open_in(given, fresh, opened)
        for learn in self._after_commit:
            learn()
        self._after_commit.clear()

    def _open_in(self, given, fresh, opened) -> None:
        with one_blas_thread(), self._store.write() as conn:
            if opened is None:
                opened = open_store(conn, self.path)  # perhaps created by another process meanwhile
                if opened is None:
                    config = fresh if fresh is not None else Config.from_arguments(self._creation(given))
                    meta = {"store_id": secrets.token_hex(16), "arguments": config.to_json(),
                            "study_version": __version__,
                            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "policy_sha256": str(policy_provenance(config.policy)["source_sha256"])}
                    Store.create(conn, meta)
                    self._factory = resolve_policy(config.policy)
                    self._opened = Opened(FORMAT, {"format": FORMAT, **meta}, config, Ledger(self.path, config, True), None,
                                          (0, None), Store.schema_version(conn))
                    self.config = config
                    return
                self._check_arguments(opened.config, given)
                self._factory = resolve_policy(opened.config.policy)
            self._opened, self.config = opened, opened.config
            sha = policy_provenance(self.config.policy)["source_sha256"]
            if opened.meta.get("policy_sha256") not in ("None", str(sha)):
                warnings.warn(f"{self.path}: the code of policy {self.config.policy!r} changed since the store was "
                              "created; its next choices may differ from an uninterrupted run", RuntimeWarning,
                              stacklevel=4)
            self._refresh(conn)
            ledger, state = opened.ledger, LoopState(self.config, self._factory)
            theta = read_estimate(conn, self.path, self.config, ledger.n_tells)
            if opened.format == FORMAT_1:  # verified above; upgraded in this transaction, refitted once
                state.fit(ledger, ledger.n_tells)
                compare_with_stored(self.path, state, theta, ledger.n_tells, stacklevel=4)
                store_id = secrets.token_hex(16)
                Store.upgrade(conn, FORMAT_1, store_id)
                ledger.judged = True
                if state.applied:
                    self._write_estimate(conn, state, force_checkpoint=True)
                opened.format, opened.meta = FORMAT, {**opened.meta, "format": FORMAT, "store_id": store_id}
                opened.schema_version = Store.schema_version(conn)
            else:
                if opened.format != FORMAT:  # format 2: the judges' tables added (empty), nothing refitted
                    Store.upgrade(conn, opened.format)
                    ledger.judged, opened.format, opened.meta = True, FORMAT, {**opened.meta, "format": FORMAT}
                    opened.schema_version = Store.schema_version(conn)
                checkpoint = read_checkpoint(conn, self.path, ledger.n_tells)
                refitted = state.catch_up(self.path, ledger, checkpoint)
                if refitted == 0 and theta is not None and not np.array_equal(theta, state.estimate.theta):
                    raise StoreError(f"{self.path}: refused, checkpoint row: its estimate differs from the estimate "
                                     "row's")
                compare_with_stored(self.path, state, theta, refitted, stacklevel=4)
                if checkpoint[1] is not None and not snapshot.current(checkpoint[1]):  # written by other code:
                    self._write_estimate(conn, state, force_checkpoint=True)  # refitted once, checkpointed anew
            self._state = state
            self._raise_pending(conn)  # a larger T given on reopening

    @property
    def store_id(self):
        """The store's identifier (random, written at creation; None for a format-1 store opened read-only)."""
        return self._opened.store_id

    # --- the loop's state ----------------------------------------------------------------------
    def _refresh(self, conn) -> Ledger:
        """The verified ledger, with whatever other processes added since the last transaction
        (nothing to read when ``PRAGMA data_version`` says nobody else committed)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._seen:
            if recheck_schema(conn, self.path, self._opened):  # upgraded by another process: verified anew
                self._opened, self._state = open_store(conn, self.path), None
            self._follow_horizon(conn)  # raised by another process
            self._opened.ledger.read(conn)
            if self._opened.format in CHECKPOINTED:
                self._checkpoint = Store.checkpoint_info(conn)
            self._seen = version
        return self._opened.ledger

    def _synced(self, conn) -> LoopState:
        """The state at the store's last tell (inside the caller's transaction)."""
        ledger = self._refresh(conn)
        state = self._state
        if state is None:
            state = self._state = LoopState(self.config, self._factory)
        if ledger.n_tells > state.applied:
            self._follow(conn, state, ledger)
        return state

    def _follow(self, conn, state: LoopState, ledger: Ledger) -> None:
        """Bring ``state`` to the ledger's last tell as a writable open does -- restore the stored
        checkpoint when it is ahead and written by this code, refit the tells after it (the whole
        history for a format-1 store or a checkpoint of other code) -- and hold the result against
        the stored estimate: refused where no tell was refitted and they differ (a checkpoint or an
        estimate row altered), warned about where refitted tells end elsewhere (another BLAS kernel
        rounds otherwise; the refitted estimate is the one used).  Every read does this, read-only
        or not, so that no reader trusts a store a writer would refuse."""
        seq = self._checkpoint[0]
        blob = conn.execute("SELECT state FROM checkpoint WHERE id = 1").fetchone()[0] \
            if seq > state.applied and self._opened.format in CHECKPOINTED else None
        refitted = state.catch_up(self.path, ledger, (seq, blob))
        theta = read_estimate(conn, self.path, self.config, ledger.n_tells)
        if refitted == 0 and theta is not None and not np.array_equal(theta, state.estimate.theta):
            raise StoreError(f"{self.path}: refused, checkpoint row: its estimate differs from the estimate row's")
        compare_with_stored(self.path, state, theta, refitted, stacklevel=6)

    def _read(self) -> LoopState:
        try:
            with one_blas_thread(), self._store.read() as conn:
                return self._synced(conn)
        except BaseException:
            if self._state is not None and not self._state.clean:
                self._state = None
            raise

    def _writable(self):
        if self.readonly:
            raise ValueError(f"{self.path} is open read-only")

    def _guarded(self, operation):
        """Run ``operation(conn, state)`` in one write transaction; a failure after the state began
        to change forgets it (it is rebuilt from the store next time), so that memory never runs
        ahead of the file.  What the operation wrote joins the ledger once committed."""
        self._writable()
        self._after_commit.clear()
        try:
            with one_blas_thread(), self._store.write() as conn:
                result = operation(conn, self._synced(conn))
        except BaseException:
            self._after_commit.clear()
            if self._state is not None and not self._state.clean:
                self._state = None
            raise
        for learn in self._after_commit:
            learn()
        self._after_commit.clear()
        self._state.clean = True
        return result

    def _write_estimate(self, conn, state: LoopState, force_checkpoint: bool = False) -> None:
        """The estimate row, and the checkpoint when due (:func:`study.online.store.checkpoint_stride`)."""
        conn.execute("INSERT OR REPLACE INTO estimate (id, seq, theta) VALUES (1, ?, ?)", state.estimate_row())
        seq, size = self._checkpoint
        if force_checkpoint or state.applied - seq >= checkpoint_stride(size):
            row = state.checkpoint_row()
            conn.execute("INSERT OR REPLACE INTO checkpoint (id, seq, state) VALUES (1, ?, ?)", row)
            self._after_commit.append(lambda: setattr(self, "_checkpoint", (row[0], len(row[1]))))

    # --- ask and tell --------------------------------------------------------------------------
    def ask(self, x) -> Ticket:
        """The pair to compare for context ``x`` (length d, finite, entries within +-1e100): a :class:`Ticket`."""
        self._writable()
        x = bounded_array("x", x, check.MAX_ABS_CONTEXT, ndim=1, shape=(self.config.dim,))

        def operation(conn, state):
            t = Store.last_ask(conn) + 1
            if self.config.limit is not None and t > self.config.limit:
                raise ValueError(f"{self.path}: all T = {self.config.limit} asks of this ranker's horizon are used; "
                                 "raise it (Ranker(path, T=larger), python -m study.online horizon STORE T)")
            try:
                state.restore_rng(conn, t - 1)
            except StoreError as exc:
                raise StoreError(f"{self.path}: {exc}") from None
            state.rng_ask = None  # until the ask is stored
            policy, (graph, policy_graph) = state.policy_for(t), state.graphs_at(t)
            step = Step(t, x, state.uniform(t), policy_graph, state.estimate.theta, state.debiased.for_policy,
                        rng=state.rng, setting=state.setting_at(t))
            major, other, explored = items.newcomer(self.config, self._opened.ledger, state, t) or \
                _checked(policy.select(step), self.config.policy, t, graph)
            now = time.time()
            conn.execute("INSERT INTO asks (id, x, major, other, explored, told_before, rng_state, status, asked_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)",
                         (t, pack(x), major, other, int(explored), state.applied,
                          json.dumps(state.rng.bit_generator.state), now))
            state.rng_ask = t
            told_before = state.applied
            self._after_commit.append(lambda: self._opened.ledger.add_ask(t, x, major, other, explored, told_before))
            return self._ticket(t, x, major, other, explored, state.applied, now)

        return self._guarded(operation)

    def tell(self, ticket, wins, m=None, ties=0, *, judge=None, side=None, bothbad=0) -> None:
        """Record the outcome of ``ticket`` (a :class:`Ticket` or its id): ``wins`` of the ``m``
        comparisons (default M) won outright by ``ticket.other``, ``ties`` of them tied (a tie
        counts as half a win for each side).  ``judge``: the name of the judge who told it (a judge
        of the store, not revoked: :mod:`study.online.judges`; None: unknown); ``side``: which was
        shown first, ``"major"`` or ``"other"`` (None: not said); ``bothbad``: how many of the ties
        were "both bad" (``tie (bothbad)`` in an export; half a win each, as every tie).  One
        transaction: the outcome, the ticket closed and the refitted estimate (and its checkpoint,
        when due) are stored together, or nothing is."""
        self._tell([self._outcome(ticket, wins, m, ties, judge, side, bothbad)], many=False)

    def tell_many(self, outcomes) -> int:
        """Record a batch of outcomes in one transaction: each a ``(ticket, wins)``,
        ``(ticket, wins, m)`` or ``(ticket, wins, m, ties)`` tuple, or a mapping with those keys
        (and optionally ``judge``, ``side``, as in :meth:`tell`).
        The rows are applied in the order given, each refitted as by :meth:`tell` (so the store and
        the estimates equal those of the same tells one by one), and stored together or not at all:
        a bad outcome (``ValueError`` naming it: ``outcome 3: ...``) leaves the store as it was.
        Returns how many were told."""
        self._writable()
        batch = []
        for k, outcome in enumerate(outcomes):
            try:
                batch.append(self._outcome(*outcome_fields(outcome, judged=True)))
            except TicketError as exc:
                raise exc.in_batch(k) from None
            except ValueError as exc:
                raise ValueError(f"outcome {k}: {exc}") from None
        if batch:
            self._tell(batch, many=True)
        return len(batch)

    def _outcome(self, ticket, wins, m=None, ties=0, judge=None, side=None, bothbad=0) -> tuple:
        """(ask id, pair or None, wins, ties, m, judge, side, bothbad) of one outcome, validated."""
        ask_id, pair = self._ticket_id(ticket)
        m = self.config.M if m is None else m
        m = count("m", m, low=1)
        if m > self.config.M:
            raise ValueError(f"m = {m} exceeds M = {self.config.M}, the comparisons per ask this ranker was "
                             "created with")
        wins, ties = count("wins", wins, low=0), count("ties", ties, low=0)
        if wins + ties > m:
            raise ValueError(f"wins + ties = {wins} + {ties} exceeds m = {m}")
        if judge is not None:
            judges.check_name(judge)
        bothbad = count("bothbad", bothbad, low=0)
        if bothbad > ties:
            raise ValueError(f"bothbad = {bothbad} exceeds ties = {ties} (it counts the ties that were both bad)")
        return ask_id, pair, wins, ties, m, judge, judges.check_side(side), bothbad

    def _tell(self, batch: list, many: bool) -> None:
        self._writable()

        def operation(conn, state):
            check_batch(conn, batch, many)  # every check before any change
            judged = judges.ids(conn, self.path, self._opened.format, batch)
            ledger = self._opened.ledger
            now = time.time()
            for ask_id, _, wins, ties, m, name, side, bothbad in batch:
                seq = state.applied + 1
                conn.execute("INSERT INTO tells (seq, ask_id, wins, ties, m, told_at) VALUES (?, ?, ?, ?, ?, ?)",
                             (seq, ask_id, wins, ties, m, now))
                judge = judged.get(name)
                if judge is not None or side is not None or bothbad:
                    conn.execute("INSERT INTO told_by (seq, judge, side, bothbad) VALUES (?, ?, ?, ?)",
                                 (seq, judge, side, bothbad))
                conn.execute("UPDATE asks SET status = 'told', closed_at = ? WHERE id = ?", (now, ask_id))
                a = ask_id - 1
                state.apply(seq, ask_id, ledger.X[a], int(ledger.major[a]), int(ledger.other[a]),
                            bool(ledger.explored[a]), wins, ties, m)
                self._after_commit.append(lambda row=(seq, ask_id, wins, ties, m, judge, side): ledger.add_tell(*row))
            state.clean = False  # ahead of the file until the commit
            self._write_estimate(conn, state)

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
                raise TicketError(f"ticket {ask_id} was never asked", reason="never_asked", ticket=ask_id)
            if pair is not None and pair != (row[2], row[3]):
                raise TicketError(f"ticket {ask_id} is for the pair ({row[2]}, {row[3]}), not {pair}", reason="pair",
                                  ticket=ask_id)
            if row[6] != "open":
                raise TicketError(f"ticket {ask_id} is already {row[6]}", reason=row[6], ticket=ask_id,
                                  stored=Store.tell_of(conn, ask_id) if row[6] == "told" else None)
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
                      major_name=labels[major], other_name=labels[other], store_id=self.store_id)

    def _ticket_id(self, ticket):
        """(ask id, (major, other) or None) of a Ticket or an id (:func:`.tickets.ticket_key`)."""
        return ticket_key(ticket, self.store_id, self.path, self.config.n_items, self.config.edges)

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
        state = self._read()
        se = judges.resolve_se(se, self._opened.ledger, (self.config.n_items - 1) * self.config.dim)  # "auto": by
        # judge where two named judges told
        theta = state.estimate.theta.copy()
        with one_blas_thread():
            shared = state.debiased()
            result = dataclasses.replace(shared, theta_d=shared.theta_d.copy(), _cache={},
                                         factor=None if shared.factor is None else shared.factor.copy())
            if se == "sandwich":
                result = robust(result, theta, *state.rows.arrays())
            elif se == "cluster":
                result = judges.clustered(result, theta, state.rows, self._opened.ledger)
        return theta, result, state.rows

    def debiased(self, se: str = "auto"):
        """The debiased estimate at the current theta (:class:`study.DebiasResult`) with the
        model-based (``se="model"``, the paper's Phi_11), sandwich (``"sandwich"``, robust to
        ties) or judge-clustered (``"cluster"``) covariance (``"auto"``, the default: clustered
        where two named judges have told, else model-based); ``available`` is False while the told
        rows do not identify theta."""
        return self._snapshot(se)[1]

    def intervals(self, level: float = 0.95, se: str = "auto", anytime: bool = False, tightest_at=None):
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

    def ranking(self, x=None, level: float = 0.95, se: str = "auto", anytime: bool = False, tightest_at=None):
        """The items ranked by x'theta_i at context ``x`` (default: the mean told context), with the
        CI of x'theta_i from the debiased estimate (NaN while unavailable): a DataFrame.
        ``anytime=True``: confidence sequences instead of CIs (as in :meth:`intervals`)."""
        if x is not None:
            x = bounded_array("x", x, check.MAX_ABS_CONTEXT, ndim=1, shape=(self.config.dim,))
        theta, result, rows = self._snapshot(se)
        x = self._mean_context(rows) if x is None else x
        factor = (stopping.factor(result, level, True, stopping.tightest(self.config, tightest_at))
                  if anytime and result.available else None)
        return items.mark(report.ranking(theta, result, np.asarray(x, dtype=float), self.config.labels, level, factor),
                          self.config)

    def decision(self, level: float = 0.95, top: int = 1, x=None, se: str = "auto", anytime: bool = True,
                 tightest_at=None):
        """The stopping rule's verdict (:class:`study.online.stopping.Decision`: ``decided``,
        ``top``, ``margin``, ``closest`` by index, ``top_names``, ``closest_names`` by name, and
        ``words()``): is the top-``top`` set at ``x`` (default: the mean told context) separated
        from the rest by the confidence sequences (``anytime=False``: by fixed-time CIs, which do
        not survive repeated looks)?"""
        if x is not None:
            x = bounded_array("x", x, check.MAX_ABS_CONTEXT, ndim=1, shape=(self.config.dim,))
        _, result, rows = self._snapshot(se)
        if x is None:  # nothing told: no estimate, not decided (the context does not matter)
            x = self._mean_context(rows) if rows.n else np.zeros(self.config.dim)
        verdict = stopping.decision(result, np.asarray(x, dtype=float), level=level, top=top, anytime=anytime,
                                    tightest_at=stopping.tightest(self.config, tightest_at))
        return stopping.named(verdict, self.config.labels, level, result.comparisons or 0)

    def decided(self, level: float = 0.95, top: int = 1, x=None, se: str = "auto", tightest_at=None) -> bool:
        """True once the top-``top`` set at ``x`` (default: the mean told context) is separated from
        the rest by the ``level`` confidence sequences: every pair (i in the set, j outside) has its
        sequence of x'(theta_i - theta_j) above 0 (Bonferroni over the pairs).  Looking after every
        tell and stopping the first time it is true names a wrong set with probability at most
        1 - level (asymptotically; docs/online.md, "When to stop")."""
        return self.decision(level, top, x, se, True, tightest_at).decided

    def diagram(self, contexts, path=None, *, uncertainty: bool = True, level: float = 0.95,
                threshold: float = 0.95, se: str = "auto"):
        """The paper's ranking diagram over ``contexts`` (Q, d): an arrow i -> j when x'theta_i >
        x'theta_j (``uncertainty=False``) or the ``level`` CI of x'(theta_i - theta_j) lies above 0
        (``uncertainty=True``) for more than ``threshold`` of the contexts; transitive reduction.
        Returns the reduced (n, n) adjacency; draws it to ``path`` (PNG, PDF) when given."""
        contexts = bounded_array("contexts", contexts, check.MAX_ABS_CONTEXT, ndim=2, shape=(None, self.config.dim))
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

