"""The leaderboard of a file (or frame) of judgments: read, checked, fitted, and its table at any
context, with intervals and simultaneous rank intervals from one covariance.

Steps: the rows are coded (:mod:`.battles`, :mod:`.contexts`); identical (pair, context) rows are
summed (:mod:`study.core.aggregate`: exact); bad input is refused (:mod:`.checks`); the scores are
the sum-zero MLE of the contextual BTL model (paper eq. ``lik``; ``ridge`` for eq. ``opt``), fitted
by Newton's method over the arrays (:mod:`study.core.batch`); their covariance is that of the
debiased estimator (eq. ``deb``): model-based (the paper's Phi_11), sandwich (each comparison a
unit) or cluster-robust by judge (each judge a unit: the rows are summed within a judge only);
``se="auto"`` clusters by judge where the file names one, else uses the sandwich.  At a context x
the score of model i is x'theta_i (the debiased estimate; the MLE itself without a ridge), its
interval x'theta_i -/+ z se (or the anytime-valid confidence sequence of :mod:`study.core.confseq`),
and its rank interval the simultaneous one of :mod:`.ranks`, from the same covariance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.linalg import lapack
from scipy.stats import norm

from ..core import _validate as check
from ..core.aggregate import aggregate
from ..core.batch import Rows, fit
from ..core.threads import one_blas_thread
from ..core.confseq import cs_factor
from ..core.contrasts import to_reduced
from ..core.inference import debias_rows
from . import checks
from .battles import Battles
from .files import LeaderboardInputError
from .published import rank_ub
from .ranks import DRAWS, rank_intervals

SE_CHOICES = ("auto", "model", "sandwich", "cluster")
# the fit's Hessian and the covariance behind the intervals are ((n - 1) d)^2 and the rank intervals n^2: a
# board of more is refused in one line before any of it is allocated (10^5 models would need 75 GiB)
MAX_MODELS = 2000
MAX_PARAMETERS = 4000
SCALES = ("logit", "elo")
ELO_PER_LOGIT = 400.0 / math.log(10.0)  # LMArena's scale: P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400))
ELO_CENTRE = 1000.0
SE_TEXT = {"model": "model-based SE (the paper's Phi_11: Bernoulli comparisons)",
           "sandwich": "sandwich SE (each comparison a unit; robust to ties)",
           "cluster": "judge-clustered sandwich SE (each judge a unit)"}


def on_scale(score, root, half_width: float, *, scale: str = "logit", anchor=None):
    """(score, lower, upper, se, rank_ub) of scores with covariance ``root' root`` on ``scale``, the
    intervals score -/+ ``half_width`` x se; ``anchor=(index, rating)`` (elo only): rating +
    400/ln(10) (s_i - s_a), each se that of the difference from the anchor model (zero for it).
    Rank (UB) is LMArena's, from the sum-to-zero marginal intervals (anchored or not).  The board's
    table and the style-controlled one (:mod:`.style_report`) both use it."""
    marginal = half_width * np.sqrt(np.einsum("pk,pk->k", root, root))
    ub = rank_ub(score - marginal, score + marginal)
    if anchor is not None:
        if scale != "elo":
            raise ValueError("an anchor is a rating on the elo scale: pass scale='elo' with anchor=(model, rating)")
        a = anchor[0]
        # the anchored rating is R + c (s_i - s_a): a difference of two estimates, so its error is
        # that of s_i - s_a (zero for the anchor itself), not the sum-to-zero s_i's
        root = root - root[:, a:a + 1]
        score = score - score[a]
    se = np.sqrt(np.einsum("pk,pk->k", root, root))
    lower, upper = score - half_width * se, score + half_width * se
    if scale == "elo":
        offset = ELO_CENTRE if anchor is None else float(anchor[1])
        score, lower, upper = (offset + ELO_PER_LOGIT * v for v in (score, lower, upper))
        se = ELO_PER_LOGIT * se
    return score, lower, upper, se, ub


@dataclass
class Pairs:
    """Aggregated rows (i < j where rows were summed): ``wins`` of j, ``ties``, ``m``; contexts as
    codes into the battles' ``contexts`` (``context``) or per row (``X``); ``clusters`` the judge
    codes where kept apart."""

    i: np.ndarray
    j: np.ndarray
    wins: np.ndarray
    ties: np.ndarray
    m: np.ndarray
    context: np.ndarray | None
    X: np.ndarray | None
    clusters: np.ndarray | None = None

    def rows(self, contexts, n_models: int) -> Rows:
        X = contexts[self.context] if self.context is not None else self.X
        return Rows(self.i, self.j, X, self.wins, self.ties, self.m, n_models, self.clusters)


def pairs_of(battles: Battles, by_judge: bool = False) -> Pairs:
    """The battles summed by (pair, context[, judge]) (:mod:`study.core.aggregate`)."""
    b = battles
    judges = b.judges if by_judge else None
    if b.context_of_row is not None:
        # few distinct contexts: the key is the (judge, context) code; the rows' X a constant stand-in
        Q = len(b.contexts)
        key = b.context_of_row.astype(np.int64) + (0 if judges is None else judges.astype(np.int64) * Q)
        rows = aggregate(b.i, b.j, np.ones((b.rows, 1)), b.wins, b.ties, b.m, key)
        key = rows.clusters
        return Pairs(rows.i, rows.j, rows.wins, rows.ties, rows.m, key % Q, None,
                     None if judges is None else key // Q)
    rows = aggregate(b.i, b.j, b.contexts, b.wins, b.ties, b.m, judges)
    return Pairs(rows.i, rows.j, rows.wins, rows.ties, rows.m, None, rows.X, rows.clusters)


@dataclass
class Leaderboard:
    """A fitted leaderboard: :meth:`table` at any context, :meth:`win_rates`, the figures
    (:mod:`.figures`).

    Attributes
    ----------
    battles : Battles
        The coded judgments.
    theta : ndarray, shape (n, d)
        The MLE (with ``ridge``: the penalised one).
    result : study.DebiasResult
        The debiased estimate and the covariance behind every interval (``result.se_method``).
    level, anytime, tightest_at, ridge, tie_rule, draws, seed
        How the intervals were made.
    """

    battles: Battles
    pairs: Pairs
    theta: np.ndarray
    result: object
    level: float = 0.95
    anytime: bool = False
    tightest_at: float | None = None
    ridge: float = 0.0
    tie_rule: str = "half"
    draws: int = DRAWS
    seed: int = 0
    newton_steps: int = 0
    _tables: dict = field(default_factory=dict, repr=False)

    @property
    def models(self) -> list:
        return self.battles.models

    @property
    def se_method(self) -> str:
        return self.result.se_method

    @property
    def default_context(self) -> np.ndarray:
        return self.battles.mean_context()

    def context(self, x=None) -> np.ndarray:
        """x as an array of length d (default: the mean context of the judgments); for one-hot
        categories also a category's name."""
        names = self.battles.context_names
        if x is None:
            return self.default_context
        if isinstance(x, str):
            matches = [k for k, name in enumerate(names) if name == x or name.split("=", 1)[-1] == x]
            if len(matches) != 1:
                raise ValueError(f"unknown context {x!r}; the contexts are {names}")
            point = np.zeros(len(names))
            point[matches[0]] = 1.0
            return point
        return check.finite_array("x", x, ndim=1, shape=(len(names),))

    def covariance_root(self, x) -> np.ndarray:
        """Y ((n-1) d, n) with Y'Y the covariance of the scores x'theta_i: U'^{-1} (Q' (x) x)."""
        n, d = self.theta.shape
        columns = np.einsum("ai,e->aei", to_reduced(np.eye(n)), x).reshape((n - 1) * d, n)
        solved, info = lapack.dtrtrs(self.result.factor, columns, lower=0, trans=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dtrtrs failed (info={info})")
        return solved

    def half_width(self) -> float:
        """The interval's half width in SEs: z, or the confidence sequence's g(eta)."""
        if self.anytime:
            return float(cs_factor(self.result.comparisons, self.tightest_at, self.level))
        return float(norm.ppf(0.5 + self.level / 2.0))

    def table(self, x=None, *, scale: str = "logit", anchor=None) -> pd.DataFrame:
        """The leaderboard at context ``x`` (default: the mean context), best first: rank (by score),
        model, score, lower, upper, se, rank_lower, rank_upper (simultaneous), rank_ub (LMArena's Rank
        (UB), from the marginal intervals: :mod:`.published`), judgments, wins, ties, win_rate (of that
        category's rows where ``x`` is one of one-hot categories).  ``scale="elo"``: score, lower, upper
        and se on LMArena's scale, 1000 + 400/ln(10) x'theta; with ``anchor=(model, rating)`` (elo
        only) rating + 400/ln(10) x'(theta_i - theta_a), each interval and se that of the difference
        from the anchor model (zero for it)."""
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        if anchor is not None:
            if scale != "elo":
                raise ValueError("an anchor is a rating on the elo scale: pass scale='elo' with anchor=(model, rating)")
            if anchor[0] not in self.models:
                raise ValueError(f"anchor model {anchor[0]!r} is not on the leaderboard")
            anchor = (anchor[0], check.real("anchor rating", anchor[1]))
        x = self.context(x)
        key = (x.tobytes(), scale, anchor)
        if key in self._tables:
            return self._tables[key].copy()
        score = self.result.theta_d @ x
        with one_blas_thread():
            root = self.covariance_root(x)
            ranks = rank_intervals(score, root, level=self.level, draws=self.draws, seed=self.seed)
        score, lower, upper, se, ub = on_scale(score, root, self.half_width(), scale=scale, anchor=None if anchor is None
                                               else (self.models.index(anchor[0]), anchor[1]))
        stats = self.model_stats(x)
        order = np.argsort(-score, kind="stable")
        frame = pd.DataFrame({"rank": np.arange(1, len(order) + 1), "model": np.asarray(self.models, object)[order],
                              "score": score[order], "lower": lower[order], "upper": upper[order], "se": se[order],
                              "rank_lower": ranks.lower[order], "rank_upper": ranks.upper[order],
                              "rank_ub": ub[order]})
        frame = pd.concat([frame, stats.iloc[order].reset_index(drop=True)], axis=1)
        frame.attrs.update(self.describe(x, scale, ranks))
        frame.attrs["anchor"] = None if anchor is None else {"model": anchor[0], "rating": float(anchor[1])}
        self._tables[key] = frame
        return frame.copy()

    def at(self, x, **options) -> pd.DataFrame:
        """The leaderboard at context ``x`` (:meth:`table`)."""
        return self.table(x, **options)

    def model_stats(self, x=None) -> pd.DataFrame:
        """judgments (comparisons), wins (outright), ties and win_rate (wins + ties/2 over judgments) per model:
        of the category's rows where ``x`` is one category of one-hot contexts, else of every row."""
        p, n = self.pairs, len(self.models)
        if x is not None and p.context is not None and self.battles.context_names[0] != "1":
            contexts = self.battles.contexts
            one_hot = contexts.shape[0] == contexts.shape[1] and np.array_equal(contexts, np.eye(len(contexts)))
            if one_hot and np.count_nonzero(x) == 1 and float(np.max(x)) == 1.0:
                rows = p.context == int(np.argmax(x))
                p = Pairs(p.i[rows], p.j[rows], p.wins[rows], p.ties[rows], p.m[rows], None, None)
        judgments = np.bincount(p.i, p.m, n) + np.bincount(p.j, p.m, n)
        wins = np.bincount(p.j, p.wins, n) + np.bincount(p.i, p.m - p.wins - p.ties, n)
        ties = np.bincount(p.i, p.ties, n) + np.bincount(p.j, p.ties, n)
        return pd.DataFrame({"judgments": judgments.astype(np.int64), "wins": wins.astype(np.int64),
                             "ties": ties.astype(np.int64), "win_rate": (wins + 0.5 * ties) / judgments})

    def win_rates(self) -> np.ndarray:
        """(n, n): the share of a's comparisons with b that a won (a tie half); NaN where never compared."""
        p, n = self.pairs, len(self.models)
        m = np.zeros((n, n))
        won = np.zeros((n, n))
        np.add.at(m, (p.i, p.j), p.m)
        np.add.at(won, (p.j, p.i), p.wins + 0.5 * p.ties)  # j's score against i
        np.add.at(won, (p.i, p.j), p.m - p.wins - 0.5 * p.ties)
        m = m + m.T
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(m > 0, won / m, np.nan)

    def describe(self, x, scale, ranks) -> dict:
        b = self.battles
        kind = (f"{self.level:.0%} confidence sequence (anytime-valid, tightest after {self.tightest_at:,.0f} "
                "comparisons)" if self.anytime else f"{self.level:.0%} CI")
        return {"source": b.source, "models": b.n_models, "rows": int(b.rows), "comparisons": float(b.m.sum()),
                "judges": int(b.judge_count), "tie_rule": self.tie_rule, "se_method": self.se_method,
                "se_text": SE_TEXT[self.se_method], "interval": kind, "level": self.level,
                "scale": scale, "ridge": self.ridge, "context": [float(v) for v in x],
                "context_names": list(b.context_names), "contextual": bool(b.contextual),
                "rank_interval": (f"simultaneous {ranks.level:.0%} rank intervals (Mogstad, Romano, Shaikh & Wilhelm "
                                  f"2024; step-down, {ranks.draws:,} draws, seed {self.seed})"),
                "notes": list(b.notes)}


def estimate(battles: Battles, *, tie_rule: str = "half", se: str = "auto", level: float = 0.95, ridge: float = 0.0,
             anytime: bool = False, tightest_at=None, min_judgments: int = 10, draws: int = DRAWS, seed: int = 0,
             progress=None) -> Leaderboard:
    """Check, fit and debias ``battles`` (module docstring); :class:`LeaderboardInputError` on bad input."""
    level = check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    ridge = check.real("ridge", ridge, low=0.0)
    min_judgments = check.integer("min_judgments", min_judgments, low=1)
    draws = check.integer("draws", draws, low=100)
    if se not in SE_CHOICES:
        raise ValueError(f"se must be one of {SE_CHOICES}, got {se!r}")
    if se == "auto":
        se = "cluster" if battles.judges is not None else "sandwich"
    if se == "cluster" and battles.judges is None:
        raise LeaderboardInputError(f"{battles.source}: se='cluster' needs a judge column (--judge COLUMN)")
    if se == "cluster" and battles.judge_count < 2:
        raise LeaderboardInputError(f"{battles.source}: one judge only: clustering by judge needs at least two")
    if anytime:
        if tightest_at is None:  # the guarantee wants it fixed before the data: say that it was not
            tightest_at = float(battles.m.sum())
            battles.notes.append(f"the confidence sequences are tightest at this data's {tightest_at:,.0f} comparisons; "
                                 "for their guarantee fix tightest_at (--tightest-at) before looking")
        tightest_at = check.real("tightest_at", tightest_at, low=0.0, low_open=True)
    step = progress or (lambda *args: None)
    source, models = battles.source, battles.models
    parameters = (len(models) - 1) * battles.contexts.shape[1]
    if len(models) > MAX_MODELS or parameters > MAX_PARAMETERS:
        raise LeaderboardInputError(
            f"{source}: {len(models):,} models" + (f" x {battles.contexts.shape[1]} context dimensions" if
                                                   battles.contexts.shape[1] > 1 else "") +
            f"; a board holds at most {MAX_MODELS:,} models and {MAX_PARAMETERS:,} scores ((models - 1) x d): its "
            "covariance grows with their square; drop models with few votes (--min-votes N) or split the log")
    if battles.rows == 0:
        raise LeaderboardInputError(f"{source}: no judgment rows left{' (' + '; '.join(battles.notes) + ')' if battles.notes else ''}")
    step("aggregate")
    pairs = pairs_of(battles)
    step("check")
    judgments = np.bincount(pairs.i, pairs.m, len(models)) + np.bincount(pairs.j, pairs.m, len(models))
    checks.check_names(source, models, judgments, min_judgments, battles.problems)
    checks.check_connected(source, models, pairs.i, pairs.j)
    if ridge == 0.0:
        checks.check_separable(source, models, pairs, battles.contexts, battles.context_names)
    step("fit")
    rows = pairs.rows(battles.contexts, len(models))
    fitted = fit(rows, ridge=ridge, progress=lambda residual, target: step("fit", residual, target))
    if fitted is None:
        raise LeaderboardInputError(
            f"{source}: the contexts do not identify the scores (some model's comparisons span fewer than "
            f"d = {battles.contexts.shape[1]} directions of the contexts); use fewer context columns or pass a ridge")
    if ridge == 0.0:
        checks.check_separable(source, models, pairs, battles.contexts, battles.context_names, fitted, rows)
    if not fitted.converged:
        raise LeaderboardInputError(
            f"{source}: the fit did not converge (KKT residual {fitted.kkt_residual:.3g}): the data are nearly separable "
            "or the contexts badly scaled; pass a ridge (--ridge 1) or rescale the context columns")
    step("covariance")
    rows_se = rows
    if se == "cluster":
        by_judge = pairs_of(battles, by_judge=True)
        checks.check_judges(source, models, by_judge, battles.judge_labels)
        rows_se = by_judge.rows(battles.contexts, len(models))
    with one_blas_thread():
        result = debias_rows(rows_se, fitted.theta, se=se)
    if not result.available:
        raise LeaderboardInputError(f"{source}: the {se} covariance is singular (condition number "
                                    f"{result.condition:.3g}): too few judgments, or none with residual variance")
    return Leaderboard(battles=battles, pairs=pairs, theta=fitted.theta, result=result, level=level,
                       anytime=anytime, tightest_at=tightest_at, ridge=ridge, tie_rule=tie_rule, draws=draws,
                       seed=int(seed), newton_steps=fitted.steps)
