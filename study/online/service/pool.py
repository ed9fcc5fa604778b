"""A pool of prompts with the models' responses, for people to judge, and the rule that picks a
judge's next prompt.

* :func:`read_pool` reads the prompts (``question_id``, ``prompt``, optional ``category`` and
  numeric feature columns) and the responses (``question_id``, ``model``, ``response``) from CSV,
  Parquet, JSON or JSON Lines, as :mod:`study.leaderboard` reads files, and builds each prompt's
  context the ways the leaderboard takes them (:mod:`study.leaderboard.contexts`: x = 1, a category
  one-hot, numeric features, a vector column, or the prompt text embedded).  A model without a
  response to a prompt is never paired on it (:meth:`Pool.available`); a prompt with fewer than two
  responses is skipped and counted.  Every bad file is refused before anything starts, in one line
  naming the file, row and column.
* :class:`Assigner` serves each judge prompts they have not been served, uniformly at random
  (seeded), and re-serves a stated share of battles (default 10%) to a second judge, for agreement;
  a judge is never served the same prompt, so never the same prompt and pair, twice.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...leaderboard import contexts as context_columns
from ...leaderboard.files import LeaderboardInputError, read_table, where

__all__ = ["Pool", "read_pool", "Assigner", "Assignment", "MAX_TEXT"]

MAX_TEXT = 200_000  # characters of one prompt or response: a page must show it


def _error(source, text):
    return LeaderboardInputError(f"{source}: {text}")


def _texts(table, name, source, kind, *, allow_empty=False) -> list:
    if name not in table.column_names:
        raise _error(source, f"no column {name!r} (found {table.column_names})")
    column = table.column(name)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_null(column.type):
            column = pc.cast(column, pa.string())  # a question id 7 or a model "7": text
        else:
            raise _error(source, f"column {name!r} must hold text, got {column.type}")
    values = column.to_pylist()
    for row, value in enumerate(values):
        if value is None or (not allow_empty and not value.strip()):
            raise _error(source, f"{where(kind, row, name)}: empty value")
        if len(value) > MAX_TEXT:
            raise _error(source, f"{where(kind, row, name)}: {len(value):,} characters (at most {MAX_TEXT:,})")
    return values


@dataclass
class Pool:
    """Prompts with responses (module docstring).

    Attributes
    ----------
    question_ids : list of str
        The prompts kept (two responses or more), in file order.
    prompts : dict
        question_id -> prompt text.
    responses : dict
        question_id -> {model: response text}.
    contexts : ndarray, shape (len(question_ids), d)
        Each kept prompt's context.
    context_names : list of str
    models : list of str
        Every model with a response to a kept prompt, sorted.
    skipped : dict
        question_id -> number of responses, of the prompts skipped (fewer than two responses).
    categories : dict or None
        question_id -> category, where the prompts name one.
    """
    question_ids: list
    prompts: dict
    responses: dict
    contexts: np.ndarray
    context_names: list
    models: list
    skipped: dict = field(default_factory=dict)
    categories: dict | None = None

    def __post_init__(self):
        self._row = {q: k for k, q in enumerate(self.question_ids)}

    def __len__(self) -> int:
        return len(self.question_ids)

    def available(self, question_id) -> frozenset:
        """The models with a response to this prompt (the only ones it may pair)."""
        return frozenset(self.responses[question_id])

    def context(self, question_id) -> np.ndarray:
        """The prompt's context x (length d)."""
        return self.contexts[self._row[question_id]]

    def response(self, question_id, model) -> str:
        """The model's response to the prompt (KeyError when it has none)."""
        return self.responses[question_id][model]

    def summary(self) -> str:
        """One line: prompts kept and skipped, models, context dimension."""
        skipped = len(self.skipped)
        return (f"{len(self):,} prompts with responses of {len(self.models)} models (d = {self.contexts.shape[1]}); "
                f"{skipped:,} prompt{'s' if skipped != 1 else ''} with fewer than two responses skipped")


def read_pool(prompts, responses, *, category=None, features=None, context=None, embed=None,
              intercept: bool = True, dim: int = 10, embedder=None, models=None) -> Pool:
    """Read a pool of prompts and responses (module docstring).

    Parameters
    ----------
    prompts : str or Path
        CSV, Parquet, JSON or JSON Lines with ``question_id`` (unique) and ``prompt``, optional
        category and numeric feature columns.
    responses : str or Path
        The same formats, with ``question_id``, ``model`` and ``response``; one response per
        question and model.
    category, features, context, embed, intercept, dim, embedder
        The contexts, as :func:`study.leaderboard.read_battles` takes them from the prompts file
        (``embed="prompt"`` embeds the prompt text; none of them: x = 1, or the ``context`` column
        where the file has one).
    models : sequence of str, optional
        The ranker's items: a response by another model is refused (naming it).

    Returns
    -------
    Pool

    Raises
    ------
    study.leaderboard.LeaderboardInputError
        (a ValueError) A file the pool cannot be made from, in one line naming the file, row and column.
    """
    wanted = {"question_id", "prompt", "context", category, context, embed, *(features or ())} - {None}
    table, kind = read_table(prompts, wanted)
    source = str(prompts)
    ids = _texts(table, "question_id", source, kind)
    _texts(table, "prompt", source, kind)
    seen = {}
    for row, q in enumerate(ids):
        if q in seen:
            raise _error(source, f"{where(kind, row, 'question_id')}: question {q!r} again "
                                 f"(first at row {seen[q] + 1})")
        seen[q] = row
    X, codes, names = context_columns.build(table, source, kind, category=category, features=features,
                                            vector=context, embed=embed, intercept=intercept, dim=dim,
                                            embedder=embedder)
    per_prompt = X[codes] if codes is not None else X
    texts = table.column("prompt").to_pylist()
    labels = _texts(table, category, source, kind) if category is not None else None
    answers = _responses(responses, seen, models)
    kept = [row for row, q in enumerate(ids) if len(answers.get(q, {})) >= 2]
    skipped = {ids[row]: len(answers.get(ids[row], {})) for row in range(len(ids)) if row not in set(kept)}
    if not kept:
        raise _error(source, f"no prompt has responses of two models or more ({len(ids):,} prompts, "
                             f"{sum(map(len, answers.values())):,} responses in {responses})")
    qs = [ids[row] for row in kept]
    return Pool(question_ids=qs, prompts={q: texts[seen[q]] for q in qs}, responses={q: answers[q] for q in qs},
                contexts=np.asarray(per_prompt[kept], dtype=float), context_names=list(names),
                models=sorted({m for q in qs for m in answers[q]}), skipped=skipped,
                categories=None if labels is None else {q: labels[seen[q]] for q in qs})


def _responses(path, questions, models) -> dict:
    table, kind = read_table(path, {"question_id", "model", "response"})
    source = str(path)
    ids = _texts(table, "question_id", source, kind)
    names = _texts(table, "model", source, kind)
    texts = _texts(table, "response", source, kind)
    allowed = None if models is None else set(models)
    out, first = {}, {}
    for row, (q, model, text) in enumerate(zip(ids, names, texts)):
        if q not in questions:
            raise _error(source, f"{where(kind, row, 'question_id')}: question {q!r} is not in the prompts file")
        if allowed is not None and model not in allowed:
            raise _error(source, f"{where(kind, row, 'model')}: model {model!r} is not one of the ranker's items "
                                 f"{sorted(allowed)[:8]}")
        if (q, model) in first:
            raise _error(source, f"{where(kind, row, 'model')}: a second response of {model!r} to question {q!r} "
                                 f"(first at row {first[q, model] + 1})")
        first[q, model] = row
        out.setdefault(q, {})[model] = text
    return out


@dataclass(frozen=True)
class Assignment:
    """A judge's next battle: the prompt and, for a re-served battle, its pair (else None: the
    ranker picks the pair for the prompt's context); ``overlap`` when it re-serves another judge's
    battle."""
    question_id: str
    pair: tuple | None = None
    overlap: bool = False


class Assigner:
    """Which prompt a judge gets next (thread-safe).

    Rule: with probability ``overlap`` (default 0.1), when one exists, the oldest battle served to
    exactly one other judge on a prompt this judge has not been served is re-served, with its pair
    (for agreement); otherwise a prompt this judge has not been served, uniformly at random among
    them (seeded).  A prompt served to a judge is never served to that judge again (skipped or
    not), so no judge sees the same prompt and pair twice.  ``None``: the judge has seen every
    prompt.

    Parameters
    ----------
    pool : Pool
    overlap : float
        The share of battles re-served to a second judge, in [0, 1].
    seed : int
        Seed of the draws (:func:`numpy.random.default_rng`).
    """

    def __init__(self, pool: Pool, *, overlap: float = 0.1, seed: int = 0):
        overlap = float(overlap)
        if not 0.0 <= overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {overlap!r}")
        self.pool, self.overlap = pool, overlap
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._served = {}  # judge -> set of question ids served to them
        self._battles = {}  # (question id, pair) -> judges served it
        self._once = deque()  # battles served to one judge so far, oldest first: candidates for a second

    def served(self, judge) -> frozenset:
        """The prompts served to this judge."""
        with self._lock:
            return frozenset(self._served.get(judge, ()))

    def judges_of(self, question_id, pair) -> tuple:
        """The judges a battle (prompt and unordered pair) was served to, in order."""
        with self._lock:
            return tuple(self._battles.get((question_id, frozenset(pair)), ()))

    def next(self, judge) -> Assignment | None:
        """The judge's next prompt (class docstring); it is not recorded until :meth:`record`."""
        with self._lock:
            mine = self._served.get(judge, set())
            if self.overlap > 0 and self._once and self._rng.random() < self.overlap:
                for q, pair in self._once:
                    if q not in mine and judge not in self._battles[q, pair]:
                        return Assignment(q, tuple(sorted(pair)), overlap=True)
            left = [q for q in self.pool.question_ids if q not in mine]
            if not left:
                return None
            return Assignment(left[int(self._rng.integers(len(left)))])

    def record(self, judge, question_id, pair) -> None:
        """Record that the battle (prompt, pair) was served to the judge (also to replay a store's
        history after a restart).  Refused (ValueError) if the judge was served this prompt before,
        or a model of the pair has no response to it."""
        key = (question_id, frozenset(pair))
        if len(key[1]) != 2:
            raise ValueError(f"pair must name two models, got {pair!r}")
        missing = sorted(set(pair) - self.pool.available(question_id))
        if missing:
            raise ValueError(f"{question_id!r}: no response of {missing} to this prompt")
        with self._lock:
            mine = self._served.setdefault(judge, set())
            if question_id in mine:
                raise ValueError(f"judge {judge!r} was served prompt {question_id!r} before")
            mine.add(question_id)
            judges = self._battles.setdefault(key, [])
            judges.append(judge)
            if len(judges) == 1:
                self._once.append(key)
            elif len(judges) == 2:
                try:
                    self._once.remove(key)
                except ValueError:
                    pass
