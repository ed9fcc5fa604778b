"""Judges with names: a token each (shown once, stored as its SHA-256, revocable), and per tell
the judge who told it and the side shown first.

A store of format 3 (:mod:`study.online.store`) has a ``judges`` table and a ``told_by`` table.
:func:`add` writes a judge with a fresh random token (``secrets.token_urlsafe(32)``: 256 bits) and
returns the token -- the only time it exists outside the judge's hands: the store keeps its
SHA-256 (a random 256-bit token needs no salt or slow hash: it cannot be guessed from its hash).
:func:`revoke` closes a judge's token (its tells stay, with its name); :func:`who` says whose a
token is (None for an unknown or revoked one).  The store's shared token (the admin's, the
server's ``TOKEN``) tells as no judge: its tells' judge is unknown, as is every tell of a store
written before format 3.

Clustering.  A judge's verdicts are correlated (one person's taste, one model's bias), so the
intervals of a store with named judges are judge-clustered by default (``se="auto"``, :func:`resolve_se`):
the cluster-robust sandwich of :mod:`study.core.batch` (each judge a unit), computed at the
ranker's estimate by :func:`study.debias`.  A tell of no named judge is a cluster of its own (an
independent unit, as in the per-comparison sandwich).
"""
from __future__ import annotations

import hashlib
import re
import secrets
import time

import numpy as np

from .store import FORMAT, StoreError

SIDES = {"major": 0, "a": 0, "model_a": 0, "other": 1, "b": 1, "model_b": 1}
SIDE_NAMES = ("a", "b")  # as exported: model_a (the ticket's major item) or model_b (its other) shown first
MAX_NAME = 200
_NAME = re.compile(r"[^\x00-\x1f\x7f]+")
_SHA = re.compile(r"[0-9a-f]{64}")
SE_CHOICES = ("auto", "model", "sandwich", "cluster")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_name(name) -> str:
    """A judge's name: text of 1 to 200 characters without control characters, not surrounded by
    spaces, not starting with ``#`` (an export's name for a tell of no named judge)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.strip() != name or len(name) > MAX_NAME \
            or name.startswith("#"):
        raise ValueError(f"a judge's name must be 1 to {MAX_NAME} printable characters without leading or trailing "
                         f"spaces, not starting with '#', got {name!r}"[:300])
    return name


def check_side(side):
    """0 (the ticket's major item shown first), 1 (its other), or None (not said)."""
    if side is None:
        return None
    if isinstance(side, str) and side.lower() in SIDES:
        return SIDES[side.lower()]
    if isinstance(side, (int, np.integer)) and not isinstance(side, bool) and int(side) in (0, 1):
        return int(side)
    raise ValueError(f"side must be 'major' (or 'a', 0: the ticket's major item was shown first), 'other' (or 'b', "
                     f"1) or None, got {side!r}"[:300])


def _need_format(ranker) -> None:
    if ranker._opened.format != FORMAT:
        raise ValueError(f"{ranker.path}: a store of format {ranker._opened.format} has no judges; open it writable "
                         "once (it is upgraded in place) to name judges")


def add(ranker, name: str) -> str:
    """Name a judge of ``ranker``'s store (writable); returns its token, shown this once."""
    name = check_name(name)
    ranker._writable()
    _need_format(ranker)
    token = secrets.token_urlsafe(32)

    def operation(conn, state):
        row = conn.execute("SELECT revoked FROM judges WHERE name = ?", (name,)).fetchone()
        if row is not None:
            raise ValueError(f"a judge named {name!r} already exists" + (" (revoked)" if row[0] is not None else "")
                             + "; choose another name")
        conn.execute("INSERT INTO judges (name, token_sha256, created, revoked) VALUES (?, ?, ?, NULL)",
                     (name, token_hash(token), time.time()))

    ranker._guarded(operation)
    return token


def revoke(ranker, name: str) -> None:
    """Refuse the token of judge ``name`` from now on (its tells stay, with its name)."""
    name = check_name(name)
    ranker._writable()
    _need_format(ranker)

    def operation(conn, state):
        row = conn.execute("SELECT revoked FROM judges WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ValueError(f"no judge named {name!r}")
        if row[0] is not None:
            raise ValueError(f"judge {name!r} is already revoked")
        conn.execute("UPDATE judges SET revoked = ? WHERE name = ?", (time.time(), name))

    ranker._guarded(operation)


def listing(ranker) -> list:
    """The judges: dicts of name, created, revoked (Unix seconds or None) and tells (how many told)."""
    if ranker._opened.format != FORMAT:
        return []
    with ranker._store.read() as conn:
        rows = conn.execute("SELECT j.name, j.created, j.revoked, (SELECT count(*) FROM told_by t WHERE t.judge = "
                            "j.id) FROM judges j ORDER BY j.id").fetchall()
    return [{"name": r[0], "created": float(r[1]), "revoked": None if r[2] is None else float(r[2]), "tells": int(r[3])}
            for r in rows]


def who(ranker, token) -> str | None:
    """The name of the judge whose token ``token`` is, or None (unknown or revoked)."""
    if not isinstance(token, str) or not token or ranker._opened.format != FORMAT:
        return None
    with ranker._store.read() as conn:
        row = conn.execute("SELECT name FROM judges WHERE token_sha256 = ? AND revoked IS NULL",
                           (token_hash(token),)).fetchone()
    return None if row is None else row[0]


def judge_id(conn, path, name) -> int:
    """The id of the judge ``name``, inside a write transaction; ValueError if unknown or revoked."""
    row = conn.execute("SELECT id, revoked FROM judges WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise ValueError(f"judge {name!r} is not a judge of {path} (add it: python -m study.online judges add)")
    if row[1] is not None:
        raise ValueError(f"judge {name!r} was revoked; its tells are refused")
    return int(row[0])


def ids(conn, path, fmt, batch) -> dict:
    """{name: id} of the judges a batch of outcomes names (inside the write transaction), every one
    a judge of the store and not revoked; a store of format 2 (read-only) takes no judge, side or
    both-bad ties."""
    if fmt != FORMAT and any(name is not None or side is not None or bothbad for *_, name, side, bothbad in batch):
        raise ValueError(f"{path}: a store of format {fmt} records no judge, side or both-bad ties")
    return {name: judge_id(conn, path, name) for *_, name, _, _ in batch if name is not None}


def names(conn) -> dict:
    """{id: name} of every judge (revoked included)."""
    return {int(i): n for i, n in conn.execute("SELECT id, name FROM judges")}


# --- verification (a store is verified before it is trusted: study.online.verify) ------------------
def check_judges(conn, path) -> set:
    """Verify the judges rows; returns their ids."""
    rows = conn.execute("SELECT id, typeof(id), name, typeof(name), token_sha256, typeof(token_sha256), "
                        "typeof(created), typeof(revoked) FROM judges ORDER BY id").fetchall()
    for jid, id_type, name, name_type, sha, sha_type, created, revoked in rows:
        where = f"judges row {jid}"
        if id_type != "integer" or name_type != "text" or sha_type != "text":
            raise StoreError(f"{path}: refused, {where}: id, name or token_sha256 of the wrong type")
        try:
            check_name(name)
        except ValueError as exc:
            raise StoreError(f"{path}: refused, {where}: {exc}") from None
        if not _SHA.fullmatch(sha):
            raise StoreError(f"{path}: refused, {where}: token_sha256 is not a SHA-256")
        if created not in ("real", "integer") or revoked not in ("real", "integer", "null"):
            raise StoreError(f"{path}: refused, {where}: created or revoked is not a time")
    return {int(r[0]) for r in rows}


def read_told_by(conn, path, ledger) -> None:
    """Verify and keep the ``told_by`` rows of the tells the ledger read since its last look."""
    rows = conn.execute("SELECT seq, typeof(seq), judge, typeof(judge), side, typeof(side), bothbad, typeof(bothbad) "
                        "FROM told_by WHERE seq > ? ORDER BY seq", (ledger.told_by_seen,)).fetchall()
    if not rows:
        return
    known = check_judges(conn, path)
    for seq, seq_type, judge, judge_type, side, side_type, bothbad, bothbad_type in rows:
        where = f"told_by row {seq}"
        if seq_type != "integer" or not 1 <= seq <= ledger.n_tells:
            raise StoreError(f"{path}: refused, {where}: names no tell (1..{ledger.n_tells})")
        if judge_type not in ("integer", "null") or side_type not in ("integer", "null") or bothbad_type != "integer":
            raise StoreError(f"{path}: refused, {where}: judge or side is not an INTEGER (or NULL), or bothbad not an "
                             "INTEGER")
        if judge is None and side is None and bothbad == 0:
            raise StoreError(f"{path}: refused, {where}: neither a judge, a side nor a tie of kind bothbad")
        if not 0 <= bothbad <= ledger.ties[seq - 1]:
            raise StoreError(f"{path}: refused, {where}: bothbad = {bothbad} is not between 0 and the tell's ties "
                             f"({ledger.ties[seq - 1]})")
        if judge is not None and judge not in known:
            raise StoreError(f"{path}: refused, {where}: judge {judge} is no judge of the store")
        if side is not None and side not in (0, 1):
            raise StoreError(f"{path}: refused, {where}: side = {side} is not 0 or 1")
        ledger.judge[seq - 1] = 0 if judge is None else judge
        ledger.side[seq - 1] = -1 if side is None else side
    ledger.told_by_seen = int(rows[-1][0])


# --- judge-clustered intervals -----------------------------------------------------------------
def enough(ledger, parameters: int) -> bool:
    """Are there clusters enough for a cluster-robust covariance of ``parameters`` = (n - 1) d free
    parameters?  At the fit the clusters' score sums add up to zero, so their meat has rank at most
    G - 1: it needs G - 1 >= (n - 1) d."""
    return len(np.unique(clusters(ledger))) - 1 >= parameters


def resolve_se(se, ledger, parameters: int) -> str:
    """The covariance: ``"auto"`` is ``"cluster"`` where at least two named judges have told and
    the clusters are enough (:func:`enough`), else ``"model"``; ``"cluster"`` needs a named judge
    (ValueError otherwise)."""
    if se not in SE_CHOICES:
        raise ValueError(f"se must be one of {', '.join(SE_CHOICES)}, got {se!r}")
    named = np.unique(ledger.judge[: ledger.n_tells])
    named = named[named > 0]
    if se == "auto":
        return "cluster" if len(named) >= 2 and enough(ledger, parameters) else "model"
    if se == "cluster" and len(named) == 0:
        raise ValueError("se='cluster' clusters by judge, and no named judge has told (add judges: python -m "
                         "study.online judges add STORE NAME, and tell with their tokens)")
    return se


def clusters(ledger) -> np.ndarray:
    """The cluster of each told row: its judge's id, or a cluster of its own for an unknown judge."""
    k = ledger.n_tells
    judge = ledger.judge[:k].astype(np.int64)
    top = int(judge.max(initial=0))
    own = top + 1 + np.arange(k)
    return np.where(judge > 0, judge, own)


def clustered(result, theta, rows, ledger):
    """The judge-clustered version of a debiased result (its ``theta_d`` kept: the same estimate),
    from :func:`study.debias` with ``se="cluster"`` at ``theta_d``."""
    import dataclasses

    from ..core.inference import debias

    n, d = theta.shape
    if not result.available or not enough(ledger, (n - 1) * d):  # too few clusters: no interval
        return dataclasses.replace(result, theta_d=np.full_like(result.theta_d, np.nan), available=False,
                                   condition=np.inf, factor=None, se_method="cluster", _cache={})
    i, j, X, score, m, ties = rows.arrays()
    wins = score - 0.5 * ties  # outright wins (the rows keep a tie as half a win)
    # at theta^d, one Newton step from theta, where the clusters' score sums add up to (nearly) zero
    # as at the maximum-likelihood fit a leaderboard of the same rows uses (at a ridge theta they do
    # not, and with few clusters that moves the SEs by several per cent)
    other = debias(result.theta_d, i, j, X, wins, m, ties=ties, se="cluster", clusters=clusters(ledger))
    if not other.available:
        return dataclasses.replace(result, theta_d=np.full_like(result.theta_d, np.nan), available=False,
                                   condition=np.inf, factor=None, se_method="cluster", _cache={})
    return dataclasses.replace(result, factor=other.factor, se_method="cluster", _cache={})
