"""Decision margins: how close each discrete decision of a replication came to going the other way.

A replication is a chain of discrete decisions taken on floating-point values -- the item an
argmax picks, whether Psi_t counts as singular, whether stage 1 counts as identified -- and a
different BLAS kernel or SIMD level changes those values in their last bits.  A decision whose
*margin* (the gap between the winning value and the runner-up, or between a statistic and its
threshold, relative to their size) is larger than that cannot go the other way; one whose margin
is a near-tie can, after which the replication follows another path.  Inside :func:`recording`
every such decision notes its margin, with the step it belongs to, so that a comparison of two
runs (``tests/simulation/golden.py``) can tell a behaviour change (a decision with a clear
margin taken differently) from a near-tie decided by rounding.

Outside :func:`recording` the notes cost one context-variable lookup each.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

_LOG: contextvars.ContextVar = contextvars.ContextVar("study_decision_margins", default=None)


class DecisionLog:
    """The decisions noted inside :func:`recording`: ``entries`` is a list of (step, what, margin),
    ``step`` the step set by the replication loop (:func:`at_step`; 0 before the first)."""

    __slots__ = ("entries", "step")

    def __init__(self):
        self.entries: list = []
        self.step = 0

    def margins(self) -> dict:
        """{step: (smallest margin noted at that step, what decided it)}."""
        out: dict = {}
        for step, what, margin in self.entries:
            if step not in out or margin < out[step][0]:
                out[step] = (margin, what)
        return out


@contextlib.contextmanager
def recording():
    """Note every decision's margin taken inside the block; yields the :class:`DecisionLog`.

    Examples
    --------
    >>> import numpy as np
    >>> with recording() as log:
    ...     at_step(1)
    ...     k = argmax("greedy item", np.array([0.3, 0.3 + 1e-12, -1.0]))
    >>> k, log.margins()[1][1]
    (1, 'greedy item')
    >>> bool(log.margins()[1][0] < 1e-11)
    True
    """
    log = DecisionLog()
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


def at_step(t: int) -> None:
    """Mark the decisions noted from now on as step ``t``'s (called by the replication loop)."""
    log = _LOG.get()
    if log is not None:
        log.step = int(t)


def note(what: str, margin: float) -> None:
    """Note a decision and its margin (relative, >= 0; ``inf`` when it could not go another way)."""
    log = _LOG.get()
    if log is not None:
        log.entries.append((log.step, what, float(margin)))


def gap(a: float, b: float) -> float:
    """The margin between two compared values: |a - b| / max(1, |a|, |b|)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(1.0, abs(a), abs(b))


def note_least(what: str, values, limits) -> None:
    """Note the closest of the comparisons ``values[k] > limits[k]`` (elementwise :func:`gap`)."""
    if _LOG.get() is not None:
        a, b = np.asarray(values, dtype=float).ravel(), np.asarray(limits, dtype=float).ravel()
        if a.size:
            note(what, float(np.min(np.abs(a - b) / np.maximum(1.0, np.maximum(np.abs(a), np.abs(b))))))


def argmax(what: str, scores) -> int:
    """``int(np.argmax(scores))`` (ties: the lowest index), noting the margin between the largest
    and the second largest finite score."""
    k = int(np.argmax(scores))
    if _LOG.get() is not None:
        values = np.asarray(scores, dtype=float).ravel()
        finite = values[np.isfinite(values)]
        if finite.size < 2:
            note(what, math.inf)
        else:
            top2 = np.partition(finite, finite.size - 2)[-2:]
            note(what, gap(float(top2[1]), float(top2[0])))
    return k


def threshold(what: str, value: float, limit: float) -> None:
    """Note a test ``value > limit`` of a positive statistic against a positive threshold (a
    reciprocal condition number against its floor): margin |value - limit| / limit."""
    if _LOG.get() is not None:
        note(what, abs(float(value) - limit) / limit if math.isfinite(value) else math.inf)
