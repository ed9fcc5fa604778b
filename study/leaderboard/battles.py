"""Judgments as coded arrays (:class:`Battles`), from a file or a frame in one of three forms, with
one tie rule.

Forms (told apart by their columns; extra columns are ignored):

* **LMArena / FastChat battle logs**, as they are: ``model_a``, ``model_b``, ``winner`` in
  ``model_a``, ``model_b``, ``tie``, ``tie (bothbad)`` (``both_bad`` as arena-rank writes it is read
  as the latter); an optional ``judge`` (the voter) for judge-clustered standard errors.
* **the project's judgments files** (:mod:`study.llm.byo`): ``question_id``, ``model_a``,
  ``model_b``, ``winner`` in ``a``, ``b``, ``tie``, with a ``context`` vector or ``question`` text.
* **counts**, one row per (pair, context) with several comparisons -- what a ranker's store exports
  (:func:`study.online.export.told_rows`): ``model_a``, ``model_b``, ``wins_a``, ``wins_b``,
  ``ties`` (whole numbers).

Outcomes are counted as everywhere in the project (:mod:`study.core.outcomes`): each row is ``m``
comparisons of ``model_a`` (i) with ``model_b`` (j), ``wins`` won outright by ``model_b``, ``ties``
tied.  **The tie rule** says what a tie is (``tie_rule``):

* ``"half"`` (default): both kinds of tie -- ``tie`` and ``tie (bothbad)`` -- count as half a win for
  each side, as LMArena's leaderboard and its ``arena-rank`` package count them;
* ``"drop-bothbad"``: ``tie (bothbad)`` rows are left out (neither model earned anything: no
  evidence of their order), ``tie`` counts half;
* ``"drop"``: every tie is left out (only decisive votes).

Models are indexed in sorted name order; names are shown with invisible characters escaped
(:func:`study.llm.byo.safe_label`).  Every bad entry is refused naming its row and column.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..llm.byo import safe_label
from .files import LeaderboardInputError, where

TIE_RULES = ("half", "drop-bothbad", "drop")
LMARENA_WINNERS = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 3, "both_bad": 3}
JUDGMENT_WINNERS = {"a": 0, "b": 1, "tie": 2}
COUNT_COLUMNS = ("wins_a", "wins_b", "ties")


@dataclass
class Battles:
    """Judgments as arrays: row k compares ``models[i[k]]`` with ``models[j[k]]`` ``m[k]`` times,
    ``wins[k]`` won outright by the second, ``ties[k]`` tied.

    Attributes
    ----------
    models : list of str
        The model names, in index order (sorted).
    i, j : ndarray
        The models of each row (``model_a``, ``model_b``).
    wins, ties, m : ndarray
        The row's outcome counts (:mod:`study.core.outcomes`).
    contexts : ndarray, shape (Q, d)
        The distinct contexts (``[[1.0]]`` without contexts).
    context_of_row : ndarray or None
        The index into ``contexts`` of each row; None where every row has its own (Q = K).
    context_names : list of str
        What each context coordinate is.
    judges : ndarray or None
        The judge code of each row (None without a judge column).
    judge_labels : list
        The judges' labels, in code order.
    form, source : str
        ``lmarena``, ``judgments`` or ``counts``; where the rows came from.
    notes : list of str
        What was done to the rows (ties dropped by the tie rule).
    problems : list of str
        Problems of the names found while reading (rows comparing a model with itself; those rows
        are left out of the arrays), reported with the other name problems in one line
        (:func:`.checks.check_names`).
    row_ids : ndarray or None
        Each row's position among the rows of the files read (the files one after another, counted
        before the tie rule, a self-pair, ``min_votes`` or a category left any out), so that data
        read from the same files later (:func:`.style.read_style`) follows the same rows; None for
        battles made by hand.
    """

    models: list
    i: np.ndarray
    j: np.ndarray
    wins: np.ndarray
    ties: np.ndarray
    m: np.ndarray
    contexts: np.ndarray
    context_of_row: np.ndarray | None
    context_names: list
    judges: np.ndarray | None = None
    judge_labels: list = field(default_factory=list)
    form: str = "lmarena"
    source: str = "frame"
    notes: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    row_ids: np.ndarray | None = None

    def rows_of(self, rows) -> np.ndarray | None:
        """The row ids of ``rows`` (a mask or indices), for a :class:`Battles` of those rows."""
        return None if self.row_ids is None else self.row_ids[rows]

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def judge_count(self) -> int:
        return len(self.judge_labels)

    @property
    def rows(self) -> int:
        return len(self.i)

    @property
    def contextual(self) -> bool:
        return self.context_of_row is None or len(self.contexts) > 1 or self.contexts.shape[1] > 1

    def row_contexts(self) -> np.ndarray:
        """(K, d): every row's context."""
        return self.contexts if self.context_of_row is None else self.contexts[self.context_of_row]

    def mean_context(self) -> np.ndarray:
        """The rows' mean context, weighted by their comparisons."""
        if self.context_of_row is None:
            return self.m @ self.contexts / self.m.sum()
        weights = np.bincount(self.context_of_row, self.m, len(self.contexts))
        return weights @ self.contexts / weights.sum()


def _error(source: str, text: str) -> LeaderboardInputError:
    return LeaderboardInputError(f"{source}: {text}")


def text_codes(table: pa.Table, columns, source: str, kind: str):
    """(codes per column, labels): the values of text columns coded against one sorted list of
    labels; a missing or empty value is refused naming its row and column."""
    arrays = []
    for name in columns:
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_null(column.type):
            column = pc.cast(column, pa.string())
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise _error(source, f"column {name!r} must hold text (names), got {column.type}")
        arrays.append(column.cast(pa.large_string()))
    encoded = pa.chunked_array([chunk for column in arrays for chunk in column.chunks], type=pa.large_string())
    encoded = encoded.dictionary_encode().combine_chunks()
    labels = encoded.dictionary.to_pylist()
    indices = encoded.indices
    rows = table.num_rows
    empty = [k for k, label in enumerate(labels) if not label.strip()]
    if indices.null_count or empty:  # the first row with a missing or blank value, and its column
        flat = indices.to_numpy(zero_copy_only=False)
        bad = np.isnan(flat) if flat.dtype.kind == "f" else np.zeros(len(flat), bool)
        bad |= np.isin(np.nan_to_num(flat, nan=-1).astype(np.int64), empty)
        position = int(np.flatnonzero(bad.reshape(len(columns), rows).T.ravel())[0])
        raise _error(source, f"{where(kind, position // len(columns), columns[position % len(columns)])}: empty value")
    order = sorted(range(len(labels)), key=labels.__getitem__)
    rank = np.empty(len(labels), dtype=np.intp)
    rank[order] = np.arange(len(labels))
    codes = rank[indices.to_numpy()]
    return [codes[k * rows:(k + 1) * rows] for k in range(len(columns))], [labels[k] for k in order]


def _winner_codes(table, source, kind):
    """(code per row: 0 first won, 1 second won, 2 tie, 3 tie (bothbad)), form."""
    column = table.column("winner")
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise _error(source, f"column 'winner' must hold text such as model_a, model_b, tie, got {column.type}")
    encoded = column.dictionary_encode().combine_chunks()  # then only the few distinct values are normalised
    values = [v.strip().lower() for v in encoded.dictionary.to_pylist()]
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    if encoded.indices.null_count:
        row = int(np.flatnonzero(np.isnan(indices))[0])
        raise _error(source, f"{where(kind, row, 'winner')}: unknown winner value, an empty value")
    form = "judgments" if any(v in ("a", "b") for v in values) else "lmarena"
    table_of = JUDGMENT_WINNERS if form == "judgments" else LMARENA_WINNERS
    lookup = np.array([table_of.get(v, -1) for v in values], dtype=np.int8)
    codes = lookup[indices]
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raw = table.column("winner")[row].as_py()
        expected = ("'a', 'b' or 'tie' (study judgments)" if form == "judgments"
                    else "'model_a', 'model_b', 'tie' or 'tie (bothbad)' (LMArena battles)")
        shown = "an empty value" if raw in (None, "") else f"{raw!r}"
        raise _error(source, f"{where(kind, row, 'winner')}: unknown winner value {shown}; expected {expected}")
    return codes, form


def _count_columns(table, source, kind):
    counts = []
    for name in COUNT_COLUMNS:
        column = table.column(name)
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise _error(source, f"column {name!r} must hold whole numbers, got {column.type}")
        values = column.to_numpy(zero_copy_only=False).astype(float)
        bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values != np.round(values)))
        if bad.size:
            shown = table.column(name)[int(bad[0])].as_py()
            raise _error(source, f"{where(kind, int(bad[0]), name)}: expected a whole number >= 0, got {shown!r}")
        counts.append(values)
    wins_a, wins_b, ties = counts
    m = wins_a + wins_b + ties
    empty = np.flatnonzero(m == 0)
    if empty.size:
        raise _error(source, f"{where(kind, int(empty[0]), 'wins_a')}: no comparisons in this row "
                             "(wins_a + wins_b + ties = 0)")
    return wins_b, ties, m


def form_of(table: pa.Table, source: str) -> str:
    names = set(table.column_names)
    missing = [c for c in ("model_a", "model_b") if c not in names]
    if missing:
        raise _error(source, f"missing column(s) {missing}; found {table.column_names} (expected LMArena battles: "
                             "model_a, model_b, winner; or counts: model_a, model_b, wins_a, wins_b, ties)")
    if set(COUNT_COLUMNS) <= names:
        return "counts"
    if "winner" not in names:
        raise _error(source, f"missing column 'winner' (or the counts wins_a, wins_b, ties); found {table.column_names}")
    return "winner"


def decode(table: pa.Table, source: str, kind: str, *, tie_rule: str = "half", judge: str | None = None):
    """(i, j, wins, ties, m, judges, keep, form, models, judge labels): the outcome arrays of every
    row, ``keep`` the rows the tie rule keeps (None: all)."""
    if tie_rule not in TIE_RULES:
        raise ValueError(f"tie_rule must be one of {TIE_RULES}, got {tie_rule!r}")
    form = form_of(table, source)
    (i, j), models = text_codes(table, ("model_a", "model_b"), source, kind)
    # rows comparing a model with itself are found after the names are mapped (.read), reported with the rest
    keep = None
    if form == "counts":
        wins, ties, m = _count_columns(table, source, kind)
        if tie_rule == "drop":  # (counts do not tell the kinds of tie apart: 'drop-bothbad' keeps them)
            m = m - ties
            ties = np.zeros_like(ties)
            keep = m > 0
    else:
        codes, form = _winner_codes(table, source, kind)
        wins = (codes == 1).astype(float)
        tied = codes >= 2
        if tie_rule == "drop":
            keep = ~tied
        elif tie_rule == "drop-bothbad":
            keep = codes != 3
        ties = tied.astype(float)
        m = np.ones(len(codes))
    judges, labels = None, []
    if judge is not None:
        if judge not in table.column_names:
            raise _error(source, f"no judge column {judge!r} (found {table.column_names})")
        (judges,), labels = text_codes(table, (judge,), source, kind)
    return i, j, wins, ties, m, judges, keep, form, [safe_label(name) for name in models], labels


def _recode(codes, labels, union):
    index = {label: k for k, label in enumerate(union)}
    return np.array([index[label] for label in labels], dtype=np.intp)[codes]


def merge(parts: list) -> "Battles":
    """One :class:`Battles` of several (files read one by one): models and judges matched by name,
    contexts by their names (every part must have the same context coordinates)."""
    if len(parts) == 1:
        return parts[0]
    names = parts[0].context_names
    for part in parts[1:]:
        if part.context_names != names:
            raise LeaderboardInputError(f"{part.source}: its contexts ({part.context_names}) differ from those of "
                                        f"{parts[0].source} ({names}); give every file the same context columns")
    models = sorted(set().union(*(p.models for p in parts)))
    judged = [p.judges is not None for p in parts]
    if any(judged) and not all(judged):
        missing = parts[judged.index(False)].source
        raise LeaderboardInputError(f"{missing}: has no judge column, but other files have one; cluster by judge "
                                    "in all of them or in none (--se sandwich)")
    judges = sorted(set().union(*(p.judge_labels for p in parts))) if all(judged) else []
    discrete = all(p.context_of_row is not None for p in parts)
    contexts = np.vstack([p.contexts if discrete else p.row_contexts() for p in parts])
    codes = None
    if discrete:  # the same context in two files is one context
        offsets = np.cumsum([0] + [len(p.contexts) for p in parts])
        contexts, inverse = np.unique(contexts, axis=0, return_inverse=True)
        codes = inverse.ravel()[np.concatenate([p.context_of_row + o for p, o in zip(parts, offsets)])]
    return Battles(
        models=models,
        i=np.concatenate([_recode(p.i, p.models, models) for p in parts]),
        j=np.concatenate([_recode(p.j, p.models, models) for p in parts]),
        wins=np.concatenate([p.wins for p in parts]), ties=np.concatenate([p.ties for p in parts]),
        m=np.concatenate([p.m for p in parts]),
        contexts=contexts, context_of_row=codes,
        context_names=list(names),
        judges=np.concatenate([_recode(p.judges, p.judge_labels, judges) for p in parts]) if judges else None,
        judge_labels=judges, form="+".join(dict.fromkeys(p.form for p in parts)),
        source=" + ".join(p.source for p in parts), notes=[note for p in parts for note in p.notes],
        problems=[problem for p in parts for problem in p.problems],
        row_ids=np.concatenate([p.row_ids for p in parts]) if all(p.row_ids is not None for p in parts) else None)
