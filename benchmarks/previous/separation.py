"""Does the maximum-likelihood estimate exist?  Separable comparisons, and badly scaled contexts.

The unpenalised contextual BTL likelihood (paper eq. ``lik``) has a finite maximiser iff the data
are not *separable*: no direction v of theta (modulo the shifts theta_i + w, which change no
margin) has s_k D_k'v >= 0 on every row won by one side only and D_k'v = 0 on every row with both
outcomes (or ties), with some inequality strict, where D_k = (e_j - e_i) (x) x_k and s_k = +1
when j won all of row k, -1 when i did.  Along such a v the likelihood rises forever (Albert &
Anderson 1984, the logistic-regression case; Konis 2007 decides it with one linear program, as
here).  Rows are scaled to unit length and columns to unit maximum first: separability does not
depend on either, and the linear program is then free of the contexts' scale.

A fit that does not converge on data that are not separable is a conditioning problem, most
often the contexts' scale: :func:`nonconvergence_advice` tells the two apart.
"""
from __future__ import annotations

import numpy as np

SEPARATION_TOL = 1e-7
LP_MAX_NONZEROS = 5_000_000  # beyond this the check is skipped (a dense solve would be out of reach anyway)
LP_SECONDS = 60.0
BADLY_SCALED = 1e8  # a context entry (or a ratio of column scales) beyond this ruins the conditioning


class SeparableData(ValueError):
    """The comparisons are separable: the maximum-likelihood estimate does not exist."""


def _column_scale(X) -> np.ndarray:
    scale = np.abs(X).max(axis=0)
    scale[scale == 0.0] = 1.0
    return scale


def _row_design(i, j, X, n_items: int):
    """D (K x n d, sparse) with row k = (e_j - e_i) (x) x_k, rows and columns scaled."""
    from scipy import sparse

    K, d = X.shape
    Xs = X / _column_scale(X)
    norms = np.linalg.norm(Xs, axis=1) * np.sqrt(2.0)
    norms[norms == 0.0] = 1.0
    Xs = Xs / norms[:, None]
    rows = np.repeat(np.arange(K), 2 * d)
    cols = np.concatenate([j[:, None] * d + np.arange(d), i[:, None] * d + np.arange(d)], axis=1).ravel()
    vals = np.concatenate([Xs, -Xs], axis=1).ravel()
    return sparse.csr_matrix((vals, (rows, cols)), shape=(K, n_items * d))


def separating_direction(i, j, X, wins, m, n_items: int, *, tol: float = SEPARATION_TOL):
    """A direction (n_items, d) along which the likelihood increases forever, or None when the
    MLE exists (or the check is out of reach: more than ``LP_MAX_NONZEROS`` design entries, or
    the linear program does not finish within ``LP_SECONDS``).

    Checked with one linear program: maximise sum_k s_k D_k'v over the box |v| <= 1 subject to
    s_k D_k'v >= 0 (one-sided rows) and D_k'v = 0 (rows with both outcomes)."""
    from scipy.optimize import linprog
    from scipy import sparse

    i, j = np.asarray(i, dtype=np.intp), np.asarray(j, dtype=np.intp)
    X = np.asarray(X, dtype=float).reshape(len(i), -1)  # (K,) contexts are (K, 1)
    wins = np.asarray(wins, dtype=float)
    m = np.broadcast_to(np.asarray(m, dtype=float), wins.shape)
    if 2 * X.size > LP_MAX_NONZEROS:
        return None
    D = _row_design(i, j, X, int(n_items))
    only_j, only_i = wins >= m, wins <= 0
    both = ~(only_j | only_i)
    sign = np.where(only_j, 1.0, np.where(only_i, -1.0, 0.0))
    one_sided = D[~both].multiply(sign[~both][:, None]).tocsr()
    A_ub = -one_sided if one_sided.shape[0] else None
    b_ub = np.zeros(one_sided.shape[0]) if one_sided.shape[0] else None
    A_eq = D[both] if np.any(both) else None
    b_eq = np.zeros(int(both.sum())) if np.any(both) else None
    if one_sided.shape[0] == 0:
        return None  # every row has both outcomes: no inequality can be strict
    c = -np.asarray(sparse.csr_matrix(one_sided).sum(axis=0)).ravel()
    result = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=(-1, 1), method="highs",
                     options={"time_limit": LP_SECONDS})
    if result.status == 0 and -result.fun > tol:  # back from the scaled columns to theta's coordinates
        direction = result.x.reshape(int(n_items), X.shape[1]) / _column_scale(X)
        return direction - direction.mean(axis=0)
    return None


def _certain_items(i, j, wins, m, n_items: int) -> str:
    """" (item 0 won all 784 of its comparisons; ...)" for items that won or lost every comparison."""
    notes = []
    for item in range(int(n_items)):
        as_i, as_j = i == item, j == item
        total = float(m[as_i].sum() + m[as_j].sum())
        if total == 0:
            continue
        won = float((m[as_i] - wins[as_i]).sum() + wins[as_j].sum())
        if won == total:
            notes.append(f"item {item} won all {total:g} of its comparisons")
        elif won == 0:
            notes.append(f"item {item} lost all {total:g} of its comparisons")
    if not notes:
        return ""
    return " (" + "; ".join(notes[:3]) + ("; ..." if len(notes) > 3 else "") + ")"


def refuse_if_separable(i, j, X, wins, m, n_items: int) -> None:
    """:class:`SeparableData` (a ``ValueError``) naming the problem and the remedies when the
    comparisons are separable."""
    direction = separating_direction(i, j, X, wins, m, n_items)
    if direction is None:
        return
    m = np.broadcast_to(np.asarray(m, dtype=float), np.shape(wins))
    raise SeparableData(
        "the maximum-likelihood estimate does not exist: the comparisons are separable (along some direction "
        "of theta every comparison is predicted with certainty, so the likelihood rises without bound)"
        f"{_certain_items(np.asarray(i), np.asarray(j), np.asarray(wins, float), m, n_items)}; "
        "pass ridge=... (a penalised estimate, e.g. ridge=1.0) or radius=... (a bound on every ||theta_i||)")


def nonconvergence_advice(X) -> str:
    """Why a fit of data that are not separable may have missed its stopping rule, and the remedy:
    the contexts' scale when it is extreme, else the conditioning of nearly separable data."""
    X = np.asarray(X, dtype=float)
    scales = np.abs(X).max(axis=0)
    largest = float(scales.max()) if scales.size else 0.0
    positive = scales[scales > 0]
    spread = float(positive.max() / positive.min()) if positive.size else 1.0
    if largest > BADLY_SCALED or (0 < largest < 1.0 / BADLY_SCALED) or spread > BADLY_SCALED:
        return (f"the contexts are badly scaled (entries up to {largest:.3g} in absolute value, column scales "
                f"differing by a factor {spread:.3g}), which ruins the conditioning: the data are not separable, "
                "so rescale X (e.g. divide each column by its standard deviation) rather than adding a penalty")
    return ("the data are not separable but nearly so (or badly conditioned); a ridge (ridge=...) or a radius "
            "(radius=...) stabilises the fit")
