"""Refusals before any fit, each one line naming the models it is about:

* a model with fewer than ``min_judgments`` comparisons (a misspelt name is the usual cause), with
  the closest name among the others: "`gpt-X`: 1 judgment; did you mean `gpt-4`?";
* two names equal up to case, spaces and punctuation (``GPT-4`` and ``gpt-4 ``);
* a disconnected comparison graph, naming its components: scores of models never compared, even
  through others, are not comparable;
* judge-clustered SEs for a model judged by one judge only (no variance to estimate);
* separable data, where the maximum-likelihood scores do not exist: without contexts, the models
  that never lost against the rest and those that never won against them (the "beats" graph --
  an arc from a to b when a won or tied against b at least once -- is not strongly connected:
  Zermelo 1929, Ford 1957); with contexts, per category (one-hot contexts) or by the linear program
  of :mod:`study.core.separation`.
"""
from __future__ import annotations

import difflib
import re

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..core.batch import SEPARATION_BEFORE_FIT, certify
from ..core.separation import LP_MAX_NONZEROS, separating_direction
from .files import LeaderboardInputError

SHOWN = 3  # models named per problem in a message (one line)



def _names(models, items, limit=5) -> str:
    shown = [f"`{models[k]}`" for k in items[:limit]]
    return ", ".join(shown) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _plural(count, word) -> str:
    return f"{count:g} {word}{'' if count == 1 else 's'}"


def _key(name: str) -> str:
    return re.sub(r"[\s\-_.:/]+", "", name.casefold())


def check_names(source, models, judgments, min_judgments: int, problems=()) -> None:
    """Every problem of the names at once, in one line: rows comparing a model with itself
    (``problems``, found while reading), names equal up to case, spaces and punctuation, and models
    with fewer than ``min_judgments`` judgments (a misspelt name, usually), with the closest name."""
    found = list(problems)
    groups: dict = {}
    for k, name in enumerate(models):
        groups.setdefault(_key(name), []).append(k)
    twins = [members for members in groups.values() if len(members) > 1]
    for members in twins[:SHOWN]:
        found.append(f"{' and '.join(f'`{models[k]}`' for k in members)} differ only in case, spaces or punctuation "
                     f"({', '.join(_plural(judgments[k], 'judgment') for k in members)}): one name written two ways?")
    if len(twins) > SHOWN:
        found.append(f"{len(twins) - SHOWN} more groups of names differing only in case, spaces or punctuation")
    in_twins = {k for members in twins for k in members}
    few = [k for k in np.argsort(judgments, kind="stable") if judgments[k] < min_judgments and k not in in_twins]
    if few:
        enough = [models[k] for k in range(len(models)) if judgments[k] >= min_judgments]
        parts = []
        for k in few[:SHOWN]:
            close = difflib.get_close_matches(models[k], enough, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            parts.append(f"`{models[k]}`: {_plural(judgments[k], 'judgment')}{hint}")
        more = f" (and {len(few) - SHOWN} more models)" if len(few) > SHOWN else ""
        found.append(f"{'; '.join(parts)}{more} -- fewer than {min_judgments} judgments (--min-judgments)")
    if not found:
        return
    remedy = ("fix the file, or map names with --aliases FILE (alias,name rows), merge case and space variants with "
              "--normalise-names, drop models with few votes with --min-votes N or lower --min-judgments")
    if len(found) == 1:
        raise LeaderboardInputError(f"{source}: {found[0]}; {remedy}")
    listed = " ".join(f"({k}) {text};" for k, text in enumerate(found, start=1))
    raise LeaderboardInputError(f"{source}: {len(found)} problems with the names: {listed} {remedy}")


def check_connected(source, models, lo, hi) -> None:
    n = len(models)
    graph = coo_matrix((np.ones(len(lo)), (lo, hi)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    if count == 1:
        return
    sizes = np.bincount(labels)
    order = np.argsort(-sizes, kind="stable")
    shown = [f"{{{_names(models, np.flatnonzero(labels == c).tolist(), 4)}}}" for c in order[:SHOWN]]
    raise LeaderboardInputError(
        f"{source}: the comparison graph is disconnected: {count} components, {' and '.join(shown)}"
        f"{' and more' if count > SHOWN else ''}; no judgment links them, so their scores are not comparable: "
        "add judgments across them or rank each part on its own")


def check_judges(source, models, pairs, judge_labels) -> None:
    """Refuse judge-clustered SEs where some model was judged by one judge only: its comparisons'
    score sum is one cluster's, which the fit sets to zero, so the clustered covariance has no
    variance for it (and whether a factor exists is up to rounding)."""
    n = len(models)
    cells = np.unique(np.concatenate([pairs.clusters * n + pairs.i, pairs.clusters * n + pairs.j]))
    judges = np.bincount(cells % n, minlength=n)
    alone = np.flatnonzero(judges < 2)
    if alone.size:
        k = int(alone[0])
        judge = judge_labels[int(cells[cells % n == k][0] // n)]
        more = f" (and {alone.size - 1} more models)" if alone.size > 1 else ""
        raise LeaderboardInputError(
            f"{source}: `{models[k]}`: every judgment of it is by one judge (`{judge}`){more}, so the judge-clustered "
            "covariance has no variance for it; pass --se sandwich, or collect its judgments from more judges")


def _beats_components(n, lo, hi, hi_score, m):
    """(labels of the strongly connected components of the beats graph, their count, arcs)."""
    won_by_hi = hi_score > 0
    won_by_lo = m - hi_score > 0
    rows = np.concatenate([hi[won_by_hi], lo[won_by_lo]])
    cols = np.concatenate([lo[won_by_hi], hi[won_by_lo]])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    count, labels = connected_components(graph, directed=True, connection="strong")
    return labels, count, (rows, cols)


def separable_text(models, lo, hi, hi_score, m, within: str = "") -> str | None:
    """Who never lost and who never won against the rest, where the beats graph is not strongly
    connected (None where the MLE exists); for one context (d = 1) or one category."""
    n = len(models)
    labels, count, (rows, cols) = _beats_components(n, lo, hi, hi_score, m)
    if count == 1:
        return None
    cross = labels[rows] != labels[cols]
    beaten = np.zeros(count, dtype=bool)  # some model outside beat the component
    beaten[labels[cols[cross]]] = True
    beats = np.zeros(count, dtype=bool)  # the component beat some model outside
    beats[labels[rows[cross]]] = True
    present = np.zeros(n, dtype=bool)
    present[lo] = present[hi] = True
    never_lost = [k for k in range(n) if present[k] and not beaten[labels[k]]]
    never_won = [k for k in range(n) if present[k] and not beats[labels[k]]]
    parts = []
    if never_lost:
        parts.append(f"{_names(models, never_lost)} never lost against the rest{within}")
    if never_won:
        parts.append(f"{_names(models, never_won)} never won against the rest")
    return "; ".join(parts)


def check_separable(source, models, rows, contexts, context_names, fitted=None, prepared=None) -> None:
    """Refuse data without a finite maximum-likelihood estimate (module docstring).  ``rows`` are
    aggregated (i < j; ``wins`` of j, ``ties``, ``m``, ``context`` codes into ``contexts``).  With
    general contexts it is called before the fit (``fitted`` None: the LP only where it is quick,
    ``SEPARATION_BEFORE_FIT``) and after it (the LP unless the fit on the ``prepared`` rows
    certifies that they are not separable: :func:`study.core.batch.not_separable`)."""
    lo, hi, score, m = rows.i, rows.j, rows.wins + 0.5 * rows.ties, rows.m
    remedy = ("the maximum-likelihood scores do not exist (they would be infinite); pass a ridge (--ridge 1) for "
              "penalised scores, or add judgments")
    if contexts.shape == (1, 1):
        if fitted is not None:
            return
        text = separable_text(models, lo, hi, score, m)
    elif _one_hot(contexts):
        if fitted is not None:
            return
        text = None
        for c in range(contexts.shape[1]):
            rows_c = rows.context == c
            present = np.zeros(len(models), dtype=bool)
            present[lo[rows_c]] = present[hi[rows_c]] = True
            if not present.all():  # its score there is not identified (not separable data)
                absent = np.flatnonzero(~present).tolist()
                raise LeaderboardInputError(
                    f"{source}: {_names(models, absent)} {'has' if len(absent) == 1 else 'have'} no battle at "
                    f"{context_names[c]}, so {'its score is' if len(absent) == 1 else 'their scores are'} not "
                    "identified there; rank each category on its own rows (--by COLUMN, or --at CATEGORY), or pass "
                    "a ridge")
            if rows_c.any():
                text = separable_text(models, lo[rows_c], hi[rows_c], score[rows_c], m[rows_c],
                                      within=f" at {context_names[c]}")
                if text:
                    break
    else:
        X = contexts[rows.context] if rows.context is not None else rows.X
        quick = X.size <= SEPARATION_BEFORE_FIT
        if fitted is None:
            needed = quick
        else:  # not run before the fit: run unless the fit certifies that it is not needed
            needed = not quick and not certify(fitted, prepared)
        if not needed or 2 * X.size > LP_MAX_NONZEROS:
            return  # not needed, or out of the linear program's reach: a fit that does not converge says so
        direction = separating_direction(lo, hi, X, score, m, len(models))
        text = None
        if direction is not None:
            moved = np.flatnonzero(np.abs(direction).max(axis=1) > 1e-6 * np.abs(direction).max())
            text = (f"along some direction of the contexts the comparisons of {_names(models, moved.tolist())} are "
                    "predicted with certainty (study.core.separation)")
    if text:
        if _one_hot(contexts) and len(contexts) > 1:
            remedy += "; or rank the other categories on their own rows (--by COLUMN, or --at CATEGORY)"
        raise LeaderboardInputError(f"{source}: the data are separable: {text}; {remedy}")


def _one_hot(contexts) -> bool:
    return contexts.shape[0] == contexts.shape[1] and bool(np.array_equal(contexts, np.eye(contexts.shape[0])))
