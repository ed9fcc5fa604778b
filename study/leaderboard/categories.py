"""Boards per category: a category's rows on their own (``--at CATEGORY``, ``--by COLUMN``).

With one-hot category contexts the likelihood of the contextual BTL model factorises over the
categories (the score of model i at category c is theta_ic, sharing nothing), so the board of one
category is the plain BTL fit of that category's rows: the same scores as the joint fit, the same
model-based and sandwich covariances (the judge-clustered one differs only by its small-sample
factor G/(G - 1), G the judges of that category).  Fitting it alone means that

* its counts (judgments, wins, win rate, ties) are that category's;
* another category's separable data (a model that never lost in ``math``) does not block it: each
  category is checked, and refused, on its own;
* a model with no battle in the category is *not identified* there: it is left out of that board
  with a note (not misreported as separable data).

:func:`boards` fits every category and the whole log (LMArena's ``full``) in one pass; a category
that cannot be ranked is refused alone, in one line, and the others are produced.
"""
from __future__ import annotations

import re

import numpy as np

from .battles import Battles
from .files import LeaderboardInputError


def category_names(battles: Battles) -> list | None:
    """The category labels where the contexts are exactly a category's one-hot (else None)."""
    contexts = battles.contexts
    if (battles.context_of_row is None or contexts.shape[0] != contexts.shape[1]
            or not np.array_equal(contexts, np.eye(contexts.shape[0]))
            or not all("=" in name for name in battles.context_names)):
        return None
    return [name.split("=", 1)[1] for name in battles.context_names]


def restrict(battles: Battles, rows: np.ndarray, label: str, within: str = "") -> Battles:
    """The plain (d = 1) judgments of ``rows`` of ``battles``, over the models they involve; the
    models with no battle there are named in a note (their score is not identified there)."""
    n = battles.n_models
    present = np.zeros(n, dtype=bool)
    present[battles.i[rows]] = present[battles.j[rows]] = True
    code = np.cumsum(present) - 1
    notes = list(battles.notes)
    absent = np.flatnonzero(~present)
    if absent.size and within:
        shown = ", ".join(f"`{battles.models[k]}`" for k in absent[:5])
        more = f" and {absent.size - 5} more" if absent.size > 5 else ""
        notes.append(f"{shown}{more}: no battle {within}, so not identified there; left out of this board")
    count = int(rows.sum())
    judges = None if battles.judges is None else battles.judges[rows]
    return Battles(models=[name for k, name in enumerate(battles.models) if present[k]],
                   i=code[battles.i[rows]].astype(np.intp), j=code[battles.j[rows]].astype(np.intp),
                   wins=battles.wins[rows], ties=battles.ties[rows], m=battles.m[rows], contexts=np.ones((1, 1)),
                   context_of_row=np.zeros(count, dtype=np.intp), context_names=["1"], judges=judges,
                   judge_labels=battles.judge_labels, form=battles.form, source=f"{battles.source}{label}",
                   notes=notes, problems=battles.problems, row_ids=battles.rows_of(rows))


def one_category(battles: Battles, name: str) -> Battles:
    """The rows of category ``name`` as a board of their own (module docstring)."""
    labels = category_names(battles)
    if labels is None:
        raise ValueError("a board of one category needs the contexts of a category column alone (--category)")
    matches = [c for c, label in enumerate(labels) if label == name or battles.context_names[c] == name]
    if len(matches) != 1:
        raise ValueError(f"unknown category {name!r}; the categories are {labels}")
    c = matches[0]
    column = battles.context_names[c].split("=", 1)[0]
    within = f"at {column}={labels[c]}"
    return restrict(battles, battles.context_of_row == c, f" [{column}={labels[c]}]", within)


def whole(battles: Battles) -> Battles:
    """Every row, without contexts (LMArena's ``full`` board)."""
    return restrict(battles, np.ones(battles.rows, dtype=bool), "")


def boards(battles: Battles, fit) -> tuple:
    """(the whole log's board or its refusal, {category: board or refusal}) with ``fit`` a function
    of :class:`Battles` to a leaderboard; a refusal is its one-line message."""
    labels = category_names(battles)
    if labels is None:
        raise ValueError("--by needs a category column alone: no --category, --features, --context or --embed with it")
    out = {}
    for label in labels:
        try:
            out[label] = fit(one_category(battles, label))
        except LeaderboardInputError as exc:
            out[label] = " ".join(str(exc).split())
    try:
        full = fit(whole(battles))
    except LeaderboardInputError as exc:
        full = " ".join(str(exc).split())
    return full, out


def folder_names(labels) -> dict:
    """{label: a file-system-safe, distinct folder name}."""
    out, used = {}, set()
    for label in labels:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "category"
        name, k = base, 2
        while name.lower() in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name.lower())
        out[label] = name
    return out


def overview(source: str, column: str, full, boards_of: dict, tables: dict, folders: dict) -> str:
    """Markdown: one line per category (and the whole log) -- models, votes, the models whose
    simultaneous rank interval contains 1, or the refusal."""
    lines = [f"Boards of {source} by `{column}`: {len(boards_of)} categories, each fitted on its own rows "
             "(a category that cannot be ranked is refused alone).", "",
             "| category | board | models | votes | may be first (simultaneous rank interval holds 1) |",
             "|---|---|---:|---:|---|"]
    for label, board in [(None, full), *boards_of.items()]:  # None: the whole log
        shown = "(all)" if label is None else label.replace("|", "\\|")
        if isinstance(board, str):
            lines.append(f"| {shown} | refused: {board.replace('|', '/')} | | | |")
            continue
        table = tables[label]
        first = ", ".join(f"`{m}`" for m in table.model[table.rank_lower == 1]).replace("|", "\\|")
        where = "leaderboard.md" if label is None else f"{folders[label]}/leaderboard.md"
        lines.append(f"| {shown} | [{where}]({where}) | {board.battles.n_models} | "
                     f"{board.battles.m.sum():,.0f} | {first} |")
    return "\n".join(lines) + "\n"
