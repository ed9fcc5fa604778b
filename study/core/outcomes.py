"""How the outcomes of comparisons are counted: one convention for every API.

Row k compares item ``i[k]`` with item ``j[k]`` ``m[k]`` times.  Of those comparisons

* ``wins[k]`` were won **outright** by ``j[k]`` (a whole number),
* ``ties[k]`` were ties (a whole number; default none),
* the other ``m[k] - wins[k] - ties[k]`` were won outright by ``i[k]``.

The likelihood (paper eq. ``lik``) counts a tie as half a win for each side: the row's *score*
(how much of it ``j[k]`` won) is ``wins[k] + ties[k] / 2``.  :func:`study.fit_btl`,
:func:`study.debias`, :func:`study.bootstrap`, ``Ranker.tell``/``tell_many`` and judgments files
(``winner`` a/b/tie) all count this way.

Before this convention the core took the score itself in ``wins`` (a tie already counted as half a
win) while ``Ranker.tell`` took outright wins, so arrays built one way failed (or, worse, were read
wrongly) the other.  A call in the old form -- ``wins`` with halves in it, or ``wins + ties > m``
because ``wins`` already holds the ties' halves -- is refused with the conversion:
``wins=wins - ties / 2, ties=ties``.  (A call whose every row has an even number of ties and room
for them cannot be told from the new form by its numbers; the CHANGELOG names the change.)
"""
from __future__ import annotations

import numpy as np

CONVERT = ("wins counts the comparisons j won outright, a whole number, and ties go in ties= (a tie is half a "
           "win for each side); arrays that count a tie as half a win in wins (the form of study 0.1) "
           "convert with wins=wins - ties / 2, ties=ties")


def counted(wins: np.ndarray, m: np.ndarray, ties=None) -> tuple[np.ndarray, np.ndarray]:
    """(wins, ties) as float arrays, checked against validated ``wins`` and ``m`` (one entry per row,
    ``0 <= wins <= m``, m whole): ``ties`` None means none; every count a whole number and
    ``wins + ties <= m``.  ``ValueError`` names the first offending row; a call in the old form
    (module docstring) is told how to convert."""
    if ties is None:
        ties = np.zeros_like(wins)
    else:
        try:
            ties = np.asarray(ties, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("ties must be numeric: how many of each row's m comparisons were ties") from None
        if ties.ndim == 0:
            ties = np.full(wins.shape, float(ties))
        if ties.shape != wins.shape:
            raise ValueError(f"ties must have one entry per row ({wins.size}), got shape {ties.shape}")
        bad = np.flatnonzero(~np.isfinite(ties) | (ties != np.round(ties)) | (ties < 0) | (ties > m))
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"ties[{k}] = {ties[k]} must be a whole number in [0, m = {m[k]:g}]")
    half = np.flatnonzero(wins != np.round(wins))
    if half.size:
        k = int(half[0])
        raise ValueError(f"wins[{k}] = {wins[k]:g} is not a whole number: {CONVERT}")
    over = np.flatnonzero(wins + ties > m)
    if over.size:
        k = int(over[0])
        raise ValueError(f"row {k}: wins + ties = {wins[k]:g} + {ties[k]:g} exceeds m = {m[k]:g}; {CONVERT}")
    return wins, ties


def score(wins: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """How much of each row j won, a tie counting half: what the likelihood takes."""
    return wins + 0.5 * ties
