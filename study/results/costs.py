"""What a stored study's replications cost: their distribution per cell, from the ``costs`` table
(one row per replication, :data:`study.results.schema.COST_SCHEMA`).

``python -m study.results costs OUT [STUDY ...]`` prints it; :func:`cost_summary` returns it as a
DataFrame.  The tail is what plans a run: ``max / median`` says how much longer the slowest
replication of a cell took than its typical one (a task holding it holds the whole job that long).
"""
from __future__ import annotations

import pandas as pd

from .storage import load

REGIME_COLUMNS = ("cpu_tie_break", "cpu_exact_balls", "cpu_identified", "cpu_stage2", "cpu_debias")


def cost_summary(out, study) -> pd.DataFrame:
    """One row per cell (setting, method, M): ``replications`` with a cost record, ``cpu_total``,
    the ``cpu_median``, ``cpu_p90`` and ``cpu_max`` over replications, ``max_over_median``, the
    slowest replication (``slowest_rep``, and its slowest refit: ``slowest_refit_cpu`` at step
    ``slowest_refit_t``), the mean CPU seconds per regime (``REGIME_COLUMNS``) and the totals of
    ``exact_fallbacks`` and ``budget_stops``.  Empty for a study stored before costs were recorded."""
    df = load(out, study, "costs")
    df = df[df["cpu_seconds"].notna()]
    rows = []
    for (setting, method, M), cell in df.groupby(["setting", "method", "M"], sort=True):
        slowest = cell.loc[cell["cpu_seconds"].idxmax()]
        median = float(cell["cpu_seconds"].median())
        row = {"setting": setting, "method": method, "M": int(M), "replications": len(cell),
               "cpu_total": float(cell["cpu_seconds"].sum()), "cpu_median": median,
               "cpu_p90": float(cell["cpu_seconds"].quantile(0.9)), "cpu_max": float(slowest["cpu_seconds"]),
               "max_over_median": float(slowest["cpu_seconds"]) / median if median > 0 else float("nan"),
               "slowest_rep": int(slowest["rep"]), "slowest_refit_cpu": float(slowest["slowest_refit_cpu"]),
               "slowest_refit_t": int(slowest["slowest_refit_t"])}
        row.update({c: float(cell[c].mean()) for c in REGIME_COLUMNS})
        row.update({c: int(cell[c].sum()) for c in ("exact_fallbacks", "budget_stops")})
        rows.append(row)
    return pd.DataFrame(rows)


def format_costs(study: str, summary: pd.DataFrame) -> str:
    """The summary as text, one line per cell."""
    if summary.empty:
        return f"{study}: no cost records (stored before they existed, or no replication yet)"
    lines = [f"{study}: CPU seconds per replication (median, 90th percentile, max; max / median), the slowest "
             "replication and its slowest refit, mean CPU s by regime (stage 1 tie-broken / exact with active "
             "balls / identified, stage 2, debiased fits)"]
    for r in summary.itertuples():
        lines.append(
            f"  {r.setting}/{r.method}/M={r.M}: {r.replications} replications, {r.cpu_total:.0f} CPU s in all; "
            f"median {r.cpu_median:.1f}, p90 {r.cpu_p90:.1f}, max {r.cpu_max:.1f} ({r.max_over_median:.2f}x the median: "
            f"rep {r.slowest_rep}, slowest refit {r.slowest_refit_cpu:.2f} s at t={r.slowest_refit_t}); by regime "
            + " / ".join(f"{getattr(r, c):.1f}" for c in REGIME_COLUMNS)
            + (f"; {r.exact_fallbacks} exact fallbacks" if r.exact_fallbacks else "")
            + (f"; {r.budget_stops} budget stops" if r.budget_stops else ""))
    return "\n".join(lines)
