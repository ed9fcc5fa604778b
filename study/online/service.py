"""What a server reads from the ranker it owns, beyond the :class:`~study.online.Ranker`'s own
methods: the told rows after a sequence number (paged), a timeline of the tells, each item's
judgments and win rate, the outcomes stored for tickets (to recognise a retried tell), and the
ranking diagram as an image (cached per told count).

A :class:`Service` is used from one thread, the server's event loop (a Ranker is not shared
between threads); only drawing a diagram runs in a worker thread, on copies.
"""
from __future__ import annotations

import io
import math
import threading

import numpy as np

from . import report
from .store import Store, unpack

MAX_PAGE = 10_000  # told rows per page of the export
DIAGRAM_CACHE = 8
_DRAWING = threading.Lock()  # matplotlib's pyplot is not thread-safe


class Service:
    """The reads of a server over ``ranker`` (module docstring)."""

    def __init__(self, ranker=None):
        self.ranker = ranker  # set when the app starts, when it opens the ranker itself
        self._diagrams: dict = {}

    @property
    def config(self):
        return self.ranker.config

    @property
    def n_told(self) -> int:
        """The tells of the store as this process last read it (a write or a read brings it up to date)."""
        return self.ranker._opened.ledger.n_tells

    def state(self) -> dict:
        counts = self.ranker.counts()
        return {"store_id": self.ranker.store_id, "n_told": counts["told"], "n_asked": counts["asked"],
                "counts": counts}

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
        """(theta, result or None, contexts, title) from one consistent state (copies: drawn elsewhere)."""
        theta, result, rows = self.ranker._snapshot(se)
        if contexts is None:
            contexts = report.told_contexts(rows.arrays()[2])
        return theta, (result if uncertainty else None), contexts, rows.n

    def diagram_key(self, uncertainty: bool, level: float, threshold: float, se: str):
        return (self.ranker._read().applied, uncertainty, level, threshold, se)

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
