"""LMArena's conventions beside the project's: what a published arena board shows.

* **Rank (UB)**, LMArena's headline rank: 1 + the number of models whose interval's lower bound
  lies above this model's upper bound, from the *marginal* CIs (each model's own 95% interval, not
  simultaneous ones; on the sum-to-zero scores, so an anchor does not change it).  It is a
  conservative rank for each model on its own, with no joint guarantee; the simultaneous rank
  interval (:mod:`.ranks`) holds for all models at once.
* **Arena Score**: the rating on LMArena's scale, 1000 + 400/ln(10) x'theta, or anchored
  (``--anchor MODEL=R``: the anchor stated, each interval that of the difference from it).
* **95% CI as +x/-y**: the distances from the score to the bounds.
* **Votes** and a **preliminary** mark (``†``) for models with fewer than ``preliminary_below`` votes.
* ``--min-votes N`` drops (rather than refuses) models with fewer than N votes, with a note; 0
  keeps every model.
* the JSON of arena-catalog's leaderboards: ``{category: {model: {rating, rating_q025, rating_q975}}}``
  (``full`` for the whole log).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .battles import Battles
from .files import LeaderboardInputError

PRELIMINARY_BELOW = 500
MARK = "†"


def rank_ub(lower, upper) -> np.ndarray:
    """LMArena's Rank (UB): 1 + #{j : lower_j > upper_i} for every model i (marginal intervals)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    return 1 + (lower[None, :] > upper[:, None]).sum(axis=1)


def drop_below(battles: Battles, min_votes: int) -> Battles:
    """``battles`` without the models with fewer than ``min_votes`` comparisons (counted in the
    rows of ``battles``) and every row that involves one, with a note naming them."""
    if isinstance(min_votes, bool) or not isinstance(min_votes, (int, np.integer)) or min_votes < 0:
        raise ValueError(f"min_votes must be a whole number >= 0, got {min_votes!r}")
    n = battles.n_models
    votes = np.bincount(battles.i, battles.m, n) + np.bincount(battles.j, battles.m, n)
    few = np.flatnonzero(votes < min_votes)
    if few.size == 0:
        return battles
    if few.size == n:
        raise LeaderboardInputError(f"{battles.source}: every model has fewer than {min_votes:,} votes (--min-votes); "
                                    f"the most is {votes.max():,.0f}")
    keep_model = np.ones(n, dtype=bool)
    keep_model[few] = False
    rows = keep_model[battles.i] & keep_model[battles.j]
    code = np.cumsum(keep_model) - 1
    shown = ", ".join(f"`{battles.models[k]}` ({votes[k]:,.0f})" for k in few[:5])
    more = f" and {few.size - 5} more" if few.size > 5 else ""
    note = (f"{few.size} model{'s' if few.size != 1 else ''} with fewer than {min_votes:,} votes left out "
            f"(--min-votes), with their {int((~rows).sum()):,} rows: {shown}{more}")
    judges = None if battles.judges is None else battles.judges[rows]
    return Battles(models=[name for k, name in enumerate(battles.models) if keep_model[k]],
                   i=code[battles.i[rows]].astype(np.intp), j=code[battles.j[rows]].astype(np.intp),
                   wins=battles.wins[rows], ties=battles.ties[rows], m=battles.m[rows], contexts=battles.contexts,
                   context_of_row=None if battles.context_of_row is None else battles.context_of_row[rows],
                   context_names=battles.context_names, judges=judges, judge_labels=battles.judge_labels,
                   form=battles.form, source=battles.source, notes=battles.notes + [note],
                   problems=battles.problems, row_ids=battles.rows_of(rows))


def _elo(value: float) -> str:
    return f"{value:.0f}"


def arena_markdown(table: pd.DataFrame, preliminary_below: int = PRELIMINARY_BELOW) -> str:
    """The board as LMArena publishes it (``table`` on the elo scale), what it is said above it."""
    meta = table.attrs
    if meta.get("scale") != "elo":
        raise ValueError("the arena board is on the elo scale: pass a table of scale='elo'")
    anchor = meta.get("anchor")
    score = (f"Arena Score: 400/ln(10) x the logit score, anchored at `{anchor['model']}` = {anchor['rating']:g} "
             f"(each CI that of the difference from `{anchor['model']}`)" if anchor
             else "Arena Score: 1000 + 400/ln(10) x the logit score (summing to 0 over the models)")
    level = f"{meta['level']:.0%}"
    lines = [f"Arena board of {meta['source']}: {meta['models']} models, {meta['comparisons']:,.0f} votes.",
             f"{score}; {level} CI shown as +x/-y, {meta['se_text']}. Rank (UB): 1 + the number of models whose "
             f"CI lies wholly above this model's (LMArena's rank; marginal CIs, no joint guarantee). Rank "
             f"(simultaneous): {meta['rank_interval']}, all models at once. {MARK} preliminary: fewer than "
             f"{preliminary_below:,} votes. Tie rule {meta['tie_rule']!r}.",
             *[f"Note: {note}." for note in meta["notes"]], "",
             f"| Rank (UB) | Rank (simultaneous {level}) | Model | Arena Score | {level} CI | Votes |",
             "|---:|:---:|---|---:|:---:|---:|"]
    for r in table.itertuples(index=False):
        ranks = f"{r.rank_lower}" if r.rank_lower == r.rank_upper else f"{r.rank_lower}–{r.rank_upper}"
        name = str(r.model).replace("|", "\\|") + (f" {MARK}" if r.judgments < preliminary_below else "")
        ci = f"+{_elo(r.upper - r.score)}/−{_elo(r.score - r.lower)}"
        lines.append(f"| {r.rank_ub} | {ranks} | {name} | {_elo(r.score)} | {ci} | {r.judgments:,} |")
    return "\n".join(lines) + "\n"


def catalog(tables: dict) -> dict:
    """arena-catalog's shape of {category: elo-scale table}: {category: {model: {rating,
    rating_q025, rating_q975}}} (the bounds of the table's interval)."""
    return {category: {str(r.model): {"rating": float(r.score), "rating_q025": float(r.lower),
                                      "rating_q975": float(r.upper)} for r in table.itertuples(index=False)}
            for category, table in tables.items()}


def catalog_text(tables: dict) -> str:
    return json.dumps(catalog(tables), indent=1) + "\n"
