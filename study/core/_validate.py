"""Input checks shared by the public functions.

Every public entry point validates here, once, and raises ``ValueError`` naming the argument and
the allowed range, so that bad input fails before any work (or any Ray task) starts.
"""
from __future__ import annotations

import numbers
import reprlib

import numpy as np

MAX_ABS_CONTEXT = 1e100  # beyond this x x' (and e^{x'theta} for any sizeable theta) overflows


def _shown(value) -> str:
    """``value`` for a message: an integer too long to print in full by its number of digits."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)).bit_length() > 64:
        return f"an integer of about {int(abs(int(value)).bit_length() * 0.30103) + 1} digits"
    return reprlib.repr(value)


def integer(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {_shown(value)}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {_shown(value)}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be an integer <= {high}, got {_shown(value)}")
    return value


def real(name: str, value, *, low=None, high=None, low_open=False, high_open=False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {_shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond the floats
        raise ValueError(f"{name} must be finite, got {_shown(value)}") from None
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    lo_bracket = "(" if low_open else "["
    hi_bracket = ")" if high_open else "]"
    allowed = f"{lo_bracket}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_bracket}"
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must lie in {allowed}, got {value}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must lie in {allowed}, got {value}")
    return value


MAX_INTEGER = 2 ** 63 - 1  # what SQLite and int64 arrays hold


def finite_array(name: str, value, *, ndim: int | None = None, shape=None, dtype=float) -> np.ndarray:
    try:
        raw = np.asarray(value)
        if raw.dtype.kind == "c":
            raise ValueError(f"{name} must be real; it holds complex numbers (their imaginary parts would be "
                             "dropped silently)")
        array = raw.astype(dtype, copy=False)
    except OverflowError:  # a Python integer beyond the floats
        raise ValueError(f"{name} holds a number too large for a float") from None
    except (TypeError, ValueError) as exc:
        if "must be real" in str(exc):
            raise
        raise ValueError(f"{name} must be numeric: {exc}") from None
    except RecursionError:
        raise ValueError(f"{name} must be numeric: nested too deeply") from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {array.shape}")
    if shape is not None:
        for axis, (want, got) in enumerate(zip(shape, array.shape)):
            if want is not None and want != got:
                raise ValueError(f"{name} must have shape {tuple('*' if s is None else s for s in shape)}, "
                                 f"got {array.shape} (axis {axis})")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf")
    return array


def tolerance(name: str, value, *, high: float = 1.0) -> float:
    """A positive, finite tolerance (a threshold of a stopping rule or of a rank test)."""
    return real(name, value, low=0.0, high=high, low_open=True)


def comparisons(i, j, X, wins, m, n_items):
    """Validate a batch of comparison rows; returns (i, j, X, wins, m) as arrays with m per row."""
    n_items = integer("n_items", n_items, low=2, high=MAX_INTEGER)
    try:
        i = np.asarray(i)
        j = np.asarray(j)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"i and j must be 1-d arrays of item indices ({type(exc).__name__})") from None
    if i.ndim != 1 or j.ndim != 1 or i.shape != j.shape:
        raise ValueError(f"i and j must be 1-d arrays of equal length, got shapes {i.shape} and {j.shape}")
    if i.size == 0:
        raise ValueError("at least one comparison row is required (i is empty)")
    for name, idx in (("i", i), ("j", j)):
        if idx.dtype.kind not in "iu":
            if idx.dtype.kind == "f" and np.all(np.isfinite(idx)) and np.all(idx == np.round(idx)):
                pass
            else:
                raise ValueError(f"{name} must hold integer item indices")
        if idx.min() < 0 or idx.max() >= n_items:
            raise ValueError(f"{name} holds item indices outside [0, {n_items - 1}] (n_items={n_items})")
    i = i.astype(np.intp)
    j = j.astype(np.intp)
    same = np.flatnonzero(i == j)
    if same.size:
        raise ValueError(f"i == j at row {same[0]}: an item cannot be compared with itself")
    X = finite_array("X", X, ndim=2, shape=(i.size, None))
    if X.shape[1] < 1:
        raise ValueError("X must have at least one column (d >= 1)")
    largest = float(np.abs(X).max())
    if largest > MAX_ABS_CONTEXT:
        raise ValueError(f"X has entries as large as {largest:.3g}: the margins x'theta and curvatures x x' "
                         f"would overflow; rescale the contexts (|x| <= {MAX_ABS_CONTEXT:g})")
    m_arr = finite_array("m", m)
    if m_arr.ndim == 0:
        m_arr = np.full(i.size, float(m_arr))
    if m_arr.shape != (i.size,):
        raise ValueError(f"m must be a scalar or have one entry per row ({i.size}), got shape {m_arr.shape}")
    if np.any(m_arr < 1) or np.any(m_arr != np.round(m_arr)):
        raise ValueError("m must be a positive integer number of comparisons (m >= 1)")
    wins = finite_array("wins", wins, ndim=1, shape=(i.size,))
    bad = np.flatnonzero((wins < 0) | (wins > m_arr))
    if bad.size:
        raise ValueError(f"wins must lie in [0, m]; row {bad[0]} has wins={wins[bad[0]]} with m={m_arr[bad[0]]}")
    return i, j, X, wins.astype(float), m_arr
