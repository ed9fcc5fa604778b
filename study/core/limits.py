"""What a replication of a given size costs, so that sizes clearly out of reach are refused before
any work (or any Ray task) starts, with the estimate in the message.

The core keeps, per stored row, x and vec(x x') (the edge Grams need the latter), so memory grows
like T d^2; a refit factorises either the t x t row-space system (t < (n-1)d) or the dense
((n-1)d)^2 reduced Hessian, so time grows like min(t, (n-1)d)^3 per factorisation.  The estimates
below are deliberately rough (a factor of a few): they only have to tell "minutes" from "days".
"""
from __future__ import annotations

MEMORY_LIMIT_BYTES = 8 * 2 ** 30  # per replication; a laptop's memory
TIME_LIMIT_SECONDS = 24 * 3600.0  # per replication
FLOPS_PER_SECOND = 2e9  # one core, dense LAPACK at these sizes (measured 1-5 GFlop/s)
FACTORISATIONS_PER_STEP = 4  # measured 0.3 (stage 2) to 25 (stage 1 with active balls); a typical mean


def replication_cost(n_items: int, dim: int, T: int) -> tuple[float, float]:
    """(bytes, seconds): rough memory and single-core time of one replication."""
    from .likelihood import REDUCED_DESIGN_MAX_ENTRIES, ROW_SPACE_MAX_ROWS

    p = (n_items - 1) * dim
    rows = min(T, p, ROW_SPACE_MAX_ROWS)
    memory = 8.0 * (T * (dim * dim + 2 * dim + 8)          # contexts, x x', indices, counts
                    + min(T * p, REDUCED_DESIGN_MAX_ENTRIES)  # reduced design rows (small problems)
                    + 2 * rows * rows)                     # row-space products
    flops = 0.0
    if T > p:  # the dense reduced Hessian: assembled and factorised at every refit from t = p on
        memory += 8.0 * 4 * p * p
        flops += (T - p) * FACTORISATIONS_PER_STEP * (p ** 3 / 3 + n_items ** 2 * dim ** 2)
    steps = min(T, p)  # the row-space refits: t^3 / 3 at step t
    flops += FACTORISATIONS_PER_STEP * steps ** 4 / 12
    return memory, flops / FLOPS_PER_SECOND


def check_replication_size(n_items: int, dim: int, T: int) -> None:
    """Raise ValueError when one replication would clearly exceed memory or a day of CPU."""
    memory, seconds = replication_cost(n_items, dim, T)
    if memory > MEMORY_LIMIT_BYTES or seconds > TIME_LIMIT_SECONDS:
        raise ValueError(
            f"n_items={n_items}, dim={dim}, T={T} is out of reach: one replication would need about "
            f"{memory / 2 ** 30:.3g} GiB of memory and {seconds / 3600:.3g} CPU-hours (limits "
            f"{MEMORY_LIMIT_BYTES / 2 ** 30:g} GiB, {TIME_LIMIT_SECONDS / 3600:g} h); reduce dim, n_items or T")
