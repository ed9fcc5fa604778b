"""Comparison graphs: Erdos-Renyi G(n, p) redrawn until connected, or an explicit edge list."""
from __future__ import annotations

import numpy as np


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


def check_edges(edges, n_items: int) -> np.ndarray:
    """Validate an explicit edge list; returns a sorted (E, 2) int array with a < b per row."""
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
    if not is_connected(arr, n_items):
        raise ValueError("edges do not form a connected graph: cross-component contrasts of theta "
                         "would be unidentified; add edges or draw an Erdos-Renyi graph instead")
    return arr


def erdos_renyi(n_items: int, p: float, rng: np.random.Generator, *, max_draws: int = 10_000):
    """Draw G(n, p) until it is connected.  Returns ``(edges, draws)``.

    Paper settings are usually disconnected on a single draw (P(connected) ~ 0.25 for n=5, p=0.3
    and ~ 0.06 for n=10, p=0.15), hence the redraw; ``draws`` is recorded with each replication.
    """
    upper = np.triu_indices(n_items, k=1)
    pairs = np.column_stack(upper).astype(np.int64)
    for draw in range(1, max_draws + 1):
        keep = rng.random(pairs.shape[0]) < p
        edges = pairs[keep]
        if edges.shape[0] >= n_items - 1 and is_connected(edges, n_items):
            return edges, draw
    raise ValueError(f"no connected G(n={n_items}, p={p}) graph in max_graph_draws={max_draws} draws; "
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
