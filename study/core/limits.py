"""What a replication of a given size costs, so that sizes clearly out of reach are refused before
any work (or any Ray task) starts, with the estimate in the message.

The model follows the core's data structures and solvers (n items, d dimensions, T steps,
p = (n-1)d free parameters, R = min(T, p, ROW_SPACE_MAX_ROWS) row-space rows):

memory (peak, bytes)
    the row store, T (d^2 + 3d + 6) floats (contexts, x x', indices, counts); the environment's
    oracle utilities, T n; the Erdos-Renyi draw over the n(n-1)/2 pairs (indices, uniforms),
    about 24 n^2 bytes; the row-space products and a row-space factor with its explicit inverse,
    about 12 R^2 floats; once T > p the dense reduced Hessian, its factor and inverse, about
    8 p^2 floats; the dual Newton step over the n ball multipliers, 3 n^2 floats.
time (one core, seconds)
    a fixed cost per step (policy, bookkeeping, a few numpy calls per Newton iteration), O(t d)
    per step for the margins, gradients and Hessian-vector products over the stored rows, the
    preconditioner's application (t^2 in the row-space regime, p^2 in the dense one) a few dozen
    times per step, and its rebuilds (t^3 or p^3, once every ~0.1 t or 0.1 p iterations of
    staleness) -- below ``ITERATIVE_MIN_PARAMETERS`` a direct factorisation per Newton step.

The constants were fitted to measured replications (RB, d = 10, M = 50, T0 = 0.4 T, see
docs/benchmarks.md, "Memory and the cost model"); the estimates are meant to be right within a
factor of a few: they only have to tell "minutes" from "days" and "GiB" from "TiB".
"""
from __future__ import annotations

MEMORY_LIMIT_BYTES = 8 * 2 ** 30  # per replication; a laptop's memory
TIME_LIMIT_SECONDS = 24 * 3600.0  # per replication
FLOPS_PER_SECOND = 2e9  # one core: dense LAPACK/BLAS-3 at these sizes (measured 1-5 GFlop/s)
BYTES_PER_SECOND = 4e9  # one core: matrix-vector products, bound by memory traffic
STEP_OVERHEAD_SECONDS = 2e-4  # policy, environment, bookkeeping and the numpy calls of a step
ROW_PASSES_PER_STEP = 20  # passes over the t x d rows per step (gradients, Hessian-vector products)
# preconditioner applications per step (PCG iterations, dual curvature): measured ~25 in stage 1
# before the data identify theta (row space, double), ~8 after (dense inverse, single precision)
ROW_SPACE_APPLICATIONS_PER_STEP = 25
DENSE_APPLICATIONS_PER_STEP = 8
DIRECT_FACTORISATIONS_PER_STEP = 4  # small problems: measured 0.3 (stage 2) to 25 (active balls)


def replication_cost(n_items: int, dim: int, T: int, ci_points: int = 0,
                     draw_graph: bool = True) -> tuple[float, float]:
    """(bytes, seconds): rough peak memory and single-core time of one replication; ``ci_points``
    debiased fits (the CI grid) each assemble and factorise the dense reduced Hessian once the data
    can identify theta (T > p): 4 p^2 floats and p^3 / 3 + p^2 n d flops each; ``draw_graph``: the
    Erdos-Renyi draw's memory (a loop given its graph has none)."""
    from .iterative import ITERATIVE_MIN_PARAMETERS
    from .likelihood import (GEMM_GRADIENT_MAX_ITEMS, GEMM_MARGINS_MAX_ITEMS, REDUCED_DESIGN_MAX_ENTRIES,
                             ROW_SPACE_MAX_ROWS, SPARSE_DESIGN_MIN_ITEMS)

    n, d = float(n_items), float(dim)
    p = (n - 1) * d
    rows = min(float(T), p, ROW_SPACE_MAX_ROWS)
    large = T * p > REDUCED_DESIGN_MAX_ENTRIES  # the per-row arrays of the large problems' BLAS kernels:
    kernels = ((2.0 if large and n <= GEMM_MARGINS_MAX_ITEMS else 0.0)
               + (n if large and n <= GEMM_GRADIENT_MAX_ITEMS else 0.0)
               + (3.0 * d + 0.5 if large and n >= SPARSE_DESIGN_MIN_ITEMS else 0.0))  # the sparse design's
    memory = 8.0 * (T * (d * d + 3 * d + 6 + kernels) + T * n + min(T * p, REDUCED_DESIGN_MAX_ENTRIES)
                    + 12 * rows * rows + 3 * n * n) + (24.0 * n * n if draw_graph else 0.0)
    if T > p:
        memory += 8.0 * 8 * p * p
    debias = ci_points * (p ** 3 / 3 + p * p * n * d) / FLOPS_PER_SECOND if T > p else 0.0
    row_phase = min(float(T), p)  # steps with fewer rows than parameters
    dense_phase = max(0.0, T - p)
    seconds = T * STEP_OVERHEAD_SECONDS + ROW_PASSES_PER_STEP * 8.0 * d * T * T / 2 / BYTES_PER_SECOND
    if p < ITERATIVE_MIN_PARAMETERS:  # a direct factorisation per Newton step
        seconds += DIRECT_FACTORISATIONS_PER_STEP * (
            dense_phase * (p ** 3 / 3 + n * n * d * d) + min(row_phase, p) ** 4 / 12) / FLOPS_PER_SECOND
        return memory, seconds + debias
    # preconditioner applications: t^2 doubles (row space) or p^2 singles (dense) per application
    apply = (8.0 * ROW_SPACE_APPLICATIONS_PER_STEP * min(row_phase, rows) ** 3 / 3
             + 4.0 * DENSE_APPLICATIONS_PER_STEP * dense_phase * p * p)
    # rebuilds: at most one per 0.1 t (0.1 p) steps of staleness: 10 t^2 / 3 flops a step
    rebuild = 10.0 * (min(row_phase, rows) ** 3 / 3 + dense_phase * p * p) + dense_phase * n * n * d * d
    seconds += apply / BYTES_PER_SECOND + rebuild / FLOPS_PER_SECOND
    return memory, seconds + debias


def check_replication_size(n_items: int, dim: int, T: int, ci_points: int = 0) -> None:
    """Raise ValueError when one replication would clearly exceed memory or a day of CPU."""
    memory, seconds = replication_cost(n_items, dim, T, ci_points)
    if memory > MEMORY_LIMIT_BYTES or seconds > TIME_LIMIT_SECONDS:
        grid = f", {ci_points} CI points" if ci_points else ""
        raise ValueError(
            f"n_items={n_items}, dim={dim}, T={T}{grid} is out of reach: one replication would need about "
            f"{memory / 2 ** 30:.3g} GiB of memory and {seconds / 3600:.3g} CPU-hours (limits "
            f"{MEMORY_LIMIT_BYTES / 2 ** 30:g} GiB, {TIME_LIMIT_SECONDS / 3600:g} h); reduce dim, n_items or T"
            + (" (or record CIs less often: ci_every)" if ci_points else ""))


GRAPH_BYTES_PER_EDGE = 640.0  # measured: a ranker of 3,000 items on every pair (4.5 M edges) peaked at 2.9 GB
GRAPH_SECONDS_PER_EDGE = 3e-5  # ... and took 147 s to open: Python loops over the edges (connectivity, the
# neighbour lists, the estimator's edge index), about 20-33 us per edge


def graph_cost(n_items: int, n_edges: int) -> tuple[float, float]:
    """(bytes, seconds) of building a comparison graph held by a loop: the (E, 2) edges with the
    copies their checks make, each item's neighbour array, the estimator's edge index and the n x n
    adjacency of each copy of the graph (the loop's, the policy's and, online, the ledger's)."""
    return GRAPH_BYTES_PER_EDGE * float(n_edges) + 3.0 * float(n_items) ** 2, GRAPH_SECONDS_PER_EDGE * float(n_edges)


def ranker_cost(n_items: int, dim: int, T: int, n_edges: int | None = None) -> tuple[float, float]:
    """(bytes, seconds) of an online ranker over its horizon: the loop's (:func:`replication_cost`),
    its graph (every pair when ``n_edges`` is None) and the per-ask arrays (uniforms, told rows)."""
    n = int(n_items)
    edges = n * (n - 1) // 2 if n_edges is None else int(n_edges)
    memory, seconds = replication_cost(n, dim, T, draw_graph=False)
    graph_memory, graph_seconds = graph_cost(n, edges)
    return memory + graph_memory + 8.0 * T * (dim + 10), seconds + graph_seconds


def check_ranker_size(n_items: int, dim: int, T: int, n_edges: int | None = None) -> None:
    """Raise ValueError, before anything is allocated, when a ranker of these sizes would clearly
    exceed memory or a day of CPU over its horizon (with the estimate)."""
    memory, seconds = ranker_cost(n_items, dim, T, n_edges)
    if memory > MEMORY_LIMIT_BYTES or seconds > TIME_LIMIT_SECONDS:
        graph = "every pair" if n_edges is None else f"{int(n_edges):,} edges"
        raise ValueError(
            f"a ranker of n_items={n_items:,}, dim={dim}, T={T:,} ({graph}) is out of reach: it would need about "
            f"{memory / 2 ** 30:.3g} GiB of memory and {seconds / 3600:.3g} CPU-hours over its horizon (limits "
            f"{MEMORY_LIMIT_BYTES / 2 ** 30:g} GiB, {TIME_LIMIT_SECONDS / 3600:g} h); reduce n_items, dim or T, or "
            "give a sparse comparison graph (edges)")
