"""How replications are cut into Ray tasks.  Batching never changes results: a replication's
numbers depend only on its key and seed."""
from __future__ import annotations

import math

from ..policies import ALL_METHODS, make_policy
from ..simulation.replication import shared_prefix, shares_until_phi

MAX_BATCH = 25            # replications per task at most
TARGET_TASK_SECONDS = 2.0  # once replication times are known, tasks are cut to about this long


def choose_batch_size(n_todo: int, n_cpus: int) -> int:
    """About 8 tasks per CPU (load balance) but at most ``MAX_BATCH`` replications per task."""
    return max(1, min(MAX_BATCH, math.ceil(n_todo / max(1, 8 * n_cpus))))


class BatchSize:
    """The size of the next task: fixed if given; otherwise at most the load-balancing size, small
    until replication times are known, then about ``TARGET_TASK_SECONDS`` of work (so an interrupt
    or a lost worker loses little)."""

    def __init__(self, fixed, base):
        self.fixed, self.base = fixed, base
        self.seconds = self.count = 0.0

    def observe(self, seconds, n):
        """Record that ``n`` replications took ``seconds``."""
        self.seconds += seconds
        self.count += n

    def __call__(self) -> int:
        if self.fixed:
            return self.fixed
        if not self.count:
            return min(self.base, 4)
        per_rep = self.seconds / self.count
        return max(1, min(self.base, int(TARGET_TASK_SECONDS / max(per_rep, 1e-6))))


def shares_steps(leader, other) -> bool:
    """Do two policies share a first stretch of steps that one run can compute for both?"""
    return shared_prefix(leader, other) > 0 or shares_until_phi(leader, other)


def cell_groups(plan, shared: bool) -> list:
    """The plan's cells in plan order, as tuples: cells of one (setting, M, overrides) whose methods
    are known to share a prefix of their steps (RB and ERA:
    :func:`study.simulation.replication.shared_prefix`; RB and BT-UCB2, ETA and BT-UCB1 until Phi
    decides a step: :func:`study.simulation.replication.shares_until_phi`) form one group when ``shared``; every
    other cell is a group of one (a user policy's always: its factory is never called in the driver)."""
    if not shared:
        return [(c,) for c in plan.cells]
    groups, placed = [], set()
    for cell in plan.cells:
        if cell in placed:
            continue
        group = [cell]
        if cell.base is None and cell.method in ALL_METHODS:  # a user policy is never built here: a group of one
            setting = cell.resolve()
            leader = make_policy(cell.method, setting)
            for other in plan.cells:
                if (other not in placed and other is not cell and other.base is None and other.method in ALL_METHODS
                        and (other.setting, other.M, other.overrides) == (cell.setting, cell.M, cell.overrides)
                        and shares_steps(leader, make_policy(other.method, setting))):
                    group.append(other)
        placed.update(group)
        groups.append(tuple(group))
    return groups


def batches(plan, done: set, size, shared: bool = False):
    """(cells, [(rep, seed), ...]) for every key of ``plan`` not in ``done``, lazily, grouped by
    cell in plan order (memory independent of ``plan.reps``).  With ``shared`` (the default
    replication function), a replication missing for every cell of a group (:func:`cell_groups`)
    is one work item that runs all of them; a replication missing for only some runs them alone."""
    for group in cell_groups(plan, shared):
        singles = {c: [] for c in group}
        chunk = []
        for rep in range(plan.reps):
            missing = [c for c in group if (c.setting, c.method, c.M, rep) not in done]
            if not missing:
                continue
            item = (rep, plan.seed(group[0].setting, rep))
            if len(missing) == len(group):
                chunk.append(item)
                if len(chunk) * len(group) >= size():
                    yield (group if len(group) > 1 else group[0]), chunk
                    chunk = []
            else:
                for c in missing:
                    singles[c].append(item)
        if chunk:
            yield (group if len(group) > 1 else group[0]), chunk
        for c, items in singles.items():
            for k in range(0, len(items), max(1, size())):
                yield c, items[k:k + max(1, size())]
