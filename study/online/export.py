"""A store's told rows as a table: ``told_rows(ranker_or_path)`` (a DataFrame) and
``export_told(ranker_or_path, path)`` (Parquet, CSV or JSON Lines by the suffix), in the counts form
that ``python -m study.leaderboard`` reads back (:mod:`study.leaderboard.battles`).

One row per told outcome, in the order told: ``seq`` (its place in the estimate), ``ticket`` (the
ask), ``model_a`` (the ticket's major item), ``model_b`` (its other item), ``wins_a``, ``wins_b``
(outright wins of each), ``ties``, ``m`` (= wins_a + wins_b + ties), ``explored`` (whether the policy
explored at that ask) and ``context`` (the ask's x: a list column in Parquet and JSON Lines, a
JSON list in CSV).  Counted as everywhere (:mod:`study.core.outcomes`): a tie is half a win for each
side in every fit.  The rows come from the verified store (a path is opened read-only: nothing is
refitted or written).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .ranker import Ranker

COLUMNS = ("seq", "ticket", "model_a", "model_b", "wins_a", "wins_b", "ties", "m", "explored", "context")


def told_rows(store) -> pd.DataFrame:
    """The told rows of a :class:`Ranker` or of the store at a path (module docstring)."""
    if isinstance(store, Ranker):
        return _rows(store)
    with Ranker(store, readonly=True) as ranker:
        return _rows(ranker)


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


def export_told(store, path) -> Path:
    """Write the told rows (:func:`told_rows`) to ``path``: ``.parquet``, ``.csv`` or ``.jsonl``."""
    path = Path(path)
    frame = told_rows(store)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        frame.to_parquet(path, index=False)
    elif suffix == ".csv":
        frame.assign(context=[json.dumps(x) for x in frame.context]).to_csv(path, index=False)
    elif suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True)
    else:
        raise ValueError(f"{path}: export to .parquet, .csv or .jsonl, not {path.suffix!r}")
    return path
