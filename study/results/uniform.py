"""Time-uniform coverage of the stored intervals: of the fixed-time CIs and of the confidence
sequences, from the stored Parquet alone (the summary's ``tu_ci``/``tu_cs`` columns and the
``uniform_<S>`` figures).

The time-uniform coverage of coordinate (i, k) is the fraction of replications whose interval of
theta*_ik covers it at *every* grid time from the replication's first CI on (or from ``start``).
Its Monte Carlo SE is the binomial sqrt(p (1 - p) / R) per coordinate; the mean over the n d
coordinates gets the replication-to-replication SD of the per-replication fraction / sqrt(R)
(which accounts for the dependence between one replication's coordinates), as the CP does.
Parts stored before the confidence sequences existed hold nulls in ``cs_*``: there ``tu_cs`` is NaN.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import storage

CELL = ["setting", "method", "M"]
KINDS = (("covered", "ci"), ("cs_covered", "cs"))


def _se(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def per_replication(intervals: pd.DataFrame, start=None) -> pd.DataFrame:
    """One row per (setting, method, M, rep, item, dim): ``ci`` and ``cs`` (bool; NaN where the
    sequence was not recorded), whether the interval covered at every grid time from the first CI
    on (t >= ``start`` if given), and ``looks``, how many grid times that was."""
    df = intervals if start is None else intervals[intervals["t"] >= start]
    keys = CELL + ["rep", "item", "dim"]
    if df.empty:
        return pd.DataFrame(columns=keys + ["ci", "cs", "looks"])
    frame = df[keys].copy()
    frame["ci"] = df["covered"].astype(bool)
    # a null cs_covered (parts stored before the column) is "not recorded", not "not covered"
    cs = df["cs_covered"] if "cs_covered" in df else pd.Series(np.nan, index=df.index)
    frame["cs_known"] = cs.notna()
    frame["cs"] = cs.fillna(True).astype(bool)
    g = frame.groupby(keys, observed=True)
    out = g.agg(ci=("ci", "all"), cs=("cs", "all"), cs_known=("cs_known", "all"), looks=("ci", "size")).reset_index()
    out["cs"] = out["cs"].where(out.pop("cs_known"), np.nan)
    return out


def coordinate_table(per_rep: pd.DataFrame) -> pd.DataFrame:
    """Per coordinate: time-uniform coverage of the CIs and the CSs with binomial SEs, and the
    number of replications."""
    g = per_rep.groupby(CELL + ["item", "dim"], observed=True)
    table = g.agg(reps=("ci", "size"), tu_ci=("ci", "mean"), tu_cs=("cs", "mean")).reset_index()
    for kind in ("ci", "cs"):
        p = table[f"tu_{kind}"].astype(float)
        table[f"tu_{kind}_se"] = np.sqrt(p * (1 - p) / table["reps"])
    return table


def cell_table(per_rep: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, method, M): the mean over coordinates of the time-uniform coverage of both
    intervals, with the replication-clustered Monte Carlo SE, the lowest coordinate's, and reps."""
    per = per_rep.groupby(CELL + ["rep"], observed=True).agg(ci=("ci", "mean"), cs=("cs", "mean")).reset_index()
    table = per.groupby(CELL, observed=True).agg(tu_reps=("rep", "nunique"), tu_ci=("ci", "mean"), tu_ci_se=("ci", _se),
                                                 tu_cs=("cs", "mean"), tu_cs_se=("cs", _se)).reset_index()
    coords = coordinate_table(per_rep).groupby(CELL, observed=True).agg(tu_ci_min=("tu_ci", "min"),
                                                                        tu_cs_min=("tu_cs", "min")).reset_index()
    return table.merge(coords, on=CELL, how="left")


def width_table(intervals: pd.DataFrame, T_of: dict) -> pd.DataFrame:
    """Per (setting, method, M): the median width at t = T of the CIs and of the CSs, and the
    median of their ratio (``T_of`` maps a cell to its T)."""
    if intervals.empty or "cs_upper" not in intervals:
        return pd.DataFrame(columns=CELL + ["ci_width_T", "cs_width_T", "cs_ci_ratio_T"])
    T_row = np.array([T_of.get(k, -1) for k in zip(*(intervals[c] for c in CELL))])
    at_T = intervals[(intervals["t"].to_numpy() == T_row) & intervals["cs_upper"].notna().to_numpy()]
    frame = at_T[CELL].copy()
    frame["ci"] = at_T["upper"] - at_T["lower"]
    frame["cs"] = at_T["cs_upper"].astype(float) - at_T["cs_lower"].astype(float)
    frame["ratio"] = frame["cs"] / frame["ci"]
    return frame.groupby(CELL, observed=True).agg(ci_width_T=("ci", "median"), cs_width_T=("cs", "median"),
                                                  cs_ci_ratio_T=("ratio", "median")).reset_index()


COVERED = ["covered", "cs_covered"]
BOUNDS = ["lower", "upper", "cs_lower", "cs_upper"]


def load_intervals(out, study, columns=COVERED, filter=None) -> pd.DataFrame:
    """The stored intervals with ``columns`` (and the keys), only what the tables need: a large
    study holds millions of rows."""
    return storage.load(out, study, "intervals", columns=list(columns), filter=filter)


def study_uniform(out, study, T_of: dict, start=None) -> pd.DataFrame:
    """The summary's time-uniform columns for one stored study (empty without intervals)."""
    import pyarrow.dataset as ds

    intervals = load_intervals(out, study)
    if intervals.empty:
        return pd.DataFrame(columns=CELL)
    table = cell_table(per_replication(intervals, start))
    horizons = sorted(set(T_of.values()))
    at_T = load_intervals(out, study, BOUNDS, ds.field("t").isin(horizons)) if horizons else intervals.iloc[:0]
    return table.merge(width_table(at_T, T_of), on=CELL, how="left")


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

def uniform_figures(out, study, plt, save, caption, setting_label, directory=None, level=0.95,
                    coordinates=3) -> list:
    """Per (setting, method, M): ``uniform_<S>``: left, the CI and CS bands over t of a few
    coordinates of replication 0 (with the truth); right, the time-uniform coverage of both per
    coordinate, with binomial 2-SE bars, against the nominal level."""
    import pyarrow.dataset as ds

    intervals = load_intervals(out, study)
    directory = Path(directory or Path(out) / "figures")
    paths = []
    if intervals.empty or intervals["cs_covered"].isna().all():
        return paths
    per_rep = per_replication(intervals)
    coords = coordinate_table(per_rep)
    cells = cell_table(per_rep)
    firsts = sorted({int(r) for r in intervals.groupby(CELL, observed=True)["rep"].min()})  # one replication per cell
    shown = load_intervals(out, study, COVERED + BOUNDS + ["estimate", "truth"], ds.field("rep").isin(firsts))
    for (setting, method, M), frame in shown.groupby(CELL, sort=True, observed=True):
        table = coords[(coords.setting == setting) & (coords.method == method) & (coords.M == M)]
        summary = cells[(cells.setting == setting) & (cells.method == method) & (cells.M == M)].iloc[0]
        fig = plt.figure(figsize=(13.5, 2.6 * coordinates + 0.8))
        grid = fig.add_gridspec(coordinates, 2, width_ratios=(1.15, 1.0))
        rep = int(frame["rep"].min())
        one = frame[frame["rep"] == rep]
        shown = _coordinates_to_show(one, coordinates)
        for row, (item, dim) in enumerate(shown):
            ax = fig.add_subplot(grid[row, 0])
            sub = one[(one["item"] == item) & (one["dim"] == dim)].sort_values("t")
            ax.fill_between(sub["t"], sub["cs_lower"], sub["cs_upper"], color="#fdae6b", alpha=0.55, lw=0,
                            label="confidence sequence (anytime)")
            ax.fill_between(sub["t"], sub["lower"], sub["upper"], color="#6baed6", alpha=0.7, lw=0,
                            label="fixed-time CI")
            ax.plot(sub["t"], sub["estimate"], color="k", lw=0.8, label="debiased estimate")
            ax.axhline(float(sub["truth"].iloc[0]), color="#d62728", ls="--", lw=1, label="truth θ*")
            missed = sub[~sub["covered"].astype(bool)]
            ax.scatter(missed["t"], missed["estimate"], s=14, color="#d62728", zorder=3, label="CI misses")
            late = sub[sub["t"] >= sub["t"].min() + (sub["t"].max() - sub["t"].min()) / 5]  # the first looks are wide
            low = min(float(late["cs_lower"].min()), float(sub["truth"].iloc[0]))
            high = max(float(late["cs_upper"].max()), float(sub["truth"].iloc[0]))
            ax.set_ylim(low - 0.15 * (high - low), high + 0.15 * (high - low))
            ax.set_ylabel(f"θ*[{item + 1},{dim + 1}]")
            if row == 0:
                ax.set_title(f"Replication {rep}: both bands over t")
                ax.legend(fontsize=7, loc="upper right", ncol=2)
            if row == coordinates - 1:
                ax.set_xlabel("t")
        ax = fig.add_subplot(grid[:, 1])
        x = np.arange(len(table))
        for kind, color, label in (("ci", "#3182bd", "fixed-time CIs"), ("cs", "#e6550d", "confidence sequences")):
            ax.errorbar(x, table[f"tu_{kind}"], yerr=2 * table[f"tu_{kind}_se"], fmt="o", ms=3, lw=0.8,
                        color=color, label=f"{label}: {summary[f'tu_{kind}']:.3f} ± {summary[f'tu_{kind}_se']:.3f}")
        ax.axhline(level, color="k", ls="--", lw=1, label=f"nominal {level:g}")
        ax.set_ylim(min(0.5, float(table["tu_ci"].min()) - 0.05), 1.01)
        ax.set_xlabel("coordinate (item-major: item 1 dims 1..d, item 2, ...)")
        ax.set_ylabel("time-uniform coverage")
        ax.set_title("Covered at every grid time from the first CI on")
        ax.legend(fontsize=8, loc="lower left")
        reps = int(summary["tu_reps"])
        fig.suptitle(f"Fixed-time CIs and confidence sequences ({level:.0%}): {setting_label(out, study, setting)}, "
                     f"{method}, M={M}, {reps} replications", fontsize=10)
        caption(fig, f"Left: the {level:.0%} CI (blue) and the {level:.0%} confidence sequence (orange, tightest at "
                     f"t = T) of the {coordinates} coordinates of one replication whose CI misses at the most looks, "
                     "on the CI grid (zoomed on its last four fifths); red dots: looks where the CI misses the truth. "
                     f"Right: per coordinate, the fraction of the {reps} replications whose interval covers θ*_ik at "
                     "every grid time from its first CI on (± 2 binomial SE); the legend gives the mean over "
                     "coordinates ± its Monte Carlo SE (replication-clustered). The CI holds at each time; the "
                     "sequence at all times at once.",
                width=170)
        stem = f"uniform_{setting}" + ("" if method == "RB" else f"_{method}")
        paths += save(fig, directory, stem)
        plt.close(fig)
    return paths


def _coordinates_to_show(one: pd.DataFrame, count: int) -> list:
    """The coordinates of one replication whose CI misses most often (the bands differ there), then
    the first ones, ``count`` in all."""
    misses = (~one["covered"].astype(bool)).groupby([one["item"], one["dim"]]).sum().sort_values(ascending=False,
                                                                                               kind="stable")
    chosen = [k for k, v in misses.items() if v > 0][:count]
    for key in misses.sort_index().index:
        if len(chosen) >= count:
            break
        if key not in chosen:
            chosen.append(key)
    return [(int(i), int(k)) for i, k in chosen]
