"""A ranker's store: one SQLite file (standard library ``sqlite3``), written in one transaction per
ask, tell or expiry.

Durability.  The file is in WAL mode with ``synchronous=FULL``: a transaction that has returned is
on disk, so a ``kill -9`` of the process (or a power cut) loses nothing that was told; a
transaction cut short leaves no trace.  Concurrency.  Every write starts with ``BEGIN IMMEDIATE``
(the database's write lock, waited for up to ``timeout`` seconds), so that writers from several
processes are serialised and each sees the others' committed rows first; readers (``show``) never
block writers.  WAL needs a local file system (not NFS).

Tables
------
``meta(key, value)``       ``format``, ``arguments`` (the :class:`study.online.config.Config` as JSON),
                           ``created`` (UTC), ``study_version``, ``policy_sha256``.
``asks``                   one row per handed-out pair: ``id`` (= the ask index t, 1-based, the
                           ticket), the context ``x`` (little-endian float64), ``major``, ``other``,
                           ``explored``, ``told_before`` (rows in the estimate it was chosen with),
                           ``rng_state`` (the policy generator after this ask, JSON), ``status``
                           (open, told, expired), ``asked_at``, ``closed_at`` (Unix seconds).
``tells``                  one row per told outcome: ``seq`` (its place in the estimate, 1-based),
                           ``ask_id``, ``wins`` (won outright by ``other``), ``ties``, ``m``, ``told_at``.
``estimate``               the estimate after the last tell: ``seq``, ``theta`` (float64, (n, d)).
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path

import numpy as np

FORMAT = "study.online/1"
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE asks (
    id INTEGER PRIMARY KEY CHECK (id >= 1),
    x BLOB NOT NULL,
    major INTEGER NOT NULL,
    other INTEGER NOT NULL,
    explored INTEGER NOT NULL,
    told_before INTEGER NOT NULL,
    rng_state TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'told', 'expired')),
    asked_at REAL NOT NULL,
    closed_at REAL
);
CREATE TABLE tells (
    seq INTEGER PRIMARY KEY CHECK (seq >= 1),
    ask_id INTEGER NOT NULL UNIQUE REFERENCES asks(id),
    wins INTEGER NOT NULL,
    ties INTEGER NOT NULL,
    m INTEGER NOT NULL,
    told_at REAL NOT NULL,
    CHECK (m >= 1 AND wins >= 0 AND ties >= 0 AND wins + ties <= m)
);
CREATE TABLE estimate (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, theta BLOB NOT NULL);
CREATE INDEX asks_open ON asks(status) WHERE status = 'open';
"""
TIMEOUT = 60.0  # seconds a writer waits for another's transaction


def pack(array) -> bytes:
    return np.ascontiguousarray(array, dtype="<f8").tobytes()


def unpack(blob: bytes, shape=None) -> np.ndarray:
    array = np.frombuffer(blob, dtype="<f8").astype(float)
    return array if shape is None else array.reshape(shape)


class StoreError(ValueError):
    """The file is not a ranker store (or not one this version reads)."""


class Store:
    """The SQLite file of one ranker (see the module docstring)."""

    def __init__(self, path, *, create: bool, readonly: bool = False, timeout: float = TIMEOUT):
        self.path = Path(path)
        exists = self.path.exists()
        if not exists and not create:
            raise StoreError(f"{self.path}: no such ranker store")
        if exists and self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a ranker store")
        if readonly:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self.conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        else:
            self.conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        try:
            if not readonly:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(f"{self.path}: not a ranker store ({exc})") from None

    def close(self) -> None:
        self.conn.close()

    # --- transactions --------------------------------------------------------------------------
    @contextmanager
    def write(self):
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on any exception)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextmanager
    def read(self):
        """One consistent snapshot (a read transaction)."""
        self.conn.execute("BEGIN")
        try:
            yield self.conn
        finally:
            self.conn.execute("COMMIT")

    # --- meta ----------------------------------------------------------------------------------
    def initialised(self, conn) -> bool:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return False
        if "meta" not in tables:
            raise StoreError(f"{self.path}: an SQLite file, but not a ranker store (no meta table)")
        return True

    def meta(self, conn) -> dict:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        if meta.get("format") != FORMAT:
            raise StoreError(f"{self.path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        return meta

    def initialise(self, conn, meta: dict) -> None:
        for statement in SCHEMA.split(";"):  # not executescript: it would commit the open transaction
            if statement.strip():
                conn.execute(statement)
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [("format", FORMAT), *meta.items()])

    # --- reads ---------------------------------------------------------------------------------
    @staticmethod
    def last_ask(conn) -> int:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM asks").fetchone()[0])

    @staticmethod
    def last_tell(conn) -> int:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM tells").fetchone()[0])

    @staticmethod
    def ask(conn, ask_id: int):
        return conn.execute("SELECT id, x, major, other, explored, told_before, status, asked_at, closed_at "
                            "FROM asks WHERE id = ?", (ask_id,)).fetchone()

    @staticmethod
    def tells_after(conn, seq: int):
        """(seq, ask_id, wins, ties, m, x, major, other, explored) of the tells after ``seq``, in order."""
        return conn.execute("SELECT t.seq, t.ask_id, t.wins, t.ties, t.m, a.x, a.major, a.other, a.explored "
                            "FROM tells t JOIN asks a ON a.id = t.ask_id WHERE t.seq > ? ORDER BY t.seq",
                            (seq,)).fetchall()

    @staticmethod
    def counts(conn) -> dict:
        counts = {"open": 0, "told": 0, "expired": 0}
        counts.update(dict(conn.execute("SELECT status, count(*) FROM asks GROUP BY status")))
        counts["asked"] = sum(counts[k] for k in ("open", "told", "expired"))
        totals = conn.execute("SELECT coalesce(sum(m), 0), coalesce(sum(ties), 0) FROM tells").fetchone()
        counts["comparisons"], counts["ties"] = int(totals[0]), int(totals[1])
        return counts

    @staticmethod
    def stored_estimate(conn):
        row = conn.execute("SELECT seq, theta FROM estimate WHERE id = 1").fetchone()
        return (0, None) if row is None else (int(row[0]), row[1])
