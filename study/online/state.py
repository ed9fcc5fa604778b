"""The ranker's loop state between operations, and how it is brought up to date with its store.

:class:`LoopState` holds what the simulations' loop holds (:mod:`study.simulation.replication`):
the policy and its private generator, the shared uniforms, the shared estimator with its told rows,
the debiased estimate on demand.  It follows the store's told rows in three ways:

* :meth:`LoopState.append`: a row joins the estimator's data without a fit (rows a checkpoint
  already covers);
* :meth:`LoopState.restore`: the estimator's whole state from a checkpoint (:mod:`.snapshot`);
* :meth:`LoopState.fit`: a row applied as the loop applies it (the policy's ``update``, then the
  refit) -- for the tells after the checkpoint, or the whole history where no checkpoint can be
  used (a store of format 1, one written by other code, a policy with an ``update`` but no
  ``state_dict``).

Opening a store of 20,000 tells thus appends 20,000 rows (O(t d), no fit) and decodes one
checkpoint, where it used to refit all of them.
"""
from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import numpy as np

from ..policies import Choice, Step, make_policy
from ..simulation.estimator import Estimate
from ..simulation.graph import ComparisonGraph
from ..simulation.replication import _SharedDebias
from ..simulation.seeds import policy_generator
from . import snapshot
from .store import StoreError, pack

class Rows:
    """The told rows as arrays (for the sandwich SEs and the mean context)."""

    def __init__(self, capacity: int, dim: int):
        self.n = 0
        self.i = np.zeros(capacity, dtype=np.intp)
        self.j = np.zeros(capacity, dtype=np.intp)
        self.X = np.zeros((capacity, dim))
        self.wins = np.zeros(capacity)
        self.ties = np.zeros(capacity)
        self.m = np.zeros(capacity)

    def _room(self, rows: int) -> None:
        """Grown (doubled) as an open horizon needs."""
        if rows <= len(self.i):
            return
        size = max(rows, 2 * len(self.i))
        for name in ("i", "j", "X", "wins", "ties", "m"):
            old = getattr(self, name)
            new = np.zeros((size,) + old.shape[1:], dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def append(self, major, other, x, wins, ties, m):
        k = self.n
        self._room(k + 1)
        self.i[k], self.j[k], self.X[k], self.wins[k], self.ties[k], self.m[k] = major, other, x, wins, ties, m
        self.n = k + 1

    def extend(self, major, other, X, wins, ties, m):
        k, n = self.n, len(major)
        self._room(k + n)
        self.i[k:k + n], self.j[k:k + n], self.X[k:k + n] = major, other, X
        self.wins[k:k + n], self.ties[k:k + n], self.m[k:k + n] = wins, ties, m
        self.n = k + n

    def arrays(self):
        k = self.n
        return self.i[:k], self.j[:k], self.X[:k], self.wins[:k], self.m[:k], self.ties[:k]


def restorable(policy) -> bool:
    """Can the policy's state come from a checkpoint?  Yes unless it has an ``update`` (state built
    from the told rows) without ``state_dict``/``load_state_dict`` to save and restore it."""
    if policy is None or getattr(policy, "update", None) is None:
        return True
    return callable(getattr(policy, "state_dict", None)) and callable(getattr(policy, "load_state_dict", None))


class LoopState:
    """The loop's state (see the module docstring); ``factory`` None: a read-only view (no policy)."""

    def __init__(self, config, factory):
        self.n = config.n_at_row(0)  # the items the estimator holds (an added item joins it: .items)
        n, d, T = self.n, config.dim, config.T
        self.config = config
        self.setting = config.sub(n).setting()
        edges = config.sub(n).edges_array()
        self.graph = ComparisonGraph.from_edges(edges, n)
        # The policy gets a copy of its own: a choice is checked against self.graph, which no
        # policy holds (a frozen copy can still be swapped field by field with object.__setattr__).
        self.policy_graph = ComparisonGraph.from_edges(edges, n)
        self._active = {}  # the graphs without the retired items, for the last set retired
        self.estimate = self._estimate(T, self.setting)
        self.debiased = _SharedDebias(self.estimate, self.graph)
        self.seed = config.policy_seed()
        self.uniforms = np.random.default_rng(self.seed).random((T, 4))
        self.factory = factory
        self.settings = {(T, n): self.setting}  # by horizon (an open or raised horizon has several) and items
        self.policy_T = (T, n)  # the horizon and items the policy was made for
        self.policy = None if factory is None else make_policy(config.policy, self.setting, factory)
        self.update = getattr(self.policy, "update", None)
        self.rng = policy_generator(self.seed, config.policy)
        self.rng_ask = 0  # the ask after which self.rng's state is (None: unknown, reload)
        self.rows = Rows(T, d)
        self.applied = 0
        self.clean = True  # False while a row is half applied, or applied and not yet committed (then, on a
        # failure, the state is rebuilt from the store)

    # --- the horizon (study.online.horizon) --------------------------------------------------
    def _estimate(self, capacity: int, setting) -> Estimate:
        c = self.config.sub(self.n)
        env = SimpleNamespace(n_items=c.n_items, dim=c.dim, T=capacity, edges=c.edges_array(), theta0=c.theta0_array())
        return Estimate(setting, env)

    def setting_at(self, step: int):
        """The setting of step ``step``: the config's, with the horizon in force then."""
        key = (self.config.horizon_at(step), self.n)
        if key not in self.settings:
            self.settings[key] = self.config.sub(self.n).setting(key[0])
        return self.settings[key]

    def uniform(self, t: int) -> np.ndarray:
        """Row t-1 of the shared uniforms: default_rng(seed).random((T, 4)) for the horizon of step
        t (a longer stream starts with the shorter one, so rows never change as the horizon grows)."""
        if t > len(self.uniforms):
            self.uniforms = np.random.default_rng(self.seed).random((max(self.config.horizon_at(t), t), 4))
        return self.uniforms[t - 1]

    def policy_for(self, t: int):
        """The policy made for the horizon of ask ``t`` (remade when it changes, its state carried
        over by ``state_dict``/``load_state_dict``)."""
        T = (self.config.horizon_at(t), self.n)
        if T != self.policy_T and self.policy is not None:
            policy = make_policy(self.config.policy, self.setting_at(t), self.factory)
            if self.update is not None:
                if not restorable(self.policy):
                    raise ValueError(f"policy {self.config.policy!r} has an update but no state_dict: its state cannot "
                                     "follow a change of horizon")
                policy.load_state_dict(self.policy.state_dict())
            self.policy, self.update, self.policy_T = policy, getattr(policy, "update", None), T
        return self.policy

    def graphs_at(self, t: int) -> tuple:
        """(the graph a choice is checked against, the policy's copy) for ask ``t``: without the
        items retired before it (:mod:`.items`)."""
        config = self.config.sub(self.n)
        gone = config.retired_at(t)
        if not gone:
            return self.graph, self.policy_graph
        if gone not in self._active:
            edges, n = config.active_edges(t), self.n
            self._active = {gone: (ComparisonGraph.from_edges(edges, n), ComparisonGraph.from_edges(edges, n))}
        return self._active[gone]

    def grow(self, n: int, fresh: bool = False) -> None:
        """The estimator for ``n`` items (added items joining, :mod:`.items`): rebuilt with the
        told rows, the current estimate extended by zero rows (the mean of a centred theta) and
        nothing else of the last fit (its factor, multipliers and warm start are of the smaller
        problem), so that the next fit depends only on the estimate and the rows, which a replay
        reproduces.  ``fresh``: no state to keep (a checkpoint is restored next)."""
        if n == self.n:
            return
        theta, self.n = self.estimate.theta, n
        edges = self.config.sub(n).edges_array()
        self.graph, self.policy_graph, self._active = (ComparisonGraph.from_edges(edges, n),
                                                       ComparisonGraph.from_edges(edges, n), {})
        estimate = self._estimate(self.estimate.data.capacity, self.setting_at(max(self.applied, 1)))
        i, j, X, wins, m, _ = self.rows.arrays()
        for a, b, x, w, c in zip(i.tolist(), j.tolist(), X, wins.tolist(), m.tolist()):
            estimate.data.append(a, b, x, w, c)
        if not fresh:
            estimate.theta = np.vstack([theta, np.zeros((n - len(theta), theta.shape[1]))])
        self.estimate = estimate
        self.debiased = _SharedDebias(estimate, self.graph)

    def _capacity(self, seq: int) -> None:
        """The estimator sized for the horizon of told row ``seq`` (its capacity, which also picks
        the core's solver path, is a function of the row alone, so a reopened ranker and an
        uninterrupted one hold the same): rebuilt with its rows and its exact state
        (:mod:`.snapshot`) when the horizon changes."""
        T = self.config.horizon_at(max(seq, 1))
        setting = self.setting_at(max(seq, 1))
        if T == self.estimate.data.capacity:
            self.estimate.setting = setting
            return
        blob = snapshot.capture(self.estimate, None) if self.applied else None
        estimate = self._estimate(T, setting)
        i, j, X, wins, m, _ = self.rows.arrays()
        for a, b, x, w, c in zip(i.tolist(), j.tolist(), X, wins.tolist(), m.tolist()):
            estimate.data.append(a, b, x, w, c)
        if blob is not None:
            snapshot.restore(estimate, blob)
        self.estimate = estimate
        self.debiased = _SharedDebias(estimate, self.graph)

    # --- following the told rows ----------------------------------------------------------------
    def append(self, ledger, upto: int) -> None:
        """Rows applied+1..upto join the data, without a fit."""
        if upto <= self.applied:
            return
        self.grow(self.config.n_at_row(upto), fresh=True)  # a checkpoint of that size is restored next
        self._capacity(upto)
        told = slice(self.applied, upto)
        asked = ledger.tell_ask[told] - 1
        major, other, X = ledger.major[asked], ledger.other[asked], ledger.X[asked]
        ties, m = ledger.ties[told], ledger.m[told]
        score = ledger.wins[told] + 0.5 * ties  # as apply() scores a row (the same IEEE operations)
        append = self.estimate.data.append
        for a, b, x, w, c in zip(major.tolist(), other.tolist(), X, score.tolist(), m.tolist()):
            append(a, b, x, w, c)
        self.rows.extend(major, other, X, score, ties, m)
        self.applied = upto
        self.debiased.invalidate()

    def fit(self, ledger, upto: int) -> None:
        """Rows applied+1..upto applied as the loop applies them (update, refit)."""
        for k in range(self.applied, upto):
            major, other, x, wins, ties, m = ledger.row(k)
            explored = bool(ledger.explored[ledger.tell_ask[k] - 1])
            self.apply(k + 1, int(ledger.tell_ask[k]), x, major, other, explored, wins, ties, m)
        self.grow(self.config.n_at_row(self.applied))  # items added after the last row

    def apply(self, seq, ask_id, x, major, other, explored, wins, ties, m) -> None:
        self.clean = False
        self.grow(self.config.n_at_row(seq - 1))
        self._capacity(seq)
        score = wins + 0.5 * ties  # a tie is half a win for each side, as in the replays
        if self.update is not None:
            self.policy_for(ask_id)
            step = Step(ask_id, x, self.uniform(ask_id), self.graphs_at(ask_id)[1], self.estimate.theta, self.debiased.for_policy,
                        rng=None, setting=self.setting_at(ask_id))
            self.update(step, Choice(major, other, explored), score)
        self.estimate.update(seq, major, other, x, score, m)
        self.debiased.invalidate()
        self.rows.append(major, other, x, score, ties, m)
        self.applied = seq
        self.clean = True

    # --- checkpoints ----------------------------------------------------------------------------
    def capture(self) -> bytes:
        state = self.policy.state_dict() if self.update is not None and restorable(self.policy) else None
        if state is not None:
            try:
                json.dumps(state)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"policy {self.config.policy!r}: state_dict() must return JSON values ({exc})") \
                    from None
        return snapshot.capture(self.estimate, state)

    def usable(self, blob) -> bool:
        """Can checkpoint ``blob`` be restored here (written by this code, for a restorable policy)?"""
        return blob is not None and restorable(self.policy) and snapshot.current(blob)

    def restore(self, path, ledger, seq: int, blob: bytes) -> None:
        """The state after tell ``seq`` from its checkpoint (the rows up to it appended first)."""
        self.append(ledger, seq)
        try:
            policy_state = snapshot.restore(self.estimate, blob)
        except snapshot.SnapshotError as exc:
            raise StoreError(f"{path}: refused, checkpoint row: {exc}") from None
        if self.update is not None:
            self.policy.load_state_dict(policy_state)
        self.debiased.invalidate()

    def catch_up(self, path, ledger, checkpoint) -> int:
        """Bring a writer's state to the ledger's last tell: restore the checkpoint if it is ahead
        and usable, fit the rest.  Returns how many rows were refitted."""
        seq, blob = checkpoint
        if seq > self.applied and self.usable(blob):
            self.restore(path, ledger, seq, blob)
        before = self.applied
        self.fit(ledger, ledger.n_tells)
        return ledger.n_tells - before

    def restore_rng(self, conn, ask_id: int) -> None:
        """Put the policy's generator in its state after ask ``ask_id`` (0: the initial state)."""
        if self.rng_ask == ask_id:
            return
        if ask_id == 0:
            self.rng = policy_generator(self.seed, self.config.policy)
        else:
            text = conn.execute("SELECT rng_state FROM asks WHERE id = ?", (ask_id,)).fetchone()[0]
            try:
                self.rng.bit_generator.state = json.loads(text)
            except (TypeError, ValueError, KeyError) as exc:
                raise StoreError(f"refused, asks row {ask_id}: rng_state is not a state of the policy's "
                                 f"generator ({type(exc).__name__}: {exc})") from None
        self.rng_ask = ask_id

    def checkpoint_row(self) -> tuple:
        return self.applied, self.capture()

    def estimate_row(self) -> tuple:
        return self.applied, pack(self.estimate.theta)


def compare_with_stored(path, state: LoopState, theta, refitted: int, stacklevel: int) -> None:
    """Warn when refitted rows end at another estimate than the stored one (other code or another
    BLAS kernel wrote them: rounding): the ranker continues with its own."""
    if theta is None or refitted == 0 or np.array_equal(theta, state.estimate.theta):
        return
    gap = float(np.abs(theta - state.estimate.theta).max())
    warnings.warn(f"{path}: refitting the last {refitted} tells gave an estimate {gap:.3g} away from the stored one "
                  "(the core, or the BLAS kernel, differs from the one that wrote them); continuing with the refitted "
                  "one", RuntimeWarning, stacklevel=stacklevel)
