"""Leaderboards from the judgments teams already have: ``python -m study.leaderboard FILE`` and
:func:`leaderboard` on a DataFrame.

A file of pairwise judgments -- LMArena/FastChat battle logs as they are, the project's judgments
files, or counts such as a ranker's export (CSV, Parquet, JSON, JSON Lines) -- becomes a table of
rank, model, score (logit scale, or LMArena's Elo-style scale), interval (CI or anytime-valid
confidence sequence), simultaneous rank interval, judgments, win rate and ties, written as
Markdown, CSV and JSON, with figures.  Outcomes are counted as everywhere in the project
(:mod:`study.core.outcomes`) under one stated tie rule (:mod:`.battles`); contexts come from
columns or prompt text (:mod:`.contexts`), and the table can be had at any context.  The modules:

* :mod:`.files`, :mod:`.battles`, :mod:`.contexts`, :mod:`.read` -- reading and coding;
* :mod:`.checks` -- the refusals before any fit (few judgments, near names, disconnected graphs,
  separable data), one line each;
* :mod:`.board` -- the fit, the covariance (model, sandwich, judge-clustered), the table;
* :mod:`.ranks` -- simultaneous rank intervals (Mogstad, Romano, Shaikh & Wilhelm 2024);
* :mod:`.published` -- LMArena's conventions: Rank (UB), Arena Score, +x/-y, votes, preliminary
  marks, dropping low-vote models, arena-catalog's JSON;
* :mod:`.output`, :mod:`.figures`, :mod:`.__main__` -- what is written and drawn, the command.
* :mod:`.style`, :mod:`.style_report` -- style control (LMArena's ``Rank (StyleCtrl)``) and a
  position term;
* :mod:`.audit`, :mod:`.audit_report` -- the board audit's seven probes.

docs/leaderboard.md is the guide.
"""
from __future__ import annotations

from .battles import TIE_RULES, Battles
from .board import SCALES, SE_CHOICES, Leaderboard, estimate
from .files import LeaderboardInputError
from .published import drop_below
from .ranks import RankIntervals, rank_intervals
from .read import read_battles

__all__ = ["leaderboard", "Leaderboard", "read_battles", "Battles", "LeaderboardInputError", "rank_intervals",
           "RankIntervals", "TIE_RULES", "SE_CHOICES", "SCALES"]


def leaderboard(data, *, tie_rule: str = "half", se: str = "auto", level: float = 0.95, ridge: float = 0.0,
                anytime: bool = False, tightest_at=None, judge="auto", category=None, features=None, context=None,
                embed=None, intercept: bool = True, dim: int = 10, embedder=None, min_judgments: int = 10,
                min_votes=None, aliases=None, normalise_names: bool = False, draws: int = 10_000, seed: int = 0,
                progress=None) -> Leaderboard:
    """The leaderboard of a file or frame of pairwise judgments.

    Parameters
    ----------
    data : str, Path, DataFrame, pyarrow.Table, list of them, or Battles
        The judgments (:func:`read_battles`).
    tie_rule : {"half", "drop-bothbad", "drop"}
        What a tie is: half a win for each side (both kinds, as LMArena counts them), or left out
        (``tie (bothbad)`` only, or every tie).
    se : {"auto", "model", "sandwich", "cluster"}
        The covariance behind every interval: the paper's model-based Phi_11, the sandwich (each
        comparison a unit), or clustered by judge (each judge a unit); ``"auto"``: by judge where
        the data name one, else the sandwich.
    level : float
        Coverage of the intervals and (simultaneous) of the rank intervals.
    ridge : float
        A ridge penalty (paper eq. ``opt``) for separable data; 0: the MLE.
    anytime, tightest_at
        Anytime-valid confidence sequences instead of CIs, tightest after ``tightest_at`` comparisons
        (fix it before looking at the data; default, with a note: the data's own number).
    judge, category, features, context, embed, intercept, dim, embedder
        Judges and contexts (:func:`read_battles`).
    aliases, normalise_names
        Names as a dirty log writes them: an ``{alias: name}`` map or a CSV/JSON file of it, and
        merging names equal up to case and spaces (:func:`read_battles`).
    min_judgments : int
        Models with fewer comparisons are refused (a misspelt name, usually).
    min_votes : int, optional
        Models with fewer comparisons (in the data given) are *dropped*, with a note, instead of
        refused (LMArena's practice); 0 keeps every model.  Given, it replaces ``min_judgments``.
    draws, seed
        Gaussian draws behind the rank intervals' critical value, and their seed.
    progress : callable, optional
        Called with the stage's name (and, while fitting, the KKT residual and its target).

    Returns
    -------
    Leaderboard
        ``table(x=None, scale="logit", anchor=None)`` (a DataFrame at context x, default the mean
        context), ``at(x)``, ``win_rates()``, ``theta``, ``result`` (a :class:`study.DebiasResult`).

    Raises
    ------
    LeaderboardInputError
        (a ValueError) Input a leaderboard cannot be made from, in one line naming the file, row,
        column or models.

    Examples
    --------
    >>> import pandas as pd
    >>> from study.leaderboard import leaderboard
    >>> votes = pd.DataFrame({"model_a": ["a", "b", "a"] * 20, "model_b": ["b", "c", "c"] * 20,
    ...                       "winner": ["model_a", "model_a", "model_a", "model_b", "tie"] * 12})
    >>> board = leaderboard(votes)          # 60 battles: a beats b and c more often than not, ...
    >>> print(board.table()[["rank", "model", "rank_lower", "rank_upper"]].to_string(index=False))
     rank model  rank_lower  rank_upper
        1     a           1           2
        2     b           1           3
        3     c           2           3
    """
    step = progress or (lambda *args: None)
    if isinstance(data, Battles):
        battles = data
    else:
        step("read")
        battles = read_battles(data, tie_rule=tie_rule, judge=judge, category=category, features=features,
                               context=context, embed=embed, intercept=intercept, dim=dim, embedder=embedder,
                               aliases=aliases, normalise_names=normalise_names)
    if min_votes is not None:
        battles = drop_below(battles, min_votes)
        min_judgments = 1
    return estimate(battles, tie_rule=tie_rule, se=se, level=level, ridge=ridge, anytime=anytime,
                    tightest_at=tightest_at, min_judgments=min_judgments, draws=draws, seed=seed, progress=progress)
