"""What the estimators' work was: counters the core adds to while a :func:`counting` block is open.

A replication records its cost with its results (:class:`study.simulation.result.ReplicationResult`
``cost``; the ``costs`` table of a stored study): CPU seconds by estimator regime and these
counts, so that a slow replication can be told apart (many Newton systems? many dual steps? the
work budget reached?) without rerunning it.  Counters, each incremented where the work is done:

``newton_systems``
    Newton systems solved in the inner Newton iterations (a factorisation, or a PCG solve from 300
    parameters) -- the ``newton_steps`` of the fits.
``pcg_iterations``
    conjugate-gradient iterations (one Hessian-vector product and one preconditioner application each).
``factorisations``
    dense or row-space factorisations (below 300 parameters one per Newton system; above, the
    preconditioner's rebuilds).
``dual_steps``, ``active_set_iterations``
    iterations of the two gamma-ball solvers (:mod:`study.core.balls`).
``identification_tests``, ``null_vector_shortcuts``
    dense identification tests of stage 1 (:func:`study.core.mle.identified`), and the tests the
    exact null-vector shortcut settled without one (:meth:`study.core.likelihood.ComparisonData.null_pair`).
``exact_resolves``, ``exact_fallbacks``
    exact opt1 re-solves once active balls identify theta, and those that did not converge (the
    tie-broken point kept, as stated in :mod:`study.core.mle`).
``budget_stops``
    ball solves stopped by their work budget (:data:`study.core.balls.DUAL_BUDGET`).

Outside :func:`counting` an increment costs one context-variable lookup.
"""
from __future__ import annotations

import contextlib
import contextvars

COUNTERS = ("newton_systems", "pcg_iterations", "factorisations", "dual_steps", "active_set_iterations",
            "identification_tests", "null_vector_shortcuts", "exact_resolves", "exact_fallbacks", "budget_stops")

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("study_costs", default=None)


def new() -> dict:
    """A fresh set of counters, every one at zero."""
    return dict.fromkeys(COUNTERS, 0)


def add(name: str, count: int = 1) -> None:
    """Add ``count`` to counter ``name`` of the open :func:`counting` block (if any)."""
    counters = _CURRENT.get()
    if counters is not None:
        counters[name] += count


@contextlib.contextmanager
def counting(counters: dict | None = None):
    """Count the core's work inside the block into ``counters`` (default: :func:`new`); yields them.

    Examples
    --------
    >>> import numpy as np, study
    >>> from study.core import costs
    >>> rng = np.random.default_rng(0)
    >>> i = rng.integers(0, 3, 60); j = (i + 1) % 3; X = rng.normal(1, 0.3, (60, 2))
    >>> with costs.counting() as work:
    ...     theta = study.fit_btl(i, j, X, rng.integers(1, 5, 60), 5, n_items=3, ridge=1.0)
    >>> work["newton_systems"] > 0
    True
    """
    counters = new() if counters is None else counters
    token = _CURRENT.set(counters)
    try:
        yield counters
    finally:
        _CURRENT.reset(token)
