"""How good are the judges?  Per-judge statistics of a battle log, agreement on the battles two
judges saw, and the judges whose votes a fitted model cannot explain.

Input: a battle log (a path :mod:`.files` reads, or a DataFrame) with ``model_a``, ``model_b``,
``winner`` (``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``; ``both_bad`` read as the latter)
and ``judge``; optional columns:

* ``left`` (the name of the model shown on the left) or ``side`` (``a``/``model_a``: model_a was on
  the left; ``b``/``model_b``: model_b was).  Without either, model_a is taken as the left one, as
  LMArena's page shows it;
* ``seconds`` (the time the judge took for the vote), else ``tstamp`` (the vote's time in seconds):
  the gaps between a judge's consecutive votes;
* ``question_id``: battles of the same question and the same pair of models by two or more judges
  are the *overlapped* battles, on which agreement is measured.

Per judge (:func:`judge_report`): votes, median seconds per vote, share of ties and of both-bad,
**position bias** (the share of left wins among decisive votes, with a Wilson interval; also
overall), the agreement share on overlapped battles, and two tests against the fitted
Bradley-Terry model (scores ``s``; ``p_k = 1/(1 + exp(s_right - s_left))`` the fitted chance
that the left model of decisive vote k wins, ``y_k = 1`` if it did, ``eta_k = logit(p_k)``):

* **side** -- the score test of a left-side offset ``b`` in ``P(left wins) = 1/(1 + exp(-(eta + b)))``
  at ``b = 0``: ``z = sum(y - p) / sqrt(sum p(1 - p))``, two-sided (a left or a right bias);
* **misfit** -- the score test of the judge's discrimination ``beta`` in ``P(left wins) =
  1/(1 + exp(-beta eta))`` at ``beta = 1``: ``z = sum (y - p) eta / sqrt(sum p(1 - p) eta^2)``,
  one-sided for ``beta < 1`` (votes that follow the scores less than the model says: random or
  contrarian voting).  It is also the standardized log-likelihood of the judge's votes under the
  fitted model (``log L - E log L = sum (y - p) eta``).

Their p-values are those of the null that the judge votes as the fitted model says, by the
saddlepoint approximation of the statistics' distributions (:func:`null_pvalues`): the normal
approximation's tails were too light at Holm's thresholds.  The ``2 G`` p-values of the G
tested judges (those with at least ``min_decisive`` decisive votes) are adjusted together by Holm's
step-down procedure, so that an honest panel has any judge flagged with probability about
``alpha`` or less (measured: ``benchmarks/judges.py``).  The scores are fitted to the decisive
votes, each judge's own included, which makes the tests a little conservative.

**Agreement**: Krippendorff's alpha (nominal, four categories: the first model of the pair in name
order better, the second better, tie, both bad; any number of judges per battle), with a percentile
bootstrap interval over the overlapped battles (seeded).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special, stats

from .battles import LMARENA_WINNERS
from .files import LeaderboardInputError, read_table, table_of_frame

__all__ = ["judge_report", "JudgeReport", "wilson", "krippendorff_alpha", "main"]

SIDES = {"a": 0, "model_a": 0, "left": 0, "b": 1, "model_b": 1, "right": 1}
COLUMNS = ("model_a", "model_b", "winner", "judge", "left", "side", "seconds", "tstamp", "question_id")


def _error(source, text):
    return LeaderboardInputError(f"{source}: {text}")


def wilson(successes, n, level: float = 0.95):
    """The Wilson score interval (lower, upper) of a binomial proportion; (nan, nan) when n = 0."""
    successes, n = np.asarray(successes, float), np.asarray(n, float)
    z = stats.norm.ppf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = successes / n
        centre = (share + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def krippendorff_alpha(units) -> float:
    """Krippendorff's alpha for nominal values: ``units`` is a list of lists of category codes
    (0, 1, ...), one list per unit with the values its judges gave; units with fewer than two values
    are not pairable and are ignored.  ``1 - (n - 1) sum_{c != k} o_ck / sum_{c != k} n_c n_k``
    with the coincidence matrix o (Krippendorff 2011, "Computing Krippendorff's alpha-reliability");
    nan when every pairable value is the same."""
    return _alpha_of(_coincidences(units))


def _coincidences(units):
    """Per pairable unit, its row of the flattened coincidence matrix (units x C*C)."""
    units = [np.asarray(u, dtype=np.intp) for u in units if len(u) >= 2]
    if not units:
        return np.zeros((0, 1, 1))
    C = int(max(u.max() for u in units)) + 1
    out = np.zeros((len(units), C, C))
    for row, values in enumerate(units):
        counts = np.bincount(values, minlength=C).astype(float)
        out[row] = (np.outer(counts, counts) - np.diag(counts)) / (len(values) - 1)
    return out


def _alpha_of(coincidence) -> float:
    o = coincidence.sum(axis=0)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    expected = n * n - (n_c ** 2).sum()  # sum over c != k of n_c n_k
    if n < 2 or expected <= 0:
        return math.nan
    observed = o.sum() - np.trace(o)
    return float(1.0 - (n - 1) * observed / expected)


@dataclass
class JudgeReport:
    """The judge report of a battle log (module docstring).

    Attributes
    ----------
    judges : DataFrame
        One row per judge: ``votes``, ``median_seconds``, ``tie_share``, ``bothbad_share``,
        ``decisive``, ``left_share`` with ``left_lower``/``left_upper`` (Wilson), ``side_z``/
        ``side_p`` and ``misfit_z``/``misfit_p`` (the tests), ``overlapped`` and ``agree_share``,
        ``flagged`` and ``reason``.
    overall : dict
        ``votes``, ``decisive``, ``left_share``, ``left_lower``, ``left_upper`` of the whole panel.
    agreement : dict
        ``battles`` (overlapped), ``pairs`` (pairs of votes on them), ``agree_share``, ``alpha``,
        ``lower``, ``upper`` (the bootstrap interval of alpha).
    level, alpha : float
        The intervals' coverage; the family-wise level of the flags.
    notes : list of str
    """
    judges: pd.DataFrame
    overall: dict
    agreement: dict
    level: float
    alpha: float
    notes: list = field(default_factory=list)

    @property
    def flagged(self) -> list:
        """The flagged judges' names."""
        return self.judges.loc[self.judges["flagged"], "judge"].tolist()

    def to_markdown(self) -> str:
        """The report as Markdown text."""
        pct = f"{self.level:.0%}"
        o, a = self.overall, self.agreement
        lines = [f"Judge report: {len(self.judges)} judges, {o['votes']:,} votes ({o['decisive']:,} decisive).",
                 f"Left wins among decisive votes: {_num(o['left_share'])} ({pct} Wilson CI "
                 f"{_num(o['left_lower'])} to {_num(o['left_upper'])}).",
                 f"Agreement on {a['battles']:,} overlapped battles ({a['pairs']:,} pairs of votes): "
                 f"{_num(a['agree_share'])} agree; Krippendorff's alpha {_num(a['alpha'])} "
                 f"({pct} bootstrap CI {_num(a['lower'])} to {_num(a['upper'])}).",
                 f"Flags: Holm-adjusted score tests (left-side offset, two-sided; discrimination below the fitted "
                 f"model's, one-sided) at family-wise level {self.alpha:g}.", "",
                 "| judge | votes | median s | ties | both bad | left share | left CI | side p | misfit p "
                 "| overlapped | agree | flag |",
                 "|---|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---|"]
        for r in self.judges.itertuples():
            lines.append(f"| {r.judge} | {r.votes:,} | {_num(r.median_seconds, 1)} | {_num(r.tie_share)} | "
                         f"{_num(r.bothbad_share)} | {_num(r.left_share)} | {_num(r.left_lower)} to "
                         f"{_num(r.left_upper)} | {_p(r.side_p)} | {_p(r.misfit_p)} | {r.overlapped:,} | "
                         f"{_num(r.agree_share)} | {r.reason} |")
        lines += [f"\nNote: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The report as JSON-ready values (NaN as None)."""
        def clean(value):
            if isinstance(value, (float, np.floating)):
                return None if not math.isfinite(value) else float(value)
            if isinstance(value, (np.integer,)):
                return int(value)
            if isinstance(value, np.bool_):
                return bool(value)
            return value
        return {"judges": [{k: clean(v) for k, v in row.items()} for row in self.judges.to_dict("records")],
                "overall": {k: clean(v) for k, v in self.overall.items()},
                "agreement": {k: clean(v) for k, v in self.agreement.items()},
                "level": self.level, "alpha": self.alpha, "flagged": self.flagged, "notes": list(self.notes)}


def _num(value, digits=3):
    return "" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _p(value):
    return "" if not math.isfinite(value) else f"{value:.2g}"


def _frame(data):
    """(DataFrame, source, kind) of a path or a frame."""
    if isinstance(data, pd.DataFrame):
        return data.reset_index(drop=True), "frame", "frame"
    if hasattr(data, "column_names"):  # an Arrow table
        return table_of_frame(data).to_pandas(), "frame", "frame"
    table, kind = read_table(data, set(COLUMNS))
    return table.to_pandas(), str(data), kind


def _where(kind, row, column):
    from .files import where
    return where(kind, row, column)


def _text(frame, name, source, kind):
    if name not in frame.columns:
        raise _error(source, f"no column {name!r} (found {list(frame.columns)})")
    values = frame[name]
    bad = values.isna() | (values.astype(str).str.strip() == "")
    if bad.any():
        raise _error(source, f"{_where(kind, int(np.flatnonzero(bad.to_numpy())[0]), name)}: empty value")
    return values.astype(str).to_numpy()


def _decode(frame, source, kind):
    """Coded arrays of the battle log: a, b (names), winner code, judge, left is model_b, seconds, question."""
    a, b = _text(frame, "model_a", source, kind), _text(frame, "model_b", source, kind)
    judge = _text(frame, "judge", source, kind)
    same = np.flatnonzero(a == b)
    if same.size:
        raise _error(source, f"{_where(kind, int(same[0]), 'model_b')}: the model is compared with itself")
    raw = _text(frame, "winner", source, kind)
    winner = np.array([LMARENA_WINNERS.get(v.strip().lower(), -1) for v in raw], dtype=np.intp)
    if (winner < 0).any():
        row = int(np.flatnonzero(winner < 0)[0])
        raise _error(source, f"{_where(kind, row, 'winner')}: unknown winner value {raw[row]!r}; expected 'model_a', "
                             "'model_b', 'tie' or 'tie (bothbad)'")
    if "left" in frame.columns:
        left = _text(frame, "left", source, kind)
        bad = np.flatnonzero((left != a) & (left != b))
        if bad.size:
            raise _error(source, f"{_where(kind, int(bad[0]), 'left')}: {left[bad[0]]!r} is neither model_a "
                                 "nor model_b")
        b_left = left == b
    elif "side" in frame.columns:
        side = _text(frame, "side", source, kind)
        code = np.array([SIDES.get(v.strip().lower(), -1) for v in side])
        if (code < 0).any():
            row = int(np.flatnonzero(code < 0)[0])
            raise _error(source, f"{_where(kind, row, 'side')}: unknown side {side[row]!r}; expected 'a' or 'b' (the "
                                 "model shown on the left)")
        b_left = code == 1
    else:
        b_left = np.zeros(len(a), bool)
    seconds = _seconds(frame, judge, source, kind)
    question = _text(frame, "question_id", source, kind) if "question_id" in frame.columns else None
    return a, b, winner, judge, b_left, seconds, question


def _seconds(frame, judge, source, kind):
    name = "seconds" if "seconds" in frame.columns else "tstamp" if "tstamp" in frame.columns else None
    if name is None:
        return None
    values = pd.to_numeric(frame[name], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _error(source, f"{_where(kind, row, name)}: expected a finite number of seconds >= 0, "
                             f"got {frame[name].iloc[row]!r}")
    if name == "seconds":
        return values
    gaps = np.full(len(values), np.nan)  # a vote's time: the gap since the judge's previous vote
    order = np.lexsort((values, judge))
    same = judge[order][1:] == judge[order][:-1]
    gaps[order[1:][same]] = np.diff(values[order])[same]
    return gaps


def _scores(a, b, winner, scores):
    if scores is None:
        from . import leaderboard
        board = leaderboard(pd.DataFrame({"model_a": a, "model_b": b,
                                          "winner": np.array(list(LMARENA_WINNERS))[winner]}),
                            tie_rule="drop", se="model", judge=None, draws=100, min_judgments=1)
        return dict(zip(board.models, np.asarray(board.theta)[:, 0]))
    scores = {str(k): float(v) for k, v in dict(scores).items()}
    missing = sorted((set(a) | set(b)) - set(scores))
    if missing:
        raise ValueError(f"scores: no score for {missing[:5]}")
    return scores


def _holm(pvalues: np.ndarray, alpha: float) -> np.ndarray:
    """Which of ``pvalues`` (NaN: untested) Holm's step-down procedure rejects at level alpha."""
    reject = np.zeros(len(pvalues), bool)
    tested = np.flatnonzero(np.isfinite(pvalues))
    order = tested[np.argsort(pvalues[tested], kind="stable")]
    for rank, k in enumerate(order):
        if pvalues[k] > alpha / (len(order) - rank):
            break
        reject[k] = True
    return reject


def _overlap(a, b, winner, judge, question, judges):
    """(units as lists of oriented codes, per judge (overlapped votes, agreeing pairs, pairs))."""
    per_judge = {g: [0, 0, 0] for g in judges}
    if question is None:
        return [], per_judge
    first = np.minimum(a, b)
    flip = a != first  # orient the winner to the pair in name order
    code = winner.copy()
    code[flip & (winner == 0)], code[flip & (winner == 1)] = 1, 0
    frame = pd.DataFrame({"q": question, "x": first, "y": np.maximum(a, b), "judge": judge, "code": code})
    frame = frame.drop_duplicates(["q", "x", "y", "judge"])  # one vote per judge and battle: the first
    units = []
    for _, group in frame.groupby(["q", "x", "y"], sort=False):
        if len(group) < 2:
            continue
        codes, names = group["code"].to_numpy(), group["judge"].to_numpy()
        units.append(codes)
        for k, g in enumerate(names):
            others = np.delete(codes, k)
            per_judge[g][0] += 1
            per_judge[g][1] += int((others == codes[k]).sum())
            per_judge[g][2] += len(others)
    return units, per_judge


def judge_report(battles, *, scores=None, level: float = 0.95, alpha: float = 0.05, min_decisive: int = 20,
                 draws: int = 1000, seed: int = 0) -> JudgeReport:
    """The judge report of a battle log (module docstring).

    Parameters
    ----------
    battles : str, Path, DataFrame or pyarrow.Table
        The battle log: ``model_a``, ``model_b``, ``winner``, ``judge``, optional ``left`` or
        ``side``, ``seconds`` or ``tstamp``, ``question_id``.
    scores : mapping of model name to logit score, optional
        The fitted scores the judges are tested against; default, a plain Bradley-Terry fit of the
        log's decisive votes (:func:`study.leaderboard.leaderboard`, ``tie_rule="drop"``: the tests
        are about decisive votes; counting ties as half a win would shrink the scores and make
        every honest judge look more decisive than the model).
    level : float
        Coverage of the Wilson and bootstrap intervals.
    alpha : float
        Family-wise level of the flags (Holm over both tests of every tested judge).
    min_decisive : int
        Judges with fewer decisive votes are reported but not tested.
    draws, seed
        Bootstrap draws of alpha's interval and their seed.

    Returns
    -------
    JudgeReport

    Raises
    ------
    LeaderboardInputError
        (a ValueError) A file or frame a report cannot be made from, in one line naming the file,
        row and column.
    """
    if not 0.0 < level < 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError(f"level and alpha must be in (0, 1), got {level!r} and {alpha!r}")
    if int(min_decisive) < 1 or int(draws) < 1:
        raise ValueError("min_decisive and draws must be at least 1")
    frame, source, kind = _frame(battles)
    if frame.empty:
        raise _error(source, "no battle rows")
    a, b, winner, judge, b_left, seconds, question = _decode(frame, source, kind)
    if scores is None and not (winner <= 1).any():  # no decisive vote: nothing to fit, no test
        scores = dict.fromkeys(set(a) | set(b), 0.0)
    score = _scores(a, b, winner, scores)
    s_a, s_b = np.array([score[m] for m in a]), np.array([score[m] for m in b])
    decisive = winner <= 1
    eta = np.where(b_left, s_b - s_a, s_a - s_b)  # the left model's fitted log-odds of winning
    p = special.expit(eta)
    y = (winner == np.where(b_left, 1, 0)).astype(float)  # the left model won
    names = sorted(set(judge))
    units, overlap = _overlap(a, b, winner, judge, question, names)
    rows = []
    for g in names:
        mine = judge == g
        d = mine & decisive
        n_d = int(d.sum())
        resid, var, eta_d = y[d] - p[d], p[d] * (1 - p[d]), eta[d]
        tested = n_d >= min_decisive
        side_z = resid.sum() / math.sqrt(var.sum()) if tested and var.sum() > 0 else math.nan
        info = (var * eta_d ** 2).sum()
        misfit_z = (resid * eta_d).sum() / math.sqrt(info) if tested and info > 0 else math.nan
        lower, upper = wilson(y[d].sum(), n_d, level)
        times = seconds[mine] if seconds is not None else np.array([])
        times = times[np.isfinite(times)]
        side_p, misfit_p = null_pvalues(p[d], eta_d, y[d]) if tested else (math.nan, math.nan)
        side_p = side_p if math.isfinite(side_z) else math.nan  # no variance (every p 0 or 1): no test
        misfit_p = misfit_p if math.isfinite(misfit_z) else math.nan  # every eta 0 (equal scores): no test
        n_over, agree, pairs = overlap[g]
        rows.append({"judge": g, "votes": int(mine.sum()),
                     "median_seconds": float(np.median(times)) if times.size else math.nan,
                     "tie_share": float((winner[mine] == 2).mean()), "bothbad_share": float((winner[mine] == 3).mean()),
                     "decisive": n_d, "left_share": float(y[d].mean()) if n_d else math.nan,
                     "left_lower": float(lower), "left_upper": float(upper),
                     "side_z": side_z, "side_p": side_p,
                     "misfit_z": misfit_z,
                     "misfit_p": misfit_p,
                     "overlapped": n_over, "agree_share": agree / pairs if pairs else math.nan})
    table = pd.DataFrame(rows)
    rejected = _holm(np.concatenate([table["side_p"].to_numpy(float), table["misfit_p"].to_numpy(float)]), alpha)
    side_flag, misfit_flag = rejected[:len(table)], rejected[len(table):]
    table["flagged"] = side_flag | misfit_flag
    table["reason"] = [", ".join(r for r, on in ((("left bias" if z > 0 else "right bias"), s),
                                                  ("disagrees with the model", m)) if on)
                       for z, s, m in zip(table["side_z"], side_flag, misfit_flag)]
    n_d = int(decisive.sum())
    lower, upper = wilson(y[decisive].sum(), n_d, level)
    overall = {"votes": len(a), "decisive": n_d, "left_share": float(y[decisive].mean()) if n_d else math.nan,
               "left_lower": float(lower), "left_upper": float(upper)}
    agreement = _agreement(units, level, int(draws), seed)
    notes = []
    if seconds is None:
        notes.append("no 'seconds' or 'tstamp' column: no times")
    if question is None:
        notes.append("no 'question_id' column: no overlapped battles, no agreement")
    untested = int((table["decisive"] < min_decisive).sum())
    if untested:
        notes.append(f"{untested} judge{'s' if untested != 1 else ''} with fewer than {min_decisive} decisive votes "
                     "not tested")
    if "left" not in frame.columns and "side" not in frame.columns:
        notes.append("no 'left' or 'side' column: model_a taken as the model shown on the left")
    return JudgeReport(judges=table, overall=overall, agreement=agreement, level=level, alpha=alpha, notes=notes)


def null_pvalues(p, eta, y) -> tuple:
    """(side p, misfit p) of the votes ``y`` (1: the left model won) under the null that they are
    independent Bernoulli(``p``) draws (``eta = logit p``).  Side: two-sided, from the number of
    left wins ``S = sum Y``; misfit: one-sided, ``P(sum Y eta <= sum y eta)``.  Both tails by the
    Lugannani-Rice saddlepoint approximation of a sum of weighted Bernoulli variables (the side's
    with a continuity correction: S is whole): its relative error stays small far in the tails,
    where the normal approximation's were too light for Holm's thresholds (0.075 of honest panels
    flagged instead of at most 0.05)."""
    ones = np.ones_like(p)
    s = float(np.sum(y))
    upper = _cdf(s - 0.5, p, ones, upper=True)  # P(S >= s)
    lower = _cdf(s + 0.5, p, ones)  # P(S <= s)
    side = min(1.0, 2.0 * min(upper, lower))
    misfit = _cdf(float(np.sum(y * eta)), p, eta)
    return float(side), float(min(1.0, misfit))


def _cdf(s: float, p: np.ndarray, w: np.ndarray, upper: bool = False) -> float:
    """P(sum w Y <= s) (``upper``: P(sum w Y > s), computed as such, not as 1 minus a number near
    1), Y independent Bernoulli(p): Lugannani-Rice (Butler 2007, Saddlepoint Approximations with
    Applications, sec. 1.2)."""
    lo, hi = float(np.minimum(w, 0).sum()), float(np.maximum(w, 0).sum())
    if s < lo:
        return 1.0 if upper else 0.0
    if s >= hi:
        return 0.0 if upper else 1.0
    logit_p = special.logit(p)
    mean, sd = float(np.sum(w * p)), float(np.sqrt(np.sum(w * w * p * (1 - p))))
    sign = -1.0 if upper else 1.0  # P(S > s) is the lower tail of -S
    if abs(s - mean) < 1e-6 * sd:
        return float(stats.norm.cdf(sign * (s - mean) / sd))

    def slope(t):  # K'(t) - s
        return float(np.sum(w * special.expit(logit_p + t * w))) - s

    bound = 1.0
    while slope(bound) < 0:
        bound *= 2
    low = -1.0
    while slope(low) > 0:
        low *= 2
    from scipy.optimize import brentq
    t = brentq(slope, low, bound, xtol=1e-14, rtol=1e-12)
    K = float(np.sum(np.logaddexp(np.log1p(-p), np.log(p) + t * w)))
    q = special.expit(logit_p + t * w)
    curvature = float(np.sum(w * w * q * (1 - q)))
    r = math.copysign(math.sqrt(max(2.0 * (t * s - K), 0.0)), t)
    u = t * math.sqrt(curvature)
    if abs(r) < 1e-4 or abs(u) < 1e-8:
        return float(stats.norm.cdf(sign * (s - mean) / sd))
    r, u = sign * r, sign * u
    return float(min(1.0, max(0.0, stats.norm.cdf(r) + stats.norm.pdf(r) * (1.0 / r - 1.0 / u))))


def _agreement(units, level, draws, seed) -> dict:
    coincidence = _coincidences(units)
    pairs = sum(len(u) * (len(u) - 1) // 2 for u in units)
    agree = sum(int(sum(c * (c - 1) // 2 for c in np.bincount(u))) for u in units)
    out = {"battles": len(units), "pairs": pairs, "agree_share": agree / pairs if pairs else math.nan,
           "alpha": _alpha_of(coincidence), "lower": math.nan, "upper": math.nan}
    if len(units) >= 2:
        rng = np.random.default_rng(seed)
        boot = np.array([_alpha_of(coincidence[rng.integers(0, len(units), len(units))]) for _ in range(draws)])
        boot = boot[np.isfinite(boot)]
        if boot.size:
            out["lower"], out["upper"] = (float(q) for q in np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]))
    return out


def main(argv=None) -> int:
    """``python -m study.leaderboard judges FILE``: print the judge report (``--json``: as JSON)."""
    import argparse
    import json
    import sys
    p = argparse.ArgumentParser(prog="python -m study.leaderboard judges",
                                description="Per-judge statistics, position bias, agreement and flags of a battle log.")
    p.add_argument("file", metavar="FILE", help="CSV, Parquet, JSON or JSON Lines battle log with a judge column")
    p.add_argument("--level", type=float, default=0.95, help="coverage of the intervals")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise level of the flags (Holm)")
    p.add_argument("--min-decisive", type=int, default=20, help="judges with fewer decisive votes are not tested")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = p.parse_args(argv)
    try:
        report = judge_report(args.file, level=args.level, alpha=args.alpha, min_decisive=args.min_decisive,
                              seed=args.seed)
    except ValueError as exc:
        print(f"study.leaderboard judges: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.to_markdown())
    return 0
