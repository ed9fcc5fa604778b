"""Intervals a ranker's user may watch, and when to stop: the anytime-valid confidence sequences
(:mod:`study.core.confseq`) and the top-k stopping rule (:mod:`study.core.stopping`) for a
ranker's debiased estimate.

A ranker's sequences are tightest at its horizon, ``tightest_at = T x M`` comparisons (the most
it can be told), unless the caller fixes another number before looking at the data.  Looking
after every tell and stopping at the first look where :func:`decision` says ``decided`` names a
wrong top-k set with probability at most 1 - level (asymptotically; docs/core.md, "Confidence
sequences"); with fixed-time CIs (``anytime=False``) it does not (docs/benchmarks.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.confseq import check_tightest_at, cs_factor, fixed_factor
from ..core.stopping import Separation, separation


@dataclass(frozen=True)
class Decision(Separation):
    """The stopping rule's verdict (:class:`study.core.stopping.Separation`: ``decided``, ``top``,
    ``margin``, ``closest``, ``pair_level``, ``anytime``, the items by index) with the items' names
    and what it was decided on.

    Attributes
    ----------
    top_names : tuple of str
        The names of the candidate top-k set, best first (empty while there are no intervals).
    closest_names : tuple of str
        The names of the pair with the smallest lower bound (empty while there are no intervals).
    level : float
        The level of the rule (each pair's interval is at ``pair_level``).
    judgments : int
        The comparisons told behind the estimate.
    """

    top_names: tuple = ()
    closest_names: tuple = ()
    level: float = 0.95
    judgments: int = 0

    def words(self) -> str:
        """The verdict in one sentence, e.g. "model-a is best at level 0.95 after 812 judgments"."""
        after = f"at level {self.level:g} after {self.judgments:,} judgment{'s' if self.judgments != 1 else ''}"
        if not self.top:
            return f"no intervals yet {after} (tell more outcomes)"
        kind = "confidence sequences" if self.anytime else "fixed-time CIs"
        names = ", ".join(self.top_names)
        best = f"{names} is best" if len(self.top) == 1 else f"{names} are the top {len(self.top)}"
        if self.decided:
            return f"{best} {after} ({kind})"
        i, j = self.closest_names
        lead = f"{names} leads" if len(self.top) == 1 else f"{names} lead"
        return (f"not decided {after}: {lead}; closest pair {i} vs {j} (lower bound {self.margin:.3g}, {kind})")


def named(verdict: Separation, labels, level: float, judgments: int) -> Decision:
    """``verdict`` with the items' names."""
    fields = {name: getattr(verdict, name) for name in Separation.__dataclass_fields__}
    return Decision(**fields, top_names=tuple(str(labels[i]) for i in verdict.top),
                    closest_names=tuple(str(labels[i]) for i in verdict.closest), level=float(level),
                    judgments=int(judgments))


def tightest(config, tightest_at=None) -> float:
    """The comparisons at which the sequences are tightest: ``tightest_at``, or T x M."""
    return check_tightest_at(config.T * config.M if tightest_at is None else tightest_at)


def factor(result, level: float, anytime: bool, tightest_at: float) -> float:
    """The half-width in standard errors: z_{(1+level)/2}, or the sequence's after the result's
    comparisons."""
    if not anytime or not result.available:
        return fixed_factor(level)
    return float(cs_factor(result.comparisons, tightest_at, level))


def decision(result, x, *, level: float, top: int, anytime: bool, tightest_at: float) -> Separation:
    """The stopping rule's verdict (:func:`study.core.stopping.separation`)."""
    return separation(result, x, top=top, level=level, anytime=anytime, tightest_at=tightest_at)


def decision_text(verdict: Separation, labels, *, level: float, top: int, tightest_at: float) -> str:
    """One line for ``show``: decided or not, with the closest pair."""
    kind = (f"{level:.0%} confidence sequences (anytime-valid, tightest after {tightest_at:,.0f} comparisons)"
            if verdict.anytime else f"{level:.0%} fixed-time CIs (valid at one look fixed in advance only)")
    what = "the top item" if top == 1 else f"the top {top}"
    if not verdict.top:
        return f"Stopping rule ({what} separated from the rest by {kind}): not yet (no intervals yet)"
    names = ", ".join(str(labels[i]) for i in verdict.top)
    i, j = verdict.closest
    state = "DECIDED" if verdict.decided else "not yet"
    return (f"Stopping rule ({what} separated from the rest by {kind}, each pair at level "
            f"{verdict.pair_level:.4f}): {state}: {names}; closest pair {labels[i]} vs {labels[j]}, lower bound of "
            f"x'(theta_{labels[i]} - theta_{labels[j]}) = {verdict.margin:.4f}")
