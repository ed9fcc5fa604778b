"""The study's sizes: the vote cap of one run and the replications per (arena, method).

Measured (pilot: one replication of every method of :data:`study.votes.METHODS` per arena at the
full budgets, ``python -c`` timing :func:`study.votes.replay`'s ``cpu_seconds`` on the shared
2-core machine; the report of the study's branch gives the numbers): the CPU of a run grows with
its steps and, at n = 129, with the looks' fits.  The full study (every arena x method x
:func:`default_reps`) is sized for about 5,000 CPU-s, ``--quick`` for about 150 CPU-s.

The budget is also the time at which the confidence sequences are tightest (``tightest_at``),
fixed before any run.
"""
from __future__ import annotations

from .arenas import check_arena

BUDGETS = {"arena10": 150_000, "arena30": 200_000, "arena30-btl": 200_000, "arena129": 300_000, "llm": 5_000,
           "categories": 50_000, "A": 20_000, "B": 50_000}
QUICK_BUDGETS = {"arena10": 30_000, "arena30": 50_000, "arena30-btl": 50_000, "arena129": 50_000, "llm": 2_000,
                 "categories": 20_000, "A": 10_000, "B": 20_000}
REPS = {"arena10": 40, "arena30": 30, "arena30-btl": 30, "arena129": 20, "llm": 100, "categories": 40, "A": 40,
        "B": 40}
QUICK_REPS = {name: 4 for name in BUDGETS}


def default_budget(arena: str, *, quick: bool = False) -> int:
    """The vote cap of one run of ``arena`` (a multiple of its votes per step M)."""
    return (QUICK_BUDGETS if quick else BUDGETS)[check_arena(arena)]


def default_reps(arena: str, *, quick: bool = False) -> int:
    """Replications per (arena, method) of the study (``quick``: of ``--quick``)."""
    return (QUICK_REPS if quick else REPS)[check_arena(arena)]
