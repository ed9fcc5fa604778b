"""The study's sizes: the vote cap of one run and the replications per (arena, method)."""
from __future__ import annotations

from .arenas import check_arena

BUDGETS = {"arena10": 40_000, "arena30": 100_000, "arena30-btl": 100_000, "arena129": 200_000, "llm": 5_000,
           "categories": 40_000, "A": 20_000, "B": 50_000}
QUICK_BUDGETS = {"arena10": 10_000, "arena30": 20_000, "arena30-btl": 20_000, "arena129": 20_000, "llm": 2_000,
                 "categories": 10_000, "A": 5_000, "B": 10_000}
REPS = {name: 20 for name in BUDGETS}
QUICK_REPS = {name: 2 for name in BUDGETS}


def default_budget(arena: str, *, quick: bool = False) -> int:
    """The vote cap of one run of ``arena`` (a multiple of its votes per step)."""
    return (QUICK_BUDGETS if quick else BUDGETS)[check_arena(arena)]


def default_reps(arena: str, *, quick: bool = False) -> int:
    """Replications per (arena, method)."""
    return (QUICK_REPS if quick else REPS)[check_arena(arena)]
