"""The study's sizes: the vote cap of one run and the replications per (arena, method).

Measured in pilots (``cpu_seconds`` of :func:`study.votes.replay`, every method of
:data:`study.votes.METHODS` on every arena, replication seeds ``SeedSequence(20261129,
spawn_key=(arena index, rep))``; full budgets: two replications, quick budgets: one; on the
shared 2-core machine under a load average of 3-16), CPU seconds per replication of all nine
methods together:

============  ============  ============
arena         full budget   quick budget
============  ============  ============
arena10       11.2          4.8
arena30       23.8          9.0
arena30-btl   30.2          9.7
arena129      97.1          29.2
llm           8.2           7.9
categories    10.0          9.6
A             11.1          10.7
B             11.3          5.5
============  ============  ============

so the full study (:data:`REPS`) needs about 5,000 CPU-s (about 45 minutes on 2 cores) and
``--quick`` (3 replications) about 260 CPU-s.  A run's CPU grows with its steps and, at n = 129,
with the looks' fits; a run that decides every k early stops early.

The budget is also the time at which the confidence sequences are tightest (``tightest_at``),
fixed before any run: a larger budget makes the intervals at small vote counts wider.
"""
from __future__ import annotations

from .arenas import check_arena

BUDGETS = {"arena10": 150_000, "arena30": 200_000, "arena30-btl": 200_000, "arena129": 300_000, "llm": 5_000,
           "categories": 50_000, "A": 20_000, "B": 50_000}
QUICK_BUDGETS = {"arena10": 30_000, "arena30": 50_000, "arena30-btl": 50_000, "arena129": 50_000, "llm": 2_000,
                 "categories": 20_000, "A": 10_000, "B": 20_000}
REPS = {"arena10": 40, "arena30": 30, "arena30-btl": 25, "arena129": 14, "llm": 50, "categories": 40, "A": 40,
        "B": 40}
QUICK_REPS = {name: 3 for name in BUDGETS}


def default_budget(arena: str, *, quick: bool = False) -> int:
    """The vote cap of one run of ``arena`` (a multiple of its votes per step M)."""
    return (QUICK_BUDGETS if quick else BUDGETS)[check_arena(arena)]


def default_reps(arena: str, *, quick: bool = False) -> int:
    """Replications per (arena, method) of the study (``quick``: of ``--quick``)."""
    return (QUICK_REPS if quick else REPS)[check_arena(arena)]
