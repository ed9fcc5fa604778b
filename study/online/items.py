"""Items retired from a live store: never asked again, kept in the likelihood and in the table.

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
from .config import normal_retired
from .store import Store


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


__all__ = ["index_of", "mark", "retire"]
