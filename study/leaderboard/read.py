"""From files or frames to :class:`~study.leaderboard.battles.Battles`: the outcomes under one tie
rule (:mod:`.battles`), the contexts (:mod:`.contexts`), the judges; several files merged by model
name (earlier judgments and a ranker's export, say)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import contexts as context_columns
from .battles import TIE_RULES, Battles, decode, merge
from .files import read_table, table_of_frame, where
from .names import read_aliases, rename

__all__ = ["read_battles"]


def _one(source, first_row, *, tie_rule, judge, category, features, vector, embed, intercept, dim, embedder, aliases,
         normalise):
    """(the battles of one file, the number of rows read): its rows' ids count from ``first_row``
    (the rows of the files before)."""
    if isinstance(source, (str, Path)):
        wanted = {"model_a", "model_b", "winner", "wins_a", "wins_b", "ties", "judge", "context", judge, category,
                  vector, embed, *(features or ())}
        table, kind = read_table(source, wanted - {None, "auto"})
        name = str(source)
    else:
        table, kind, name = table_of_frame(source), "frame", "frame"
    if judge == "auto":
        judge = "judge" if "judge" in table.column_names else None
    i, j, wins, ties, m, judges, keep, form, models, judge_labels = decode(table, name, kind, tie_rule=tie_rule,
                                                                           judge=judge)
    X, codes, names = context_columns.build(table, name, kind, category=category, features=features, vector=vector,
                                            embed=embed, intercept=intercept, dim=dim, embedder=embedder)
    i, j, models, notes = rename(i, j, models, aliases=aliases, normalise=normalise)
    dropped = 0 if keep is None else int((~keep).sum())
    if dropped:
        notes.append(f"{dropped:,} row{'s' if dropped != 1 else ''} of ties left out by the tie rule {tie_rule!r}")
    problems = []
    same = np.flatnonzero(i == j)
    if same.size:  # reported with the other name problems (checks.check_names); the rows left out meanwhile
        more = f" (and {same.size - 1} more such rows)" if same.size > 1 else ""
        problems.append(f"{where(kind, int(same[0]), 'model_b')}: the same model as model_a (`{models[i[same[0]]]}`); "
                        f"a model cannot be compared with itself{more}")
        keep = (np.ones(len(i), dtype=bool) if keep is None else keep) & (i != j)
    row_ids = first_row + np.arange(len(i), dtype=np.int64)
    if keep is not None and not keep.all():
        i, j, wins, ties, m, row_ids = i[keep], j[keep], wins[keep], ties[keep], m[keep], row_ids[keep]
        judges = None if judges is None else judges[keep]
        if codes is not None:
            codes = codes[keep]
        else:
            X = X[keep]
    battles = Battles(models=models, i=i.astype(np.intp), j=j.astype(np.intp), wins=wins, ties=ties, m=m, contexts=X,
                      context_of_row=None if codes is None else codes.astype(np.intp), context_names=names,
                      judges=judges, judge_labels=judge_labels, form=form, source=name, notes=notes,
                      problems=problems, row_ids=row_ids)
    return battles, table.num_rows


def read_battles(sources, *, tie_rule: str = "half", judge="auto", category=None, features=None, context=None,
                 embed=None, intercept: bool = True, dim: int = 10, embedder=None, aliases=None,
                 normalise_names: bool = False) -> Battles:
    """Read judgments (a path, a pandas DataFrame or an Arrow table, or a list of them) into
    :class:`~study.leaderboard.battles.Battles`.

    Parameters
    ----------
    sources : str, Path, DataFrame, pyarrow.Table, or a list of them
        CSV, Parquet, JSON or JSON Lines files, or frames, of LMArena battles, the project's
        judgments or counts (:mod:`study.leaderboard.battles`); several are merged by model name.
    tie_rule : {"half", "drop-bothbad", "drop"}
        What a tie is (:mod:`study.leaderboard.battles`).
    judge : "auto", str or None
        The judge column for judge-clustered SEs (``"auto"``: ``judge`` when present).
    category, features, context, embed, intercept, dim, embedder
        The contexts (:mod:`study.leaderboard.contexts`).
    aliases : dict, str or Path, optional
        ``{alias: name}``, or a CSV/JSON file of them (:mod:`study.leaderboard.names`).
    normalise_names : bool
        Merge names equal up to case and spaces (:mod:`study.leaderboard.names`).

    Returns
    -------
    Battles

    Raises
    ------
    study.leaderboard.LeaderboardInputError
        (a ValueError) A file or entry a leaderboard cannot be made from, in one line naming the
        file, row and column.
    """
    if tie_rule not in TIE_RULES:
        raise ValueError(f"tie_rule must be one of {TIE_RULES}, got {tie_rule!r}")
    many = sources if isinstance(sources, (list, tuple)) else [sources]
    if not many:
        raise ValueError("no judgments given")
    if aliases is not None and not isinstance(aliases, dict):
        aliases = read_aliases(aliases)
    options = dict(tie_rule=tie_rule, judge=judge, category=category, features=features, vector=context,
                   embed=embed, intercept=intercept, dim=dim, embedder=embedder, aliases=aliases,
                   normalise=bool(normalise_names))
    parts, first_row = [], 0
    for source in many:
        part, count = _one(source, first_row, **options)
        parts.append(part)
        first_row += count
    return merge(parts)
