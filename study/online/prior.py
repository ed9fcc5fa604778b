"""A ranker that starts from a file of earlier judgments: ``ranker_from_judgments(path, file, ...)``.

The paper lets the initial estimate theta(0) be "an estimator based on earlier samples or prior
knowledge" (section "Two-Stage Ranking Bandit Method"); this is that.  The earlier judgments (any
file ``python -m study.leaderboard`` reads: LMArena battles, judgments, counts, a ranker's export)
are fitted -- the sum-zero MLE of the contextual BTL model, or with ``ridge`` its penalised
version, refused with the leaderboard's one-line messages where it does not exist -- and a new
ranker is created with that fit as ``theta0`` and the file's models as ``items``.  How they count:

* **the policy** sees them through theta(0) only: its first choices exploit it (RB's argmax at t = 1
  is the earlier leader at that context), and in stage 1 the tie-break (``tie_break="nearest"``)
  keeps theta(0) in the directions the ranker's own comparisons do not identify yet;
* **the estimate and its intervals** are the fit of the ranker's own told rows: the earlier
  judgments are not rows of its likelihood (so the intervals are those of the new comparisons; a
  leaderboard of both is ``python -m study.leaderboard earlier.parquet export.parquet``, with the
  ranker's rows from :func:`study.online.export.export_told`);
* **the clock and the regret accounting** count the ranker's asks only: t, the exploration
  schedule t^-alpha, T0, lambda_t and the horizon T start at the first ask, as for a ranker without
  a past (regret is measured only in simulations, against a truth, where no earlier file exists).

The store records theta(0) and the items (its creation arguments), so it reopens without the file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .config import MAX_ABS_THETA0
from .ranker import Ranker


def ranker_from_judgments(path, judgments, *, ridge: float = 0.0, tie_rule: str = "half", context=None,
                          category=None, features=None, min_judgments: int = 10, **arguments) -> Ranker:
    """A new :class:`Ranker` at ``path`` whose theta(0) is the fit of the earlier ``judgments`` (a
    path, a DataFrame, or a list of them; module docstring).  ``arguments`` are the Ranker's
    (``policy``, ``T``, ``seed``, ...); ``items`` and ``dim`` come from the file.

    Raises
    ------
    study.leaderboard.LeaderboardInputError
        (a ValueError) Earlier judgments a fit cannot be made from (one line naming the problem).
    ValueError
        A store already at ``path``, or bad ranker arguments.
    """
    from ..leaderboard import leaderboard

    for name in ("items", "n_items", "dim", "theta0"):
        if name in arguments:
            raise ValueError(f"{name} comes from the earlier judgments; do not pass it")
    if Path(path).exists() and Path(path).stat().st_size > 0:
        raise ValueError(f"{path}: a store exists already; a ranker starts from earlier judgments only when created")
    board = leaderboard(judgments, tie_rule=tie_rule, judge=None, se="model", ridge=ridge, context=context,
                        category=category, features=features, min_judgments=min_judgments, draws=100)
    theta0 = np.clip(board.theta, -MAX_ABS_THETA0, MAX_ABS_THETA0)
    return Ranker(path, items=list(board.models), dim=theta0.shape[1], theta0=theta0, **arguments)
