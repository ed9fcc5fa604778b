"""The horizon schedule of a ranker: fixed at T (the paper's), open, or raised on a live store.

The paper's Algorithm 1 is written for a known horizon T: T0 = 0.4 T ends stage 1 (exploration
with probability t^-alpha, the constrained MLE), and T enters stage 2 through the ridge
lambda_t = c_lambda sqrt(t M log T / n) (and the UCB methods' width sqrt(2 log(nT)), ERA's
exploration up to T, the shared uniforms' length).

**Open horizon** (a store created without T, or with ``open_horizon=True``): epochs of doubling
horizon, T_k = T_1 2^(k-1) (T_1 = the stored T; not given: :func:`first_epoch`).  Step t (ask t, told row t) runs
the paper's schedule for the horizon of its epoch, H(t) = the smallest T_k >= t, at the *global*
t, with every told row kept in the likelihood (nothing restarts).  Since the paper's T0 = 0.4 T_k
lies before the epoch's start (0.4 T_k < T_(k-1) for k >= 2), this is: stage 1 once, up to
T0 = 0.4 T_1, then stage 2 for ever, each T-dependent term with the current epoch's horizon.  Up
to T_1 the open schedule *is* fixed-T RB with T = T_1, step for step.

**Raising the horizon** of a store (a larger T on reopening, :meth:`study.online.Ranker.extend_horizon`,
``python -m study.online horizon STORE T``) records (first step, T) in the store's arguments: from
the step after the last ask on, H(t) is the new T (open: its doublings); earlier steps keep theirs,
so no recorded ask or told row changes meaning and ``verify --replay`` follows the record.  T0
stays as stored.
"""
from __future__ import annotations

from ..core import _validate as check

OPTIONAL = {"open_horizon": False, "extended": (), "retired": (), "joined": ()}  # Config fields stored only when not at these defaults


FIRST_EPOCH_MIN = 500  # the paper's horizon in Settings A and B
PER_PARAMETER = 10     # stage-1 comparisons per parameter (a newcomer's rule too: 10 d asks)


def first_epoch(n_items: int, dim: int, M: int) -> int:
    """T_1 of an open horizon created without T: the smallest horizon whose stage 1 (T0 = 0.4 T_1
    asks of M comparisons) holds ``PER_PARAMETER`` comparisons per parameter (n d of them), and
    never below the paper's 500.

    Stage 1 runs once (up to 0.4 T_1), so T_1 is the exploration budget; a larger T_1 only delays
    stage 2 (at T = T_1 / 5 the whole run is stage 1, and R(T) is 1.7-1.8x that of the RB which
    knows T: docs/online.md).  Settings A and B give 500; ten models in d = 10, one comparison an
    ask, give 2,500.

    >>> first_epoch(5, 10, 20), first_epoch(10, 10, 1), first_epoch(30, 10, 1)
    (500, 2500, 7500)
    """
    need = -(-PER_PARAMETER * n_items * dim * 5 // (2 * M))  # ceil(10 n d / (0.4 M))
    return max(FIRST_EPOCH_MIN, need)


def check_open(value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"open_horizon must be True or False, got {value!r}")
    return value


def normal_extended(events, T: int, open_horizon: bool) -> tuple:
    """((first step, horizon), ...) validated: steps increasing from 2, each horizon at least its
    first step and (fixed) larger than the one before."""
    if isinstance(events, (str, bytes)) or not hasattr(events, "__iter__"):
        raise ValueError(f"extended must be a sequence of (first step, T) pairs, got {events!r}")
    out, last_step, last_T = [], 1, T
    for event in events:
        try:
            step, value = event
        except (TypeError, ValueError):
            raise ValueError(f"extended: {event!r} is not a (first step, T) pair") from None
        step = check.integer("extended step", step, low=last_step + 1, high=check.MAX_INTEGER)
        value = check.integer("extended T", value, low=max(step, 1), high=check.MAX_INTEGER)
        if not open_horizon and value <= last_T:
            raise ValueError(f"extended: T = {value} from step {step} does not raise the horizon T = {last_T}")
        out.append((step, value))
        last_step, last_T = step, value
    return tuple(out)


def base(T: int, extended: tuple, step: int) -> int:
    """The horizon recorded last at or before ``step``."""
    value = T
    for first, raised in extended:
        if first > step:
            break
        value = raised
    return value


def current(T: int, extended: tuple) -> int:
    return extended[-1][1] if extended else T


def at(T: int, open_horizon: bool, extended: tuple, step: int) -> int:
    """H(step): the recorded horizon, doubled (open horizon) until it reaches ``step``."""
    value = base(T, extended, step)
    if open_horizon:
        while value < step:
            value *= 2
    return value


__all__ = ["at", "base", "check_open", "current", "normal_extended"]
