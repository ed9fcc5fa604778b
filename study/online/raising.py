"""Raising a ranker's horizon on a live store (:mod:`study.online.horizon`): the part of
:class:`study.online.Ranker` that records a larger T and follows one recorded by another process."""
from __future__ import annotations

import dataclasses

from ..core import _validate as check
from . import horizon
from .config import Config
from .store import Store, StoreError


class Raising:
    """Mixed into :class:`study.online.Ranker` (which provides ``config``, ``_opened``, ``_state``,
    ``_guarded``, ``_after_commit``, ``path``)."""

    _pending_T = None
    _arguments = None  # the stored arguments' text this process last adopted

    @staticmethod
    def _creation(given: dict) -> dict:
        """A store created without T has an open horizon (epochs doubling from the default T)."""
        if given.get("T") is None and given.get("open_horizon") is None:
            return {**given, "open_horizon": True}
        return given

    def _reopening(self, config: Config, given: dict) -> dict:
        """The given arguments to compare with the stored ones: a T larger than the horizon in
        force is a raise (recorded once the store is open), the stored or current T is no change."""
        if config.joined:  # the creation arguments of a store that items joined since
            first = config.n_items - len(config.joined)
            if given.get("n_items") == first:
                given = {**given, "n_items": None}
            if given.get("items") is not None and list(map(str, given["items"])) == config.labels[:first]:
                given = {**given, "items": None}
        T = given.get("T")
        if T is None or isinstance(T, bool) or not isinstance(T, int):
            return given
        now = horizon.current(config.T, config.extended)
        if T in (config.T, now):
            return {**given, "T": None}
        if T > now:
            self._pending_T = T
            return {**given, "T": None}
        return given

    def _raise_pending(self, conn) -> None:
        if self._pending_T is not None:
            T, self._pending_T = self._pending_T, None
            self._record(conn, T)

    def extend_horizon(self, T: int) -> None:
        """Raise the horizon to ``T`` from the next ask on (recorded in the store; the asks and
        told rows so far keep theirs).  ``T`` must exceed the horizon in force at the next ask;
        on an open horizon the doubling continues from ``T``."""
        self._writable()
        T = check.integer("T", T, low=1, high=check.MAX_INTEGER)
        self._guarded(lambda conn, state: self._record(conn, T))

    def _record(self, conn, T: int) -> None:
        config = self.config
        step = Store.last_ask(conn) + 1
        now = config.horizon_at(step)
        if T <= now:
            raise ValueError(f"T = {T} does not raise the horizon: it is {now} at the next ask ({step})")
        extended = config.extended
        if extended and extended[-1][0] == step:  # raised twice before another ask: the last raise counts
            extended = extended[:-1]
        self._store_config(conn, dataclasses.replace(config, extended=horizon.normal_extended(
            extended + ((step, T),), config.T, config.open_horizon)))

    def _store_config(self, conn, config: Config) -> None:
        """The arguments with a recorded event (a raise, a retirement), adopted once committed."""
        text = config.to_json()
        conn.execute("UPDATE meta SET value = ? WHERE key = 'arguments'", (text,))
        self._after_commit.append(lambda: self._adopt(config, text))

    def _adopt(self, config: Config, text: str, rebuild: bool = False) -> None:
        self.config = self._opened.config = config
        self._opened.ledger.set_config(config)
        if rebuild:  # items added by another process: the state is rebuilt from the store
            self._state = None
        elif self._state is not None:
            self._state.config = config
        self._arguments = text

    def _follow_horizon(self, conn) -> None:
        """Adopt a raise or a retirement another process recorded (the only changes of the arguments
        a store allows: events appended)."""
        text = conn.execute("SELECT value FROM meta WHERE key = 'arguments'").fetchone()[0]
        if self._arguments is None:
            self._arguments = self.config.to_json()
        if text == self._arguments:
            return
        try:
            config = Config.from_json(text)
        except ValueError as exc:
            raise StoreError(f"{self.path}: refused, meta key 'arguments': {exc}") from None
        old = self.config
        events = ("extended", "retired", "joined")
        base = config.sub(old.n_items) if config.n_items > old.n_items else config
        if base.labels == old.labels:
            base = dataclasses.replace(base, items=old.items)
        if dataclasses.replace(base, **{e: getattr(old, e) for e in events}) != old or any(
                getattr(config, e)[:len(getattr(old, e))] != getattr(old, e) for e in events):
            raise StoreError(f"{self.path}: refused, meta key 'arguments': changed while open other than by a raise "
                             "of the horizon, an item added or retired")
        self._adopt(config, text, rebuild=config.n_items != old.n_items)
