"""The ranker a server owns, in a thread of its own, and what the server reads from it beyond the
:class:`~study.online.Ranker`'s own methods: the told rows after a sequence number (paged), a
timeline of the tells, each item's judgments and win rate, the outcomes stored for tickets (to
recognise a retried tell), the inputs of the ranking diagram.

A Ranker is used from one thread (its SQLite connection belongs to the thread that opened it), so
:class:`Service` opens it in a single worker thread and runs every use of it there, one at a time
(:meth:`Service.call`); the server's event loop meanwhile goes on reading and answering other
requests, so that the HTTP work overlaps the store's work and its fsync.  Drawing a diagram runs
in yet another thread, on copies.
"""
from __future__ import annotations

import asyncio
import io
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import report
from ..store import Store, unpack

MAX_PAGE = 10_000  # told rows per page of the export
DIAGRAM_CACHE = 8
_DRAWING = threading.Lock()  # matplotlib's pyplot is not thread-safe


class Service:
    """The ranker ``open_ranker()`` opens, in its own thread, and the server's reads of it."""

    def __init__(self, open_ranker):
        self.open_ranker = open_ranker
        self.ranker = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-online-ranker")
        self._diagrams: dict = {}

    def open(self) -> None:
        """Open the ranker now, in its thread (it raises what the Ranker raises); nothing if open."""
        if self.ranker is None:
            self.ranker = self._thread.submit(self.open_ranker).result()

    async def start(self) -> None:
        if self.ranker is None:
            self.ranker = await asyncio.get_running_loop().run_in_executor(self._thread, self.open_ranker)

    async def stop(self) -> None:
        if self.ranker is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self.ranker.close)
            self.ranker = None
        self._thread.shutdown(wait=False)

    def close(self) -> None:
        """Close the ranker (in its thread) and the thread, outside an event loop."""
        if self.ranker is not None:
            self._thread.submit(self.ranker.close).result()
            self.ranker = None
        self._thread.shutdown(wait=True)

    async def call(self, function, *args):
        """``function(*args)`` in the ranker's thread, after what was queued before it."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, function, *args)

    @property
    def config(self):
        return self.ranker.config

    @property
    def n_told(self) -> int:
        """The tells of the store as this process last read it (a write or a read brings it up to date)."""
        return self.ranker._opened.ledger.n_tells

    def state(self) -> dict:
        counts = self.ranker.counts()
        config = self.ranker.config  # as this ranker holds it: items added or retired through this server
        return {"store_id": self.ranker.store_id, "n_told": counts["told"], "n_asked": counts["asked"],
                "counts": counts, "n_items": config.n_items, "n_retired": len(config.retired)}

    # --- the told rows --------------------------------------------------------------------------
    def told(self, after: int = 0, limit: int = 1000) -> dict:
        """The told rows with seq > ``after``, at most ``limit`` (<= :data:`MAX_PAGE`), in order, each
        verified (only rows the ranker's ledger has verified are returned)."""
        told = self.ranker._read().applied
        labels = self.ranker.config.labels
        with self.ranker._store.read() as conn:
            rows = conn.execute(
                "SELECT t.seq, t.ask_id, a.major, a.other, a.x, t.wins, t.ties, t.m, t.told_at FROM tells t "
                "JOIN asks a ON a.id = t.ask_id WHERE t.seq > ? AND t.seq <= ? ORDER BY t.seq LIMIT ?",
                (after, told, limit)).fetchall()
        out = [{"seq": seq, "ticket": ticket, "major": major, "other": other, "major_name": labels[major],
                "other_name": labels[other], "x": unpack(x).tolist(), "wins": wins, "ties": ties, "m": m,
                "told_at": float(told_at)}
               for seq, ticket, major, other, x, wins, ties, m, told_at in rows]
        last = out[-1]["seq"] if out else after
        return {"rows": out, "n_told": told, "next_after": last if last < told else None}

    def timeline(self, points: int = 200) -> dict:
        """(told_at, seq) of every k-th tell, at most ``points`` of them, the last tell last."""
        told = self.ranker._read().applied
        step = max(1, math.ceil(told / max(points - 1, 1)))
        with self.ranker._store.read() as conn:
            rows = conn.execute("SELECT told_at, seq FROM tells WHERE seq <= ? AND (seq % ? = 0 OR seq = 1 "
                                "OR seq = ?) ORDER BY seq", (told, step, told)).fetchall()
        return {"points": [[float(t), int(s)] for t, s in rows], "n_told": told}

    def stored(self, tickets) -> list:
        """The outcome stored for each ticket id ({"seq", "wins", "ties", "m"} or None)."""
        if not tickets:
            return []
        with self.ranker._store.read() as conn:
            return [Store.tell_of(conn, t) for t in tickets]

    # --- per item -------------------------------------------------------------------------------
    def items(self) -> list:
        """Each item's judgments (comparisons told that involve it), wins (a tie half) and win rate."""
        state = self.ranker._read()
        i, j, _, score, m, _ = state.rows.arrays()
        n = self.ranker.config.n_items
        judgments = np.bincount(i, weights=m, minlength=n) + np.bincount(j, weights=m, minlength=n)
        wins = np.bincount(i, weights=m - score, minlength=n) + np.bincount(j, weights=score, minlength=n)
        labels = self.ranker.config.labels
        return [{"item": k, "name": labels[k], "judgments": int(judgments[k]), "wins": float(wins[k]),
                 "win_rate": float(wins[k] / judgments[k]) if judgments[k] else None} for k in range(n)]

    # --- the diagram ----------------------------------------------------------------------------
    def diagram_inputs(self, contexts, uncertainty: bool, se: str):
        """(theta, result or None, contexts, told rows) from one consistent state (copies: drawn elsewhere)."""
        theta, result, rows = self.ranker._snapshot(se)
        if contexts is None:
            contexts = report.told_contexts(rows.arrays()[2])
        return theta, (result if uncertainty else None), contexts, rows.n

    def cached(self, key):
        return self._diagrams.get(key)

    def keep(self, key, value) -> None:
        while len(self._diagrams) >= DIAGRAM_CACHE:
            self._diagrams.pop(next(iter(self._diagrams)))
        self._diagrams[key] = value


def draw(theta, result, contexts, labels, *, level: float, threshold: float, image: str | None, title: str):
    """(reduced adjacency, image bytes or None) of the ranking diagram (report.diagram; ``result``
    None: the point version).  Thread-safe; ValueError while the CIs are not available."""
    buffer = io.BytesIO() if image else None
    with _DRAWING:
        adjacency = report.diagram(theta, result, contexts, labels, path=buffer, level=level, threshold=threshold,
                                   title=title, format=image)
    return adjacency, (buffer.getvalue() if buffer is not None else None)
