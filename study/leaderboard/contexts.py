"""The contexts x of the rows, from the columns of a file of judgments.

* none (default, and for LMArena battles without options): x = 1, the plain Bradley-Terry model;
* ``category="COL"``: the one-hot vector of the row's category (d = the number of categories; the
  score of model i at category c is theta_ic, a ranking per category, sharing nothing);
* ``features=["COL", ...]``: numeric columns, x = (1, features) (``intercept=False``: without the 1);
  with a category too, x = (one-hot, features);
* ``vector="COL"``: a column of numeric vectors, used as given (a Parquet/JSON list, or in CSV a JSON
  list such as ``"[1.0, 0.2]"``), as the project's judgments files and a ranker's exports give them
  (``context``; read by default when the file has it);
* ``embed="COL"``: prompt text, embedded with all-MiniLM-L6-v2 and reduced to ``dim`` dimensions
  (x = (1, dim - 1 scaled principal components): :mod:`study.llm.prepare`, the optional extra
  ``llm-prepare``), as the paper's application does.

A context that is missing, NaN, infinite or beyond 1e100 in absolute value is refused naming its row
and column.  Returns the distinct contexts (Q, d) and each row's index into them where the contexts
are few (categories, texts, vectors given as text), else every row's own context.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core._validate import MAX_ABS_CONTEXT
from .battles import text_codes
from .files import LeaderboardInputError, where


def _error(source, text):
    return LeaderboardInputError(f"{source}: {text}")


def _check_finite(values: np.ndarray, source, kind, names, rows=None):
    bad = ~np.isfinite(values) | (np.abs(np.nan_to_num(values)) > MAX_ABS_CONTEXT)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        row = int(row if rows is None else rows[row])
        what = "missing or NaN" if np.isnan(values[np.argwhere(bad)[0][0], col]) else "infinite or beyond 1e100"
        raise _error(source, f"{where(kind, row, names[col])}: {what} context value")


def _numeric(table, name, source, kind) -> np.ndarray:
    if name not in table.column_names:
        raise _error(source, f"no context column {name!r} (found {table.column_names})")
    column = table.column(name)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(column.type)):
        raise _error(source, f"context column {name!r} must be numeric, got {column.type}")
    values = column.to_numpy(zero_copy_only=False).astype(float)  # nulls become NaN
    _check_finite(values[:, None], source, kind, [name])
    return values


def _vector_of_text(text, at, d_seen):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{at}: expected a JSON list of numbers such as [1.0, 0.5], got {text[:40]!r}") from None
    if not isinstance(value, list) or not value or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                           for v in value):
        raise ValueError(f"{at}: expected a non-empty JSON list of numbers, got {text[:40]!r}")
    if d_seen is not None and len(value) != d_seen:
        raise ValueError(f"{at}: a vector of length {len(value)}, but earlier rows have length {d_seen}")
    return value


def _vectors(table, name, source, kind):
    """(contexts, codes or None) of a vector column."""
    column = table.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_dictionary(column.type):
        (codes,), texts = text_codes(table, (name,), source, kind)
        first = np.zeros(len(texts), dtype=np.intp)
        first[codes[::-1]] = np.arange(len(codes))[::-1]  # each text's first row, for the messages
        vectors, d = [], None
        for q, text in enumerate(texts):
            try:
                vectors.append(_vector_of_text(text, where(kind, int(first[q]), name), d))
            except ValueError as exc:
                raise _error(source, str(exc)) from None
            d = len(vectors[-1])
        contexts = np.asarray(vectors, dtype=float)
        _check_finite(contexts, source, kind, [name] * contexts.shape[1], rows=first)
        return contexts, codes
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
            or pa.types.is_fixed_size_list(column.type)):
        raise _error(source, f"context column {name!r} must hold vectors (lists of numbers), got {column.type}")
    column = column.combine_chunks()
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    nulls = np.isnan(lengths.astype(float)) if lengths.dtype.kind == "f" else np.zeros(len(lengths), bool)
    if nulls.any() or column.null_count:
        row = int(np.flatnonzero(nulls)[0]) if nulls.any() else int(np.flatnonzero(
            pc.is_null(column).to_numpy(zero_copy_only=False))[0])
        raise _error(source, f"{where(kind, row, name)}: missing context vector")
    lengths = lengths.astype(np.intp)
    if lengths[0] == 0 or np.any(lengths != lengths[0]):
        row = 0 if lengths[0] == 0 else int(np.flatnonzero(lengths != lengths[0])[0])
        raise _error(source, f"{where(kind, row, name)}: a vector of length {lengths[row]}, "
                             f"{'an empty vector' if lengths[row] == 0 else f'but row 1 has length {lengths[0]}'}")
    flat = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(float)
    X = flat.reshape(len(lengths), int(lengths[0]))
    _check_finite(X, source, kind, [name] * X.shape[1])
    if np.all(X == X[0]):  # one context for every row (a d = 1 ranker's x = 1): not contextual
        return X[:1].copy(), np.zeros(len(X), dtype=np.intp)
    return X, None


def build(table, source, kind, *, category=None, features=(), vector=None, embed=None, intercept=True,
          dim: int = 10, embedder=None):
    """(contexts (Q, d), context_of_row or None, names): module docstring."""
    features = list(features or ())
    if vector is None and embed is None and category is None and not features and "context" in table.column_names:
        vector = "context"  # the project's judgments files and the ranker's exports carry it
    given = [option for option in (vector, embed) if option is not None]
    if len(given) > 1 or (given and (category is not None or features)):
        raise ValueError("give contexts one way: a vector column, an embedded text column, or a category "
                         "and/or numeric feature columns")
    rows = table.num_rows
    if vector is not None:
        if vector not in table.column_names:
            raise _error(source, f"no context column {vector!r} (found {table.column_names})")
        contexts, codes = _vectors(table, vector, source, kind)
        return contexts, codes, [f"{vector}[{c}]" for c in range(contexts.shape[1])]
    if embed is not None:
        return _embedded(table, embed, source, kind, dim, embedder)
    if category is None and not features:
        return np.ones((1, 1)), np.zeros(rows, dtype=np.intp), ["1"]
    parts, names = [], []
    codes = None
    if category is not None:
        if category not in table.column_names:
            raise _error(source, f"no category column {category!r} (found {table.column_names})")
        (codes,), labels = text_codes(table, (category,), source, kind)
        names += [f"{category}={label}" for label in labels]
        if not features:
            return np.eye(len(labels)), codes, names
        onehot = np.zeros((rows, len(labels)))
        onehot[np.arange(rows), codes] = 1.0
        parts.append(onehot)
    elif intercept:
        parts.append(np.ones((rows, 1)))
        names.append("1")
    for name in features:
        parts.append(_numeric(table, name, source, kind)[:, None])
        names.append(name)
    return np.hstack(parts), None, names


def _embedded(table, name, source, kind, dim, embedder):
    if name not in table.column_names:
        raise _error(source, f"no text column {name!r} to embed (found {table.column_names})")
    (codes,), texts = text_codes(table, (name,), source, kind)
    if len(texts) < dim:
        raise _error(source, f"embedding {name!r} needs at least dim = {dim} distinct texts, got {len(texts)}; "
                             "lower --dim or give contexts as columns")
    from ..llm.prepare import embed, reduce_embeddings
    try:
        embeddings = np.asarray((embedder or embed)(texts), dtype=float)
    except SystemExit as exc:  # study.llm.prepare.embed: the embedding packages are not installed
        raise _error(source, f"the {name!r} texts must be embedded, but {exc}") from None
    contexts, _ = reduce_embeddings(embeddings, dim)
    return contexts, codes, ["1"] + [f"pc{c}" for c in range(1, dim)]
