"""A stand-in votes engine (the contract of ``study.votes``) for the driver's tests: cheap runs whose
numbers are a known function of the seed, so that storage, resume and the table can be checked
without the real engine's cost.  Method ``flaky`` raises on replication 3 while the file
:func:`fail_marker` of the root seed exists (a file, not an environment variable: Ray's workers
were started before the test sets anything)."""
from __future__ import annotations

import os
import tempfile
import numpy as np
import pandas as pd

from study.votes import VotesRun  # the contract's result

ARENAS = {"tiny": "4 items", "small": "6 items"}
METHODS = ("uniform", "fast", "flaky")
TOPS = (1, 2)
LEVEL = 0.95
_ITEMS = {"tiny": 4, "small": 6}


def default_budget(arena, *, quick=False):
    return 400 if quick else 1000


def default_reps(arena, *, quick=False):
    return 3 if quick else 7


def check_arena(name):
    if name not in ARENAS:
        raise ValueError(f"unknown arena {name!r}; allowed: {list(ARENAS)}")
    return name


def check_method(name):
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; allowed: {list(METHODS)}")
    return name


def fail_marker(root_seed) -> str:
    return os.path.join(tempfile.gettempdir(), f"fake_votes_fail_{int(root_seed)}")


def base_votes(seed, budget):
    """The uniform method's votes to decide: a function of the seed alone (common random numbers)."""
    return int(np.random.default_rng(seed).integers(budget // 4, budget + 1))


def replay(arena, method, seed, *, budget, tops=TOPS, level=LEVEL):
    if method == "flaky" and seed.spawn_key[-1] == 3 and os.path.exists(fail_marker(seed.entropy)):
        raise RuntimeError("flaky engine: replication 3 fails")
    n = _ITEMS[arena]
    base = base_votes(seed, budget)
    factor = 1.0 if method == "uniform" else 0.5
    rows, view = [], []
    for k in tops:
        if k >= n:
            continue
        votes = int(base * factor * k)
        decided = votes < budget
        rows.append({"top": k, "decided": decided, "votes": min(votes, budget), "wrong": False,
                     "declared": ",".join(map(str, range(k))) if decided else ""})
        for checkpoint in (budget // 4, budget // 2, budget):
            view.append({"votes": checkpoint, "top": k, "right": bool(decided and votes <= checkpoint)})
    return VotesRun(arena, method, n, budget, budget, 5, 0.001, pd.DataFrame(rows), pd.DataFrame(view))
