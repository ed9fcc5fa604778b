"""A store's told rows as a table, in the forms ``python -m study.leaderboard`` reads
(:mod:`study.leaderboard.battles`).

**A battle log** (:func:`battle_rows`, :func:`export_battles`, ``python -m study.online export
STORE OUT``, ``GET /api/v1/battles``): one row per comparison, in the order told, with the columns
of an LMArena battle log -- ``model_a`` (the ticket's major item), ``model_b`` (its other item),
``winner`` (``model_a``, ``model_b``, ``tie`` or ``tie (bothbad)``), ``judge`` (the judge's name;
a tell of no named judge -- the shared token, or a store of format 2 or older -- is ``#SEQ``, a
judge of its own, as the ranker's judge-clustered intervals count it), ``side`` (``a`` or ``b``:
which was shown first, where the judge said; empty otherwise), ``question_id`` (the ticket),
``context`` (the ask's x), ``tstamp`` (when it was told, Unix seconds) and ``seq`` (the tell's place
in the estimate).  A tell of ``m`` comparisons is ``m`` rows.

**Counts** (:func:`told_rows`, :func:`export_told`): one row per told outcome: ``seq``, ``ticket``,
``model_a``, ``model_b``, ``wins_a``, ``wins_b``, ``ties``, ``m``, ``explored``, ``context``.

Both count a tie as half a win for each side in every fit (:mod:`study.core.outcomes`), so the
leaderboard of either (``--tie-rule half``, its default) is the fit of the ranker's told rows.
Files: ``.parquet``, ``.csv`` (the context a JSON list) or ``.jsonl``, by the suffix.  The rows
come from the verified store (a path is opened read-only: nothing is refitted or written).  Besides
a :class:`Ranker` or a path, :func:`told_rows` takes a :class:`study.online.Client` (its
``told()``) or the frame ``Client.told()`` returns.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .judges import SIDE_NAMES
from .ranker import Ranker
from .store import FORMAT, unpack

COLUMNS = ("seq", "ticket", "model_a", "model_b", "wins_a", "wins_b", "ties", "m", "explored", "context")
BATTLE_COLUMNS = ("model_a", "model_b", "winner", "judge", "side", "question_id", "context", "tstamp", "seq")
CLIENT_COLUMNS = {"seq", "ticket", "major_name", "other_name", "x", "wins", "ties", "m"}
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def told_rows(store) -> pd.DataFrame:
    """The told rows, counts form (module docstring), of a :class:`Ranker`, the store at a path, a
    :class:`study.online.Client` or a frame of ``Client.told()``."""
    if isinstance(store, Ranker):
        return _rows(store)
    if isinstance(store, pd.DataFrame):
        return _from_client(store)
    if callable(getattr(store, "told", None)):  # a Client: the rows over HTTP
        return _from_client(store.told())
    if not isinstance(store, (str, Path)):
        raise TypeError(f"told_rows takes a Ranker, a store's path, a Client or Client.told()'s frame, got "
                        f"{type(store).__name__}")
    with Ranker(store, readonly=True) as ranker:
        return _rows(ranker)


def _from_client(frame: pd.DataFrame) -> pd.DataFrame:
    missing = sorted(CLIENT_COLUMNS - set(frame.columns))
    if missing:
        raise ValueError(f"a frame of told rows needs the columns of Client.told() (missing {', '.join(missing)})")
    m, wins, ties = (frame[c].to_numpy(dtype=np.int64) for c in ("m", "wins", "ties"))
    return pd.DataFrame({"seq": frame["seq"].to_numpy(), "ticket": frame["ticket"].to_numpy(),
                         "model_a": frame["major_name"].astype(str).to_numpy(),
                         "model_b": frame["other_name"].astype(str).to_numpy(),
                         "wins_a": m - wins - ties, "wins_b": wins, "ties": ties, "m": m,
                         "explored": frame["explored"].to_numpy() if "explored" in frame else None,
                         "context": [list(map(float, x)) for x in frame["x"]]}, columns=list(COLUMNS))


def _rows(ranker: Ranker) -> pd.DataFrame:
    ranker._read()  # the ledger brought up to date (and verified) in one read transaction
    ledger = ranker._opened.ledger
    k = ledger.n_tells
    asked = ledger.tell_ask[:k] - 1
    labels = np.asarray(ranker.config.labels, dtype=object)
    wins_b, ties, m = ledger.wins[:k], ledger.ties[:k], ledger.m[:k]
    return pd.DataFrame({"seq": np.arange(1, k + 1), "ticket": ledger.tell_ask[:k],
                         "model_a": labels[ledger.major[asked]], "model_b": labels[ledger.other[asked]],
                         "wins_a": m - wins_b - ties, "wins_b": wins_b, "ties": ties, "m": m,
                         "explored": ledger.explored[asked],
                         "context": [row.tolist() for row in ledger.X[asked]]}, columns=list(COLUMNS))


def battle_rows(store, after: int = 0) -> pd.DataFrame:
    """The battle log (module docstring) of a :class:`Ranker` or the store at a path: the tells
    with seq > ``after``."""
    if isinstance(store, Ranker):
        return _battles(store, after)
    with Ranker(store, readonly=True) as ranker:
        return _battles(ranker, after)


def _battles(ranker: Ranker, after: int) -> pd.DataFrame:
    told = ranker._read().applied  # verified up to here
    labels = ranker.config.labels
    judged = ranker._opened.format == FORMAT
    query = ("SELECT t.seq, t.ask_id, a.major, a.other, a.x, t.wins, t.ties, t.m, t.told_at, "
             + ("b.bothbad, j.name, b.side FROM tells t JOIN asks a ON a.id = t.ask_id LEFT JOIN told_by b ON b.seq = "
                "t.seq LEFT JOIN judges j ON j.id = b.judge " if judged else
                "0, NULL, NULL FROM tells t JOIN asks a ON a.id = t.ask_id ")
             + "WHERE t.seq > ? AND t.seq <= ? ORDER BY t.seq")
    with ranker._store.read() as conn:
        rows = conn.execute(query, (int(after), told)).fetchall()
    out = {name: [] for name in BATTLE_COLUMNS}
    for seq, ticket, major, other, x, wins, ties, m, told_at, bothbad, judge, side in rows:
        bothbad = int(bothbad or 0)
        winners = (["model_b"] * wins + ["tie"] * (ties - bothbad) + ["tie (bothbad)"] * bothbad
                   + ["model_a"] * (m - wins - ties))
        context = unpack(x).tolist()
        for winner in winners:
            out["model_a"].append(labels[major])
            out["model_b"].append(labels[other])
            out["winner"].append(winner)
            out["judge"].append(judge if judge is not None else f"#{seq}")
            out["side"].append(None if side is None else SIDE_NAMES[side])
            out["question_id"].append(int(ticket))
            out["context"].append(context)
            out["tstamp"].append(float(told_at))
            out["seq"].append(int(seq))
    return pd.DataFrame(out, columns=list(BATTLE_COLUMNS))


def write(frame: pd.DataFrame, path) -> Path:
    """``frame`` to ``path`` by its suffix (.parquet, .csv with JSON contexts, .jsonl)."""
    path = Path(path)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: export to .parquet, .csv or .jsonl, not {path.suffix!r}")
    write_as(frame, path, kind)
    return path


def write_as(frame: pd.DataFrame, target, kind: str) -> None:
    """``frame`` to ``target`` (a path or a binary buffer) as ``kind``: parquet, csv (contexts as
    JSON) or jsonl -- the forms ``python -m study.leaderboard`` reads back."""
    if kind == "parquet":
        frame.to_parquet(target, index=False)
    elif kind == "csv":
        frame.assign(context=[json.dumps(x) for x in frame.context]).to_csv(target, index=False)
    else:
        frame.to_json(target, orient="records", lines=True)


def export_told(store, path) -> Path:
    """Write the told rows, counts form (:func:`told_rows`), to ``path``: ``.parquet``, ``.csv`` or ``.jsonl``."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"{path}: export to .parquet, .csv or .jsonl, not {Path(path).suffix!r}")
    return write(told_rows(store), path)


def export_battles(store, path) -> Path:
    """Write the battle log (:func:`battle_rows`) to ``path``: ``.parquet``, ``.csv`` or ``.jsonl``."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"{path}: export to .parquet, .csv or .jsonl, not {Path(path).suffix!r}")
    return write(battle_rows(store), path)
