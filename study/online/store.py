"""A ranker's store: one SQLite file (standard library ``sqlite3``), written in one transaction per
ask, tell (or batch of tells) or expiry.

Durability.  The file is in WAL mode with ``synchronous=FULL``: a transaction that has returned is
on disk, so a ``kill -9`` of the process (or a power cut) loses nothing that was told; a
transaction cut short leaves no trace.  Concurrency.  Every write starts with ``BEGIN IMMEDIATE``
(the database's write lock, waited for up to ``timeout`` seconds), so that writers from several
processes are serialised and each sees the others' committed rows first; readers (``show``) never
block writers.  WAL needs a local file system (not NFS), and one name per file: SQLite keeps the
log beside the name a file is opened by, so a store with a second hard link is refused.

Failures of the file system (a read-only file or directory, a full disk, an I/O error, a lock held
too long) raise :class:`StoreFileError`, one line naming the file; the transaction is rolled
back, so the store is left as the last complete one.  A file that is not a store this project
writes raises :class:`StoreError` (see :mod:`study.online.verify`).

Tables (format ``study.online/3``)
----------------------------------
``meta(key, value)``       ``format``, ``store_id`` (random, written at creation; every ticket carries
                           it), ``arguments`` (the :class:`study.online.config.Config` as JSON),
                           ``created`` (UTC), ``study_version``, ``policy_sha256``.
``asks``                   one row per handed-out pair: ``id`` (= the ask index t, 1-based, the
                           ticket), the context ``x`` (little-endian float64), ``major``, ``other``,
                           ``explored``, ``told_before`` (rows in the estimate it was chosen with),
                           ``rng_state`` (the policy generator after this ask, JSON), ``status``
                           (open, told, expired), ``asked_at``, ``closed_at`` (Unix seconds).
``tells``                  one row per told outcome: ``seq`` (its place in the estimate, 1-based),
                           ``ask_id``, ``wins`` (won outright by ``other``), ``ties``, ``m``, ``told_at``.
``estimate``               the estimate after the last tell: ``seq``, ``theta`` (float64, (n, d)).
``checkpoint``             the estimator's whole state after tell ``seq`` (:mod:`study.online.snapshot`),
                           rewritten with the tell when due (:data:`CHECKPOINT_BYTES`).

``judges``                 (format 3) one row per named judge: ``id``, ``name``, ``token_sha256`` (the
                           SHA-256 of its token: the token itself is shown once and not stored),
                           ``created``, ``revoked`` (NULL while its token is accepted).
``told_by``                (format 3) the judge (NULL: the shared token), the side shown first (0:
                           the ticket's major item, 1: its other; NULL: not said) and how many of
                           its ties were "both bad" (``bothbad``) of a tell, when any is known; a
                           tell without a row: judge and side unknown, no tie of that kind.

Format ``study.online/2`` is format 3 without ``judges`` and ``told_by``; format ``study.online/1``
(version 0.x) is format 2 without ``checkpoint`` and ``store_id``.  Such stores are verified, then
upgraded in place by their first writable open.
"""
from __future__ import annotations

import math
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import numpy as np

FORMAT = "study.online/3"
FORMAT_2 = "study.online/2"
FORMAT_1 = "study.online/1"
TABLES_1 = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE asks (
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
)""",
    """CREATE TABLE tells (
    seq INTEGER PRIMARY KEY CHECK (seq >= 1),
    ask_id INTEGER NOT NULL UNIQUE REFERENCES asks(id),
    wins INTEGER NOT NULL,
    ties INTEGER NOT NULL,
    m INTEGER NOT NULL,
    told_at REAL NOT NULL,
    CHECK (m >= 1 AND wins >= 0 AND ties >= 0 AND wins + ties <= m)
)""",
    "CREATE TABLE estimate (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, theta BLOB NOT NULL)",
    "CREATE INDEX asks_open ON asks(status) WHERE status = 'open'",
)
CHECKPOINT_TABLE = ("CREATE TABLE checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, "
                    "state BLOB NOT NULL)")
# Format 3: named judges (a token each, stored as its SHA-256) and, per tell, its judge and the side
# shown first, in a table of their own (a tell of the shared token, or of a format-2 store, has no row:
# judge unknown).
JUDGE_TABLES = (
    """CREATE TABLE judges (
    id INTEGER PRIMARY KEY CHECK (id >= 1),
    name TEXT NOT NULL UNIQUE,
    token_sha256 TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    revoked REAL
)""",
    """CREATE TABLE told_by (
    seq INTEGER PRIMARY KEY REFERENCES tells(seq),
    judge INTEGER REFERENCES judges(id),
    side INTEGER CHECK (side IN (0, 1)),
    bothbad INTEGER NOT NULL CHECK (bothbad >= 0)
)""",
)
SCHEMAS = {FORMAT_1: TABLES_1, FORMAT_2: TABLES_1 + (CHECKPOINT_TABLE,),
           FORMAT: TABLES_1 + (CHECKPOINT_TABLE,) + JUDGE_TABLES}
_META_2 = {"format", "store_id", "arguments", "created", "study_version", "policy_sha256"}
META_KEYS = {FORMAT_1: {"format", "arguments", "created", "study_version", "policy_sha256"},
             FORMAT_2: _META_2, FORMAT: _META_2}
CHECKPOINTED = (FORMAT_2, FORMAT)  # the formats with a checkpoint table and a store id
TIMEOUT = 60.0  # seconds a writer waits for another's transaction
# A checkpoint is rewritten once the tells since the last one would have cost this many bytes each:
# every tell at n = 5, d = 10 (14-20 kB); every 15-45 tells at n = 50 (1-3 MB).  Reopening replays
# the tells after it, fewer than ceil(its size / CHECKPOINT_BYTES).
CHECKPOINT_BYTES = 64 * 1024


def checkpoint_stride(size: int) -> int:
    """Tells between checkpoints for one of ``size`` bytes (the replay on reopening is shorter)."""
    return max(1, math.ceil(size / CHECKPOINT_BYTES))


def pack(array) -> bytes:
    return np.ascontiguousarray(array, dtype="<f8").tobytes()


def unpack(blob: bytes, shape=None) -> np.ndarray:
    array = np.frombuffer(blob, dtype="<f8").astype(float)
    return array if shape is None else array.reshape(shape)


class StoreError(ValueError):
    """The file is not a ranker store this version reads: not SQLite, damaged, or failing its
    verification (the message names the file and the first offending row)."""


class StoreFileError(OSError):
    """The file system refused an operation on a store (read-only, full, I/O error, a second hard
    link, a lock held too long); the message is one line naming the file."""


_FILE_ERRORS = {  # SQLite's primary result code -> what it means for the store
    "SQLITE_FULL": "the disk is full",
    "SQLITE_READONLY": "the store cannot be written: the file or its directory is read-only (open it with "
                       "readonly=True, or python -m study.online show, to read it)",
    "SQLITE_CANTOPEN": "cannot open the file: check that its directory exists and that it and the directory are "
                       "readable (and writable, to write)",
    "SQLITE_IOERR": "an input/output error of the file system",
    "SQLITE_BUSY": "another process held the store's lock for longer than the timeout; retry, or open it with a "
                   "larger timeout",
    "SQLITE_LOCKED": "the store is locked by another connection of this process",
    "SQLITE_PERM": "permission denied",
    "SQLITE_AUTH": "permission denied",
    "SQLITE_NOLFS": "the file is too large for this file system",
    "SQLITE_PROTOCOL": "the file's locking protocol failed (is it on a network file system? WAL needs a local one)",
}
_FILE_MESSAGES = {"database or disk is full": "SQLITE_FULL", "readonly database": "SQLITE_READONLY",
                  "unable to open database": "SQLITE_CANTOPEN", "disk i/o error": "SQLITE_IOERR",
                  "database is locked": "SQLITE_BUSY", "database table is locked": "SQLITE_LOCKED"}


def _code(exc: sqlite3.Error) -> str:
    name = getattr(exc, "sqlite_errorname", None)  # Python >= 3.11
    if name:
        return "_".join(name.split("_")[:2])  # the primary code (SQLITE_IOERR_WRITE -> SQLITE_IOERR)
    text = str(exc).lower()
    for fragment, code in _FILE_MESSAGES.items():
        if fragment in text:
            return code
    if "not a database" in text:
        return "SQLITE_NOTADB"
    if "malformed" in text:
        return "SQLITE_CORRUPT"
    return "SQLITE_CONSTRAINT" if isinstance(exc, sqlite3.IntegrityError) else "SQLITE_ERROR"


def describe(path, exc: sqlite3.Error, doing: str = "") -> Exception:
    """The exception, one line naming ``path``, for SQLite's ``exc``: StoreFileError for the file
    system's refusals, StoreError for a file that is not (or no longer) a valid store."""
    code = _code(exc)
    where = f" while {doing}" if doing else ""
    if code in _FILE_ERRORS:
        return StoreFileError(f"{path}: {_FILE_ERRORS[code]}{where} (SQLite: {exc}); the store is left as it was")
    if code == "SQLITE_NOTADB":
        return StoreError(f"{path}: not a ranker store (not an SQLite database)")
    if code == "SQLITE_CORRUPT":
        return StoreError(f"{path}: the SQLite file is damaged ({exc}); python -m study.online verify {path} says more")
    if code == "SQLITE_CONSTRAINT":
        return StoreError(f"{path}: a row breaks the store's constraints{where} ({exc}); was it changed by "
                          "something else than study.online?")
    return StoreFileError(f"{path}: SQLite failed{where}: {exc}")


class Store:
    """The SQLite file of one ranker (see the module docstring).  Opening checks what the file
    system allows (and refuses a second hard link); :meth:`prepare_writes` switches the file to
    WAL, only once the caller has verified it, so that a refused file is never modified."""

    def __init__(self, path, *, create: bool, readonly: bool = False, timeout: float = TIMEOUT):
        self.path = Path(path)
        self.timeout = timeout
        exists = self.path.exists()
        if exists and self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a ranker store")
        if not exists and (readonly or not create):
            raise StoreError(f"{self.path}: no such ranker store")
        real = Path(os.path.realpath(self.path))  # one name for every process: one write-ahead log
        folder = real.parent
        if exists:
            links = os.stat(real).st_nlink
            if links > 1:
                raise StoreFileError(f"{self.path}: the file has {links} hard links; SQLite keeps a store's "
                                     "write-ahead log beside the name it is opened by, so two names could corrupt "
                                     "it: remove the other links (or use a copy) and open it by one name")
            if not readonly and not os.access(real, os.R_OK | os.W_OK):
                raise StoreFileError(f"{self.path}: the file is read-only; open it with readonly=True (or python -m "
                                     "study.online show) to read it, or make it writable")
            if not readonly and not os.access(folder, os.W_OK | os.X_OK):
                raise StoreFileError(f"{self.path}: its directory {folder} is read-only, and SQLite writes its "
                                     "write-ahead log beside the store; open it with readonly=True to read it, or "
                                     "move it")
        elif not folder.is_dir():
            raise StoreFileError(f"{self.path}: cannot create the store: no directory {folder}")
        elif not os.access(folder, os.W_OK | os.X_OK):
            raise StoreFileError(f"{self.path}: cannot create the store: its directory {folder} is read-only")
        try:
            if readonly:
                immutable = (not os.access(folder, os.W_OK)
                             and not Path(f"{real}-wal").exists())  # a read-only directory, no pending log
                uri = f"{real.as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
                self.conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
            else:
                self.conn = sqlite3.connect(str(real), timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise describe(self.path, exc, "opening it") from None
        try:
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            self.conn.close()
            raise describe(self.path, exc, "opening it") from None

    def prepare_writes(self) -> None:
        """WAL and synchronous=FULL (a verified or new store only: the first changes the file)."""
        try:
            mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self.conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise describe(self.path, exc, "switching it to WAL") from None
        if str(mode).lower() != "wal":
            raise StoreFileError(f"{self.path}: SQLite could not switch the store to WAL (journal mode {mode!r}); "
                                 "is it on a local, writable file system?")

    def close(self) -> None:
        self.conn.close()

    # --- transactions --------------------------------------------------------------------------
    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:  # SQLite may have rolled back already (a full disk, an I/O error)
                pass

    @contextmanager
    def _transaction(self, begin: str, doing: str):
        try:
            self.conn.execute(begin)
        except sqlite3.Error as exc:
            raise describe(self.path, exc, doing) from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise describe(self.path, exc, doing) from None
            raise

    def write(self):
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on any exception,
        an SQLite error raised as :class:`StoreFileError` or :class:`StoreError` naming the file)."""
        return self._transaction("BEGIN IMMEDIATE", "writing")

    def read(self):
        """One consistent snapshot (a read transaction)."""
        return self._transaction("BEGIN", "reading")

    # --- creation ------------------------------------------------------------------------------
    @staticmethod
    def create(conn, meta: dict) -> None:
        """The tables of :data:`FORMAT` and the meta rows (inside the caller's transaction)."""
        for statement in SCHEMAS[FORMAT]:  # not executescript: it would commit the open transaction
            conn.execute(statement)
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [("format", FORMAT), *meta.items()])

    @staticmethod
    def upgrade(conn, fmt: str, store_id: str | None = None) -> None:
        """Format ``fmt`` (1 or 2) to :data:`FORMAT`, inside the caller's transaction: from format 1
        the checkpoint table and ``store_id`` (the caller writes the checkpoint), then the judges'
        tables (empty: every earlier tell's judge is unknown)."""
        if fmt == FORMAT_1:
            conn.execute(CHECKPOINT_TABLE)
            conn.execute("INSERT INTO meta (key, value) VALUES ('store_id', ?)", (store_id,))
        for statement in JUDGE_TABLES:
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))

    # --- reads ---------------------------------------------------------------------------------
    @staticmethod
    def last_ask(conn) -> int:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM asks").fetchone()[0])

    @staticmethod
    def ask(conn, ask_id: int):
        return conn.execute("SELECT id, x, major, other, explored, told_before, status, asked_at, closed_at "
                            "FROM asks WHERE id = ?", (ask_id,)).fetchone()

    @staticmethod
    def tell_of(conn, ask_id: int):
        """The stored outcome of ticket ``ask_id`` ({"seq", "wins", "ties", "m"}), or None."""
        row = conn.execute("SELECT seq, wins, ties, m FROM tells WHERE ask_id = ?", (ask_id,)).fetchone()
        return None if row is None else dict(zip(("seq", "wins", "ties", "m"), map(int, row)))

    @staticmethod
    def counts(conn) -> dict:
        counts = {"open": 0, "told": 0, "expired": 0}
        counts.update(dict(conn.execute("SELECT status, count(*) FROM asks GROUP BY status")))
        counts["asked"] = sum(counts[k] for k in ("open", "told", "expired"))
        totals = conn.execute("SELECT coalesce(sum(m), 0), coalesce(sum(ties), 0) FROM tells").fetchone()
        counts["comparisons"], counts["ties"] = int(totals[0]), int(totals[1])
        return counts

    @staticmethod
    def schema_version(conn) -> int:
        return int(conn.execute("PRAGMA schema_version").fetchone()[0])

    @staticmethod
    def checkpoint_info(conn):
        """(seq, size in bytes) of the stored checkpoint, or (0, 0)."""
        row = conn.execute("SELECT seq, length(state) FROM checkpoint WHERE id = 1").fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))
