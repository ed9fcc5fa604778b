"""Comparison graphs: Erdos-Renyi G(n, p) redrawn until connected (``graph="connected"``, the
default), redrawn only while some item has no edge (``graph="no_isolated"``), a single raw G(n, p)
draw (``graph="raw"``, redrawn only while it has no edge), or an explicit edge list; and
:class:`ComparisonGraph`, the view of a graph that policies get.

The three protocols read the same stream of draws from the replication's graph seed and keep the
first draw they accept: connected graphs are a subset of graphs without an isolated item, which are
a subset of graphs with an edge.  So a replication whose first accepted draw under a weaker rule
already meets a stronger one gets the same graph under both (the pairing of
``docs/sensitivity.md``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRAPHS = ("connected", "no_isolated", "raw")


def is_connected(edges: np.ndarray, n_items: int) -> bool:
    """Union-find connectivity of an undirected graph on ``n_items`` vertices."""
    parent = list(range(n_items))

    def root(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for a, b in edges:
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[ra] = rb
    return len({root(v) for v in range(n_items)}) == 1


def check_edges(edges, n_items: int, *, connected: bool = True, protocol: str | None = None) -> np.ndarray:
    """Validate an explicit edge list; returns a sorted (E, 2) int array with a < b per row.
    ``connected=False`` accepts a disconnected graph; ``protocol`` (a ``graph`` of :data:`GRAPHS`), when
    given, decides instead: ``"connected"`` requires a connected graph, ``"no_isolated"`` an edge at
    every item, ``"raw"`` nothing more."""
    try:
        arr = np.asarray(edges)
    except (TypeError, ValueError):
        raise ValueError("edges must be a sequence of (i, j) item pairs") from None
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
        raise ValueError(f"edges must have shape (E, 2) with E >= 1, got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError("edges must hold integer item indices")
    if arr.min() < 0 or arr.max() >= n_items:
        raise ValueError(f"edges hold item indices outside [0, {n_items - 1}]")
    if np.any(arr[:, 0] == arr[:, 1]):
        raise ValueError("edges contain a self-loop (i, i)")
    arr = np.unique(np.sort(arr.astype(np.int64), axis=1), axis=0)
    if protocol is not None:
        connected = protocol == "connected"
        if protocol == "no_isolated" and not has_no_isolated_item(arr, n_items):
            isolated = sorted(set(range(n_items)) - set(arr.ravel().tolist()))
            raise ValueError(f"edges leave items {isolated} without an edge, which graph='no_isolated' refuses "
                             "(they could never be compared); add edges or use graph='raw'")
    if connected and not is_connected(arr, n_items):
        raise ValueError("edges do not form a connected graph: cross-component contrasts of theta "
                         "would be unidentified; add edges or draw an Erdos-Renyi graph instead")
    return arr


def has_no_isolated_item(edges: np.ndarray, n_items: int) -> bool:
    """Every item has at least one edge."""
    return bool(np.unique(np.asarray(edges).ravel()).size == n_items)


# what each protocol accepts of a G(n, p) draw (the weakest first)
_ACCEPTS = {
    "raw": lambda edges, n: edges.shape[0] > 0,
    "no_isolated": lambda edges, n: 2 * edges.shape[0] >= n and has_no_isolated_item(edges, n),
    "connected": lambda edges, n: edges.shape[0] >= n - 1 and is_connected(edges, n),
}
_REFUSED = {"raw": "with an edge", "no_isolated": "without an isolated item", "connected": "connected"}


def draw_graph(n_items: int, p: float, rng: np.random.Generator, protocol: str = "connected", *,
               max_draws: int = 10_000):
    """Draw G(n, p) until ``protocol`` accepts the draw (see :data:`GRAPHS`).  Returns ``(edges, draws)``.

    ``"connected"``: redrawn until connected (paper settings are usually disconnected on a single
    draw: P(connected) ~ 0.25 for n=5, p=0.3 and ~ 0.06 for n=10, p=0.15); ``"no_isolated"``: redrawn
    only while some item has no edge, the graph otherwise as drawn (it may have several components);
    ``"raw"``: redrawn only while it has no edge.  Every protocol reads the same draws of ``rng``, so
    the first draw a weaker protocol accepts is kept by a stronger one whenever it qualifies.
    ``draws`` is recorded with each replication.
    """
    if protocol not in _ACCEPTS:
        raise ValueError(f"graph must be one of {GRAPHS}, got {protocol!r}")
    accepts = _ACCEPTS[protocol]
    upper = np.triu_indices(n_items, k=1)
    pairs = np.column_stack(upper).astype(np.int64)
    for draw in range(1, max_draws + 1):
        edges = pairs[rng.random(pairs.shape[0]) < p]
        if accepts(edges, n_items):
            return edges, draw
    raise ValueError(f"no G(n={n_items}, p={p}) graph {_REFUSED[protocol]} in max_graph_draws={max_draws} draws; "
                     "raise p or max_graph_draws, or pass edges explicitly")


def neighbours(edges: np.ndarray, n_items: int) -> list[np.ndarray]:
    """Sorted neighbour arrays per item."""
    nbrs = [[] for _ in range(n_items)]
    for a, b in edges:
        nbrs[int(a)].append(int(b))
        nbrs[int(b)].append(int(a))
    return [np.array(sorted(v), dtype=np.int64) for v in nbrs]


def connection_probability(n_items: int, p: float, draws: int, rng: np.random.Generator) -> float:
    """Monte Carlo P(G(n, p) connected) (used for the README figures)."""
    upper = np.triu_indices(n_items, k=1)
    pairs = np.column_stack(upper)
    hits = sum(is_connected(pairs[rng.random(pairs.shape[0]) < p], n_items) for _ in range(draws))
    return hits / draws


@dataclass(frozen=True, eq=False)
class ComparisonGraph:
    """What a policy sees of the comparison graph.

    ``edges`` (E, 2) int array with a < b per row; ``neighbours[i]`` the sorted neighbours of item
    i; ``adjacency`` (n, n) bool; ``playable`` (n,) bool, True for the items with at least one
    neighbour (all of them in a connected graph); ``connected``.
    """

    n_items: int
    edges: np.ndarray
    neighbours: tuple
    adjacency: np.ndarray
    playable: np.ndarray
    connected: bool

    @classmethod
    def from_edges(cls, edges, n_items: int) -> "ComparisonGraph":
        edges = np.array(edges, dtype=np.int64).reshape(-1, 2)
        adjacency = np.zeros((n_items, n_items), dtype=bool)
        adjacency[edges[:, 0], edges[:, 1]] = adjacency[edges[:, 1], edges[:, 0]] = True
        nbrs = tuple(_read_only_view(a) for a in neighbours(edges, n_items))
        return cls(n_items=int(n_items), edges=_read_only_view(edges), neighbours=nbrs,
                   adjacency=_read_only_view(adjacency), playable=_read_only_view(adjacency.any(axis=1)),
                   connected=bool(is_connected(edges, n_items)))


def _read_only_view(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` that nothing can write: its memory is an immutable ``bytes`` object, so
    neither the array's flag nor its base's can be set back to writeable (a read-only view of a
    writeable array can be written through ``.base``)."""
    array = np.ascontiguousarray(array)
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)
