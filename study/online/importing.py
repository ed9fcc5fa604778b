"""Earlier judgments as evidence: a battle log or judgments file imported into a store as rows of
the likelihood (``python -m study.online import STORE FILE``, :func:`import_judgments`), not as a
prior (:mod:`study.online.prior` sets theta(0) only, and its evidence is in no interval).

The file is read as ``python -m study.leaderboard`` reads it (:func:`study.leaderboard.read.read_battles`:
LMArena battle logs, the project's judgments files, counts such as a ranker's export; ties under
the tie rule, half a win each by default; a ``judge`` column; contexts from a ``context`` column of
vectors, d = 1 without one).  Each row becomes, in one transaction, an ask and its tell, in the
file's order, exactly as a ticket asked and told: the ask (its id the next ask index t, within the
horizon T) records the row's pair (``model_a`` the major item, ``model_b`` the other) and context,
``explored`` 0 and the policy generator's state unchanged (the policy did not choose it); the tell
is applied and refitted as every tell is, so the estimate, its checkpoint and ``verify --replay``
treat it as any other row.  A row of more than M comparisons is told in asks of at most M
(outright wins of ``model_b``, then ties, then wins of ``model_a``: the likelihood is the same).
Judges named in the file join the store's judges, without a usable token (a random one, never shown,
revoked at once); a label starting with ``#`` (an export's tell of no named judge) is no judge.
Refused before anything is written, naming the problem: a model that is not an item of the store,
a pair that is not an edge, a context of another dimension, more rows than the horizon has asks
left, a store of format 2 or older opened read-only.
"""
from __future__ import annotations

import json
import secrets
import time

import numpy as np

from . import judges
from .store import FORMAT, pack


def _rows(battles, M: int):
    """(i, j, x, wins, ties, m, judge label or None) per ask, rows of more than M comparisons split."""
    X = battles.row_contexts()
    labels = battles.judge_labels
    for k in range(battles.rows):
        wins, ties, m = int(battles.wins[k]), int(battles.ties[k]), int(battles.m[k])
        label = None if battles.judges is None else str(labels[int(battles.judges[k])])
        if label is not None and label.startswith("#"):
            label = None
        b_left, tie_left, a_left = wins, ties, m - wins - ties
        while b_left + tie_left + a_left:
            take_b = min(b_left, M)
            take_tie = min(tie_left, M - take_b)
            take_a = min(a_left, M - take_b - take_tie)
            b_left, tie_left, a_left = b_left - take_b, tie_left - take_tie, a_left - take_a
            yield (int(battles.i[k]), int(battles.j[k]), X[k], take_b, take_tie, take_b + take_tie + take_a, label)


def import_judgments(ranker, source, *, tie_rule: str = "half", judge="auto", context=None) -> int:
    """Import the judgments of ``source`` (a file or a DataFrame, as :func:`study.leaderboard.read.read_battles`
    reads it) into ``ranker``'s store as told rows (module docstring); returns how many asks they became."""
    from ..leaderboard.read import read_battles

    ranker._writable()
    if ranker._opened.format != FORMAT:
        raise ValueError(f"{ranker.path}: a store of format {ranker._opened.format}; open it writable once to "
                         "upgrade it")
    battles = read_battles(source, tie_rule=tie_rule, judge=judge, context=context)
    c = ranker.config
    where = {name: k for k, name in enumerate(c.labels)}
    unknown = [name for name in battles.models if name not in where]
    if unknown:
        raise ValueError(f"{battles.source}: model {unknown[0]!r} is not an item of {ranker.path} (its items: "
                         f"{', '.join(c.labels[:8])}{', ...' if c.n_items > 8 else ''})")
    if battles.contexts.shape[1] != c.dim:
        raise ValueError(f"{battles.source}: contexts of dimension {battles.contexts.shape[1]}, but the store's "
                         f"d = {c.dim} (give a context column of {c.dim} numbers)")
    index = np.array([where[name] for name in battles.models], dtype=np.int64)
    rows = [(int(index[i]), int(index[j]), x, w, t, m, label) for i, j, x, w, t, m, label in _rows(battles, c.M)]
    adjacency = ranker._opened.ledger.adjacency
    for k, (a, b, x, *_rest) in enumerate(rows):
        if not adjacency[a, b]:
            raise ValueError(f"{battles.source}: row {k}: ({c.labels[a]}, {c.labels[b]}) is not a pair of the "
                             "store's comparison graph")
        if not np.isfinite(x).all():
            raise ValueError(f"{battles.source}: row {k}: its context is not finite")
    names = sorted({label for *_rest, label in rows if label is not None})
    for name in names:
        judges.check_name(name)

    def operation(conn, state):
        first = conn.execute("SELECT coalesce(max(id), 0) FROM asks").fetchone()[0] + 1
        if first - 1 + len(rows) > c.T:
            raise ValueError(f"{ranker.path}: {len(rows)} imported asks exceed the {c.T - first + 1} asks left of the "
                             f"horizon T = {c.T}")
        now = time.time()
        ids = {}
        for name in names:
            row = conn.execute("SELECT id FROM judges WHERE name = ?", (name,)).fetchone()
            if row is None:  # a judge of the file: no usable token (a random one, never shown, revoked)
                conn.execute("INSERT INTO judges (name, token_sha256, created, revoked) VALUES (?, ?, ?, ?)",
                             (name, judges.token_hash(secrets.token_urlsafe(32)), now, now))
                row = conn.execute("SELECT id FROM judges WHERE name = ?", (name,)).fetchone()
            ids[name] = int(row[0])
        state.restore_rng(conn, first - 1)
        rng_state = json.dumps(state.rng.bit_generator.state)  # unchanged: the policy chose none of them
        ledger = ranker._opened.ledger
        for k, (a, b, x, wins, ties, m, label) in enumerate(rows):
            t, seq = first + k, state.applied + 1
            conn.execute("INSERT INTO asks (id, x, major, other, explored, told_before, rng_state, status, asked_at, "
                         "closed_at) VALUES (?, ?, ?, ?, 0, ?, ?, 'told', ?, ?)",
                         (t, pack(x), a, b, state.applied, rng_state, now, now))
            conn.execute("INSERT INTO tells (seq, ask_id, wins, ties, m, told_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (seq, t, wins, ties, m, now))
            judge = ids.get(label)
            if judge is not None:
                conn.execute("INSERT INTO told_by (seq, judge, side, bothbad) VALUES (?, ?, NULL, 0)", (seq, judge))
            state.rng_ask = t
            ranker._after_commit.append(lambda row=(t, x, a, b, False, state.applied): ledger.add_ask(*row))
            state.apply(seq, t, x, a, b, False, wins, ties, m)
            ranker._after_commit.append(lambda row=(seq, t, wins, ties, m, judge): ledger.add_tell(*row))
        state.clean = False
        ranker._write_estimate(conn, state)
        return len(rows)

    return ranker._guarded(operation)
