"""A store is verified before it is trusted: its schema, its meta rows and every row.

On opening (and by ``python -m study.online verify FILE``) a store must have exactly the schema
this project writes (the tables, indexes and their SQL of its format: no other table, view,
trigger or index, no column declared otherwise), known ``format`` and meta keys, arguments that
validate as on creation, and rows that satisfy

* asks: ids 1, 2, ... without a gap and within the horizon T; ``x`` a BLOB of d float64, finite,
  within +-1e100; ``major``, ``other`` INTEGER items of 0..n-1, distinct, an edge of the graph;
  ``explored`` 0 or 1; ``told_before`` an INTEGER, non-decreasing, at most the tells stored;
  ``rng_state`` TEXT; ``status`` open, told or expired, ``told`` exactly when a tell names the ask;
  ``asked_at`` a number, ``closed_at`` NULL exactly while open;
* tells: seq 1, 2, ... without a gap; ``ask_id`` a ticket asked, told once, its status ``told``, the
  tell later than the estimate it was asked with (seq > told_before); ``wins``, ``ties``, ``m``
  INTEGERs with m >= 1, m <= M, wins, ties >= 0 and wins + ties <= m; ``told_at`` a number;
* estimate: one row after the last tell (seq = the tells stored), theta a finite (n, d) float64;
  checkpoint (format 2): one row once something is told, at most ``checkpoint_stride`` tells old.

A store that fails is refused with :class:`study.online.store.StoreError` naming the file and the
first offending row; nothing is written before it passes.  :class:`Ledger` keeps the verified asks
and tells in memory and verifies what other processes add as it is read.
"""
from __future__ import annotations

import re
import sqlite3

import numpy as np

from ..core import _validate as check
from .config import Config
from .snapshot import SnapshotError, read_header
from . import judges
from .store import CHECKPOINTED, FORMAT, META_KEYS, SCHEMAS, StoreError, checkpoint_stride, unpack

STATUS = ("open", "told", "expired")
_EXPECTED: dict = {}


def refuse(path, where: str, what: str) -> StoreError:
    return StoreError(f"{path}: refused, {where}: {what}")


def expected_objects(fmt: str) -> dict:
    """{name: (type, table, sql)} of the schema objects of format ``fmt`` (autoindexes included)."""
    if fmt not in _EXPECTED:
        conn = sqlite3.connect(":memory:")
        for statement in SCHEMAS[fmt]:
            conn.execute(statement)
        _EXPECTED[fmt] = {name: (kind, table, sql) for kind, name, table, sql in
                          conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}
        conn.close()
    return _EXPECTED[fmt]


def stored_objects(conn) -> dict:
    return {name: (kind, table, sql) for kind, name, table, sql in
            conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}


def check_schema(path, objects: dict, fmt: str) -> None:
    """The schema of ``fmt`` exactly, or StoreError naming the first object that differs."""
    expected = expected_objects(fmt)
    for name, (kind, table, sql) in sorted(objects.items()):
        if name not in expected:
            on = f" on {table}" if table != name else ""
            raise refuse(path, f"{kind} {name!r}{on}", f"not part of a {fmt} store (no other table, view, trigger "
                                                       "or index may be added)")
        want = expected[name]
        if kind != want[0]:
            raise refuse(path, f"{name!r}", f"is a {kind}, not the {want[0]} this project writes")
        if (table, sql) != want[1:]:
            raise refuse(path, f"{kind} {name!r}", f"declared otherwise than this project declares it "
                                                   f"({' '.join(str(sql).split())[:120]!r})")
    for name, (kind, _, _) in sorted(expected.items()):
        if name not in objects:
            raise refuse(path, f"{kind} {name!r}", "missing")


_HEX = re.compile(r"[0-9a-f]{32}")
_SHA = re.compile(r"[0-9a-f]{64}|None")


def read_meta(conn, path, objects: dict):
    """(format, meta dict, config) of an initialised store, its schema and meta rows verified."""
    if "meta" not in objects:
        raise StoreError(f"{path}: an SQLite file, but not a ranker store (no meta table)")
    if objects["meta"] != expected_objects(FORMAT)["meta"]:
        raise refuse(path, "table 'meta'", "declared otherwise than this project declares it")
    rows = conn.execute("SELECT key, value, typeof(value) FROM meta ORDER BY key").fetchall()
    meta = {}
    for key, value, kind in rows:
        if kind != "text":
            raise refuse(path, f"meta key {key!r}", f"its value is a {kind.upper()}, not TEXT")
        meta[key] = value
    fmt = meta.get("format")
    if fmt not in SCHEMAS:
        raise StoreError(f"{path}: format {fmt!r}; this version of study reads {', '.join(map(repr, SCHEMAS))}")
    check_schema(path, objects, fmt)
    unknown, missing = sorted(set(meta) - META_KEYS[fmt]), sorted(META_KEYS[fmt] - set(meta))
    if unknown:
        raise refuse(path, f"meta key {unknown[0]!r}", f"not a key of a {fmt} store")
    if missing:
        raise refuse(path, f"meta key {missing[0]!r}", "missing")
    if fmt in CHECKPOINTED and not _HEX.fullmatch(meta["store_id"]):
        raise refuse(path, "meta key 'store_id'", f"{meta['store_id'][:40]!r} is not 32 hexadecimal digits")
    if not _SHA.fullmatch(meta["policy_sha256"]):
        raise refuse(path, "meta key 'policy_sha256'", "not a SHA-256")
    try:
        config = Config.from_json(meta["arguments"])
    except (ValueError, TypeError) as exc:
        raise refuse(path, "meta key 'arguments'", str(exc)) from None
    return fmt, meta, config


def _first(path, table: str, ids, checks) -> None:
    """Raise for the lowest row failing any of ``checks`` ([(bad mask, message(k))], in order)."""
    best = None
    for bad, message in checks:
        hits = np.flatnonzero(bad)
        if hits.size and (best is None or hits[0] < best[0]):
            best = (int(hits[0]), message)
    if best is not None:
        k, message = best
        raise refuse(path, f"{table} row {int(ids[k])}", message(k))


_ASK_TYPES = ("x is not a BLOB", "major is not an INTEGER", "other is not an INTEGER", "explored is not an INTEGER",
              "told_before is not an INTEGER", "rng_state is not TEXT", "status is not TEXT",
              "asked_at is not a number", "closed_at is not a number (or NULL while open)")
_TELL_TYPES = ("ask_id is not an INTEGER", "wins is not an INTEGER", "ties is not an INTEGER", "m is not an INTEGER",
               "told_at is not a number")


class Ledger:
    """The verified asks and tells of a store, in memory (append-only), read from it in order."""

    def __init__(self, path, config: Config, judged: bool = False):
        self.path = path
        self.judged = judged  # a format-3 store: told_by rows (judge, side) are read with the tells
        d, T = config.dim, config.T
        self.set_config(config)
        size = min(T, 1024)  # grown as rows come (a horizon of millions costs nothing up front)
        self.X = np.zeros((size, d))
        self.major, self.other = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
        self.explored = np.zeros(size, dtype=bool)
        self.told_before = np.zeros(size, dtype=np.int64)
        self.tell_ask = np.zeros(size, dtype=np.int64)  # ask id of tell k + 1
        self.wins, self.ties, self.m = (np.zeros(size, dtype=np.int64) for _ in range(3))
        self.judge = np.zeros(size, dtype=np.int64)  # judge id of tell k + 1 (0: unknown)
        self.side = np.full(size, -1, dtype=np.int64)  # side shown first (0 major, 1 other; -1: not said)
        self.told_by_seen = 0  # the last told_by row read
        self.told_at = np.zeros(size + 1, dtype=np.int64)  # seq that told ask id (0: none)
        self.n_asks = self.n_tells = 0

    def set_config(self, config: Config) -> None:
        """The arguments (and the comparison graph) the next rows are checked against: a raise of
        the horizon, an item added or retired (events only append)."""
        self.config, n = config, config.n_items
        self.adjacency = np.zeros((n, n), dtype=bool)
        edges = config.edges_array()
        self.adjacency[edges[:, 0], edges[:, 1]] = self.adjacency[edges[:, 1], edges[:, 0]] = True

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` asks (and tells): the arrays doubled as needed, up to the horizon."""
        size = len(self.major)
        if rows <= size:
            return
        limit = self.config.limit  # None: an open horizon
        size = max(rows, 2 * size) if limit is None else min(max(rows, 2 * size), limit)
        for name in ("X", "major", "other", "explored", "told_before", "tell_ask", "wins", "ties", "m", "judge", "side"):
            old = getattr(self, name)
            new = np.full((size,) + old.shape[1:], -1 if name == "side" else 0, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        told_at = np.zeros(size + 1, dtype=np.int64)
        told_at[: len(self.told_at)] = self.told_at
        self.told_at = told_at

    # --- asks ----------------------------------------------------------------------------------
    def read_asks(self, conn) -> np.ndarray:
        """Verify and keep the asks added since the last read; returns their status codes (0 open,
        1 told, 2 expired) as read now."""
        c = self.config
        n, d = c.n_items, c.dim
        rows = conn.execute(
            "SELECT id, CASE WHEN typeof(x) = 'blob' THEN length(x) ELSE -1 END, "
            "CASE WHEN typeof(x) = 'blob' AND length(x) = ? THEN x ELSE NULL END, "
            "CASE WHEN typeof(major) = 'integer' THEN major ELSE 0 END, "
            "CASE WHEN typeof(other) = 'integer' THEN other ELSE 0 END, "
            "CASE WHEN typeof(explored) = 'integer' THEN explored ELSE 0 END, "
            "CASE WHEN typeof(told_before) = 'integer' THEN told_before ELSE 0 END, "
            "CASE status WHEN 'open' THEN 0 WHEN 'told' THEN 1 WHEN 'expired' THEN 2 ELSE 3 END, "
            "(typeof(x) != 'blob') + 2 * (typeof(major) != 'integer') + 4 * (typeof(other) != 'integer') "
            "+ 8 * (typeof(explored) != 'integer') + 16 * (typeof(told_before) != 'integer') "
            "+ 32 * (typeof(rng_state) != 'text') + 64 * (typeof(status) != 'text') "
            "+ 128 * (typeof(asked_at) NOT IN ('real', 'integer')) "
            "+ 256 * (CASE WHEN status = 'open' THEN typeof(closed_at) != 'null' "
            "ELSE typeof(closed_at) NOT IN ('real', 'integer') END) "
            "FROM asks WHERE id > ? ORDER BY id", (8 * d, self.n_asks)).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64)
        cols = list(zip(*rows))
        ids = np.array(cols[0], dtype=np.int64)
        length = np.array(cols[1], dtype=np.int64)
        empty = bytes(8 * d)
        X = np.frombuffer(b"".join(empty if b is None else b for b in cols[2]), dtype="<f8").reshape(len(rows), d)
        major, other, explored, told_before, status, types = (np.array(col, dtype=np.int64) for col in cols[3:])
        first = self.n_asks + 1
        expected = np.arange(first, first + len(rows))
        finite = np.isfinite(X).all(axis=1)
        big = np.abs(np.where(np.isfinite(X), X, 0.0)).max(axis=1, initial=0.0) > check.MAX_ABS_CONTEXT
        in_range = (major >= 0) & (major < n) & (other >= 0) & (other < n)
        edge = np.zeros(len(rows), dtype=bool)
        edge[in_range] = self.adjacency[major[in_range], other[in_range]]
        previous = np.r_[self.told_before[self.n_asks - 1] if self.n_asks else 0, told_before[:-1]]
        checks = [(ids != expected, lambda k: f"ticket ids jump from {ids[k - 1] if k else first - 1} to {ids[k]}"),
                  (ids > (c.limit or check.MAX_INTEGER), lambda k: f"ticket {ids[k]} is beyond the horizon T = {c.limit}")]
        checks += [((types >> bit) & 1 == 1, lambda k, m=message: m) for bit, message in enumerate(_ASK_TYPES)]
        retired = np.full(n, check.MAX_INTEGER, dtype=np.int64)  # the first ask without each item
        for step, item in c.retired:
            retired[item] = step
        joined = np.zeros(n, dtype=np.int64)  # the first ask that may name each item
        for step, _, item in c.joined:
            joined[item] = step
        checks += [
            ((length != 8 * d) & (length >= 0), lambda k: f"x has {length[k]} bytes, not 8 d = {8 * d}"),
            (~finite, lambda k: "x holds NaN or inf"),
            (big, lambda k: f"x has an entry beyond +-{check.MAX_ABS_CONTEXT:g}"),
            ((major < 0) | (major >= n), lambda k: f"major = {major[k]} is not an item (0..{n - 1})"),
            ((other < 0) | (other >= n), lambda k: f"other = {other[k]} is not an item (0..{n - 1})"),
            (major == other, lambda k: f"major = other = {major[k]}: an item compared with itself"),
            (in_range & (major != other) & ~edge,
             lambda k: f"({major[k]}, {other[k]}) is not an edge of the comparison graph"),
            (in_range & ((ids >= retired[np.clip(major, 0, n - 1)]) | (ids >= retired[np.clip(other, 0, n - 1)])),
             lambda k: f"({major[k]}, {other[k]}) names an item retired before it (study.online.items)"),
            (in_range & ((ids < joined[np.clip(major, 0, n - 1)]) | (ids < joined[np.clip(other, 0, n - 1)])),
             lambda k: f"({major[k]}, {other[k]}) names an item added after it (study.online.items)"),
            ((explored != 0) & (explored != 1), lambda k: f"explored = {explored[k]} is not 0 or 1"),
            (told_before < previous, lambda k: f"told_before = {told_before[k]} is less than the previous ask's "
                                               f"{previous[k]}"),
            (status == 3, lambda k: "status is not open, told or expired"),
        ]
        _first(self.path, "asks", ids, checks)
        k0, k1 = self.n_asks, self.n_asks + len(rows)
        self._reserve(k1)
        self.X[k0:k1], self.major[k0:k1], self.other[k0:k1] = X, major, other
        self.explored[k0:k1], self.told_before[k0:k1] = explored.astype(bool), told_before
        self.n_asks = k1
        return status

    # --- tells ---------------------------------------------------------------------------------
    def read_tells(self, conn) -> int:
        """Verify and keep the tells added since the last read (their asks read first); returns
        how many were added."""
        c = self.config
        rows = conn.execute(
            "SELECT seq, CASE WHEN typeof(ask_id) = 'integer' THEN ask_id ELSE 0 END, "
            "CASE WHEN typeof(wins) = 'integer' THEN wins ELSE 0 END, "
            "CASE WHEN typeof(ties) = 'integer' THEN ties ELSE 0 END, "
            "CASE WHEN typeof(m) = 'integer' THEN m ELSE 0 END, "
            "coalesce((SELECT CASE status WHEN 'told' THEN 1 ELSE 0 END FROM asks WHERE asks.id = tells.ask_id), 0), "
            "(typeof(ask_id) != 'integer') + 2 * (typeof(wins) != 'integer') + 4 * (typeof(ties) != 'integer') "
            "+ 8 * (typeof(m) != 'integer') + 16 * (typeof(told_at) NOT IN ('real', 'integer')) "
            "FROM tells WHERE seq > ? ORDER BY seq", (self.n_tells,)).fetchall()
        if not rows:
            return 0
        cols = list(zip(*rows))
        seq, ask, wins, ties, m, told, types = (np.array(col, dtype=np.int64) for col in cols)
        first = self.n_tells + 1
        known = (ask >= 1) & (ask <= self.n_asks)
        index = np.where(known, ask, 0)
        earlier = self.told_at[index]  # told before this read
        _, first_in_batch = np.unique(index, return_index=True)
        repeated = np.ones(len(rows), dtype=bool)
        repeated[first_in_batch] = False
        where = {int(a): int(s) for a, s in zip(index[::-1], seq[::-1])}  # first seq of each ask in this read
        asked_with = np.where(known, self.told_before[np.maximum(index - 1, 0)], 0)
        checks = [(seq != np.arange(first, first + len(rows)),
                   lambda k: f"seq jumps from {seq[k - 1] if k else first - 1} to {seq[k]}")]
        checks += [((types >> bit) & 1 == 1, lambda k, msg=message: msg) for bit, message in enumerate(_TELL_TYPES)]
        checks += [
            (~known, lambda k: f"ask_id = {ask[k]} names no ticket asked (1..{self.n_asks})"),
            (known & (earlier > 0), lambda k: f"ticket {ask[k]} is told a second time (first as seq {earlier[k]})"),
            (known & repeated, lambda k: f"ticket {ask[k]} is told a second time (first as seq {where[int(ask[k])]})"),
            (known & (told == 0), lambda k: f"its ticket {ask[k]} is not marked told"),
            (m < 1, lambda k: f"m = {m[k]} is less than 1"),
            (m > c.M, lambda k: f"m = {m[k]} exceeds M = {c.M}, the comparisons per ask of this ranker"),
            ((wins < 0) | (ties < 0), lambda k: f"wins = {wins[k]} or ties = {ties[k]} is negative"),
            (wins + ties > m, lambda k: f"wins + ties = {wins[k]} + {ties[k]} exceeds m = {m[k]}"),
            (known & (seq <= asked_with), lambda k: f"told as seq {seq[k]}, but its ticket {ask[k]} was asked when "
                                                    f"{asked_with[k]} outcomes were told"),
        ]
        _first(self.path, "tells", seq, checks)
        k0, k1 = self.n_tells, self.n_tells + len(rows)
        self._reserve(k1)
        self.tell_ask[k0:k1], self.wins[k0:k1], self.ties[k0:k1], self.m[k0:k1] = ask, wins, ties, m
        self.told_at[ask] = seq
        self.n_tells = k1
        return len(rows)

    def add_ask(self, ask_id, x, major, other, explored, told_before) -> None:
        """An ask this process wrote (and committed): known valid, kept without reading it back."""
        k = ask_id - 1
        assert k == self.n_asks, (ask_id, self.n_asks)
        self._reserve(ask_id)
        self.X[k], self.major[k], self.other[k], self.explored[k], self.told_before[k] = (x, major, other, explored,
                                                                                          told_before)
        self.n_asks = ask_id

    def add_tell(self, seq, ask_id, wins, ties, m, judge=None, side=None) -> None:
        """A tell this process wrote (and committed), with its judge's id and side when known."""
        k = seq - 1
        assert k == self.n_tells, (seq, self.n_tells)
        self._reserve(seq)
        self.tell_ask[k], self.wins[k], self.ties[k], self.m[k] = ask_id, wins, ties, m
        self.judge[k], self.side[k] = (0 if judge is None else judge), (-1 if side is None else side)
        if judge is not None or side is not None:
            self.told_by_seen = seq
        self.told_at[ask_id] = seq
        self.n_tells = seq

    def read(self, conn) -> None:
        """Everything added since the last read (asks, then tells), verified."""
        self.read_asks(conn)
        self.read_tells(conn)
        if self.judged:
            judges.read_told_by(conn, self.path, self)

    def check_statuses(self, status: np.ndarray) -> None:
        """On opening: an ask is told exactly when a tell names it; told_before never exceeds the tells."""
        ids = np.arange(1, self.n_asks + 1)
        told = self.told_at[1: self.n_asks + 1] > 0
        before = self.told_before[: self.n_asks]
        _first(self.path, "asks", ids, [
            ((status == 1) & ~told, lambda k: f"status told, but no tell names ticket {k + 1}"),
            ((status != 1) & told, lambda k: f"status {STATUS[status[k]]}, but tell seq {self.told_at[k + 1]} "
                                             f"names ticket {k + 1}"),
            (before > self.n_tells, lambda k: f"told_before = {before[k]}, but only {self.n_tells} outcomes are told"),
        ])

    def row(self, k: int):
        """(major, other, x, wins, ties, m) of tell k (0-based)."""
        a = self.tell_ask[k] - 1
        return int(self.major[a]), int(self.other[a]), self.X[a], int(self.wins[k]), int(self.ties[k]), int(self.m[k])


def read_estimate(conn, path, config: Config, told: int):
    """The stored theta after the last tell (None while nothing is told), verified."""
    rows = conn.execute("SELECT id, seq, typeof(seq), theta, typeof(theta) FROM estimate").fetchall()
    n, d = config.n_items, config.dim
    if not rows:
        if told:
            raise refuse(path, "estimate", f"missing, with {told} outcomes told")
        return None
    (row_id, seq, seq_type, theta, theta_type), = rows
    if not told:
        raise refuse(path, "estimate row", "present while no outcome is told")
    if seq_type != "integer" or seq != told:
        raise refuse(path, "estimate row", f"seq = {seq!r}, but {told} outcomes are told (it must be the estimate "
                                           "after the last one)")
    if theta_type != "blob" or len(theta) != 8 * n * d:
        raise refuse(path, "estimate row", f"theta is not {n} x {d} float64 values")
    theta = unpack(theta, (n, d))
    if not np.isfinite(theta).all():
        raise refuse(path, "estimate row", "theta holds NaN or inf")
    return theta


def read_checkpoint(conn, path, told: int):
    """(seq, blob) of the stored checkpoint ((0, None) while nothing is told), verified but not decoded."""
    rows = conn.execute("SELECT id, seq, typeof(seq), state, typeof(state) FROM checkpoint").fetchall()
    if not rows:
        if told:
            raise refuse(path, "checkpoint", f"missing, with {told} outcomes told")
        return 0, None
    (row_id, seq, seq_type, state, state_type), = rows
    if not told:
        raise refuse(path, "checkpoint row", "present while no outcome is told")
    if seq_type != "integer" or state_type != "blob" or not 1 <= seq <= told:
        raise refuse(path, "checkpoint row", f"seq = {seq!r} is not one of the {told} tells, or its state is not a "
                                             "BLOB")
    try:
        read_header(state)
    except SnapshotError as exc:
        raise refuse(path, "checkpoint row", str(exc)) from None
    if told - seq >= checkpoint_stride(len(state)):
        raise refuse(path, "checkpoint row", f"it is of tell {seq} of {told}: older than a checkpoint of "
                                             f"{len(state)} bytes may be ({checkpoint_stride(len(state))} tells)")
    return seq, state


class Opened:
    """A store read and verified: its format, meta, config, ledger, stored theta and checkpoint."""

    def __init__(self, fmt, meta, config, ledger, theta, checkpoint, schema_version):
        self.format, self.meta, self.config, self.ledger = fmt, meta, config, ledger
        self.theta, self.checkpoint, self.schema_version = theta, checkpoint, schema_version

    @property
    def store_id(self):
        return self.meta.get("store_id")


def open_store(conn, path, *, quick_check: bool = True):
    """Verify an initialised store inside the caller's read transaction: an :class:`Opened`, or
    None for a store not initialised yet (no tables)."""
    objects = stored_objects(conn)
    if not objects:
        return None
    fmt, meta, config = read_meta(conn, path, objects)
    ledger = Ledger(path, config, judged=fmt == FORMAT)
    status = ledger.read_asks(conn)
    ledger.read_tells(conn)
    ledger.check_statuses(status)
    if fmt == FORMAT:
        judges.check_judges(conn, path)
        judges.read_told_by(conn, path, ledger)
    theta = read_estimate(conn, path, config, ledger.n_tells)
    checkpoint = read_checkpoint(conn, path, ledger.n_tells) if fmt in CHECKPOINTED else (0, None)
    if quick_check:  # after the rows, whose checks name the row (SQLite's names the table)
        check_integrity(conn, path, "quick_check")
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    return Opened(fmt, meta, config, ledger, theta, checkpoint, version)


def check_integrity(conn, path, pragma: str = "integrity_check") -> None:
    """SQLite's own check of the file (pages, indexes, constraints)."""
    problems = [row[0] for row in conn.execute(f"PRAGMA {pragma}(5)")]
    if problems != ["ok"]:
        raise StoreError(f"{path}: the SQLite file is damaged: {'; '.join(map(str, problems))[:300]}")


def recheck_schema(conn, path, opened: Opened) -> bool:
    """Between transactions: if the schema changed since it was verified, verify it again.  True
    when another process upgraded the store from format 1 or 2 (the caller verifies it anew)."""
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    if version == opened.schema_version:
        return False
    fmt, meta, config = read_meta(conn, path, stored_objects(conn))
    if fmt == FORMAT and opened.format != FORMAT and config == opened.config:  # upgraded by another process
        return True
    if fmt != opened.format or meta.get("store_id") != opened.store_id or config != opened.config:
        raise StoreError(f"{path}: the store was replaced while open (format {fmt}, store id {meta.get('store_id')})")
    opened.schema_version = version
    return False
