"""The served ranking read as a leaderboard (``GET ranking`` and the live page): an Elo-style scale
with its anchor stated, the simultaneous rank intervals of :func:`study.leaderboard.rank_intervals`,
LMArena's Rank (UB), and items with few judgments marked preliminary.

* **Scale.** ``logit``: the ranker's own scores x'theta^d_i.  ``elo``: the conversion of
  :mod:`study.leaderboard.board` (LMArena's: P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400))),
  R_i = 1000 + 400/ln(10) x'theta^d_i, so that 1000 is the items' average (the ranker's scores sum to
  0 over the items), or shifted so that the ``anchor`` item has ``anchor_rating``.  Score, bounds,
  SE and estimate move together; the order, the intervals' coverage and the ranks do not change.
* **Rank intervals** (``rank_lower``, ``rank_upper``): simultaneous over all items at ``level``
  (Mogstad, Romano, Shaikh and Wilhelm 2024, step-down; fixed-time: they hold at this look), from
  the covariance of the scores x'theta^d_i: (I (x) x') Phi (I (x) x)' with Phi the debiased
  estimator's covariance (model-based Phi_11 or sandwich, as the table's intervals).
* **Rank (UB)** (``rank_ub``): 1 + the number of items whose lower bound lies above this item's upper
  bound, by the table's own intervals (marginal: CIs or confidence sequences, not simultaneous).
* **Preliminary**: an item with fewer than ``min_judgments`` comparisons told (default
  :data:`MIN_JUDGMENTS`); it is ranked as any other, and marked.
"""
from __future__ import annotations

import numpy as np

# study.leaderboard (its Elo-style conversion, its rank intervals) is imported where used: the
# serve command reads MIN_JUDGMENTS for its --help without importing scipy

MIN_JUDGMENTS = 30  # comparisons below which an item's place is marked preliminary
RANK_DRAWS = 10_000  # Gaussian draws behind the rank intervals' critical value (Monte Carlo error ~0.002)
SCALE_COLUMNS = ("score", "lower", "upper", "estimate")


def score_root(result, x) -> np.ndarray:
    """R (n, n) with R'R the covariance of the scores x'theta^d_i: the symmetric square root of
    (I (x) x') Phi (I (x) x)' (its null direction, the scores' sum, is kept at zero)."""
    n, d = result.theta_d.shape
    A = np.kron(np.eye(n), np.asarray(x, dtype=float)[None, :])  # (n, n d)
    cov = A @ result.phi11 @ A.T
    w, V = np.linalg.eigh((cov + cov.T) / 2.0)
    return np.sqrt(np.clip(w, 0.0, None))[:, None] * V.T


def rank_ub(lower, upper) -> np.ndarray:
    """LMArena's Rank (UB) of each item: 1 + #{j : lower_j > upper_i}."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    return 1 + (lower[None, :] > upper[:, None]).sum(axis=1)


def elo_offset(scores: dict, anchor, anchor_rating: float) -> float:
    """The Elo-style scale's offset: 1000, or the rating that puts ``anchor`` at ``anchor_rating``."""
    from ..leaderboard.board import ELO_CENTRE, ELO_PER_LOGIT

    if anchor is None:
        return ELO_CENTRE
    return float(anchor_rating) - ELO_PER_LOGIT * scores[anchor]


def anchor_text(scale: str, anchor, anchor_rating: float) -> str:
    if scale == "logit":
        return "logit scale: x'theta^d_i, the items' scores summing to 0"
    where = (f"{anchor} at {anchor_rating:g}" if anchor is not None else "1000 the items' average")
    return f"Elo-style scale: 400/ln(10) x the logit score, anchored with {where}"


def standings(rows: list, result, x, items: list, *, level: float, scale: str = "elo", anchor=None,
              anchor_rating: float = 1000.0, min_judgments: int = MIN_JUDGMENTS, seed: int = 0) -> dict:
    """``rows`` (the ranking's JSON rows, best first) with rank_lower, rank_upper, rank_ub,
    judgments and preliminary added and, on the Elo-style scale, score, lower, upper, estimate and se
    converted; and the fields that say how (scale, anchor, rank_interval, min_judgments).
    ``result``: the debiased result behind the rows (None or unavailable: no intervals yet)."""
    judged = {s["item"]: s["judgments"] for s in items}
    for row in rows:
        row["judgments"] = judged[row["item"]]
        row["preliminary"] = row["judgments"] < min_judgments
        row["rank_lower"] = row["rank_upper"] = row["rank_ub"] = None
    about = {"scale": scale, "anchor": anchor, "anchor_rating": anchor_rating if scale == "elo" else None,
             "scale_text": anchor_text(scale, anchor, anchor_rating), "min_judgments": min_judgments,
             "rank_interval": None}
    bounded = all(r["lower"] is not None and r["upper"] is not None for r in rows)
    if bounded:
        for row, ub in zip(rows, rank_ub([r["lower"] for r in rows], [r["upper"] for r in rows])):
            row["rank_ub"] = int(ub)
    if bounded and result is not None and result.available:
        from ..leaderboard.ranks import rank_intervals

        score = result.theta_d @ np.asarray(x, dtype=float)
        ranks = rank_intervals(score, score_root(result, x), level=level, draws=RANK_DRAWS, seed=seed)
        for row in rows:
            row.update(rank_lower=int(ranks.lower[row["item"]]), rank_upper=int(ranks.upper[row["item"]]))
        about["rank_interval"] = (f"simultaneous {level:.0%} rank intervals over all {len(rows)} items (Mogstad, "
                                  f"Romano, Shaikh & Wilhelm 2024; step-down, {RANK_DRAWS:,} draws, seed {seed}; "
                                  "fixed-time); Rank (UB): 1 + the items whose lower bound exceeds this one's upper "
                                  "bound (the marginal intervals of the table)")
    if scale == "elo":
        from ..leaderboard.board import ELO_PER_LOGIT

        offset = elo_offset({r["name"]: r["score"] for r in rows}, anchor, anchor_rating)
        for row in rows:
            for column in SCALE_COLUMNS:
                if row[column] is not None:
                    row[column] = offset + ELO_PER_LOGIT * row[column]
            if row["se"] is not None:
                row["se"] = ELO_PER_LOGIT * row["se"]
    return about
