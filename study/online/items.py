"""Items added to and retired from a live store.

**Adding** (:func:`add`): the store records (first ask, first told row, item) in its arguments;
the item takes the next index, its name, theta(0) row zero and (with a graph of given edges) an
edge to every item not retired.  The estimator grows at once: rebuilt for n + 1 items with every
told row, the current estimate extended by a zero row (the mean of the centred estimate), nothing
else of the last fit kept (:meth:`study.online.state.LoopState.grow`); the next fits go on from
there, and the item's rows enter the likelihood as they are told.  A replay does the same at the
same row, so ``verify --replay`` and a reopened ranker follow it bit for bit.

The rule by which the policy explores a newcomer: **for its first** :data:`NEWCOMER_ASKS` **asks
(10 d), the newcomer is one side of the pair** -- the major item, against an opponent drawn
uniformly (by the policy's own generator, saved with the ask) from its neighbours that are not
retired; the ask is marked explored.  Several newcomers: the one with the fewest asks first.  10 d
asks give the newcomer's d parameters 10 comparisons each (times M); the width they reach is
measured in docs/online.md ("Adding a model"; ``python -m benchmarks.newcomer``).

**Retiring**: items retired from a live store: never asked again, kept in the likelihood and in the table.

:func:`retire` records (first ask step, item) in the store's arguments (as a raise of the
horizon is recorded, :mod:`study.online.raising`): from the ask after the last one on, the policy
and the check of its choice see the comparison graph without the item (its edges removed), so no
ticket names it; a ticket asked before and told after still counts.  The item's told rows stay in
the likelihood: its score and interval stay in :meth:`study.online.Ranker.ranking` (column
``retired``).  Another process's ranker adopts the retirement at its next transaction;
``verify`` refuses an ask naming an item after its retirement.  Refused: an unknown or retired
item, one that would leave fewer than two items to compare, or a graph whose remaining items are
not connected.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..simulation.graph import check_edges
from .config import Config, normal_retired
from .judges import check_name
from .store import Store

NEWCOMER_ASKS_PER_DIM = 10


def newcomer_asks(config) -> int:
    """How many asks a newcomer is forced into: 10 d."""
    return NEWCOMER_ASKS_PER_DIM * config.dim


def add(ranker, name: str) -> int:
    """Add item ``name`` to ``ranker``'s store (writable) from the next ask on; returns its index."""
    ranker._writable()
    name = check_name(name)

    def operation(conn, state):
        config = ranker.config
        if name in config.labels:
            raise ValueError(f"an item named {name!r} already exists")
        n, step, row = config.n_items, Store.last_ask(conn) + 1, state.applied + 1
        active = [i for i in range(n) if i not in config.retired_at(step)]
        edges = None if config.edges is None else config.edges + tuple((i, n) for i in active)
        raw = {**_plain(config), "n_items": n + 1, "items": list(config.labels) + [name],
               "theta0": [list(r) for r in config.theta0] + [[0.0] * config.dim], "edges": edges,
               "joined": [list(e) for e in config.joined] + [[step, row, n]]}
        new = Config.from_arguments(raw)  # validated as on creation (sizes, the graph)
        state.clean = False
        state.config = new
        state.grow(new.n_at_row(state.applied))
        ranker._write_estimate(conn, state, force_checkpoint=True)  # the estimate row of n + 1 items
        ranker._store_config(conn, new)
        return n

    return ranker._guarded(operation)


def _plain(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def newcomer(config, ledger, state, t: int):
    """(major, other, True) for ask ``t`` when a newcomer has had fewer than :func:`newcomer_asks`
    asks (the module docstring's rule), else None."""
    gone = config.retired_at(t)
    due = []
    for step, _, item in config.joined:
        if item in gone:
            continue
        asked = int(np.count_nonzero((ledger.major[step - 1:ledger.n_asks] == item)
                                     | (ledger.other[step - 1:ledger.n_asks] == item)))
        if asked < newcomer_asks(config):
            due.append((asked, item))
    if not due:
        return None
    item = min(due)[1]
    opponents = state.graphs_at(t)[0].neighbours[item]
    if len(opponents) == 0:
        return None
    return item, int(opponents[int(state.rng.integers(len(opponents)))]), True


def index_of(config, name) -> int:
    """The index of item ``name`` (its name, or its index as a string for a store without names)."""
    labels = config.labels
    if not isinstance(name, str) or name not in labels:
        raise ValueError(f"no item named {name!r} (items: {', '.join(map(str, labels[:10]))}"
                         f"{', ...' if len(labels) > 10 else ''})")
    return labels.index(name)


def retire(ranker, name: str) -> int:
    """Retire item ``name`` of ``ranker``'s store (writable) from the next ask on; returns that ask's index."""
    ranker._writable()
    item = index_of(ranker.config, name)

    def operation(conn, state):
        config = ranker.config
        step = Store.last_ask(conn) + 1
        if item in config.retired_at(step):
            raise ValueError(f"item {name!r} is already retired")
        gone = config.retired_at(step) | {item}
        active = [i for i in range(config.n_items) if i not in gone]
        if len(active) < 2:
            raise ValueError(f"retiring {name!r} would leave {len(active)} item to compare; at least 2 must stay")
        edges = config.active_edges(step)
        edges = edges[(edges[:, 0] != item) & (edges[:, 1] != item)]
        relabel = {old: new for new, old in enumerate(active)}  # connected among the items that stay?
        try:
            check_edges(np.array([[relabel[a], relabel[b]] for a, b in edges.tolist()]).reshape(-1, 2),
                        len(active), connected=True)
        except ValueError:
            raise ValueError(f"retiring {name!r} would leave the items that stay unconnected in the comparison "
                             "graph") from None
        ranker._store_config(conn, dataclasses.replace(config, retired=normal_retired(
            config.retired + ((step, item),), config.n_items)))
        return step

    return ranker._guarded(operation)


def mark(table, config):
    """The ranking table with a ``retired`` column (True for every item retired so far)."""
    gone = {item for _, item in config.retired}
    table["retired"] = [int(i) in gone for i in table["item"]]
    return table


__all__ = ["NEWCOMER_ASKS_PER_DIM", "add", "index_of", "mark", "newcomer", "newcomer_asks", "retire"]
